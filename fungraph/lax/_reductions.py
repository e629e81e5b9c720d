"""``jax.lax``'s reductions over named axes, cumulative reductions and associative scans, and
sorting (``sort``, ``top_k``, ``approx_max_k``, exact): each binds the primitives ``fungraph.numpy``
binds (``lax.cumsum`` is the ``cumsum`` primitive; the other cumulative reductions are the one
``associative_scan``)."""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.array import hosted
from fungraph.ir import aval_of
from fungraph.lax import _bits as lax_bits
from fungraph.lax._elementwise import _floats, check_accepts
from fungraph.lax._elementwise import max as lax_max
from fungraph.lax._elementwise import min as lax_min
from fungraph.lax._linalg import _no_sharding
from fungraph.primitives import cumulative, sorting
from fungraph.primitives import elementwise as ew
from fungraph.primitives import reductions as red
from fungraph.primitives import shape as sh
from fungraph.primitives.operands import asarray, cast, normalize_axes
from fungraph.tree_util import tree_flatten, tree_unflatten

# --- reductions -----------------------------------------------------------------------------------


def reduce_sum(operand: Any, axes: Sequence[int], *, out_sharding: Any = None) -> Any:
    """``lax.reduce_sum``: over ``axes``, keeping the dtype."""
    _no_sharding("reduce_sum", out_sharding)
    x = asarray(operand)
    return red.reduce_sum(x, normalize_axes(tuple(axes), aval_of(x).ndim, "reduce_sum")) if len(axes) else x


def reduce_prod(operand: Any, axes: Sequence[int]) -> Any:
    """``lax.reduce_prod``: over ``axes``, keeping the dtype."""
    x = asarray(operand)
    if not len(axes):
        return x
    ax = normalize_axes(tuple(axes), aval_of(x).ndim, "reduce_prod")
    if aval_of(x).dtype == dtypes.bool_:
        return cast(red.reduce_prod(cast(x, dtypes.int32), ax), dtypes.bool_)
    return red.reduce_prod(x, ax)


def _extremum(name: str, prim: Any, largest: bool) -> Callable[[Any, Sequence[int]], Any]:
    def op(operand: Any, axes: Sequence[int]) -> Any:
        x = asarray(operand)
        if not len(axes):
            return x
        ax = tuple(sorted(normalize_axes(tuple(axes), aval_of(x).ndim, name)))
        if dtypes.is_complex(aval_of(x).dtype):
            return red.complex_extremum(x, ax, largest, name)
        return prim.bind(x, axes=ax)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"``lax.{name}``: over ``axes``, keeping the dtype (complex operands in numpy's "
                  "lexicographic order).")
    return op


reduce_max = _extremum("reduce_max", red.reduce_max_p, True)
reduce_min = _extremum("reduce_min", red.reduce_min_p, False)


def _logical(name: str, prim: Any, empty: bool, bitwise: Any) -> Callable[[Any, Sequence[int]], Any]:
    def op(operand: Any, axes: Sequence[int]) -> Any:
        x = asarray(operand)
        if aval_of(x).dtype != dtypes.bool_:
            return lax_bits.fold_bitwise(name, bitwise, -1 if empty else 0, x, axes)
        if not len(axes):
            return x
        shape = aval_of(x).shape
        ax = tuple(sorted(normalize_axes(tuple(axes), len(shape), name)))
        if 0 in [shape[i] for i in ax]:
            return hosted(np.full(tuple(d for i, d in enumerate(shape) if i not in ax), empty))
        return prim.bind(x, axes=ax)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"``lax.{name}``: of a bool operand's values over ``axes`` ({empty} over none), of an "
                  "integer operand's bits (as JAX's)")
    return op


reduce_and = _logical("reduce_and", red.reduce_min_p, True, ew.and_p)
reduce_or = _logical("reduce_or", red.reduce_max_p, False, ew.or_p)


def _arg(prim: Any, name: str, operand: Any, axis: int, index_dtype: Any) -> Any:
    x = asarray(operand)
    (ax,) = normalize_axes(axis, aval_of(x).ndim, name)
    return prim.bind(x, axis=ax, index_dtype=dtypes.canonicalize(index_dtype))


def argmax(operand: Any, axis: int, index_dtype: Any) -> Any:
    return _arg(red.argmax_p, "argmax", operand, axis, index_dtype)


def argmin(operand: Any, axis: int, index_dtype: Any) -> Any:
    return _arg(red.argmin_p, "argmin", operand, axis, index_dtype)


# --- cumulative reductions and scans --------------------------------------------------------------


