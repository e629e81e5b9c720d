"""``eigh_tridiagonal``: the eigenvalues of a real symmetric (or complex Hermitian) tridiagonal
matrix by bisection on Sturm sequence counts, all eigenvalues at once, and the eigenvectors by
inverse iteration from random vectors (clusters of close eigenvalues orthogonalised), as
``jax.scipy.linalg.eigh_tridiagonal``; every loop a ``lax`` loop, so it runs under ``jit`` and
``vmap``. Not differentiable (JAX's derivative is through the bisection's arithmetic)."""

from __future__ import annotations

from typing import Any

import numpy as np

import fungraph.numpy as fnp
from fungraph import dtypes, lax
from fungraph import random as fr
from fungraph.custom_derivatives import custom_jvp
from fungraph.numpy import linalg as nla


def _sturm_counts(alpha: Any, beta_sq: Any, pivmin: Any, alpha0_perturbation: Any, x: Any) -> Any:
    """How many eigenvalues lie below each shift in ``x`` (the negative pivots of ``T - x I``)."""
    q = alpha[0] - x
    count = (q < 0).astype(np.int32)
    q = fnp.where(alpha[0] == x, alpha0_perturbation, q)

    def step(i: Any, carry: tuple[Any, Any]) -> tuple[Any, Any]:
        q, count = carry
        q = alpha[i] - beta_sq[i - 1] / q - x
        small = q <= pivmin
        return fnp.where(small, fnp.minimum(q, -pivmin), q), count + small.astype(np.int32)

    return lax.fori_loop(1, alpha.shape[0], step, (q, count))[1]


def _tridiagonal_solve(dl: Any, d: Any, du: Any, b: Any, tiny: Any) -> Any:
    """Solve ``T x = b`` for the tridiagonal ``T`` (sub ``dl[1:]``, diagonal ``d``, super
    ``du[:-1]``), one system per row of the (k, n) arguments, by elimination with row
    interchanges (LAPACK's ``gttrf``); a zero pivot becomes ``tiny`` so a singular ``T - lambda I``
    still gives a finite (large) solution, as inverse iteration needs."""
    n = d.shape[-1]
    if n == 1:
        return b / fnp.where(d == 0, tiny, d)
    zero = fnp.zeros_like(d[:, 0])

    def forward(row: tuple, i: Any) -> tuple[tuple, tuple]:
        c0, c1, c2, cb = row
        n0, n1, n2, nb = dl[:, i + 1], d[:, i + 1], du[:, i + 1], b[:, i + 1]
        swap = fnp.abs(c0) < fnp.abs(n0)
        p0, p1, p2, pb = (fnp.where(swap, n, c) for n, c in ((n0, c0), (n1, c1), (n2, c2), (nb, cb)))
        o0, o1, o2, ob = (fnp.where(swap, c, n) for n, c in ((n0, c0), (n1, c1), (n2, c2), (nb, cb)))
        p0 = fnp.where(p0 == 0, tiny, p0)
        factor = o0 / p0
        return (o1 - factor * p1, o2 - factor * p2, zero, ob - factor * pb), (p0, p1, p2, pb)

    last, rows = lax.scan(forward, (d[:, 0], du[:, 0], zero, b[:, 0]), fnp.arange(n - 1))
    u0, u1, u2, y = (fnp.concatenate([r, fnp.expand_dims(e, 0)], axis=0) for r, e in zip(rows, last))
    u0 = fnp.where(u0 == 0, tiny, u0)

    def backward(carry: tuple[Any, Any], row: tuple) -> tuple[tuple[Any, Any], Any]:
        x1, x2 = carry
        p0, p1, p2, pb = row
        x = (pb - p1 * x1 - p2 * x2) / p0
        return (x, x1), x

    _, xs = lax.scan(backward, (zero, zero), (u0, u1, u2, y), reverse=True)
    return fnp.swapaxes(xs, 0, 1)


