"""The Pareto distribution with shape ``b``, density b / z^{b+1} for z = (x - loc) / scale >= 1."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy.stats._util import const, floats, standardize


def logpdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, b, loc, scale = floats(x, b, loc, scale)
    z = standardize(x, loc, scale)
    log_probs = -(fnp.log(scale / b) + (b + 1.0) * fnp.log(z))
    return fnp.where(x < loc + scale, const(-np.inf, log_probs), log_probs)


def pdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, b, loc, scale))


def cdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, b, loc, scale = floats(x, b, loc, scale)
    val = 1.0 - fnp.power(standardize(x, loc, scale), -b)
    return fnp.where(x < loc + scale, const(0, val), val)


def logcdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, b, loc, scale = floats(x, b, loc, scale)
    val = fnp.log1p(-fnp.power(standardize(x, loc, scale), -b))
    return fnp.where(x < loc + scale, const(-np.inf, val), val)


def logsf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, b, loc, scale = floats(x, b, loc, scale)
    val = -(b * fnp.log(standardize(x, loc, scale)))
    return fnp.where(x < loc + scale, const(0, val), val)


def sf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logsf(x, b, loc, scale))


def ppf(q: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, b, loc, scale = floats(q, b, loc, scale)
    val = loc + scale * fnp.power(1.0 - q, -(1.0 / b))
    return fnp.where(fnp.isnan(q) | (q < 0) | (q > 1), const(np.nan, val), val)
