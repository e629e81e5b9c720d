"""The Laplace (double exponential) distribution."""

from __future__ import annotations

from typing import Any

from fungraph import numpy as fnp
from fungraph.scipy.stats._util import const, floats, standardize


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    linear = fnp.divide(fnp.abs(fnp.subtract(x, loc)), scale)
    return fnp.negative(fnp.add(linear, fnp.log(fnp.multiply(const(2, x), scale))))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    z = standardize(x, loc, scale)
    half = const(0.5, z)
    return fnp.where(z <= const(0, z), half * fnp.exp(z), const(1, z) - half * fnp.exp(fnp.negative(z)))
