"""The geometric distribution: the trial of the first success, each of probability ``p``."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import const, floats


def logpmf(k: Any, p: Any, loc: Any = 0) -> Any:
    """(k - loc - 1) log(1 - p) + log p; -inf for k - loc <= 0."""
    k, p, loc = floats(k, p, loc)
    x = k - loc
    log_probs = special.xlog1py(x - 1.0, -p) + fnp.log(p)
    return fnp.where(x <= 0, const(-np.inf, log_probs), log_probs)


def pmf(k: Any, p: Any, loc: Any = 0) -> Any:
    return fnp.exp(logpmf(k, p, loc))
