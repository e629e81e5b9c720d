"""The exact arithmetic ``fungraph.random``'s samplers are written in, so that every backend
draws what XLA's CPU backend draws: a fused multiply-add, XLA's ``erfinv`` polynomials, the
float next to a bound, and unsigned 32- and 64-bit remainders in int64 words."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import _threefry, dtypes
from fungraph import numpy as fnp
from fungraph.numpy._util import aval


def _fma(a: Any, b: Any, c: Any) -> Any:
    """``a * b + c`` rounded once, as XLA's CPU backend fuses it: float32 through exact float64
    products; float64 with a Dekker product and a two-sum (exact up to rare double roundings).
    XLA does not fuse floats of 16 bits or fewer: those round after each operation."""
    dt = aval(a).dtype
    if dt.itemsize <= 2:
        return fnp.add(fnp.multiply(a, b), c)
    if dt == dtypes.float32:
        wide = [fnp.asarray(v, dtype=np.float64) for v in (a, b, c)]
        return fnp.asarray(fnp.add(fnp.multiply(wide[0], wide[1]), wide[2]), dtype=dt)
    prod = fnp.multiply(a, b)
    a_hi, a_lo = _dekker_split(a)
    b_hi, b_lo = _dekker_split(b)
    prod_err = fnp.add(fnp.add(fnp.add(fnp.subtract(fnp.multiply(a_hi, b_hi), prod), fnp.multiply(a_hi, b_lo)),
                               fnp.multiply(a_lo, b_hi)), fnp.multiply(a_lo, b_lo))
    total = fnp.add(prod, c)
    back = fnp.subtract(total, prod)
    sum_err = fnp.add(fnp.subtract(prod, fnp.subtract(total, back)), fnp.subtract(c, back))
    fused = fnp.add(total, fnp.add(sum_err, prod_err))
    return fnp.where(fnp.isfinite(fused), fused, total)


def _dekker_split(x: Any) -> tuple[Any, Any]:
    t = fnp.multiply(x, np.float64(2.0**27 + 1))
    hi = fnp.subtract(t, fnp.subtract(t, x))
    return hi, fnp.subtract(x, hi)


# Giles' single- and double-precision erfinv polynomials (highest degree first), the ones XLA uses.
_ERFINV32 = ((2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941),
             (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682))
_ERFINV64 = ((-3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
              1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
              6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
              2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
              1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
              4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
              0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
              0.24015818242558961693, 1.6536545626831027356),
             (2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
              1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
              2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
              6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
              0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
              -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334, 3.0838856104922207635),
             (-2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
              -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
              2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
              -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
              7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
              1.0103004648645343977, 4.8499064014085844221))


def _horner(coefs: Sequence[float], w: Any) -> Any:
    dt = aval(w).dtype
    p = fnp.full(aval(w).shape, coefs[0], dt)
    for c in coefs[1:]:
        p = fnp.add(fnp.multiply(p, w), np.asarray(c, dt))
    return p


def _erf_inv(x: Any) -> Any:
    """XLA's erfinv: a polynomial in ``-log1p(-x*x)`` (float32: 2 ranges, float64: 3; narrower
    floats through float32, as on XLA's CPU), written in elementwise operations so that every
    backend computes the same expression."""
    dt = aval(x).dtype
    if dt.itemsize <= 2:
        return fnp.asarray(_erf_inv(fnp.asarray(x, dtype=np.float32)), dtype=dt)
    w = fnp.negative(fnp.log1p(fnp.negative(fnp.multiply(x, x))))
    root = fnp.sqrt(w)
    if dt == dtypes.float32:
        low, high = _ERFINV32
        small = fnp.less(w, np.float32(5))
        p = fnp.where(small, _horner(low, fnp.subtract(w, np.float32(2.5))),
                      _horner(high, fnp.subtract(root, np.float32(3))))
    else:
        low, mid, high = _ERFINV64
        p = fnp.where(fnp.less(w, 6.25), _horner(low, fnp.subtract(w, 3.125)),
                      fnp.where(fnp.less(w, 16.0), _horner(mid, fnp.subtract(root, 3.25)),
                                _horner(high, fnp.subtract(root, 5.0))))
    edge = fnp.equal(fnp.abs(x), np.asarray(1, dt))
    return fnp.where(edge, fnp.multiply(x, np.asarray(np.inf, dt)), fnp.multiply(p, x))


def _next_toward(x: Any, direction: int) -> Any:
    """The float next to ``x`` toward ``direction * inf`` (Rump's successor, from arithmetic only)."""
    dt = aval(x).dtype
    info = dtypes.finfo(dt)
    step = fnp.maximum(fnp.multiply(fnp.abs(x), np.asarray(info.epsneg * (1 + info.eps), dt)),
                       np.asarray(info.smallest_subnormal, dt))
    moved = fnp.add(x, step) if direction > 0 else fnp.subtract(x, step)
    return fnp.where(fnp.isinf(x), x, moved)


def _urem(x: Any, span: Any) -> Any:
    """Unsigned remainder as XLA defines it: ``x`` itself for a zero divisor."""
    zero = fnp.equal(span, np.int64(0))
    return fnp.where(zero, x, fnp.remainder(x, fnp.where(zero, np.int64(1), span)))


def _mul32(a: Any, b: Any) -> Any:
    """``a * b mod 2**32`` for uint32-valued int64s, in 16-bit halves so nothing overflows."""
    b_lo = fnp.bitwise_and(b, np.int64(0xFFFF))
    b_hi = fnp.floor_divide(b, np.int64(2**16))
    cross = fnp.multiply(fnp.bitwise_and(fnp.multiply(a, b_hi), np.int64(0xFFFF)), np.int64(2**16))
    return fnp.bitwise_and(fnp.add(fnp.multiply(a, b_lo), cross), _threefry.MASK32)


def _offset32(high: Any, low: Any, span: Any) -> Any:
    """JAX's ``(high % span * (2**32 % span) + low % span) % span`` in wrapping uint32 arithmetic."""
    mult = _urem(np.int64(2**16), span)
    mult = _urem(_mul32(mult, mult), span)
    total = fnp.bitwise_and(fnp.add(_mul32(_urem(high, span), mult), _urem(low, span)), _threefry.MASK32)
    return _urem(total, span)


_SIGN = np.int64(-(2**63))


def _addmod(a: Any, b: Any, s: Any) -> Any:
    """``(a + b) % s`` for ``0 <= a, b < s < 2**63``, without overflowing."""
    gap = fnp.subtract(s, b)
    return fnp.where(fnp.greater_equal(a, gap), fnp.subtract(a, gap), fnp.add(a, b))


def _urem64(x: Any, s: Any) -> Any:
    """``x % s`` for uint64 values held in int64 bits (XLA: ``x`` for a zero divisor). A
    divisor of 2**63 or more (negative here) exceeds half of any dividend: one subtraction.
    Below, a dividend of 2**63 or more (negative) is ``x + 2**64`` (int64 floor remainder
    gives ``x % s``; ``2**64 % s`` is added back)."""
    big = fnp.less(s, np.int64(0))
    below = fnp.less(fnp.bitwise_xor(x, _SIGN), fnp.bitwise_xor(s, _SIGN))
    r_big = fnp.where(below, x, fnp.subtract(x, s))
    safe = fnp.where(fnp.logical_or(big, fnp.equal(s, np.int64(0))), np.int64(1), s)
    half = fnp.remainder(fnp.add(fnp.remainder(np.int64(2**63 - 1), safe), np.int64(1)), safe)
    r_small = fnp.remainder(x, safe)
    r_small = fnp.where(fnp.less(x, np.int64(0)), _addmod(r_small, _addmod(half, half, safe), safe), r_small)
    return fnp.where(fnp.equal(s, np.int64(0)), x, fnp.where(big, r_big, r_small))


def _word64(words: tuple[Any, Any]) -> Any:
    """The 64-bit value ``high << 32 | low`` of two uint32 words, in int64 bits (wrapping)."""
    with np.errstate(over="ignore"):
        return fnp.add(fnp.multiply(words[0], np.int64(2**32)), words[1])


def _offset64(high: tuple[Any, Any], low: tuple[Any, Any], span: Any) -> Any:
    """JAX's ``(high % span * (2**64 % span) + low % span) % span`` for 64-bit draws given as
    word pairs, in wrapping uint64 arithmetic on int64 bits (int64 products and sums wrap as
    uint64 ones do), exact for every span."""
    with np.errstate(over="ignore"):
        mult = _urem64(np.int64(2**32), span)
        mult = _urem64(fnp.multiply(mult, mult), span)
        total = fnp.add(fnp.multiply(_urem64(_word64(high), span), mult), _urem64(_word64(low), span))
        return _urem64(total, span)
