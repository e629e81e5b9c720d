"""Set routines of ``fungraph.numpy``: ``unique`` and the array API's ``unique_*``, ``isin``,
``union1d``, ``intersect1d``, ``setdiff1d`` and ``setxor1d``. Under a trace the number of values
must be given as ``size``, as in JAX: the result is cut or padded to it."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.numpy._histograms import bincount
from fungraph.numpy._sorting import lexsort
from fungraph.numpy._util import asarray, is_concrete, namespace, normalize_axes, promote
from fungraph.primitives import elementwise as ew
from fungraph.primitives.shape import reshape


def isin(element: Any, test_elements: Any, assume_unique: bool = False, invert: bool = False) -> Any:
    """Whether each element occurs in ``test_elements`` (one comparison per pair)."""
    from fungraph.numpy._reductions import any as any_

    x, t = promote(element, test_elements)
    found = any_(ew.eq(reshape(x, tuple(x.shape) + (1,)), reshape(t, (t.size,))), axis=-1)
    return ew.not_p.bind(found) if invert else found


def _runs(flat: Any, equal_nan: bool) -> tuple[Any, Any, Any]:
    """(stable sorting permutation, sorted values, mask of the first entry of each run of equal
    sorted values); NaNs form one run when ``equal_nan``."""
    fnp = namespace()
    perm = fnp.argsort(flat)
    srt = flat[perm]
    same = srt[1:] == srt[:-1]
    if equal_nan and dtypes.is_inexact(flat.dtype):
        same = same | (fnp.isnan(srt[1:]) & fnp.isnan(srt[:-1]))
    return perm, srt, fnp.concatenate([np.ones(1, bool), ~same])


def _select(srt: Any, keep: Any, size: int, fill_value: Any) -> tuple[Any, Any, Any]:
    """The first ``size`` entries (or rows) of ``srt`` where ``keep`` holds, padded with ``fill_value``
    (default, as in JAX: the first entry kept, 0 when none is), with their positions (clamped)
    and which are real."""
    fnp = namespace()
    n = srt.shape[0]
    (pos,) = fnp.nonzero(keep, size=size, fill_value=n)
    valid, at = pos < n, fnp.minimum(pos, n - 1)
    picked = srt[at]
    if fill_value is None:
        fill = fnp.where(valid[0], picked[0], 0) if size else srt[0]
    else:
        fill = fnp.asarray(fill_value, srt.dtype)
    return fnp.where(fnp.reshape(valid, valid.shape + (1,) * (srt.ndim - 1)), picked, fill), at, valid


def unique(ar: Any, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: int | None = None, *, equal_nan: bool = True, size: int | None = None,
           fill_value: Any = None, sorted: bool = True) -> Any:  # noqa: A002  (numpy's keyword)
    """The sorted unique values of the flattened ``ar`` (and, as asked, the index of each one's
    first occurrence, the inverse map with ``ar``'s shape, and the counts). Under a trace the
    number of values must be given as ``size``, as in JAX: the result is cut or padded to it,
    values with ``fill_value`` (default: the smallest value), indices with the smallest
    value's index, counts with 0. Eagerly ``size`` defaults to the number of unique values.
    With ``axis`` (of an array of two or more dimensions), the unique slices along it, as
    numpy: sorted lexicographically, a slice holding a NaN never equal to another, the
    inverse map one-dimensional."""
    fnp = namespace()
    x = asarray(ar)
    if axis is not None and x.ndim != 1:
        return _unique_slices(x, axis, (return_index, return_inverse, return_counts), size, fill_value)
    if axis is not None:
        normalize_axes(axis, 1, "unique")                               # 1-d: the flat path, as numpy
    flat = fnp.ravel(x)
    n = flat.shape[0]
    if size is None:
        if not is_concrete(flat):
            raise TypeError("unique: the number of unique values depends on a traced array; pass size= "
                            "(the result is cut or padded to it)")
        size = len(np.unique(np.asarray(flat), equal_nan=equal_nan)) if n else 0
    want = (return_index, return_inverse, return_counts)
    if n == 0:
        return _unique_outputs(None, None, None, size, fill_value, want, lambda _: fnp.zeros((size,), x.dtype),
                               x.shape)
    perm, srt, first = _runs(flat, equal_nan)
    return _unique_outputs(srt, perm, first, size, fill_value, want, lambda v: v, x.shape)


def _unique_outputs(srt: Any, perm: Any, first: Any, size: int, fill_value: Any, want: tuple[bool, bool, bool],
                    values_of: Any, inverse_shape: tuple[int, ...]) -> Any:
    """:func:`unique`'s results from the sorted entries (or rows) ``srt``, the sorting
    permutation ``perm`` and the mask ``first`` of each run's first entry (``srt`` None: no
    entries): ``values_of`` the selected values, then as ``want`` asks the index of each
    one's first occurrence, the inverse map (of ``inverse_shape``) and the counts."""
    fnp = namespace()
    return_index, return_inverse, return_counts = want
    if srt is None:
        zeros = fnp.zeros((size,), np.int64)
        out = [values_of(None)] + [zeros] * return_index + [fnp.zeros(inverse_shape, np.int64)] * return_inverse \
            + [zeros] * return_counts
        return out[0] if len(out) == 1 else tuple(out)
    values, at, valid = _select(srt, first, size, fill_value)
    out = [values_of(values)]
    if return_index:
        out.append(fnp.where(valid, fnp.take(perm, at, mode="clip"), perm[0]))
    group = fnp.cumsum(first.astype(np.int64)) - 1
    if return_inverse:
        out.append(fnp.reshape(group[fnp.argsort(perm)], inverse_shape))
    if return_counts:
        out.append(bincount(group, length=size))
    return out[0] if len(out) == 1 else tuple(out)


