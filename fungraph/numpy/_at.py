"""``x.at[idx].set(v)`` and friends: JAX's functional index updates, built from ``take``,
``scatter_add`` and ``select`` so that every transformation and backend already handles them.

With a concrete index (ints, slices, ``None``, ``...``, integer or boolean arrays) the
positions are known at trace time, and repeated positions apply their updates in order, as
numpy's ``ufunc.at`` does (``set``: the last one wins). With a traced index, ``get``, ``add``
and ``subtract`` take any index; the others need an index that cannot repeat a position
(traced scalars and slices), because which duplicate wins is not known when tracing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError, Tracer
from fungraph.lax._slicing import combine_at_positions
from fungraph.numpy._util import asarray, aval, cast, is_weak
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh
from fungraph.primitives.indexing import (
    clamped_starts,
    dynamic_slice,
    dynamic_update_slice,
    scatter_add,
    take,
    wrapped_starts,
)


class IndexUpdateHelper:
    """``x.at``: index it to get an :class:`IndexUpdateRef`."""

    def __init__(self, x: Any) -> None:
        self._x = x

    def __getitem__(self, idx: Any) -> IndexUpdateRef:
        return IndexUpdateRef(self._x, idx)

    def __repr__(self) -> str:
        return f"IndexUpdateHelper({self._x!r})"


def at(x: Any) -> IndexUpdateHelper:
    """``at(x)[idx].set(v)``: the ``.at`` property for any array, arrays made by numpy itself
    included (fungraph's results have ``.at``; numpy's ``ndarray`` has none)."""
    return IndexUpdateHelper(x)


def _check_options(op: str, options: dict[str, Any]) -> str | None:
    """JAX's keywords, and the ``mode`` they name: the ordering hints are accepted and unused;
    ``mode`` is None (as JAX: gathers clamp, out-of-bounds updates are dropped),
    ``"promise_in_bounds"`` (the same), ``"clip"`` (indices clamped into bounds), ``"drop"``
    (updates out of bounds skipped) or, for ``get``, ``"fill"`` (out-of-bounds reads give
    ``fill_value``)."""
    allowed = (None, "promise_in_bounds", "clip", "fill" if op == "get" else "drop")
    for name, value in options.items():
        if name in ("indices_are_sorted", "unique_indices") or (name == "mode" and value in allowed):
            continue
        if name == "fill_value" and op == "get":
            continue
        raise TypeError(f"x.at[...].{op}: {name}={value!r} is not supported (mode takes one of {allowed}"
                        + ("; fill_value goes with get(mode='fill')" if name == "fill_value" else "") + ")")
    mode = options.get("mode")
    return None if mode == "promise_in_bounds" else mode


def _traced(idx: Any) -> bool:
    entries = idx if isinstance(idx, tuple) else (idx,)
    return any(isinstance(e, Tracer) for e in entries)


def _may_repeat(idx: Any) -> bool:
    """Whether an index may name one position twice: it holds an index array of 2+ elements."""
    entries = idx if isinstance(idx, tuple) else (idx,)
    return any(aval(e).size > 1 if isinstance(e, Tracer) else isinstance(e, (list, np.ndarray)) and np.size(e) > 1
               for e in entries)


class IndexUpdateRef:
    """``x.at[idx]``: ``get()``, ``set(v)``, ``add(v)``, ``subtract(v)``, ``multiply(v)``,
    ``divide(v)``, ``power(v)``, ``min(v)``, ``max(v)`` and ``apply(f)``, each returning a new
    array (the input is never modified). ``v`` broadcasts to ``x[idx]``'s shape and is cast to
    ``x``'s dtype, as in JAX."""

    def __init__(self, x: Any, idx: Any) -> None:
        self._x = asarray(x)
        self._idx = idx

    def get(self, **options: Any) -> Any:
        from fungraph.numpy._indexing import getitem, observe_getitem

        mode = _check_options("get", options)
        if mode in ("fill", "clip"):
            observe_getitem(self._x, self._idx)
        if mode == "fill":
            return self._filled_get(options.get("fill_value"))
        idx = _clipped(aval(self._x).shape, self._idx) if mode == "clip" else self._idx
        return getitem(self._x, idx)

    def set(self, values: Any, **options: Any) -> Any:
        return self._update("set", values, lambda old, new: new, options)

    def add(self, values: Any, **options: Any) -> Any:
        return self._update("add", values, ew.add, options)

    def subtract(self, values: Any, **options: Any) -> Any:
        return self._update("subtract", values, ew.sub, options)

    def multiply(self, values: Any, **options: Any) -> Any:
        return self._update("multiply", values, ew.mul, options)

    mul = multiply

    def divide(self, values: Any, **options: Any) -> Any:
        """JAX's ``x / ones_like(x).at[idx].multiply(values)``: true division, so an integer or
        boolean ``x`` gives a float result (float32 for int32), as ``x / 1`` does."""
        from fungraph.numpy._elementwise import divide

        x = self._x
        ones = sh.broadcast_in_dim(np.ones((), aval(x).dtype), aval(x).shape, ())
        return divide(x, IndexUpdateRef(ones, self._idx).multiply(values, **options))

    def power(self, values: Any, **options: Any) -> Any:
        from fungraph.numpy._elementwise import power

        return self._update("power", values, lambda old, new: cast(power(old, new), aval(old).dtype), options)

    def min(self, values: Any, **options: Any) -> Any:
        return self._update("min", values, ew.min_p.bind, options)

    def max(self, values: Any, **options: Any) -> Any:
        return self._update("max", values, ew.max_p.bind, options)

    def apply(self, func: Callable[[Any], Any], **options: Any) -> Any:
        """``func`` applied to the indexed elements (once per element, however often indexed)."""
        _check_options("apply", options)
        x = self._x
        shape, size, dt = aval(x).shape, aval(x).size, aval(x).dtype
        if _traced(self._idx):
            return self._update("apply", cast(asarray(func(self.get())), dt), lambda old, new: new, {})
        mask = np.zeros(size, bool)
        mask[_positions(shape, self._idx).reshape(-1)] = True
        applied = cast(asarray(func(sh.reshape(x, (size,)))), dt)
        return _where(mask.reshape(shape), sh.reshape(applied, shape), x)

    # --------------------------------------------------------------------------------------

    def _values(self, values: Any, shape: tuple[int, ...], op: str) -> Any:
        x = self._x
        dt = aval(x).dtype
        v = np.asarray(values, dt) if is_weak(values) else cast(asarray(values), dt)
        try:
            target = np.broadcast_shapes(aval(v).shape, shape)
        except ValueError:
            target = None
        if target != tuple(shape):
            raise ShapeError(f"x.at[...].{op}: values of shape {aval(v).shape} do not broadcast to the indexed "
                             f"shape {tuple(shape)} of {aval(x)}")
        size = int(np.prod(shape, dtype=np.int64))
        return sh.reshape(sh.broadcast_to(v, tuple(shape)), (size,))

    def _filled_get(self, fill_value: Any) -> Any:
        """``x[idx]`` with ``fill_value`` (JAX's default: NaN, or the dtype's most negative
        value, or True) wherever an integer index is out of bounds."""
        x = self._x
        shape, size, dt = aval(x).shape, aval(x).size, aval(x).dtype
        if fill_value is None:
            fill_value = (np.nan if np.issubdtype(dt, np.inexact) else True if dt == np.bool_
                          else np.iinfo(dt).min)
        fill = np.asarray(fill_value).astype(dt) if is_weak(fill_value) else cast(asarray(fill_value), dt)
        along = _along_one_axis(shape, self._idx)
        if along is not None and shape[along[0]] > 0:
            return _filled_take(x, *along, fill)
        ids = _traced_positions(shape, self._idx, concrete_too=True)
        count = int(np.prod(aval(ids).shape, dtype=np.int64))
        flat_ids = sh.reshape(ids, (count,))
        picked = take(sh.reshape(x, (size,)), ew.max_p.bind(flat_ids, np.asarray(0, np.int64)), 0)
        inside = ew.gt(flat_ids, np.asarray(-1, np.int64))
        return sh.reshape(ew.select(inside, picked, sh.broadcast_to(fill, (count,))), aval(ids).shape)

    def _update(self, op: str, values: Any, combine: Callable[[Any, Any], Any], options: dict[str, Any]) -> Any:
        """The updated array, weakly typed where ``x`` is (JAX's scatter takes its operand's weak type)."""
        out = self._scatter(op, values, combine, options)
        return ew.weak(out) if dtypes.is_weak(self._x) else out

    def _scatter(self, op: str, values: Any, combine: Callable[[Any, Any], Any], options: dict[str, Any]) -> Any:
        mode = _check_options(op, options)
        if mode == "clip":
            return IndexUpdateRef(self._x, _clipped(aval(self._x).shape, self._idx))._scatter(op, values, combine, {})
        if mode != "clip" and not _traced(self._idx) and _out_of_bounds(aval(self._x).shape, self._idx):
            return self._positions_update(op, values, combine, _traced_positions(aval(self._x).shape, self._idx,
                                                                                 concrete_too=True))
        window = _window(aval(self._x).shape, self._idx)
        if window is not None:
            return self._window_update(op, values, combine, window)
        if _traced(self._idx):
            from fungraph.numpy._indexing import observe_getitem

            # a scatter at several traced integer indices is checked here (one index: on the scatter)
            observe_getitem(self._x, self._idx, "scatter", at_least=2)
            return self._traced_update(op, values, combine)
        return self._positions_update(op, values, combine, _positions(aval(self._x).shape, self._idx))

    def _positions_update(self, op: str, values: Any, combine: Callable[[Any, Any], Any], ids: np.ndarray) -> Any:
        """The update at the concrete flat positions ``ids`` (-1: dropped), repeated positions
        applied in order."""
        x = self._x
        shape, size = aval(x).shape, aval(x).size
        flat_v = self._values(values, ids.shape, op)
        pos = ids.reshape(-1)
        if op == "set":
            last = np.full(size, -1, np.int64)
            kept = pos >= 0
            np.maximum.at(last, pos[kept], np.arange(pos.size, dtype=np.int64)[kept])
            layers = [last]
        else:
            layers = _layers(pos, size)
        out = x
        for src in layers:
            mask = src >= 0
            if not mask.any():
                continue
            picked = sh.reshape(take(flat_v, np.where(mask, src, 0), 0), shape)
            out = _where(mask.reshape(shape), combine(out, picked), out)
        return out

    def _window_update(self, op: str, values: Any, combine: Callable[[Any, Any], Any], window: _Window) -> Any:
        """One ``dynamic_update_slice`` of the window, O(window) where the plan reuses ``x``'s
        buffer; with a traced index out of bounds nothing is written (JAX drops the update)."""
        x = self._x
        starts, sizes, traced, indexed = window
        new = sh.reshape(self._values(values, indexed, op), sizes)
        if 0 in sizes:
            return x
        if op != "set":
            lo = wrapped_starts(starts, aval(x).shape)
            new = combine(dynamic_slice(x, clamped_starts(lo, aval(x).shape, sizes), sizes), new)
        return dynamic_update_slice(x, new, starts, "drop" if traced else "clamp")

    def _traced_update(self, op: str, values: Any, combine: Callable[[Any, Any], Any]) -> Any:
        x = self._x
        xshape, size = aval(x).shape, aval(x).size
        along = _along_one_axis(xshape, self._idx)
        if along is not None and op in ("add", "subtract"):
            return self._axis_update(op, values, combine, *along)
        ids = _traced_positions(xshape, self._idx)
        shape = aval(ids).shape
        count = int(np.prod(shape, dtype=np.int64))
        if count == 0:
            return x
        flat_ids = sh.reshape(ids, (count,))
        inside = ew.gt(flat_ids, np.asarray(-1, np.int64))
        flat_ids = ew.max_p.bind(flat_ids, np.asarray(0, np.int64))
        flat_v = self._values(values, shape, op)
        if op in ("add", "subtract"):
            kept = ew.select(inside, flat_v, np.zeros((), aval(flat_v).dtype))
            return combine(x, sh.reshape(scatter_add(kept, flat_ids, 0, (size,)), xshape))
        if _may_repeat(self._idx):
            return self._repeated_update(op, flat_v, ew.select(inside, flat_ids, np.asarray(size, np.int64)),
                                         combine)
        ones = ew.select(inside, np.arange(1, count + 1, dtype=np.int64), np.zeros((), np.int64))
        src = ew.sub(scatter_add(ones, flat_ids, 0, (size,)), np.asarray(1, np.int64))
        mask = ew.gt(src, np.asarray(-1, np.int64))
        picked = take(flat_v, ew.max_p.bind(src, np.asarray(0, np.int64)), 0)
        mask, picked = sh.reshape(mask, xshape), sh.reshape(picked, xshape)
        return _where(mask, combine(x, picked), x)


    def _repeated_update(self, op: str, flat_v: Any, pos: Any, combine: Callable[[Any, Any], Any]) -> Any:
        """The update at traced flat positions ``pos`` (``x.size``: dropped) that may repeat, as
        JAX's scatters: ``set`` keeps the last value at a position, ``multiply``/``min``/``max``
        fold repeated values into it, ``divide``/``power`` apply the product of their values."""
        x = self._x
        if op in ("divide", "power"):
            ones = sh.broadcast_in_dim(np.ones((), aval(x).dtype), aval(x).shape, ())
            return combine(x, combine_at_positions(ones, pos, flat_v, "mul"))
        return combine_at_positions(x, pos, flat_v, {"set": "set", "multiply": "mul", "min": "min", "max": "max"}[op])

    def _axis_update(self, op: str, values: Any, combine: Callable[[Any, Any], Any], axis: int, idx: Any) -> Any:
        """``x.at[:, ..., idx].add(v)`` with one traced index array on ``axis``: one scatter-add
        of ``v`` along that axis (an embedding gradient, a segment sum), O(x + v), updates at
        out-of-bounds indices dropped: sent to a spare last row along ``axis`` that a slice
        then leaves out (a pass over the indices, where masking the updates passes over them)."""
        from fungraph.numpy._indexing import observe_getitem

        x = self._x
        observe_getitem(x, self._idx, "scatter")  # checkify: the scatter below sees only in-bounds positions
        xshape = aval(x).shape
        d = xshape[axis]
        shape = xshape[:axis] + aval(idx).shape + xshape[axis + 1:]
        v = sh.reshape(self._values(values, shape, op), shape)
        wrapped = _wrapped(idx, d)
        inside = ew.and_p.bind(ew.ge_p.bind(wrapped, np.asarray(0, np.int64)), ew.lt(wrapped, np.asarray(d, np.int64)))
        pos = ew.select(inside, wrapped, np.asarray(d, np.int64))
        spare = xshape[:axis] + (d + 1,) + xshape[axis + 1:]
        summed = sh.slice_(scatter_add(v, pos, axis, spare), (0,) * len(xshape), xshape, None)
        return combine(x, summed)


