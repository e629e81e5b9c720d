"""The Bernoulli distribution: 1 with probability ``p``, 0 otherwise, shifted by ``loc``."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import const, floats


def logpmf(k: Any, p: Any, loc: Any = 0) -> Any:
    """log p at 1, log(1 - p) at 0, -inf outside [0, 1] (between them the formula, as in JAX)."""
    k, p, loc = floats(k, p, loc)
    x = k - loc
    log_probs = special.xlogy(x, p) + special.xlog1py(1.0 - x, -p)
    outside = fnp.logical_or(x < 0, x > 1)
    return fnp.where(outside, const(-np.inf, log_probs), log_probs)


def pmf(k: Any, p: Any, loc: Any = 0) -> Any:
    return fnp.exp(logpmf(k, p, loc))


def cdf(k: Any, p: Any) -> Any:
    """P(K <= k); nan for nan arguments or p outside [0, 1]."""
    k, p = floats(k, p)
    bad = fnp.isnan(k) | fnp.isnan(p) | (p < 0) | (p > 1)
    below = k < 0
    middle = (k >= 0) & (k < 1)
    return fnp.select([bad, below, middle, k >= 1], [const(np.nan, p), const(0, p), 1.0 - p, const(1, p)])


def ppf(q: Any, p: Any) -> Any:
    """The smallest k in {0, 1} with cdf(k) >= q; nan outside the domain."""
    q, p = floats(q, p)
    bad = fnp.isnan(q) | fnp.isnan(p) | (p < 0) | (p > 1) | (q < 0) | (q > 1)
    return fnp.where(bad, const(np.nan, q), fnp.where(q <= 1.0 - p, const(0, q), const(1, q)))
