"""Operands as the primitives take them: weak Python scalars, conversion to arrays, and numpy-2
(NEP 50) promotion. Shared by ``lax`` and ``numpy``, so both convert arguments one way."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError, Tracer, to_concrete_dtype_array, weak_array, weakened
from fungraph.ir import ShapedArray, aval_of
from fungraph.primitives import shape as sh
from fungraph.primitives._rules import normalize_axis
from fungraph.primitives.elementwise import convert

_SCALARS = (bool, int, float, complex)


def is_weak(x: Any) -> bool:
    return isinstance(x, _SCALARS) and not isinstance(x, np.generic)


def asarray(x: Any) -> Any:
    """A tracer, or a numpy array of a supported dtype (lists and scalars converted)."""
    if isinstance(x, Tracer) or dtypes.is_weak(x) and isinstance(x, np.ndarray) and x.dtype in dtypes.enabled():
        return x
    if isinstance(x, (list, tuple)) and any(isinstance(e, Tracer) for e in _flat(x)):
        return _stack([asarray(e) for e in x])
    return to_concrete_dtype_array(x)


def weak_asarray(x: Any) -> Any:
    """``asarray(x)``, weakly typed for a Python scalar, as JAX converts one."""
    return weak_array(asarray(x)) if is_weak(x) else asarray(x)


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [y for e in x for y in _flat(e)]
    return [x]


def _stack(arrays: list[Any]) -> Any:
    """The arrays promoted to one dtype and stacked along a new leading axis."""
    if len(arrays) == 0:
        raise ValueError("need at least one array to stack")
    xs = [asarray(x) for x in promote(*arrays)]
    shapes = {aval_of(x).shape for x in xs}
    if len(shapes) != 1:
        raise ShapeError(f"stack: all input arrays must have the same shape, got {[aval_of(x).shape for x in xs]}")
    return sh.concatenate([sh.reshape(x, (1,) + aval_of(x).shape) for x in xs], axis=0)


def aval(x: Any) -> ShapedArray:
    return aval_of(x) if not is_weak(x) else aval_of(np.asarray(x))


def promote(*args: Any, to_inexact: bool = False, to_numeric: bool = False) -> list[Any]:
    """Bring operands to one dtype by JAX's promotion; ``to_inexact`` makes bools and integers
    JAX's inexact dtype for them (``dtypes.float_dtype_for``), ``to_numeric`` bools int32 (JAX's
    ``promote_args_numeric``)."""
    args = tuple(a if is_weak(a) or isinstance(a, Tracer) or dtypes.is_weak(a) else asarray(a) for a in args)
    dtype = dtypes.result_type(*args)
    if to_inexact:
        dtype = dtypes.float_dtype_for(dtype)
    elif to_numeric and dtype == dtypes.bool_:
        dtype = dtypes.int32
    return [_promoted(a, dtype) for a in args]


def cast(x: Any, dtype: np.dtype) -> Any:
    if is_weak(x):
        return np.asarray(x, dtype=dtype)
    return convert(asarray(x), dtype)


def _promoted(x: Any, dtype: np.dtype) -> Any:
    """``x`` as ``dtype``, weak where ``x`` is (a Python scalar, a weak array): JAX's promotion
    keeps the weak type, so an elementwise result of weak operands alone is weak too."""
    if not dtypes.is_weak(x):
        return cast(x, dtype)
    if is_weak(x):
        return weak_array(np.asarray(x, dtype=dtype))
    out = convert(asarray(x), dtype)
    if out is x:
        return x
    return weakened(out) if isinstance(out, Tracer) else weak_array(np.asarray(out))


def normalize_axes(axis: Any, ndim: int, name: str) -> tuple[int, ...]:
    """``axis`` (None: all, an int or a sequence) as distinct non-negative axes of a rank-``ndim`` array."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        axes = tuple(normalize_axis(_int(a, f"{name}: axis"), ndim, name) for a in axis)
    else:
        axes = (normalize_axis(_int(axis, f"{name}: axis"), ndim, name),)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{name}: repeated axis in {axis}")
    return axes


def _int(x: Any, what: str) -> int:
    """``x`` as an int; a traced value, or a float such as 1.7 (as JAX: not truncated), is a
    ``TypeError``."""
    if isinstance(x, Tracer):
        raise TypeError(f"{what} must be a concrete integer, got a traced value {x.aval}")
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {x!r} of type {type(x).__name__}") from None


def take_static(x: Any, i: int, axis: int) -> Any:
    """``x``'s slice ``i`` along ``axis`` (a concrete index), that axis removed."""
    lo = [0] * x.ndim
    hi = list(x.shape)
    lo[axis], hi[axis] = i, i + 1
    return sh.reshape(sh.slice_(x, lo, hi, None), x.shape[:axis] + x.shape[axis + 1:])
