"""Operators and methods of host arrays (eager results) with JAX's semantics: JAX's promotion
(weak Python scalars, the 32-bit mode's canonical dtypes, JAX's lattice rather than numpy's),
0-d arrays where numpy gives scalars, weak results where JAX's are weak, and JAX's methods.

Operators stay numpy's ufuncs on operands cast to JAX's result dtype, so an eager ``x + y`` costs
about what numpy's does: each (operator, operand dtypes, weak types, mode) is planned once —
JAX's result dtype, and whether numpy's ufunc computes it when given operands of that dtype —
and a combination numpy cannot compute that way (JAX's errors, integer powers, lists, device
arrays) goes through the ``fungraph.numpy`` function the operator stands for. Methods are
``fungraph.numpy``'s, except those that only view the buffer (``reshape``, ``T``, ...), which are
numpy's, and ``astype``. A writeable host array (one numpy's own functions made and fill in place,
see ``fungraph.array``) keeps numpy's methods, and so does a call with numpy's ``out=``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph._config import ON_TRACING_CHANGE, RANK_PROMOTION
from fungraph._fp_errors import quiet, restore
from fungraph.array import DeletedHostArray, HostArray, hosted
from fungraph.core import ShapeError
from fungraph.numpy._reductions import accumulating_dtype
from fungraph.primitives import elementwise as ew

_PY_SCALARS = (int, float, complex)
_PROBE = {int: 1, float: 1.0, complex: 1j, bool: True}


@dataclass(frozen=True)
class _Plan:
    """How numpy computes one operator combination as JAX does: on operands cast to ``dtype``
    (a Python scalar too where ``cast_scalar``), marking the result weak where JAX's is."""

    dtype: np.dtype
    cast_scalar: bool
    weak: bool


#: (operator, own dtype, own weak type, other's dtype, weak type and Python scalar type, x64) ->
#: its plan, or None where the ``fungraph.numpy`` function computes it
_PLANS: dict[tuple, _Plan | None] = {}
ON_TRACING_CHANGE.append(_PLANS.clear)


def _operand_key(x: Any) -> tuple[np.dtype, bool, type | None] | None:
    """The other operand's part of a plan's key: its dtype, whether it is weak, and its type if
    it is a Python scalar; None for operands the plans do not cover."""
    t = type(x)
    if t is HostArray or t is np.ndarray:
        return x.dtype, x.weak_type if t is HostArray else False, None
    if t in _PY_DTYPES:
        return _PY_DTYPES[t], t is not bool, t
    if isinstance(x, np.generic) and x.dtype in dtypes.SHORT_NAMES:
        return x.dtype, False, None
    return None


_PY_DTYPES = {bool: dtypes.bool_, int: dtypes.int64, float: dtypes.float64, complex: dtypes.complex128}


def _probe(theirs: tuple[np.dtype, bool, type | None], dtype: np.dtype, cast: bool) -> Any:
    scalar_type = theirs[2]
    if scalar_type is None:
        return np.ones(2, dtype)
    return np.asarray(_PROBE[scalar_type], dtype) if cast else _PROBE[scalar_type]


def _make_plan(ufunc: Any, kind: str, mine: tuple[np.dtype, bool], theirs: tuple[np.dtype, bool, type | None]
               ) -> _Plan | None:
    """JAX's result dtype for ``ufunc`` of these operands, if numpy's ufunc gives it from operands
    of that dtype (kind: ``same`` dtype out, ``inexact`` dtype out, ``compare`` (bool out),
    ``dot`` (weak when both operands are, as JAX's ``dot_general``), ``power`` (inexact only:
    integer powers are JAX's ``integer_pow``, with its error for a negative exponent)). None
    while ranks may not be promoted implicitly, so that the ``fungraph.numpy`` function checks
    each call's shapes."""
    if RANK_PROMOTION.mode != "allow":
        return None
    try:
        dtype, weak = dtypes.join([mine[0], theirs[0]], [mine[1], theirs[1]])
    except TypeError:
        return None
    if kind == "inexact":
        dtype = dtypes.float_dtype_for(dtype)
    if kind == "power" and not dtypes.is_inexact(dtype):
        return None
    want = dtypes.bool_ if kind == "compare" else dtype
    for cast in (False, True):
        try:
            with np.errstate(all="ignore"):
                out = ufunc(np.ones(2, dtype), _probe(theirs, dtype, cast))
        except Exception:  # noqa: BLE001 - numpy refuses: the fungraph.numpy function decides
            return None
        if out.dtype == want:
            return _Plan(dtype, cast, weak)
    return None


