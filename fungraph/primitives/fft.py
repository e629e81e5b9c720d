"""``fft``: discrete Fourier transforms over the trailing axes, one primitive with four kinds
(as ``jax.lax.fft``). ``fft_lengths`` are the transformed (real-space) lengths of the last
``len(fft_lengths)`` axes; numpy's conventions: ``FFT`` is unnormalised, ``IFFT`` divides by
the number of points, ``RFFT`` keeps the ``n // 2 + 1`` non-negative frequencies of the last
axis, ``IRFFT`` reads such a half spectrum as Hermitian.

Every kind is linear. Transposes use the pairing ``Re(sum(ct * t))`` (no conjugation, as in
JAX): the DFT matrix is symmetric, so ``FFT^T = FFT`` and ``IFFT^T = IFFT``; ``RFFT^T`` zero-pads
the half spectrum and takes the real part of a full ``FFT``; ``IRFFT^T ct = w * conj(RFFT(ct)) / N``
where ``w`` counts each kept frequency with its Hermitian partner (2, except 1 for the zero
frequency and, for even lengths, the Nyquist one)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Primitive, ShapeError
from fungraph.ir import ShapedArray
from fungraph.primitives import elementwise as ew
from fungraph.primitives._batching import to_front
from fungraph.primitives._rules import aval, lit
from fungraph.primitives.shape import pad

FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")


def _fft_aval(x: ShapedArray, *, fft_type: str, fft_lengths: tuple[int, ...]) -> ShapedArray:
    d = len(fft_lengths)
    if fft_type not in FFT_TYPES:
        raise ShapeError(f"fft: fft_type must be one of {FFT_TYPES}, got {fft_type!r}")
    if not 1 <= d <= x.ndim or any(n < 1 for n in fft_lengths):
        raise ShapeError(f"fft: fft_lengths {fft_lengths} do not fit the trailing axes of {x}")
    real_in = fft_type == "RFFT"
    if real_in and not dtypes.is_float(x.dtype) or not real_in and not dtypes.is_complex(x.dtype):
        want = "a floating-point" if real_in else "a complex"
        raise ShapeError(f"fft: {fft_type} needs {want} operand, got {x}")
    lead, trail = x.shape[:-d], x.shape[-d:]
    half = fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
    expected = half if fft_type == "IRFFT" else fft_lengths
    if trail != expected:
        raise ShapeError(f"fft: {fft_type} with fft_lengths {fft_lengths} needs trailing axes {expected}, got {x}")
    if fft_type == "RFFT":
        return ShapedArray(lead + half, dtypes.complex_for(x.dtype))
    if fft_type == "IRFFT":
        return ShapedArray(lead + fft_lengths, dtypes.real_for(x.dtype))
    return x


def _fft_impl(x: Any, *, fft_type: str, fft_lengths: tuple[int, ...]) -> np.ndarray:
    x = np.asarray(x)
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    if fft_type == "FFT":
        out, dtype = np.fft.fftn(x, axes=axes), x.dtype
    elif fft_type == "IFFT":
        out, dtype = np.fft.ifftn(x, axes=axes), x.dtype
    elif fft_type == "RFFT":
        out, dtype = np.fft.rfftn(x, axes=axes), dtypes.complex_for(x.dtype)
    else:
        out, dtype = np.fft.irfftn(x, s=fft_lengths, axes=axes), dtypes.real_for(x.dtype)
    return np.asarray(out, dtype)


fft_p = Primitive("fft", impl=_fft_impl, abstract_eval=_fft_aval, arity=1)


def fft(x: Any, fft_type: str, fft_lengths: tuple[int, ...]) -> Any:
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=tuple(int(n) for n in fft_lengths))


@fft_p.def_jvp
def _fft_jvp(primals: tuple, tangents: tuple, *, fft_type: str, fft_lengths: tuple[int, ...]) -> tuple:
    return fft(primals[0], fft_type, fft_lengths), fft(tangents[0], fft_type, fft_lengths)


def _hermitian_weights(n: int, dtype: np.dtype) -> np.ndarray:
    """How many frequencies of a length-``n`` real signal each of the ``n // 2 + 1`` kept ones stands for."""
    w = np.full(n // 2 + 1, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return w.astype(dtype)


@fft_p.def_transpose
def _fft_transpose(ct: Any, x: Any, *, fft_type: str, fft_lengths: tuple[int, ...]) -> tuple:
    if fft_type in ("FFT", "IFFT"):
        return (fft(ct, fft_type, fft_lengths),)                        # the DFT matrix is symmetric
    n = fft_lengths[-1]
    if fft_type == "RFFT":
        ca = aval(ct)
        cfg = [(0, 0, 0)] * (ca.ndim - 1) + [(0, n - ca.shape[-1], 0)]
        full = pad(ct, lit(0, ca.dtype), cfg)                           # the dropped frequencies get no cotangent
        return (ew.real(fft(full, "FFT", fft_lengths)),)
    cdt = dtypes.complex_for(aval(ct).dtype)
    total = int(np.prod(fft_lengths, dtype=np.int64))
    scale = (_hermitian_weights(n, np.float64) / total).astype(cdt)
    return (ew.mul(ew.conj(fft(ct, "RFFT", fft_lengths)), scale),)


@fft_p.def_batch
def _fft_batch(args: Any, dims: Any, *, fft_type: str, fft_lengths: tuple[int, ...]) -> tuple[Any, int]:
    return fft(to_front(args[0], dims[0]), fft_type, fft_lengths), 0
