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
from fungraph.primitives.shape import broadcast_in_dim, concatenate, reshape, rev, slice_
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


def _window(x: Any, axis: int, start: int, stop: int | None, stride: int = 1) -> Any:
    shape = aval(x).shape
    lo, hi, st = [0] * len(shape), list(shape), [1] * len(shape)
    lo[axis], st[axis] = start, stride
    hi[axis] = shape[axis] if stop is None else stop % shape[axis] if stop < 0 else stop
    return slice_(x, lo, hi, st)


def _interleave(evens: Any, odds: Any, axis: int) -> Any:
    """``evens[0], odds[0], evens[1], ...`` along ``axis`` (``evens`` may be one longer)."""
    shape = aval(evens).shape
    n_odd = aval(odds).shape[axis]
    if n_odd < shape[axis]:
        odds = concatenate([odds, _window(evens, axis, 0, 1)], axis)
    pairs = [broadcast_in_dim(v, (*shape[:axis + 1], 1, *shape[axis + 1:]),
                              tuple(d if d <= axis else d + 1 for d in range(len(shape)))) for v in (evens, odds)]
    merged = reshape(concatenate(pairs, axis + 1), (*shape[:axis], 2 * shape[axis], *shape[axis + 1:]))
    return _window(merged, axis, 0, shape[axis] + n_odd)


def _odd_even_scan(combine: Callable[[list[Any], list[Any]], list[Any]], leaves: list[Any], axis: int) -> list[Any]:
    n = aval(leaves[0]).shape[axis]
    if n < 2:
        return leaves
    pairs = combine([_window(v, axis, 0, -1, 2) for v in leaves], [_window(v, axis, 1, None, 2) for v in leaves])
    odds = _odd_even_scan(combine, pairs, axis)
    if n % 2 == 0:
        evens = combine([_window(v, axis, 0, -1) for v in odds], [_window(v, axis, 2, None, 2) for v in leaves])
    else:
        evens = combine(odds, [_window(v, axis, 2, None, 2) for v in leaves])
    evens = [concatenate([_window(v, axis, 0, 1), e], axis) for v, e in zip(leaves, evens)]
    return [_interleave(e, o, axis) for e, o in zip(evens, odds)]


def associative_scan(fn: Callable[[Any, Any], Any], elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """Inclusive scan of the associative ``fn`` along ``axis`` of every leaf of ``elems`` (a
    pytree of arrays) by JAX's recursion: combine adjacent pairs, scan those, then fill in the
    even positions; the same calls of ``fn`` on the same operands as JAX, so rounding and the
    derivative's split at ties (``cummax``) agree with JAX's. Derivatives and batching come from
    ``fn``'s own rules. ``lax.associative_scan`` and ``lax.cumprod``/``cummax``/... and
    ``numpy.cumprod`` are this function."""
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

    def combine(a: list[Any], b: list[Any]) -> list[Any]:
        out, _ = tree_flatten(fn(tree_unflatten(tree, a), tree_unflatten(tree, b)))
        return out

    if reverse:
        leaves = [rev(v, (axis,)) for v in leaves]
    leaves = _odd_even_scan(combine, leaves, axis)
    if reverse:
        leaves = [rev(v, (axis,)) for v in leaves]
    return tree_unflatten(tree, leaves)
