"""``fungraph.numpy.linalg``: numpy.linalg over stacks of matrices (leading axes are a batch),
differentiable through the decomposition primitives of ``fungraph.primitives.linalg_ops``.

``eig``/``eigvals`` take real or complex matrices and, like JAX, always return complex arrays
(numpy returns real ones when every eigenvalue of a real matrix is real); the other routines
take real matrices. ``eigh``, ``eigvalsh`` and ``cholesky`` decompose ``(a + a^H) / 2``, as JAX's
do (the same for a Hermitian ``a``; their gradients are symmetric); ``eigh``'s
``symmetrize_input=False`` reads one triangle instead, as numpy does."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError
from fungraph.numpy import _reductions as red
from fungraph.numpy._linalg import matmul, outer, tensordot
from fungraph.numpy._manip import cross as _cross
from fungraph.numpy._manip import diagonal as _diagonal
from fungraph.numpy._reductions import abs_squared
from fungraph.numpy._shape import swapaxes
from fungraph.numpy._util import asarray, normalize_axes, promote
from fungraph.primitives import elementwise as ew
from fungraph.primitives import linalg_ops as ops
from fungraph.primitives import shape as sh

LinAlgError = np.linalg.LinAlgError

__all__ = [
    "LinAlgError", "cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq",
    "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "multi_dot", "norm", "outer",
    "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace",
    "vecdot", "vector_norm",
]


class EighResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class SVDResult(NamedTuple):
    U: Any
    S: Any
    Vh: Any


class QRResult(NamedTuple):
    Q: Any
    R: Any


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


def _float_matrix(a: Any, name: str, square: bool = True) -> Any:
    (x,) = promote(a, to_inexact=True)
    if x.ndim < 2:
        raise LinAlgError(f"{x.ndim}-dimensional array given. Array must be at least two-dimensional")
    if square and x.shape[-1] != x.shape[-2]:
        raise LinAlgError("Last 2 dimensions of the array must be square")
    return x


def _sym_lower(x: Any) -> Any:
    """The symmetric (Hermitian) matrix whose lower triangle is x's, what LAPACK's 'L'
    routines see: a complex diagonal's imaginary part is ignored."""
    below = ops.tril(x, -1)
    if dtypes.is_complex(x.dtype):
        on_diag = ops.diag_embed(ew.convert(ew.real(ops.diag_part(x)), x.dtype))
        return ew.add(ew.add(below, ops.mH(below)), on_diag)
    return ew.add(ops.tril(x), ops.mT(below))


def _hermitian_part(x: Any) -> Any:
    """``(x + x^H) / 2``: JAX's symmetrisation before a Hermitian decomposition."""
    return ew.mul(ew.add(x, ops.mH(x)), np.asarray(0.5, x.dtype))


def _broadcast_lead(a: Any, b: Any) -> tuple[Any, Any]:
    lead = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    return sh.broadcast_to(a, lead + a.shape[-2:]), sh.broadcast_to(b, lead + b.shape[-2:])


# --- solves and inverses -------------------------------------------------------------------------


def solve(a: Any, b: Any) -> Any:
    """``b`` is one vector when 1-d, otherwise a stack of (n, k) right-hand sides (numpy 2 rules)."""
    x, y = promote(a, b, to_inexact=True)
    x = _float_matrix(x, "solve")
    if y.ndim == 1:
        if y.shape[0] != x.shape[-1]:
            raise ShapeError(f"solve: b of shape {y.shape} does not match a of shape {x.shape}")
        xb = x
        yb = sh.broadcast_to(sh.reshape(y, (y.shape[0], 1)), x.shape[:-2] + (y.shape[0], 1))
        out = ops.solve(xb, yb)
        return sh.reshape(out, out.shape[:-1])
    xb, yb = _broadcast_lead(x, y)
    return ops.solve(xb, yb)


def inv(a: Any) -> Any:
    x = _float_matrix(a, "inv")
    n = x.shape[-1]
    return ops.solve(x, sh.broadcast_to(np.eye(n, dtype=x.dtype), x.shape))


def det(a: Any) -> Any:
    return ops.det(_float_matrix(a, "det"))


def slogdet(a: Any) -> SlogdetResult:
    sign, logdet = ops.slogdet_p.bind(_float_matrix(a, "slogdet"))
    return SlogdetResult(sign, logdet)


