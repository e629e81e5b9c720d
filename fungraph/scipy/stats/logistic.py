"""The logistic distribution."""

from __future__ import annotations

from typing import Any

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import const, floats, standardize


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-2 log(2 cosh(z / 2)) - log(scale)``, written with logaddexp so it does not overflow."""
    x, loc, scale = floats(x, loc, scale)
    half_z = fnp.divide(standardize(x, loc, scale), const(2, x))
    return fnp.subtract(fnp.multiply(const(-2, x), fnp.logaddexp(half_z, fnp.negative(half_z))), fnp.log(scale))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    return special.expit(standardize(x, loc, scale))


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    return special.expit(fnp.negative(standardize(x, loc, scale)))


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = floats(q, loc, scale)
    return fnp.add(fnp.multiply(special.logit(q), scale), loc)


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = floats(q, loc, scale)
    return fnp.add(fnp.multiply(fnp.negative(special.logit(q)), scale), loc)