def _cast(x: Any, dtype: np.dtype) -> Any:
    """``x``'s values as a numpy scalar or plain numpy array of ``dtype``: a ufunc of plain arrays
    skips the host array's ``__array_ufunc__`` lookup (``fungraph.array._NumpyUfuncHook``)."""
    if isinstance(x, np.generic):
        return x if x.dtype == dtype else x.astype(dtype)
    if type(x) is HostArray:
        x = x.view(np.ndarray)
    return x if x.dtype == dtype else x.astype(dtype)


def _scalar(x: Any, dtype: np.dtype) -> Any:
    """A Python scalar as an operand of ``dtype``: an int outside the range wraps, as JAX's."""
    if type(x) is int and dtype.kind in "iu":
        return np.asarray(x, dtypes.int64).astype(dtype)
    return np.asarray(x, dtype)


def _result(out: Any, weak: bool) -> Any:
    """numpy's result as a read-only :class:`HostArray` (0-d where numpy gives a scalar)."""
    if type(out) is HostArray:
        if type(out.base) is np.ndarray:
            out.base.setflags(False)
        out.setflags(False)
    else:
        out = hosted(np.asarray(out))
    if weak:
        out.weak_type = True
    return out


def _binary(name: str, ufunc: Any, fallback: Any, kind: str, reflected: bool) -> Any:
    """The operator ``name``: ``ufunc`` by the cached plan, else ``fallback`` (the
    ``fungraph.numpy`` function, arguments in the operator's order)."""

    def method(self: Any, other: Any) -> Any:
        theirs = _operand_key(other)
        if theirs is None:
            if not hasattr(other, "__array__") or getattr(other, "__array_priority__", 0) > self.__array_priority__:
                return NotImplemented  # as JAX's: the other operand's method decides (tracers, pytest.approx)
            return _hosted_result(fallback(other, self) if reflected else fallback(self, other))
        key = (name, self.dtype, self.weak_type, *theirs, dtypes.x64_enabled(), RANK_PROMOTION.mode,
               dtypes.PROMOTION.mode)
        plan = _PLANS.get(key, False)
        if plan is False:
            plan = _PLANS[key] = _make_plan(ufunc, kind, (self.dtype, self.weak_type), theirs)
        if plan is None:
            return _hosted_result(fallback(other, self) if reflected else fallback(self, other))
        a = _cast(self, plan.dtype)
        if theirs[2] is not None:
            b = _scalar(other, plan.dtype) if plan.cast_scalar else other
        else:
            b = _cast(other, plan.dtype)
        token = quiet()
        try:
            out = ufunc(b, a) if reflected else ufunc(a, b)
        except OverflowError:
            b = _scalar(other, plan.dtype)
            out = ufunc(b, a) if reflected else ufunc(a, b)
        except ValueError:
            # shapes that do not broadcast or contract: fungraph.numpy's error (a ShapeError, the
            # TypeError JAX raises for `@` and the ValueError it raises for broadcasting)
            return _hosted_result(fallback(other, self) if reflected else fallback(self, other))
        finally:
            restore(token)
        return _result(out, plan.weak)

    method.__name__ = name
    return method


def _unary(name: str, ufunc: Any, fallback: Any) -> Any:
    """A unary operator: ``ufunc`` where numpy keeps JAX's dtype, else ``fallback``."""
    plans: dict[np.dtype, bool] = {}

    def method(self: Any) -> Any:
        ok = plans.get(self.dtype)
        if ok is None:
            ok = plans[self.dtype] = _unary_ok(ufunc, self.dtype)
        if not ok:
            return _hosted_result(fallback(self))
        token = quiet()
        try:
            return _result(ufunc(self.view(np.ndarray)), self.weak_type)
        finally:
            restore(token)

    method.__name__ = name
    return method


def _unary_ok(ufunc: Any, dtype: np.dtype) -> bool:
    want = dtypes.real_for(dtype) if ufunc is np.absolute else dtype
    try:
        with np.errstate(all="ignore"):
            return ufunc(np.ones(2, dtype)).dtype == want
    except Exception:  # noqa: BLE001 - numpy refuses: the fungraph.numpy function decides
        return False


