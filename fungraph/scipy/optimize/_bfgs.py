"""The quasi-Newton minimisers behind ``minimize``: BFGS (Wright and Nocedal's algorithm 6.1)
and the limited-memory L-BFGS (algorithm 7.5, with Sorber et al.'s extension to complex
variables), each one ``lax.while_loop`` over :func:`line_search` steps, as JAX's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import fungraph.numpy as fnp
from fungraph import lax
from fungraph.api import value_and_grad
from fungraph.numpy import linalg as nla
from fungraph.scipy.optimize._line_search import line_search


class BFGSResults(NamedTuple):
    """The BFGS loop's state; ``status``: 0 converged, 1 ``maxiter`` reached, 2 + the line
    search's status when it failed, -1 otherwise."""
    converged: Any
    failed: Any
    k: Any
    nfev: Any
    ngev: Any
    nhev: Any
    x_k: Any
    f_k: Any
    g_k: Any
    H_k: Any
    old_old_fval: Any
    status: Any
    line_search_status: Any


class LBFGSResults(NamedTuple):
    """The L-BFGS loop's state; ``status``: 0 nominal, 1 ``maxiter``, 2 ``maxfun``, 3 ``maxgrad``
    reached, 4 insufficient progress (``ftol``), 5 line search failed."""
    converged: Any
    failed: Any
    k: Any
    nfev: Any
    ngev: Any
    x_k: Any
    f_k: Any
    g_k: Any
    s_history: Any
    y_history: Any
    rho_history: Any
    gamma: Any
    status: Any
    ls_status: Any


def _vector(x0: Any, name: str) -> Any:
    x = fnp.asarray(x0)
    if x.ndim != 1:
        raise ValueError(f"{name}: x0 must be a 1-d array of shape (n,), got shape {x.shape}")
    return x


def minimize_bfgs(fun: Callable[[Any], Any], x0: Any, maxiter: int | None = None, norm: Any = np.inf,
                  gtol: float = 1e-5, line_search_maxiter: int = 10) -> BFGSResults:
    """Minimise ``fun`` from ``x0`` by BFGS until ``|grad|_norm < gtol``, the line search fails or
    ``maxiter`` (default 200 per variable) iterations pass."""
    x0 = _vector(x0, "minimize(method='BFGS')")
    if maxiter is None:
        maxiter = np.size(x0) * 200
    d = x0.shape[0]
    f_0, g_0 = value_and_grad(fun)(x0)
    zero = fnp.asarray(0)
    state = BFGSResults(converged=nla.norm(g_0, ord=norm) < gtol, failed=fnp.asarray(False), k=zero,
                        nfev=zero + 1, ngev=zero + 1, nhev=zero, x_k=x0, f_k=f_0, g_k=g_0,
                        H_k=fnp.eye(d, dtype=x0.dtype), old_old_fval=f_0 + nla.norm(g_0) / 2, status=zero,
                        line_search_status=zero)

    def keep_going(state: BFGSResults) -> Any:
        return ~state.converged & ~state.failed & (state.k < maxiter)

    def step(state: BFGSResults) -> BFGSResults:
        p_k = -fnp.dot(state.H_k, state.g_k)
        found = line_search(fun, state.x_k, p_k, old_fval=state.f_k, old_old_fval=state.old_old_fval,
                            gfk=state.g_k, maxiter=line_search_maxiter)
        s_k = found.a_k * p_k
        y_k = found.g_k - state.g_k
        rho_k = fnp.reciprocal(fnp.dot(y_k, s_k))
        w = fnp.eye(d, dtype=rho_k.dtype) - rho_k * (s_k[:, None] * y_k[None, :])
        h_next = w @ state.H_k @ w.T + rho_k * (s_k[:, None] * s_k[None, :])
        return state._replace(
            nfev=state.nfev + found.nfev, ngev=state.ngev + found.ngev, failed=found.failed,
            line_search_status=found.status, converged=nla.norm(found.g_k, ord=norm) < gtol, k=state.k + 1,
            x_k=state.x_k + s_k, f_k=found.f_k, g_k=found.g_k,
            H_k=fnp.where(fnp.isfinite(rho_k), h_next, state.H_k), old_old_fval=state.f_k)

    state = lax.while_loop(keep_going, step, state)
    status = fnp.where(state.converged, 0,
                       fnp.where(state.k == maxiter, 1,
                                 fnp.where(state.failed, 2 + state.line_search_status, -1)))
    return state._replace(status=status)


