"""``fungraph.scipy.sparse.linalg.cg``, as ``jax.scipy.sparse.linalg.cg``: the conjugate
gradient method for a symmetric positive definite operator given as a matrix or a function
(a matrix-free matvec) on pytrees, differentiated implicitly through ``lax.custom_linear_solve``
(the derivative solves the same system again instead of unrolling the iterations)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import lax
from fungraph import numpy as fnp
from fungraph.tree_util import tree_leaves, tree_map, tree_structure

__all__ = ["cg"]


def _vdot_real(x: Any, y: Any) -> Any:
    """The real part of ``<x, y>`` summed over the leaves of two pytrees."""
    def one(a: Any, b: Any) -> Any:
        out = fnp.vdot(fnp.real(a), fnp.real(b))
        if fnp.iscomplexobj(a) or fnp.iscomplexobj(b):
            out = out + fnp.vdot(fnp.imag(a), fnp.imag(b))
        return out

    return sum(tree_leaves(tree_map(one, x, y)))


def _as_matvec(A: Any) -> Callable[[Any], Any]:
    if callable(A):
        return A
    if hasattr(A, "ndim") and A.ndim == 2 or isinstance(A, np.ndarray) and A.ndim == 2:
        return lambda x: fnp.dot(A, x)
    raise ValueError(f"linear operator must be either a function or ndarray: {A}")


def _cg_solve(A: Callable[[Any], Any], b: Any, x0: Any, *, maxiter: int, tol: float, atol: float,
              M: Callable[[Any], Any]) -> Any:
    """The iterations: stop when ``|r|^2 <= max(tol^2 |b|^2, atol^2)`` or after ``maxiter``."""
    atol2 = fnp.maximum(fnp.square(tol) * _vdot_real(b, b), fnp.square(atol))
    r0 = tree_map(fnp.subtract, b, A(x0))
    p0 = z0 = M(r0)
    dtype = fnp.result_type(*tree_leaves(p0))
    gamma0 = _vdot_real(r0, z0).astype(dtype)

    def keep_going(value: Any) -> Any:
        _, r, gamma, _, k = value
        rs = gamma.real if M is _identity else _vdot_real(r, r)
        return (rs > atol2) & (k < maxiter)

    def step(value: Any) -> Any:
        x, r, gamma, p, k = value
        Ap = A(p)
        alpha = gamma / _vdot_real(p, Ap).astype(dtype)
        x = tree_map(lambda xi, pi: xi + alpha * pi, x, p)
        r = tree_map(lambda ri, api: ri - alpha * api, r, Ap)
        z = M(r)
        gamma_next = _vdot_real(r, z).astype(dtype)
        p = tree_map(lambda zi, pi: zi + (gamma_next / gamma) * pi, z, p)
        return x, r, gamma_next, p, k + 1

    x, *_ = lax.while_loop(keep_going, step, (x0, r0, gamma0, p0, 0))
    return x


def _identity(x: Any) -> Any:
    return x


def cg(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0, maxiter: int | None = None,
       M: Any = None) -> tuple[Any, None]:
    """``(x, None)`` with ``A x = b`` solved by conjugate gradients: ``A`` (and the
    preconditioner ``M``) a matrix or a function on pytrees like ``b``, symmetric positive
    definite; ``maxiter`` defaults to 10 times the size of ``b``. Differentiable in ``b`` and in
    what ``A`` closes over."""
    if x0 is None:
        x0 = tree_map(fnp.zeros_like, b)
    if maxiter is None:
        maxiter = 10 * sum(int(np.size(leaf)) for leaf in tree_leaves(b))
    matvec = _as_matvec(A)
    precondition = _identity if M is None else _as_matvec(M)
    if tree_structure(x0) != tree_structure(b):
        raise ValueError(f"x0 and b must have matching tree structure: {tree_structure(x0)} vs {tree_structure(b)}")
    if [fnp.shape(leaf) for leaf in tree_leaves(x0)] != [fnp.shape(leaf) for leaf in tree_leaves(b)]:
        raise ValueError("arrays in x0 and b must have matching shapes")
    solve = functools.partial(_cg_solve, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=precondition)
    symmetric = all(not fnp.iscomplexobj(leaf) for leaf in tree_leaves(b))
    x = lax.custom_linear_solve(matvec, b, solve=solve, transpose_solve=solve, symmetric=symmetric)
    return x, None
