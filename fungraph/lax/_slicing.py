"""``jax.lax``'s slicing: static slices, dynamic slices and updates (start indices clamped so
the window fits, as in JAX), and XLA's ``gather``/``scatter`` (flat window positions, one
``take`` or ``scatter_add``)."""

from __future__ import annotations

import builtins
import enum
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError, Tracer
from fungraph.ir import aval_of
from fungraph.lax._control_flow import fori_loop
from fungraph.lax._elementwise import _same_dtype
from fungraph.lax._elementwise import max as lax_max
from fungraph.lax._elementwise import min as lax_min
from fungraph.primitives import elementwise as ew
from fungraph.primitives import indexing as ix
from fungraph.primitives import reductions as red
from fungraph.primitives import shape as sh
from fungraph.primitives import sorting
from fungraph.primitives.cumulative import associative_scan
from fungraph.primitives.indexing import dynamic_update_slice_p, take
from fungraph.primitives.operands import asarray, cast, take_static


def _i64(value: Any) -> np.ndarray:
    return np.asarray(value, np.int64)


def _clip(i: Any, lo: int, hi: int) -> Any:
    """An int64 ``i`` clipped to ``[lo, hi]``."""
    return ew.max_p.bind(ew.min_p.bind(i, _i64(hi)), _i64(lo))


def _drop_axis(x: Any, axis: int) -> Any:
    shape = aval_of(x).shape
    return sh.reshape(x, shape[:axis] + shape[axis + 1:])


def _flat(x: Any) -> Any:
    return sh.reshape(x, (aval_of(x).size,))


def _head(x: Any, n: int) -> Any:
    """The first ``n`` entries of a vector."""
    return sh.slice_(x, (0,), (n,), None)

# --- static and dynamic slices --------------------------------------------------------------------


def slice(operand: Any, start_indices: Sequence[int], limit_indices: Sequence[int],  # noqa: A001
          strides: Sequence[int] | None = None) -> Any:
    """``operand[start:limit:stride]`` on every axis (bounds checked, no negative indices)."""
    x = asarray(operand)
    shape = aval_of(x).shape
    strides = strides or (1,) * len(shape)
    if not len(start_indices) == len(limit_indices) == len(strides) == len(shape) or any(
            not 0 <= s <= e <= d or st < 1 for s, e, st, d in zip(start_indices, limit_indices, strides, shape)):
        raise ShapeError(f"lax.slice: start {tuple(start_indices)}, limit {tuple(limit_indices)}, strides "
                         f"{tuple(strides)} do not fit {aval_of(x)}")
    return sh.slice_(x, start_indices, limit_indices, strides)


def slice_in_dim(operand: Any, start_index: int | None, limit_index: int | None, stride: int = 1,
                 axis: int = 0) -> Any:
    """``operand[start:limit:stride]`` along ``axis`` (negative indices count from the end)."""
    x = asarray(operand)
    d = aval_of(x).shape[axis]
    start = 0 if start_index is None else int(start_index) % d if start_index < 0 else int(start_index)
    stop = d if limit_index is None else int(limit_index) % d if limit_index < 0 else int(limit_index)
    start, stop, stride = builtins.slice(start, stop, stride).indices(d)
    shape = aval_of(x).shape
    axis = axis % len(shape)
    lo, hi, st = [0] * len(shape), list(shape), [1] * len(shape)
    lo[axis], hi[axis], st[axis] = start, builtins.max(stop, start), stride
    return sh.slice_(x, lo, hi, st)


def index_in_dim(operand: Any, index: int, axis: int = 0, keepdims: bool = True) -> Any:
    x = asarray(operand)
    d = aval_of(x).shape[axis]
    i = int(index) + d if index < 0 else int(index)
    out = slice_in_dim(x, i, i + 1, 1, axis)
    return out if keepdims else _drop_axis(out, axis % len(aval_of(out).shape))


#: Called as ``observer(name, shape, starts, axes, sizes)`` while a function is staged, with the
#: start indices of the windows a dynamic slice, a gather or an indexing expression reads, before
#: they are clamped (negative indices already counted from the end where the operation does so):
#: ``starts`` holds one integer array per indexed operand axis in ``axes``, all of one shape (one
#: window per element), ``sizes`` the windows' sizes along those axes. ``checkify``'s index checks.
INDEX_OBSERVERS: list[Callable[[str, tuple[int, ...], list[Any], tuple[int, ...], tuple[int, ...]], None]] = []


