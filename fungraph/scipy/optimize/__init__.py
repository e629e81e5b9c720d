"""``fungraph.scipy.optimize``: ``minimize`` by BFGS or L-BFGS, as ``jax.scipy.optimize``, with
gradients from ``grad`` and every loop a ``lax.while_loop`` (so it runs under ``jit`` and
``vmap``). The strong-Wolfe ``line_search`` they share is in ``_line_search`` (JAX does not export
its own either)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import fungraph.numpy as fnp
from fungraph.scipy.optimize._bfgs import minimize_bfgs, minimize_lbfgs

__all__ = ["OptimizeResults", "minimize"]


class OptimizeResults(NamedTuple):
    """What ``minimize`` found: ``x`` and ``fun`` and ``jac`` there, ``success``, ``status`` (0
    converged; the method's codes otherwise), the inverse-Hessian estimate ``hess_inv`` (BFGS
    only), and the counts ``nfev``, ``njev``, ``nit``."""
    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any


def minimize(fun: Callable[..., Any], x0: Any, args: tuple = (), *, method: str, tol: float | None = None,
             options: Mapping[str, Any] | None = None) -> OptimizeResults:
    """Minimise the scalar ``fun(x, *args)`` over the 1-d ``x`` from ``x0`` by ``method``:
    ``'BFGS'`` or ``'l-bfgs-experimental-do-not-rely-on-this'`` (case-insensitive), with the
    method's ``options`` (``maxiter``, ``gtol``, ``norm``, ...). ``tol`` is accepted and unused,
    as in JAX."""
    options = {} if options is None else dict(options)
    if not isinstance(args, tuple):
        raise TypeError(f"args argument to fungraph.scipy.optimize.minimize must be a tuple, got {args}")

    def objective(x: Any) -> Any:
        return fun(x, *args)

    name = method.lower()
    if name == "bfgs":
        found = minimize_bfgs(objective, x0, **options)
        hess_inv = found.H_k
    elif name == "l-bfgs-experimental-do-not-rely-on-this":
        found = minimize_lbfgs(objective, x0, **options)
        hess_inv = None
    else:
        raise ValueError(f"Method {method} not recognized")
    return OptimizeResults(x=found.x_k, success=found.converged & fnp.logical_not(found.failed),
                           status=found.status, fun=found.f_k, jac=found.g_k, hess_inv=hess_inv, nfev=found.nfev,
                           njev=found.ngev, nit=found.k)
