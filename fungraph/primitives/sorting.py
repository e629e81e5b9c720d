"""Sorting along one axis. ``sort``'s derivative gathers the tangent with the sorting
permutation (``argsort``, stable, NaNs last as in numpy), so it is linear in the tangent and
reverse mode scatters cotangents back through the same permutation."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import NOT_DIFFERENTIABLE, Primitive, ShapeError
from fungraph.ir import ShapedArray
from fungraph.primitives._batching import unary_params_batch
from fungraph.primitives._rules import aval, normalize_axis
from fungraph.primitives.elementwise import add, convert
from fungraph.primitives.indexing import take
from fungraph.primitives.shape import reshape, transpose


def _check_axis(name: str, x: ShapedArray, axis: int) -> None:
    if not 0 <= axis < x.ndim:
        raise ShapeError(f"{name}: axis {axis} is out of bounds for {x}")


def _sort_aval(x: ShapedArray, *, axis: int) -> ShapedArray:
    _check_axis("sort", x, axis)
    return x


def _argsort_aval(x: ShapedArray, *, axis: int) -> ShapedArray:
    _check_axis("argsort", x, axis)
    return ShapedArray(x.shape, dtypes.int64)


sort_p = Primitive("sort", impl=lambda x, *, axis: np.sort(x, axis=axis, kind="stable"),
                   abstract_eval=_sort_aval, arity=1, weak_from=(0,))
argsort_p = Primitive("argsort", impl=lambda x, *, axis: np.argsort(x, axis=axis, kind="stable").astype(np.int64),
                      abstract_eval=_argsort_aval, arity=1, jvp=NOT_DIFFERENTIABLE)


@sort_p.def_jvp
def _sort_jvp(primals: tuple, tangents: tuple, *, axis: int) -> tuple:
    (x,), (t,) = primals, tangents
    perm = argsort(x, axis)
    return sort(x, axis), gather_along_axis(t, perm, axis)           # d sort(x) = dx[argsort(x)]


sort_p.batch = unary_params_batch(sort_p, ("axis",))
argsort_p.batch = unary_params_batch(argsort_p, ("axis",))


def sort(x: Any, axis: int) -> Any:
    return sort_p.bind(x, axis=normalize_axis(int(axis), aval(x).ndim, "sort"))


def argsort(x: Any, axis: int) -> Any:
    return argsort_p.bind(x, axis=normalize_axis(int(axis), aval(x).ndim, "argsort"))


def gather_along_axis(x: Any, idx: Any, axis: int) -> Any:
    """``x`` gathered along ``axis`` with (in-range) indices of ``x``'s shape but for that axis's
    length: one flat ``take``."""

    shape = aval(x).shape
    nd = len(shape)
    perm = tuple(i for i in range(nd) if i != axis) + (axis,)
    n, k = shape[axis], aval(idx).shape[axis]
    rows = int(np.prod([shape[i] for i in perm[:-1]], dtype=np.int64))
    moved_shape = tuple(shape[i] for i in perm[:-1]) + (k,)
    flat_x = reshape(transpose(x, perm), (rows * n,))
    index_dtype = dtypes.canonicalize(np.int64)
    offsets = (np.arange(rows, dtype=index_dtype) * n).reshape(rows, 1)
    moved_idx = reshape(transpose(idx, perm), (rows, k))
    if aval(moved_idx).dtype != index_dtype:  # argsort's int64 positions, with x64 off
        moved_idx = convert(moved_idx, index_dtype)
    flat_idx = add(moved_idx, offsets)
    out = reshape(take(flat_x, flat_idx, 0), moved_shape)
    return transpose(out, tuple(int(i) for i in np.argsort(perm)))