def observe_indices(name: str, shape: tuple[int, ...], starts: Sequence[Any], axes: Sequence[int],
                    sizes: Sequence[int]) -> None:
    """Report the unclamped window starts of an indexing operation to the :data:`INDEX_OBSERVERS`."""
    for observe in INDEX_OBSERVERS:
        observe(name, tuple(shape), list(starts), tuple(int(a) for a in axes), tuple(int(s) for s in sizes))


def _starts(x: Any, start_indices: Sequence[Any], sizes: Sequence[int], name: str,
            allow_negative_indices: bool | Sequence[bool] = True) -> list[Any]:
    """Each start index as an int64 scalar, negative ones counted from the end (on the axes
    ``allow_negative_indices`` allows, one flag or one per axis), clamped so the window of
    ``sizes`` fits (JAX's rule)."""
    shape = aval_of(x).shape
    if isinstance(allow_negative_indices, (bool, np.bool_)):
        wrap = (bool(allow_negative_indices),) * len(shape)
    else:
        wrap = tuple(bool(w) for w in allow_negative_indices)
        if len(wrap) != len(shape):
            raise ValueError(f"lax.{name}: allow_negative_indices needs one flag per axis of {aval_of(x)}, got "
                             f"{len(wrap)}")
    if len(start_indices) != len(shape) or len(sizes) != len(shape) or any(
            not 0 <= s <= d for s, d in zip(sizes, shape)):
        raise ShapeError(f"lax.{name}: start indices {len(start_indices)} and sizes {tuple(sizes)} do not fit "
                         f"{aval_of(x)}")
    out = []
    for i, d, w in zip(start_indices, shape, wrap):
        if not w and not isinstance(i, Tracer) and np.ndim(i) == 0 and int(np.asarray(i)) < 0:
            raise ValueError(f"Index {int(np.asarray(i))} is out of bounds for dimension {d} if "
                             "allow_negative_indices=False")
        i = cast(asarray(i), dtypes.int64)
        if w:
            i = ew.select(ew.lt(i, _i64(0)), ew.add(i, _i64(d)), i)
        out.append(i)
    observe_indices(name, shape, out, range(len(shape)), sizes)
    return [_clip(i, 0, d - s) for i, d, s in zip(out, shape, sizes)]


def dynamic_slice(operand: Any, start_indices: Sequence[Any], slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool | Sequence[bool] = True) -> Any:
    """The ``slice_sizes`` window of ``operand`` at traced ``start_indices``, clamped to fit."""
    x = asarray(operand)
    sizes = tuple(int(s) for s in slice_sizes)
    starts = _starts(x, list(start_indices), sizes, "dynamic_slice", allow_negative_indices)
    for axis, (start, size) in enumerate(zip(starts, sizes)):
        if size != aval_of(x).shape[axis]:
            x = take(x, ew.add(start, np.arange(size, dtype=np.int64)), axis)
    return x


def dynamic_slice_in_dim(operand: Any, start_index: Any, slice_size: int, axis: int = 0, *,
                         allow_negative_indices: bool = True) -> Any:
    x = asarray(operand)
    shape = aval_of(x).shape
    axis = axis % len(shape)
    starts = [0] * len(shape)
    starts[axis] = start_index
    return dynamic_slice(x, starts, shape[:axis] + (int(slice_size),) + shape[axis + 1:],
                         allow_negative_indices=allow_negative_indices)


def dynamic_index_in_dim(operand: Any, index: Any, axis: int = 0, keepdims: bool = True, *,
                         allow_negative_indices: bool = True) -> Any:
    out = dynamic_slice_in_dim(operand, index, 1, axis, allow_negative_indices=allow_negative_indices)
    return out if keepdims else _drop_axis(out, axis % len(aval_of(out).shape))