def _two_loop_recursion(state: LBFGSResults) -> Any:
    """The L-BFGS direction ``-H g`` from the stored pairs, newest first then oldest first."""
    dtype = state.rho_history.dtype
    size = state.rho_history.shape[0]
    used = fnp.where(state.k < size, state.k, size)

    def backward(j: Any, carry: tuple[Any, Any]) -> tuple[Any, Any]:
        q, alphas = carry
        i = size - 1 - j
        a_i = state.rho_history[i] * fnp.real(fnp.dot(fnp.conj(state.s_history[i]), q)).astype(dtype)
        return q - a_i * fnp.conj(state.y_history[i]), alphas.at[i].set(a_i)

    q, alphas = lax.fori_loop(0, used, backward, (-fnp.conj(state.g_k), fnp.zeros_like(state.rho_history)))

    def forward(j: Any, q: Any) -> Any:
        i = size - used + j
        b_i = state.rho_history[i] * fnp.real(fnp.dot(state.y_history[i], q)).astype(dtype)
        return q + (alphas[i] - b_i) * state.s_history[i]

    return lax.fori_loop(0, used, forward, state.gamma * q)


def _push(history: Any, new: Any) -> Any:
    """``history`` with its oldest row dropped and ``new`` appended."""
    return fnp.roll(history, -1, axis=0).at[-1].set(new)


def minimize_lbfgs(fun: Callable[[Any], Any], x0: Any, maxiter: float | None = None, norm: Any = np.inf,
                   maxcor: int = 10, ftol: float = 2.220446049250313e-09, gtol: float = 1e-05,
                   maxfun: float | None = None, maxgrad: float | None = None, maxls: int = 20) -> LBFGSResults:
    """Minimise ``fun`` from ``x0`` by L-BFGS keeping ``maxcor`` correction pairs; stops at
    ``|grad|_norm < gtol``, a decrease under ``ftol``, a failed line search or a budget."""
    x0 = _vector(x0, "minimize(method='l-bfgs-experimental-do-not-rely-on-this')")
    d = x0.shape[0]
    dtype = x0.dtype
    if maxiter is None and maxfun is None and maxgrad is None:
        maxiter = d * 200
    maxiter = np.inf if maxiter is None else maxiter
    maxfun = np.inf if maxfun is None else maxfun
    maxgrad = np.inf if maxgrad is None else maxgrad
    f_0, g_0 = value_and_grad(fun)(x0)
    zero = fnp.asarray(0)
    state = LBFGSResults(converged=fnp.asarray(False), failed=fnp.asarray(False), k=zero, nfev=zero + 1,
                         ngev=zero + 1, x_k=x0, f_k=f_0, g_k=g_0, s_history=fnp.zeros((maxcor, d), dtype),
                         y_history=fnp.zeros((maxcor, d), dtype), rho_history=fnp.zeros((maxcor,), dtype),
                         gamma=fnp.ones((), g_0.dtype), status=zero, ls_status=zero)

    def step(state: LBFGSResults) -> LBFGSResults:
        p_k = _two_loop_recursion(state)
        found = line_search(fun, state.x_k, p_k, old_fval=state.f_k, gfk=state.g_k, maxiter=maxls)
        s_k = fnp.asarray(found.a_k).astype(p_k.dtype) * p_k
        y_k = found.g_k - state.g_k
        rho_inv = fnp.real(fnp.dot(y_k, s_k))
        rho_k = fnp.reciprocal(rho_inv).astype(y_k.dtype)
        gamma = rho_inv / fnp.real(fnp.dot(fnp.conj(y_k), y_k))
        status = fnp.where(state.f_k - found.f_k < ftol, 4, 0)
        status = fnp.where(state.ngev >= maxgrad, 3, status)
        status = fnp.where(state.nfev >= maxfun, 2, status)
        status = fnp.where(state.k >= maxiter, 1, status)
        status = fnp.where(found.failed, 5, status)
        converged = nla.norm(found.g_k, ord=norm) < gtol
        return state._replace(
            converged=converged, failed=(status > 0) & ~converged, k=state.k + 1, nfev=state.nfev + found.nfev,
            ngev=state.ngev + found.ngev, x_k=(state.x_k + s_k).astype(state.x_k.dtype),
            f_k=found.f_k.astype(state.f_k.dtype), g_k=found.g_k.astype(state.g_k.dtype),
            s_history=_push(state.s_history, s_k), y_history=_push(state.y_history, y_k),
            rho_history=_push(state.rho_history, rho_k), gamma=gamma.astype(state.gamma.dtype),
            status=fnp.where(converged, 0, status), ls_status=found.status)

    return lax.while_loop(lambda s: ~s.converged & ~s.failed, step, state)
