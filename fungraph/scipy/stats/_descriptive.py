"""Descriptive statistics of ``scipy.stats`` that JAX provides: ``mode``, ``rankdata`` and
``sem``, with JAX's signatures, dtypes and ``nan_policy`` support (only "propagate", and
"omit" for ``sem``). Composed of sorting, ``unique`` and reductions, so they batch and compile
like the rest of ``fungraph.numpy``."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from fungraph import lax
from fungraph import numpy as fnp
from fungraph.api import vmap
from fungraph.numpy._util import promote

__all__ = ["ModeResult", "mode", "rankdata", "sem"]

_RANK_METHODS = ("average", "min", "max", "dense", "ordinal")


class ModeResult(NamedTuple):
    """The modal values and how often each occurs, as ``scipy.stats.mode`` returns them."""

    mode: Any
    count: Any


def _check_nan_policy(name: str, nan_policy: str) -> None:
    if nan_policy not in ("propagate", "omit", "raise"):
        raise ValueError(f"Illegal nan_policy value {nan_policy!r}; expected one of {{'propagate', 'omit', 'raise'}}")
    if nan_policy == "omit":
        raise NotImplementedError(f"{name}: logic for `nan_policy` of 'omit' is not implemented")
    if nan_policy == "raise":
        raise NotImplementedError(f"{name}: in order to compile `{name}`, it cannot know whether its input contains "
                                  "nans; check for nans outside of the function")


def _normal_axis(axis: int, ndim: int, name: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim


def _rows(x: Any, axis: int) -> tuple[Any, tuple[int, ...]]:
    """``x`` with ``axis`` moved last and the other axes flattened into rows, and their shape."""
    moved = fnp.moveaxis(x, axis, -1)
    rest = tuple(moved.shape[:-1])
    return fnp.reshape(moved, (math.prod(rest), moved.shape[-1])), rest


def _mode_of_row(row: Any) -> tuple[Any, Any]:
    values, counts = fnp.unique(row, return_counts=True, size=row.shape[0])
    return values[fnp.argmax(counts)], fnp.max(counts)


def mode(a: Any, axis: int | None = 0, nan_policy: str = "propagate", keepdims: bool = False) -> ModeResult:
    """The most common value along ``axis`` (the smallest of equally common ones) and its count."""
    _check_nan_policy("mode", nan_policy)
    x = fnp.atleast_1d(fnp.asarray(a))
    if axis is None:
        out_shape = tuple(1 for _ in x.shape) if keepdims else ()
        x, axis = fnp.ravel(x), 0
    else:
        axis = _normal_axis(int(axis), x.ndim, "mode")
        out_shape = tuple(1 if i == axis else s for i, s in enumerate(x.shape)) if keepdims else \
            tuple(s for i, s in enumerate(x.shape) if i != axis)
    rows, _ = _rows(x, axis)
    if rows.shape[1] == 0:
        dtype = fnp.zeros(0).dtype
        nan = fnp.full((rows.shape[0],), np.nan, dtype=dtype)
        return ModeResult(fnp.reshape(nan, out_shape), fnp.reshape(fnp.zeros_like(nan), out_shape))
    values, counts = vmap(_mode_of_row)(rows)
    return ModeResult(fnp.reshape(values, out_shape), fnp.reshape(counts, out_shape))


def _rank_row(row: Any, method: str) -> Any:
    out_dtype = fnp.zeros(0).dtype
    n = row.shape[0]
    ordered, order = lax.sort_key_val(row, fnp.arange(n))
    inverse = fnp.zeros(n, dtype=order.dtype).at[order].add(fnp.arange(n, dtype=order.dtype))  # a permutation
    if method == "ordinal":
        ranks = (inverse + 1).astype(out_dtype)
    else:
        starts = fnp.concatenate([fnp.ones(1, dtype=bool), ordered[1:] != ordered[:-1]])
        dense = fnp.cumsum(starts)[inverse]
        ends = fnp.nonzero(starts, size=n + 1, fill_value=n)[0].astype(out_dtype)
        ranks = {"dense": lambda: dense.astype(out_dtype),
                 "max": lambda: ends[dense],
                 "min": lambda: ends[dense - 1] + 1,
                 "average": lambda: 0.5 * (ends[dense] + ends[dense - 1] + 1)}[method]()
    return fnp.where(fnp.any(fnp.isnan(row)), fnp.full_like(ranks, np.nan), ranks)


def rankdata(a: Any, method: str = "average", *, axis: int | None = None, nan_policy: str = "propagate") -> Any:
    """The ranks of the data (from 1), ties resolved by ``method``; all nan where a slice holds a nan.
    Without ``axis`` the array is flattened."""
    _check_nan_policy("rankdata", nan_policy)
    if method not in _RANK_METHODS:
        raise ValueError(f"unknown method '{method}'")
    x = fnp.asarray(a)
    if axis is None:
        return _rank_row(fnp.ravel(x), method)
    axis = _normal_axis(int(axis), x.ndim, "rankdata")
    rows, rest = _rows(x, axis)
    ranks = vmap(lambda r: _rank_row(r, method))(rows)
    return fnp.moveaxis(fnp.reshape(ranks, (*rest, x.shape[axis])), -1, axis)


def sem(a: Any, axis: int | None = 0, ddof: int = 1, nan_policy: str = "propagate", *,
        keepdims: bool = False) -> Any:
    """The standard error of the mean, std(a, ddof) / sqrt(n), along ``axis`` (all axes for None);
    with ``nan_policy="omit"`` the nans are left out of both."""
    (b,) = promote(a, to_inexact=True)
    b = fnp.asarray(b)
    if nan_policy == "propagate":
        size = b.size if axis is None else b.shape[axis]
        return fnp.std(b, axis, ddof=ddof, keepdims=keepdims) / fnp.sqrt(size).astype(b.dtype)
    if nan_policy == "omit":
        count = fnp.sum(fnp.logical_not(fnp.isnan(b)), axis, keepdims=keepdims)
        return fnp.nanstd(b, axis, ddof=ddof, keepdims=keepdims) / fnp.sqrt(count).astype(b.dtype)
    raise ValueError(f"{nan_policy} is not supported")