def _filled_take(x: Any, axis: int, idx: Any, fill: Any) -> Any:
    """``x[:, ..., idx]`` along ``axis`` with ``fill`` where ``idx`` is out of bounds: one
    ``take`` of whole rows (the transpose of a scatter-add along that axis: a BCOO product's
    gather), where flat positions would gather element by element. The mask is broadcast
    numpy's way (trailing axes of 1), which a fused region reads without a copy."""
    xshape = aval(x).shape
    d = xshape[axis]
    shape = xshape[:axis] + aval(idx).shape + xshape[axis + 1:]
    wrapped = _wrapped(idx, d)
    inside = ew.and_p.bind(ew.ge_p.bind(wrapped, np.asarray(0, np.int64)), ew.lt(wrapped, np.asarray(d, np.int64)))
    trailing = len(xshape) - axis - 1
    inside = sh.reshape(inside, aval(idx).shape + (1,) * trailing)
    inside = sh.broadcast_in_dim(inside, shape, tuple(range(len(shape) - aval(inside).ndim, len(shape))))
    return ew.select(inside, take(x, wrapped, axis), sh.broadcast_to(fill, shape))


def _along_one_axis(shape: tuple[int, ...], idx: Any) -> tuple[int, Any] | None:
    """(axis, index) when ``idx`` is one traced integer array on one axis and whole slices
    elsewhere (``x.at[i]``, ``x.at[:, i]``, ``x.at[..., i, :]``), else None."""
    from fungraph.numpy._indexing import _expand_index

    entries = _expand_index(idx, len(shape))
    if any(e is None for e in entries):
        return None
    traced = [a for a, e in enumerate(entries) if isinstance(e, Tracer)]
    whole = all(isinstance(e, slice) and e == slice(None) for a, e in enumerate(entries) if a not in traced)
    if len(traced) != 1 or not whole or not np.issubdtype(aval(entries[traced[0]]).dtype, np.integer):
        return None
    return traced[0], entries[traced[0]]


