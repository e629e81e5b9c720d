"""``jax.lax``'s elementwise operators: they refuse mixed dtypes instead of promoting (Python
scalars are weak), then bind the primitives ``fungraph.numpy`` binds; ``select_n``, complex
parts and conversions."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError, weak_array
from fungraph.ir import aval_of
from fungraph.primitives import elementwise as ew
from fungraph.primitives.operands import asarray, cast, is_weak, promote

# --- equal dtypes, Python scalars weak ------------------------------------------------------------


def _same_dtype(name: str, *xs: Any) -> list[Any]:
    """The operands as arrays of one dtype, as JAX's lax binds them: a Python scalar becomes a
    weak array of the mode's default dtype for its kind (``1.0`` is float32 with x64 off and
    float64 with it on), and then every dtype must agree (lax does not promote)."""
    arrays = [weak_array(np.asarray(x, dtypes.result_type(x))) if is_weak(x) else asarray(x) for x in xs]
    if len({aval_of(a).dtype for a in arrays}) > 1:
        raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                        f"{', '.join(str(aval_of(a)) for a in arrays)}. (Tip: fungraph.numpy's functions promote "
                        "mixed dtypes; a Python scalar is taken at the default dtype of its kind)")
    return arrays


_KINDS = {"i": "signedinteger", "u": "unsignedinteger", "f": "floating", "c": "complexfloating", "b": "bool"}


def _kind(dt: np.dtype) -> str:
    """One letter for the dtype family JAX's lax functions accept or refuse."""
    if dt == dtypes.bool_:
        return "b"
    if dtypes.is_complex(dt):
        return "c"
    if dtypes.is_int(dt):
        return "u" if dtypes.is_unsigned(dt) else "i"
    return "f"


def _families(accepts: str) -> str:
    if set("iufc") <= set(accepts):
        return "number"
    names = ["integer"] if set("iu") <= set(accepts) else [_KINDS[k] for k in "iu" if k in accepts]
    return ", ".join([_KINDS[k] for k in "fc" if k in accepts] + names + (["bool"] if "b" in accepts else []))


def check_accepts(name: str, accepts: str, *xs: Any) -> None:
    """JAX's ``TypeError`` for an operand whose dtype family (``_kind``'s letters) lax's
    ``name`` does not take, where numpy's function would promote it (``lax.sin`` of int32)."""
    for pos, x in enumerate(xs):
        dt = aval_of(x).dtype
        if _kind(dt) not in accepts:
            at = f" at position {pos}" if len(xs) > 1 else ""
            raise TypeError(f"{name} does not accept dtype {np.dtype(dt).name}{at}. Accepted dtypes{at} are "
                            f"subtypes of {_families(accepts)}.")


class Tolerance:
    """The error a transcendental function may make (``jax.lax.Tolerance``): at most two of
    ``atol``, ``rtol`` and ``ulps``. Accepted as ``accuracy=``; fungraph's backends compute each
    function one way, so it has no effect."""

    def __init__(self, atol: float = 0.0, rtol: float = 0.0, ulps: int = 0) -> None:
        if atol < 0.0 or rtol < 0.0 or ulps < 0:
            raise ValueError("Tolerances must be non-negative.")
        if atol == 0.0 and rtol == 0.0 and ulps == 0:
            raise ValueError("At least one of atol, rtol, or ulps must be set.")
        self.atol, self.rtol, self.ulps = atol, rtol, ulps


class AccuracyMode(enum.Enum):
    """``jax.lax.AccuracyMode``: the named accuracies ``accuracy=`` takes (no effect in fungraph)."""

    HIGHEST = 1
    DEFAULT = 2


