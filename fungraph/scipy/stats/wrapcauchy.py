"""The wrapped Cauchy distribution on [0, 2 pi] with concentration ``c`` in (0, 1)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy.stats._util import const, floats


def logpdf(x: Any, c: Any) -> Any:
    """-inf outside [0, 2 pi], nan for c outside (0, 1)."""
    x, c = floats(x, c)
    val = fnp.log(1.0 - c * c) - math.log(2 * math.pi) - fnp.log(1.0 + c * c - 2.0 * c * fnp.cos(x))
    val = fnp.where((x >= 0) & (x <= 2 * math.pi), val, const(-np.inf, val))
    return fnp.where((c > 0) & (c < 1), val, const(np.nan, val))


def pdf(x: Any, c: Any) -> Any:
    return fnp.exp(logpdf(x, c))