#: (start per axis, window shape, whether an entry is traced, indexed shape)
_Window = tuple[list[Any], tuple[int, ...], bool, tuple[int, ...]]


def _window(shape: tuple[int, ...], idx: Any) -> _Window | None:
    """The rectangular window a basic index names (integers, concrete or traced scalars;
    step-1 slices; ``None``; ``...``), or None for any other index (the general path, which
    also raises numpy's errors for concrete out-of-bounds integers)."""
    from fungraph.numpy._indexing import _expand_index

    expanded = _expand_index(idx, len(shape))
    expanded += [slice(None)] * (len(shape) - sum(1 for e in expanded if e is not None))
    starts: list[Any] = []
    sizes: list[int] = []
    traced = False
    indexed: list[int] = []
    axis = 0
    for e in expanded:
        if e is None:
            indexed.append(1)
            continue
        d = shape[axis]
        if isinstance(e, slice):
            if e.step not in (None, 1) or not all(b is None or isinstance(b, (int, np.integer))
                                                   for b in (e.start, e.stop)):
                return None
            lo, hi, _ = e.indices(d)
            starts.append(lo)
            sizes.append(max(hi - lo, 0))
            indexed.append(sizes[-1])
        elif isinstance(e, Tracer):
            if aval(e).shape != () or not np.issubdtype(aval(e).dtype, np.integer):
                return None
            starts.append(e)
            traced = True
            sizes.append(1)
        elif isinstance(e, (int, np.integer, np.ndarray)) and not isinstance(e, (bool, np.bool_)) \
                and np.ndim(e) == 0 and np.issubdtype(np.asarray(e).dtype, np.integer) and -d <= int(e) < d:
            starts.append(int(e) % d)
            sizes.append(1)
        else:
            return None
        axis += 1
    return starts, tuple(sizes), traced, tuple(indexed)


