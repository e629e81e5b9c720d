"""``gmres`` as ``jax.scipy.sparse.linalg.gmres``: restarted GMRES over a Krylov basis built by
Arnoldi steps with classical Gram-Schmidt, its least-squares problem solved at the end of each
restart ('batched') or kept triangular by Givens rotations as the basis grows
('incremental', which may stop early), all in ``lax.while_loop`` so it runs under ``jit``
and ``vmap``, and differentiated implicitly through ``lax.custom_linear_solve``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import lax
from fungraph import numpy as fnp
from fungraph.scipy.linalg import solve_triangular
from fungraph.scipy.sparse import _tree_vectors as tv
from fungraph.tree_util import tree_leaves, tree_map

Matvec = Callable[[Any], Any]


def _safe_normalize(x: Any, thresh: Any = None) -> tuple[Any, Any]:
    """``(x / |x|, |x|)``, or zeros and 0 where ``|x|`` is at most ``thresh`` (default: epsilon)."""
    size = tv.norm(x)
    dtype = fnp.result_type(*tree_leaves(x))
    if thresh is None:
        thresh = fnp.finfo(size.dtype).eps
    thresh = fnp.real(fnp.asarray(thresh).astype(dtype))
    use = size > thresh
    divisor = size.astype(dtype)
    unit = tree_map(lambda y: fnp.where(use, y / divisor, fnp.zeros((), y.dtype)), x)
    return unit, fnp.where(use, size, fnp.zeros((), size.dtype))


def _project_on_columns(basis: Any, v: Any) -> Any:
    """``basis^H v``: one overlap per column (the last axis of every leaf of ``basis``)."""
    def one(columns: Any, y: Any) -> Any:
        flat = fnp.reshape(fnp.conj(columns), (-1, columns.shape[-1]))
        return fnp.reshape(y, (-1,)) @ flat

    return sum(tree_leaves(tree_map(one, basis, v)))


def _arnoldi_step(k: Any, A: Matvec, M: Matvec, V: Any, H: Any) -> tuple[Any, Any, Any]:  # noqa: N803
    """Add the ``k``-th Krylov vector ``M(A(V[:, k]))``, orthonormalised against ``V`` by one pass
    of classical Gram-Schmidt (what JAX's two-pass loop runs), as column ``k + 1`` of ``V`` and
    its overlaps as row ``k`` of ``H``; ``breakdown`` when it lies in the span already."""
    dtype = fnp.result_type(*tree_leaves(V))
    eps = fnp.finfo(dtype).eps
    v = M(A(tree_map(lambda x: x[..., k], V)))
    _, v_norm_0 = _safe_normalize(v)
    h = _project_on_columns(V, v)
    v = tv.sub(v, tree_map(lambda X: X @ h, V))
    unit_v, v_norm_1 = _safe_normalize(v, thresh=eps * v_norm_0)
    V = tree_map(lambda X, y: X.at[..., k + 1].set(y), V, unit_v)  # noqa: N806
    h = h.at[k + 1].set(v_norm_1.astype(dtype))
    return V, H.at[k, :].set(h), v_norm_1 == 0.0


def _rotate(h: Any, i: Any, cs: Any, sn: Any) -> Any:
    x1, y1 = h[i], h[i + 1]
    return h.at[i].set(fnp.conj(cs) * x1 - fnp.conj(sn) * y1).at[i + 1].set(sn * x1 + cs * y1)


def _givens_rotation(a: Any, b: Any) -> tuple[Any, Any]:
    """``(cs, sn)`` of the rotation that zeroes ``b`` against ``a``."""
    b_zero = fnp.abs(b) == 0
    a_lt_b = fnp.abs(a) < fnp.abs(b)
    t = -fnp.where(a_lt_b, a, b) / fnp.where(a_lt_b, b, a)
    r = lax.rsqrt(1 + fnp.abs(t) ** 2).astype(t.dtype)
    cs = fnp.where(b_zero, 1, fnp.where(a_lt_b, r * t, r))
    sn = fnp.where(b_zero, 0, fnp.where(a_lt_b, r, r * t))
    return cs, sn


def _apply_givens_rotations(row: Any, givens: Any, k: Any) -> tuple[Any, Any]:
    """``row`` rotated by the ``k`` stored rotations, then by a new one that zeroes its entry ``k + 1``."""
    row = lax.fori_loop(0, k, lambda i, r: _rotate(r, i, givens[i, 0], givens[i, 1]), row)
    cs, sn = _givens_rotation(row[k], row[k + 1])
    return _rotate(row, k, cs, sn), givens.at[k, :].set(fnp.stack([cs, sn]).astype(givens.dtype))


def _start_basis(unit_residual: Any, restart: int) -> Any:
    return tree_map(lambda x: fnp.pad(x[..., None], ((0, 0),) * x.ndim + ((0, restart),)), unit_residual)


def _restart_incremental(A: Matvec, b: Any, x0: Any, unit_residual: Any, residual_norm: Any,  # noqa: N803
                         ptol: Any, restart: int, M: Matvec) -> tuple[Any, Any, Any]:  # noqa: N803
    V = _start_basis(unit_residual, restart)  # noqa: N806
    dtype = fnp.result_type(*tree_leaves(b))
    R = fnp.eye(restart, restart + 1, dtype=dtype)  # noqa: N806
    givens = fnp.zeros((restart, 2), dtype)
    beta = fnp.zeros(restart + 1, dtype).at[0].set(residual_norm.astype(dtype))

    def keep_going(carry: Any) -> Any:
        k, err, *_ = carry
        return (k < restart) & (err > ptol)

    def step(carry: Any) -> Any:
        k, _, V, R, beta, givens = carry  # noqa: N806
        V, H, _ = _arnoldi_step(k, A, M, V, R)  # noqa: N806
        row, givens = _apply_givens_rotations(H[k, :], givens, k)
        beta = _rotate(beta, k, givens[k, 0], givens[k, 1])
        return k + 1, fnp.abs(beta[k + 1]), V, R.at[k, :].set(row), beta, givens

    _, _, V, R, beta, _ = lax.while_loop(keep_going, step, (0, residual_norm, V, R, beta, givens))  # noqa: N806
    y = solve_triangular(R[:, :-1].T, beta[:-1])
    return _finish(A, b, x0, V, y, M)


def _restart_batched(A: Matvec, b: Any, x0: Any, unit_residual: Any, residual_norm: Any,  # noqa: N803
                     ptol: Any, restart: int, M: Matvec) -> tuple[Any, Any, Any]:  # noqa: N803
    V = _start_basis(unit_residual, restart)  # noqa: N806
    dtype = fnp.result_type(*tree_leaves(b))
    H = fnp.eye(restart, restart + 1, dtype=dtype)  # noqa: N806

    def step(carry: Any) -> Any:
        V, H, _, k = carry  # noqa: N806
        V, H, breakdown = _arnoldi_step(k, A, M, V, H)  # noqa: N806
        return V, H, breakdown, k + 1

    V, H, _, _ = lax.while_loop(lambda c: (c[3] < restart) & ~c[2], step, (V, H, fnp.asarray(False), 0))  # noqa: N806
    beta = fnp.zeros(restart + 1, H.dtype).at[0].set(residual_norm.astype(dtype))
    a = H.T
    y = fnp.linalg.solve(fnp.conj(a.T) @ a, fnp.conj(a.T) @ beta)
    return _finish(A, b, x0, V, y, M)


def _finish(A: Matvec, b: Any, x0: Any, V: Any, y: Any, M: Matvec) -> tuple[Any, Any, Any]:  # noqa: N803
    """The restart's solution ``x0 + V y`` and its preconditioned residual, normalised."""
    x = tv.add(x0, tree_map(lambda X: X[..., :-1] @ y, V))
    unit_residual, residual_norm = _safe_normalize(M(tv.sub(b, A(x))))
    return x, unit_residual, residual_norm


def _gmres_solve(A: Matvec, b: Any, x0: Any, atol: Any, ptol: Any, restart: int, maxiter: int,  # noqa: N803
                 M: Matvec, restart_fn: Callable[..., Any]) -> Any:  # noqa: N803
    """Restart from the last solution until the residual is under ``atol`` or ``maxiter`` restarts."""
    unit_residual, residual_norm = _safe_normalize(M(tv.sub(b, A(x0))))

    def step(value: Any) -> Any:
        x, k, unit_residual, residual_norm = value
        x, unit_residual, residual_norm = restart_fn(A, b, x, unit_residual, residual_norm, ptol, restart, M)
        return x, k + 1, unit_residual, residual_norm

    return lax.while_loop(lambda v: (v[1] < maxiter) & (v[3] > atol), step, (x0, 0, unit_residual, residual_norm))[0]


def gmres(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0, restart: int = 20,  # noqa: N803
          maxiter: int | None = None, M: Any = None, solve_method: str = "batched") -> tuple[Any, Any]:  # noqa: N803
    """``(x, info)`` with ``A x = b`` solved by GMRES restarted every ``restart`` Krylov vectors,
    at most ``maxiter`` times (default 10 times the size of ``b``), until
    ``|b - A x| <= max(tol |b|, atol)``; ``info`` is -1 when the result holds NaN, else 0.
    ``A`` (and the preconditioner ``M``) a matrix or a function on pytrees like ``b``."""
    b = tree_map(fnp.asarray, b)
    x0 = tree_map(fnp.zeros_like, b) if x0 is None else tree_map(fnp.asarray, x0)
    precondition = tv.identity if M is None else tv.as_matvec(M)
    matvec = tv.as_matvec(A)
    size = sum(int(np.size(leaf)) for leaf in tree_leaves(b))
    if maxiter is None:
        maxiter = 10 * size
    restart = min(restart, size)
    tv.check_start(x0, b)
    if solve_method == "incremental":
        restart_fn = _restart_incremental
    elif solve_method == "batched":
        restart_fn = _restart_batched
    else:
        raise ValueError(f"invalid solve_method {solve_method}, must be either 'incremental' or 'batched'")
    b_norm = tv.norm(b)
    atol = fnp.maximum(tol * b_norm, atol)
    ptol = tv.norm(precondition(b)) * fnp.minimum(1.0, atol / b_norm)

    def solve(A: Matvec, rhs: Any) -> Any:  # noqa: N803
        return _gmres_solve(A, rhs, x0, atol, ptol, restart, maxiter, precondition, restart_fn)

    x = lax.custom_linear_solve(matvec, b, solve=solve, transpose_solve=solve)
    return x, fnp.where(fnp.isnan(tv.norm(x)), -1, 0)
