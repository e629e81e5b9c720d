"""Matrix decompositions and solves over the last two axes (leading axes are a batch), each
with its matrix-calculus jvp written from other primitives. Tangent rules only multiply
tangents by primal values (and ``solve`` with a primal matrix, which is linear in its
right-hand side and has a transpose rule), so reverse mode comes from transposing them.

``cholesky`` and ``eigh`` assume a symmetric tangent: ``fungraph.numpy.linalg`` builds their
operand from its lower triangle, as LAPACK reads it, so that holds for every input."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Primitive, ShapeError
from fungraph.ir import ShapedArray
from fungraph.primitives import elementwise as ew
from fungraph.primitives._batching import batch_size, broadcast_batch
from fungraph.primitives._rules import aval, is_undefined, lit, require_float, require_same_dtype, zeros
from fungraph.primitives.linalg import dot_general
from fungraph.primitives.lu_factor import lu_factor
from fungraph.primitives.reductions import reduce_sum
from fungraph.primitives.shape import concatenate, reshape, slice_, transpose

# --- helpers over the last two axes --------------------------------------------------------


def mm(a: Any, b: Any) -> Any:
    """Matrix product over the last two axes of operands with equal leading (batch) axes."""
    nd = aval(a).ndim
    batch = tuple(range(nd - 2))
    return dot_general(a, b, (((nd - 1,), (nd - 2,)), (batch, batch)))


def mT(x: Any) -> Any:
    nd = aval(x).ndim
    return transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def mH(x: Any) -> Any:
    """The conjugate transpose of the last two axes (the transpose for real ``x``)."""
    t = mT(x)
    return ew.conj(t) if dtypes.is_complex(aval(x).dtype) else t


def _eye(n: int, m: int, dtype: np.dtype, k: int = 0) -> np.ndarray:
    return np.eye(n, m, k, dtype=dtype)


def diag_part(x: Any) -> Any:
    """The main diagonals of a stack of matrices: (..., n, m) -> (..., min(n, m))."""
    shape = aval(x).shape
    n, m = shape[-2:]
    k = min(n, m)

    sq = slice_(x, (0,) * len(shape), shape[:-2] + (k, k), None)
    return reduce_sum(ew.mul(sq, _eye(k, k, aval(x).dtype)), (len(shape) - 1,))


def diag_embed(v: Any) -> Any:
    """Diagonal matrices from a stack of vectors: (..., n) -> (..., n, n)."""
    shape = aval(v).shape
    n = shape[-1]
    return ew.mul(reshape(v, shape[:-1] + (1, n)), _eye(n, n, aval(v).dtype))


def tril(x: Any, k: int = 0) -> Any:
    n, m = aval(x).shape[-2:]
    return ew.select(np.tri(n, m, k, dtype=bool), x, lit(0, aval(x).dtype))


def trace(x: Any) -> Any:
    return reduce_sum(diag_part(x), (aval(x).ndim - 2,))


def _add(*terms: Any) -> Any:
    live = [t for t in terms if t is not None]
    out = live[0]
    for t in live[1:]:
        out = ew.add(out, t)
    return out


def _square(name: str, a: ShapedArray, allow_complex: bool = False) -> int:
    if allow_complex and dtypes.is_complex(a.dtype):
        pass
    else:
        require_float(name, a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{name}: needs a stack of square matrices (..., n, n), got {a}")
    return a.shape[-1]


def _matrix(name: str, a: ShapedArray, allow_complex: bool = False) -> tuple[int, int]:
    if not (allow_complex and dtypes.is_complex(a.dtype)):
        require_float(name, a)
    if a.ndim < 2:
        raise ShapeError(f"{name}: needs a stack of matrices (..., m, n), got {a}")
    return a.shape[-2], a.shape[-1]


def _leading_batch(prim: Primitive) -> Any:
    """Batch a primitive that already maps over leading axes: put every batch axis first."""

    def rule(args: Sequence[Any], dims: Sequence[int | None], **params: Any) -> tuple[Any, Any]:
        size = batch_size(args, dims)
        out = prim.bind(*[broadcast_batch(x, d, size) for x, d in zip(args, dims)], **params)
        return (out, [0] * len(out)) if prim.multiple_results else (out, 0)

    return rule


# --- solve ----------------------------------------------------------------------------------


def _solve_aval(a: ShapedArray, b: ShapedArray) -> ShapedArray:
    n = _square("solve", a, allow_complex=True)
    require_same_dtype("solve", a, b)
    if b.ndim != a.ndim or b.shape[:-2] != a.shape[:-2] or b.shape[-2] != n:
        raise ShapeError(f"solve: right-hand side {b} does not fit the matrices {a} (expected (..., {n}, k))")
    return b


def _solve_impl(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """LAPACK's ``gesv``; a singular matrix gives the infinities and NaNs of its elimination
    (as JAX's solve does) instead of numpy's ``LinAlgError``."""
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        return _solve_by_elimination(np.asarray(a), np.asarray(b))


def _solve_by_elimination(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Partial-pivoting LU of ``a`` (``lu_factor``, LAPACK's pivots), then forward and back
    substitution in LAPACK's order, over the batch; zero pivots divide as IEEE arithmetic does."""
    lu, _, perm = lu_factor(a)
    n = a.shape[-1]
    x = np.take_along_axis(b, perm[..., :, None].astype(np.intp), axis=-2).astype(np.result_type(a, b), copy=True)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i in range(n):
            x[..., i, :] -= np.einsum("...j,...jk->...k", lu[..., i, :i], x[..., :i, :])
        for i in range(n - 1, -1, -1):
            x[..., i, :] -= np.einsum("...j,...jk->...k", lu[..., i, i + 1:], x[..., i + 1:, :])
            x[..., i, :] /= lu[..., i, i:i + 1]
    return x


solve_p = Primitive("solve", impl=_solve_impl, abstract_eval=_solve_aval, arity=2)


@solve_p.def_jvp
def _solve_jvp(primals: tuple, tangents: tuple) -> tuple:
    a, b = primals
    ta, tb = tangents
    x = solve(a, b)
    rhs = _add(tb, None if ta is None else ew.neg(mm(ta, x)))           # A dx = db - dA x
    return x, solve(a, rhs)


@solve_p.def_transpose
def _solve_transpose(ct: Any, a: Any, b: Any) -> tuple:
    if is_undefined(a):
        raise TypeError("solve is linear in its right-hand side only")
    return None, solve(mT(a), ct)                                        # (A^-1)^T = A^-T


solve_p.batch = _leading_batch(solve_p)


def solve(a: Any, b: Any) -> Any:
    return solve_p.bind(a, b)


# --- det and slogdet --------------------------------------------------------------------------


def _det_aval(a: ShapedArray) -> ShapedArray:
    _square("det", a, allow_complex=True)
    return ShapedArray(a.shape[:-2], a.dtype)


det_p = Primitive("det", impl=lambda a: np.linalg.det(a), abstract_eval=_det_aval, arity=1)


@det_p.def_jvp
def _det_jvp(primals: tuple, tangents: tuple) -> tuple:
    (a,), (ta,) = primals, tangents
    return det(a), trace(mm(adjugate_p.bind(a), ta))                        # d det = tr(adj(A) dA)


det_p.batch = _leading_batch(det_p)


def _adjugate_impl(a: np.ndarray) -> np.ndarray:
    """adj(A) from A = U S V^H: adj(A) = det(U) det(V^H) V adj(S) U^H, adj(S) holding the products
    of the other singular values, so a singular A has its adjugate (zero past rank n - 1), not
    a failed inverse."""
    u, s, vh = np.linalg.svd(a)
    n = s.shape[-1]
    ones = np.ones(s.shape[:-1] + (1,), s.dtype)
    before = np.concatenate([ones, np.cumprod(s[..., :-1], axis=-1)], axis=-1)
    after = np.concatenate([np.cumprod(s[..., :0:-1], axis=-1)[..., ::-1], ones], axis=-1) if n > 1 else ones
    phase = (np.linalg.det(u) * np.linalg.det(vh))[..., None, None]
    others = (before * after).astype(a.dtype)
    v, uh = np.swapaxes(vh.conj(), -1, -2), np.swapaxes(u.conj(), -1, -2)
    return (phase * v @ (others[..., :, None] * uh)).astype(a.dtype)


def _adjugate_aval(a: ShapedArray) -> ShapedArray:
    _square("adjugate", a, allow_complex=True)
    return a


#: adj(A) (= det(A) A^-1 where A is invertible): det's derivative, defined at singular A too.
adjugate_p = Primitive("adjugate", impl=_adjugate_impl, abstract_eval=_adjugate_aval, arity=1)


@adjugate_p.def_jvp
def _adjugate_jvp(primals: tuple, tangents: tuple) -> tuple:
    (a,), (ta,) = primals, tangents
    adj = adjugate_p.bind(a)
    x = solve(a, ta)                                                        # d adj = tr(A^-1 dA) adj - A^-1 dA adj
    return adj, ew.sub(ew.mul(reshape(trace(x), aval(x).shape[:-2] + (1, 1)), adj), mm(x, adj))


adjugate_p.batch = _leading_batch(adjugate_p)


def det(a: Any) -> Any:
    return det_p.bind(a)


def _slogdet_aval(a: ShapedArray) -> tuple[ShapedArray, ShapedArray]:
    """(sign, log|det|): the sign has ``a``'s dtype (a unit complex number for complex ``a``),
    the logarithm is real."""
    d = _det_aval(a)
    return d, ShapedArray(d.shape, dtypes.real_for(a.dtype))


slogdet_p = Primitive("slogdet", impl=lambda a: tuple(np.linalg.slogdet(a)), abstract_eval=_slogdet_aval,
                      arity=1, multiple_results=True)


@slogdet_p.def_jvp
def _slogdet_jvp(primals: tuple, tangents: tuple) -> tuple:
    (a,), (ta,) = primals, tangents
    sign, logdet = slogdet_p.bind(a)
    t = trace(solve(a, ta))                                                 # d log det = tr(A^-1 dA)
    if not dtypes.is_complex(aval(a).dtype):
        return (sign, logdet), (None, t)
    re = ew.real(t)                                           # d log|det| = Re t, d sign = i Im t sign
    return (sign, logdet), (ew.mul(sign, ew.sub(t, ew.convert(re, aval(t).dtype))), re)


slogdet_p.batch = _leading_batch(slogdet_p)


# --- cholesky ----------------------------------------------------------------------------------


def _cholesky_aval(a: ShapedArray) -> ShapedArray:
    _square("cholesky", a, allow_complex=True)
    return a


def _cholesky_impl(a: np.ndarray) -> np.ndarray:
    """LAPACK's ``potrf``; a matrix that is not positive definite gets NaN in its lower triangle
    (as JAX's cholesky) instead of numpy's ``LinAlgError``, the others of a batch their factor."""
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        a = np.asarray(a)
        flat = a.reshape(-1, *a.shape[-2:])
        out = np.empty_like(flat)
        for k, m in enumerate(flat):
            try:
                out[k] = np.linalg.cholesky(m)
            except np.linalg.LinAlgError:
                out[k] = np.tril(np.full_like(m, np.nan))
        return out.reshape(a.shape)


cholesky_p = Primitive("cholesky", impl=_cholesky_impl, abstract_eval=_cholesky_aval, arity=1)


@cholesky_p.def_jvp
def _cholesky_jvp(primals: tuple, tangents: tuple) -> tuple:
    """dL = L Phi(L^-1 dA L^-H), Phi: the lower triangle with the diagonal halved."""
    (a,), (ta,) = primals, tangents
    low = cholesky(a)
    n = aval(a).shape[-1]
    inner = mH(solve(low, mH(solve(low, ta))))
    phi = ew.mul(tril(inner), np.asarray(np.eye(n) * -0.5 + 1, aval(a).dtype))
    return low, mm(low, phi)


cholesky_p.batch = _leading_batch(cholesky_p)


def cholesky(a: Any) -> Any:
    return cholesky_p.bind(a)


# --- eigh ---------------------------------------------------------------------------------------


def _eigh_aval(a: ShapedArray) -> tuple[ShapedArray, ShapedArray]:
    """Real eigenvalues (of a Hermitian ``a``, complex or not) and eigenvectors of ``a``'s type."""
    n = _square("eigh", a, allow_complex=True)
    return ShapedArray(a.shape[:-2] + (n,), dtypes.real_for(a.dtype)), a


eigh_p = Primitive("eigh", impl=lambda a: tuple(np.linalg.eigh(a)), abstract_eval=_eigh_aval, arity=1,
                   multiple_results=True)


def _inverse_gaps(w: Any, plus: bool = False) -> Any:
    """F[i, j] = 1 / (w_j - w_i) off the diagonal (``plus``: 1 / ((w_j + w_i)(w_j - w_i))), 0 on it."""
    shape = aval(w).shape
    n = shape[-1]
    row = reshape(w, shape[:-1] + (1, n))
    col = reshape(w, shape[:-1] + (n, 1))
    gaps = ew.sub(row, col)
    if plus:
        gaps = ew.mul(gaps, ew.add(row, col))
    eye = _eye(n, n, aval(w).dtype)
    return ew.sub(ew.div(lit(1, aval(w).dtype), ew.add(gaps, eye)), eye)


@eigh_p.def_jvp
def _eigh_jvp(primals: tuple, tangents: tuple) -> tuple:
    """dw = Re diag(V^H dA V), dV = V (F * (V^H dA V)) with F[i, j] = 1 / (w_j - w_i) (a gauge
    where each eigenvector's phase change is zero, as JAX's)."""
    (a,), (ta,) = primals, tangents
    w, v = eigh_p.bind(a)
    vh_da_v = mm(mH(v), mm(ta, v))
    gaps = _inverse_gaps(w)
    dw = diag_part(vh_da_v)
    if dtypes.is_complex(aval(a).dtype):
        dw = ew.real(dw)
        gaps = ew.convert(gaps, aval(a).dtype)
    return (w, v), (dw, mm(v, ew.mul(gaps, vh_da_v)))


eigh_p.batch = _leading_batch(eigh_p)


# --- svd ------------------------------------------------------------------------------------------


def _svd_aval(a: ShapedArray, full_matrices: bool = False) -> tuple[ShapedArray, ShapedArray, ShapedArray]:
    """(U, s, V^H): the singular values are real, the vectors of ``a``'s type; U (m, m) and
    V^H (n, n) with ``full_matrices``."""
    m, n = _matrix("svd", a, allow_complex=True)
    k = min(m, n)
    lead = a.shape[:-2]
    u_cols, v_rows = (m, n) if full_matrices else (k, k)
    return (ShapedArray(lead + (m, u_cols), a.dtype), ShapedArray(lead + (k,), dtypes.real_for(a.dtype)),
            ShapedArray(lead + (v_rows, n), a.dtype))


svd_p = Primitive("svd", impl=lambda a, full_matrices=False: tuple(np.linalg.svd(a, full_matrices=full_matrices)),
                  abstract_eval=_svd_aval, arity=1, multiple_results=True)


def _require_thin(a: ShapedArray, full_matrices: bool) -> None:
    """The complete singular vectors of a non-square matrix have no derivative here (nor in JAX)."""
    m, n = a.shape[-2:]
    if full_matrices and m != n:
        raise NotImplementedError(f"svd: the derivative of full_matrices=True for a non-square matrix {a} is not "
                                  f"implemented (as in JAX); differentiate full_matrices=False")


@svd_p.def_jvp
def _svd_jvp(primals: tuple, tangents: tuple, full_matrices: bool = False) -> tuple:
    """The thin SVD's derivative (as in JAX): with dS = U^H dA V and F[i, j] = 1/(s_j^2 - s_i^2),
    ds = Re diag(dS), dU = U (F * (dS s + s dS^H) + (dS - dS^H) / 2s on the diagonal) (+ the
    part outside U's span when m > n), dV = V (F * (s dS + dS^H s)) (+ the part outside V's
    span when n > m). The diagonal term, zero for real matrices, fixes the phases' gauge."""
    (a,), (ta,) = primals, tangents
    _require_thin(aval(a), full_matrices)
    u, s, vt = svd_p.bind(a)
    m, n = aval(a).shape[-2:]
    dt = aval(a).dtype
    shape = aval(s).shape
    k = shape[-1]
    v = mH(vt)
    ds_mat = mm(mH(u), mm(ta, v))
    f = _inverse_gaps(s, plus=True)
    sc = ew.convert(s, dt) if dtypes.is_complex(dt) else s
    s_row = reshape(sc, shape[:-1] + (1, k))
    s_col = reshape(sc, shape[:-1] + (k, 1))
    if dtypes.is_complex(dt):
        f = ew.convert(f, dt)
    dss = ew.mul(ds_mat, s_row)
    sds = ew.mul(s_col, ds_mat)
    du = mm(u, ew.mul(f, ew.add(dss, mH(dss))))
    dv = mm(v, ew.mul(f, ew.add(sds, mH(sds))))
    ds = diag_part(ds_mat)
    if dtypes.is_complex(dt):
        zero = ew.eq(sc, lit(0, dt))                                       # 1 / 2s, 0 where s = 0
        half_inv = ew.select(zero, lit(0, dt), ew.div(lit(0.5, dt), ew.select(zero, lit(1, dt), sc)))
        du = ew.add(du, mm(u, diag_embed(ew.mul(ew.sub(ds, ew.conj(ds)), half_inv))))
        ds = ew.real(ds)
    if m > n:
        dav = mm(ta, v)
        du = ew.add(du, ew.div(ew.sub(dav, mm(u, mm(mH(u), dav))), s_row))
    if n > m:
        dau = mm(mH(ta), u)
        dv = ew.add(dv, ew.div(ew.sub(dau, mm(v, mm(vt, dau))), s_row))
    return (u, s, vt), (du, ds, mH(dv))


svd_p.batch = _leading_batch(svd_p)


# --- qr ------------------------------------------------------------------------------------------


def _qr_aval(a: ShapedArray, full_matrices: bool = False) -> tuple[ShapedArray, ShapedArray]:
    """Q (m, k) and R (k, n), k = min(m, n); with ``full_matrices`` k = m (numpy's 'complete')."""
    m, n = _matrix("qr", a, allow_complex=True)
    k = m if full_matrices else min(m, n)
    lead = a.shape[:-2]
    return ShapedArray(lead + (m, k), a.dtype), ShapedArray(lead + (k, n), a.dtype)


def _qr_impl(a: np.ndarray, full_matrices: bool = False) -> tuple[np.ndarray, np.ndarray]:
    return tuple(np.linalg.qr(a, mode="complete" if full_matrices else "reduced"))


qr_p = Primitive("qr", impl=_qr_impl, abstract_eval=_qr_aval, arity=1, multiple_results=True)


def _part(x: Any, axis: int, start: int, stop: int) -> Any:
    """``x[..., start:stop, :]`` (axis -2) or ``x[..., start:stop]`` (axis -1)."""
    shape = aval(x).shape
    axis = axis % len(shape)
    begin = tuple(start if d == axis else 0 for d in range(len(shape)))
    end = tuple(stop if d == axis else n for d, n in enumerate(shape))
    return slice_(x, begin, end, None)


def _thin_qr_jvp(q: Any, r: Any, ta: Any) -> tuple[Any, Any]:
    """For m >= n (as in JAX): with C = Q^H dA R^-1 and O = tril(C, -1) - tril(C, -1)^H (plus
    i Im diag(C) for complex matrices), dQ = Q (O - C) + dA R^-1 and dR = (C - O) R."""
    dt = aval(q).dtype
    n = aval(r).shape[-1]
    da_rinv = mT(solve(mT(r), mT(ta)))
    c = mm(mH(q), da_rinv)
    low = tril(c, -1)
    o = ew.sub(low, mH(low))
    if dtypes.is_complex(dt):
        o = ew.add(o, ew.mul(_eye(n, n, dt), ew.sub(c, ew.convert(ew.real(c), dt))))
    return ew.add(mm(q, ew.sub(o, c)), da_rinv), mm(ew.sub(c, o), r)


@qr_p.def_jvp
def _qr_jvp(primals: tuple, tangents: tuple, full_matrices: bool = False) -> tuple:
    """JAX's rule: the thin rule for m >= n; for m < n the thin rule on the leading square
    block and dR_2 = dQ^H A_2 + Q^H dA_2 for the rest; for the complete Q of a tall matrix, the
    extra columns' derivative of arXiv:2409.13374 (Householder's gauge, as LAPACK's)."""
    (a,), (ta,) = primals, tangents
    q, r = qr_p.bind(a, full_matrices=full_matrices)
    m, n = aval(a).shape[-2:]
    if m < n:
        dq, dr1 = _thin_qr_jvp(q, _part(r, -1, 0, m), _part(ta, -1, 0, m))
        dr2 = ew.add(mm(mH(dq), _part(a, -1, m, n)), mm(mH(q), _part(ta, -1, m, n)))
        return (q, r), (dq, concatenate([dr1, dr2], aval(a).ndim - 1))
    tall_full = full_matrices and m > n
    q_mn = _part(q, -1, 0, n) if tall_full else q
    r_nn = _part(r, -2, 0, n) if tall_full else r
    dq_mn, dr_nn = _thin_qr_jvp(q_mn, r_nn, ta)
    if not tall_full:
        return (q, r), (dq_mn, dr_nn)
    dt = aval(a).dtype
    q_nn, q_pn = _part(q_mn, -2, 0, n), _part(q_mn, -2, n, m)
    dq_nn, dq_pn = _part(dq_mn, -2, 0, n), _part(dq_mn, -2, n, m)
    z_pn_h = solve(mH(ew.sub(q_nn, _eye(n, n, dt))), mH(q_pn))           # Z = Q_pn (Q_nn - I)^-1
    z_pn = mH(z_pn_h)
    dq_mp = ew.sub(mm(dq_mn, z_pn_h), mm(ew.add(q_mn, mm(_part(q, -1, n, m), z_pn)),
                                         mH(ew.sub(dq_pn, mm(z_pn, dq_nn)))))
    nd = aval(a).ndim
    dr = concatenate([dr_nn, zeros(ShapedArray(aval(a).shape[:-2] + (m - n, n), dt))], nd - 2)
    return (q, r), (concatenate([dq_mn, dq_mp], nd - 1), dr)


qr_p.batch = _leading_batch(qr_p)


# --- eig ------------------------------------------------------------------------------------------


def _eig_aval(a: ShapedArray) -> tuple[ShapedArray, ShapedArray]:
    n = _square("eig", a, allow_complex=True)
    c = dtypes.complex_for(a.dtype)
    return ShapedArray(a.shape[:-2] + (n,), c), ShapedArray(a.shape, c)


def _eig_impl(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w, v = np.linalg.eig(a)
    c = dtypes.complex_for(a.dtype)
    return w.astype(c), v.astype(c)


eig_p = Primitive("eig", impl=_eig_impl, abstract_eval=_eig_aval, arity=1, multiple_results=True)


@eig_p.def_jvp
def _eig_jvp(primals: tuple, tangents: tuple) -> tuple:
    """JAX's rule for distinct eigenvalues: with M = V^-1 dA V, dw = diag(M) and
    dV = V (F * M) with F[i, j] = 1 / (w_j - w_i), less V Re(diag(V^H dV)) so the columns stay unit
    length. (An eigenvector's phase is arbitrary: only phase-invariant functions of V have
    meaningful derivatives.)"""
    (a,), (ta,) = primals, tangents
    w, v = eig_p.bind(a)
    c = aval(w).dtype
    m = solve(v, mm(ew.convert(ta, c), v))
    du = mm(v, ew.mul(_inverse_gaps(w), m))
    nd = aval(v).ndim
    shape = aval(w).shape
    stretch = ew.real(reduce_sum(ew.mul(ew.conj(v), du), (nd - 2,)))
    dv = ew.sub(du, ew.mul(v, reshape(ew.convert(stretch, c), shape[:-1] + (1, shape[-1]))))
    return (w, v), (diag_part(m), dv)


eig_p.batch = _leading_batch(eig_p)
