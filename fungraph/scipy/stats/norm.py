"""The normal distribution N(loc, scale^2)."""

from __future__ import annotations

import math
from typing import Any

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import const, floats, standardize


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    z = standardize(x, loc, scale)
    quad = fnp.multiply(const(-0.5, z), fnp.square(z))
    return fnp.subtract(quad, fnp.add(fnp.log(scale), const(0.5 * math.log(2 * math.pi), z)))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    return special.ndtr(standardize(x, loc, scale))


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    return special.log_ndtr(standardize(x, loc, scale))


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    return special.ndtr(fnp.negative(standardize(x, loc, scale)))


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    return special.log_ndtr(fnp.negative(standardize(x, loc, scale)))


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = floats(q, loc, scale)
    return fnp.add(loc, fnp.multiply(scale, special.ndtri(q)))


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The inverse survival function ppf(1 - q)."""
    q, loc, scale = floats(q, loc, scale)
    return ppf(1.0 - q, loc, scale)
