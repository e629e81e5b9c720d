"""Elementwise functions of ``fungraph.numpy``: promotion, then one primitive each."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph._key_array import KeyArray
from fungraph.lax import _elementwise as lax_ew
from fungraph.numpy._util import asarray, cast, is_weak, promote, promote_args
from fungraph.primitives import elementwise as ew
from fungraph.primitives.callback import stop_gradient  # noqa: F401  (re-exported)
from fungraph.primitives.operands import weak_asarray


def _float_unary(prim: Any) -> Any:
    def f(x: Any) -> Any:
        (x,) = promote(x, to_inexact=True)
        return prim.bind(x)

    f.__name__ = prim.name
    return f


sin = _float_unary(ew.sin_p)
cos = _float_unary(ew.cos_p)
tan = _float_unary(ew.tan_p)
tanh = _float_unary(ew.tanh_p)
exp = _float_unary(ew.exp_p)
log = _float_unary(ew.log_p)
sqrt = _float_unary(ew.sqrt_p)
log1p = _float_unary(ew.log1p_p)
expm1 = _float_unary(ew.expm1_p)
arctan = _float_unary(ew.atan_p)
sinh = _float_unary(ew.sinh_p)
cosh = _float_unary(ew.cosh_p)
floor = _float_unary(ew.floor_p)


def _numeric_unary(prim: Any) -> Any:
    def f(x: Any) -> Any:
        return prim.bind(asarray(x))

    f.__name__ = prim.name
    return f


negative = _numeric_unary(ew.neg_p)
abs = _numeric_unary(ew.abs_p)  # noqa: A001
absolute = abs


def sign(x: Any) -> Any:
    """numpy 2's sign (``lax.sign``); of a complex number ``z / |z|`` (0 at 0)."""
    return lax_ew.sign(asarray(x))


def square(x: Any) -> Any:
    return ew.integer_pow(asarray(x), 2)


def reciprocal(x: Any) -> Any:
    (x,) = promote(x, to_inexact=True)
    return ew.div(np.asarray(1, x.dtype), x)


def _binary(prim: Any, to_inexact: bool = False, to_numeric: bool = False) -> Any:
    def f(x: Any, y: Any) -> Any:
        x, y = promote_args(prim.name, x, y, to_inexact=to_inexact, to_numeric=to_numeric)
        return prim.bind(x, y)

    f.__name__ = prim.name
    return f


add = _binary(ew.add_p)
subtract = _binary(ew.sub_p)
multiply = _binary(ew.mul_p)
divide = _binary(ew.div_p, to_inexact=True)
true_divide = divide
arctan2 = _binary(ew.atan2_p, to_inexact=True)
mod = _binary(ew.mod_p, to_numeric=True)
remainder = mod
floor_divide = _binary(ew.floor_divide_p, to_numeric=True)
equal = _binary(ew.eq_p)
not_equal = _binary(ew.ne_p)


def _ordered(prim: Any, on_complex: Any) -> Any:
    """``prim`` of the promoted operands; of complex ones, ``on_complex(x, y)`` (numpy's
    lexicographic order)."""
    def f(x: Any, y: Any) -> Any:
        x, y = promote_args(prim.name, x, y)
        return on_complex(x, y) if dtypes.is_complex(x.dtype) else prim.bind(x, y)

    f.__name__ = prim.name
    return f


def _comparison(prim: Any) -> Any:
    return _ordered(prim, lambda x, y: ew.lexicographic(prim, x, y))


def _extreme(prim: Any, keep_x: Any) -> Any:
    """numpy's ``maximum``/``minimum``: of complex operands the lexicographic extreme, a NaN
    (in either part) propagating as numpy's does."""
    return _ordered(prim, lambda x, y: ew.extreme(prim, keep_x, x, y))


less = _comparison(ew.lt_p)
less_equal = _comparison(ew.le_p)
greater = _comparison(ew.gt_p)
greater_equal = _comparison(ew.ge_p)
maximum = _extreme(ew.max_p, ew.ge_p)
minimum = _extreme(ew.min_p, ew.le_p)


