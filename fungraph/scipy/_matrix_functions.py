"""``jax.scipy.linalg``'s Schur decomposition, matrix square root and polar decomposition,
composed of the eigen- and singular value decompositions that fungraph has (SciPy's LAPACK
Schur routines are not a run-time dependency).

The Schur form comes from an eigenbasis: ``A V = V diag(w)``, and the QR factorisation
``V = Q R`` gives ``Q^H A Q = R diag(w) R^-1``, upper triangular. For the real form, each
complex pair's eigenvectors are replaced by their real and imaginary parts, which span the
same real invariant plane, so ``Q^T A Q`` is quasi-upper-triangular. The eigenvalues keep
LAPACK's order (``geev`` reads them off the same Schur iteration ``gees`` runs), but ``Z``'s
column signs and the shape of each 2x2 block are those of this construction; the form needs a
diagonalisable matrix with a well-conditioned eigenbasis."""

from __future__ import annotations

from typing import Any

import numpy as np

import fungraph.numpy as fnp
from fungraph import dtypes
from fungraph.custom_derivatives import custom_jvp
from fungraph.numpy import linalg as nla
from fungraph.numpy._util import promote


def _square(a: Any, name: str) -> Any:
    (x,) = promote(a, to_inexact=True)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name}: expected a square matrix (or a stack of them), got shape {x.shape}")
    return x


def _mH(x: Any) -> Any:
    return fnp.conj(fnp.swapaxes(x, -1, -2))


def _complex_schur(x: Any) -> tuple[Any, Any]:
    w, v = nla.eig(x)
    z = nla.qr(v)[0]
    return fnp.triu(_mH(z) @ x.astype(z.dtype) @ z), z


def _standard_blocks(t: Any, pair_starts: Any) -> Any:
    """The rotation that gives each 2x2 block of the quasi-triangular ``t`` (one per complex
    pair, starting at the rows where ``pair_starts``) equal diagonal entries, as LAPACK's
    ``lanv2`` does (the smaller of the two such rotations)."""
    n = t.shape[-1]
    k = np.arange(n - 1)
    a, b, c, d = t[k, k], t[k, k + 1], t[k + 1, k], t[k + 1, k + 1]
    p, sigma = 0.5 * (a - d), b + c
    tau = fnp.hypot(sigma, a - d)
    safe_tau = fnp.where(tau > 0, tau, 1.0)
    cs = fnp.where(pair_starts, fnp.sqrt(0.5 * (1.0 + fnp.abs(sigma) / safe_tau)), 1.0)
    sn = fnp.where(pair_starts & (tau > 0), -(p / (safe_tau * cs)) * fnp.where(sigma >= 0, 1.0, -1.0), 0.0)
    diag = fnp.ones(n, t.dtype).at[k].multiply(cs).at[k + 1].multiply(fnp.where(pair_starts, cs, 1.0))
    return fnp.diag(diag).at[k, k + 1].set(-sn).at[k + 1, k].set(sn)


def _real_schur_2d(x: Any) -> tuple[Any, Any]:
    w, v = nla.eig(x)
    basis = fnp.where((fnp.imag(w) < 0)[None, :], fnp.imag(v), fnp.real(v)).astype(x.dtype)
    z = nla.qr(basis)[0]
    pair_starts = fnp.imag(w)[:-1] > 0
    t = z.T @ x @ z
    g = _standard_blocks(t, pair_starts)
    t, z = g.T @ t @ g, z @ g
    n = x.shape[-1]
    k = np.arange(n - 1)
    mean = 0.5 * (t[k, k] + t[k + 1, k + 1])
    t = t.at[k, k].set(fnp.where(pair_starts, mean, t[k, k]))
    t = t.at[k + 1, k + 1].set(fnp.where(pair_starts, mean, t[k + 1, k + 1]))
    keep = np.triu(np.ones((n, n), bool)) | (np.eye(n, k=-1, dtype=bool) & fnp.pad(pair_starts, (1, 0))[:, None])
    return fnp.where(keep, t, 0), z