def dynamic_update_slice(operand: Any, update: Any, start_indices: Sequence[Any], *,
                         allow_negative_indices: bool | Sequence[bool] = True) -> Any:
    """``operand`` with ``update`` written at traced ``start_indices``, clamped so it fits."""
    x, u = _same_dtype("dynamic_update_slice", operand, update)
    shape, ushape = aval_of(x).shape, aval_of(u).shape
    if len(ushape) != len(shape):
        raise ShapeError(f"lax.dynamic_update_slice: update {aval_of(u)} and operand {aval_of(x)} differ in rank")
    starts = _starts(x, list(start_indices), ushape, "dynamic_update_slice", allow_negative_indices)
    return dynamic_update_slice_p.bind(x, u, *starts, mode="clamp")


def dynamic_update_slice_in_dim(operand: Any, update: Any, start_index: Any, axis: int, *,
                                allow_negative_indices: bool = True) -> Any:
    x = asarray(operand)
    starts: list[Any] = [0] * len(aval_of(x).shape)
    starts[axis % len(starts)] = start_index
    return dynamic_update_slice(x, update, starts, allow_negative_indices=allow_negative_indices)


def dynamic_update_index_in_dim(operand: Any, update: Any, index: Any, axis: int, *,
                                allow_negative_indices: bool = True) -> Any:
    u = asarray(update)
    x = asarray(operand)
    if len(aval_of(u).shape) == len(aval_of(x).shape) - 1:
        ax = axis % len(aval_of(x).shape)
        u = sh.reshape(u, aval_of(u).shape[:ax] + (1,) + aval_of(u).shape[ax:])
    return dynamic_update_slice_in_dim(x, u, index, axis, allow_negative_indices=allow_negative_indices)


def index_take(src: Any, idxs: Sequence[Any], axes: Sequence[int]) -> Any:
    """``src[idxs[0], idxs[1], ...]`` with index ``k`` on axis ``axes[k]`` (wrapped modulo its
    size); the indexed axes become one leading axis and the others follow in order."""
    x = asarray(src)
    shape = aval_of(x).shape
    axes = [int(a) % len(shape) for a in axes]
    idx = [asarray(i) for i in idxs]
    if len(idx) != len(axes) or len({aval_of(i).shape for i in idx}) > 1 or any(
            not dtypes.is_int(aval_of(i).dtype) or len(aval_of(i).shape) != 1 for i in idx):
        raise ShapeError(f"lax.index_take: one integer vector of one length per axis {axes} needed, got "
                         f"{[str(aval_of(i)) for i in idx]}")
    rest = [a for a in range(len(shape)) if a not in axes]
    moved = sh.transpose(x, axes + rest)
    lead = [shape[a] for a in axes]
    flat = _i64(0)
    for i, d in zip(idx, lead):
        flat = ew.add(ew.mul(flat, _i64(d)), ew.mod_p.bind(cast(i, dtypes.int64), _i64(d)))
    rows = sh.reshape(moved, (int(np.prod(lead, dtype=np.int64)),) + tuple(shape[a] for a in rest))
    return take(rows, flat, 0)


# --- gather and scatter ---------------------------------------------------------------------------


class GatherScatterMode(enum.Enum):
    """What an out-of-bounds gather or scatter window does: ``CLIP`` moves it inside,
    ``FILL_OR_DROP`` fills the gathered window (NaN, the most negative integer, True) or drops
    the update, ``PROMISE_IN_BOUNDS`` clips here too. ``ONE_HOT`` is JAX-internal and refused."""

    CLIP = 0
    FILL_OR_DROP = 1
    PROMISE_IN_BOUNDS = 2
    ONE_HOT = 3

    @staticmethod
    def from_any(s: Any) -> GatherScatterMode:
        if isinstance(s, GatherScatterMode):
            return s
        names = {"clip": GatherScatterMode.CLIP, None: GatherScatterMode.FILL_OR_DROP,
                 "fill": GatherScatterMode.FILL_OR_DROP, "drop": GatherScatterMode.FILL_OR_DROP,
                 "promise_in_bounds": GatherScatterMode.PROMISE_IN_BOUNDS, "one_hot": GatherScatterMode.ONE_HOT}
        if s not in names:
            raise ValueError(f"unknown gather/scatter mode {s!r}: use 'clip', 'fill', 'drop' or 'promise_in_bounds'")
        return names[s]


