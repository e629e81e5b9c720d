"""Bit operations of ``fungraph.numpy`` (numpy's reference: bit-wise operations and bit
packing): the elementwise ``bitwise_*`` primitives, shifts, ``packbits``/``unpackbits`` and
``bitwise_count``. fungraph has no uint8: ``packbits``, ``unpackbits`` and ``bitwise_count``
return int32 arrays (values 0..255, 0/1 and bit counts) where numpy and JAX return uint8."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.numpy._elementwise import _binary
from fungraph.numpy._util import asarray, int_pair, namespace
from fungraph.primitives import elementwise as ew
from fungraph.primitives.callback import stop_gradient  # noqa: F401  (re-exported)

# --- elementwise ----------------------------------------------------------------------------------


bitwise_and = _binary(ew.and_p)
bitwise_or = _binary(ew.or_p)
bitwise_xor = _binary(ew.xor_p)


def bitwise_not(x: Any) -> Any:
    return ew.not_p.bind(asarray(x))


invert = bitwise_not


# --- shifts ---------------------------------------------------------------------------------------


def left_shift(x1: Any, x2: Any) -> Any:
    """``x1 << x2`` for integers (as multiplication by 2**x2 in the operands' type: the bits
    shifted out are lost, as in C); shifts of the type's width or more give 0."""
    fnp = namespace()
    a, b = int_pair(x1, x2, "left_shift")
    bits = np.dtype(a.dtype).itemsize * 8
    ok = (b >= 0) & (b < bits)
    return fnp.where(ok, a * _pow2(fnp.where(ok, b, 0), a.dtype), 0)


def right_shift(x1: Any, x2: Any) -> Any:
    """``x1 >> x2`` for integers: floor division by 2**x2 (arithmetic for signed types, logical
    for unsigned ones); shifts past the type's width give 0, or -1 for negative values."""
    fnp = namespace()
    a, b = int_pair(x1, x2, "right_shift")
    bits = np.dtype(a.dtype).itemsize * 8
    ok = (b >= 0) & (b < (bits if dtypes.is_unsigned(a.dtype) else bits - 1))
    return fnp.where(ok, a // _pow2(fnp.where(ok, b, 0), a.dtype), fnp.where(a < 0, -1, 0).astype(a.dtype))


def _pow2(n: Any, dtype: Any) -> Any:
    """2**n in ``dtype`` for 0 <= n < its width, by squaring (exact, no float round trip)."""
    fnp = namespace()
    out = fnp.ones(np.shape(n), dtype)
    base = fnp.full(np.shape(n), 2, dtype)
    bits = np.dtype(dtype).itemsize * 8
    for k in range(bits.bit_length()):
        out = fnp.where((n // (1 << k)) % 2 == 1, out * base, out)
        base = base * base
    return out


# --- packing and counting -------------------------------------------------------------------------


def _bit_axis(x: Any, axis: int | None) -> tuple[Any, int]:
    fnp = namespace()
    if axis is None:
        return fnp.ravel(x), 0
    return x, int(axis) % builtins.max(x.ndim, 1)


def _bitorder(bitorder: str, name: str) -> np.ndarray:
    if bitorder not in ("big", "little"):
        raise ValueError(f"{name}: bitorder must be 'big' or 'little', got {bitorder!r}")
    shifts = np.arange(8)
    return shifts[::-1].copy() if bitorder == "big" else shifts


def packbits(a: Any, axis: int | None = None, bitorder: str = "big") -> Any:
    """Each run of 8 truth values along ``axis`` (the flattened array by default; the last run
    padded with zeros) packed into one byte, as int32 values 0..255 (numpy and JAX: uint8)."""
    fnp = namespace()
    x = asarray(a)
    if not (dtypes.is_int(x.dtype) or x.dtype == dtypes.bool_):
        raise TypeError(f"packbits: expected an integer or boolean array, got {x.dtype}")
    weights = (2 ** _bitorder(bitorder, "packbits")).astype(np.int32)
    x, ax = _bit_axis(x, axis)
    bits = fnp.moveaxis((x != 0).astype(np.int32), ax, -1)
    k = bits.shape[-1]
    pad = -k % 8
    bits = fnp.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, pad)])
    bits = fnp.reshape(bits, bits.shape[:-1] + ((k + pad) // 8, 8))
    return fnp.moveaxis(fnp.sum(bits * weights, axis=-1).astype(np.int32), -1, ax)


def unpackbits(a: Any, axis: int | None = None, count: int | None = None, bitorder: str = "big") -> Any:
    """The 8 bits of each byte along ``axis`` (the flattened array by default), as int32 0/1
    values (numpy and JAX: uint8). Integer input is read as bytes: its low 8 bits. ``count``
    keeps that many bits (padding with zeros), or drops ``-count`` from the end."""
    fnp = namespace()
    x = asarray(a)
    if not dtypes.is_int(x.dtype):
        raise TypeError(f"unpackbits: expected an integer array of byte values, got {x.dtype}")
    powers = (2 ** _bitorder(bitorder, "unpackbits")).astype(x.dtype)
    x, ax = _bit_axis(x, axis)
    xm = fnp.moveaxis(x, ax, -1)
    bits = ((xm[..., None] // powers) % 2).astype(np.int32)
    bits = fnp.reshape(bits, bits.shape[:-2] + (bits.shape[-2] * 8,))
    if count is not None:
        total = bits.shape[-1]
        keep = count if count >= 0 else builtins.max(total + count, 0)
        bits = bits[..., :keep] if keep <= total else fnp.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, keep - total)])
    return fnp.moveaxis(bits, -1, ax)


def bitwise_count(x: Any, /) -> Any:
    """The number of 1 bits in ``|x|`` (the two's-complement bits, so the most negative value
    counts 1), as int32 (numpy and JAX: uint8)."""
    from fungraph.lax import population_count

    fnp = namespace()
    v = asarray(x)
    if v.dtype == dtypes.bool_:
        return v.astype(np.int32)
    if not dtypes.is_int(v.dtype):
        raise TypeError(f"bitwise_count: expected an integer array, got {v.dtype}")
    return population_count(fnp.abs(v)).astype(np.int32)