class RoundingMethod(enum.IntEnum):
    """How ``lax.round`` breaks ties (``jax.lax.RoundingMethod``)."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


#: The functions that take JAX's ``accuracy=`` keyword.
_WITH_ACCURACY = frozenset({"cbrt", "cos", "exp", "exp2", "expm1", "log", "log1p", "logistic", "rsqrt", "sin",
                            "sqrt", "tan", "tanh"})


def _check_accuracy(name: str, accuracy: Any) -> None:
    if accuracy is not None and not isinstance(accuracy, (Tolerance, AccuracyMode)):
        raise TypeError(f"lax.{name}: accuracy must be None, a lax.Tolerance or a lax.AccuracyMode, got {accuracy!r}")


def _unary(name: str, fn: Callable[[Any], Any], accepts: str = "biufc") -> Callable[[Any], Any]:
    def plain(x: Any) -> Any:
        (x,) = _same_dtype(name, x)
        check_accepts(name, accepts, x)
        return fn(x)

    def with_accuracy(x: Any, *, accuracy: Tolerance | AccuracyMode | None = None) -> Any:
        _check_accuracy(name, accuracy)
        return plain(x)

    op = with_accuracy if name in _WITH_ACCURACY else plain

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``lax.{name}``: elementwise, keeping the operand's dtype."
    return op


_NUMPY_NAME = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal"}


def _binary(name: str, fn: Callable[[Any, Any], Any], ordered: bool = False,
            accepts: str = "biufc") -> Callable[[Any, Any], Any]:
    def op(x: Any, y: Any) -> Any:
        xs = _same_dtype(name, x, y)
        check_accepts(name, accepts, *xs)
        if ordered and np.issubdtype(aval_of(xs[0]).dtype, np.complexfloating):
            raise TypeError(f"lax.{name} does not accept complex operands ({aval_of(xs[0])}): complex numbers "
                            "have no order; compare their real parts or use fungraph.numpy's lexicographic "
                            f"{_NUMPY_NAME[name]}")
        return fn(*xs)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``lax.{name}``: elementwise over operands of one dtype (no promotion)."
    return op


def _f(x: Any) -> Any:
    """``x`` made inexact (ints as float64), as numpy's float functions take it."""
    (x,) = promote(x, to_inexact=True)
    return x


def _c(value: Any, like: Any) -> np.ndarray:
    return np.asarray(value, aval_of(like).dtype)


def _div(x: Any, y: Any) -> Any:
    """Integers round toward zero (C division; XLA's all bits set for a zero divisor); floats divide."""
    dt = aval_of(x).dtype
    if not dtypes.is_int(dt):
        return ew.div(*promote(x, y, to_inexact=True))
    q = ew.floor_divide_p.bind(x, y)
    if dtypes.is_unsigned(dt):
        return q
    inexact = ew.ne_p.bind(ew.mul(q, y), x)
    signs_differ = ew.ne_p.bind(ew.lt(x, _c(0, x)), ew.lt(y, _c(0, y)))
    truncated = ew.select(ew.and_p.bind(inexact, signs_differ), ew.add(q, _c(1, q)), q)
    return ew.select(ew.eq(y, _c(0, y)), _c(-1, q), truncated)


def _rem(x: Any, y: Any) -> Any:
    """``lax.rem``: C's fmod; an integer remainder by zero is the dividend, as XLA's."""
    r = fmod(x, y)
    if not dtypes.is_int(aval_of(x).dtype):
        return r
    return ew.select(ew.eq(y, _c(0, y)), x, r)


def fmod(x: Any, y: Any) -> Any:
    """Remainder with the sign of the dividend (C's fmod), of operands of one dtype: ``lax.rem``
    and numpy's ``fmod``."""
    r = ew.mod_p.bind(x, y)
    zero = _c(0, x)
    fix_sign = ew.and_p.bind(ew.ne_p.bind(r, zero), ew.ne_p.bind(ew.lt(x, zero), ew.lt(y, zero)))
    return ew.select(fix_sign, ew.sub(r, y), r)