class GatherDimensionNumbers(NamedTuple):
    """``offset_dims``: output axes holding the slice's kept axes; ``collapsed_slice_dims``:
    operand axes sliced to size 1 and dropped; ``start_index_map``: the operand axis each index
    component starts; the batching dims pair operand axes with index batch axes."""

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """``update_window_dims``: the updates' window axes; ``inserted_window_dims``: operand axes
    the window has size 1 on (absent from the updates); ``scatter_dims_to_operand_dims``: the
    operand axis each index component starts; batching dims as in gather."""

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


def _windows(name: str, x: Any, indices: Any, index_map: Sequence[int], sizes: Sequence[int],
             operand_batching: Sequence[int], index_batching: Sequence[int],
             mode: GatherScatterMode) -> tuple[Any, Any]:
    """The flat operand position of every element of every window, shape ``B + sizes`` (``B``
    the indices' batch shape), and whether each window lies inside the operand (shape ``B``).
    Starts are clipped into range unless the mode fills or drops."""
    if mode is GatherScatterMode.ONE_HOT:
        raise NotImplementedError(f"lax.{name}: mode ONE_HOT is not supported")
    shape = aval_of(x).shape
    idx = cast(asarray(indices), dtypes.int64)
    ishape = aval_of(idx).shape
    if not ishape or ishape[-1] != len(index_map) or len(sizes) != len(shape) or any(
            not 0 <= s <= d for s, d in zip(sizes, shape)):
        raise ShapeError(f"lax.{name}: indices {aval_of(idx)} (last axis: one start per start_index_map "
                         f"{tuple(index_map)}) and window sizes {tuple(sizes)} do not fit the operand {aval_of(x)}")
    batch = ishape[:-1]
    nb, n = len(batch), len(shape)
    strides = np.cumprod((1,) + shape[::-1][:-1])[::-1]
    flat = np.zeros((), np.int64)
    inside = np.ones((), bool)
    for d, (size, dim) in enumerate(zip(sizes, shape)):
        if d in index_map:
            start = take_static(idx, list(index_map).index(d), nb)
        elif d in operand_batching:
            axis = index_batching[list(operand_batching).index(d)]
            start = np.arange(batch[axis], dtype=np.int64).reshape([-1 if k == axis else 1 for k in range(nb)])
        else:
            start = np.zeros((1,) * nb, np.int64)
        if mode is GatherScatterMode.FILL_OR_DROP:
            fits = ew.and_p.bind(ew.ge_p.bind(start, _i64(0)), ew.le_p.bind(start, _i64(dim - size)))
            inside = ew.and_p.bind(inside, fits)
        start = _clip(start, 0, dim - size)
        offsets = np.arange(size, dtype=np.int64).reshape([-1 if k == d else 1 for k in range(n)])
        window = ew.add(sh.reshape(start, aval_of(asarray(start)).shape + (1,) * n), offsets)
        flat = ew.add(flat, ew.mul(window, _i64(int(strides[d]))))
    return sh.broadcast_to(flat, batch + tuple(int(s) for s in sizes)), sh.broadcast_to(inside, batch)


