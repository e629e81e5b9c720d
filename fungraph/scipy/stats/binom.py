"""The binomial distribution: successes in ``n`` trials of probability ``p``, shifted by ``loc``."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import const, floats


def logpmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    """log C(n, y) + y log p + (n - y) log(1 - p) with y = k - loc; -inf outside [0, n]."""
    k, n, p, loc = floats(k, n, p, loc)
    y = k - loc
    comb = special.gammaln(n + 1.0) - (special.gammaln(y + 1.0) + special.gammaln(n - y + 1.0))
    linear = special.xlogy(y, p) + special.xlog1py(n - y, -p)
    log_probs = comb + linear
    certain = fnp.logical_or(fnp.logical_and(y == 0, n == 0), linear == 0)
    log_probs = fnp.where(certain, const(0, log_probs), log_probs)
    inside = fnp.logical_and(k >= loc, k < loc + n + 1.0)
    return fnp.where(inside, log_probs, const(-np.inf, log_probs))


def pmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    return fnp.exp(logpmf(k, n, p, loc))