def _where_neg(x: Any, f: Callable[[Any], Any]) -> Any:
    """An odd function from its accurate half: ``f(|x|)``, negated where x < 0. ``f`` sees
    only ``|x|``, so no branch evaluates it where it is undefined (a NaN there would reach
    the gradient through the unselected branch: 0 * NaN)."""
    neg = ew.lt(x, _c(0, x))
    y = f(ew.select(neg, ew.neg(x), x))
    return ew.select(neg, ew.neg(y), y)


def _asinh_pos(x: Any) -> Any:
    sq = ew.mul(x, x)                                                    # log1p(x + x^2 / (1 + sqrt(1 + x^2)))
    return ew.log1p_p.bind(ew.add(x, ew.div(sq, ew.add(_c(1, x), ew.sqrt_p.bind(ew.add(_c(1, x), sq))))))


def _asinh(x: Any) -> Any:
    """asinh, accurate near 0 and for large |x|: odd, from :func:`_asinh_pos` of the half plane
    Re(x) >= 0 (for complex ``x`` numpy's principal branch, whose derivative 1/sqrt(x^2 + 1) is
    JAX's rule)."""
    if not dtypes.is_complex(aval_of(x).dtype):
        return _where_neg(x, _asinh_pos)
    left = ew.lt(ew.real_p.bind(x), _c(0, ew.real_p.bind(x)))
    y = _asinh_pos(ew.select(left, ew.neg(x), x))
    return ew.select(left, ew.neg(y), y)


def _acosh(x: Any) -> Any:
    return ew.acosh_p.bind(x)


def _atanh(x: Any) -> Any:
    return ew.atanh_p.bind(x)


def _ceil(x: Any) -> Any:
    return ew.neg(ew.floor(ew.neg(x)))


def trunc(x: Any) -> Any:
    """Round an inexact ``x`` toward zero (numpy's ``trunc``, lax's ``round`` before its halves)."""
    return ew.select(ew.lt(x, _c(0, x)), _ceil(x), ew.floor(x))


def _sign(x: Any) -> Any:
    """numpy 2's sign; of a complex number ``z / |z|`` (0 at 0), a composition so it has a derivative."""
    if not dtypes.is_complex(aval_of(x).dtype):
        return ew.sign_p.bind(x)
    mag = ew.abs_p.bind(x)
    zero = ew.eq(mag, _c(0, mag))
    safe = ew.select(zero, _c(1, mag), mag)
    unit = ew.complex_(ew.div(ew.real(x), safe), ew.div(ew.imag(x), safe))  # part by part: exact for subnormals
    return ew.select(zero, _c(0, x), unit)


def finite_mask(x: Any) -> Any:
    """Where ``x`` is finite (every integer and bool is): numpy's ``isfinite``, lax's ``is_finite``."""
    dt = aval_of(x).dtype
    if dtypes.is_complex(dt):
        return ew.and_p.bind(finite_mask(ew.real(x)), finite_mask(ew.imag(x)))
    if not dtypes.is_float(dt):
        return ew.eq(x, x)
    return ew.lt(ew.abs_p.bind(x), _c(np.inf, x))


def power_of_one_dtype(x: Any, y: Any) -> Any:
    """numpy's ``x ** y`` of operands at one dtype: ``pow``; integers through float64, rounded back."""
    if dtypes.is_inexact(aval_of(x).dtype):
        return ew.pow_(x, y)
    out = ew.pow_(cast(x, dtypes.float64), cast(y, dtypes.float64))
    return cast(ew.floor(ew.add(out, np.asarray(0.5))), aval_of(x).dtype)


def _inexact(prim: Any) -> Callable[[Any], Any]:
    """``prim`` bound to its operand made inexact, as numpy's float functions and
    ``fungraph.scipy.special`` bind it (lax._special's functions use it too)."""
    return lambda x: prim.bind(_f(x))


add = _binary("add", ew.add_p.bind, accepts="iufc")
sub = _binary("sub", ew.sub_p.bind, accepts="iufc")
_mul = _binary("mul", ew.mul_p.bind, accepts="iufc")


