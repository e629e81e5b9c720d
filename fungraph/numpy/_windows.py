"""Window functions of ``fungraph.numpy`` (Bartlett, Blackman, Hamming, Hanning, Kaiser), in
float64 as numpy and JAX give them."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph.numpy._math import i0
from fungraph.numpy._util import namespace


def _window(fn: Any) -> Any:
    def window(M: int) -> np.ndarray:
        return fn(M).astype(np.float64)

    window.__name__ = fn.__name__
    return window


hamming = _window(np.hamming)
hanning = _window(np.hanning)
blackman = _window(np.blackman)
bartlett = _window(np.bartlett)


def kaiser(M: int, beta: float) -> Any:
    """The Kaiser window of ``M`` points."""
    fnp = namespace()
    if M < 1:
        return fnp.zeros((0,), np.float64)
    if M == 1:
        return fnp.ones((1,), np.float64)
    n = np.arange(M, dtype=np.float64)
    alpha = (M - 1) / 2.0
    b = fnp.asarray(beta, np.float64)
    return i0(b * fnp.sqrt(1 - ((n - alpha) / alpha) ** 2)) / i0(b)
