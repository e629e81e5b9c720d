"""The logistic distribution centred at ``loc`` with scale ``scale``."""

from __future__ import annotations

from typing import Any

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import floats, standardize


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """-2 log(e^{z/2} + e^{-z/2}) - log scale, which does not overflow for large |z|."""
    x, loc, scale = floats(x, loc, scale)
    half_z = standardize(x, loc, scale) / 2.0
    return -2.0 * fnp.logaddexp(half_z, -half_z) - fnp.log(scale)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    return special.expit(standardize(x, loc, scale))


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    return special.expit(-standardize(x, loc, scale))


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = floats(q, loc, scale)
    return special.logit(q) * scale + loc


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = floats(q, loc, scale)
    return -special.logit(q) * scale + loc
