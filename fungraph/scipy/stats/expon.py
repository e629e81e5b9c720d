"""The exponential distribution with rate ``1 / scale``, shifted by ``loc``."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy.stats._util import const, floats


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    log_probs = fnp.negative(fnp.add(fnp.divide(fnp.subtract(x, loc), scale), fnp.log(scale)))
    return fnp.where(fnp.less(x, loc), const(-np.inf, log_probs), log_probs)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    neg_scaled = fnp.divide(fnp.subtract(loc, x), scale)
    return fnp.where(fnp.less(x, loc), fnp.zeros_like(neg_scaled), fnp.negative(fnp.expm1(neg_scaled)))


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    neg_scaled = fnp.divide(fnp.subtract(loc, x), scale)
    return fnp.where(fnp.less(x, loc), fnp.zeros_like(neg_scaled), neg_scaled)


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logsf(x, loc, scale))


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.log1p(fnp.negative(sf(x, loc, scale)))


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = floats(q, loc, scale)
    invalid = fnp.isnan(q) | (q < const(0, q)) | (q > const(1, q))
    return fnp.where(invalid, const(np.nan, q), fnp.subtract(loc, fnp.multiply(scale, fnp.log1p(fnp.negative(q)))))