def matrix_power(a: Any, n: int) -> Any:
    x = asarray(a)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise LinAlgError("matrix_power: needs a stack of square matrices")
    if n < 0:
        x = inv(x)
        n = -n
    if n == 0:
        return sh.broadcast_to(np.eye(x.shape[-1], dtype=x.dtype), x.shape)
    result = None
    base = x
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result


def pinv(a: Any, rcond: Any = None, hermitian: bool = False, *, rtol: Any = None) -> Any:
    """V diag(1/s) U^T with singular values below ``rcond * max(s)`` dropped (numpy's rule)."""
    x = _float_matrix(a, "pinv", square=False)
    if rcond is None:
        rcond = 1e-15 if rtol is None else rtol
    u, s, vt = ops.svd_p.bind(x)
    cutoff = ew.mul(np.asarray(rcond, x.dtype), red.max(s, axis=-1, keepdims=True))
    large = ew.gt(s, cutoff)
    safe = ew.select(large, s, np.asarray(1, x.dtype))
    s_inv = ew.select(large, ew.div(np.asarray(1, x.dtype), safe), np.asarray(0, x.dtype))
    k = s.shape[-1]
    return ops.mm(ops.mT(vt), ew.mul(sh.reshape(s_inv, s.shape[:-1] + (k, 1)), ops.mT(u)))


def lstsq(a: Any, b: Any, rcond: Any = None) -> tuple[Any, Any, Any, Any]:
    """Least squares through the pseudo-inverse: (x, residuals, rank, singular values)."""
    x = _float_matrix(a, "lstsq", square=False)
    (y,) = promote(b, to_inexact=True)
    if x.ndim != 2:
        raise LinAlgError("lstsq: a must be two-dimensional")
    m, n = x.shape
    eps_cut = np.finfo(x.dtype).eps * max(m, n) if rcond is None else rcond
    sol = matmul(pinv(x, rcond=eps_cut), y)
    s = svdvals(x)
    rank = matrix_rank(x, tol=None if rcond is None else rcond * red.max(s))
    if m > n and not _is_concrete_rank_deficient(rank, n):
        r = ew.sub(matmul(x, sol), y)
        resid = red.sum(ew.mul(r, r), axis=0)
        resid = sh.reshape(resid, (1,)) if y.ndim == 1 else resid
    else:
        resid = np.zeros((0,), x.dtype)
    return sol, resid, rank, s


def _is_concrete_rank_deficient(rank: Any, n: int) -> bool:
    return isinstance(rank, np.ndarray) and int(rank) < n


def tensorsolve(a: Any, b: Any, axes: Any = None) -> Any:
    x = asarray(a)
    y = asarray(b)
    if axes is not None:
        moved = normalize_axes(tuple(axes), x.ndim, "tensorsolve")
        rest = [i for i in range(x.ndim) if i not in moved]
        x = sh.transpose(x, rest + list(moved))
    out_shape = x.shape[y.ndim:]
    n = int(np.prod(out_shape, dtype=np.int64))
    mat = sh.reshape(x, (int(np.prod(x.shape[:y.ndim], dtype=np.int64)), n))
    sol = solve(mat, sh.reshape(y, (y.size,)))
    return sh.reshape(sol, out_shape)


