"""numpy indexing on traced values: basic indices become one slice (plus rev/reshape),
integer arrays become one ``take`` over the merged indexed axes; the indexing routines
(``take``, ``choose``, ``compress``, functional ``put``/``place``/``fill_diagonal`` with
``inplace=False`` as JAX requires) and the index arrays (``indices``, ``ix_``,
``unravel_index``, ``tril_indices``, ...)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ConcretizationError, NonConcreteBooleanIndexError, ShapeError, Tracer
from fungraph.lax._slicing import INDEX_OBSERVERS, observe_indices
from fungraph.numpy._elementwise import mod
from fungraph.numpy._util import asarray, aval, cast, int_array, is_concrete, namespace, normalize_axes
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh
from fungraph.primitives.indexing import take as take_prim
from fungraph.primitives.shape import reshape


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
            raise NonConcreteBooleanIndexError(
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
    indexed: list[tuple[int, Any]] = []
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
        elif _is_int_scalar(e) and not arrays and (d == 0 or -d <= int(e) < d):
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
            indexed.append((dim, e))
            out_shape.append(d)
        dim += 1
    if INDEX_OBSERVERS and indexed:
        _observe(x, indexed)
    y = sh.slice_(x, start, limit, strides)
    y = sh.rev(y, [i for i in rev_dims if aval(y).shape[i] > 1])
    y = sh.reshape(y, out_shape)
    return _advanced(y, advanced) if advanced else y


def observe_getitem(x: Any, idx: Any, name: str = "gather", at_least: int = 1) -> None:
    """Report the integer entries of the index ``idx`` into ``x`` to the index observers
    (``checkify``) when it has ``at_least`` of them: the forms of ``x.at[idx]`` that clamp, fill
    or drop instead of going through ``getitem``."""
    if not INDEX_OBSERVERS:
        return
    indexed, dim = [], 0
    for e in _expand_index(idx, aval(x).ndim):
        if e is None:
            continue
        if not isinstance(e, slice):
            indexed.append((dim, e))
        dim += 1
    if len(indexed) >= at_least:
        _observe(x, indexed, name)


def _observe(x: Any, indexed: list[tuple[int, Any]], name: str = "gather") -> None:
    """Report the integer indices of ``x[...]`` (negatives counted from the end once, broadcast
    together), on the axes they index, as the starts of JAX's gather of windows of size 1."""
    shape = aval(x).shape
    wrapped = []
    for dim, idx in indexed:
        i = ew.convert(asarray(idx), dtypes.int64)
        wrapped.append(ew.select(ew.lt(i, np.asarray(0, dtypes.int64)), ew.add(i, np.asarray(shape[dim], dtypes.int64)),
                                 i))
    common = tuple(np.broadcast_shapes(*(aval(i).shape for i in wrapped)))
    observe_indices(name, shape, [sh.broadcast_to(i, common) for i in wrapped], [d for d, _ in indexed],
                    [1] * len(indexed))


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

    (ax,) = normalize_axes(axis, x.ndim, "take_along_axis")
    ishape = aval(idx).shape
    if len(ishape) != x.ndim:
        raise ShapeError(f"take_along_axis: indices {aval(idx)} must have the same rank as the array {aval(x)}")
    shape = tuple(ishape[i] if i == ax else _bdim(x.shape[i], ishape[i], i) for i in range(x.ndim))
    idx = sh.broadcast_to(idx, shape)
    if INDEX_OBSERVERS:
        _observe_axis(x, idx, ax, wrap)
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
    if INDEX_OBSERVERS and mode != "wrap":
        _observe_axis(x, idx, ax, wrap)
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


def _observe_axis(x: Any, idx: Any, ax: int, wrap: bool) -> None:
    """Report the indices ``take`` and ``take_along_axis`` read along ``ax`` (counted from the
    end once when ``wrap``), as JAX's gather sees them."""
    if wrap:
        _observe(x, [(ax, idx)])
    else:
        observe_indices("gather", aval(x).shape, [ew.convert(asarray(idx), dtypes.int64)], [ax], [1])


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


# --- indexing-like operations ---------------------------------------------------------------------


