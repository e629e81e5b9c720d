"""numpy indexing on traced values: basic indices become one slice (plus rev/reshape),
integer arrays become one ``take`` over the merged indexed axes."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError, Tracer
from fungraph.numpy._elementwise import mod
from fungraph.numpy._util import asarray, aval
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh
from fungraph.primitives.indexing import take as take_prim


def _is_int_scalar(e: Any) -> bool:
    if isinstance(e, bool):
        return False
    if isinstance(e, (int, np.integer)):
        return True
    return isinstance(e, np.ndarray) and e.ndim == 0 and dtypes.is_int(dtypes.canonical(e.dtype))


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
            k = _clamped(int(e), d, dim)
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


def _clamped(k: int, d: int, dim: int) -> int:
    """The integer index ``k`` into an axis of ``d``, counted from the end when negative and
    clamped into the axis, as JAX's indexing does (numpy raises; a staged program cannot)."""
    if d == 0:
        raise IndexError(f"index {k} is out of bounds for axis {dim} with size 0")
    return min(max(k + d if k < 0 else k, 0), d - 1)


def _check_bounds(idx: Any, d: int, dim: int) -> Any:
    """``idx`` (out-of-bounds entries are clamped by ``take``); an empty axis has no element to
    clamp to."""
    if d == 0 and aval(idx).size:
        raise IndexError(f"index into axis {dim} of size 0")
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


def take(a: Any, indices: Any, axis: int | None = None, out: None = None, mode: str | None = None,
         unique_indices: bool = False, indices_are_sorted: bool = False, fill_value: Any = None) -> Any:
    """``a``'s entries at ``indices`` along ``axis`` (the flattened array when None). Out of
    bounds, as JAX's: ``mode=None``/``"fill"`` gives ``fill_value`` (default NaN, the most
    negative integer, the largest unsigned one or True) and a zero gradient; ``"clip"`` clamps
    (a negative index to 0), ``"wrap"`` counts modulo the axis."""
    if out is not None:
        raise NotImplementedError("take: the 'out' argument is not supported (arrays are immutable)")
    if mode not in (None, "fill", "clip", "wrap"):
        raise NotImplementedError("take: mode='raise' is not supported (a staged program cannot raise on data)") \
            if mode == "raise" else ValueError(f"take: invalid mode {mode!r}; use 'fill', 'clip' or 'wrap'")
    x = asarray(a)
    idx = asarray(indices)
    if not dtypes.is_int(aval(idx).dtype):
        raise IndexError(f"take: indices must be integers, got {aval(idx)}")
    if axis is None:
        return _gather(sh.reshape(x, (x.size,)), idx, 0, mode, fill_value, mode != "clip", "take")
    from fungraph.numpy._util import normalize_axes

    (ax,) = normalize_axes(axis, x.ndim, "take")
    return _gather(x, idx, ax, mode, fill_value, mode != "clip", "take")


def take_along_axis(arr: Any, indices: Any, axis: int | None = -1, mode: str | None = None,
                    fill_value: Any = None) -> Any:
    """``arr``'s entries at ``indices`` along ``axis``, the other axes matched by broadcasting.
    Out of bounds as JAX's: ``mode=None``/``"fill"`` fills (see :func:`take`), ``"clip"`` and
    ``"promise_in_bounds"`` clamp (negative indices count from the end except under
    ``"promise_in_bounds"``)."""
    if mode not in (None, "fill", "clip", "promise_in_bounds"):
        raise ValueError(f"take_along_axis: invalid mode {mode!r}; use 'fill', 'clip' or 'promise_in_bounds'")
    x = asarray(arr)
    idx = asarray(indices)
    if not dtypes.is_int(aval(idx).dtype):
        raise IndexError(f"take_along_axis: indices must be integers, got {aval(idx)}")
    wrap = mode != "promise_in_bounds"
    if axis is None:
        if aval(idx).ndim != 1:
            raise ShapeError(f"take_along_axis with axis=None: indices {aval(idx)} must be one-dimensional")
        return _gather(sh.reshape(x, (x.size,)), idx, 0, mode, fill_value, wrap, "take_along_axis")
    from fungraph.numpy._util import normalize_axes

    (ax,) = normalize_axes(axis, x.ndim, "take_along_axis")
    ishape = aval(idx).shape
    if len(ishape) != x.ndim:
        raise ShapeError(f"take_along_axis: indices {aval(idx)} must have the same rank as the array {aval(x)}")
    shape = tuple(ishape[i] if i == ax else _bdim(x.shape[i], ishape[i], i) for i in range(x.ndim))
    idx = sh.broadcast_to(idx, shape)
    inside = _inside(idx, x.shape[ax], wrap) if mode in (None, "fill") else None
    idx = _normalized(idx, x.shape[ax]) if wrap else _clamp(idx, x.shape[ax])
    flat = None
    for i in range(x.ndim):
        if i == ax:
            comp = idx
        else:
            n = shape[i] if x.shape[i] == shape[i] else 1
            iota = np.arange(n, dtype=np.int64).reshape([-1 if j == i else 1 for j in range(x.ndim)])
            comp = sh.broadcast_to(iota, shape)
        flat = comp if flat is None else ew.add(ew.mul(flat, np.asarray(x.shape[i], dtypes.int64)), comp)
    picked = take_prim(sh.reshape(x, (x.size,)), flat, 0)
    return picked if inside is None else _filled(picked, inside, fill_value)