def _real_schur(x: Any) -> tuple[Any, Any]:
    return fnp.vectorize(_real_schur_2d, signature="(n,n)->(n,n),(n,n)")(x)


def _no_derivative(name: str) -> Any:
    def rule(primals: tuple, tangents: tuple) -> Any:
        raise NotImplementedError(f"Differentiation rule for '{name}' not implemented")

    return rule


def schur(a: Any, output: str = "real") -> tuple[Any, Any]:
    """``A = Z T Z^H`` with ``Z`` unitary and ``T`` upper triangular (``output='complex'``) or,
    for a real ``A``, quasi-upper-triangular with a 2x2 block per complex pair (``'real'``).
    Not differentiable, as JAX's."""
    if output not in ("real", "complex"):
        raise ValueError(f"schur: output must be 'real' or 'complex', got {output!r}")
    x = _square(a, "schur")
    if output == "complex" and not dtypes.is_complex(x.dtype):
        x = x.astype(dtypes.complex_for(x.dtype))
    body = _complex_schur if dtypes.is_complex(x.dtype) else _real_schur
    decompose = custom_jvp(lambda m: body(m))
    decompose.defjvp(_no_derivative("schur"))
    return decompose(x)


def sqrtm(A: Any, blocksize: int = 1) -> Any:  # noqa: N803
    """The principal square root of ``A``, complex as JAX's (from the eigendecomposition; JAX
    takes it from the complex Schur form). Not differentiable, as JAX's."""
    if blocksize > 1:
        raise NotImplementedError("Blocked version is not implemented yet.")
    x = _square(A, "sqrtm")

    def root(m: Any) -> Any:
        w, v = nla.eig(m)
        w = fnp.where(fnp.imag(w) == 0, fnp.real(w).astype(w.dtype), w)  # -0j would take the other branch
        return (v * fnp.sqrt(w)[..., None, :]) @ nla.inv(v)

    decompose = custom_jvp(root)
    decompose.defjvp(_no_derivative("schur"))
    return decompose(x)


def polar(a: Any, side: str = "right", *, method: str = "qdwh", eps: float | None = None,
          max_iterations: int | None = None) -> tuple[Any, Any]:
    """``a = u p`` (``side='right'``, ``p`` n x n) or ``a = p u`` (``'left'``, ``p`` m x m), with
    ``u`` having orthonormal columns (rows when n > m) and ``p`` positive semidefinite, from
    the SVD for either ``method`` (JAX's 'qdwh' iteration gives the same factors for a
    full-rank ``a``); differentiable through the SVD."""
    if side not in ("right", "left"):
        raise ValueError("The argument `side` must be either 'right' or 'left'.")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"Unknown polar decomposition method {method}.")
    (x,) = promote(a, to_inexact=True)
    if x.ndim < 2:
        raise ValueError("The input `a` must be at least a 2-D array.")
    u, s, vh = nla.svd(x, full_matrices=False)
    s = s.astype(u.dtype)
    unitary = u @ vh
    if side == "right":
        return unitary, (_mH(vh) * s[..., None, :]) @ vh
    return unitary, (u * s[..., None, :]) @ _mH(u)


def _rsf2csf_2d(t: Any, z: Any) -> tuple[Any, Any]:
    """Split each 2x2 block of the real Schur form by the unitary rotation (JAX's and SciPy's)
    that brings its first eigenvalue (LAPACK's order) to the top, bottom block first."""
    dtype = dtypes.complex_for(fnp.result_type(t, z))
    t, z = t.astype(dtype), z.astype(dtype)
    n = t.shape[-1]
    eps = fnp.finfo(dtype).eps
    for m in range(n - 1, 0, -1):
        split = fnp.abs(t[m, m - 1]) > eps * (fnp.abs(t[m - 1, m - 1]) + fnp.abs(t[m, m]))
        mu = nla.eigvals(t[m - 1:m + 1, m - 1:m + 1]) - t[m, m]
        r = fnp.sqrt(fnp.abs(mu[0]) ** 2 + fnp.abs(t[m, m - 1]) ** 2).astype(dtype)
        safe_r = fnp.where(split, r, 1)
        c, s = mu[0] / safe_r, t[m, m - 1] / safe_r
        g = fnp.stack([fnp.stack([fnp.conj(c), s]), fnp.stack([-s, c])])
        rotated = t.at[m - 1:m + 1, m - 1:].set(g @ t[m - 1:m + 1, m - 1:])
        rotated = rotated.at[:m + 1, m - 1:m + 1].set(rotated[:m + 1, m - 1:m + 1] @ _mH(g))
        t = fnp.where(split, rotated, t).at[m, m - 1].set(0)
        z = fnp.where(split, z.at[:, m - 1:m + 1].set(z[:, m - 1:m + 1] @ _mH(g)), z)
    return t, z