def _concrete_int(e: Any) -> bool:
    return (isinstance(e, (int, np.integer)) and not isinstance(e, (bool, np.bool_))) or \
        (isinstance(e, np.ndarray) and np.issubdtype(e.dtype, np.integer))


def _out_of_bounds(shape: tuple[int, ...], idx: Any) -> bool:
    """Whether a concrete integer entry of ``idx`` lies outside its axis."""
    from fungraph.numpy._indexing import _expand_index

    axis = 0
    for e in _expand_index(idx, len(shape)):
        if e is None:
            continue
        if _concrete_int(e) and np.size(e) and (np.max(e) >= shape[axis] or np.min(e) < -shape[axis]):
            return True
        axis += 1
    return False


def _clipped(shape: tuple[int, ...], idx: Any) -> tuple:
    """``idx`` with each integer entry, concrete or traced, counted from the end when negative
    and clamped into its axis (JAX's ``mode="clip"``)."""
    from fungraph.numpy._indexing import _expand_index

    out, axis = [], 0
    for e in _expand_index(idx, len(shape)):
        if e is not None and (_concrete_int(e) or isinstance(e, Tracer) and np.issubdtype(aval(e).dtype, np.integer)):
            d = shape[axis]
            if isinstance(e, Tracer):
                w = _wrapped(e, d)
                e = ew.min_p.bind(ew.max_p.bind(w, np.asarray(0, np.int64)), np.asarray(d - 1, np.int64))
            else:
                i = np.asarray(e, np.int64)
                e = np.clip(np.where(i < 0, i + d, i), 0, d - 1)
        out.append(e)
        axis += e is not None
    return tuple(out)


