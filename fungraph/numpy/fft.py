"""``fungraph.numpy.fft``: the real-valued helpers only.

fungraph has no complex dtypes (bool, int32, int64, float32, float64), so the transforms
themselves (``fft``, ``ifft``, ``rfft``, ...) are not provided; the frequency grids and the
shifts, which are real, are (the shifts are rolls, so differentiable and batched)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph.numpy._manip import roll
from fungraph.numpy._util import asarray, normalize_axes

__all__ = ["fftfreq", "fftshift", "ifftshift", "rfftfreq"]


def fftfreq(n: int, d: float = 1.0) -> np.ndarray:
    return np.fft.fftfreq(int(n), d).astype(np.float64)


def rfftfreq(n: int, d: float = 1.0) -> np.ndarray:
    return np.fft.rfftfreq(int(n), d).astype(np.float64)


def _shift(x: Any, axes: Any, sign: int) -> Any:
    x = asarray(x)
    axes = normalize_axes(axes, x.ndim, "fftshift")
    return roll(x, [sign * (x.shape[a] // 2) for a in axes], axes) if axes else x


def fftshift(x: Any, axes: Any = None) -> Any:
    return _shift(x, axes, 1)


def ifftshift(x: Any, axes: Any = None) -> Any:
    return _shift(x, axes, -1)
