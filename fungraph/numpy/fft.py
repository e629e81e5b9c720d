"""``fungraph.numpy.fft``: numpy's transforms with its ``n``/``s``, ``axes`` and ``norm``
arguments, on the one ``fft`` primitive (so they are differentiable and batched), plus the
frequency grids and the shifts (rolls). ``hfft``/``ihfft`` (Hermitian signals) are ``irfft``/``rfft``
with a conjugate and the opposite norm, as numpy defines them.

Differences from numpy: repeated axes in the n-dimensional transforms are refused; real
transforms (``rfft*``, ``ihfft``) of complex input raise instead of discarding the imaginary part;
no ``out`` argument."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.array import hosted
from fungraph.numpy._manip import roll
from fungraph.numpy._util import asarray, cast, normalize_axes
from fungraph.primitives import elementwise as ew
from fungraph.primitives.fft import fft as fft_prim
from fungraph.primitives.shape import pad, slice_, transpose

__all__ = ["fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifft2", "ifftn", "ifftshift", "ihfft",
           "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq", "rfftn"]

_NORMS = (None, "backward", "ortho", "forward")
# The norm that scales the opposite direction the same way (numpy's hfft/ihfft).
_SWAPPED_NORM = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def _freq_grid(ticks: np.ndarray, n: int, d: Any, dtype: Any) -> Any:
    """``ticks / (d * n)`` computed in ``dtype`` (the mode's default float unless given), as JAX's."""
    dt = dtypes.default_float() if dtype is None else dtypes.canonicalize(dtype)
    return hosted(ticks.astype(dt) / np.asarray(d * n, dt))


def fftfreq(n: int, d: float = 1.0, *, dtype: Any = None, device: Any = None) -> Any:
    """The sample frequencies of an ``n``-point transform with spacing ``d``."""
    n = int(n)
    return _freq_grid(np.fft.fftfreq(n) * n, n, d, dtype)


def rfftfreq(n: int, d: float = 1.0, *, dtype: Any = None, device: Any = None) -> Any:
    """The non-negative sample frequencies of an ``n``-point real transform with spacing ``d``."""
    n = int(n)
    return _freq_grid(np.arange(n // 2 + 1), n, d, dtype)


def _shift(x: Any, axes: Any, sign: int) -> Any:
    x = asarray(x)
    axes = normalize_axes(axes, x.ndim, "fftshift")
    return roll(x, [sign * (x.shape[a] // 2) for a in axes], axes) if axes else x


def fftshift(x: Any, axes: Any = None) -> Any:
    return _shift(x, axes, 1)


def ifftshift(x: Any, axes: Any = None) -> Any:
    return _shift(x, axes, -1)


# --- the transforms ---------------------------------------------------------------------------


def _axes_and_lengths(x: Any, s: Any, axes: Any, name: str) -> tuple[tuple[int, ...], list[int | None]]:
    """numpy's rules: ``axes`` defaults to the last ``len(s)`` axes (all axes without ``s``)."""
    if axes is None:
        axes = tuple(range(x.ndim - len(s), x.ndim)) if s is not None else tuple(range(x.ndim))
    elif isinstance(axes, int):
        axes = (axes,)
    if s is not None and len(s) != len(axes):
        raise ValueError(f"{name}: shape {tuple(s)} and axes {tuple(axes)} have different lengths")
    axes = normalize_axes(tuple(axes), x.ndim, name)
    if not axes:
        raise ValueError(f"{name}: no axes to transform")
    lengths = [None] * len(axes) if s is None else [int(n) for n in s]
    for n in lengths:
        if n is not None and n < 1:
            raise ValueError(f"{name}: invalid number of data points ({n}) specified")
    return axes, lengths


def _fit(x: Any, axis: int, n: int) -> Any:
    """Crop or zero-pad ``x`` along ``axis`` to length ``n`` (numpy's ``n``/``s``)."""
    size = x.shape[axis]
    if n < size:
        return slice_(x, (0,) * x.ndim, x.shape[:axis] + (n,) + x.shape[axis + 1:], None)
    if n > size:
        cfg = [(0, 0, 0)] * x.ndim
        cfg[axis] = (0, n - size, 0)
        return pad(x, np.zeros((), x.dtype), cfg)
    return x


def _to_end(x: Any, axes: tuple[int, ...]) -> tuple[Any, tuple[int, ...]]:
    perm = tuple(i for i in range(x.ndim) if i not in axes) + axes
    return transpose(x, perm), tuple(int(i) for i in np.argsort(perm))


def _check_norm(norm: Any, name: str) -> None:
    if not isinstance(norm, (str, type(None))) or norm not in _NORMS:
        raise ValueError(f"{name}: invalid norm {norm!r}; use one of 'backward', 'ortho', 'forward'")


def _swap_norm(norm: Any, name: str) -> str:
    _check_norm(norm, name)
    return _SWAPPED_NORM[norm]


def _scale(out: Any, norm: str | None, n: int, inverse: bool, name: str) -> Any:
    """numpy's norm: the primitive's forward is unscaled and its inverse divides by n."""
    _check_norm(norm, name)
    if norm in (None, "backward"):
        return out
    factor = math.sqrt(n) if norm == "ortho" else float(n)
    factor = factor if inverse else 1.0 / factor
    return ew.mul(out, np.asarray(factor, out.dtype))


def _complex_input(a: Any) -> Any:
    x = asarray(a)
    return cast(x, dtypes.complex_for(dtypes.float_dtype_for(x.dtype)))


def _c2c(a: Any, s: Any, axes: Any, norm: str | None, inverse: bool, name: str) -> Any:
    x = _complex_input(a)
    axes, lengths = _axes_and_lengths(x, s, axes, name)
    for ax, n in zip(axes, lengths):
        x = _fit(x, ax, n if n is not None else x.shape[ax])
    moved, back = _to_end(x, axes)
    fft_lengths = tuple(x.shape[ax] for ax in axes)
    out = fft_prim(moved, "IFFT" if inverse else "FFT", fft_lengths)
    return _scale(transpose(out, back), norm, int(np.prod(fft_lengths)), inverse, name)


def _real_input(a: Any, name: str) -> Any:
    x = asarray(a)
    if dtypes.is_complex(x.dtype):
        raise TypeError(f"{name} needs real input, got dtype {x.dtype} (use fft for complex input)")
    return cast(x, dtypes.float_dtype_for(x.dtype))


def _r2c(a: Any, s: Any, axes: Any, norm: str | None, name: str) -> Any:
    x = _real_input(a, name)
    axes, lengths = _axes_and_lengths(x, s, axes, name)
    for ax, n in zip(axes, lengths):
        x = _fit(x, ax, n if n is not None else x.shape[ax])
    moved, back = _to_end(x, axes)
    fft_lengths = tuple(x.shape[ax] for ax in axes)
    out = fft_prim(moved, "RFFT", fft_lengths)
    return _scale(transpose(out, back), norm, int(np.prod(fft_lengths)), False, name)


def _c2r(a: Any, s: Any, axes: Any, norm: str | None, name: str) -> Any:
    x = _complex_input(a)
    axes, lengths = _axes_and_lengths(x, s, axes, name)
    last = axes[-1]
    if lengths[-1] is None:
        lengths[-1] = 2 * (x.shape[last] - 1)
        if lengths[-1] < 1:
            raise ValueError(f"{name}: invalid number of data points ({lengths[-1]}) specified")
    for ax, n in zip(axes[:-1], lengths[:-1]):
        x = _fit(x, ax, n if n is not None else x.shape[ax])
    x = _fit(x, last, lengths[-1] // 2 + 1)
    moved, back = _to_end(x, axes)
    fft_lengths = tuple(x.shape[ax] for ax in axes[:-1]) + (lengths[-1],)
    out = fft_prim(moved, "IRFFT", fft_lengths)
    return _scale(transpose(out, back), norm, int(np.prod(fft_lengths)), True, name)


def _one_axis(n: int | None, axis: int) -> tuple[Sequence[int] | None, tuple[int]]:
    return (None if n is None else (n,)), (axis,)


def fft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    return _c2c(a, *_one_axis(n, axis), norm, False, "fft")


def ifft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    return _c2c(a, *_one_axis(n, axis), norm, True, "ifft")


def fftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    return _c2c(a, s, axes, norm, False, "fftn")


def ifftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    return _c2c(a, s, axes, norm, True, "ifftn")


def fft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    return _c2c(a, s, axes, norm, False, "fft2")


def ifft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    return _c2c(a, s, axes, norm, True, "ifft2")


def rfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    return _r2c(a, *_one_axis(n, axis), norm, "rfft")


def irfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    return _c2r(a, *_one_axis(n, axis), norm, "irfft")


def hfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The real spectrum of a signal with Hermitian symmetry given by its first half ``a``:
    ``irfft(conj(a), n, axis)`` with the opposite norm, so ``norm=None`` leaves it unscaled.
    ``n`` defaults to ``2 * (a.shape[axis] - 1)``."""
    return _c2r(ew.conj(_complex_input(a)), *_one_axis(n, axis), _swap_norm(norm, "hfft"), "hfft")


def ihfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The inverse of ``hfft`` for real ``a``: ``conj(rfft(a, n, axis))`` with the opposite norm, so
    ``norm=None`` divides by ``n`` (the first ``n // 2 + 1`` terms of ``ifft(a, n, axis)``)."""
    return ew.conj(_r2c(a, *_one_axis(n, axis), _swap_norm(norm, "ihfft"), "ihfft"))


def rfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    return _r2c(a, s, axes, norm, "rfftn")


def irfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    return _c2r(a, s, axes, norm, "irfftn")


def rfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    return _r2c(a, s, axes, norm, "rfft2")


def irfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    return _c2r(a, s, axes, norm, "irfft2")