def _gather(x: Any, idx: Any, ax: int, mode: str | None, fill_value: Any, wrap: bool, what: str) -> Any:
    """``take`` along ``ax`` with JAX's out-of-bounds ``mode``; ``wrap``: negative indices count
    from the end first."""
    n = x.shape[ax]
    if n == 0 and aval(idx).size:
        raise IndexError(f"{what}: cannot take from the empty axis {ax} of {aval(x)}")
    if mode == "wrap":
        return take_prim(x, mod(idx, np.asarray(n, aval(idx).dtype)), ax)
    if mode in ("clip", "promise_in_bounds"):
        return take_prim(x, _normalized(idx, n) if wrap else _clamp(idx, n), ax)
    inside = _inside(idx, n, wrap)
    picked = take_prim(x, _normalized(idx, n), ax)
    if not isinstance(inside, Tracer) and np.all(inside):
        return picked
    pshape = aval(picked).shape
    dims = tuple(range(ax, ax + aval(idx).ndim))
    return _filled(picked, sh.broadcast_in_dim(inside, pshape, dims), fill_value)


def _inside(idx: Any, n: int, wrap: bool) -> Any:
    """Where ``idx`` names an element of an axis of ``n`` (negatives counted from the end when
    ``wrap``): concrete for concrete indices."""
    i = ew.convert(asarray(idx), dtypes.int64)
    if wrap:
        i = ew.select(ew.lt(i, np.asarray(0, dtypes.int64)), ew.add(i, np.asarray(n, dtypes.int64)), i)
    return ew.and_p.bind(ew.ge_p.bind(i, np.asarray(0, dtypes.int64)), ew.lt(i, np.asarray(n, dtypes.int64)))


def _clamp(idx: Any, n: int) -> Any:
    i = ew.convert(asarray(idx), dtypes.int64)
    return ew.min_p.bind(ew.max_p.bind(i, np.asarray(0, dtypes.int64)), np.asarray(max(n - 1, 0), dtypes.int64))


def _filled(picked: Any, inside: Any, fill_value: Any) -> Any:
    """``picked`` where ``inside``, else ``fill_value`` (JAX's default fill for the dtype)."""
    if not isinstance(inside, Tracer) and np.all(inside):
        return picked
    dt = aval(picked).dtype
    if fill_value is None:
        fill_value = (np.nan if np.issubdtype(dt, np.inexact) else True if dt == np.bool_
                      else np.iinfo(dt).max if np.issubdtype(dt, np.unsignedinteger) else np.iinfo(dt).min)
    fill = sh.broadcast_to(ew.convert(asarray(np.asarray(fill_value)), dt), aval(picked).shape)
    return ew.select(inside, picked, fill)


def _bdim(a: int, b: int, axis: int) -> int:
    if a == b or b == 1:
        return a
    if a == 1:
        return b
    raise ShapeError(f"take_along_axis: index dimension {b} does not match array dimension {a} on axis {axis}")
