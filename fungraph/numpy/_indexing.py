"""numpy indexing on traced values: basic indices become one slice (plus rev/reshape),
integer arrays become one ``take`` over the merged indexed axes."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError, Tracer
from fungraph.numpy._util import asarray, aval
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh
from fungraph.primitives.indexing import take as take_prim


def _is_int_scalar(e: Any) -> bool:
    if isinstance(e, bool):
        return False
    if isinstance(e, (int, np.integer)):
        return True
    return isinstance(e, np.ndarray) and e.ndim == 0 and dtypes.is_int(dtypes.canonicalize(e.dtype))


def _expand_index(idx: Any, ndim: int) -> list[Any]:
    idx = idx if isinstance(idx, tuple) else (idx,)
    entries: list[Any] = []
    for e in idx:
        if isinstance(e, list):
            e = asarray(e)
        if isinstance(e, np.ndarray) and e.dtype == np.bool_:
            entries.extend(np.nonzero(e))
        elif isinstance(e, Tracer) and e.dtype == dtypes.bool_:
            raise IndexError(
                f"boolean mask indexing with a traced mask of type {e.aval} gives a data-dependent shape; "
                "use fungraph.numpy.where(mask, x, 0) instead"
            )
        else:
            entries.append(e)
    if sum(e is Ellipsis for e in entries) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 for e in entries if e is not None and e is not Ellipsis)
    if consumed > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {consumed} were indexed")
    if any(e is Ellipsis for e in entries):
        pos = next(i for i, e in enumerate(entries) if e is Ellipsis)
        entries[pos:pos + 1] = [slice(None)] * (ndim - consumed)
    return entries


def getitem(a: Any, idx: Any) -> Any:
    x = asarray(a)
    entries = _expand_index(idx, x.ndim)
    consumed = sum(1 for e in entries if e is not None)
    entries += [slice(None)] * (x.ndim - consumed)
    start, limit, strides, rev_dims, out_shape = [], [], [], [], []
    advanced: list[tuple[int, Any]] = []
    # beside an index array, numpy counts integer scalars as (0-d) index arrays: they take part
    # in the rule that moves the indexed axes to the front when a slice separates them
    arrays = any(e is not None and not isinstance(e, slice) and not _is_int_scalar(e) for e in entries)
    dim = 0
    for e in entries:
        if e is None:
            out_shape.append(1)
            continue
        d = x.shape[dim]
        if isinstance(e, slice):
            s, t, st = e.indices(d)
            n = len(range(s, t, st))
            if st > 0:
                start.append(s)
                limit.append(s + (n - 1) * st + 1 if n else s)
                strides.append(st)
            else:
                lo = s + (n - 1) * st if n else 0
                start.append(lo)
                limit.append(s + 1 if n else 0)
                strides.append(-st)
                rev_dims.append(len(start) - 1)
            out_shape.append(n)
        elif _is_int_scalar(e) and not arrays:
            k = int(e)
            if not -d <= k < d:
                raise IndexError(f"index {k} is out of bounds for axis {dim} with size {d}")
            k %= d
            start.append(k)
            limit.append(k + 1)
            strides.append(1)
        else:
            e = asarray(e)
            if not dtypes.is_int(aval(e).dtype):
                raise IndexError(f"arrays used as indices must be of integer (or boolean) type, got {aval(e)}")
            start.append(0)
            limit.append(d)
            strides.append(1)
            advanced.append((len(out_shape), _check_bounds(e, d, dim)))
            out_shape.append(d)
        dim += 1
    y = sh.slice_(x, start, limit, strides)
    y = sh.rev(y, [i for i in rev_dims if aval(y).shape[i] > 1])
    y = sh.reshape(y, out_shape)
    return _advanced(y, advanced) if advanced else y


def _check_bounds(idx: Any, d: int, dim: int) -> Any:
    if isinstance(idx, np.ndarray) and idx.size and (idx.max() >= d or idx.min() < -d):
        bad = idx.max() if idx.max() >= d else idx.min()
        raise IndexError(f"index {bad} is out of bounds for axis {dim} with size {d}")
    return idx


def _advanced(y: Any, advanced: list[tuple[int, Any]]) -> Any:
    """Integer-array indices at positions of ``y``; numpy's placement rule for the result axes."""
    if len(advanced) == 1:
        pos, idx = advanced[0]
        return take_prim(y, idx, pos)
    positions = [p for p, _ in advanced]
    shape = aval(y).shape
    idxs = [_normalized(i, shape[p]) for p, i in advanced]
    bshape = tuple(np.broadcast_shapes(*(aval(i).shape for i in idxs)))
    contiguous = positions == list(range(positions[0], positions[0] + len(positions)))
    target = positions[0] if contiguous else 0
    rest = [i for i in range(len(shape)) if i not in positions]
    perm = rest[:target] + positions + rest[target:]
    moved = sh.transpose(y, perm)
    sizes = [shape[p] for p in positions]
    merged_shape = tuple(shape[i] for i in rest[:target]) + (int(np.prod(sizes)),) + tuple(
        shape[i] for i in rest[target:])
    merged = sh.reshape(moved, merged_shape)
    flat = None
    for i, n in zip(idxs, sizes):
        i = sh.broadcast_to(i, bshape)
        flat = i if flat is None else ew.add(ew.mul(flat, np.asarray(n, dtypes.int64)), i)
    return take_prim(merged, flat, target)


