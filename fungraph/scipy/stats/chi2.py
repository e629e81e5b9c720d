"""The chi-squared distribution with ``df`` degrees of freedom: gamma(df / 2, scale = 2 scale)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fungraph import numpy as fnp
from fungraph.scipy.stats import gamma
from fungraph.scipy.stats._util import const, floats


def _as_gamma(df: Any, scale: Any) -> tuple[Any, Any]:
    return fnp.multiply(const(0.5, df), df), fnp.multiply(const(2, scale), scale)


def _via_gamma(fun: Callable[..., Any], doc: str) -> Callable[..., Any]:
    def f(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
        x, df, loc, scale = floats(x, df, loc, scale)
        a, s = _as_gamma(df, scale)
        return fun(x, a, loc, s)

    f.__name__, f.__doc__ = fun.__name__, doc
    return f


logpdf = _via_gamma(gamma.logpdf, "log density at x.")
cdf = _via_gamma(gamma.cdf, "P(X <= x); differentiable in x, loc and scale, not in df.")
sf = _via_gamma(gamma.sf, "P(X > x); differentiable in x, loc and scale, not in df.")


def pdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, df, loc, scale))


def logcdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.log(cdf(x, df, loc, scale))


def logsf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.log(sf(x, df, loc, scale))
