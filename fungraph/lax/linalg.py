"""``fungraph.lax.linalg``: the decompositions of ``jax.lax.linalg`` with its signatures and
output orders (``eigh`` gives eigenvectors first, ``lu`` the pivots and permutation, ``qr`` and
``svd`` the full matrices by default), binding the primitives ``fungraph.numpy.linalg`` binds,
so they share its derivative and batching rules."""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError
from fungraph.ir import aval_of
from fungraph.primitives import elementwise as ew
from fungraph.primitives import linalg_ops as ops
from fungraph.primitives import reductions as red
from fungraph.primitives import shape as sh
from fungraph.primitives.lu import lu as lu_prim
from fungraph.primitives.operands import asarray, cast

__all__ = ["EigImplementation", "EighImplementation", "SvdAlgorithm", "cholesky", "cholesky_update", "eig", "eigh",
           "lu", "lu_pivots_to_permutation", "qr", "svd", "symmetric_product", "triangular_solve",
           "tridiagonal_solve"]


class EigImplementation(enum.Enum):
    """Which library ``eig`` uses on a GPU (``jax.lax.linalg.EigImplementation``); fungraph has one."""

    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


class EighImplementation(enum.Enum):
    """The algorithm ``eigh`` uses on accelerators (``jax.lax.linalg.EighImplementation``); fungraph has one."""

    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


class SvdAlgorithm(enum.Enum):
    """The algorithm ``svd`` uses (``jax.lax.linalg.SvdAlgorithm``); accepted, fungraph has one."""

    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


def _matrix(x: Any, name: str, square: bool = True) -> Any:
    a = asarray(x)
    av = aval_of(a)
    if len(av.shape) < 2 or square and av.shape[-1] != av.shape[-2]:
        kind = "square matrices" if square else "matrices"
        raise ShapeError(f"lax.linalg.{name}: needs a stack of {kind} (..., m, n), got {av}")
    if not dtypes.is_inexact(av.dtype):
        a = cast(a, dtypes.float_dtype_for(av.dtype))
    return a


def _hermitian_part(x: Any) -> Any:
    return ew.mul(ew.add(x, ops.mH(x)), np.asarray(0.5, dtypes.real_for(aval_of(x).dtype)).astype(aval_of(x).dtype))


def _from_triangle(x: Any, lower: bool) -> Any:
    """The Hermitian matrix whose lower (``lower``) or upper triangle is ``x``'s, what LAPACK reads."""
    t = x if lower else ops.mH(x)
    below = ops.tril(t, -1)
    diag = ops.diag_part(t)
    if dtypes.is_complex(aval_of(x).dtype):
        diag = ew.convert(ew.real(diag), aval_of(x).dtype)
    return ew.add(ew.add(below, ops.mH(below)), ops.diag_embed(diag))


def cholesky(x: Any, *, symmetrize_input: bool = True) -> Any:
    """The lower Cholesky factor of ``(x + x^H) / 2`` (``symmetrize_input``) or of the Hermitian
    matrix ``x``'s lower triangle gives."""
    a = _matrix(x, "cholesky")
    return ops.cholesky(_hermitian_part(a) if symmetrize_input else _from_triangle(a, True))


def eigh(x: Any, *, lower: bool = True, symmetrize_input: bool = True, sort_eigenvalues: bool = True,
         subset_by_index: tuple[int, int] | None = None) -> tuple[Any, Any]:
    """``(v, w)``: the eigenvectors (columns) and ascending eigenvalues of a Hermitian matrix,
    ``(x + x^H) / 2`` or the one ``x``'s ``lower`` (else upper) triangle gives;
    ``subset_by_index=(lo, hi)`` keeps eigenpairs ``lo`` to ``hi - 1`` (JAX supports it on TPU
    only; fungraph computes all and slices)."""
    del sort_eigenvalues  # always ascending
    a = _matrix(x, "eigh")
    w, v = ops.eigh_p.bind(_hermitian_part(a) if symmetrize_input else _from_triangle(a, lower))
    if subset_by_index is not None:
        lo, hi = (int(i) for i in subset_by_index)
        n = aval_of(w).shape[-1]
        if not 0 <= lo < hi <= n:
            raise ValueError(f"lax.linalg.eigh: subset_by_index {subset_by_index} must satisfy 0 <= lo < hi <= {n}")
        vs, ws = aval_of(v).shape, aval_of(w).shape
        v = sh.slice_(v, (0,) * len(vs[:-1]) + (lo,), vs[:-1] + (hi,), None)
        w = sh.slice_(w, (0,) * len(ws[:-1]) + (lo,), ws[:-1] + (hi,), None)
    return v, w


