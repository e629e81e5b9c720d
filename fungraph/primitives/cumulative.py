"""Cumulative sums along one axis, and associative scans. ``cumsum`` is linear: its derivative
is itself and its transpose is the cumulative sum taken the other way (``reverse``); every
other cumulative operation is an ``associative_scan`` of its binary function."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Primitive, ShapeError
from fungraph.ir import ShapedArray
from fungraph.primitives._batching import unary_params_batch
from fungraph.primitives._rules import aval, normalize_axis
from fungraph.primitives.shape import concatenate, rev, slice_
from fungraph.tree_util import tree_flatten, tree_unflatten


def _cumsum_impl(x: Any, *, axis: int, reverse: bool) -> np.ndarray:
    x = np.asarray(x)
    if reverse:
        return np.flip(np.cumsum(np.flip(x, axis), axis=axis, dtype=x.dtype), axis)
    return np.cumsum(x, axis=axis, dtype=x.dtype)


def _cumsum_aval(x: ShapedArray, *, axis: int, reverse: bool) -> ShapedArray:
    if x.dtype == dtypes.bool_:
        raise ShapeError(f"cumsum is not defined for bool operands (cast first), got {x}")
    if not 0 <= axis < x.ndim:
        raise ShapeError(f"cumsum: axis {axis} is out of bounds for {x}")
    return x


cumsum_p = Primitive("cumsum", impl=_cumsum_impl, abstract_eval=_cumsum_aval, arity=1, weak_from=None)
cumsum_p.jvp = lambda primals, tangents, *, axis, reverse: (                # d cumsum(x) = cumsum(dx)
    cumsum(primals[0], axis, reverse), cumsum(tangents[0], axis, reverse))
cumsum_p.transpose = lambda ct, x, *, axis, reverse: (cumsum(ct, axis, not reverse),)  # (L)^T = reversed L
cumsum_p.batch = unary_params_batch(cumsum_p, ("axis",))


def cumsum(x: Any, axis: int, reverse: bool = False) -> Any:
    axis = normalize_axis(int(axis), aval(x).ndim, "cumsum")
    return cumsum_p.bind(x, axis=axis, reverse=bool(reverse))


def _window(x: Any, axis: int, start: int, stop: int) -> Any:
    shape = aval(x).shape
    lo, hi = [0] * len(shape), list(shape)
    lo[axis], hi[axis] = start, stop
    return slice_(x, lo, hi, None)


def associative_scan(fn: Callable[[Any, Any], Any], elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """Inclusive scan of the associative ``fn`` along ``axis`` of every leaf of ``elems`` (a
    pytree of arrays), in ``ceil(log2 n)`` rounds of whole-array ``fn`` calls (Hillis and
    Steele): after round ``r`` each element combines the ``2^r`` elements ending at it, earlier
    ones on the left. Derivatives and batching come from ``fn``'s own rules. ``lax.associative_scan``
    and ``lax.cumprod``/``cummax``/... and ``numpy.cumprod`` are this function."""
    leaves, tree = tree_flatten(elems)
    if not leaves:
        return elems
    ndim = aval(leaves[0]).ndim
    if ndim == 0:
        raise ShapeError(f"associative_scan: needs arrays of at least one axis, got {aval(leaves[0])}")
    axis = axis % ndim
    n = aval(leaves[0]).shape[axis]
    if any(aval(v).ndim != ndim or aval(v).shape[axis] != n for v in leaves):
        raise ShapeError(f"associative_scan: leaves differ along axis {axis}: {[str(aval(v)) for v in leaves]}")
    if reverse:
        leaves = [rev(v, (axis,)) for v in leaves]
    shift = 1
    while shift < n:
        early = tree_unflatten(tree, [_window(v, axis, 0, n - shift) for v in leaves])
        late = tree_unflatten(tree, [_window(v, axis, shift, n) for v in leaves])
        combined, _ = tree_flatten(fn(early, late))
        leaves = [concatenate([_window(v, axis, 0, shift), c], axis) for v, c in zip(leaves, combined)]
        shift *= 2
    if reverse:
        leaves = [rev(v, (axis,)) for v in leaves]
    return tree_unflatten(tree, leaves)