def _traced_positions(shape: tuple[int, ...], idx: Any, concrete_too: bool = False) -> Any:
    """The flat positions ``x[idx]`` names for an index holding traced entries, -1 where a
    traced entry is out of bounds (JAX drops those updates; a gather would clamp them): each
    axis a traced entry indexes is padded with -1 on both sides, and the entry shifted onto
    the padded axis (an entry past either end onto the border, also where ``vmap`` computed it
    concretely). ``concrete_too``: concrete integer entries out of bounds give -1 as well."""
    from fungraph.numpy._indexing import _expand_index, getitem

    ids = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    entries = _expand_index(idx, len(shape))
    padded, shifted, axis = [], [], 0
    for e in entries:
        if e is None:
            shifted.append(e)
            continue
        if isinstance(e, Tracer):
            wrapped = _wrapped(e, shape[axis])
            outside = ew.or_p.bind(ew.lt(wrapped, np.asarray(0, np.int64)),
                                   ew.ge_p.bind(wrapped, np.asarray(shape[axis], np.int64)))
            inside = ew.select(outside, np.asarray(-1, np.int64), wrapped)
            shifted.append(ew.add(inside, np.asarray(1, np.int64)))
            padded.append(axis)
        elif concrete_too and _concrete_int(e):
            d = shape[axis]
            i = np.asarray(e, np.int64)
            w = np.where(i < 0, i + d, i)
            shifted.append(np.where((w < 0) | (w >= d), -1, w) + 1)
            padded.append(axis)
        else:
            shifted.append(e)
        axis += 1
    pad = [(1, 1) if a in padded else (0, 0) for a in range(len(shape))]
    table = np.pad(ids, pad, constant_values=-1)
    if not any(isinstance(e, Tracer) for e in shifted):
        return table[tuple(shifted)]
    return getitem(table, tuple(shifted))


