"""``jax.lax``'s bit operations: bitwise logic, shifts, population count, leading zeros,
``bitcast_convert_type``, and ``nextafter`` and ``reduce_precision`` on the exact bit patterns."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph.ir import aval_of
from fungraph.lax._elementwise import _binary, _floats, _same_dtype, _unary
from fungraph.numpy._util import asarray, cast
from fungraph.primitives import elementwise as ew

bitwise_and = _binary("bitwise_and", lambda x, y: fnp.bitwise_and(x, y))
bitwise_or = _binary("bitwise_or", lambda x, y: fnp.bitwise_or(x, y))
bitwise_xor = _binary("bitwise_xor", lambda x, y: fnp.bitwise_xor(x, y))
bitwise_not = _unary("bitwise_not", lambda x: fnp.bitwise_not(x))


def _ints(name: str, *xs: Any) -> list[Any]:
    out = _same_dtype(name, *xs)
    if not dtypes.is_int(aval_of(out[0]).dtype):
        raise TypeError(f"lax.{name} needs integer operands, got {', '.join(str(aval_of(x)) for x in out)}")
    return out


def _bits(x: Any) -> int:
    return np.dtype(aval_of(x).dtype).itemsize * 8


def _const(value: int, like: Any) -> np.ndarray:
    return np.asarray(value, aval_of(like).dtype)


def shift_left(x: Any, y: Any) -> Any:
    """``x << y``, wrapping; 0 for shifts outside ``[0, bits)``."""
    a, s = _ints("shift_left", x, y)
    return cast(fnp.left_shift(a, s), aval_of(a).dtype)


def shift_right_arithmetic(x: Any, y: Any) -> Any:
    """``x >> y`` filling with the sign bit; shifts outside ``[0, bits)`` give 0 or -1. An
    unsigned ``x`` with its top bit set is shifted as its complement, complemented back."""
    a, s = _ints("shift_right_arithmetic", x, y)
    dt = aval_of(a).dtype
    if not dtypes.is_unsigned(dt):
        return cast(fnp.right_shift(a, s), dt)
    top_bit = _const(1 << (_bits(a) - 1), a)
    return fnp.where(a >= top_bit, fnp.bitwise_not(fnp.right_shift(fnp.bitwise_not(a), s)), fnp.right_shift(a, s))


def shift_right_logical(x: Any, y: Any) -> Any:
    """``x >> y`` filling with zeros (``x`` read as unsigned); 0 for shifts outside ``[0, bits)``.
    The arithmetic shift of a negative ``x`` is masked to its low ``bits - y`` bits, the mask
    being the largest positive value shifted by ``y - 1`` (no overflow)."""
    a, s = _ints("shift_right_logical", x, y)
    bits = _bits(a)
    top = _const(np.iinfo(aval_of(a).dtype).max, a)
    ok = (s >= 0) & (s < bits)
    s_in = fnp.where(ok, s, 1)
    shifted = cast(fnp.right_shift(a, s_in), aval_of(a).dtype)
    mask = cast(fnp.right_shift(top, s_in - 1), aval_of(a).dtype)
    moved = fnp.where(a < 0, fnp.bitwise_and(shifted, mask), shifted)
    return fnp.where(ok, fnp.where(s == 0, a, moved), _const(0, a))


def population_count(x: Any) -> Any:
    """The number of set bits (of the two's complement pattern): pairs, nibbles, then bytes
    summed in place; the sign bit is counted apart so every shift is of a non-negative value."""
    (a,) = _ints("population_count", x)
    bits = _bits(a)
    top = _const(np.iinfo(aval_of(a).dtype).max, a)
    v = fnp.bitwise_and(a, top)

    def pattern(byte: int) -> np.ndarray:
        return _const(int.from_bytes(bytes([byte]) * (bits // 8), "little") & int(top), a)

    v = v - fnp.bitwise_and(v // 2, pattern(0x55))
    v = fnp.bitwise_and(v, pattern(0x33)) + fnp.bitwise_and(v // 4, pattern(0x33))
    v = fnp.bitwise_and(v + v // 16, pattern(0x0F))
    shift = 8
    while shift < bits:
        v = v + v // _const(2 ** shift, a)
        shift *= 2
    return fnp.bitwise_and(v, _const(0xFF, a)) + cast(a < 0, aval_of(a).dtype)


def clz(x: Any) -> Any:
    """The number of leading zero bits: 0 for negative values, ``bits - bit_length`` otherwise
    (the bit length found by halving the range, as a binary search)."""
    (a,) = _ints("clz", x)
    bits = _bits(a)
    v = fnp.maximum(a, _const(0, a))
    length = fnp.zeros_like(a)
    step = bits // 2
    while step:
        high = v >= _const(2 ** step, a)
        v = fnp.where(high, v // _const(2 ** step, a), v)
        length = length + fnp.where(high, _const(step, a), _const(0, a))
        step //= 2
    length = length + cast(v > 0, aval_of(a).dtype)
    return fnp.where(a < 0, _const(0, a), _const(bits, a) - length)


_INT_OF = {dtypes.float32: dtypes.int32, dtypes.float64: dtypes.int64}


def bitcast_convert_type(operand: Any, new_dtype: Any) -> Any:
    """The bits of ``operand`` read as ``new_dtype``; a narrower type adds a last axis, a wider
    one consumes it (``jax.lax.bitcast_convert_type``)."""
    return ew.bitcast_convert_type(asarray(operand), dtypes.canonicalize(new_dtype))


def nextafter(x1: Any, x2: Any) -> Any:
    """The float after ``x1`` in the direction of ``x2``: one step of the bit pattern (sign and
    magnitude, so stepping the integer up moves away from zero); ``x2`` where they are equal,
    nan where either is, the smallest subnormal of ``x2``'s sign after a zero."""
    a, b = _floats("nextafter", x1, x2)
    dt = aval_of(a).dtype
    bits = bitcast_convert_type(a, _INT_OF[dt])
    one = np.asarray(1, _INT_OF[dt])
    away = (b > a) == (a > 0)
    stepped = bitcast_convert_type(fnp.where(away, bits + one, bits - one), dt)
    tiny = bitcast_convert_type(one, dt)
    from_zero = fnp.where(b > 0, tiny, -tiny)
    out = fnp.where(a == 0, from_zero, stepped)
    out = fnp.where(a == b, b, out)
    return fnp.where(fnp.isnan(a) | fnp.isnan(b), np.asarray(np.nan, dt), out)


def reduce_precision(operand: Any, exponent_bits: int, mantissa_bits: int) -> Any:
    """``operand`` rounded to a float with ``exponent_bits`` and ``mantissa_bits``, as XLA does
    it on the bit pattern: the mantissa rounded to nearest even at its new width, then values
    past the new exponent range replaced by a signed infinity (above) or a signed zero (at or
    below the smallest normal); nan stays nan (even with no mantissa bits left, as in JAX)."""
    (x,) = _floats("reduce_precision", operand)
    dt = aval_of(x).dtype
    it = _INT_OF[dt]
    info = np.finfo(dt)
    src_m, src_e = int(info.nmant), int(info.nexp)
    e_bits, m_bits = int(exponent_bits), int(mantissa_bits)
    if e_bits < 1 or m_bits < 0:
        raise ValueError(f"lax.reduce_precision: exponent_bits >= 1 and mantissa_bits >= 0 needed, got {e_bits}, "
                         f"{m_bits}")
    v = bitcast_convert_type(x, it)
    if m_bits < src_m:
        drop = src_m - m_bits
        last = np.asarray(1 << drop, it)
        odd = fnp.bitwise_and(v, last) // last
        v = fnp.bitwise_and(v + odd + np.asarray((1 << (drop - 1)) - 1, it), ~np.asarray((1 << drop) - 1, it))
    if e_bits < src_e:
        exp_mask = np.asarray(((1 << src_e) - 1) << src_m, it)
        bias, new_bias = (1 << (src_e - 1)) - 1, (1 << (e_bits - 1)) - 1
        exponent = fnp.bitwise_and(v, exp_mask)
        sign = fnp.where(v < 0, np.asarray(np.iinfo(it).min, it), np.asarray(0, it))
        over = exponent > np.asarray((bias + new_bias) << src_m, it)
        under = exponent <= np.asarray((bias - new_bias) << src_m, it)
        v = fnp.where(over, fnp.bitwise_or(sign, exp_mask), fnp.where(under, sign, v))
    return fnp.where(fnp.isnan(x), x, bitcast_convert_type(v, dt))


def reduce_xor(operand: Any, axes: Sequence[int]) -> Any:
    """The bitwise xor of ``operand`` (bool or integer) over ``axes``: each axis folded in
    halves, ``ceil(log2 n)`` whole-array xors."""
    x = asarray(operand)
    a = aval_of(x)
    if dtypes.is_inexact(a.dtype):
        raise TypeError(f"lax.reduce_xor needs a bool or integer operand, got {a}")
    for axis in sorted({int(ax) % builtins.max(len(a.shape), 1) for ax in axes}, reverse=True):
        n = aval_of(x).shape[axis]
        if n == 0:
            x = fnp.zeros(aval_of(x).shape[:axis] + aval_of(x).shape[axis + 1:], a.dtype)
            continue
        lead = (builtins.slice(None),) * axis
        while n > 1:
            half = n // 2
            folded = fnp.bitwise_xor(x[lead + (builtins.slice(0, half),)], x[lead + (builtins.slice(half, 2 * half),)])
            x = fnp.concatenate([folded, x[lead + (builtins.slice(2 * half, n),)]], axis=axis) if n % 2 else folded
            n = half + n % 2
        x = fnp.squeeze(x, axis=axis)
    return x
