"""The CPU engine's lowerings: each primitive's ``fn(out, *inputs, **params)``, which writes
into ``out`` and returns it, or, for views (``out is None``), returns a view of its input.
Primitives without a specific lowering fall back to their numpy ``impl`` followed by a copy
into ``out`` (:func:`lowering_for`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph.core import Primitive

Lowering = Callable[..., Any]


def _ufunc_lowering(ufunc: np.ufunc) -> Lowering:
    def run(out: np.ndarray, *ins: Any) -> np.ndarray:
        return ufunc(*ins, out=out)

    return run


def _view_lowering(view: Callable[..., np.ndarray]) -> Lowering:
    def run(out: np.ndarray | None, x: Any, **params: Any) -> np.ndarray:
        v = view(np.asarray(x), **params)
        if out is None:
            return v
        np.copyto(out, v)
        return out

    return run


def _reduce_lowering(reducer: Callable[..., Any]) -> Lowering:
    def run(out: np.ndarray, x: Any, *, axes: tuple[int, ...]) -> np.ndarray:
        return reducer(x, axis=axes, out=out)

    return run


def _dot_lowering(out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray, *, dimension_numbers: Any) -> np.ndarray:
    (lc, rc), (lb, rb) = dimension_numbers
    if not lb and lhs.ndim == 2 and rhs.ndim == 2 and len(lc) == 1:
        a = lhs if lc == (1,) else lhs.T
        b = rhs if rc == (0,) else rhs.T
        return np.matmul(a, b, out=out)
    from fungraph.primitives.linalg import _free

    lf, rf = _free(lhs.ndim, lc, lb), _free(rhs.ndim, rc, rb)
    size = lambda a, ds: int(np.prod([a.shape[d] for d in ds], dtype=np.int64))  # noqa: E731
    b, m, k, n = size(lhs, lb), size(lhs, lf), size(lhs, lc), size(rhs, rf)
    if k == 1:
        # an outer product per batch element: a broadcast multiply, no BLAS call
        lt = np.transpose(lhs, lb + lf + lc).reshape(b, m, 1)
        rt = np.transpose(rhs, rb + rc + rf).reshape(b, 1, n)
        np.multiply(lt, rt, out=out.reshape(b, m, n))
        return out
    lt = np.transpose(lhs, lb + lf + lc).reshape(b, m, k)
    rt = np.transpose(rhs, rb + rc + rf).reshape(b, k, n)
    target = out.reshape(b, m, n)
    if not np.shares_memory(target, out):
        target = np.empty((b, m, n), out.dtype)
        np.matmul(lt, rt, out=target)
        np.copyto(out, target.reshape(out.shape))
        return out
    np.matmul(lt, rt, out=target)
    return out


def _integer_pow(out: np.ndarray, x: Any, *, y: int) -> np.ndarray:
    if y == 2:
        return np.multiply(x, x, out=out)
    return np.power(x, y, out=out)


def _fma(out: np.ndarray, a: Any, b: Any, c: Any) -> np.ndarray:
    if np.shares_memory(out, c):
        np.add(np.multiply(a, b), c, out=out)
        return out
    np.multiply(a, b, out=out)
    return np.add(out, c, out=out)


def _is_positive_zero(v: Any) -> bool:
    return isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind == "f" and v == 0 and not np.signbit(v)


def _select(out: np.ndarray, pred: Any, x: Any, y: Any) -> np.ndarray:
    """``where(pred, x, y)`` into ``out``, which may be ``x``'s or ``y``'s buffer (in place).
    ``where(pred, x, +0.0)`` (a relu and its gradient) multiplies x's bits, as unsigned
    integers, by pred (0 or 1): bit-exact for nan, inf and -0.0, faster than numpy's where,
    and without a temporary of the output's size."""
    if _is_positive_zero(y) and isinstance(x, np.ndarray) and x.dtype == out.dtype and x.shape == out.shape:
        ut = np.dtype(f"u{out.dtype.itemsize}")
        np.multiply(x.view(ut), pred, out=out.view(ut))  # bits times 0 or 1: no mask array
        return out
    if np.may_share_memory(out, x):
        if not (isinstance(x, np.ndarray) and x.shape == out.shape):
            np.copyto(out, np.where(pred, x, y))
            return out
        np.copyto(out, y, where=np.logical_not(pred))
        return out
    if not np.may_share_memory(out, y):
        np.copyto(out, y)
    elif not (isinstance(y, np.ndarray) and y.shape == out.shape):
        np.copyto(out, np.where(pred, x, y))
        return out
    np.copyto(out, x, where=pred)
    return out


