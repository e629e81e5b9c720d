"""The Bernoulli distribution: 1 with probability ``p``, else 0, shifted by ``loc``."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import const, floats


def logpmf(k: Any, p: Any, loc: Any = 0) -> Any:
    """``k log p + (1 - k) log(1 - p)`` for ``k - loc`` in [0, 1], else -inf; differentiable in p."""
    k, p, loc = floats(k, p, loc)
    x = fnp.subtract(k, loc)
    log_probs = fnp.add(special.xlogy(x, p), special.xlog1py(fnp.subtract(const(1, x), x), fnp.negative(p)))
    outside = fnp.logical_or(fnp.less(x, const(0, x)), fnp.greater(x, const(1, x)))
    return fnp.where(outside, const(-np.inf, log_probs), log_probs)


def pmf(k: Any, p: Any, loc: Any = 0) -> Any:
    return fnp.exp(logpmf(k, p, loc))


def cdf(k: Any, p: Any) -> Any:
    """P(K <= k): 0 below 0, 1 - p on [0, 1), 1 from 1 on; nan for a p outside [0, 1]."""
    k, p = floats(k, p)
    zero, one = const(0, k), const(1, k)
    invalid = fnp.isnan(k) | fnp.isnan(p) | (p < zero) | (p > one)
    return fnp.select([invalid, k < zero, (k >= zero) & (k < one), k >= one], [const(np.nan, k), zero, one - p, one])


def ppf(q: Any, p: Any) -> Any:
    """The least k with P(K <= k) >= q; nan outside the domain."""
    q, p = floats(q, p)
    zero, one = const(0, q), const(1, q)
    invalid = fnp.isnan(q) | fnp.isnan(p) | (p < zero) | (p > one) | (q < zero) | (q > one)
    return fnp.where(invalid, const(np.nan, q), fnp.where(q <= one - p, zero, one))