def choose(a: Any, choices: Any, out: Any = None, mode: str = "raise") -> Any:
    """``choices[a[i]][i]`` for every ``i`` (all broadcast together); ``mode`` 'wrap' or 'clip'
    maps indices out of range, 'raise' refuses them on concrete input and clips traced ones."""
    fnp = namespace()
    if out is not None:
        raise NotImplementedError("choose: out= is not supported")
    idx = int_array(a, "choose")
    cs = [asarray(c) for c in choices]
    n = len(cs)
    if mode == "raise":
        if is_concrete(idx) and np.size(idx) and (np.min(idx) < 0 or np.max(idx) >= n):
            raise ValueError(f"choose: invalid entry in choice array (indices must lie in [0, {n}))")
        idx = fnp.clip(idx, 0, n - 1)
    elif mode == "wrap":
        idx = idx % n
    elif mode == "clip":
        idx = fnp.clip(idx, 0, n - 1)
    else:
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    stacked = fnp.stack(fnp.broadcast_arrays(*cs, idx)[:-1])
    idx = fnp.broadcast_to(idx, stacked.shape[1:])
    return fnp.take_along_axis(stacked, idx[None], 0, mode="clip")[0]


def compress(condition: Any, a: Any, axis: int | None = None, *, size: int | None = None,
             fill_value: Any = 0, out: Any = None) -> Any:
    """The slices of ``a`` along ``axis`` (the flattened ``a`` when None) where the 1-d
    ``condition`` holds; a traced condition needs ``size`` (padded with ``fill_value``)."""
    fnp = namespace()
    if out is not None:
        raise NotImplementedError("compress: out= is not supported")
    x = asarray(a)
    if axis is None:
        x, axis = fnp.ravel(x), 0
    cond = fnp.ravel(asarray(condition)).astype(bool)
    n = x.shape[axis]
    if cond.shape[0] > n:
        raise IndexError(f"compress: condition has {cond.shape[0]} entries for an axis of length {n}")
    if size is None and is_concrete(cond):
        return fnp.take(x, np.nonzero(np.asarray(cond))[0], axis=axis)
    if size is None:
        raise TypeError("compress: the result's size depends on a traced condition; pass size=")
    cond = fnp.pad(cond, (0, n - cond.shape[0]))
    (idx,) = fnp.nonzero(cond, size=size, fill_value=n)
    taken = fnp.take(x, fnp.minimum(idx, n - 1), axis=axis, mode="clip")
    shape = [1] * x.ndim
    shape[axis % x.ndim] = size
    return fnp.where(fnp.reshape(idx < n, shape), taken, fnp.asarray(fill_value, x.dtype))


def extract(condition: Any, arr: Any, *, size: int | None = None, fill_value: Any = 0) -> Any:
    """The entries of the flattened ``arr`` where the flattened ``condition`` holds."""
    return compress(namespace().ravel(asarray(condition)), arr, None, size=size, fill_value=fill_value)


# --- inserting data (functional: inplace=False) ---------------------------------------------------


def _inplace_refused(name: str, inplace: bool) -> None:
    if inplace:
        raise ValueError(f"{name}: fungraph's arrays are immutable, so the update cannot be made in place; "
                         f"pass inplace=False to get the updated array back (as JAX requires)")


def fill_diagonal(a: Any, val: Any, wrap: bool = False, *, inplace: bool = True) -> Any:
    """``a`` with ``val`` written along its main diagonal (repeated cyclically); every axis of
    an array of rank > 2 must have the same length. ``wrap`` restarts a tall matrix's diagonal
    after each ``n + 1`` rows, as numpy does."""
    _inplace_refused("fill_diagonal", inplace)
    fnp = namespace()
    x = asarray(a)
    if x.ndim < 2:
        raise ValueError("fill_diagonal: array must be at least 2-d")
    if x.ndim > 2 and len(set(x.shape)) != 1:
        raise ValueError(f"fill_diagonal: all dimensions of input must be of equal length, got {x.shape}")
    if x.ndim == 2:
        rows, cols = x.shape
        step = cols + 1
        end = rows * cols if wrap else min(rows, cols) * cols
        flat_idx = np.arange(0, end, step)
    else:
        flat_idx = np.arange(x.shape[0]) * sum(int(np.prod(x.shape[i + 1:])) for i in range(x.ndim))
    v = fnp.ravel(fnp.asarray(val, x.dtype))
    if v.shape[0] == 0:
        return x
    vals = fnp.take(v, np.arange(flat_idx.size) % v.shape[0])
    return fnp.reshape(fnp.at(fnp.ravel(x))[flat_idx].set(vals), x.shape)


