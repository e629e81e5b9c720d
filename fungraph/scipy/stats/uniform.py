"""The uniform distribution on [``loc``, ``loc + scale``]."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy.stats._util import const, floats


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    log_probs = fnp.broadcast_to(-fnp.log(scale), fnp.broadcast_shapes(x.shape, loc.shape, scale.shape))
    outside = fnp.logical_or(x > loc + scale, x < loc)
    return fnp.where(outside, const(-np.inf, log_probs), log_probs)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    upper = loc + scale
    conds = [x < loc, x > upper, (x >= loc) & (x <= upper)]
    return fnp.select(conds, [const(0, x), const(1, x), (x - loc) / scale])


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = floats(q, loc, scale)
    val = loc + scale * q
    return fnp.where(fnp.isnan(q) | (q < 0) | (q > 1), const(np.nan, val), val)
