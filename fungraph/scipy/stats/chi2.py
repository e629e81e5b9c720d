"""The chi-squared distribution with ``df`` degrees of freedom: gamma(df / 2, scale = 2 scale)."""

from __future__ import annotations

from typing import Any

from fungraph import numpy as fnp
from fungraph.scipy.stats import gamma
from fungraph.scipy.stats._util import const, floats


def _as_gamma(df: Any, scale: Any) -> tuple[Any, Any]:
    return fnp.multiply(const(0.5, df), df), fnp.multiply(const(2, scale), scale)


def logpdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, df, loc, scale = floats(x, df, loc, scale)
    a, s = _as_gamma(df, scale)
    return gamma.logpdf(x, a, loc, s)


def pdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, df, loc, scale))


def cdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """Differentiable in x, loc and scale; not in df."""
    x, df, loc, scale = floats(x, df, loc, scale)
    a, s = _as_gamma(df, scale)
    return gamma.cdf(x, a, loc, s)


def logcdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.log(cdf(x, df, loc, scale))


def sf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, df, loc, scale = floats(x, df, loc, scale)
    a, s = _as_gamma(df, scale)
    return gamma.sf(x, a, loc, s)
