"""The negative binomial distribution: failures before the ``n``-th success of probability ``p``."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import const, floats


def logpmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    """log Gamma(y + n) / (Gamma(n) y!) + n log p + y log(1 - p) with y = k - loc; -inf below loc."""
    k, n, p, loc = floats(k, n, p, loc)
    y = k - loc
    comb = special.gammaln(y + n) - special.gammaln(n) - special.gammaln(y + 1.0)
    log_probs = comb + special.xlogy(n, p) + special.xlogy(y, 1.0 - p)
    return fnp.where(k < loc, const(-np.inf, log_probs), log_probs)


def pmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    return fnp.exp(logpmf(k, n, p, loc))