def _orthogonalize_clusters(v: Any, starts: Any, ends: Any, count: Any) -> Any:
    """Replace each run ``v[start:end]`` of vectors for close eigenvalues by an orthonormal
    basis of their span (QR)."""
    k, n = v.shape
    rows = fnp.arange(k)

    def one(i: Any, v: Any) -> Any:
        start, end = starts[i], ends[i]
        block = lax.dynamic_slice(fnp.pad(v, ((0, k), (0, 0))), (start, 0), (k, n))
        mask = (rows < end - start).astype(v.dtype)
        q, _ = nla.qr((block * mask[:, None]).T)
        placed = lax.dynamic_update_slice(fnp.zeros((2 * k, n), v.dtype), q.T * mask[:, None], (start, 0))[:k]
        return fnp.where(((rows >= start) & (rows < end))[:, None], placed, v)

    return lax.fori_loop(0, count, one, v)


def _eigenvectors(alpha: Any, beta: Any, eigvals: Any, start: Any) -> Any:
    """Inverse iteration from the rows of ``start``, all eigenvectors in parallel, until no norm
    grows by 10% (at most 5 steps, as LAPACK's ``stein``); the vectors are the rows of the result."""
    n, k = alpha.shape[0], eigvals.shape[0]
    dtype = fnp.result_type(alpha, beta)
    gap = eigvals[1:] - eigvals[:-1]
    t_norm = fnp.maximum(fnp.abs(eigvals[0]), fnp.abs(eigvals[-1]))
    close = gap < np.sqrt(np.finfo(eigvals.dtype).eps) * t_norm
    left = fnp.pad(close, (1, 0), constant_values=False)
    right = fnp.pad(close, (0, 1), constant_values=False)
    starts = fnp.nonzero(~left & right, size=k // 2 + 1)[0]
    ends = fnp.nonzero(left & ~right, size=k // 2 + 1)[0] + 1
    count = fnp.sum(~left & right)
    v = start.astype(dtype)
    v = v / nla.norm(v, axis=-1, keepdims=True).astype(dtype)
    dl = fnp.broadcast_to(fnp.pad(fnp.conj(beta), (1, 0)).astype(dtype), (k, n))
    du = fnp.broadcast_to(fnp.pad(beta, (0, 1)).astype(dtype), (k, n))
    shifted = (alpha[None, :] - eigvals[:, None]).astype(dtype)
    tiny = (np.finfo(eigvals.dtype).eps * fnp.maximum(t_norm, np.finfo(eigvals.dtype).tiny)).astype(dtype)

    def step(state: tuple) -> tuple:
        i, v, norms, _ = state
        v_new = _tridiagonal_solve(dl, shifted, du, v, tiny)
        new_norms = nla.norm(v_new, axis=-1, keepdims=True)
        v_new = _orthogonalize_clusters(v_new / new_norms.astype(dtype), starts, ends, count)
        return i + 1, v_new, fnp.squeeze(new_norms, -1), norms

    def keep_going(state: tuple) -> Any:
        i, _, norms, old = state
        return (i < 5) & fnp.any(norms >= 1.1 * old)

    ones = fnp.ones(k, eigvals.dtype)
    return lax.while_loop(keep_going, step, (0, v, ones, fnp.zeros_like(ones)))[1]


def _targets(n: int, select: str, select_range: Any) -> np.ndarray:
    """The indices (in ascending order) of the eigenvalues ``select`` asks for."""
    if select == "a":
        return np.arange(n, dtype=np.int32)
    if select == "i":
        if select_range is None:
            raise ValueError("for select='i', select_range must be specified.")
        if select_range[0] > select_range[1]:
            raise ValueError("Got empty index range in select_range.")
        return np.arange(select_range[0], select_range[1] + 1, dtype=np.int32)
    if select == "v":
        raise NotImplementedError("eigh_tridiagonal(..., select='v') is not implemented")
    raise ValueError("'select must have a value in {'a', 'i', 'v'}.")


def _eigenvalues(alpha: Any, beta: Any, targets: np.ndarray, tol: Any) -> Any:
    """Bisection for the eigenvalues of index ``targets``, all at once, from the Gershgorin
    interval (widened slightly) until each bracket is within the tolerance."""
    if dtypes.is_complex(alpha.dtype):
        alpha = fnp.real(alpha)
        beta_sq = fnp.real(beta * fnp.conj(beta))
        beta_abs = fnp.sqrt(beta_sq)
    else:
        beta_abs, beta_sq = fnp.abs(beta), fnp.square(beta)
    row_sums = fnp.concatenate([beta_abs[:1], beta_abs[:-1] + beta_abs[1:], beta_abs[-1:]])
    est_max = fnp.max(alpha + row_sums)
    est_min = fnp.min(alpha - row_sums)
    t_norm = fnp.maximum(fnp.abs(est_min), fnp.abs(est_max))
    finfo = np.finfo(alpha.dtype)
    one = np.ones([], alpha.dtype)
    safemin = np.maximum(one / finfo.max, (one + finfo.eps) * finfo.tiny)
    pivmin = safemin * fnp.maximum(1, fnp.max(beta_sq))
    alpha0_perturbation = fnp.square(finfo.eps * beta_abs[0])
    abs_tol = finfo.eps * t_norm
    if tol is not None:
        abs_tol = fnp.maximum(tol, abs_tol)
    n = alpha.shape[0]
    slack = fnp.asarray(n, alpha.dtype) * 2.1 * finfo.eps * t_norm
    shape = targets.shape
    lower = fnp.broadcast_to(est_min - slack - 2 * 2.1 * pivmin, shape)
    upper = fnp.broadcast_to(est_max + slack + 2.1 * pivmin, shape)
    pivmin = fnp.broadcast_to(pivmin, shape)
    alpha0_perturbation = fnp.broadcast_to(alpha0_perturbation, shape)

    def body(state: tuple) -> tuple:
        i, lower, mid, upper = state
        counts = _sturm_counts(alpha, beta_sq, pivmin, alpha0_perturbation, mid)
        lower = fnp.where(counts <= targets, mid, lower)
        upper = fnp.where(counts > targets, mid, upper)
        return i + 1, lower, 0.5 * (lower + upper), upper

    def keep_going(state: tuple) -> Any:
        i, lower, _, upper = state
        return (i < finfo.nmant + 1) & (abs_tol < fnp.max(upper - lower))

    return lax.while_loop(keep_going, body, (0, lower, 0.5 * (upper + lower), upper))[2]


def _refuse(primals: tuple, tangents: tuple) -> Any:
    raise NotImplementedError("Differentiation rule for 'eigh_tridiagonal' not implemented")


def eigh_tridiagonal(d: Any, e: Any, *, eigvals_only: bool = False, select: str = "a",
                     select_range: tuple[float, float] | None = None, tol: float | None = None,
                     key: Any = None) -> Any:
    """The eigenvalues (ascending) of the tridiagonal matrix with diagonal ``d`` and
    off-diagonal ``e`` (all, or those with index in ``select_range`` for ``select='i'``), and
    unless ``eigvals_only`` the eigenvectors (columns) from inverse iteration started at normal
    vectors drawn with ``key`` (default ``random.key(42)``, JAX's)."""
    alpha, beta = fnp.asarray(d), fnp.asarray(e)
    if alpha.dtype != beta.dtype:
        raise TypeError(f"diagonal and off-diagonal values must have same dtype, got {alpha.dtype} and {beta.dtype}")
    if alpha.dtype not in (np.float32, np.float64, np.complex64, np.complex128):
        raise TypeError("Only float32 and float64 inputs are supported as inputs to "
                        f"fungraph.scipy.linalg.eigh_tridiagonal, got {alpha.dtype} and {beta.dtype}")
    if alpha.ndim != 1 or beta.shape != (max(alpha.shape[0] - 1, 0),):
        raise ValueError(f"eigh_tridiagonal: expected d of shape (n,) and e of shape (n - 1,), got {alpha.shape} "
                         f"and {beta.shape}")
    n = alpha.shape[0]
    if n <= 1:
        values = fnp.real(alpha)
        return values if eigvals_only else (values, fnp.eye(n, dtype=alpha.dtype))
    targets = _targets(n, select, select_range)
    eigenvalues = custom_jvp(lambda a, b: _eigenvalues(a, b, targets, tol))
    eigenvalues.defjvp(_refuse)
    values = eigenvalues(alpha, beta)
    if eigvals_only:
        return values
    # drawn outside the custom_jvp body: random bits staged inside one are wrong in 32-bit mode
    start = fr.normal(fr.PRNGKey(42) if key is None else key, (targets.size, n), dtype=np.finfo(alpha.dtype).dtype)
    vectors = custom_jvp(lambda a, b, w, s: _eigenvectors(fnp.real(a), b, w, s))
    vectors.defjvp(_refuse)
    return values, fnp.swapaxes(vectors(alpha, beta, values, start), 0, 1)
