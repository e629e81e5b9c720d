"""The beta-binomial distribution: ``n`` trials whose probability is Beta(``a``, ``b``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import const, floats


def logpmf(k: Any, n: Any, a: Any, b: Any, loc: Any = 0) -> Any:
    """-inf outside the support, nan for n < 0 or non-positive shapes (as JAX)."""
    k, n, a, b, loc = floats(k, n, a, b, loc)
    y = fnp.floor(k) - loc
    combiln = -(fnp.log1p(n) + special.betaln(n - y + 1.0, y + 1.0))
    beta_lns = special.betaln(y + a, n - y + b) - special.betaln(a, b)
    log_probs = combiln + beta_lns
    log_probs = fnp.where(fnp.logical_and(y == 0, n == 0), const(0, log_probs), log_probs)
    outside = (y < -loc) | (y > n) | (y + a <= 0)
    log_probs = fnp.where(outside, const(-np.inf, log_probs), log_probs)
    invalid = (n < 0) | (a <= 0) | (b <= 0)
    return fnp.where(invalid, const(np.nan, log_probs), log_probs)


def pmf(k: Any, n: Any, a: Any, b: Any, loc: Any = 0) -> Any:
    return fnp.exp(logpmf(k, n, a, b, loc))
