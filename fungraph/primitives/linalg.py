"""``dot_general``: contraction with batch dimensions, the one primitive behind dot, matmul,
einsum and tensordot. Output axes are (batch, lhs free, rhs free), as in XLA and JAX."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import _blas, dtypes
from fungraph.core import Primitive, ShapeError, register_lowering
from fungraph.ir import ShapedArray
from fungraph.primitives._batching import to_front
from fungraph.primitives._rules import aval, is_undefined, require_same_dtype
from fungraph.primitives.elementwise import add
from fungraph.primitives.shape import transpose

DimNums = tuple[tuple[tuple[int, ...], tuple[int, ...]], tuple[tuple[int, ...], tuple[int, ...]]]


def _free(ndim: int, *used: Sequence[int]) -> tuple[int, ...]:
    taken = {d for u in used for d in u}
    return tuple(d for d in range(ndim) if d not in taken)


def _dot_aval(lhs: ShapedArray, rhs: ShapedArray, *, dimension_numbers: DimNums) -> ShapedArray:
    (lc, rc), (lb, rb) = dimension_numbers
    dtype = require_same_dtype("dot_general", lhs, rhs)
    if dtype == dtypes.bool_:
        raise ShapeError(f"dot_general is not defined for bool operands, got {lhs} and {rhs}")
    ok = len(lc) == len(rc) and len(lb) == len(rb)
    ok = ok and all(0 <= d < lhs.ndim for d in lc + lb) and all(0 <= d < rhs.ndim for d in rc + rb)
    ok = ok and all(lhs.shape[a] == rhs.shape[b] for a, b in zip(lc + lb, rc + rb))
    if not ok:
        raise ShapeError(
            f"dot_general: cannot contract {lhs} (axes {lc}, batch {lb}) with {rhs} (axes {rc}, batch {rb})"
        )
    shape = (tuple(lhs.shape[d] for d in lb) + tuple(lhs.shape[d] for d in _free(lhs.ndim, lc, lb))
             + tuple(rhs.shape[d] for d in _free(rhs.ndim, rc, rb)))
    return ShapedArray(shape, dtype)


def _dot_impl(lhs: Any, rhs: Any, *, dimension_numbers: DimNums) -> np.ndarray:
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    lf, rf = _free(lhs.ndim, lc, lb), _free(rhs.ndim, rc, rb)
    size = lambda a, ds: int(np.prod([a.shape[d] for d in ds], dtype=np.int64))  # noqa: E731
    b, m, k, n = size(lhs, lb), size(lhs, lf), size(lhs, lc), size(rhs, rf)
    lt = np.transpose(lhs, lb + lf + lc).reshape(b, m, k)
    rt = np.transpose(rhs, rb + rc + rf).reshape(b, k, n)
    out = _blas.matmul(lt, rt)
    shape = tuple(lhs.shape[d] for d in lb + lf) + tuple(rhs.shape[d] for d in rf)
    return out.reshape(shape)


dot_general_p = Primitive("dot_general", impl=_dot_impl, abstract_eval=_dot_aval, arity=2, weak_from=None)


@dot_general_p.def_jvp
def _dot_jvp(primals: tuple, tangents: tuple, *, dimension_numbers: DimNums) -> tuple:
    lhs, rhs = primals
    tl, tr = tangents
    out = dot_general(lhs, rhs, dimension_numbers)
    terms = []
    if tl is not None:
        terms.append(dot_general(tl, rhs, dimension_numbers))
    if tr is not None:
        terms.append(dot_general(lhs, tr, dimension_numbers))
    return out, terms[0] if len(terms) == 1 else add(*terms)


def _ranges_like(*xs: Sequence[int]) -> list[tuple[int, ...]]:
    start = 0
    out = []
    for x in xs:
        out.append(tuple(range(start, start + len(x))))
        start += len(x)
    return out


def _transpose_lhs(ct: Any, x_aval: ShapedArray, y: Any, dims: DimNums, swap: bool) -> Any:
    """Cotangent of the lhs: contract ct with y over y's free axes, then restore x's axis order."""
    (xc, yc), (xb, yb) = dims
    x_ndim, y_ndim = x_aval.ndim, aval(y).ndim
    x_kept = _free(x_ndim, xc, xb)
    y_kept = _free(y_ndim, yc, yb)
    if swap:
        ans_batch, ans_y, _ = _ranges_like(xb, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(xb, x_kept, y_kept)
    new_dims = ((ans_y, y_kept), (ans_batch, yb))
    x_contract_sorted_by_y = tuple(np.array(xc)[np.argsort(yc)]) if xc else ()
    out_axes = np.argsort(list(xb) + list(x_kept) + list(x_contract_sorted_by_y))
    return transpose(dot_general(ct, y, new_dims), tuple(int(a) for a in out_axes))


@dot_general_p.def_transpose
def _dot_transpose(ct: Any, lhs: Any, rhs: Any, *, dimension_numbers: DimNums) -> tuple:
    (lc, rc), (lb, rb) = dimension_numbers
    if is_undefined(lhs) and is_undefined(rhs):
        raise TypeError("dot_general is not linear in both operands at once")
    if is_undefined(lhs):
        return _transpose_lhs(ct, aval(lhs), rhs, dimension_numbers, swap=False), None
    swapped = ((rc, lc), (rb, lb))
    return None, _transpose_lhs(ct, aval(rhs), lhs, swapped, swap=True)


def dot_general(lhs: Any, rhs: Any, dimension_numbers: DimNums) -> Any:
    (lc, rc), (lb, rb) = dimension_numbers
    dims = ((tuple(map(int, lc)), tuple(map(int, rc))), (tuple(map(int, lb)), tuple(map(int, rb))))
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dims)



def _shift(t: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d + 1 for d in t)


@dot_general_p.def_batch
def _dot_batch(args: Any, dims: Any, *, dimension_numbers: DimNums) -> tuple[Any, int]:
    lhs, rhs = args
    dl, dr = dims
    (lc, rc), (lb, rb) = dimension_numbers
    if dl is not None and dr is not None:
        dn = ((_shift(lc), _shift(rc)), ((0,) + _shift(lb), (0,) + _shift(rb)))
        return dot_general(to_front(lhs, dl), to_front(rhs, dr), dn), 0
    if dl is not None:
        return dot_general(to_front(lhs, dl), rhs, ((_shift(lc), rc), (_shift(lb), rb))), len(lb)
    n_lhs_free = aval(lhs).ndim - len(lc) - len(lb)
    return dot_general(lhs, to_front(rhs, dr), ((lc, _shift(rc)), (lb, _shift(rb)))), len(lb) + n_lhs_free


def _dot_cpu(out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray, *, dimension_numbers: Any) -> np.ndarray:
    """The CPU lowering: one ``matmul`` into ``out`` (a broadcast multiply when nothing is
    contracted), through a temporary only when ``out`` cannot be seen as ``[b, m, n]``. The
    BLAS threads are ``fungraph._blas``'s."""
    (lc, rc), (lb, rb) = dimension_numbers
    if not lb and lhs.ndim == 2 and rhs.ndim == 2 and len(lc) == 1:
        a = lhs if lc == (1,) else lhs.T
        b = rhs if rc == (0,) else rhs.T
        return _blas.matmul(a, b, out)

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
        _blas.matmul(lt, rt, target)
        np.copyto(out, target.reshape(out.shape))
        return out
    _blas.matmul(lt, rt, target)
    return out


register_lowering(dot_general_p, "cpu", _dot_cpu)