def _cumulative(name: str, combine: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def op(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
        x = asarray(operand)
        check_accepts(name, "iufc", x)
        out = associative_scan(combine, x, reverse=reverse, axis=axis)
        return ew.weak(out) if dtypes.is_weak(x) else out  # one primitive in JAX, weak as its operand

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``lax.{name}``: inclusive running {name[3:]} along ``axis`` (``reverse``: from the end)."
    return op


def cumsum(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """``lax.cumsum``: inclusive running sum along ``axis`` (``reverse``: from the end), the
    ``cumsum`` primitive that ``numpy.cumsum`` binds."""
    x = asarray(operand)
    check_accepts("cumsum", "iufc", x)
    return cumulative.cumsum(x, axis, reverse)


cumprod = _cumulative("cumprod", lambda a, b: a * b)
cummax = _cumulative("cummax", lax_max)
cummin = _cumulative("cummin", lax_min)
cumlogsumexp = _cumulative("cumlogsumexp", ew.logaddexp)


def associative_scan(fn: Callable[[Any, Any], Any], elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """Inclusive scan of the associative ``fn`` along ``axis`` of every leaf of ``elems``
    (:func:`fungraph.primitives.cumulative.associative_scan`, the one ``numpy.cumprod`` uses)."""
    leaves, tree = tree_flatten(elems)
    return cumulative.associative_scan(fn, tree_unflatten(tree, [asarray(v) for v in leaves]), reverse, axis)


# --- sorting --------------------------------------------------------------------------------------


def _take_along(x: Any, order: Any, axis: int) -> Any:
    return sorting.gather_along_axis(x, order, axis % len(aval_of(x).shape))


def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """``operand`` sorted along ``dimension``; a sequence of operands is sorted by its first
    ``num_keys`` (lexicographically, stable) and returned as a tuple."""
    if not isinstance(operand, (list, tuple)):
        return sorting.sort(asarray(operand), dimension)
    xs = [asarray(x) for x in operand]
    if not 1 <= num_keys <= len(xs):
        raise ValueError(f"lax.sort: num_keys={num_keys} for {len(xs)} operands")
    if len({aval_of(x).shape for x in xs}) > 1:
        raise TypeError(f"Arguments to sort must have equal shapes, got: {' '.join(str(aval_of(x)) for x in xs)}")
    order = None
    for key in reversed(xs[:num_keys]):
        k = key if order is None else _take_along(key, order, dimension)
        step = sorting.argsort(k, dimension)
        order = step if order is None else _take_along(order, step, dimension)
    return tuple(_take_along(x, order, dimension) for x in xs)


def top_k(operand: Any, k: int, *, axis: int = -1) -> list[Any]:
    """The ``k`` largest entries along ``axis``, largest first (ties: lower index first), and
    their int32 indices, as a two-item list (JAX returns its primitive's list of results)."""
    x = asarray(operand)
    shape = aval_of(x).shape
    k = _static_count("top_k", "k", k)
    if not shape:
        raise TypeError(f"lax.top_k: the operand must have >= 1 dimension, got {aval_of(x)}")
    ax = normalize_axes(axis, len(shape), "top_k")[0]
    d = shape[ax]
    if not 0 <= k <= d:
        raise ValueError(f"lax.top_k: k={k} outside [0, {d}] for {aval_of(x)} along axis {axis}")
    key = ew.neg(x) if dtypes.is_inexact(aval_of(x).dtype) else ew.not_p.bind(x)
    order = sorting.argsort(key, ax)
    idx = sh.slice_(order, [0] * len(shape), shape[:ax] + (k,) + shape[ax + 1:], None)
    return [_take_along(x, idx, ax), cast(idx, dtypes.int32)]


def sort_key_val(keys: Any, values: Any, dimension: int = -1, is_stable: bool = True) -> tuple[Any, Any]:
    """``keys`` sorted along ``dimension`` and ``values`` in the same order. Both are arrays:
    Python scalars and lists are refused, as JAX refuses them."""
    for name, v in (("keys", keys), ("values", values)):
        if isinstance(v, (bool, int, float, complex, list, tuple)):
            raise TypeError(f"lax.sort_key_val: {name} must be an array, got {type(v).__name__} {v!r}")
    return sort((keys, values), dimension, is_stable, 1)


def _static_count(fn: str, name: str, value: Any) -> int:
    """``value`` as a Python int, for a parameter JAX takes as a static integer (a float is refused)."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"lax.{fn}: {name} must be a static integer, got {type(value).__name__} {value!r}") from None


def _approx_k(name: str, operand: Any, k: int, reduction_dimension: int, largest: bool) -> tuple[Any, Any]:
    (x,) = _floats(name, operand)
    nd = len(aval_of(x).shape)
    axis = int(reduction_dimension) % builtins.max(nd, 1)
    last = tuple(i for i in range(nd) if i != axis) + (axis,)
    back = tuple(int(i) for i in np.argsort(last))
    moved = sh.transpose(x, last)
    values, idx = top_k(moved if largest else ew.neg(moved), k)
    values = values if largest else ew.neg(values)
    return sh.transpose(values, back), sh.transpose(idx, back)


def approx_max_k(operand: Any, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True) -> tuple[Any, Any]:
    """The ``k`` largest values along ``reduction_dimension`` and their int32 indices, found
    exactly (recall 1, so the recall target and size override are met and unused)."""
    return _approx_k("approx_max_k", operand, k, reduction_dimension, True)


def approx_min_k(operand: Any, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True) -> tuple[Any, Any]:
    """The ``k`` smallest values along ``reduction_dimension`` and their int32 indices, exactly."""
    return _approx_k("approx_min_k", operand, k, reduction_dimension, False)