def _viewing(name: str) -> Any:
    """numpy's method ``name``, which gives a view (or a fresh copy) of the same dtype: as JAX's,
    read-only and as weak as the array."""
    numpy_method = getattr(np.ndarray, name)

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            out = numpy_method(self, *args, **kwargs)
        except np.exceptions.AxisError:
            raise
        except ValueError as err:
            raise ShapeError(f"{name}: {err}") from None
        if self.flags.writeable:
            return out
        return _result(out, self.weak_type)

    method.__name__ = name
    return method


def _viewing_property(name: str) -> property:
    getter = getattr(np.ndarray, name).__get__

    def get(self: Any) -> Any:
        out = getter(self)
        return out if self.flags.writeable else _result(out, self.weak_type)

    return property(get)


def _astype(self: Any, dtype: Any, *args: Any, **kwargs: Any) -> Any:
    """JAX's ``astype(dtype, copy=False, device=None)``: the dtype the mode has (a 64-bit one
    truncated with JAX's warning with x64 off); numpy's with numpy's own arguments."""
    numpy_only = args or any(k not in ("copy", "device") for k in kwargs)
    if self.flags.writeable or numpy_only:
        return np.ndarray.astype(self, dtype, *args, **kwargs)
    target = dtypes.canonicalize(dtype, "astype")
    out = dtypes.convert_values(self.view(np.ndarray), target)
    return _result(out, False)


def _jax_method(name: str, fn: Any) -> Any:
    """``fungraph.numpy``'s method ``fn`` on a read-only array; numpy's own method on a writeable
    one or when called with an ``out`` keyword, even ``out=None``: numpy's functions call the
    methods of their arguments so, with numpy's defaults (``np.take`` passes ``mode='raise'``)."""
    numpy_method = getattr(np.ndarray, name, None)

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if numpy_method is not None and (self.flags.writeable or "out" in kwargs):
            return numpy_method(self, *args, **kwargs)
        return _hosted_result(fn(self, *args, **kwargs))

    method.__name__ = name
    return method


#: dtypes whose reductions numpy computes as JAX does (float16 and the emulated floats accumulate
#: differently, complex extrema order differently: those take ``fungraph.numpy``'s)
_NUMPY_REDUCES = frozenset(d for d in dtypes.SUPPORTED if d.kind in "biuf" and d.itemsize >= 4 or d.kind in "biu")


def _reduction(name: str, slow: Any, rule: Any) -> Any:
    """The reduction method ``name`` as numpy's on the host values, with JAX's dtype (``rule`` of
    the array's dtype; None: numpy's own), where only ``axis`` and ``keepdims`` are given; else
    ``slow`` (the ``fungraph.numpy`` method)."""
    numpy_method = getattr(np.ndarray, name)

    def method(self: Any, axis: Any = None, *args: Any, **kwargs: Any) -> Any:
        if args or (kwargs and kwargs.keys() != {"keepdims"}) or self.dtype not in _NUMPY_REDUCES \
                or self.flags.writeable:
            return slow(self, axis, *args, **kwargs)
        target = rule(self.dtype)
        values = self.view(np.ndarray)
        if name in ("sum", "prod", "mean"):
            out = numpy_method(values, axis=axis, dtype=target, **kwargs)
        else:
            out = numpy_method(values, axis=axis, **kwargs)
            if target is not None:
                out = out.astype(target)
        return hosted(np.asarray(out))

    method.__name__ = name
    return method


def _hosted_result(out: Any) -> Any:
    if type(out) is np.ndarray:
        return hosted(out)
    if isinstance(out, np.generic):
        return hosted(np.asarray(out))
    return out


def _to_scalar(kind: type) -> Any:
    """``int(x)``, ``float(x)``, ``complex(x)``: of a 0-d array only, as JAX's."""

    def convert(self: Any) -> Any:
        if self.ndim:
            raise TypeError(f"Only scalar arrays can be converted to Python scalars; got arr.ndim={self.ndim}")
        value = self.view(np.ndarray)[()]
        if kind is not complex and self.dtype.kind == "c":
            raise TypeError(f"{kind.__name__}() argument must be a real number, not a complex {self.dtype.name} array")
        return kind(value)

    convert.__name__ = f"__{kind.__name__}__"
    return convert


