"""The Laplace (double exponential) distribution centred at ``loc`` with scale ``scale``."""

from __future__ import annotations

from typing import Any

from fungraph import numpy as fnp
from fungraph.scipy.stats._util import floats, standardize


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    return -(fnp.abs(x - loc) / scale + fnp.log(2.0 * scale))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    z = standardize(x, loc, scale)
    return fnp.where(z <= 0, 0.5 * fnp.exp(z), 1.0 - 0.5 * fnp.exp(-z))
