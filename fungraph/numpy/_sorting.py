"""Sorting, searching and counting in ``fungraph.numpy``: the ``sort`` and ``argsort``
primitives, ``lexsort``, ``searchsorted``, and the functions whose result's size depends on the
data (``nonzero``, ``flatnonzero``, ``argwhere``) with JAX's ``size=``/``fill_value=`` contract.

Eagerly, without ``size``, those return numpy's answer. Traced, the output shape must be known
when tracing: ``size`` fixes it (the first ``size`` hits in order, padded with ``fill_value``),
and without it the call raises a :class:`~fungraph.core.ConcretizationError` that says so."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ConcretizationError, Tracer
from fungraph.numpy._elementwise import less
from fungraph.numpy._util import asarray, aval, flat_or_axis, namespace, promote
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh
from fungraph.primitives.indexing import take as take_prim
from fungraph.primitives.sorting import argsort_p, sort_p

# --- sorting --------------------------------------------------------------------------------------


def _check_order(order: Any, name: str) -> None:
    if order is not None:
        raise NotImplementedError(f"{name}: structured arrays (order=) are not supported")


def sort(a: Any, axis: int | None = -1, kind: Any = None, order: Any = None, *, stable: Any = True,
         descending: bool = False) -> Any:
    """``a`` sorted along ``axis`` (NaNs last; ``descending``: the ascending order reversed, as JAX)."""
    _check_order(order, "sort")
    x, ax = flat_or_axis(a, axis, "sort")
    if not x.ndim:
        return x
    out = sort_p.bind(x, axis=ax)
    return sh.rev(out, (ax,)) if descending else out


def argsort(a: Any, axis: int | None = -1, kind: Any = None, order: Any = None, *, stable: Any = True,
            descending: bool = False) -> Any:
    """Indices that sort ``a`` along ``axis``, stably: equal entries keep their order, also when
    ``descending`` (then from the last entry's view: the reversed array's ascending order, reversed)."""
    _check_order(order, "argsort")
    x, ax = flat_or_axis(a, axis, "argsort")
    if x.ndim == 0:
        return np.zeros((), dtypes.default_int())
    if not descending:
        return ew.convert(argsort_p.bind(x, axis=ax), dtypes.default_int())
    last = np.asarray(x.shape[ax] - 1, np.int64)
    return ew.convert(ew.sub(last, sh.rev(argsort_p.bind(sh.rev(x, (ax,)), axis=ax), (ax,))), dtypes.default_int())


def partition(a: Any, kth: Any, axis: int | None = -1, kind: str = "introselect", order: Any = None) -> Any:
    """A full sort, which is one valid partition for every ``kth``."""
    return sort(a, axis)


def argpartition(a: Any, kth: Any, axis: int | None = -1, kind: str = "introselect", order: Any = None) -> Any:
    return argsort(a, axis)


def lexsort(keys: Any, axis: int = -1) -> Any:
    """Indices that sort by the last key, ties broken by the one before it, and so on (stable)."""
    fnp = namespace()
    ks = [asarray(k) for k in keys] if isinstance(keys, (tuple, list)) else list(fnp.unstack(asarray(keys)))
    if not ks:
        raise TypeError("lexsort: need at least one key")
    order = fnp.argsort(ks[0], axis=axis, stable=True)
    for k in ks[1:]:
        step = fnp.argsort(fnp.take_along_axis(k, order, axis, mode="clip"), axis=axis, stable=True)
        order = fnp.take_along_axis(order, step, axis, mode="clip")
    return order


def sort_complex(a: Any) -> Any:
    """``a`` sorted by real part, then imaginary part, as a complex array of JAX's dtype
    (complex64 for float32 and integers of up to 32 bits; numpy always gives complex128)."""
    x = asarray(a)
    return namespace().sort(x.astype(dtypes.complex_for(dtypes.float_dtype_for(x.dtype))))


# --- searching ------------------------------------------------------------------------------------


def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None, *, method: str = "scan") -> Any:
    """Insertion points into the sorted 1-d ``a``: how many entries lie below (or at) each ``v``,
    by a binary search (``log2(len(a))`` vectorised steps, so memory is ``v``'s size). NaN sorts
    last, as in numpy and JAX. ``method`` is JAX's and accepted for any value it takes."""
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if method not in ("scan", "scan_unrolled", "sort", "compare_all"):
        raise ValueError(f"searchsorted: method must be one of 'scan', 'scan_unrolled', 'sort', 'compare_all', "
                         f"got {method!r}")
    x, vals = promote(a, v)
    if sorter is not None:
        x = take_prim(x, asarray(sorter), 0)
    if x.ndim != 1:
        raise ValueError(f"searchsorted: a must be 1-d, got shape {x.shape}")
    n = x.shape[0]
    index = dtypes.int32 if n <= np.iinfo(np.int32).max else dtypes.canonicalize(dtypes.int64)
    lo = sh.broadcast_to(np.asarray(0, index), vals.shape)
    hi = sh.broadcast_to(np.asarray(n, index), vals.shape)
    for _ in range(n.bit_length()):
        mid = ew.floor_divide_p.bind(ew.add(lo, hi), np.asarray(2, index))
        probe = take_prim(x, ew.min_p.bind(mid, np.asarray(max(n - 1, 0), index)), 0)
        right = _total_lt(probe, vals) if side == "left" else ew.not_p.bind(_total_lt(vals, probe))
        right = ew.and_p.bind(right, ew.lt(lo, hi))
        lo = ew.select(right, ew.add(mid, np.asarray(1, index)), lo)
        hi = ew.select(right, hi, mid)
    return lo


def _total_lt(p: Any, q: Any) -> Any:
    """``p < q`` in numpy's sort order, where NaN is above every number."""
    if not dtypes.is_inexact(aval(p).dtype):
        return less(p, q)
    return ew.or_p.bind(less(p, q), ew.and_p.bind(ew.ne_p.bind(q, q), ew.eq(p, p)))


def _flat_hits(a: Any, size: int | None, fill_value: Any, name: str) -> tuple[Any, Any]:
    """Flat indices of the nonzero entries of ``a``, in order, as an int64 array of ``size``,
    and which of the ``size`` slots hold a hit (None eagerly without ``size``)."""
    fnp = namespace()
    x = asarray(a)
    if size is None:
        if isinstance(x, Tracer):
            raise ConcretizationError(
                f"{name} of a traced {aval(x)} has a data-dependent shape; pass size= (the number of "
                "indices to return, padded with fill_value) as in JAX")
        return np.flatnonzero(np.asarray(x)), None
    size = int(size)
    if size < 0:
        raise ValueError(f"{name}: size must be >= 0, got {size}")
    flat = fnp.ravel(x)
    n = aval(flat).shape[0]
    hit = fnp.not_equal(flat, np.zeros((), aval(flat).dtype))
    order = fnp.argsort(fnp.logical_not(hit), stable=True)
    if size > n:
        order = fnp.concatenate([order, np.zeros(size - n, np.int64)])
    first = order[:size]
    fill = 0 if fill_value is None else fill_value
    kept = fnp.less(np.arange(size), fnp.count_nonzero(hit))
    return fnp.where(kept, first, np.asarray(fill, np.int64)), kept


def flatnonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """Flat indices of the nonzero entries (JAX's ``size``/``fill_value`` when traced)."""
    return _flat_hits(a, size, fill_value, "flatnonzero")[0]


def nonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> tuple[Any, ...]:
    """Per-axis indices of the nonzero entries; ``fill_value`` may be one value per axis."""
    fnp = namespace()
    x = asarray(a)
    shape = aval(x).shape
    if not shape:
        raise ValueError("nonzero of a 0-d array is not supported (numpy deprecated it); use atleast_1d")
    fills = fill_value if isinstance(fill_value, (tuple, list)) else (fill_value,) * len(shape)
    if len(fills) != len(shape):
        raise ValueError(f"nonzero: fill_value has {len(fills)} entries for an array of rank {len(shape)}")
    flat, kept = _flat_hits(x, size, 0, "nonzero")
    if size is None:
        return tuple(c.astype(dtypes.default_int()) for c in np.unravel_index(flat, shape))
    coords = fnp.unravel_index(flat, shape)
    return tuple(c if f is None else fnp.where(kept, c, np.asarray(f, np.int64)) for c, f in zip(coords, fills))


def argwhere(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """``nonzero``'s indices stacked as rows, shape ``(hits, ndim)``."""
    return namespace().stack(nonzero(a, size=size, fill_value=fill_value), axis=1)
