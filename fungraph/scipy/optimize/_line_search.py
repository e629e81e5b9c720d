"""The inexact line search of ``jax.scipy.optimize``: Wright and Nocedal's algorithm 3.5 (strong
Wolfe conditions) with its zoom (algorithm 3.6), written with ``lax.while_loop`` and
``where`` so it runs under ``jit`` and ``vmap``, and takes the same steps as JAX's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import fungraph.numpy as fnp
from fungraph import lax
from fungraph.api import value_and_grad
from fungraph.numpy._util import promote


class _ZoomState(NamedTuple):
    done: Any
    failed: Any
    j: Any
    a_lo: Any
    phi_lo: Any
    dphi_lo: Any
    a_hi: Any
    phi_hi: Any
    dphi_hi: Any
    a_rec: Any
    phi_rec: Any
    a_star: Any
    phi_star: Any
    dphi_star: Any
    g_star: Any
    nfev: Any
    ngev: Any


class _LineSearchState(NamedTuple):
    done: Any
    failed: Any
    i: Any
    a_i1: Any
    phi_i1: Any
    dphi_i1: Any
    nfev: Any
    ngev: Any
    a_star: Any
    phi_star: Any
    dphi_star: Any
    g_star: Any


class LineSearchResults(NamedTuple):
    """What :func:`line_search` found: ``a_k`` the step, ``f_k``/``g_k`` the value and gradient
    there; ``status`` 0 (passed), 1 (zoom failed) or 3 (``maxiter`` reached)."""
    failed: Any
    nit: Any
    nfev: Any
    ngev: Any
    k: Any
    a_k: Any
    f_k: Any
    g_k: Any
    status: Any


def _cubicmin(a: Any, fa: Any, fpa: Any, b: Any, fb: Any, c: Any, fc: Any) -> Any:
    """The minimiser of the cubic through ``(a, fa)`` with slope ``fpa``, ``(b, fb)`` and ``(c, fc)``."""
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    d2b = fb - fa - fpa * db
    d2c = fc - fa - fpa * dc
    cubic = (dc ** 2 * d2b - db ** 2 * d2c) / denom
    quad = (-dc ** 3 * d2b + db ** 3 * d2c) / denom
    radical = quad * quad - 3.0 * cubic * fpa
    return a + (-quad + fnp.sqrt(radical)) / (3.0 * cubic)


def _quadmin(a: Any, fa: Any, fpa: Any, b: Any, fb: Any) -> Any:
    """The minimiser of the parabola through ``(a, fa)`` with slope ``fpa`` and ``(b, fb)``."""
    db = b - a
    curvature = (fb - fa - fpa * db) / (db ** 2)
    return a - fpa / (2.0 * curvature)


def _replace_where(state: Any, mask: Any, **new: Any) -> Any:
    """``state`` with each named field taken from ``new`` where ``mask`` holds."""
    return state._replace(**{k: fnp.where(mask, v, getattr(state, k)) for k, v in new.items()})


def _zoom(restricted: Callable, wolfe_one: Callable, wolfe_two: Callable, a_lo: Any, phi_lo: Any, dphi_lo: Any,
          a_hi: Any, phi_hi: Any, dphi_hi: Any, g_0: Any, pass_through: Any) -> _ZoomState:
    """Shrink ``[a_lo, a_hi]`` by cubic, quadratic or bisection steps until a point meets both
    Wolfe conditions (``done``), the interval collapses or 30 steps pass (``failed``); runs no
    step where ``pass_through``."""
    int_zero = fnp.asarray(0)
    state = _ZoomState(done=fnp.asarray(False), failed=fnp.asarray(False), j=int_zero, a_lo=a_lo, phi_lo=phi_lo,
                       dphi_lo=dphi_lo, a_hi=a_hi, phi_hi=phi_hi, dphi_hi=dphi_hi, a_rec=(a_lo + a_hi) / 2.0,
                       phi_rec=(phi_lo + phi_hi) / 2.0, a_star=fnp.ones_like(a_lo), phi_star=phi_lo,
                       dphi_star=dphi_lo, g_star=g_0, nfev=int_zero, ngev=int_zero)
    threshold = 1e-5 if fnp.finfo(a_lo.dtype).bits < 64 else 1e-10

    def body(state: _ZoomState) -> _ZoomState:
        dalpha = state.a_hi - state.a_lo
        low = fnp.minimum(state.a_hi, state.a_lo)
        high = fnp.maximum(state.a_hi, state.a_lo)
        cchk, qchk = 0.2 * dalpha, 0.1 * dalpha
        state = state._replace(failed=state.failed | (dalpha <= threshold))
        a_cubic = _cubicmin(state.a_lo, state.phi_lo, state.dphi_lo, state.a_hi, state.phi_hi, state.a_rec,
                            state.phi_rec)
        use_cubic = (state.j > 0) & (a_cubic > low + cchk) & (a_cubic < high - cchk)
        a_quad = _quadmin(state.a_lo, state.phi_lo, state.dphi_lo, state.a_hi, state.phi_hi)
        use_quad = ~use_cubic & (a_quad > low + qchk) & (a_quad < high - qchk)
        use_bisection = ~use_cubic & ~use_quad
        a_j = fnp.where(use_cubic, a_cubic, state.a_rec)
        a_j = fnp.where(use_quad, a_quad, a_j)
        a_j = fnp.where(use_bisection, (state.a_lo + state.a_hi) / 2.0, a_j)
        phi_j, dphi_j, g_j = restricted(a_j)
        phi_j = phi_j.astype(state.phi_lo.dtype)
        dphi_j = dphi_j.astype(state.dphi_lo.dtype)
        g_j = g_j.astype(state.g_star.dtype)
        state = state._replace(nfev=state.nfev + 1, ngev=state.ngev + 1)

        hi_to_j = wolfe_one(a_j, phi_j) | (phi_j >= state.phi_lo)
        star_to_j = wolfe_two(dphi_j) & ~hi_to_j
        hi_to_lo = (dphi_j * (state.a_hi - state.a_lo) >= 0.0) & ~hi_to_j & ~star_to_j
        lo_to_j = ~hi_to_j & ~star_to_j

        state = _replace_where(state, hi_to_j, a_hi=a_j, phi_hi=phi_j, dphi_hi=dphi_j, a_rec=state.a_hi,
                               phi_rec=state.phi_hi)
        state = _replace_where(state._replace(done=star_to_j | state.done), star_to_j, a_star=a_j, phi_star=phi_j,
                               dphi_star=dphi_j, g_star=g_j)
        state = _replace_where(state, hi_to_lo, a_hi=state.a_lo, phi_hi=state.phi_lo, dphi_hi=state.dphi_lo,
                               a_rec=state.a_hi, phi_rec=state.phi_hi)
        state = _replace_where(state, lo_to_j & ~hi_to_lo, a_rec=state.a_lo, phi_rec=state.phi_lo)
        state = _replace_where(state, lo_to_j, a_lo=a_j, phi_lo=phi_j, dphi_lo=dphi_j)
        state = state._replace(j=state.j + 1)
        return state._replace(failed=state.failed | (state.j >= 30))

    return lax.while_loop(lambda s: ~s.done & ~pass_through & ~s.failed, body, state)


def line_search(f: Callable[[Any], Any], xk: Any, pk: Any, old_fval: Any = None, old_old_fval: Any = None,
                gfk: Any = None, c1: float = 1e-4, c2: float = 0.9, maxiter: int = 20) -> LineSearchResults:
    """A step along the descent direction ``pk`` from ``xk`` meeting the strong Wolfe
    conditions (constants ``c1``, ``c2``), as JAX's: the first trial step comes from
    ``old_old_fval`` when given (else 1), then doubles until a bracket is found and zoomed."""
    xk, pk = promote(xk, pk, to_inexact=True)
    dtype = pk.dtype

    def restricted(t: Any) -> tuple[Any, Any, Any]:
        phi, g = value_and_grad(f)(xk + fnp.asarray(t, dtype) * pk)
        return phi, fnp.real(fnp.dot(g, pk)), g

    fresh = old_fval is None or gfk is None
    if fresh:
        phi_0, dphi_0, gfk = restricted(0.0)
    else:
        phi_0 = fnp.asarray(old_fval)
        dphi_0 = fnp.real(fnp.dot(gfk, pk))
    if old_old_fval is not None:
        candidate = 1.01 * 2 * (phi_0 - old_old_fval) / dphi_0
        start_value = fnp.where(candidate > 1, 1.0, candidate)
    else:
        start_value = fnp.ones((), fnp.real(dphi_0).dtype)
    step_dtype = fnp.result_type(start_value, phi_0, dphi_0)

    def wolfe_one(a_i: Any, phi_i: Any) -> Any:
        return phi_i > phi_0 + c1 * a_i * dphi_0

    def wolfe_two(dphi_i: Any) -> Any:
        return fnp.abs(dphi_i) <= -c2 * dphi_0

    count = fnp.asarray(1 if fresh else 0)
    zero_step = fnp.zeros((), step_dtype)
    state = _LineSearchState(done=fnp.asarray(False), failed=fnp.asarray(False), i=fnp.asarray(1),
                             a_i1=zero_step, phi_i1=phi_0, dphi_i1=dphi_0, nfev=count, ngev=count,
                             a_star=zero_step, phi_star=phi_0, dphi_star=dphi_0, g_star=gfk)

    def body(state: _LineSearchState) -> _LineSearchState:
        a_i = fnp.where(state.i == 1, start_value, state.a_i1 * 2.0).astype(step_dtype)
        phi_i, dphi_i, g_i = restricted(a_i)
        state = state._replace(nfev=state.nfev + 1, ngev=state.ngev + 1)
        star_to_zoom1 = wolfe_one(a_i, phi_i) | ((phi_i >= state.phi_i1) & (state.i > 1))
        star_to_i = wolfe_two(dphi_i) & ~star_to_zoom1
        star_to_zoom2 = (dphi_i >= 0.0) & ~star_to_zoom1 & ~star_to_i
        zoom1 = _zoom(restricted, wolfe_one, wolfe_two, state.a_i1, state.phi_i1, state.dphi_i1, a_i, phi_i, dphi_i,
                      gfk, ~star_to_zoom1)
        state = state._replace(nfev=state.nfev + zoom1.nfev, ngev=state.ngev + zoom1.ngev)
        zoom2 = _zoom(restricted, wolfe_one, wolfe_two, a_i, phi_i, dphi_i, state.a_i1, state.phi_i1, state.dphi_i1,
                      gfk, ~star_to_zoom2)
        state = state._replace(nfev=state.nfev + zoom2.nfev, ngev=state.ngev + zoom2.ngev)
        state = state._replace(done=star_to_zoom1 | state.done, failed=(star_to_zoom1 & zoom1.failed) | state.failed)
        state = _replace_where(state, star_to_zoom1, a_star=zoom1.a_star, phi_star=zoom1.phi_star,
                               dphi_star=zoom1.dphi_star, g_star=zoom1.g_star)
        state = _replace_where(state._replace(done=star_to_i | state.done), star_to_i, a_star=a_i, phi_star=phi_i,
                               dphi_star=dphi_i, g_star=g_i)
        state = state._replace(done=star_to_zoom2 | state.done, failed=(star_to_zoom2 & zoom2.failed) | state.failed)
        state = _replace_where(state, star_to_zoom2, a_star=zoom2.a_star, phi_star=zoom2.phi_star,
                               dphi_star=zoom2.dphi_star, g_star=zoom2.g_star)
        return state._replace(i=state.i + 1, a_i1=a_i, phi_i1=phi_i, dphi_i1=dphi_i)

    state = lax.while_loop(lambda s: ~s.done & (s.i <= maxiter) & ~s.failed, body, state)
    status = fnp.where(state.failed, 1, fnp.where(state.i > maxiter, 3, 0))
    alpha_k = state.a_star
    if fnp.finfo(alpha_k.dtype).bits != 64:
        # a step this small would stall the minimiser in 32-bit arithmetic, as JAX notes
        alpha_k = fnp.where(fnp.abs(alpha_k) < 1e-8, fnp.sign(alpha_k) * 1e-8, alpha_k)
    return LineSearchResults(failed=state.failed | ~state.done, nit=state.i - 1, nfev=state.nfev, ngev=state.ngev,
                             k=state.i, a_k=alpha_k, f_k=state.phi_star, g_k=state.g_star, status=status)