def mul(x: Any, y: Any, *, out_dtype: Any = None) -> Any:
    """``x * y`` elementwise; with ``out_dtype`` both operands are converted to it first."""
    if out_dtype is None:
        return _mul(x, y)
    want = dtypes.canonicalize(out_dtype)
    a, b = _same_dtype("mul", x, y)
    return _mul(cast(a, want), cast(b, want))


div = _binary("div", _div, accepts="iufc")
rem = _binary("rem", _rem, accepts="iuf")
max = _binary("max", lambda x, y: ew.extreme(ew.max_p, ew.ge_p, x, y))  # noqa: A001 - lax's name
min = _binary("min", lambda x, y: ew.extreme(ew.min_p, ew.le_p, x, y))  # noqa: A001 - lax's name
atan2 = _binary("atan2", lambda x, y: ew.atan2_p.bind(*promote(x, y, to_inexact=True)), accepts="fc")
eq = _binary("eq", ew.eq_p.bind)
ne = _binary("ne", ew.ne_p.bind)
lt = _binary("lt", ew.lt_p.bind, ordered=True)
le = _binary("le", ew.le_p.bind, ordered=True)
gt = _binary("gt", ew.gt_p.bind, ordered=True)
ge = _binary("ge", ew.ge_p.bind, ordered=True)
neg = _unary("neg", ew.neg_p.bind, accepts="iufc")
abs = _unary("abs", ew.abs_p.bind, accepts="ifc")  # noqa: A001 - lax's name
sign = _unary("sign", _sign, accepts="iufc")
floor = _unary("floor", _inexact(ew.floor_p), accepts="f")
ceil = _unary("ceil", lambda x: _ceil(_f(x)), accepts="f")
exp = _unary("exp", _inexact(ew.exp_p), accepts="fc")
exp2 = _unary("exp2", lambda x: ew.pow_(_c(2, _f(x)), _f(x)), accepts="fc")
log = _unary("log", _inexact(ew.log_p), accepts="fc")
log1p = _unary("log1p", _inexact(ew.log1p_p), accepts="fc")
expm1 = _unary("expm1", _inexact(ew.expm1_p), accepts="fc")
sin = _unary("sin", _inexact(ew.sin_p), accepts="fc")
cos = _unary("cos", _inexact(ew.cos_p), accepts="fc")
tan = _unary("tan", _inexact(ew.tan_p), accepts="fc")
asin = _unary("asin", _inexact(ew.asin_p), accepts="fc")
acos = _unary("acos", _inexact(ew.acos_p), accepts="fc")
atan = _unary("atan", _inexact(ew.atan_p), accepts="fc")
sinh = _unary("sinh", _inexact(ew.sinh_p), accepts="fc")
cosh = _unary("cosh", _inexact(ew.cosh_p), accepts="fc")
tanh = _unary("tanh", _inexact(ew.tanh_p), accepts="fc")
asinh = _unary("asinh", lambda x: _asinh(_f(x)), accepts="fc")
acosh = _unary("acosh", lambda x: _acosh(_f(x)), accepts="fc")
atanh = _unary("atanh", lambda x: _atanh(_f(x)), accepts="fc")
sqrt = _unary("sqrt", _inexact(ew.sqrt_p), accepts="fc")
rsqrt = _unary("rsqrt", lambda x: ew.div(_c(1, _f(x)), ew.sqrt_p.bind(_f(x))), accepts="fc")
cbrt = _unary("cbrt", lambda x: _where_neg(_f(x), lambda y: ew.pow_(y, _c(1 / 3, y))), accepts="f")
square = _unary("square", lambda x: ew.mul(x, x), accepts="iufc")
is_finite = _unary("is_finite", finite_mask, accepts="f")