def tensorinv(a: Any, ind: int = 2) -> Any:
    x = asarray(a)
    out_shape = x.shape[ind:] + x.shape[:ind]
    rows = int(np.prod(x.shape[:ind], dtype=np.int64))
    return sh.reshape(inv(sh.reshape(x, (rows, x.size // max(rows, 1)))), out_shape)


# --- decompositions -------------------------------------------------------------------------------


def cholesky(a: Any, *, upper: bool = False, symmetrize_input: bool = True) -> Any:
    """The Cholesky factor of ``(a + a^H) / 2`` as JAX's (so the gradient is symmetric), or of
    the Hermitian matrix ``a``'s lower triangle gives with ``symmetrize_input=False``."""
    x = _float_matrix(a, "cholesky")
    low = ops.cholesky(_hermitian_part(x) if symmetrize_input else _sym_lower(x))
    return ops.mT(low) if upper else low


def eigh(a: Any, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of the Hermitian ``(a + a^H) / 2``, as JAX's
    (so its gradient is symmetric); with ``symmetrize_input=False``, of the Hermitian matrix
    whose ``UPLO`` triangle ('L', the default, or 'U') is ``a``'s, as numpy's, differentiated
    as that function of ``a`` (JAX's rule there assumes a Hermitian ``a``)."""
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"UPLO must be 'L' or 'U', got {UPLO!r}")
    x = _float_matrix(a, "eigh")
    if symmetrize_input:
        x = _hermitian_part(x)
    else:
        x = _sym_lower(x if UPLO != "U" else ops.mH(x))
    w, v = ops.eigh_p.bind(x)
    return EighResult(w, v)


def eigvalsh(a: Any, UPLO: str | None = "L", *, symmetrize_input: bool = True) -> Any:
    return eigh(a, UPLO, symmetrize_input).eigenvalues


class EigResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


def eig(a: Any) -> EigResult:
    """Eigenvalues and unit right eigenvectors (complex, as in JAX). Derivatives assume distinct
    eigenvalues; eigenvectors' derivatives are meaningful only for phase-invariant functions."""
    w, v = ops.eig_p.bind(_float_matrix(a, "eig"))
    return EigResult(w, v)


def eigvals(a: Any) -> Any:
    return eig(a).eigenvalues


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False) -> Any:
    """The SVD; with ``full_matrices=True`` (numpy's default) a non-square matrix gets square U
    and V^H, whose derivative is not defined (a full basis of the larger space is not unique:
    differentiate ``full_matrices=False``), as in JAX."""
    x = _float_matrix(a, "svd", square=False)
    if not compute_uv:
        return ops.svd_p.bind(x)[1]
    m, n = x.shape[-2:]
    return SVDResult(*ops.svd_p.bind(x, full_matrices=bool(full_matrices) and m != n))


def svdvals(x: Any) -> Any:
    return ops.svd_p.bind(_float_matrix(x, "svdvals", square=False))[1]


def qr(a: Any, mode: str = "reduced") -> Any:
    x = _float_matrix(a, "qr", square=False)
    m, n = x.shape[-2:]
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: unrecognized mode {mode!r}")
    q, r = ops.qr_p.bind(x, full_matrices=mode == "complete" and m > n)
    return r if mode == "r" else QRResult(q, r)


# --- norms and ranks ----------------------------------------------------------------------------------


def vector_norm(x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Any:  # noqa: A002
    (v,) = promote(x, to_inexact=True)
    if axis is None:
        flat = sh.reshape(v, (v.size,))
        out = _vector_norm(flat, (0,), ord, False)
        return sh.reshape(out, (1,) * v.ndim) if keepdims else out
    axes = normalize_axes(axis, v.ndim, "vector_norm")
    return _vector_norm(v, axes, ord, keepdims)


def _vector_norm(v: Any, axes: tuple[int, ...], ord: Any, keepdims: bool) -> Any:  # noqa: A002
    absx = ew.abs_p.bind(v)
    real = absx.dtype
    if ord is None or ord == 2:
        return ew.sqrt_p.bind(red.sum(abs_squared(v), axis=axes, keepdims=keepdims))
    if ord == np.inf:
        return red.max(absx, axis=axes, keepdims=keepdims)
    if ord == -np.inf:
        return red.min(absx, axis=axes, keepdims=keepdims)
    if ord == 0:
        nz = ew.convert(ew.ne_p.bind(v, np.asarray(0, v.dtype)), real)
        return red.sum(nz, axis=axes, keepdims=keepdims)
    if ord == 1:
        return red.sum(absx, axis=axes, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    p = np.asarray(ord, real)
    total = red.sum(ew.pow_(absx, p), axis=axes, keepdims=keepdims)
    return ew.pow_(total, ew.div(np.asarray(1, real), p))


def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:  # noqa: A002
    (m,) = promote(x, to_inexact=True)
    return _matrix_norm(m, (m.ndim - 2, m.ndim - 1), ord, keepdims)


def _matrix_norm(m: Any, axes: tuple[int, int], ord: Any, keepdims: bool) -> Any:  # noqa: A002
    r, c = axes
    if r == c:
        raise ValueError("Duplicate axes given.")
    if ord in (None, "fro", "f"):
        out = ew.sqrt_p.bind(red.sum(abs_squared(m), axis=axes))
    elif ord in (2, -2, "nuc"):
        s = svdvals(_to_last_two(m, r, c))
        out = red.max(s, axis=-1) if ord == 2 else red.min(s, axis=-1) if ord == -2 else red.sum(s, axis=-1)
    elif ord in (1, -1, np.inf, -np.inf):
        absm = ew.abs_p.bind(m)
        summed_axis, reduce_axis = (r, c) if ord in (1, -1) else (c, r)
        sums = red.sum(absm, axis=summed_axis, keepdims=True)
        pick = red.max if ord in (1, np.inf) else red.min
        out = sh.reshape(pick(sums, axis=reduce_axis, keepdims=True),
                         tuple(d for i, d in enumerate(m.shape) if i not in axes))
    else:
        raise ValueError(f"Invalid norm order {ord!r} for matrices")
    if keepdims:
        out = sh.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(m.shape)))
    return out


def _to_last_two(m: Any, r: int, c: int) -> Any:
    rest = [i for i in range(m.ndim) if i not in (r, c)]
    return sh.transpose(m, rest + [r, c])


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A002
    (v,) = promote(x, to_inexact=True)
    if axis is None:
        if ord is None or (ord in ("fro", "f") and v.ndim == 2):
            return vector_norm(v, keepdims=keepdims)
        if v.ndim == 1:
            return _vector_norm(v, (0,), ord, keepdims)
        if v.ndim == 2:
            return _matrix_norm(v, (0, 1), ord, keepdims)
        raise ValueError("Improper number of dimensions to norm.")
    axes = normalize_axes(axis, v.ndim, "norm")
    if len(axes) == 1:
        return _vector_norm(v, axes, ord, keepdims)
    if len(axes) == 2:
        return _matrix_norm(v, (axes[0], axes[1]), ord, keepdims)
    raise ValueError("Improper number of dimensions to norm.")


def cond(x: Any, p: Any = None) -> Any:
    m = _float_matrix(x, "cond", square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        s = svdvals(m)
        big, small = red.max(s, axis=-1), red.min(s, axis=-1)
        return ew.div(big, small) if p != -2 else ew.div(small, big)
    return ew.mul(norm(m, p, axis=(-2, -1)), norm(inv(m), p, axis=(-2, -1)))


def matrix_rank(A: Any, tol: Any = None, hermitian: bool = False, *, rtol: Any = None) -> Any:
    m = asarray(A)
    (m,) = promote(m, to_inexact=True)
    if m.ndim < 2:
        return ew.convert(red.any(ew.ne_p.bind(m, np.asarray(0, m.dtype))), dtypes.int64)
    s = svdvals(m)
    smax = red.max(s, axis=-1, keepdims=True)
    if tol is None:
        factor = max(m.shape[-2:]) * np.finfo(m.dtype).eps if rtol is None else rtol
        thresh = ew.mul(smax, np.asarray(factor, m.dtype))
    else:
        thresh = ew.convert(asarray(tol), m.dtype)
        if thresh.ndim:
            thresh = sh.reshape(thresh, thresh.shape + (1,))
    return red.sum(ew.convert(ew.gt(s, thresh), dtypes.int64), axis=-1)


# --- products and views ------------------------------------------------------------------------------


def multi_dot(arrays: Any, *, out: Any = None) -> Any:
    xs = [asarray(a) for a in arrays]
    if len(xs) < 2:
        raise ValueError("Expecting at least two arrays.")
    acc = xs[0]
    for x in xs[1:]:
        acc = matmul(acc, x)
    return acc


def matrix_transpose(x: Any, /) -> Any:
    v = asarray(x)
    if v.ndim < 2:
        raise ValueError("matrix_transpose: input must be at least 2-d")
    return swapaxes(v, -1, -2)


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1, precision: Any = None, preferred_element_type: Any = None) -> Any:
    from fungraph.numpy._linalg import _pair

    a, b = _pair(x1, x2, precision, preferred_element_type, "vecdot")
    if dtypes.is_complex(a.dtype):                                       # conjugates x1, as numpy
        a = ew.conj(a)
    return red.sum(ew.mul(a, b), axis=axis, dtype=a.dtype)


def trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    return red.sum(_diagonal(x, offset, -2, -1), axis=-1, dtype=dtype)


def diagonal(x: Any, /, *, offset: int = 0) -> Any:
    return _diagonal(x, offset, -2, -1)


def cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    return _cross(x1, x2, axis=axis)