def _wrapped(i: Any, d: int) -> Any:
    """The traced index ``i`` as int64 with negative entries counted from the end of an axis
    of ``d`` (once: still negative, or ``d`` and beyond, is out of bounds)."""
    i = cast(asarray(i), np.dtype(np.int64))
    return ew.select(ew.lt(i, np.asarray(0, np.int64)), ew.add(i, np.asarray(d, np.int64)), i)


def _positions(shape: tuple[int, ...], idx: Any) -> np.ndarray:
    """The flat positions ``x[idx]`` reads, in its shape (numpy's indexing and its errors)."""
    return np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)[idx]


def _layers(pos: np.ndarray, size: int) -> list[np.ndarray]:
    """Per layer k, the update applied to each position by its (k+1)-th occurrence in ``pos``
    (-1 where none), so updates of a repeated position apply in order."""
    valid = np.nonzero(pos >= 0)[0]
    pos = pos[valid]
    order = np.argsort(pos, kind="stable")
    sorted_pos = pos[order]
    first = np.searchsorted(sorted_pos, sorted_pos, side="left")
    rank = np.empty(pos.size, np.int64)
    rank[order] = np.arange(pos.size) - first
    layers = []
    for k in range(int(rank.max()) + 1 if pos.size else 0):
        src = np.full(size, -1, np.int64)
        sel = rank == k
        src[pos[sel]] = valid[sel]
        layers.append(src)
    return layers


def _where(mask: Any, new: Any, old: Any) -> Any:
    if isinstance(mask, np.ndarray) and mask.all():
        return new
    return ew.select(mask, new, old)

