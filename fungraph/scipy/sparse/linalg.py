"""``fungraph.scipy.sparse.linalg``: the Krylov solvers of ``jax.scipy.sparse.linalg`` (``cg``,
``bicgstab``, ``gmres``) for an operator given as a matrix or a function (a matrix-free matvec)
on pytrees, each differentiated implicitly through ``lax.custom_linear_solve`` (the derivative
solves the same system again instead of unrolling the iterations)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import lax
from fungraph import numpy as fnp
from fungraph.scipy.sparse import _tree_vectors as tv
from fungraph.scipy.sparse._gmres import gmres
from fungraph.tree_util import tree_leaves, tree_map

__all__ = ["bicgstab", "cg", "gmres"]


def _cg_solve(A: Callable[[Any], Any], b: Any, x0: Any, *, maxiter: int, tol: float, atol: float,  # noqa: N803
              M: Callable[[Any], Any]) -> Any:  # noqa: N803
    """The iterations: stop when ``|r|^2 <= max(tol^2 |b|^2, atol^2)`` or after ``maxiter``."""
    atol2 = fnp.maximum(fnp.square(tol) * tv.vdot_real(b, b), fnp.square(atol))
    r0 = tv.sub(b, A(x0))
    p0 = z0 = M(r0)
    dtype = fnp.result_type(*tree_leaves(p0))
    gamma0 = tv.vdot_real(r0, z0).astype(dtype)

    def keep_going(value: Any) -> Any:
        _, r, gamma, _, k = value
        rs = gamma.real if M is tv.identity else tv.vdot_real(r, r)
        return (rs > atol2) & (k < maxiter)

    def step(value: Any) -> Any:
        x, r, gamma, p, k = value
        Ap = A(p)  # noqa: N806
        alpha = gamma / tv.vdot_real(p, Ap).astype(dtype)
        x = tv.add(x, tv.scale(alpha, p))
        r = tv.sub(r, tv.scale(alpha, Ap))
        z = M(r)
        gamma_next = tv.vdot_real(r, z).astype(dtype)
        p = tv.add(z, tv.scale(gamma_next / gamma, p))
        return x, r, gamma_next, p, k + 1

    x, *_ = lax.while_loop(keep_going, step, (x0, r0, gamma0, p0, 0))
    return x


def _bicgstab_solve(A: Callable[[Any], Any], b: Any, x0: Any, *, maxiter: int, tol: float,  # noqa: N803
                    atol: float, M: Callable[[Any], Any]) -> Any:  # noqa: N803
    """BiCGSTAB (van der Vorst) with right preconditioning; stops as ``cg``, or at a breakdown
    (``rho``, ``omega`` or ``alpha`` zero: the step count turns negative, as in JAX)."""
    atol2 = fnp.maximum(fnp.square(tol) * tv.vdot_real(b, b), fnp.square(atol))

    def keep_going(value: Any) -> Any:
        _, r, *_, k = value
        return (tv.vdot_real(r, r) > atol2) & (k < maxiter) & (k >= 0)

    def step(value: Any) -> Any:
        x, r, rhat, alpha, omega, rho, p, q, k = value
        rho_next = tv.vdot(rhat, r)
        beta = rho_next / rho * alpha / omega
        p = tv.add(r, tv.scale(beta, tv.sub(p, tv.scale(omega, q))))
        phat = M(p)
        q = A(phat)
        alpha = rho_next / tv.vdot(rhat, q)
        s = tv.sub(r, tv.scale(alpha, q))
        exit_early = tv.vdot_real(s, s) < atol2
        shat = M(s)
        t = A(shat)
        omega = tv.vdot(t, s) / tv.vdot(t, t)
        half_step = tv.add(x, tv.scale(alpha, phat))
        x = tree_map(functools.partial(fnp.where, exit_early), half_step, tv.add(half_step, tv.scale(omega, shat)))
        r = tree_map(functools.partial(fnp.where, exit_early), s, tv.sub(s, tv.scale(omega, t)))
        k = fnp.where((omega == 0) | (alpha == 0), -11, k + 1)
        k = fnp.where(rho_next == 0, -10, k)
        return x, r, rhat, alpha, omega, rho_next, p, q, k

    r0 = tv.sub(b, A(x0))
    one = fnp.ones((), fnp.result_type(*tree_leaves(b)))
    return lax.while_loop(keep_going, step, (x0, r0, r0, one, one, one, r0, r0, 0))[0]


def _isolve(solver: Callable[..., Any], A: Any, b: Any, x0: Any, *, tol: float, atol: float,  # noqa: N803
            maxiter: int | None, M: Any, check_symmetric: bool) -> tuple[Any, None]:  # noqa: N803
    """``solver`` wrapped for implicit differentiation: the transposed system is solved by it too."""
    b = tree_map(fnp.asarray, b)
    x0 = tree_map(fnp.zeros_like, b) if x0 is None else tree_map(fnp.asarray, x0)
    if maxiter is None:
        maxiter = 10 * sum(int(np.size(leaf)) for leaf in tree_leaves(b))
    matvec = tv.as_matvec(A)
    precondition = tv.identity if M is None else tv.as_matvec(M)
    tv.check_start(x0, b)
    solve = functools.partial(solver, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=precondition)
    symmetric = check_symmetric and all(not fnp.iscomplexobj(leaf) for leaf in tree_leaves(b))
    x = lax.custom_linear_solve(matvec, b, solve=solve, transpose_solve=solve, symmetric=symmetric)
    return x, None


def cg(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0, maxiter: int | None = None,  # noqa: N803
       M: Any = None) -> tuple[Any, None]:  # noqa: N803
    """``(x, None)`` with ``A x = b`` solved by conjugate gradients: ``A`` (and the
    preconditioner ``M``) a matrix or a function on pytrees like ``b``, symmetric positive
    definite; ``maxiter`` defaults to 10 times the size of ``b``. Differentiable in ``b`` and in
    what ``A`` closes over."""
    return _isolve(_cg_solve, A, b, x0, tol=tol, atol=atol, maxiter=maxiter, M=M, check_symmetric=True)


def bicgstab(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0,  # noqa: N803
             maxiter: int | None = None, M: Any = None) -> tuple[Any, None]:  # noqa: N803
    """``(x, None)`` with ``A x = b`` solved by BiCGSTAB for a general (non-symmetric) ``A``;
    arguments and derivatives as :func:`cg`'s."""
    return _isolve(_bicgstab_solve, A, b, x0, tol=tol, atol=atol, maxiter=maxiter, M=M, check_symmetric=False)