def pow(x: Any, y: Any) -> Any:  # noqa: A001 - lax's name
    """``x ** y`` for a float ``x`` and a float (same dtype) or integer ``y``."""
    x = asarray(x)
    y = np.asarray(y) if is_weak(y) else asarray(y)
    check_accepts("pow", "fc", x)
    if not dtypes.is_int(aval_of(y).dtype):
        x, y = _same_dtype("pow", x, y)
    return cast(power_of_one_dtype(*promote(x, y)), aval_of(x).dtype)


def integer_pow(x: Any, y: int) -> Any:
    """``x ** y`` for a Python integer ``y`` (negative only for inexact ``x``). As JAX's, a float
    exponent is taken where JAX's lowering has a case for its value (-1, 0, 1, 2 or 3)."""
    y = _integer_exponent(y)
    x = asarray(x)
    if y < 0 and dtypes.is_int(aval_of(x).dtype):
        raise TypeError(f"lax.integer_pow: a negative exponent {y} needs an inexact operand, got {aval_of(x)}")
    return cast(ew.integer_pow(x, int(y)), aval_of(x).dtype)


def _integer_exponent(y: Any) -> int:
    if isinstance(y, (int, np.integer)):
        return int(y)
    if isinstance(y, (float, np.floating)) and y in _FLOAT_EXPONENTS:
        return int(y)
    raise TypeError(f"lax.integer_pow needs an integer exponent, got {type(y).__name__} {y!r} (a float exponent "
                    "is taken only for -1, 0, 1, 2 and 3, as in JAX)")


_FLOAT_EXPONENTS = (-1, 0, 1, 2, 3)


def round(x: Any, rounding_method: int = 0) -> Any:  # noqa: A001 - lax's name
    """Round to integral values: halves away from zero (``rounding_method=0``, lax's default)
    or to even (``1``)."""
    x = asarray(x)
    check_accepts("round", "f", x)
    if int(rounding_method) == 1:
        return ew.round_half_even(_f(x))
    xf = _f(x)
    r = trunc(xf)
    gap = ew.abs_p.bind(ew.sub(xf, r))
    return ew.select(ew.ge_p.bind(gap, _c(0.5, gap)), ew.add(r, _sign(xf)), r)


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """``on_true`` where ``pred`` holds, else ``on_false``: one shape, one dtype, a bool ``pred``
    of that shape or a scalar."""
    p = asarray(pred)
    t, f = _same_dtype("select", on_true, on_false)
    if aval_of(p).dtype != dtypes.bool_:
        raise TypeError(f"lax.select needs a bool predicate, got {aval_of(p)}")
    if aval_of(t).shape != aval_of(f).shape or aval_of(p).shape not in ((), aval_of(t).shape):
        raise ShapeError(f"lax.select: shapes must agree, got predicate {aval_of(p)}, {aval_of(t)} and {aval_of(f)}")
    return ew.select(p, t, f)


def clamp(min: Any, x: Any, max: Any) -> Any:  # noqa: A002 - lax's names
    """``x`` clipped to ``[min, max]`` (scalars or arrays of ``x``'s shape and dtype)."""
    lo, x, hi = _same_dtype("clamp", min, x, max)
    return ew.extreme(ew.min_p, ew.le_p, ew.extreme(ew.max_p, ew.ge_p, x, lo), hi)


def convert_element_type(operand: Any, new_dtype: Any) -> Any:
    """``operand`` cast to ``new_dtype`` (float -> int truncates toward zero), strongly typed
    as JAX's (``weak_type=False``)."""
    return ew.strong(cast(asarray(operand), dtypes.canonicalize(new_dtype, "convert_element_type")))


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
        return xs[0] if len(xs) == 1 else ew.select(w, xs[1], xs[0])
    if not dtypes.is_int(wa.dtype):
        raise TypeError(f"lax.select_n: which must be bool or integer, got {wa}")
    out = xs[0]
    for k in range(1, len(xs)):
        out = ew.select(ew.ge_p.bind(w, np.asarray(k, wa.dtype)), xs[k], out)
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