def logical_and(x: Any, y: Any) -> Any:
    return ew.and_p.bind(cast(x, dtypes.bool_), cast(y, dtypes.bool_))


def logical_or(x: Any, y: Any) -> Any:
    return ew.or_p.bind(cast(x, dtypes.bool_), cast(y, dtypes.bool_))


def logical_xor(x: Any, y: Any) -> Any:
    return ew.xor_p.bind(cast(x, dtypes.bool_), cast(y, dtypes.bool_))


def logical_not(x: Any) -> Any:
    return ew.not_p.bind(cast(x, dtypes.bool_))


def power(x: Any, y: Any) -> Any:
    """``x ** y``; a Python-int exponent stays exact (``integer_pow``), as in JAX."""
    if is_weak(y) and isinstance(y, int) and not isinstance(y, bool):
        xa = _numeric(asarray(x))
        if y < 0 and not dtypes.is_inexact(xa.dtype):
            raise ValueError("integers to negative integer powers are not allowed")
        return ew.integer_pow(xa, y)
    return lax_ew.power_of_one_dtype(*(_numeric(v) for v in promote_args("power", x, y)))


def _numeric(x: Any) -> Any:
    """Bools as int32, as JAX's ``to_numeric_dtype`` makes them for ``power``."""
    return cast(x, dtypes.int32) if asarray(x).dtype == dtypes.bool_ else x


def where(condition: Any, x: Any = None, y: Any = None, /, *, size: int | None = None,
          fill_value: Any = None) -> Any:
    """``x`` where ``condition`` holds, else ``y``; with ``condition`` alone, ``nonzero(condition,
    size=size, fill_value=fill_value)`` as in JAX."""
    if x is None and y is None:
        from fungraph.numpy._sorting import nonzero

        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("fungraph.numpy.where takes one argument (condition) or three (condition, x, y), "
                         f"got {'x' if y is None else 'y'} without {'y' if y is None else 'x'}")
    if size is not None or fill_value is not None:
        raise ValueError("fungraph.numpy.where: size and fill_value apply only to the one-argument form")
    if isinstance(x, KeyArray) or isinstance(y, KeyArray):
        return _where_keys(condition, x, y)
    x, y = promote(x, y)
    return ew.select(cast(condition, dtypes.bool_), x, y)


def _where_keys(condition: Any, x: Any, y: Any) -> KeyArray:
    """``where`` over typed keys: the words of ``x`` or ``y`` chosen per key."""
    if not (isinstance(x, KeyArray) and isinstance(y, KeyArray)) or x.dtype != y.dtype:
        raise TypeError(f"where: a key array is chosen only against a key array of its dtype, got dtypes "
                        f"{getattr(x, 'dtype', type(x).__name__)} and {getattr(y, 'dtype', type(y).__name__)}")
    return KeyArray(where(asarray(condition)[..., None], x.words, y.words), x.dtype)


def clip(a: Any, a_min: Any = None, a_max: Any = None, *, min: Any = None, max: Any = None) -> Any:  # noqa: A002
    """``a`` limited to ``[min, max]``; the bounds by position (numpy) or as ``min=``/``max=`` (JAX)."""
    for name, positional, keyword in (("min", a_min, min), ("max", a_max, max)):
        if positional is not None and keyword is not None:
            raise TypeError(f"clip: {name} given twice (as a_{name} and as {name}=)")
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    out = weak_asarray(a)
    if lo is not None:
        out = maximum(out, lo)
    if hi is not None:
        out = minimum(out, hi)
    return out


def isnan(x: Any) -> Any:
    x = asarray(x)
    return not_equal(x, x)


def isfinite(x: Any) -> Any:
    return lax_ew.finite_mask(asarray(x))


def isinf(x: Any) -> Any:
    x = asarray(x)
    if dtypes.is_complex(x.dtype):
        return ew.or_p.bind(isinf(ew.real(x)), isinf(ew.imag(x)))
    if not dtypes.is_float(x.dtype):
        return ew.ne_p.bind(x, x)
    return equal(abs(x), np.asarray(np.inf, x.dtype))
