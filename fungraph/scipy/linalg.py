"""``fungraph.scipy.linalg``: ``jax.scipy.linalg``'s decompositions and solves with SciPy's
signatures, over the primitives of ``fungraph.primitives.linalg_ops`` and ``lu``, so each
differentiates and batches (leading axes are a batch) like ``fungraph.numpy.linalg``.

Triangular solves are solves of the triangle (the other one masked off, so its gradient is
zero, as in JAX); ``expm`` is JAX's scaling-and-squaring Pade algorithm written with ``lax``
control flow, differentiable through its arithmetic."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import fungraph.numpy as fnp
from fungraph import lax
from fungraph.custom_derivatives import custom_jvp
from fungraph.numpy import linalg as nla
from fungraph.numpy._util import promote
from fungraph.primitives import linalg_ops as ops
from fungraph.primitives.callback import stop_gradient
from fungraph.primitives.lu import lu_p, permutation_matrix, unpack
from fungraph.scipy._hessenberg import hessenberg
from fungraph.scipy._matrix_constructors import (
    circulant,
    companion,
    convolution_matrix,
    dft,
    fiedler,
    fiedler_companion,
    hadamard,
    helmert,
    invhilbert,
    invpascal,
    leslie,
    pascal,
)
from fungraph.scipy._matrix_equations import solve_sylvester
from fungraph.scipy._matrix_functions import funm, polar, rsf2csf, schur, sqrtm
from fungraph.scipy._tridiagonal import eigh_tridiagonal

__all__ = [
    "block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion", "convolution_matrix", "det",
    "dft", "eigh", "eigh_tridiagonal", "expm", "expm_frechet", "fiedler", "fiedler_companion", "funm", "hadamard",
    "hankel", "helmert", "hessenberg", "hilbert", "inv", "invhilbert", "invpascal", "leslie", "lu", "lu_factor",
    "lu_solve", "pascal", "polar", "qr", "qr_multiply", "rsf2csf", "schur", "solve", "solve_sylvester",
    "solve_triangular", "sqrtm", "svd", "toeplitz",
]


def _square(a: Any, name: str) -> Any:
    (x,) = promote(a, to_inexact=True)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name}: expected a square matrix (or a stack of them), got shape {x.shape}")
    return x


def _matrix(a: Any, name: str) -> Any:
    (x,) = promote(a, to_inexact=True)
    if x.ndim < 2:
        raise ValueError(f"{name}: expected a matrix (or a stack of them), got shape {x.shape}")
    return x


def _mH(x: Any) -> Any:
    return fnp.conj(fnp.swapaxes(x, -1, -2))


def _trans_flags(trans: int | str) -> tuple[bool, bool]:
    """(transpose, conjugate) for SciPy's ``trans`` argument."""
    if trans in (0, "N"):
        return False, False
    if trans in (1, "T"):
        return True, False
    if trans in (2, "C"):
        return True, True
    raise ValueError(f"Invalid 'trans' value {trans}")


def _solve_matrix(a: Any, b: Any) -> Any:
    """``a^-1 b`` with ``b`` one vector (n,) or a stack of right-hand sides (..., n, k)."""
    if b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape[-1] == a.shape[-1]):
        return fnp.squeeze(nla.solve(a, fnp.expand_dims(b, -1)), -1)
    return nla.solve(a, b)


# --- triangular and Cholesky solves ----------------------------------------------------------------


def solve_triangular(a: Any, b: Any, trans: int | str = 0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, debug: Any = None, check_finite: bool = True) -> Any:
    """Solve ``op(T) x = b`` where ``T`` is ``a``'s lower (``lower``) or upper triangle (with ones
    on the diagonal for ``unit_diagonal``) and ``op`` is ``trans``: 0/'N', 1/'T' or 2/'C'."""
    transpose, conjugate = _trans_flags(trans)
    a_, b_ = promote(a, b, to_inexact=True)
    a_ = _square(a_, "solve_triangular")
    t = fnp.tril(a_) if lower else fnp.triu(a_)
    if unit_diagonal:
        t = fnp.where(np.eye(t.shape[-1], dtype=bool), fnp.ones((), t.dtype), t)
    if transpose:
        t = _mH(t) if conjugate else fnp.swapaxes(t, -1, -2)
    return _solve_matrix(t, b_)




