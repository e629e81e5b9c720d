"""The beta distribution with shapes ``a`` and ``b`` on [loc, loc + scale]."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import const, floats, standardize


def logpdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, b, loc, scale = floats(x, a, b, loc, scale)
    z = standardize(x, loc, scale)
    inside = fnp.logical_and(fnp.greater_equal(z, const(0, z)), fnp.less_equal(z, const(1, z)))
    zs = fnp.where(inside, z, const(0.5, z))  # keeps the unused branch (and its derivative) finite
    one = const(1, a)
    val = fnp.add(special.xlogy(fnp.subtract(a, one), zs), special.xlog1py(fnp.subtract(b, one), fnp.negative(zs)))
    val = fnp.subtract(val, fnp.add(special.betaln(a, b), fnp.log(scale)))
    return fnp.where(inside, val, const(-np.inf, val))


def pdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, a, b, loc, scale))


def cdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """Differentiable in x, loc and scale; not in the shapes a and b."""
    x, a, b, loc, scale = floats(x, a, b, loc, scale)
    z = fnp.clip(standardize(x, loc, scale), 0.0, 1.0)
    return special.betainc(a, b, z)


def logcdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.log(cdf(x, a, b, loc, scale))


def sf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, b, loc, scale = floats(x, a, b, loc, scale)
    z = fnp.clip(standardize(x, loc, scale), 0.0, 1.0)
    return special.betainc(b, a, fnp.subtract(const(1, z), z))


def logsf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.log(sf(x, a, b, loc, scale))