def gather(operand: Any, start_indices: Any, dimension_numbers: GatherDimensionNumbers, slice_sizes: Sequence[int],
           *, unique_indices: bool = False, indices_are_sorted: bool = False, mode: Any = None,
           fill_value: Any = None) -> Any:
    """XLA's gather: a ``slice_sizes`` window of ``operand`` at each start in ``start_indices``
    (its last axis the start vector). ``mode`` "clip" (or None, JAX's promise of in-bounds
    windows) clips windows into range, "fill" fills those that leave it with ``fill_value``
    (NaN, the most negative integer or True by default). The ordering hints are unused."""
    x = asarray(operand)
    dn = dimension_numbers
    mode = GatherScatterMode.CLIP if mode is None else GatherScatterMode.from_any(mode)
    sizes = tuple(int(s) for s in slice_sizes)
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    if any(sizes[d] != 1 for d in dropped if d < len(sizes)):
        raise ShapeError(f"lax.gather: collapsed and batching operand axes {sorted(dropped)} need slice size 1, got "
                         f"slice_sizes {sizes}")
    flat, inside = _windows("gather", x, start_indices, dn.start_index_map, sizes, dn.operand_batching_dims,
                            dn.start_indices_batching_dims, mode)
    if INDEX_OBSERVERS:
        idx = asarray(start_indices)
        columns = [take_static(idx, k, len(aval_of(idx).shape) - 1) for k in range(len(dn.start_index_map))]
        observe_indices("gather", aval_of(x).shape, columns, dn.start_index_map, [sizes[d] for d in dn.start_index_map])
    a = aval_of(x)
    got = take(_flat(x), flat, 0)
    nb = len(aval_of(inside).shape)
    if mode is GatherScatterMode.FILL_OR_DROP:
        if fill_value is None:
            fill_value = np.nan if dtypes.is_inexact(a.dtype) else True if a.dtype == dtypes.bool_ else \
                np.iinfo(a.dtype).min
        keep = sh.reshape(inside, aval_of(inside).shape + (1,) * len(sizes))
        got = ew.select(keep, got, np.asarray(fill_value).astype(a.dtype))
    kept = [d for d in range(len(sizes)) if d not in dropped]
    got = sh.reshape(got, aval_of(got).shape[:nb] + tuple(sizes[d] for d in kept))
    rank = nb + len(kept)
    offsets = sorted(int(d) % builtins.max(rank, 1) for d in dn.offset_dims)
    if len(offsets) != len(kept):
        raise ShapeError(f"lax.gather: offset_dims {tuple(dn.offset_dims)} must name one output axis per kept slice "
                         f"axis ({len(kept)})")
    batch_axes = iter(range(nb))
    perm = [nb + offsets.index(p) if p in offsets else next(batch_axes) for p in range(rank)]
    return sh.transpose(got, perm)


def _scatter(name: str, operand: Any, scatter_indices: Any, updates: Any, dn: ScatterDimensionNumbers, mode: Any,
             combine: str, func: Callable[[Any], Any] | None = None) -> Any:
    """Every update window at its position (windows leaving the operand dropped, or clipped
    with mode "clip"), combined by ``combine``: "add" with one ``scatter_add``; the others
    sort the positions, fold repeated ones in order (a segmented associative scan), then write
    each position once."""
    x = asarray(operand)
    a = aval_of(x)
    u = cast(asarray(updates), a.dtype)
    mode = GatherScatterMode.from_any(mode)
    ushape = aval_of(u).shape
    window_axes = [int(d) for d in dn.update_window_dims]
    scatter_axes = [k for k in range(len(ushape)) if k not in window_axes]
    inserted = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    window_dims = [d for d in range(len(a.shape)) if d not in inserted]
    if len(window_dims) != len(window_axes):
        raise ShapeError(f"lax.{name}: updates {aval_of(u)} have window axes {tuple(window_axes)}, but operand "
                         f"{a} with inserted_window_dims {tuple(dn.inserted_window_dims)} needs {len(window_dims)}")
    sizes = [1] * len(a.shape)
    for d, k in zip(window_dims, window_axes):
        sizes[d] = ushape[k]
    u = sh.transpose(u, scatter_axes + window_axes)
    flat, inside = _windows(name, x, scatter_indices, dn.scatter_dims_to_operand_dims, sizes,
                            dn.operand_batching_dims, dn.scatter_indices_batching_dims, mode)
    batch = aval_of(inside).shape
    if tuple(ushape[k] for k in scatter_axes) != batch:
        raise ShapeError(f"lax.{name}: the updates' scatter axes {tuple(ushape[k] for k in scatter_axes)} must match "
                         f"the indices' batch shape {batch}")
    count = int(np.prod(aval_of(flat).shape, dtype=np.int64))
    keep = sh.broadcast_to(sh.reshape(inside, batch + (1,) * len(sizes)), aval_of(flat).shape)
    pos = sh.reshape(ew.select(keep, flat, _i64(a.size)), (count,))
    if func is not None:
        in_range = cast(ew.lt(pos, _i64(a.size)), dtypes.int64)
        times = _head(ix.scatter_add(in_range, pos, 0, (a.size + 1,)), a.size)
        return _apply_times(x, func, sh.reshape(times, a.shape))
    return combine_at_positions(x, pos, sh.reshape(u, (count,)), combine)