def _lapack_view(x: Any) -> Any:
    """The Hermitian matrix ``x``'s lower triangle gives (what LAPACK reads), with ``x``'s own
    tangent: JAX's ``symmetrize_input=False`` rules differentiate along the full tangent."""
    return x + stop_gradient(nla._sym_lower(x) - x)


def cholesky(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The Cholesky factor of the Hermitian matrix ``a``'s lower (``lower``) or upper triangle
    gives: lower with ``lower``, else upper (SciPy's default). As JAX's, no symmetrisation."""
    x = _square(a, "cholesky")
    low = ops.cholesky(_lapack_view(x if lower else _mH(x)))
    return low if lower else _mH(low)


def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Any, bool]:
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower: tuple[Any, bool], b: Any, overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """Solve ``a x = b`` from ``cho_factor(a)``: two triangular solves with the factor's triangle."""
    c, lower = c_and_lower
    c_, b_ = promote(c, b, to_inexact=True)
    low = fnp.tril(c_) if lower else _mH(fnp.triu(c_))
    y = solve_triangular(low, b_, lower=True)
    return solve_triangular(low, y, trans=2, lower=True)


# --- LU ----------------------------------------------------------------------------------------------


def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Any, Any]:
    """``(lu, piv)``: ``L`` and ``U`` packed in one matrix and LAPACK's (0-based) row interchanges."""
    packed, pivots, _ = lu_p.bind(_matrix(a, "lu_factor"))
    return packed, pivots


def lu(a: Any, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> tuple:
    """``(p, l, u)`` with ``a = p @ l @ u``, or ``(p @ l, u)`` with ``permute_l``."""
    x = _matrix(a, "lu")
    packed, _, perm = lu_p.bind(x)
    low, up = unpack(packed)
    p = fnp.swapaxes(permutation_matrix(perm, x.dtype), -1, -2)
    return (fnp.matmul(p, low), up) if permute_l else (p, low, up)


def _pivots_to_permutation(pivots: Any, m: int) -> Any:
    """The row order that applying the interchanges ``i <-> pivots[i]`` in turn gives."""
    lead = pivots.shape[:-1]
    idx = np.arange(m, dtype=np.int32)
    perm = fnp.broadcast_to(idx, lead + (m,))
    for i in range(pivots.shape[-1]):
        j = pivots[..., i:i + 1]
        at_i = perm[..., i:i + 1]
        at_j = fnp.take_along_axis(perm, j, axis=-1)
        perm = fnp.where(idx == i, at_j, fnp.where(idx == j, at_i, perm))
    return perm


def lu_solve(lu_and_piv: tuple[Any, Any], b: Any, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Any:
    """Solve ``op(a) x = b`` from ``lu_factor(a)`` (``trans``: 0 ``a``, 1 ``a^T``, 2 ``a^H``)."""
    packed, pivots = lu_and_piv
    x, b_ = promote(packed, b, to_inexact=True)
    x = _square(x, "lu_solve")
    transpose, conjugate = _trans_flags(trans)
    low, up = unpack(x)
    p = permutation_matrix(_pivots_to_permutation(fnp.asarray(pivots, np.int32), x.shape[-1]), x.dtype)
    vector = b_.ndim == 1
    rhs = fnp.expand_dims(b_, -1) if vector else b_
    if not transpose:
        out = nla.solve(up, nla.solve(low, fnp.matmul(p, rhs)))
    else:
        op = _mH if conjugate else (lambda m: fnp.swapaxes(m, -1, -2))
        out = fnp.matmul(fnp.swapaxes(p, -1, -2), nla.solve(op(low), nla.solve(op(up), rhs)))
    return fnp.squeeze(out, -1) if vector else out


# --- the other decompositions -----------------------------------------------------------------------


def _pivot_order(x: Any) -> Any:
    """LAPACK ``geqp3``'s column order for one matrix: at step k the remaining column of largest
    norm (after projecting out the columns chosen before; the first on a tie) is swapped into
    place k. The pivots follow the values, not their derivatives."""
    m, n = x.shape
    work = stop_gradient(x)
    perm = fnp.arange(n, dtype=np.int32)
    positions = np.arange(n)
    for k in range(min(m, n)):
        norms = fnp.sum(fnp.real(work * fnp.conj(work)), axis=0)
        j = fnp.argmax(fnp.where(positions >= k, norms, -1.0)).astype(np.int32)
        swap = fnp.where(positions == k, j, fnp.where(positions == j, k, positions))
        work, perm = work[:, swap], perm[swap]
        col = work[:, k]
        size = fnp.sqrt(fnp.sum(fnp.real(col * fnp.conj(col))))
        q = col / fnp.where(size > 0, size, 1.0)
        work = work - q[:, None] * (fnp.conj(q) @ work)[None, :]
    return perm


def _pivoted_qr(x: Any, mode: str) -> tuple:
    """``qr(pivoting=True)``: the QR of ``x``'s columns in :func:`_pivot_order` (what
    ``geqp3`` factors), and that order; differentiated as JAX's, with the order held fixed."""
    perm = fnp.vectorize(_pivot_order, signature="(m,n)->(n)")(x)
    permuted = fnp.take_along_axis(x, fnp.broadcast_to(perm[..., None, :], x.shape), axis=-1)
    return (*qr(permuted, mode=mode), perm)


def qr(a: Any, overwrite_a: bool = False, lwork: Any = None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True) -> tuple:
    """SciPy's modes: 'full' (square ``Q``), 'economic' (thin), 'r' (``(R,)``, R of a's shape);
    ``pivoting`` adds the column order ``P`` (int32) with ``a[:, P] = Q R``, as LAPACK's
    ``geqp3`` chooses it (a near tie of column norms may be broken differently)."""
    x = _matrix(a, "qr")
    if pivoting:
        return _pivoted_qr(x, mode)
    if mode == "economic":
        return tuple(nla.qr(x, mode="reduced"))
    if mode == "full":
        return tuple(nla.qr(x, mode="complete"))
    if mode == "r":
        r = nla.qr(x, mode="r")
        m, n = x.shape[-2:]
        if m > n:
            r = fnp.concatenate([r, fnp.zeros(x.shape[:-2] + (m - n, n), x.dtype)], axis=-2)
        return (r,)
    raise ValueError(f"Unsupported QR decomposition mode '{mode}'")


def _refuse_geqrf(primals: tuple, tangents: tuple) -> Any:
    raise NotImplementedError("Differentiation rule for 'geqrf' not implemented")


def qr_multiply(a: Any, c: Any, mode: str = "right", pivoting: bool = False, conjugate: bool = False,
                overwrite_a: bool = False, overwrite_c: bool = False) -> tuple:
    """``(Q @ c, R)`` (``mode='left'``, ``c`` with ``min(m, n)`` rows) or ``(c @ Q, R)``
    (``'right'``, ``c`` with ``m`` columns) for ``a``'s economic QR, ``conj(Q)`` with
    ``conjugate``, and the column order ``P`` third with ``pivoting``; a 1-d ``c`` is a column
    (left) or a row (right) and comes back 1-d. Not differentiable, as JAX's."""
    a_, c_ = promote(a, c, to_inexact=True)
    if mode not in ("right", "left"):
        raise ValueError(f"mode must be 'right' or 'left', got {mode!r}")
    a_ = _matrix(a_, "qr_multiply")
    vector = c_.ndim == 1
    if vector:
        c_ = c_[:, None] if mode == "left" else c_[None, :]
    m, n = a_.shape[-2:]
    k = min(m, n)
    if mode == "left" and c_.shape[-2] != k:
        raise ValueError(f"Array shapes are not compatible for Q @ c operation: a has shape {tuple(a_.shape)} so Q "
                         f"has {k} columns, but c has {c_.shape[-2]} rows (expected {k}).")
    if mode == "right" and c_.shape[-1] != m:
        raise ValueError(f"Array shapes are not compatible for c @ Q operation: a has shape {tuple(a_.shape)} so Q "
                         f"has {m} rows, but c has {c_.shape[-1]} columns (expected {m}).")

    def multiply(x: Any, y: Any) -> tuple:
        factors = qr(x, mode="economic", pivoting=pivoting)
        q = fnp.conj(factors[0]) if conjugate else factors[0]
        product = fnp.matmul(q, y) if mode == "left" else fnp.matmul(y, q)
        return (product, *factors[1:])

    refused = custom_jvp(multiply)
    refused.defjvp(_refuse_geqrf)
    product, *rest = refused(a_, c_)
    if vector:
        product = fnp.ravel(product)
    return (product, *rest)


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd") -> Any:
    out = nla.svd(_matrix(a, "svd"), full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(out) if compute_uv else out


def eigh(a: Any, b: Any = None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, turbo: bool = True, eigvals: Any = None, type: int = 1,  # noqa: A002
         check_finite: bool = True) -> Any:
    """Eigenvalues (ascending) and eigenvectors of the Hermitian ``(a + a^H) / 2``, as JAX's (so
    ``lower`` changes nothing and the gradient is symmetric); the generalised problem (``b``) is
    not supported, as in JAX."""
    if b is not None:
        raise NotImplementedError("Only the b=None case of eigh is implemented")
    if type != 1:
        raise NotImplementedError("Only the type=1 case of eigh is implemented.")
    if eigvals is not None:
        raise NotImplementedError("Only the eigvals=None case of eigh is implemented.")
    w, v = nla.eigh(_square(a, "eigh"))
    return w if eigvals_only else (w, v)


def inv(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    return nla.inv(_square(a, "inv"))


def det(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    return nla.det(_square(a, "det"))


def solve(a: Any, b: Any, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          debug: bool = False, check_finite: bool = True, assume_a: str = "gen") -> Any:
    """``a^-1 b``; every ``assume_a`` solves the general system (the answer, and JAX's gradient,
    are those of the general solve)."""
    valid = ["gen", "sym", "her", "pos"]
    if assume_a not in valid:
        raise ValueError(f"Expected assume_a to be one of {valid}; got {assume_a!r}")
    a_, b_ = promote(a, b, to_inexact=True)
    return _solve_matrix(_square(a_, "solve"), b_)


# --- expm ------------------------------------------------------------------------------------------

_PADE = {
    3: (120., 60., 12., 1.),
    5: (30240., 15120., 3360., 420., 30., 1.),
    7: (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.),
    9: (17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880., 3960., 90., 1.),
    13: (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
         10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.),
}


def _pade(degree: int) -> Callable[[Any], tuple[Any, Any]]:
    """``(U, V)`` of the [degree/degree] Pade approximant: ``exp(A) ~ (V - U)^-1 (V + U)``."""
    b = _PADE[degree]

    def uv(a: Any) -> tuple[Any, Any]:
        ident = fnp.eye(a.shape[-1], dtype=a.dtype)
        powers = [ident, a @ a]
        while len(powers) < (4 if degree == 13 else (degree + 1) // 2):
            powers.append(powers[-1] @ powers[1])
        if degree == 13:
            a2, a4, a6 = powers[1], powers[2], powers[3]
            u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * ident)
            v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * ident
            return u, v
        u = a @ sum(b[2 * i + 1] * p for i, p in enumerate(powers))
        v = sum(b[2 * i] * p for i, p in enumerate(powers))
        return u, v

    return uv


def _expm_one(a: Any, upper_triangular: bool, max_squarings: int) -> Any:
    """JAX's algorithm for one matrix: scale by 2^-s so the 1-norm is small, pick the Pade degree
    by the (unscaled) 1-norm, solve, then square s times (NaN when s exceeds ``max_squarings``)."""
    norm1 = nla.norm(a, 1)
    if a.dtype in (np.float64, np.complex128):
        maxnorm, degrees = 5.371920351148152, (3, 5, 7, 9, 13)
        conds = [1.495585217958292e-002, 2.539398330063230e-001, 9.504178996162932e-001, 2.097847961257068e+000]
    else:
        maxnorm, degrees = 3.925724783138660, (3, 5, 7)
        conds = [4.258730016922831e-001, 1.880152677804762e+000]
    squarings = fnp.maximum(0, fnp.floor(fnp.log2(norm1 / maxnorm)))
    scaled = a / (2 ** squarings).astype(a.dtype)
    idx = fnp.digitize(norm1, fnp.asarray(conds, norm1.dtype))
    u, v = lax.switch(idx, [_pade(d) for d in degrees], scaled)
    p, q = u + v, v - u
    r = solve_triangular(q, p) if upper_triangular else nla.solve(q, p)

    def step(c: Any, i: Any) -> tuple[Any, None]:
        return lax.cond(i < squarings, lambda x: x @ x, lambda x: x, c), None

    r, _ = lax.scan(step, r, fnp.arange(max_squarings, dtype=squarings.dtype))
    return fnp.where(squarings > max_squarings, fnp.full_like(r, np.nan), r)


def expm(A: Any, *, upper_triangular: bool = False, max_squarings: int = 16) -> Any:  # noqa: N803
    """The matrix exponential, as JAX's ``expm`` computes it (stacks of matrices map over the
    leading axes)."""
    a = _square(A, "expm")
    if a.ndim == 2:
        return _expm_one(a, upper_triangular, max_squarings)
    from fungraph.api import vmap

    flat = fnp.reshape(a, (-1,) + a.shape[-2:])
    out = vmap(lambda m: _expm_one(m, upper_triangular, max_squarings))(flat)
    return fnp.reshape(out, a.shape)


def expm_frechet(A: Any, E: Any, *, method: str | None = None,  # noqa: N803
                 compute_expm: bool = True) -> Any:
    """The Frechet derivative of ``expm`` at ``A`` in the direction ``E`` (its JVP, as JAX
    computes it), with ``expm(A)`` first when ``compute_expm``."""
    from fungraph.api import jvp

    a, e = _square(A, "expm_frechet"), _square(E, "expm_frechet")
    if a.shape != e.shape:
        raise ValueError(f"expected A and E to be the same shape, got A.shape={a.shape} E.shape={e.shape}")
    a, e = promote(a, e, to_inexact=True)
    value, derivative = jvp(expm, (a,), (e,))
    return (value, derivative) if compute_expm else derivative


# --- structured matrices ----------------------------------------------------------------------------


def toeplitz(c: Any, r: Any = None) -> Any:
    """``A[..., i, j] = c[..., i - j]`` for ``i >= j``, else ``r[..., j - i]`` (``r``: ``conj(c)`` by
    default; ``r[0]`` is ignored); leading axes of ``c`` and ``r`` broadcast to a batch."""
    c_ = fnp.atleast_1d(fnp.asarray(c))
    r_ = fnp.conj(c_) if r is None else fnp.atleast_1d(fnp.asarray(r))
    return _from_diagonals(fnp.flip(c_, -1), r_, lambda m, n: (m - 1) - np.arange(m)[:, None] + np.arange(n))


def hankel(c: Any, r: Any = None) -> Any:
    """``H[..., i, j] = v[..., i + j]`` with ``v = concatenate([c, r[1:]])`` (``r``: zeros by default)."""
    c_ = fnp.atleast_1d(fnp.asarray(c))
    r_ = fnp.zeros_like(c_) if r is None else fnp.atleast_1d(fnp.asarray(r))
    return _from_diagonals(c_, r_, lambda m, n: np.arange(m)[:, None] + np.arange(n))


def _from_diagonals(head: Any, r: Any, index: Callable[[int, int], np.ndarray]) -> Any:
    """The (m, n) matrix of ``concatenate([head, r[1:]])[index(m, n)]`` over broadcast leading axes."""
    dtype = fnp.result_type(head, r)
    lead = np.broadcast_shapes(head.shape[:-1], r.shape[:-1])
    head = fnp.broadcast_to(head.astype(dtype), lead + head.shape[-1:])
    r = fnp.broadcast_to(r.astype(dtype), lead + r.shape[-1:])
    m, n = head.shape[-1], r.shape[-1]
    if m == 0 or n == 0:
        return fnp.zeros(lead + (m, n), dtype)
    elems = fnp.concatenate([head, r[..., 1:]], axis=-1)
    return fnp.take(elems, index(m, n), axis=-1)


def hilbert(n: int) -> Any:
    """The Hilbert matrix ``1 / (i + j + 1)`` in the default float dtype."""
    from fungraph import dtypes

    i = np.arange(n, dtype=dtypes.default_float())
    return fnp.asarray(1 / (i[:, None] + i[None, :] + 1))


# --- block_diag --------------------------------------------------------------------------------------


def block_diag(*arrs: Any) -> Any:
    """The arrays (at most 2-d each) placed along the diagonal of one matrix."""
    if not arrs:
        arrs = (fnp.zeros((1, 0)),)
    xs = [fnp.asarray(x) for x in arrs]
    bad = [i for i, x in enumerate(xs) if x.ndim > 2]
    if bad:
        raise ValueError(f"Arguments to block_diag must have at most 2 dimensions, got shape {xs[bad[0]].shape} "
                         f"at argument {bad[0]}.")
    dtype = fnp.result_type(*xs)
    mats = [fnp.atleast_2d(x).astype(dtype) for x in xs]
    total = sum(m.shape[1] for m in mats)
    rows = []
    col = 0
    for m in mats:
        rows.append(fnp.pad(m, ((0, 0), (col, total - col - m.shape[1]))))
        col += m.shape[1]
    return fnp.concatenate(rows, axis=0)