def _unique_slices(x: Any, axis: int, want: tuple[bool, bool, bool], size: int | None, fill_value: Any) -> Any:
    """:func:`unique` along ``axis``: the slices as rows, sorted by :func:`lexsort` (first
    element first), a run of equal rows kept once."""
    fnp = namespace()
    if x.ndim == 0:
        raise ValueError(f"unique: axis {axis} is out of bounds for a 0-d array")
    (ax,) = normalize_axes(axis, x.ndim, "unique")
    moved = fnp.moveaxis(x, ax, 0)
    n = moved.shape[0]
    rows = fnp.reshape(moved, (n, int(np.prod(moved.shape[1:], dtype=np.int64))))
    if size is None:
        if not is_concrete(x):
            raise TypeError("unique: the number of unique slices depends on a traced array; pass size= "
                            "(the result is cut or padded to it)")
        size = np.unique(np.asarray(x), axis=ax).shape[ax]
    def values_of(values: Any) -> Any:
        values = fnp.zeros((size,) + moved.shape[1:], x.dtype) if values is None else values
        return fnp.moveaxis(fnp.reshape(values, (size,) + moved.shape[1:]), 0, ax)

    if n == 0:
        return _unique_outputs(None, None, None, size, fill_value, want, values_of, (0,))
    cols = rows.shape[1]
    perm = lexsort([rows[:, j] for j in reversed(range(cols))]) if cols else fnp.arange(n)
    srt = rows[perm]
    first = fnp.concatenate([np.ones(1, bool), ~fnp.all(srt[1:] == srt[:-1], axis=1)])
    return _unique_outputs(srt, perm, first, size, fill_value, want, values_of, (n,))


