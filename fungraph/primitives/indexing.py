"""Integer-array indexing along one axis (``take``) and its transpose (``scatter_add``).

Negative indices count from the end as in numpy; out-of-range indices are clamped, as JAX
does, because a staged program cannot raise on data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Primitive, ShapeError
from fungraph.ir import ShapedArray
from fungraph.primitives._rules import aval, is_undefined, normalize_axis


def _normalize_indices(idx: Any, n: int) -> np.ndarray:
    idx = np.asarray(idx)
    return np.clip(np.where(idx < 0, idx + n, idx), 0, max(n - 1, 0))


def _take_aval(x: ShapedArray, idx: ShapedArray, *, axis: int) -> ShapedArray:
    if not dtypes.is_int(idx.dtype):
        raise ShapeError(f"take: indices must be integers, got {idx}")
    normalize_axis(axis, x.ndim, "take")
    if x.shape[axis] == 0 and idx.size:
        raise ShapeError(f"take: cannot index into the empty axis {axis} of {x}")
    return ShapedArray(x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype)


def _take_impl(x: Any, idx: Any, *, axis: int) -> np.ndarray:
    x = np.asarray(x)
    return np.take(x, _normalize_indices(idx, x.shape[axis]), axis=axis)


take_p = Primitive("take", impl=_take_impl, abstract_eval=_take_aval, arity=2)


@take_p.def_jvp
def _take_jvp(primals: tuple, tangents: tuple, *, axis: int) -> tuple:
    x, idx = primals
    return take(x, idx, axis), take(tangents[0], idx, axis)


@take_p.def_transpose
def _take_transpose(ct: Any, x: Any, idx: Any, *, axis: int) -> tuple:
    assert is_undefined(x) and not is_undefined(idx)
    return scatter_add(ct, idx, axis, aval(x).shape), None


def take(x: Any, idx: Any, axis: int) -> Any:
    return take_p.bind(x, idx, axis=int(axis))


def _scatter_aval(upd: ShapedArray, idx: ShapedArray, *, axis: int, shape: tuple[int, ...]) -> ShapedArray:
    expected = shape[:axis] + idx.shape + shape[axis + 1:]
    if upd.shape != expected or not dtypes.is_int(idx.dtype):
        raise ShapeError(f"scatter_add into shape {shape} along axis {axis}: updates {upd} and indices {idx} "
                         f"do not fit (expected updates of shape {expected})")
    return ShapedArray(shape, upd.dtype)


def _scatter_impl(upd: Any, idx: Any, *, axis: int, shape: tuple[int, ...]) -> np.ndarray:
    upd = np.asarray(upd)
    out = np.zeros(shape, upd.dtype)
    idx = _normalize_indices(idx, shape[axis])
    moved = np.moveaxis(out, axis, 0)
    upd_moved = np.moveaxis(upd.reshape(shape[:axis] + (idx.size,) + shape[axis + 1:]), axis, 0)
    np.add.at(moved, idx.reshape(-1), upd_moved)
    return out


scatter_add_p = Primitive("scatter_add", impl=_scatter_impl, abstract_eval=_scatter_aval, arity=2)


@scatter_add_p.def_jvp
def _scatter_jvp(primals: tuple, tangents: tuple, *, axis: int, shape: tuple[int, ...]) -> tuple:
    upd, idx = primals
    return scatter_add(upd, idx, axis, shape), scatter_add(tangents[0], idx, axis, shape)


scatter_add_p.transpose = lambda ct, upd, idx, *, axis, shape: (take(ct, idx, axis), None)


def scatter_add(upd: Any, idx: Any, axis: int, shape: tuple[int, ...]) -> Any:
    return scatter_add_p.bind(upd, idx, axis=int(axis), shape=tuple(int(d) for d in shape))
