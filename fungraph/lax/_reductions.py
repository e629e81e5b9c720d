"""``jax.lax``'s reductions over named axes, cumulative reductions and associative scans, and
sorting (``sort``, ``top_k``, ``approx_max_k``, exact): each binds the primitives ``fungraph.numpy``
binds (``lax.cumsum`` is the ``cumsum`` primitive; the other cumulative reductions are the one
``associative_scan``)."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph.ir import aval_of
from fungraph.lax._elementwise import _floats
from fungraph.lax._slicing import _axis_window
from fungraph.numpy._util import asarray, cast
from fungraph.primitives import cumulative
from fungraph.tree_util import tree_flatten, tree_unflatten

# --- reductions -----------------------------------------------------------------------------------


def _keep(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its result cast back to the first operand's dtype (numpy widens ints)."""
    return lambda x, *rest: cast(fn(x, *rest), aval_of(asarray(x)).dtype)


def _reducer(name: str, fn_name: str) -> Callable[[Any, Sequence[int]], Any]:
    def op(operand: Any, axes: Sequence[int]) -> Any:
        x = asarray(operand)
        return getattr(fnp, fn_name)(x, axis=tuple(axes)) if len(axes) else x

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``lax.{name}``: over ``axes``, keeping the dtype."
    return op


reduce_sum = _keep(_reducer("reduce_sum", "sum"))
reduce_prod = _keep(_reducer("reduce_prod", "prod"))
reduce_max = _reducer("reduce_max", "max")
reduce_min = _reducer("reduce_min", "min")
reduce_and = _reducer("reduce_and", "all")
reduce_or = _reducer("reduce_or", "any")


def argmax(operand: Any, axis: int, index_dtype: Any) -> Any:
    return cast(fnp.argmax(asarray(operand), axis=int(axis)), dtypes.canonicalize(index_dtype))


def argmin(operand: Any, axis: int, index_dtype: Any) -> Any:
    return cast(fnp.argmin(asarray(operand), axis=int(axis)), dtypes.canonicalize(index_dtype))


# --- cumulative reductions and scans --------------------------------------------------------------


def _cumulative(name: str, combine: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def op(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
        return associative_scan(combine, asarray(operand), reverse=reverse, axis=axis)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``lax.{name}``: inclusive running {name[3:]} along ``axis`` (``reverse``: from the end)."
    return op


def _logaddexp(a: Any, b: Any) -> Any:
    return fnp.logaddexp(a, b)


def cumsum(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """``lax.cumsum``: inclusive running sum along ``axis`` (``reverse``: from the end), the
    ``cumsum`` primitive that ``numpy.cumsum`` binds."""
    return cumulative.cumsum(asarray(operand), axis, reverse)


cumprod = _cumulative("cumprod", lambda a, b: a * b)
cummax = _cumulative("cummax", lambda a, b: fnp.maximum(a, b))
cummin = _cumulative("cummin", lambda a, b: fnp.minimum(a, b))
cumlogsumexp = _cumulative("cumlogsumexp", _logaddexp)


def associative_scan(fn: Callable[[Any, Any], Any], elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """Inclusive scan of the associative ``fn`` along ``axis`` of every leaf of ``elems``
    (:func:`fungraph.primitives.cumulative.associative_scan`, the one ``numpy.cumprod`` uses)."""
    leaves, tree = tree_flatten(elems)
    return cumulative.associative_scan(fn, tree_unflatten(tree, [asarray(v) for v in leaves]), reverse, axis)


# --- sorting --------------------------------------------------------------------------------------


def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """``operand`` sorted along ``dimension``; a sequence of operands is sorted by its first
    ``num_keys`` (lexicographically, stable) and returned as a tuple."""
    if not isinstance(operand, (list, tuple)):
        return fnp.sort(asarray(operand), axis=dimension)
    xs = [asarray(x) for x in operand]
    if not 1 <= num_keys <= len(xs):
        raise ValueError(f"lax.sort: num_keys={num_keys} for {len(xs)} operands")
    order = None
    for key in reversed(xs[:num_keys]):
        k = key if order is None else fnp.take_along_axis(key, order, axis=dimension)
        step = fnp.argsort(k, axis=dimension, stable=True)
        order = step if order is None else fnp.take_along_axis(order, step, axis=dimension)
    return tuple(fnp.take_along_axis(x, order, axis=dimension) for x in xs)


def top_k(operand: Any, k: int, *, axis: int = -1) -> tuple[Any, Any]:
    """The ``k`` largest entries along ``axis``, largest first (ties: lower index first), and
    their int32 indices."""
    x = asarray(operand)
    d = aval_of(x).shape[axis]
    if not 0 <= int(k) <= d:
        raise ValueError(f"lax.top_k: k={k} outside [0, {d}] for {aval_of(x)} along axis {axis}")
    key = fnp.negative(x) if dtypes.is_inexact(aval_of(x).dtype) else fnp.bitwise_not(x)
    order = fnp.argsort(key, axis=axis, stable=True)
    idx = order[_axis_window(order, axis, 0, int(k))]
    return fnp.take_along_axis(x, idx, axis=axis), cast(idx, dtypes.int32)


def sort_key_val(keys: Any, values: Any, dimension: int = -1, is_stable: bool = True) -> tuple[Any, Any]:
    """``keys`` sorted along ``dimension`` and ``values`` in the same order."""
    return sort((keys, values), dimension, is_stable, 1)


def _approx_k(name: str, operand: Any, k: int, reduction_dimension: int, largest: bool) -> tuple[Any, Any]:
    (x,) = _floats(name, operand)
    axis = int(reduction_dimension) % builtins.max(len(aval_of(x).shape), 1)
    moved = fnp.moveaxis(x, axis, -1)
    values, idx = top_k(moved if largest else fnp.negative(moved), k)
    values = values if largest else fnp.negative(values)
    return fnp.moveaxis(values, -1, axis), fnp.moveaxis(idx, -1, axis)


def approx_max_k(operand: Any, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True) -> tuple[Any, Any]:
    """The ``k`` largest values along ``reduction_dimension`` and their int32 indices, found
    exactly (recall 1, so the recall target and size override are met and unused)."""
    return _approx_k("approx_max_k", operand, k, reduction_dimension, True)


def approx_min_k(operand: Any, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True) -> tuple[Any, Any]:
    """The ``k`` smallest values along ``reduction_dimension`` and their int32 indices, exactly."""
    return _approx_k("approx_min_k", operand, k, reduction_dimension, False)
