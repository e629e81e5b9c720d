"""The uniform distribution on ``[loc, loc + scale]``."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy.stats._util import const, floats


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    log_probs = fnp.negative(fnp.log(scale))
    outside = fnp.logical_or(fnp.greater(x, fnp.add(loc, scale)), fnp.less(x, loc))
    return fnp.where(outside, const(-np.inf, log_probs), log_probs)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    hi = fnp.add(loc, scale)
    return fnp.select([x < loc, x > hi, (x >= loc) & (x <= hi)],
                      [const(0, x), const(1, x), fnp.divide(fnp.subtract(x, loc), scale)])


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = floats(q, loc, scale)
    invalid = fnp.isnan(q) | (q < const(0, q)) | (q > const(1, q))
    return fnp.where(invalid, const(np.nan, q), fnp.add(loc, fnp.multiply(scale, q)))
