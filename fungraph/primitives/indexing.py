"""Integer-array indexing along one axis (``take``) and its transpose (``scatter_add``).

Negative indices count from the end as in numpy; out-of-range indices are clamped, as JAX
does, because a staged program cannot raise on data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Primitive, ScratchLowering, ShapeError, Tracer, register_lowering
from fungraph.ir import ShapedArray
from fungraph.primitives._batching import batch_size, broadcast_batch, to_front
from fungraph.primitives._rules import aval, instantiate, is_undefined, normalize_axis, transform, zeros
from fungraph.primitives.elementwise import add, and_p, convert, gt, lt, max_p, min_p, select, sub
from fungraph.primitives.shape import broadcast_in_dim, reshape, transpose


def _normalize_indices(idx: Any, n: int) -> np.ndarray:
    idx = np.asarray(idx)
    return np.clip(np.where(idx < 0, idx + n, idx), 0, max(n - 1, 0))


def _take_aval(x: ShapedArray, idx: ShapedArray, *, axis: int) -> ShapedArray:
    if not dtypes.is_int(idx.dtype):
        raise ShapeError(f"take: indices must be integers, got {idx}")
    normalize_axis(axis, x.ndim, "take")
    if x.shape[axis] == 0 and idx.size:
        raise ShapeError(f"take: cannot index into the empty axis {axis} of {x}")
    return ShapedArray(x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype)


def _take_impl(x: Any, idx: Any, *, axis: int) -> np.ndarray:
    x = np.asarray(x)
    return np.take(x, _normalize_indices(idx, x.shape[axis]), axis=axis)


take_p = Primitive("take", impl=_take_impl, abstract_eval=_take_aval, arity=2, weak_from=(0,))


@take_p.def_jvp
def _take_jvp(primals: tuple, tangents: tuple, *, axis: int) -> tuple:
    x, idx = primals
    return take(x, idx, axis), take(tangents[0], idx, axis)


@take_p.def_transpose
def _take_transpose(ct: Any, x: Any, idx: Any, *, axis: int) -> tuple:
    assert is_undefined(x) and not is_undefined(idx)
    return scatter_add(ct, idx, axis, aval(x).shape), None


def take(x: Any, idx: Any, axis: int) -> Any:
    return take_p.bind(x, idx, axis=int(axis))


def _scatter_aval(upd: ShapedArray, idx: ShapedArray, *, axis: int, shape: tuple[int, ...]) -> ShapedArray:
    expected = shape[:axis] + idx.shape + shape[axis + 1:]
    if upd.shape != expected or not dtypes.is_int(idx.dtype):
        raise ShapeError(f"scatter_add into shape {shape} along axis {axis}: updates {upd} and indices {idx} "
                         f"do not fit (expected updates of shape {expected})")
    return ShapedArray(shape, upd.dtype)


#: Update elements per 1-D ``np.add.at`` call of :func:`_add_at` (bounds its positions' memory).
ADD_AT_CHUNK = 1 << 16


def _add_at(out: np.ndarray, idx: np.ndarray, upd: np.ndarray, axis: int) -> None:
    """``np.add.at`` of ``upd`` into the contiguous ``out`` at ``idx`` (in range) along ``axis``,
    as 1-D ``np.add.at`` calls over flat positions, a chunk of indices at a time: numpy's 1-D
    ``add.at`` is a fast loop, where with trailing axes it adds row by row through its generic
    ufunc machinery (3-40x slower: 8,192 x 64 float32 rows 51 -> 1.2 ms). Each element still
    receives its updates in index order, so the result has the same bits."""
    shape = out.shape
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    idx = idx.reshape(-1).astype(np.intp, copy=False)
    values = upd.reshape(outer, idx.size, inner)
    flat = out.reshape(-1)
    if outer * inner == 1:
        np.add.at(flat, idx, values.reshape(-1))
        return
    base = (np.arange(outer, dtype=np.intp) * (shape[axis] * inner))[:, None, None]
    cols = np.arange(inner, dtype=np.intp)
    step = max(1, ADD_AT_CHUNK // max(outer * inner, 1))
    for start in range(0, idx.size, step):
        pos = base + (idx[start:start + step] * inner)[None, :, None] + cols
        np.add.at(flat, pos.reshape(-1), values[:, start:start + step].reshape(-1))


def _scatter_impl(upd: Any, idx: Any, *, axis: int, shape: tuple[int, ...]) -> np.ndarray:
    upd = np.asarray(upd)
    out = np.zeros(shape, upd.dtype)
    if out.size == 0:
        return out
    _add_at(out, _normalize_indices(idx, shape[axis]), upd, axis)
    return out


scatter_add_p = Primitive("scatter_add", impl=_scatter_impl, abstract_eval=_scatter_aval, arity=2, weak_from=(0,))


@scatter_add_p.def_jvp
def _scatter_jvp(primals: tuple, tangents: tuple, *, axis: int, shape: tuple[int, ...]) -> tuple:
    upd, idx = primals
    return scatter_add(upd, idx, axis, shape), scatter_add(tangents[0], idx, axis, shape)


scatter_add_p.transpose = lambda ct, upd, idx, *, axis, shape: (take(ct, idx, axis), None)


def scatter_add(upd: Any, idx: Any, axis: int, shape: tuple[int, ...]) -> Any:
    return scatter_add_p.bind(upd, idx, axis=int(axis), shape=tuple(int(d) for d in shape))


# batching rules -------------------------------------------------------------------------


def _normalize_traced(idx: Any, n: int) -> Any:
    idx = convert(idx, dtypes.int64)
    zero = np.asarray(0, np.int64)
    wrapped = select(lt(idx, zero), add(idx, np.asarray(n, np.int64)), idx)
    return min_p.bind(max_p.bind(wrapped, zero), np.asarray(max(n - 1, 0), np.int64))


def _offsets(size: int, n: int, rank: int) -> np.ndarray:
    return (np.arange(size, dtype=np.int64) * n).reshape((size,) + (1,) * rank)


def _batch_take(args: Any, dims: Any, *, axis: int) -> tuple[Any, int]:
    x, idx = args
    dx, di = dims
    if di is None:
        return take(to_front(x, dx), idx, axis + 1), 0
    size = batch_size(args, dims)
    xb = broadcast_batch(x, dx, size)
    ib = to_front(idx, di)
    xs = aval(xb).shape
    n = xs[axis + 1]
    moved = transpose(xb, (0, axis + 1) + tuple(i for i in range(1, len(xs)) if i != axis + 1))
    rest = xs[1:axis + 1] + xs[axis + 2:]
    flat = reshape(moved, (size * n,) + rest)
    k = aval(ib).ndim - 1
    fi = add(_normalize_traced(ib, n), _offsets(size, n, k))
    out = take(flat, fi, 0)
    perm = (0,) + tuple(range(k + 1, k + 1 + axis)) + tuple(range(1, k + 1)) + tuple(
        range(k + 1 + axis, aval(out).ndim))
    return transpose(out, perm), 0


def _batch_scatter(args: Any, dims: Any, *, axis: int, shape: tuple[int, ...]) -> tuple[Any, int]:
    upd, idx = args
    du, di = dims
    size = batch_size(args, dims)
    if di is None:
        return scatter_add(broadcast_batch(upd, du, size), idx, axis + 1, (size,) + shape), 0
    ub = broadcast_batch(upd, du, size)
    ib = to_front(idx, di)
    k = aval(ib).ndim - 1
    n = shape[axis]
    nd = aval(ub).ndim
    # updates are (B, pre, idx..., post): bring the index axes right after the batch axis
    perm = (0,) + tuple(range(1 + axis, 1 + axis + k)) + tuple(range(1, 1 + axis)) + tuple(range(1 + axis + k, nd))
    moved = transpose(ub, perm)
    rest = shape[:axis] + shape[axis + 1:]
    fi = add(_normalize_traced(ib, n), _offsets(size, n, k))
    flat = scatter_add(moved, fi, 0, (size * n,) + rest)
    out = reshape(flat, (size, n) + rest)
    r = len(rest)
    back = (0,) + tuple(range(2, 2 + axis)) + (1,) + tuple(range(2 + axis, 2 + r))
    return transpose(out, back), 0


take_p.batch = _batch_take
scatter_add_p.batch = _batch_scatter


# dynamic_update_slice ---------------------------------------------------------------------


def _window_starts(starts: Any, shape: tuple[int, ...], sizes: tuple[int, ...], mode: str) -> list[int] | None:
    """Host start indices of the window: clamped so it fits (``"clamp"``, XLA's rule); or,
    for ``"drop"`` (JAX's rule for ``x.at[i].set(v)``), a negative start counted from the end
    and None when one then lies outside ``[0, d - n]`` (the update is skipped)."""
    lo = []
    drop = mode == "drop"
    for v, d, n in zip(starts, shape, sizes):
        v = int(v)
        if drop:
            v = v + d if v < 0 else v
            if not 0 <= v <= d - n:
                return None
        lo.append(min(max(v, 0), d - n))
    return lo


def _dus_aval(x: ShapedArray, u: ShapedArray, *starts: ShapedArray, mode: str) -> ShapedArray:
    if (u.ndim != x.ndim or len(starts) != x.ndim or u.dtype != x.dtype
            or any(n > d for n, d in zip(u.shape, x.shape))
            or any(s.shape != () or not dtypes.is_int(s.dtype) for s in starts)):
        raise ShapeError(f"dynamic_update_slice: update {u} does not fit operand {x}, or the {len(starts)} start "
                         f"indices ({', '.join(str(s) for s in starts)}) are not one integer scalar per axis")
    if mode not in ("clamp", "drop"):
        raise ValueError(f"dynamic_update_slice: mode must be 'clamp' or 'drop', got {mode!r}")
    return x


def _write_window(out: np.ndarray, u: Any, starts: Any, mode: str) -> np.ndarray:
    u = np.asarray(u)
    lo = _window_starts(starts, out.shape, u.shape, mode)
    if lo is not None:
        out[tuple(slice(s, s + n) for s, n in zip(lo, u.shape))] = u
    return out


def _dus_impl(x: Any, u: Any, *starts: Any, mode: str) -> np.ndarray:
    return _write_window(np.array(x), u, starts, mode)


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    if a is b:
        return True
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.strides == b.strides and a.shape == b.shape)


def _dus_cpu(out: np.ndarray, x: Any, u: Any, *starts: Any, mode: str) -> np.ndarray:
    """Into ``out``: a copy of ``x`` unless the plan put ``out`` in ``x``'s buffer (then only
    the window is written: O(update), what makes ``x.at[i].set(v)`` in a loop cheap)."""
    if not (isinstance(x, np.ndarray) and _same_memory(out, x)):
        np.copyto(out, x)
    return _write_window(out, u, starts, mode)


#: ``dynamic_update_slice(x, u, *starts, mode)``: ``x`` with the window at ``starts`` (int
#: scalars) replaced by ``u``; a start out of range is clamped (``"clamp"``), or counts from
#: the end when negative and else skips the update (``"drop"``, as numpy indexing and JAX's
#: ``.at`` do). The output may take over ``x``'s buffer.
dynamic_update_slice_p = Primitive("dynamic_update_slice", impl=_dus_impl, abstract_eval=_dus_aval, arity=None,
                                   inplace=(0,))
register_lowering(dynamic_update_slice_p, "cpu", _dus_cpu)


def dynamic_update_slice(x: Any, u: Any, starts: Any, mode: str = "clamp") -> Any:
    return dynamic_update_slice_p.bind(x, u, *starts, mode=mode)


def clamped_starts(starts: Any, shape: tuple[int, ...], sizes: tuple[int, ...]) -> list[Any]:
    """Each start as int64, clamped into ``[0, d - n]``: host integers stay on the host."""
    out = []
    for s, d, n in zip(starts, shape, sizes):
        if isinstance(s, Tracer):
            lo, hi = np.asarray(0, np.int64), np.asarray(d - n, np.int64)
            out.append(min_p.bind(max_p.bind(convert(s, dtypes.int64), lo), hi))
        else:
            out.append(np.asarray(min(max(int(s), 0), d - n), np.int64))
    return out


def wrapped_starts(starts: Any, shape: tuple[int, ...]) -> list[Any]:
    """Negative starts counted from the end (``"drop"`` mode's reading of its starts)."""
    out = []
    for s, d in zip(starts, shape):
        if isinstance(s, Tracer):
            s = convert(s, dtypes.int64)
            out.append(select(lt(s, np.asarray(0, np.int64)), add(s, np.asarray(d, np.int64)), s))
        else:
            out.append(np.asarray(int(s) + d if int(s) < 0 else int(s), np.int64))
    return out


def in_window(starts: Any, shape: tuple[int, ...], sizes: tuple[int, ...]) -> Any:
    """Whether every start lies in ``[0, d - n]`` (a bool scalar of the current trace)."""
    ok: Any = None
    for s, d, n in zip(starts, shape, sizes):
        s = convert(s, dtypes.int64)
        inside = and_p.bind(gt(s, np.asarray(-1, np.int64)), lt(s, np.asarray(d - n + 1, np.int64)))
        ok = inside if ok is None else and_p.bind(ok, inside)
    return np.asarray(True) if ok is None else ok


def dynamic_slice(x: Any, starts: Any, sizes: tuple[int, ...]) -> Any:
    """The ``sizes`` window of ``x`` at ``starts`` (already clamped), one ``take`` per axis it
    narrows."""

    for axis, (s, n) in enumerate(zip(starts, sizes)):
        if n != aval(x).shape[axis]:
            x = take(x, reshape(s, (1,)) if n == 1 else add(s, np.arange(n, dtype=np.int64)), axis)
    return x


@dynamic_update_slice_p.def_jvp
def _dus_jvp(primals: tuple, tangents: tuple, *, mode: str) -> tuple:
    x, u, *starts = primals
    tx, tu = tangents[:2]
    out = dynamic_update_slice(x, u, starts, mode)
    if tx is None and tu is None:
        return out, None
    return out, dynamic_update_slice(instantiate(tx, aval(x)), instantiate(tu, aval(u)), starts, mode)


@dynamic_update_slice_p.def_transpose
def _dus_transpose(ct: Any, x: Any, u: Any, *starts: Any, mode: str) -> tuple:
    assert not any(is_undefined(s) for s in starts)
    xs, us = aval(x).shape, aval(u).shape
    ct_x = dynamic_update_slice(ct, zeros(aval(u)), starts, mode) if is_undefined(x) else None
    ct_u = None
    if is_undefined(u):
        lo = wrapped_starts(starts, xs) if mode == "drop" else starts
        ct_u = dynamic_slice(ct, clamped_starts(lo, xs, us), us)
        if mode == "drop":
            ct_u = select(in_window(lo, xs, us), ct_u, zeros(aval(u)))
    return (ct_x, ct_u) + (None,) * len(starts)


def dus_by_select(x: Any, u: Any, *starts: Any, mode: str = "clamp") -> Any:
    """``dynamic_update_slice`` from ``take`` and ``select`` over the whole of ``x``: what a
    batch of different start indices runs (O(x.size) per example)."""

    xs, us = aval(x).shape, aval(u).shape
    if 0 in us:
        return x
    if mode == "drop":
        starts = wrapped_starts(starts, xs)
    lo = clamped_starts(starts, xs, us)
    mask: Any = in_window(starts, xs, us) if mode == "drop" else None
    if mask is not None:
        mask = broadcast_in_dim(mask, xs, ())
    placed = u
    for axis, (s, d, n) in enumerate(zip(lo, xs, us)):
        if n == d:
            continue
        rel = sub(np.arange(d, dtype=np.int64), s)
        placed = take(placed, min_p.bind(max_p.bind(rel, np.asarray(0, np.int64)), np.asarray(n - 1, np.int64)),
                      axis)
        inside = and_p.bind(gt(rel, np.asarray(-1, np.int64)), lt(rel, np.asarray(n, np.int64)))
        m = broadcast_in_dim(inside, xs, (axis,))
        mask = m if mask is None else and_p.bind(mask, m)
    return placed if mask is None else select(mask, placed, x)


def _batch_dus(args: Any, dims: Any, *, mode: str) -> tuple[Any, int]:
    x, u, *starts = args
    dx, du, *ds = dims
    if any(d is not None for d in ds):
        vmap_flat = transform("vmap")
        return vmap_flat(lambda *a: [dus_by_select(*a, mode=mode)], args, dims, [0], batch_size(args, dims), None)[0], 0
    size = batch_size(args, dims)
    return dynamic_update_slice(broadcast_batch(x, dx, size), broadcast_batch(u, du, size),
                                [np.asarray(0, np.int64), *starts], mode), 0


dynamic_update_slice_p.batch = _batch_dus


# --- CPU lowerings of take and scatter_add: ``rule(out, *inputs, **params)`` into ``out`` -----


def _take_cpu(out: np.ndarray, x: Any, idx: Any, *, axis: int, index_buf: np.ndarray | None = None) -> np.ndarray:
    """``np.take`` into ``out``: mode="clip" is the primitive's clamping and, unlike the
    default mode, writes without a buffer. numpy copies indices that are not a writeable,
    contiguous intp array (a graph constant is read-only): with ``index_buf`` (planned
    scratch) they are copied there instead. Negative indices are wrapped first (a copy). A
    scalar index (``x[i]`` in a loop body) is a view copied into ``out``: ~7 -> ~2 us."""
    idx = np.asarray(idx)
    if idx.ndim == 0:
        n = np.shape(x)[axis]
        i = int(idx)
        i = min(max(i + n if i < 0 else i, 0), n - 1)
        np.copyto(out, np.asarray(x)[(slice(None),) * axis + (i,)])
        return out
    if index_buf is not None and not (idx.dtype == np.intp and idx.flags.writeable and idx.flags.c_contiguous):
        np.copyto(index_buf, idx, casting="unsafe")
        idx = index_buf
    if idx.size and idx.min() < 0:
        idx = _normalize_indices(idx, np.shape(x)[axis])
    return np.take(x, idx, axis=axis, out=out, mode="clip")


def _take_scratch_bytes(eqn: Any) -> int:
    """A writeable intp copy of the indices (what numpy would otherwise allocate per call)."""
    return eqn.inputs[1].aval.size * np.dtype(np.intp).itemsize


def _take_scratch_cpu(eqn: Any, block: np.ndarray) -> Any:
    index_buf = block[:_take_scratch_bytes(eqn)].view(np.intp).reshape(eqn.inputs[1].aval.shape)

    def run(out: np.ndarray, x: Any, idx: Any, *, axis: int) -> np.ndarray:
        return _take_cpu(out, x, idx, axis=axis, index_buf=index_buf)

    return run


def _scatter_add_cpu(out: np.ndarray, upd: Any, idx: Any, *, axis: int, shape: tuple[int, ...]) -> np.ndarray:
    """The impl's ``np.add.at`` into ``out``, zeroed in place instead of a fresh zeros array
    (``take``'s transpose: the gradient of a pooling gather); what the CPU engine runs when
    the native engine (backends/native/scatter.py) does not."""
    idx = np.asarray(idx)
    if idx.size and (idx.min() < 0 or idx.max() >= shape[axis]):
        idx = _normalize_indices(idx, shape[axis])
    out.fill(0)
    if out.size == 0:
        return out
    upd = np.asarray(upd).reshape(shape[:axis] + (idx.size,) + shape[axis + 1:])
    if out.flags.c_contiguous:
        _add_at(out, np.asarray(idx), upd, axis)
    else:
        np.add.at(np.moveaxis(out, axis, 0), idx.reshape(-1), np.moveaxis(upd, axis, 0))
    return out


register_lowering(take_p, "cpu", _take_cpu, scratch=ScratchLowering(_take_scratch_bytes, _take_scratch_cpu))
register_lowering(scatter_add_p, "cpu", _scatter_add_cpu)
