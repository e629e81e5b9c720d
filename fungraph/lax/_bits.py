"""``jax.lax``'s bit operations: bitwise logic, shifts, population count, leading zeros,
``bitcast_convert_type``, ``mulhi``, and ``nextafter`` and ``reduce_precision`` on the exact bit patterns.
Each binds the elementwise primitives; ``fungraph.numpy``'s shifts are these."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.array import hosted
from fungraph.ir import aval_of
from fungraph.lax._elementwise import _binary, _floats, _same_dtype, _unary
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh
from fungraph.primitives.operands import asarray, cast

bitwise_and = _binary("bitwise_and", ew.and_p.bind)
bitwise_or = _binary("bitwise_or", ew.or_p.bind)
bitwise_xor = _binary("bitwise_xor", ew.xor_p.bind)
bitwise_not = _unary("bitwise_not", ew.not_p.bind)


def _ints(name: str, *xs: Any) -> list[Any]:
    out = _same_dtype(name, *xs)
    if not dtypes.is_int(aval_of(out[0]).dtype):
        raise TypeError(f"lax.{name} needs integer operands, got {', '.join(str(aval_of(x)) for x in out)}")
    return out


def _bits(x: Any) -> int:
    return np.dtype(aval_of(x).dtype).itemsize * 8


def _const(value: int, like: Any) -> np.ndarray:
    return np.asarray(value, aval_of(like).dtype)


def _isnan(x: Any) -> Any:
    return ew.ne_p.bind(x, x)


def _in_range(s: Any, bits: int) -> Any:
    """Where ``0 <= s < bits``."""
    return ew.and_p.bind(ew.ge_p.bind(s, _const(0, s)), ew.lt_p.bind(s, _const(bits, s)))


def _pow2(n: Any) -> Any:
    """2**n in ``n``'s dtype for 0 <= n < its width, from the bits of ``n`` (exact, no float
    round trip; 2**(width-1) wraps to the most negative value, as a shift does)."""
    out = _const(1, n)
    for k in range((_bits(n) - 1).bit_length()):
        bit = ew.eq_p.bind(ew.mod_p.bind(ew.floor_divide_p.bind(n, _const(1 << k, n)), _const(2, n)), _const(1, n))
        out = ew.select(bit, ew.mul(out, _const(1 << (1 << k), n)), out)
    return out


def _shift_left(a: Any, s: Any) -> Any:
    """``a << s`` as multiplication by 2**s (the bits shifted out lost, as in C); 0 for shifts
    outside ``[0, bits)``."""
    ok = _in_range(s, _bits(a))
    zero = _const(0, a)
    return ew.select(ok, ew.mul(a, _pow2(ew.select(ok, s, _const(0, s)))), zero)


def _shift_right(a: Any, s: Any) -> Any:
    """``a >> s`` as floor division by 2**s: arithmetic for a signed ``a``, logical for an
    unsigned one; shifts past the width (``bits - 1`` for signed) give 0, or -1 for negative ``a``."""
    unsigned = dtypes.is_unsigned(aval_of(a).dtype)
    ok = _in_range(s, _bits(a) if unsigned else _bits(a) - 1)
    fill = _const(0, a) if unsigned else ew.select(ew.lt(a, _const(0, a)), _const(-1, a), _const(0, a))
    return ew.select(ok, ew.floor_divide_p.bind(a, _pow2(ew.select(ok, s, _const(0, s)))), fill)


def shift_left(x: Any, y: Any) -> Any:
    """``x << y``, wrapping; 0 for shifts outside ``[0, bits)``."""
    return _shift_left(*_ints("shift_left", x, y))


def shift_right_arithmetic(x: Any, y: Any) -> Any:
    """``x >> y`` filling with the sign bit; shifts outside ``[0, bits)`` give 0 or -1. An
    unsigned ``x`` with its top bit set is shifted as its complement, complemented back."""
    a, s = _ints("shift_right_arithmetic", x, y)
    if not dtypes.is_unsigned(aval_of(a).dtype):
        return _shift_right(a, s)
    top_bit = ew.ge_p.bind(a, _const(1 << (_bits(a) - 1), a))
    return ew.select(top_bit, ew.not_p.bind(_shift_right(ew.not_p.bind(a), s)), _shift_right(a, s))


def shift_right_logical(x: Any, y: Any) -> Any:
    """``x >> y`` filling with zeros (``x`` read as unsigned); 0 for shifts outside ``[0, bits)``.
    The arithmetic shift of a negative ``x`` is masked to its low ``bits - y`` bits, the mask
    being the largest positive value shifted by ``y - 1`` (no overflow)."""
    a, s = _ints("shift_right_logical", x, y)
    bits = _bits(a)
    top = _const(np.iinfo(aval_of(a).dtype).max, a)
    ok = _in_range(s, bits)
    s_in = ew.select(ok, s, _const(1, s))
    shifted = _shift_right(a, s_in)
    mask = _shift_right(top, ew.sub(s_in, _const(1, s)))
    moved = ew.select(ew.lt(a, _const(0, a)), ew.and_p.bind(shifted, mask), shifted)
    return ew.select(ok, ew.select(ew.eq(s, _const(0, s)), a, moved), _const(0, a))


def _unsigned_mulhi(a: Any, b: Any) -> Any:
    """The high word of the double-width product of two unsigned words, from their half words
    (schoolbook multiplication; every partial sum fits the word)."""
    h = _bits(a) // 2
    mask, base = _const((1 << h) - 1, a), _const(1 << h, a)
    a0, a1 = ew.and_p.bind(a, mask), ew.floor_divide_p.bind(a, base)
    b0, b1 = ew.and_p.bind(b, mask), ew.floor_divide_p.bind(b, base)
    t = ew.add(ew.mul(a1, b0), ew.floor_divide_p.bind(ew.mul(a0, b0), base))
    w1 = ew.add(ew.and_p.bind(t, mask), ew.mul(a0, b1))
    return ew.add(ew.add(ew.mul(a1, b1), ew.floor_divide_p.bind(t, base)), ew.floor_divide_p.bind(w1, base))


def mulhi(x: Any, y: Any, /) -> Any:
    """The upper N bits of the 2N-bit product of N-bit integers (``jax.lax.mulhi``); a signed
    product's high word is the unsigned one less each negative operand's partner."""
    a, b = _ints("mulhi", x, y)
    dt = np.dtype(aval_of(a).dtype)
    if dtypes.is_unsigned(dt):
        return _unsigned_mulhi(a, b)
    udt = np.dtype(f"uint{dt.itemsize * 8}")
    ua, ub = ew.bitcast_convert_type(a, udt), ew.bitcast_convert_type(b, udt)
    zero = np.asarray(0, udt)
    high = _unsigned_mulhi(ua, ub)
    high = ew.sub(high, ew.select(ew.lt(a, _const(0, a)), ub, zero))
    high = ew.sub(high, ew.select(ew.lt(b, _const(0, b)), ua, zero))
    return ew.bitcast_convert_type(high, dt)


def population_count(x: Any) -> Any:
    """The number of set bits (of the two's complement pattern): pairs, nibbles, then bytes
    summed in place; the sign bit is counted apart so every shift is of a non-negative value."""
    (a,) = _ints("population_count", x)
    bits = _bits(a)
    top = _const(np.iinfo(aval_of(a).dtype).max, a)
    v = ew.and_p.bind(a, top)

    def pattern(byte: int) -> np.ndarray:
        return _const(int.from_bytes(bytes([byte]) * (bits // 8), "little") & int(top), a)

    def masked_div(v: Any, d: int, byte: int) -> Any:
        return ew.and_p.bind(ew.floor_divide_p.bind(v, _const(d, a)), pattern(byte))

    v = ew.sub(v, masked_div(v, 2, 0x55))
    v = ew.add(ew.and_p.bind(v, pattern(0x33)), masked_div(v, 4, 0x33))
    v = ew.and_p.bind(ew.add(v, ew.floor_divide_p.bind(v, _const(16, a))), pattern(0x0F))
    shift = 8
    while shift < bits:
        v = ew.add(v, ew.floor_divide_p.bind(v, _const(2 ** shift, a)))
        shift *= 2
    out = ew.add(ew.and_p.bind(v, _const(0xFF & int(top), a)), cast(ew.lt(a, _const(0, a)), aval_of(a).dtype))
    return ew.weak(out) if dtypes.is_weak(a) else out


def clz(x: Any) -> Any:
    """The number of leading zero bits: 0 for negative values, ``bits - bit_length`` otherwise
    (the bit length found by halving the range, as a binary search)."""
    (a,) = _ints("clz", x)
    bits = _bits(a)
    zero = _const(0, a)
    v = ew.max_p.bind(a, zero)
    length = zero
    step = bits // 2
    while step:
        high = ew.ge_p.bind(v, _const(2 ** step, a))
        v = ew.select(high, ew.floor_divide_p.bind(v, _const(2 ** step, a)), v)
        length = ew.add(length, ew.select(high, _const(step, a), zero))
        step //= 2
    length = ew.add(length, cast(ew.gt(v, zero), aval_of(a).dtype))
    return ew.select(ew.lt(a, zero), zero, ew.sub(_const(bits, a), length))


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
    zero = np.asarray(0, dt)
    bits = bitcast_convert_type(a, _INT_OF[dt])
    one = np.asarray(1, _INT_OF[dt])
    away = ew.eq(ew.gt(b, a), ew.gt(a, zero))
    stepped = bitcast_convert_type(ew.select(away, ew.add(bits, one), ew.sub(bits, one)), dt)
    tiny = bitcast_convert_type(one, dt)
    from_zero = ew.select(ew.gt(b, zero), tiny, ew.neg(tiny))
    out = ew.select(ew.eq(a, zero), from_zero, stepped)
    out = ew.select(ew.eq(a, b), b, out)
    return ew.select(ew.or_p.bind(_isnan(a), _isnan(b)), np.asarray(np.nan, dt), out)


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
        odd = ew.floor_divide_p.bind(ew.and_p.bind(v, last), last)
        rounded = ew.add(ew.add(v, odd), np.asarray((1 << (drop - 1)) - 1, it))
        v = ew.and_p.bind(rounded, ~np.asarray((1 << drop) - 1, it))
    if e_bits < src_e:
        exp_mask = np.asarray(((1 << src_e) - 1) << src_m, it)
        bias, new_bias = (1 << (src_e - 1)) - 1, (1 << (e_bits - 1)) - 1
        exponent = ew.and_p.bind(v, exp_mask)
        sign = ew.select(ew.lt(v, np.asarray(0, it)), np.asarray(np.iinfo(it).min, it), np.asarray(0, it))
        over = ew.gt(exponent, np.asarray((bias + new_bias) << src_m, it))
        under = ew.le_p.bind(exponent, np.asarray((bias - new_bias) << src_m, it))
        v = ew.select(over, ew.or_p.bind(sign, exp_mask), ew.select(under, sign, v))
    out = ew.select(_isnan(x), x, bitcast_convert_type(v, dt))
    return ew.weak(out) if dtypes.is_weak(x) else out


def _axis_slice(x: Any, axis: int, lo: int, hi: int) -> Any:
    start, limit = [0] * len(aval_of(x).shape), list(aval_of(x).shape)
    start[axis], limit[axis] = lo, hi
    return sh.slice_(x, start, limit, None)


def fold_bitwise(name: str, prim: Any, identity: int, operand: Any, axes: Sequence[int]) -> Any:
    """The bitwise ``prim`` (and, or, xor) of ``operand`` (bool or integer, else JAX's
    ``TypeError``) over ``axes``, ``identity`` over none: each axis folded in halves,
    ``ceil(log2 n)`` whole-array operations; the result is strongly typed, as JAX's."""
    x = asarray(operand)
    a = aval_of(x)
    if dtypes.is_inexact(a.dtype):
        raise TypeError(f"lax.{name}: logical reduction requires operand dtype bool or int, got {a}")
    for axis in sorted({int(ax) % builtins.max(len(a.shape), 1) for ax in axes}, reverse=True):
        shape = aval_of(x).shape
        rest = shape[:axis] + shape[axis + 1:]
        n = shape[axis]
        if n == 0:
            x = hosted(np.full(rest, identity).astype(a.dtype))
            continue
        while n > 1:
            half = n // 2
            folded = prim.bind(_axis_slice(x, axis, 0, half), _axis_slice(x, axis, half, 2 * half))
            x = sh.concatenate([folded, _axis_slice(x, axis, 2 * half, n)], axis) if n % 2 else folded
            n = half + n % 2
        x = sh.reshape(x, rest)
    return ew.strong(x)  # JAX's logical reductions strip the weak type


def reduce_xor(operand: Any, axes: Sequence[int]) -> Any:
    """The bitwise xor of ``operand`` (bool or integer) over ``axes``."""
    return fold_bitwise("reduce_xor", ew.xor_p, 0, operand, axes)