def combine_at_positions(x: Any, pos: Any, vals: Any, combine: str) -> Any:
    """``x`` with ``vals[k]`` combined into its flat position ``pos[k]`` (int64; ``x.size`` drops
    the value) by ``combine``: "add" with one ``scatter_add``; "set" (the last value at a position
    wins), "mul", "min" and "max" sort the positions, fold repeated ones in order (a segmented
    associative scan), then write each position once."""
    a = aval_of(x)
    count = aval_of(pos).shape[0]

    def placed_sum(v: Any) -> Any:
        return sh.reshape(_head(ix.scatter_add(v, pos, 0, (a.size + 1,)), a.size), a.shape)

    if combine == "add":
        return ew.add(x, placed_sum(vals))
    order = sorting.argsort(pos, 0)
    pos = take(pos, order, 0)
    in_range = ew.lt(pos, _i64(a.size))
    starts = last = np.ones(0, bool)
    if count:
        changes = ew.ne_p.bind(sh.slice_(pos, (1,), (count,), None), _head(pos, count - 1))
        starts = sh.concatenate([np.ones(1, bool), changes], 0)
        last = sh.concatenate([changes, np.ones(1, bool)], 0)
    real = ew.and_p.bind(last, in_range)
    hit = ew.gt(placed_sum(cast(real, dtypes.int64)), _i64(0))
    op = {"set": lambda old, new: new, "mul": ew.mul, "min": lax_min, "max": lax_max}[combine]

    def segment(left: Any, right: Any) -> Any:
        return ew.or_p.bind(left[0], right[0]), ew.select(right[0], right[1], op(left[1], right[1]))

    _, folded = associative_scan(segment, (starts, take(vals, order, 0)))
    as_int = a.dtype == dtypes.bool_
    folded = cast(folded, dtypes.int32) if as_int else folded
    written = ew.select(real, folded, np.zeros((), aval_of(folded).dtype))
    placed = placed_sum(written)
    placed = cast(placed, a.dtype) if as_int else placed
    return ew.select(hit, op(x, placed), x)


def _apply_times(x: Any, func: Callable[[Any], Any], times: Any) -> Any:
    """``func`` applied elementwise (on scalars, through ``vmap``) ``times`` times to each element."""
    from fungraph.api import vmap

    a = aval_of(x)
    if not a.size:
        return x
    flat_times = _flat(times)

    def body(k: Any, y: Any) -> Any:
        return ew.select(ew.gt(flat_times, cast(k, dtypes.int64)), cast(vmap(func)(y), a.dtype), y)

    most = red.reduce_max_p.bind(flat_times, axes=(0,))
    return sh.reshape(fori_loop(0, most, body, _flat(x)), a.shape)


def _scatter_op(combine: str, doc: str) -> Callable[..., Any]:
    def op(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: ScatterDimensionNumbers, *,
           indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Any:
        return _scatter(name, operand, scatter_indices, updates, dimension_numbers, mode, combine)

    name = "scatter" if combine == "set" else f"scatter_{combine}"
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"XLA's scatter: {doc} (windows leaving the operand dropped, or clipped with mode 'clip')."
    return op


scatter = _scatter_op("set", "each update window written over the operand, the last one winning a repeated position")
scatter_add = _scatter_op("add", "each update window added to the operand")
scatter_mul = _scatter_op("mul", "the operand multiplied by each update window")
scatter_min = _scatter_op("min", "the elementwise minimum of the operand and each update window")
scatter_max = _scatter_op("max", "the elementwise maximum of the operand and each update window")


def scatter_sub(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: ScatterDimensionNumbers, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Any:
    """XLA's scatter: each update window subtracted from the operand."""
    return _scatter("scatter_sub", operand, scatter_indices, ew.neg(asarray(updates)), dimension_numbers,
                    mode, "add")


def scatter_apply(operand: Any, scatter_indices: Any, func: Callable[[Any], Any],
                  dimension_numbers: ScatterDimensionNumbers, *, update_shape: Sequence[int] = (),
                  indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Any:
    """``func`` applied to each indexed element of ``operand``, once per time it is indexed (as
    XLA's scatter applies its computation once per update)."""
    x = asarray(operand)
    shape = tuple(int(s) for s in update_shape)
    return _scatter("scatter_apply", x, scatter_indices, np.zeros(shape, aval_of(x).dtype), dimension_numbers,
                    mode, "apply", func)
