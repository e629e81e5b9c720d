"""The von Mises distribution on the circle with concentration ``kappa``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import const, floats


def logpdf(x: Any, kappa: Any) -> Any:
    """kappa (cos x - 1) - log(2 pi i0e(kappa)); nan for kappa <= 0 (as JAX)."""
    x, kappa = floats(x, kappa)
    val = kappa * (fnp.cos(x) - 1.0) - fnp.log(2 * math.pi * special.i0e(kappa))
    return fnp.where(kappa > 0, val, const(np.nan, val))


def pdf(x: Any, kappa: Any) -> Any:
    return fnp.exp(logpdf(x, kappa))