def unique_values(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The array API's ``unique_values``: NaNs count as distinct values, as in numpy."""
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


def unique_counts(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    from collections import namedtuple

    values, counts = unique(x, return_counts=True, equal_nan=False, size=size, fill_value=fill_value)
    return namedtuple("_UniqueCountsResult", ["values", "counts"])(values, counts)


def unique_inverse(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    from collections import namedtuple

    values, inverse = unique(x, return_inverse=True, equal_nan=False, size=size, fill_value=fill_value)
    return namedtuple("_UniqueInverseResult", ["values", "inverse_indices"])(values, inverse)


def unique_all(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    from collections import namedtuple

    values, index, inverse, counts = unique(x, True, True, True, equal_nan=False, size=size, fill_value=fill_value)
    return namedtuple("_UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])(
        values, index, inverse, counts)


def union1d(ar1: Any, ar2: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique values found in either array (``size`` as in :func:`unique`)."""
    fnp = namespace()
    return unique(fnp.concatenate([fnp.ravel(asarray(ar1)), fnp.ravel(asarray(ar2))]), size=size,
                  fill_value=fill_value)


def _set_operands(ar1: Any, ar2: Any) -> tuple[Any, Any]:
    """Both operands flattened, in their common dtype."""
    fnp = namespace()
    a, b = fnp.ravel(asarray(ar1)), fnp.ravel(asarray(ar2))
    dt = dtypes.result_type(a, b)
    return a.astype(dt), b.astype(dt)


def _set_size(name: str, size: int | None, arrays: tuple[Any, ...], concrete_result: Any) -> int:
    if size is not None:
        return int(size)
    if not all(is_concrete(a) for a in arrays):
        raise TypeError(f"{name}: the result's size depends on traced arrays; pass size= (the result is cut or "
                        f"padded to it)")
    return len(concrete_result(*[np.asarray(a) for a in arrays]))


def intersect1d(ar1: Any, ar2: Any, assume_unique: bool = False, return_indices: bool = False, *,
                size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique values found in both arrays (and, with ``return_indices``, the index of
    each one's first occurrence in each array); ``size``/``fill_value`` as in :func:`unique`."""
    fnp = namespace()
    a, b = _set_operands(ar1, ar2)
    size = _set_size("intersect1d", size, (a, b), np.intersect1d)
    if a.shape[0] == 0 or size == 0:
        empty = fnp.zeros((size,), a.dtype)
        return (empty, fnp.zeros((size,), np.int64), fnp.zeros((size,), np.int64)) if return_indices else empty
    perm, srt, first = _runs(a, equal_nan=False)
    values, at, valid = _select(srt, first & fnp.isin(srt, b), size, fill_value)
    if not return_indices:
        return values
    i1 = fnp.where(valid, perm[at], 0)
    i2 = fnp.where(valid, fnp.argmax(values[:, None] == b[None, :], axis=1), 0)
    return values, i1, i2


def setdiff1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
              fill_value: Any = None) -> Any:
    """The sorted unique values of ``ar1`` that are not in ``ar2``; ``size`` as in :func:`unique`
    but padded with 0 unless ``fill_value`` says otherwise (JAX's choice for this function)."""
    fnp = namespace()
    a, b = _set_operands(ar1, ar2)
    size = _set_size("setdiff1d", size, (a, b), np.setdiff1d)
    if a.shape[0] == 0 or size == 0:
        return fnp.zeros((size,), a.dtype)
    _, srt, first = _runs(a, equal_nan=False)
    return _select(srt, first & ~fnp.isin(srt, b), size, 0 if fill_value is None else fill_value)[0]


def setxor1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
             fill_value: Any = None) -> Any:
    """The sorted unique values found in exactly one of the arrays; ``size`` as in :func:`unique`."""
    fnp = namespace()
    a, b = _set_operands(ar1, ar2)
    size = _set_size("setxor1d", size, (a, b), np.setxor1d)
    both = fnp.concatenate([a, b])
    if both.shape[0] == 0 or size == 0:
        return fnp.zeros((size,), both.dtype)
    _, srt, first = _runs(both, equal_nan=False)
    return _select(srt, first & (fnp.isin(srt, a) != fnp.isin(srt, b)), size, fill_value)[0]
