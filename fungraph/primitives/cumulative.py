"""Cumulative sums along one axis. ``cumsum`` is linear: its derivative is itself and its
transpose is the cumulative sum taken the other way (``reverse``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Primitive, ShapeError
from fungraph.ir import ShapedArray
from fungraph.primitives._batching import unary_params_batch
from fungraph.primitives._rules import aval, normalize_axis
from fungraph.primitives.shape import pad, slice_


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


cumsum_p = Primitive("cumsum", impl=_cumsum_impl, abstract_eval=_cumsum_aval, arity=1)
cumsum_p.jvp = lambda primals, tangents, *, axis, reverse: (                # d cumsum(x) = cumsum(dx)
    cumsum(primals[0], axis, reverse), cumsum(tangents[0], axis, reverse))
cumsum_p.transpose = lambda ct, x, *, axis, reverse: (cumsum(ct, axis, not reverse),)  # (L)^T = reversed L
cumsum_p.batch = unary_params_batch(cumsum_p, ("axis",))


def cumsum(x: Any, axis: int, reverse: bool = False) -> Any:
    axis = normalize_axis(int(axis), aval(x).ndim, "cumsum")
    return cumsum_p.bind(x, axis=axis, reverse=bool(reverse))


def associative_scan(op: Any, x: Any, axis: int, identity: Any) -> Any:
    """Inclusive scan of ``op`` along ``axis`` by doubling (Hillis-Steele): ``log2 n`` shifted
    applications of ``op``, so derivatives and batching come from ``op``'s own rules."""

    shape = aval(x).shape
    n = shape[axis]
    fill = np.asarray(identity, aval(x).dtype)
    shift = 1
    while shift < n:
        hi = list(shape)
        hi[axis] = n - shift
        config = [(0, 0, 0)] * len(shape)
        config[axis] = (shift, 0, 0)
        x = op(x, pad(slice_(x, (0,) * len(shape), hi, None), fill, config))
        shift *= 2
    return x
