"""The gamma distribution with shape ``a``, shifted by ``loc`` and scaled by ``scale``."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import const, floats, standardize


def logpdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, loc, scale = floats(x, a, loc, scale)
    z = standardize(x, loc, scale)
    inside = fnp.greater_equal(z, const(0, z))
    zs = fnp.where(inside, z, const(1, z))  # keeps the unused branch (and its derivative) finite
    val = fnp.subtract(special.xlogy(fnp.subtract(a, const(1, a)), zs), zs)
    val = fnp.subtract(val, fnp.add(special.gammaln(a), fnp.log(scale)))
    return fnp.where(inside, val, const(-np.inf, val))


def pdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, a, loc, scale))


def cdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """Differentiable in x, loc and scale; not in the shape a."""
    x, a, loc, scale = floats(x, a, loc, scale)
    z = standardize(x, loc, scale)
    return special.gammainc(a, fnp.maximum(z, const(0, z)))


def logcdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.log(cdf(x, a, loc, scale))


def sf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, loc, scale = floats(x, a, loc, scale)
    z = standardize(x, loc, scale)
    return special.gammaincc(a, fnp.maximum(z, const(0, z)))


def logsf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.log(sf(x, a, loc, scale))