def put_along_axis(arr: Any, indices: Any, values: Any, axis: int | None, inplace: bool = True, *,
                   mode: Any = None) -> Any:
    """``arr`` with ``values`` written where ``take_along_axis(arr, indices, axis)`` reads; a
    position named twice takes the later write, as numpy's loop does. Indices may be traced:
    each slice compares its ``K`` indices with its ``N`` positions (O(K N) work)."""
    _inplace_refused("put_along_axis", inplace)
    fnp = namespace()
    x = asarray(arr)
    idx = int_array(indices, "put_along_axis")
    if axis is None:
        x, axis, idx = fnp.ravel(x), 0, fnp.ravel(idx)
    if idx.ndim != x.ndim:
        raise ValueError(f"put_along_axis: indices of rank {idx.ndim} for an array of rank {x.ndim}")
    ax = axis % x.ndim
    n = x.shape[ax]
    xm, im = fnp.moveaxis(x, ax, -1), fnp.moveaxis(idx, ax, -1)
    im = fnp.broadcast_to(im, xm.shape[:-1] + im.shape[-1:])
    vm = fnp.broadcast_to(fnp.moveaxis(fnp.broadcast_to(fnp.asarray(values, x.dtype), idx.shape), ax, -1), im.shape)
    im = fnp.where(im < 0, im + n, im)
    k = im.shape[-1]
    hits = im[..., :, None] == np.arange(n)
    last = fnp.max(fnp.where(hits, np.arange(k)[:, None], -1), axis=-2)
    new = fnp.take_along_axis(vm, fnp.maximum(last, 0), -1, mode="clip")
    return fnp.moveaxis(fnp.where(last >= 0, new, xm), -1, ax)


def place(arr: Any, mask: Any, vals: Any, *, inplace: bool = True) -> Any:
    """``arr`` with the entries where ``mask`` holds replaced by ``vals`` in order, repeated as
    often as needed (numpy's ``place``, returned rather than written: ``inplace=False`` is
    required, as in JAX). ``mask`` may be traced."""
    _inplace_refused("place", inplace)
    fnp = namespace()
    x = asarray(arr)
    m = fnp.ravel(asarray(mask)).astype(bool)
    if m.shape[0] != x.size:
        raise ValueError(f"place: mask of {m.shape[0]} entries for an array of {x.size}")
    v = fnp.ravel(fnp.asarray(vals)).astype(x.dtype)
    if v.shape[0] == 0:
        if isinstance(m, Tracer) or np.any(m):
            raise ValueError("place: cannot insert from an empty array")
        return x
    pick = (fnp.cumsum(m.astype(np.int64)) - 1) % v.shape[0]
    return fnp.reshape(fnp.where(m, fnp.take(v, pick, mode="clip"), fnp.ravel(x)), x.shape)


def put(a: Any, ind: Any, v: Any, mode: str | None = None, *, inplace: bool = True) -> Any:
    """``a`` with its flattened entries at ``ind`` set to ``v`` (repeated to ``ind``'s length; a
    position named twice takes the later value), returned: ``inplace=False`` is required, as in
    JAX. ``mode``: None or ``"fill"`` drops indices outside ``[-n, n)`` (JAX's default),
    ``"clip"`` clips them, ``"wrap"`` wraps them, ``"raise"`` (numpy's default) raises for a
    concrete one. ``ind`` may be traced."""
    _inplace_refused("put", inplace)
    if mode not in (None, "fill", "clip", "wrap", "raise"):
        raise ValueError(f"put: mode must be None, 'fill', 'clip', 'wrap' or 'raise', got {mode!r}")
    fnp = namespace()
    x0 = asarray(a)
    x = fnp.ravel(x0)
    idx = fnp.ravel(asarray(ind))
    if not (dtypes.is_int(idx.dtype) or idx.shape[0] == 0):
        raise TypeError(f"put: indices must be integers, got {idx.dtype}")
    idx = idx.astype(np.int64)
    n = x.shape[0]
    vals = fnp.ravel(fnp.asarray(v)).astype(x.dtype)
    if idx.shape[0] == 0:
        return x0
    if vals.shape[0] == 0:
        raise ValueError("put: cannot put an empty array of values")
    vals = fnp.take(vals, np.arange(idx.shape[0]) % vals.shape[0])
    if mode == "clip":
        idx = fnp.clip(idx, 0, n - 1)
    elif mode == "wrap":
        idx = idx % n
    elif mode == "raise":
        if isinstance(idx, Tracer):
            raise ConcretizationError("put: mode='raise' needs concrete indices; use mode='fill', 'clip' or 'wrap'")
        bad = (idx < -n) | (idx >= n)
        if np.any(bad):
            raise IndexError(f"put: index {int(idx[np.argmax(bad)])} is out of bounds for size {n}")
    return fnp.reshape(fnp.put_along_axis(x, idx, vals, axis=0, inplace=False), x0.shape)