def lu(x: Any) -> tuple[Any, Any, Any]:
    """``(lu, pivots, permutation)``: partial-pivoting LU with ``L`` (unit diagonal) below the
    diagonal of ``lu`` and ``U`` on and above it; int32 row swaps and the row order they give."""
    return lu_prim(_matrix(x, "lu", square=False))


def qr(x: Any, *, pivoting: bool = False, full_matrices: bool = True, use_magma: bool | None = None) -> tuple[Any, Any]:
    """``(q, r)`` with ``x = q r``: ``q`` is ``m x m`` with ``full_matrices``, else ``m x min(m, n)``."""
    del use_magma
    if pivoting:
        raise NotImplementedError("lax.linalg.qr: pivoting=True is not supported by fungraph")
    a = _matrix(x, "qr", square=False)
    m, n = aval_of(a).shape[-2:]
    return tuple(ops.qr_p.bind(a, full_matrices=bool(full_matrices) and m > n))


def svd(x: Any, *, full_matrices: bool = True, compute_uv: bool = True, subset_by_index: tuple[int, int] | None = None,
        algorithm: Any = None) -> Any:
    """``(u, s, vh)`` (or ``s`` alone without ``compute_uv``): singular values descending;
    ``subset_by_index=(lo, hi)`` keeps singular triples ``lo`` to ``hi - 1`` (JAX: TPU only)."""
    del algorithm
    a = _matrix(x, "svd", square=False)
    m, n = aval_of(a).shape[-2:]
    u, s, vh = ops.svd_p.bind(a, full_matrices=bool(full_matrices) and m != n)
    if subset_by_index is not None:
        if full_matrices:
            raise ValueError("full_matrices and subset_by_index cannot both be set")
        lo, hi = (int(i) for i in subset_by_index)
        if not 0 <= lo < hi <= min(m, n):
            raise ValueError(f"lax.linalg.svd: subset_by_index {subset_by_index} must satisfy 0 <= lo < hi <= "
                             f"{min(m, n)}")
        lead = aval_of(s).shape[:-1]
        s = sh.slice_(s, (0,) * len(lead) + (lo,), lead + (hi,), None)
        u = sh.slice_(u, (0,) * (len(lead) + 1) + (lo,), lead + (m, hi), None)
        vh = sh.slice_(vh, (0,) * len(lead) + (lo, 0), lead + (hi, n), None)
    return (u, s, vh) if compute_uv else s


def triangular_solve(a: Any, b: Any, *, left_side: bool = False, lower: bool = False, transpose_a: bool = False,
                     conjugate_a: bool = False, unit_diagonal: bool = False) -> Any:
    """``x`` with ``op(T) x = b`` (``left_side``) or ``x op(T) = b``, ``T`` the lower or upper
    triangle of ``a`` (ones on the diagonal with ``unit_diagonal``), ``op`` transposing and/or
    conjugating it."""
    t = _matrix(a, "triangular_solve")
    rhs = asarray(b)
    if aval_of(rhs).dtype != aval_of(t).dtype:
        raise TypeError(f"lax.linalg.triangular_solve: a and b need one dtype, got {aval_of(t)} and {aval_of(rhs)}")
    n = aval_of(t).shape[-1]
    t = ops.tril(t) if lower else ops.mT(ops.tril(ops.mT(t)))
    if unit_diagonal:
        t = ew.select(np.eye(n, dtype=bool), np.asarray(1, aval_of(t).dtype), t)
    if conjugate_a and dtypes.is_complex(aval_of(t).dtype):
        t = ew.conj(t)
    if transpose_a:
        t = ops.mT(t)
    if left_side:
        return ops.solve(t, rhs)
    return ops.mT(ops.solve(ops.mT(t), ops.mT(rhs)))


def tridiagonal_solve(dl: Any, d: Any, du: Any, b: Any) -> Any:
    """``x`` with ``T x = b`` for the tridiagonal ``T`` with sub-, main and super-diagonals
    ``dl``, ``d``, ``du`` (each ``(..., n)``; ``dl[..., 0]`` and ``du[..., -1]`` unused)."""
    lower, main, upper, rhs = (asarray(v) for v in (dl, d, du, b))
    n = aval_of(main).shape[-1]
    dt = aval_of(main).dtype
    lead = aval_of(main).shape[:-1]

    def band(v: Any, k: int) -> Any:
        """Row ``r`` of the ``k``-th diagonal holds ``v[..., r]``."""
        rows = sh.broadcast_in_dim(v, lead + (n, n), tuple(range(len(lead))) + (len(lead),))
        return ew.mul(rows, np.eye(n, k=k, dtype=dt))

    t = ew.add(ew.add(band(main, 0), band(upper, 1)), band(lower, -1))
    return ops.solve(t, rhs)


