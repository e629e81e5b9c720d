"""Argument handling shared by the numpy API: weak Python scalars and dtype promotion, and the
small helpers of the functions composed of the public ones."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Tracer, to_concrete_dtype_array
from fungraph.ir import ShapedArray, aval_of
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh
from fungraph.primitives.elementwise import convert

_SCALARS = (bool, int, float, complex)


def is_weak(x: Any) -> bool:
    return isinstance(x, _SCALARS) and not isinstance(x, np.generic)


def asarray(x: Any) -> Any:
    """A tracer, or a numpy array of a supported dtype (lists and scalars converted)."""
    if isinstance(x, Tracer):
        return x
    if isinstance(x, (list, tuple)) and any(isinstance(e, Tracer) for e in _flat(x)):
        from fungraph.numpy._shape import stack

        return stack([asarray(e) for e in x])
    return to_concrete_dtype_array(x)


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [y for e in x for y in _flat(e)]
    return [x]


def aval(x: Any) -> ShapedArray:
    return aval_of(x) if not is_weak(x) else aval_of(np.asarray(x))


def promote(*args: Any, to_inexact: bool = False) -> list[Any]:
    """Bring operands to one dtype the numpy-2 way; ``to_inexact`` makes ints float64."""
    args = tuple(a if is_weak(a) or isinstance(a, Tracer) else asarray(a) for a in args)
    dtype = dtypes.result_type(*args)
    if to_inexact and not dtypes.is_inexact(dtype):
        dtype = dtypes.float64
    return [cast(a, dtype) for a in args]


def cast(x: Any, dtype: np.dtype) -> Any:
    if is_weak(x):
        return np.asarray(x, dtype=dtype)
    return convert(asarray(x), dtype)


def normalize_axes(axis: Any, ndim: int, name: str) -> tuple[int, ...]:
    from fungraph.primitives._rules import normalize_axis

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


# --- helpers of the functions composed of the public ones -----------------------------------------


def namespace() -> Any:
    import fungraph.numpy as fnp

    return fnp


def is_concrete(x: Any) -> bool:
    return not isinstance(x, Tracer)


def int_array(x: Any, name: str) -> Any:
    a = asarray(x)
    if not (dtypes.is_int(a.dtype) or a.dtype == dtypes.bool_):
        raise TypeError(f"{name}: needs integer operands, got {a.dtype}")
    return a


def int_pair(x1: Any, x2: Any, name: str) -> tuple[Any, Any]:
    """Both integer operands broadcast to their promoted dtype (a Python int is weak, NEP 50:
    ``int32_array >> 1`` stays int32)."""
    int_array(x1, name), int_array(x2, name)
    a, b = promote(x1, x2)
    return tuple(namespace().broadcast_arrays(asarray(a), asarray(b)))


def real_inexact(name: str, *xs: Any) -> list[Any]:
    out = promote(*xs, to_inexact=True)
    if dtypes.is_complex(out[0].dtype):
        raise TypeError(f"{name}: complex operands are not supported, got {out[0].dtype}")
    return [asarray(x) for x in out]


def flat_or_axis(a: Any, axis: int | None, name: str) -> tuple[Any, int]:
    x = asarray(a)
    if axis is None:
        return sh.reshape(x, (x.size,)), 0
    (ax,) = normalize_axes(axis, x.ndim, name)
    return x, ax


def take_static(x: Any, i: int, axis: int) -> Any:
    lo = [0] * x.ndim
    hi = list(x.shape)
    lo[axis], hi[axis] = i, i + 1
    return sh.reshape(sh.slice_(x, lo, hi, None), x.shape[:axis] + x.shape[axis + 1:])


def nan_to(x: Any, value: float) -> Any:
    if not dtypes.is_inexact(x.dtype):
        return x
    return ew.select(ew.ne_p.bind(x, x), np.asarray(value, x.dtype), x)