def _pad(out: np.ndarray, x: Any, value: Any, *, padding_config: tuple) -> np.ndarray:
    out.fill(value)
    out[tuple(slice(lo, lo + (d - 1) * (i + 1) + 1 if d else lo, i + 1)
              for (lo, _, i), d in zip(padding_config, np.shape(x)))] = x
    return out


def _take(out: np.ndarray, x: Any, idx: Any, *, axis: int, index_buf: np.ndarray | None = None) -> np.ndarray:
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
        from fungraph.primitives.indexing import _normalize_indices

        idx = _normalize_indices(idx, np.shape(x)[axis])
    return np.take(x, idx, axis=axis, out=out, mode="clip")


def _scatter_add(out: np.ndarray, upd: Any, idx: Any, *, axis: int, shape: tuple[int, ...]) -> np.ndarray:
    """The impl's ``np.add.at`` into ``out``, zeroed in place instead of a fresh zeros array
    (``take``'s transpose: the gradient of a pooling gather)."""
    idx = np.asarray(idx)
    if idx.size and (idx.min() < 0 or idx.max() >= shape[axis]):
        from fungraph.primitives.indexing import _normalize_indices

        idx = _normalize_indices(idx, shape[axis])
    out.fill(0)
    upd = np.asarray(upd).reshape(shape[:axis] + (idx.size,) + shape[axis + 1:])
    np.add.at(np.moveaxis(out, axis, 0), idx.reshape(-1), np.moveaxis(upd, axis, 0))
    return out


def take_scratch_bytes(eqn: Any) -> int:
    """A writeable intp copy of the indices (what numpy would otherwise allocate per call)."""
    return eqn.inputs[1].aval.size * np.dtype(np.intp).itemsize


def take_scratch_lowering(eqn: Any, block: np.ndarray) -> Lowering:
    index_buf = block[:take_scratch_bytes(eqn)].view(np.intp).reshape(eqn.inputs[1].aval.shape)

    def run(out: np.ndarray, x: Any, idx: Any, *, axis: int) -> np.ndarray:
        return _take(out, x, idx, axis=axis, index_buf=index_buf)

    return run


def _convert(out: np.ndarray, x: Any, *, new_dtype: Any) -> np.ndarray:
    np.copyto(out, np.real(x) if np.iscomplexobj(x) and out.dtype.kind != "c" else x, casting="unsafe")
    return out


def _bid_view(x: np.ndarray, *, shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...]) -> np.ndarray:
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), shape)


def _slice_view(x: np.ndarray, *, start_indices: tuple, limit_indices: tuple, strides: tuple) -> np.ndarray:
    return x[tuple(slice(a, b, s) for a, b, s in zip(start_indices, limit_indices, strides))]


CPU_LOWERINGS: dict[str, Lowering] = {
    "reshape": _view_lowering(lambda x, *, new_sizes: x.reshape(new_sizes)),
    "transpose": _view_lowering(lambda x, *, permutation: np.transpose(x, permutation)),
    "broadcast_in_dim": _view_lowering(_bid_view),
    "slice": _view_lowering(_slice_view),
    "rev": _view_lowering(lambda x, *, dimensions: np.flip(x, dimensions)),
    "reduce_sum": _reduce_lowering(np.sum),
    "reduce_max": _reduce_lowering(np.max),
    "reduce_min": _reduce_lowering(np.min),
    "reduce_prod": _reduce_lowering(np.prod),
    "dot_general": _dot_lowering,
    "integer_pow": _integer_pow,
    "fma": _fma,
    "convert_element_type": _convert,
    "select": _select,
    "pad": _pad,
    "take": _take,
    "scatter_add": _scatter_add,
    "concatenate": lambda out, *xs, axis: np.concatenate(xs, axis=axis, out=out),
}


def lowering_for(prim: Primitive) -> tuple[Lowering, bool]:
    """The CPU lowering of ``prim`` and whether it is specific (False: impl + copy)."""
    if "cpu" in prim.lowerings:
        return prim.lowerings["cpu"], True
    if prim.name in CPU_LOWERINGS:
        return CPU_LOWERINGS[prim.name], True
    if isinstance(prim.impl, np.ufunc) and prim.impl.nout == 1:
        return _ufunc_lowering(prim.impl), True
    return _fallback(prim), False


def _fallback(prim: Primitive) -> Lowering:
    impl = prim.impl

    def run(out: Any, *ins: Any, **params: Any) -> Any:
        res = impl(*ins, **params)
        if prim.multiple_results:
            for o, r in zip(out, res):
                np.copyto(o, r, casting="unsafe")
            return out
        np.copyto(out, res, casting="unsafe")
        return out

    return run
