"""The normal distribution N(loc, scale^2) truncated to standardised bounds [``a``, ``b``].

The normalising mass Phi(b) - Phi(a) is computed in log space from whichever tail avoids
cancellation, as in JAX and SciPy, so far tails keep their precision."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats import norm
from fungraph.scipy.stats._util import const, floats, standardize


def _log_diff(x: Any, y: Any) -> Any:
    """log(e^x - e^y) for x >= y."""
    return special.logsumexp(fnp.stack([x, y]), b=fnp.stack([fnp.ones_like(x), -fnp.ones_like(y)]), axis=0)


def _log_gauss_mass(a: Any, b: Any) -> Any:
    """log(Phi(b) - Phi(a)) for a <= b."""
    a, b = fnp.broadcast_arrays(a, b)
    left = b <= 0
    right = a > 0
    central = ~(left | right)
    a_tail = fnp.where(right, -b, a)
    b_tail = fnp.where(right, -a, b)
    mass_tail = _log_diff(special.log_ndtr(b_tail), special.log_ndtr(a_tail))
    mass_central = fnp.log1p(-special.ndtr(a) - special.ndtr(-b))
    return fnp.where(central, mass_central, mass_tail)


def logpdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """-inf outside [a, b] (standardised), nan where a >= b."""
    x, a, b, loc, scale = floats(x, a, b, loc, scale)
    val = norm.logpdf(x, loc, scale) - _log_gauss_mass(a, b)
    z = standardize(x, loc, scale)
    val = fnp.where((z < a) | (z > b), const(-np.inf, val), val)
    return fnp.where(a >= b, const(np.nan, val), val)


def pdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, a, b, loc, scale))


def logcdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, b, loc, scale = floats(x, a, b, loc, scale)
    x, a, b = fnp.broadcast_arrays(x, a, b)
    z = standardize(x, loc, scale)
    mass = _log_gauss_mass(a, b)
    lower = _log_gauss_mass(a, z) - mass
    upper = _log_gauss_mass(z, b) - mass
    val = fnp.select([z >= b, z <= a, lower > -0.1, z > a],
                     [fnp.zeros_like(lower), fnp.full_like(lower, -np.inf), fnp.log1p(-fnp.exp(upper)), lower])
    return fnp.where(a >= b, const(np.nan, val), val)


def cdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logcdf(x, a, b, loc, scale))


def logsf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, b, loc, scale = floats(x, a, b, loc, scale)
    return logcdf(-x, -b, -a, -loc, scale)


def sf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logsf(x, a, b, loc, scale))