# --- index arrays ---------------------------------------------------------------------------------


def indices(dimensions: Any, dtype: Any = None, sparse: bool = False) -> Any:
    out = np.indices(tuple(dimensions), dtype=dtypes.canonicalize(dtype or np.int64), sparse=sparse)
    return out


def ix_(*args: Any) -> tuple[Any, ...]:
    n = len(args)
    out = []
    for k, a in enumerate(args):
        x = asarray(a)
        shape = [1] * n
        shape[k] = x.shape[0]
        out.append(reshape(x, tuple(shape)))
    return tuple(out)


def unravel_index(indices: Any, shape: Any, order: str = "C") -> tuple[Any, ...]:
    if order != "C":
        raise NotImplementedError("unravel_index: only C order is supported")
    idx = cast(asarray(indices), dtypes.int64)
    out = []
    for d in reversed(tuple(shape)):
        dd = np.asarray(d, np.int64)
        out.append(ew.mod_p.bind(idx, dd))
        idx = ew.floor_divide_p.bind(idx, dd)
    return tuple(reversed(out))


def ravel_multi_index(multi_index: Any, dims: Any, mode: str = "raise", order: str = "C") -> Any:
    if order != "C":
        raise NotImplementedError("ravel_multi_index: only C order is supported")
    flat = None
    for i, d in zip(multi_index, dims):
        i = cast(asarray(i), dtypes.int64)
        if mode == "clip":
            i = ew.min_p.bind(ew.max_p.bind(i, np.asarray(0, np.int64)), np.asarray(d - 1, np.int64))
        elif mode == "wrap":
            i = ew.mod_p.bind(i, np.asarray(d, np.int64))
        flat = i if flat is None else ew.add(ew.mul(flat, np.asarray(d, np.int64)), i)
    return flat


def diag_indices(n: int, ndim: int = 2) -> tuple[np.ndarray, ...]:
    return tuple(i.astype(dtypes.default_int()) for i in np.diag_indices(n, ndim))


def diag_indices_from(arr: Any) -> tuple[np.ndarray, ...]:
    x = asarray(arr)
    return diag_indices(x.shape[0], x.ndim)


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple[np.ndarray, ...]:
    return tuple(i.astype(dtypes.default_int()) for i in np.tril_indices(n, k, m))


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple[np.ndarray, ...]:
    return tuple(i.astype(dtypes.default_int()) for i in np.triu_indices(n, k, m))


def tril_indices_from(arr: Any, k: int = 0) -> tuple[np.ndarray, ...]:
    shape = np.shape(arr)
    if len(shape) != 2:
        raise ValueError(f"tril_indices_from: input array must be 2-d, got shape {shape}")
    return namespace().tril_indices(shape[0], k, shape[1])


def triu_indices_from(arr: Any, k: int = 0) -> tuple[np.ndarray, ...]:
    shape = np.shape(arr)
    if len(shape) != 2:
        raise ValueError(f"triu_indices_from: input array must be 2-d, got shape {shape}")
    return namespace().triu_indices(shape[0], k, shape[1])


def mask_indices(n: int, mask_func: Callable[[Any, int], Any], k: int = 0, *,
                 size: int | None = None) -> tuple[Any, Any]:
    """The (row, column) indices of the nonzero entries of ``mask_func(ones((n, n)), k)``, e.g.
    ``mask_indices(n, triu)``; ``size`` pads or cuts them to a fixed length, as in JAX."""
    fnp = namespace()
    return fnp.nonzero(fnp.asarray(mask_func(fnp.ones((n, n), np.int64), k)) != 0, size=size)
