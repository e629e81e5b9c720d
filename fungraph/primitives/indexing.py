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


# batching rules -------------------------------------------------------------------------


def _normalize_traced(idx: Any, n: int) -> Any:
    from fungraph.primitives.elementwise import add, convert, lt, max_p, min_p, select

    idx = convert(idx, dtypes.int64)
    zero = np.asarray(0, np.int64)
    wrapped = select(lt(idx, zero), add(idx, np.asarray(n, np.int64)), idx)
    return min_p.bind(max_p.bind(wrapped, zero), np.asarray(max(n - 1, 0), np.int64))


def _offsets(size: int, n: int, rank: int) -> np.ndarray:
    return (np.arange(size, dtype=np.int64) * n).reshape((size,) + (1,) * rank)


def _batch_take(args: Any, dims: Any, *, axis: int) -> tuple[Any, int]:
    from fungraph.primitives._batching import batch_size, broadcast_batch, to_front
    from fungraph.primitives.elementwise import add
    from fungraph.primitives.shape import reshape, transpose

    x, idx = args
    dx, di = dims
    if di is None:
        return take(to_front(x, dx), idx, axis + 1), 0
    size = batch_size(args, dims)
    xb = broadcast_batch(x, dx, size)
    ib = to_front(idx, di)
    xs = aval(xb).shape
    n = xs[axis + 1]
    moved = transpose(xb, (0, axis + 1) + tuple(i for i in range(1, len(xs)) if i != axis + 1))
    rest = xs[1:axis + 1] + xs[axis + 2:]
    flat = reshape(moved, (size * n,) + rest)
    k = aval(ib).ndim - 1
    fi = add(_normalize_traced(ib, n), _offsets(size, n, k))
    out = take(flat, fi, 0)
    perm = (0,) + tuple(range(k + 1, k + 1 + axis)) + tuple(range(1, k + 1)) + tuple(
        range(k + 1 + axis, aval(out).ndim))
    return transpose(out, perm), 0


def _batch_scatter(args: Any, dims: Any, *, axis: int, shape: tuple[int, ...]) -> tuple[Any, int]:
    from fungraph.primitives._batching import batch_size, broadcast_batch, to_front
    from fungraph.primitives.elementwise import add
    from fungraph.primitives.shape import reshape, transpose

    upd, idx = args
    du, di = dims
    size = batch_size(args, dims)
    if di is None:
        return scatter_add(broadcast_batch(upd, du, size), idx, axis + 1, (size,) + shape), 0
    ub = broadcast_batch(upd, du, size)
    ib = to_front(idx, di)
    k = aval(ib).ndim - 1
    n = shape[axis]
    nd = aval(ub).ndim
    # updates are (B, pre, idx..., post): bring the index axes right after the batch axis
    perm = (0,) + tuple(range(1 + axis, 1 + axis + k)) + tuple(range(1, 1 + axis)) + tuple(range(1 + axis + k, nd))
    moved = transpose(ub, perm)
    rest = shape[:axis] + shape[axis + 1:]
    fi = add(_normalize_traced(ib, n), _offsets(size, n, k))
    flat = scatter_add(moved, fi, 0, (size * n,) + rest)
    out = reshape(flat, (size, n) + rest)
    r = len(rest)
    back = (0,) + tuple(range(2, 2 + axis)) + (1,) + tuple(range(2 + axis, 2 + r))
    return transpose(out, back), 0


take_p.batch = _batch_take
scatter_add_p.batch = _batch_scatter