def _pos(self: Any) -> Any:
    return self


def _dot(slow: Any) -> Any:
    """``x.dot(y)``: ``x @ y`` for vectors and matrices, where the two agree; else ``slow``."""

    def dot(self: Any, other: Any, *args: Any, **kwargs: Any) -> Any:
        if not args and not kwargs and 1 <= self.ndim <= 2 and isinstance(other, np.ndarray) and 1 <= other.ndim <= 2:
            return self @ other
        return slow(self, other, *args, **kwargs)

    return dot


#: operator name -> (numpy's ufunc, promotion kind, whether reflected)
_BINARY = {
    "__add__": (np.add, "same"), "__sub__": (np.subtract, "same"), "__mul__": (np.multiply, "same"),
    "__truediv__": (np.true_divide, "inexact"), "__floordiv__": (ew.floor_divide_p.impl, "same"),
    "__mod__": (ew.mod_p.impl, "same"), "__pow__": (np.power, "power"), "__matmul__": (np.matmul, "dot"),
    "__and__": (np.bitwise_and, "same"), "__or__": (np.bitwise_or, "same"), "__xor__": (np.bitwise_xor, "same"),
    "__lshift__": (np.left_shift, "same"), "__rshift__": (np.right_shift, "same"),
    "__lt__": (np.less, "compare"), "__le__": (np.less_equal, "compare"), "__gt__": (np.greater, "compare"),
    "__ge__": (np.greater_equal, "compare"), "__eq__": (np.equal, "compare"), "__ne__": (np.not_equal, "compare"),
}
_NO_REFLECTION = ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__")
_UNARY = {"__neg__": np.negative, "__abs__": np.absolute, "__invert__": np.invert}
#: numpy's own: ``copy`` and ``flatten`` make the writeable copies numpy's functions fill or sort in
#: place (``np.unique`` sorts ``x.flatten()``), ``item`` and ``tolist`` give Python values as JAX's
_NUMPY_KEPT = ("__getitem__", "copy", "flatten", "item", "tolist")
_VIEWS = ("reshape", "transpose", "ravel", "squeeze", "swapaxes")
_SCALAR_CONVERSIONS = {"__int__": int, "__float__": float, "__complex__": complex}


def _reduction_rules() -> dict[str, Any]:
    def same(dtype: np.dtype) -> None:
        return None

    def index(dtype: np.dtype) -> np.dtype:
        return dtypes.default_int()

    return {"sum": accumulating_dtype, "prod": accumulating_dtype, "mean": dtypes.float_dtype_for, "max": same,
            "min": same, "all": same, "any": same, "argmax": index, "argmin": index}


def install(methods: dict[str, Any]) -> None:
    """Give :class:`HostArray` JAX's operators and methods: ``methods`` are the ``fungraph.numpy``
    ones tracers get (operators under their dunder names). A donated (deleted) array refuses
    each of them with JAX's error, as it refuses numpy's."""
    installed: dict[str, Any] = {}

    def put(name: str, value: Any) -> None:
        setattr(HostArray, name, value)
        installed[name] = value

    for name, fn in methods.items():
        if name in _NUMPY_KEPT:
            continue
        if isinstance(fn, property):
            put(name, property(_jax_method(name, fn.fget)))
        elif name.startswith("__"):
            put(name, fn)
        else:
            put(name, _jax_method(name, fn))
    for name, (ufunc, kind) in _BINARY.items():
        forward = methods[name]
        put(name, _binary(name, ufunc, forward, kind, False))
        if name not in _NO_REFLECTION:
            rname = "__r" + name[2:]
            put(rname, _binary(rname, ufunc, forward, kind, True))
    for name, ufunc in _UNARY.items():
        put(name, _unary(name, ufunc, methods[name]))
    put("__pos__", _pos)
    for name in _VIEWS:
        put(name, _viewing(name))
    put("T", _viewing_property("T"))
    put("astype", _astype)
    put("dot", _dot(HostArray.dot))
    for name, rule in _reduction_rules().items():
        put(name, _reduction(name, getattr(HostArray, name), rule))
    for name, kind in _SCALAR_CONVERSIONS.items():
        put(name, _to_scalar(kind))
    for name, value in installed.items():
        refuse = DeletedHostArray._deleted
        setattr(DeletedHostArray, name, property(refuse) if isinstance(value, property) else refuse)