def lu_pivots_to_permutation(pivots: Any, permutation_size: int) -> Any:
    """The row order that the sequence of row swaps ``pivots`` (row ``i`` with row ``pivots[i]``)
    makes of ``0 .. permutation_size - 1``."""
    p = asarray(pivots)
    av = aval_of(p)
    if not dtypes.is_int(av.dtype) or len(av.shape) < 1:
        raise TypeError(f"lax.linalg.lu_pivots_to_permutation: pivots must be an integer array, got {av}")
    k = av.shape[-1]
    size = int(permutation_size)
    if k > size:
        raise ValueError(f"lax.linalg.lu_pivots_to_permutation: {k} pivots do not fit a permutation of {size}")
    lead = av.shape[:-1]
    full = lead + (size,)
    rows = sh.broadcast_to(np.arange(size, dtype=av.dtype), full)
    perm = rows
    last = len(lead)

    def entry(at: Any) -> Any:
        """``perm[..., at]`` for a per-matrix index ``at`` of shape ``lead + (1,)``, broadcast to a row."""
        picked = red.reduce_sum(ew.mul(perm, ew.convert(ew.eq(rows, sh.broadcast_to(at, full)), av.dtype)), (last,))
        return sh.broadcast_in_dim(picked, full, tuple(range(last)))

    for i in range(k):
        j = sh.slice_(p, (0,) * last + (i,), lead + (i + 1,), None)
        at_i, at_j = entry(np.full(lead + (1,), i, av.dtype)), entry(j)
        perm = ew.select(ew.eq(rows, np.asarray(i, av.dtype)), at_j,
                         ew.select(ew.eq(rows, sh.broadcast_to(j, full)), at_i, perm))
    return perm


def eig(x: Any, *, compute_left_eigenvectors: bool = True, compute_right_eigenvectors: bool = True,
        enable_eigvec_derivs: bool = False, implementation: Any = None, use_magma: bool | None = None) -> list[Any]:
    """``[w, vl, vr]`` (the vectors asked for): the eigenvalues of a square matrix and its unit
    left (``vl^H x = w vl^H``) and right (``x vr = vr w``) eigenvectors, complex."""
    del enable_eigvec_derivs, implementation, use_magma
    a = _matrix(x, "eig")
    w, vr = ops.eig_p.bind(a)
    out = [w]
    if compute_left_eigenvectors:
        n = aval_of(vr).shape[-1]
        eye = sh.broadcast_to(np.eye(n, dtype=aval_of(vr).dtype), aval_of(vr).shape)
        vl = ops.mH(ops.solve(vr, eye))
        norms = ew.sqrt(red.reduce_sum(ew.real(ew.mul(vl, ew.conj(vl))), (len(aval_of(vl).shape) - 2,)))
        lead = tuple(range(len(aval_of(vl).shape) - 2))
        out.append(ew.div(vl, sh.broadcast_in_dim(ew.convert(norms, aval_of(vl).dtype), aval_of(vl).shape,
                                                  lead + (len(lead) + 1,))))
    if compute_right_eigenvectors:
        out.append(vr)
    return out


def symmetric_product(a_matrix: Any, c_matrix: Any, *, alpha: float = 1.0, beta: float = 0.0,
                      symmetrize_output: bool = False) -> Any:
    """``alpha * a a^T + beta * c``; with ``symmetrize_output`` the lower triangle mirrored above."""
    a, c = asarray(a_matrix), asarray(c_matrix)
    dt = aval_of(c).dtype
    out = ew.add(ew.mul(ops.mm(a, ops.mT(a)), np.asarray(alpha, dt)), ew.mul(c, np.asarray(beta, dt)))
    if symmetrize_output:
        out = ew.add(ops.tril(out), ops.mT(ops.tril(out, -1)))
    return out


def cholesky_update(r_matrix: Any, w_vector: Any) -> Any:
    """The upper Cholesky factor of ``r^T r + w w^T`` given the upper factor ``r``: a rank-one update."""
    r, w = asarray(r_matrix), asarray(w_vector)
    n = aval_of(r).shape[-1]
    outer = ew.mul(sh.reshape(w, (n, 1)), sh.reshape(w, (1, n)))
    return ops.mT(ops.cholesky(ew.add(ops.mm(ops.mT(r), r), outer)))
