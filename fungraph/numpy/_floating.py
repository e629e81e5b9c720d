"""Floating-point routines of ``fungraph.numpy`` (numpy's reference: floating point routines):
the sign bit, ``copysign``, ``ldexp``, ``frexp``, ``nextafter`` and ``spacing``, composed of
existing primitives (``nextafter`` on the bit pattern through ``lax.nextafter``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes, lax
from fungraph.numpy._math import _c
from fungraph.numpy._util import asarray, cast, namespace, promote, promote_args, real_inexact
from fungraph.primitives import elementwise as ew


def signbit(x: Any) -> Any:
    """True for negative values and -0.0 (1/x is -inf there)."""
    x = asarray(x)
    if not dtypes.is_float(x.dtype):
        return ew.lt(x, np.asarray(0, x.dtype))
    neg_zero = ew.lt(ew.div(_c(1, x), x), _c(0, x))
    return ew.select(ew.eq(x, _c(0, x)), neg_zero, ew.lt(x, _c(0, x)))


def copysign(x1: Any, x2: Any) -> Any:
    a, b = promote_args("copysign", x1, x2, to_inexact=True)
    return ew.select(signbit(b), ew.neg(ew.abs_p.bind(a)), ew.abs_p.bind(a))


def ldexp(x1: Any, x2: Any) -> Any:
    (a,) = promote(x1, to_inexact=True)
    return ew.mul(a, ew.pow_(_c(2, a), cast(x2, a.dtype)))


def _times_pow2(x: Any, k: Any) -> Any:
    """``x * 2**k`` exactly for integer ``k`` over the whole exponent range (two half-steps, so
    no power of two overflows on its own)."""
    fnp = namespace()
    half = k // 2
    two = np.asarray(2, x.dtype)
    return x * fnp.power(two, half.astype(x.dtype)) * fnp.power(two, (k - half).astype(x.dtype))


def frexp(x: Any, /) -> tuple[Any, Any]:
    """``(mantissa, exponent)`` with ``x == mantissa * 2**exponent`` and ``0.5 <= |mantissa| < 1``;
    zeros, infinities and NaN give ``(x, 0)``. The exponent is int32, as in numpy and JAX; the
    mantissa's derivative is ``2**-exponent``."""

    fnp = namespace()
    (v,) = real_inexact("frexp", x)
    regular = fnp.isfinite(v) & (v != 0)
    a = lax.stop_gradient(fnp.where(regular, fnp.abs(v), 1))
    e = fnp.floor(fnp.log2(a)).astype(np.int32) + 1
    m = _times_pow2(a, -e)
    e = fnp.where(m >= 1, e + 1, fnp.where(m < 0.5, e - 1, e))
    mantissa = _times_pow2(v, lax.stop_gradient(-e))
    return fnp.where(regular, mantissa, v), fnp.where(regular, e, 0).astype(np.int32)


def nextafter(x1: Any, x2: Any, /) -> Any:
    """The next floating-point value after ``x1`` towards ``x2`` (``x2`` itself when they are
    equal, NaN if either is): ``lax.nextafter`` (one step of the bit pattern) at the operands'
    common dtype. Piecewise constant: its derivatives are zero (JAX has none)."""

    fnp = namespace()
    a, b = (lax.stop_gradient(t) for t in fnp.broadcast_arrays(*real_inexact("nextafter", x1, x2)))
    return lax.nextafter(a, b)


def spacing(x: Any, /) -> Any:
    """The distance from ``x`` to the next value of larger magnitude, signed like ``x``; as in
    numpy ``spacing(-0.0)`` is the smallest subnormal (JAX: its negative). NaN for infinities
    and NaN; zero derivatives, like ``nextafter``."""

    fnp = namespace()
    (v,) = real_inexact("spacing", x)
    v = lax.stop_gradient(v)
    finite = fnp.isfinite(v)
    safe = fnp.where(finite, v, 0)
    gap = nextafter(safe, fnp.where(safe < 0, -np.inf, np.inf).astype(v.dtype)) - safe
    return fnp.where(finite, gap, np.asarray(np.nan, v.dtype))
