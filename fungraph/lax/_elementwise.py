"""``jax.lax``'s elementwise operators: they refuse mixed dtypes instead of promoting (Python
scalars are weak), then bind the primitives ``fungraph.numpy`` binds; ``select_n``, complex
parts and conversions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph.core import ShapeError
from fungraph.ir import aval_of
from fungraph.numpy._util import asarray, cast, is_weak
from fungraph.primitives import elementwise as ew

# --- equal dtypes, Python scalars weak ------------------------------------------------------------


def _same_dtype(name: str, *xs: Any) -> list[Any]:
    """The operands at one dtype: arrays must already agree (lax does not promote); Python
    scalars take the arrays' dtype."""
    arrays = [asarray(x) for x in xs if not is_weak(x)]
    kinds = {aval_of(a).dtype for a in arrays}
    if len(kinds) > 1:
        raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                        f"{', '.join(str(aval_of(a)) for a in arrays)}")
    dt = kinds.pop() if kinds else dtypes.result_type(*xs)
    return [np.asarray(x, dt) if is_weak(x) else asarray(x) for x in xs]


def _unary(name: str, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def op(x: Any) -> Any:
        (x,) = _same_dtype(name, x)
        return fn(x)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``lax.{name}``: elementwise, keeping the operand's dtype."
    return op


_NUMPY_NAME = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal"}


def _binary(name: str, fn: Callable[[Any, Any], Any], ordered: bool = False) -> Callable[[Any, Any], Any]:
    def op(x: Any, y: Any) -> Any:
        xs = _same_dtype(name, x, y)
        if ordered and np.issubdtype(aval_of(xs[0]).dtype, np.complexfloating):
            raise TypeError(f"lax.{name} does not accept complex operands ({aval_of(xs[0])}): complex numbers "
                            "have no order; compare their real parts or use fungraph.numpy's lexicographic "
                            f"{_NUMPY_NAME[name]}")
        return fn(*xs)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``lax.{name}``: elementwise over operands of one dtype (no promotion)."
    return op


def _div(x: Any, y: Any) -> Any:
    """Integers round toward zero (C division); floats divide."""
    if not dtypes.is_int(aval_of(x).dtype):
        return fnp.divide(x, y)
    q = fnp.floor_divide(x, y)
    inexact = fnp.not_equal(fnp.multiply(q, y), x)
    return fnp.where(inexact & (fnp.less(x, 0) != fnp.less(y, 0)), q + 1, q)


add = _binary("add", lambda x, y: fnp.add(x, y))
sub = _binary("sub", lambda x, y: fnp.subtract(x, y))
mul = _binary("mul", lambda x, y: fnp.multiply(x, y))
div = _binary("div", _div)
rem = _binary("rem", lambda x, y: fnp.fmod(x, y))
max = _binary("max", lambda x, y: fnp.maximum(x, y))  # noqa: A001 - lax's name
min = _binary("min", lambda x, y: fnp.minimum(x, y))  # noqa: A001 - lax's name
atan2 = _binary("atan2", lambda x, y: fnp.arctan2(x, y))
eq = _binary("eq", lambda x, y: fnp.equal(x, y))
ne = _binary("ne", lambda x, y: fnp.not_equal(x, y))
lt = _binary("lt", lambda x, y: fnp.less(x, y), ordered=True)
le = _binary("le", lambda x, y: fnp.less_equal(x, y), ordered=True)
gt = _binary("gt", lambda x, y: fnp.greater(x, y), ordered=True)
ge = _binary("ge", lambda x, y: fnp.greater_equal(x, y), ordered=True)
neg = _unary("neg", lambda x: fnp.negative(x))
abs = _unary("abs", lambda x: fnp.abs(x))  # noqa: A001 - lax's name
sign = _unary("sign", lambda x: fnp.sign(x))
floor = _unary("floor", lambda x: fnp.floor(x))
ceil = _unary("ceil", lambda x: fnp.ceil(x))
exp = _unary("exp", lambda x: fnp.exp(x))
exp2 = _unary("exp2", lambda x: fnp.exp2(x))
log = _unary("log", lambda x: fnp.log(x))
log1p = _unary("log1p", lambda x: fnp.log1p(x))
expm1 = _unary("expm1", lambda x: fnp.expm1(x))
sin = _unary("sin", lambda x: fnp.sin(x))
cos = _unary("cos", lambda x: fnp.cos(x))
tan = _unary("tan", lambda x: fnp.tan(x))
asin = _unary("asin", lambda x: fnp.arcsin(x))
acos = _unary("acos", lambda x: fnp.arccos(x))
atan = _unary("atan", lambda x: fnp.arctan(x))
sinh = _unary("sinh", lambda x: fnp.sinh(x))
cosh = _unary("cosh", lambda x: fnp.cosh(x))
tanh = _unary("tanh", lambda x: fnp.tanh(x))
asinh = _unary("asinh", lambda x: fnp.arcsinh(x))
acosh = _unary("acosh", lambda x: fnp.arccosh(x))
atanh = _unary("atanh", lambda x: fnp.arctanh(x))
sqrt = _unary("sqrt", lambda x: fnp.sqrt(x))
rsqrt = _unary("rsqrt", lambda x: 1.0 / fnp.sqrt(x))
cbrt = _unary("cbrt", lambda x: fnp.cbrt(x))
square = _unary("square", lambda x: x * x)
is_finite = _unary("is_finite", lambda x: fnp.isfinite(x))


def pow(x: Any, y: Any) -> Any:  # noqa: A001 - lax's name
    """``x ** y`` for a float ``x`` and a float (same dtype) or integer ``y``."""
    x = asarray(x)
    y = np.asarray(y) if is_weak(y) else asarray(y)
    if not dtypes.is_int(aval_of(y).dtype):
        x, y = _same_dtype("pow", x, y)
    return cast(fnp.power(x, y), aval_of(x).dtype)


def integer_pow(x: Any, y: int) -> Any:
    """``x ** y`` for a Python integer ``y`` (negative only for inexact ``x``)."""
    if not isinstance(y, (int, np.integer)):
        raise TypeError(f"lax.integer_pow needs a Python integer exponent, got {y!r}")
    x = asarray(x)
    if y < 0 and dtypes.is_int(aval_of(x).dtype):
        raise TypeError(f"lax.integer_pow: a negative exponent {y} needs an inexact operand, got {aval_of(x)}")
    return cast(fnp.power(x, int(y)), aval_of(x).dtype)


def round(x: Any, rounding_method: int = 0) -> Any:  # noqa: A001 - lax's name
    """Round to integral values: halves away from zero (``rounding_method=0``, lax's default)
    or to even (``1``)."""
    x = asarray(x)
    if int(rounding_method) == 1:
        return fnp.rint(x)
    r = fnp.trunc(x)
    return fnp.where(fnp.abs(x - r) >= 0.5, r + fnp.sign(x), r)


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """``on_true`` where ``pred`` holds, else ``on_false``: one shape, one dtype, a bool ``pred``
    of that shape or a scalar."""
    p = asarray(pred)
    t, f = _same_dtype("select", on_true, on_false)
    if aval_of(p).dtype != dtypes.bool_:
        raise TypeError(f"lax.select needs a bool predicate, got {aval_of(p)}")
    if aval_of(t).shape != aval_of(f).shape or aval_of(p).shape not in ((), aval_of(t).shape):
        raise ShapeError(f"lax.select: shapes must agree, got predicate {aval_of(p)}, {aval_of(t)} and {aval_of(f)}")
    return fnp.where(p, t, f)


def clamp(min: Any, x: Any, max: Any) -> Any:  # noqa: A002 - lax's names
    """``x`` clipped to ``[min, max]`` (scalars or arrays of ``x``'s shape and dtype)."""
    lo, x, hi = _same_dtype("clamp", min, x, max)
    return fnp.minimum(fnp.maximum(x, lo), hi)


def convert_element_type(operand: Any, new_dtype: Any) -> Any:
    """``operand`` cast to ``new_dtype`` (float -> int truncates toward zero)."""
    return cast(asarray(operand), dtypes.canonicalize(new_dtype, "convert_element_type"))


# --- selection and complex parts ------------------------------------------------------------------


def select_n(which: Any, *cases: Any) -> Any:
    """``cases[which]`` elementwise: ``which`` a bool (two cases) or an integer array of the
    cases' shape, or a scalar; indices past either end take the nearest case."""
    if not cases:
        raise ValueError("lax.select_n needs at least one case")
    w = asarray(which)
    xs = _same_dtype("select_n", *cases)
    wa, shapes = aval_of(w), {aval_of(x).shape for x in xs}
    if len(shapes) != 1 or wa.shape not in ((), *shapes):
        raise ShapeError(f"lax.select_n: which {wa} and cases {[str(aval_of(x)) for x in xs]} must share one shape "
                         "(which may be a scalar)")
    if wa.dtype == dtypes.bool_:
        if len(xs) > 2:
            raise TypeError(f"lax.select_n: a bool which selects between at most 2 cases, got {len(xs)}")
        return xs[0] if len(xs) == 1 else fnp.where(w, xs[1], xs[0])
    if not dtypes.is_int(wa.dtype):
        raise TypeError(f"lax.select_n: which must be bool or integer, got {wa}")
    out = xs[0]
    for k in range(1, len(xs)):
        out = fnp.where(w >= k, xs[k], out)
    return out


def _floats(name: str, *xs: Any) -> list[Any]:
    """Operands of one float dtype, as ``jax.lax``'s special functions require."""
    out = _same_dtype(name, *xs)
    if not dtypes.is_float(aval_of(out[0]).dtype):
        raise TypeError(f"lax.{name} needs float operands, got {', '.join(str(aval_of(x)) for x in out)}")
    return out


def complex(x: Any, y: Any) -> Any:  # noqa: A001 - lax's name
    """``x + i y`` for float ``x`` and ``y`` of one dtype (complex64 from float32)."""
    return ew.complex_(*_floats("complex", x, y))


def _complex_only(name: str, x: Any) -> Any:
    x = asarray(x)
    if not dtypes.is_complex(aval_of(x).dtype):
        raise TypeError(f"lax.{name} needs a complex operand, got {aval_of(x)}")
    return x


def real(x: Any) -> Any:
    return ew.real(_complex_only("real", x))


def imag(x: Any) -> Any:
    return ew.imag(_complex_only("imag", x))


def conj(x: Any) -> Any:
    """The complex conjugate; a float operand becomes complex first, as in JAX."""
    x = asarray(x)
    dt = aval_of(x).dtype
    if not dtypes.is_inexact(dt):
        raise TypeError(f"lax.conj needs a float or complex operand, got {aval_of(x)}")
    return ew.conj(x if dtypes.is_complex(dt) else cast(x, dtypes.complex_for(dt)))


def reciprocal(x: Any) -> Any:
    """``1 / x`` for an inexact ``x``."""
    (x,) = _same_dtype("reciprocal", x)
    if not dtypes.is_inexact(aval_of(x).dtype):
        raise TypeError(f"lax.reciprocal needs an inexact operand, got {aval_of(x)}")
    return ew.div(np.asarray(1, aval_of(x).dtype), x)