def rsf2csf(T: Any, Z: Any, check_finite: bool = True) -> tuple[Any, Any]:  # noqa: N803
    """The complex Schur form ``(T, Z)`` of a real one (``T`` quasi-upper-triangular), both
    complex; leading axes of ``T`` and ``Z`` broadcast to a batch."""
    t, z = fnp.asarray(T), fnp.asarray(Z)
    if t.ndim < 2 or t.shape[-1] != t.shape[-2]:
        raise ValueError("Input 'T' must be square.")
    if z.ndim < 2 or z.shape[-1] != z.shape[-2]:
        raise ValueError("Input 'Z' must be square.")
    if t.shape[-1] != z.shape[-1]:
        raise ValueError(f"Input array shapes must match: Z: {z.shape} vs. T: {t.shape}")
    if t.shape[-1] == 1:
        dtype = dtypes.complex_for(fnp.result_type(t, z))
        return t.astype(dtype), z.astype(dtype)
    return fnp.vectorize(_rsf2csf_2d, signature="(n,n),(n,n)->(n,n),(n,n)")(t, z)


def _parlett(f: Any, t: Any) -> tuple[Any, Any]:
    """Parlett's recurrence (Golub and Van Loan, algorithm 11.1.1): ``F`` upper triangular with
    ``T F = F T`` from its diagonal, one superdiagonal at a time; with the smallest gap
    ``|T_jj - T_ii|`` met (the accuracy estimate)."""
    n = t.shape[-1]
    smallest = fnp.abs(t[0, 0])
    cols = np.arange(n)
    for p in range(1, n):
        i = np.arange(n - p)
        j = i + p
        between = (cols[None, :] > i[:, None]) & (cols[None, :] < j[:, None])
        coupling = fnp.sum(fnp.where(between, t[i, :] * f[:, j].T - f[i, :] * t[:, j].T, 0), axis=-1)
        s = t[i, j] * (f[j, j] - f[i, i]) + coupling
        gap = t[j, j] - t[i, i]
        f = f.at[i, j].set(fnp.where(gap != 0, s / fnp.where(gap != 0, gap, 1), s))
        smallest = fnp.minimum(smallest, fnp.min(fnp.abs(gap)))
    return f, smallest


def funm(A: Any, func: Any, disp: bool = True) -> Any:  # noqa: N803
    """``func`` of the square matrix ``A``, with ``func`` a function of the eigenvalues applied
    through the complex Schur form and Parlett's recurrence: complex, as JAX's; with ``disp``
    false, also an estimate of the relative error. Not differentiable (a Schur form), as JAX's."""
    a = fnp.asarray(A)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError("expected square array_like input")
    t, z = schur(a)
    t, z = rsf2csf(t, z)
    f = fnp.diag(func(fnp.diag(t))).astype(t.dtype)
    f, smallest = _parlett(f, t)
    f = z @ f @ _mH(z)
    if disp:
        return f
    tol = float(np.finfo(np.float32 if f.dtype == np.complex64 else np.float64).eps)
    smallest = fnp.where(smallest == 0.0, tol, smallest)
    bound = fnp.minimum(1, fnp.maximum(tol, (tol / smallest) * nla.norm(fnp.triu(t, 1), 1)))
    return f, fnp.where(fnp.any(fnp.isinf(f)), np.inf, bound)