def _normalized(idx: Any, n: int) -> Any:
    idx = ew.convert(asarray(idx), dtypes.int64)
    zero = np.asarray(0, dtypes.int64)
    wrapped = ew.select(ew.lt(idx, zero), ew.add(idx, np.asarray(n, dtypes.int64)), idx)
    return ew.min_p.bind(ew.max_p.bind(wrapped, zero), np.asarray(max(n - 1, 0), dtypes.int64))


def take(a: Any, indices: Any, axis: int | None = None) -> Any:
    x = asarray(a)
    idx = asarray(indices)
    if not dtypes.is_int(aval(idx).dtype):
        raise IndexError(f"take: indices must be integers, got {aval(idx)}")
    if axis is None:
        return take_prim(sh.reshape(x, (x.size,)), idx, 0)
    from fungraph.numpy._util import normalize_axes

    (ax,) = normalize_axes(axis, x.ndim, "take")
    return take_prim(x, idx, ax)


def take_along_axis(arr: Any, indices: Any, axis: int | None) -> Any:
    x = asarray(arr)
    idx = asarray(indices)
    if axis is None:
        return take_prim(sh.reshape(x, (x.size,)), idx, 0)
    from fungraph.numpy._util import normalize_axes

    (ax,) = normalize_axes(axis, x.ndim, "take_along_axis")
    ishape = aval(idx).shape
    if len(ishape) != x.ndim:
        raise ShapeError(f"take_along_axis: indices {aval(idx)} must have the same rank as the array {aval(x)}")
    shape = tuple(ishape[i] if i == ax else _bdim(x.shape[i], ishape[i], i) for i in range(x.ndim))
    idx = sh.broadcast_to(_normalized(idx, x.shape[ax]), shape)
    flat = None
    for i in range(x.ndim):
        if i == ax:
            comp = idx
        else:
            n = shape[i] if x.shape[i] == shape[i] else 1
            iota = np.arange(n, dtype=np.int64).reshape([-1 if j == i else 1 for j in range(x.ndim)])
            comp = sh.broadcast_to(iota, shape)
        flat = comp if flat is None else ew.add(ew.mul(flat, np.asarray(x.shape[i], dtypes.int64)), comp)
    return take_prim(sh.reshape(x, (x.size,)), flat, 0)


def _bdim(a: int, b: int, axis: int) -> int:
    if a == b or b == 1:
        return a
    if a == 1:
        return b
    raise ShapeError(f"take_along_axis: index dimension {b} does not match array dimension {a} on axis {axis}")
