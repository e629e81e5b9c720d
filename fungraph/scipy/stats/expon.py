"""The exponential distribution with rate 1 / ``scale``, starting at ``loc``."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy.stats._util import const, floats


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    log_probs = -((x - loc) / scale + fnp.log(scale))
    return fnp.where(x < loc, const(-np.inf, log_probs), log_probs)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    neg_z = (loc - x) / scale
    return fnp.where(x < loc, fnp.zeros_like(neg_z), -fnp.expm1(neg_z))


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    neg_z = (loc - x) / scale
    return fnp.where(x < loc, fnp.zeros_like(neg_z), neg_z)


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logsf(x, loc, scale))


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.log1p(-sf(x, loc, scale))


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """loc - scale log(1 - q); nan outside [0, 1]."""
    q, loc, scale = floats(q, loc, scale)
    val = loc - scale * fnp.log1p(-q)
    return fnp.where(fnp.isnan(q) | (q < 0) | (q > 1), const(np.nan, val), val)
