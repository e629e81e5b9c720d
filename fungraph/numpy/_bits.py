"""Bit operations of ``fungraph.numpy`` (numpy's reference: bit-wise operations and bit
packing): the elementwise ``bitwise_*`` primitives, shifts, ``packbits``/``unpackbits`` and
``bitwise_count``, which return uint8 as JAX's do."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.lax import _bits as lax_bits
from fungraph.numpy._elementwise import _binary
from fungraph.numpy._util import asarray, cast, int_pair, namespace
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
    """``x1 << x2`` for integers (``lax.shift_left`` after numpy's promotion; bools count as
    integers, int32 as in JAX): the bits shifted out are lost, as in C; shifts of the type's width or
    more give 0."""
    return lax_bits.shift_left(*_shift_operands(x1, x2, "left_shift"))


def right_shift(x1: Any, x2: Any) -> Any:
    """``x1 >> x2`` for integers: floor division by 2**x2 (``lax.shift_right_arithmetic`` for
    signed types, ``lax.shift_right_logical`` for unsigned ones, after numpy's promotion); shifts
    past the type's width give 0, or -1 for negative values."""
    a, b = _shift_operands(x1, x2, "right_shift")
    if dtypes.is_unsigned(a.dtype):
        return lax_bits.shift_right_logical(a, b)
    return lax_bits.shift_right_arithmetic(a, b)


def _shift_operands(x1: Any, x2: Any, name: str) -> tuple[Any, Any]:
    a, b = int_pair(x1, x2, name)
    if a.dtype == dtypes.bool_:
        return cast(a, dtypes.int32), cast(b, dtypes.int32)
    return a, b


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
    padded with zeros) packed into one uint8 byte, as JAX's."""
    fnp = namespace()
    x = asarray(a)
    if not (dtypes.is_int(x.dtype) or x.dtype == dtypes.bool_):
        raise TypeError(f"packbits: expected an integer or boolean array, got {x.dtype}")
    weights = (2 ** _bitorder(bitorder, "packbits")).astype(np.uint8)
    x, ax = _bit_axis(x, axis)
    bits = fnp.moveaxis((x != 0).astype(np.uint8), ax, -1)
    k = bits.shape[-1]
    pad = -k % 8
    bits = fnp.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, pad)])
    bits = fnp.reshape(bits, bits.shape[:-1] + ((k + pad) // 8, 8))
    return fnp.moveaxis(fnp.sum(bits * weights, axis=-1, dtype=np.uint8), -1, ax)


def unpackbits(a: Any, axis: int | None = None, count: int | None = None, bitorder: str = "big") -> Any:
    """The 8 bits of each uint8 byte along ``axis`` (the flattened array by default), as uint8
    0/1 values; like JAX's, other input dtypes are a ``TypeError``. ``count`` keeps that many
    bits (padding with zeros), or drops ``-count`` from the end."""
    fnp = namespace()
    x = asarray(a)
    if x.dtype != dtypes.uint8:
        raise TypeError(f"unpackbits: expected an input array of unsigned byte (uint8) data type, got {x.dtype}")
    powers = (2 ** _bitorder(bitorder, "unpackbits")).astype(x.dtype)
    x, ax = _bit_axis(x, axis)
    xm = fnp.moveaxis(x, ax, -1)
    bits = (xm[..., None] // powers) % 2
    bits = fnp.reshape(bits, bits.shape[:-2] + (bits.shape[-2] * 8,))
    if count is not None:
        total = bits.shape[-1]
        keep = count if count >= 0 else builtins.max(total + count, 0)
        bits = bits[..., :keep] if keep <= total else fnp.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, keep - total)])
    return fnp.moveaxis(bits, -1, ax)


def bitwise_count(x: Any, /) -> Any:
    """The number of 1 bits in ``|x|`` (the two's-complement bits, so the most negative value
    counts 1), as uint8 like JAX's."""
    fnp = namespace()
    v = asarray(x)
    if v.dtype == dtypes.bool_:
        return v.astype(np.uint8)
    if not dtypes.is_int(v.dtype):
        raise TypeError(f"bitwise_count: expected an integer array, got {v.dtype}")
    return lax_bits.population_count(fnp.abs(v)).astype(np.uint8)
