"""``fungraph.experimental.ode.odeint``, as ``jax.experimental.ode.odeint``: the adaptive
Dormand-Prince (RK45) solver, with dense output by a 4th-order interpolating polynomial and
reverse-mode derivatives by the adjoint method (a second solve, backwards in time, of the
system augmented with its vector-Jacobian products). Step-size control, interpolation and the
adjoint follow JAX's, so solutions agree with JAX's to rounding."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import lax
from fungraph import numpy as fnp
from fungraph.api import closure_convert, vjp, vmap
from fungraph.custom_derivatives import custom_vjp
from fungraph.flatten_util import ravel_pytree
from fungraph.jit import jit
from fungraph.tree_util import tree_leaves, tree_map

__all__ = ["odeint"]

# The Dormand-Prince tableau: nodes, stage weights, the 5th-order solution and its error estimate.
_ALPHA = (1 / 5, 3 / 10, 4 / 5, 8 / 9, 1., 1., 0)
_BETA = ((1 / 5, 0, 0, 0, 0, 0, 0), (3 / 40, 9 / 40, 0, 0, 0, 0, 0), (44 / 45, -56 / 15, 32 / 9, 0, 0, 0, 0),
         (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0, 0, 0),
         (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0, 0),
         (35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0))
_C_SOL = (35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0)
_C_ERROR = (35 / 384 - 1951 / 21600, 0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
            -2187 / 6784 - -12231 / 42400, 11 / 84 - 649 / 6300, -1. / 60.)
# The weights giving the solution at the step's midpoint, for the interpolating polynomial.
_C_MID = (6025192743 / 30085553152 / 2, 0, 51252292925 / 65400821598 / 2, -2691868925 / 45128329728 / 2,
          187940372067 / 1594534317056 / 2, -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2)


def _fit_4th_order_polynomial(y0: Any, y1: Any, y_mid: Any, dy0: Any, dy1: Any, dt: Any) -> Any:
    """The coefficients (highest power first) of the quartic through y0, y_mid, y1 on [0, 1]
    with slopes dt * dy0 and dt * dy1 at its ends."""
    dt = dt.astype(y0.dtype)
    a = -2. * dt * dy0 + 2. * dt * dy1 - 8. * y0 - 8. * y1 + 16. * y_mid
    b = 5. * dt * dy0 - 3. * dt * dy1 + 18. * y0 + 14. * y1 - 32. * y_mid
    c = -4. * dt * dy0 + dt * dy1 - 11. * y0 - 5. * y1 + 16. * y_mid
    return fnp.stack([a, b, c, dt * dy0, y0])


def _interp_fit(y0: Any, y1: Any, k: Any, dt: Any) -> Any:
    y_mid = y0 + dt.astype(y0.dtype) * fnp.dot(fnp.array(_C_MID, dtype=y0.dtype), k)
    return _fit_4th_order_polynomial(y0, y1, y_mid, k[0], k[-1], dt)


def _initial_step_size(fun: Callable[[Any, Any], Any], t0: Any, y0: Any, order: int, rtol: float, atol: float,
                       f0: Any) -> Any:
    """Hairer, Norsett and Wanner's starting step (Solving ODEs I, sec. II.4)."""
    scale = (atol + fnp.abs(y0) * rtol).astype(y0.dtype)
    d0 = fnp.linalg.norm(y0 / scale)
    d1 = fnp.linalg.norm(f0 / scale)
    h0 = fnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    f1 = fun(y0 + h0.astype(y0.dtype) * f0, t0 + h0)
    d2 = fnp.linalg.norm((f1 - f0) / scale) / h0
    h1 = fnp.where((d1 <= 1e-15) & (d2 <= 1e-15), fnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / fnp.maximum(d1, d2)) ** (1. / (order + 1.)))
    return fnp.minimum(100. * h0, h1)


def _runge_kutta_step(fun: Callable[[Any, Any], Any], y0: Any, f0: Any, t0: Any, dt: Any) -> tuple[Any, ...]:
    """One Dormand-Prince step: the new state, its derivative, the error estimate and the stages."""
    alpha = fnp.array(_ALPHA, dtype=dt.dtype)
    beta = fnp.array(_BETA, dtype=f0.dtype)

    def stage(i: Any, k: Any) -> Any:
        yi = y0 + dt.astype(f0.dtype) * fnp.dot(beta[i - 1, :], k)
        return k.at[i, :].set(fun(yi, t0 + dt * alpha[i - 1]))

    k = fnp.zeros((7, f0.shape[0]), f0.dtype).at[0, :].set(f0)
    k = lax.fori_loop(1, 7, stage, k)
    y1 = dt.astype(f0.dtype) * fnp.dot(fnp.array(_C_SOL, dtype=f0.dtype), k) + y0
    y1_error = dt.astype(f0.dtype) * fnp.dot(fnp.array(_C_ERROR, dtype=f0.dtype), k)
    return y1, k[-1], y1_error, k


def _mean_error_ratio(error: Any, rtol: float, atol: float, y0: Any, y1: Any) -> Any:
    tolerance = atol + rtol * fnp.maximum(fnp.abs(y0), fnp.abs(y1))
    ratio = error / tolerance.astype(error.dtype)
    return fnp.sqrt(fnp.mean(fnp.real(ratio * fnp.conj(ratio))))


def _optimal_step_size(last_step: Any, ratio: Any, safety: float = 0.9, ifactor: float = 10.0,
                       dfactor: float = 0.2, order: float = 5.0) -> Any:
    dfactor = fnp.where(ratio < 1, 1.0, dfactor)
    factor = fnp.minimum(ifactor, fnp.maximum(ratio ** (-1.0 / order) * safety, dfactor))
    return fnp.where(ratio == 0, last_step * ifactor, last_step * factor)


def odeint(func: Callable[..., Any], y0: Any, t: Any, *args: Any, rtol: float = 1.4e-8, atol: float = 1.4e-8,
           mxstep: float = np.inf, hmax: float = np.inf) -> Any:
    """The solution of ``dy/dt = func(y, t, *args)``, ``y(t[0]) = y0``, at each (increasing) time
    in ``t``: a pytree like ``y0`` with a leading axis of ``len(t)``. ``mxstep`` bounds the steps
    between two output times, ``hmax`` the step size; differentiable in ``y0``, ``t`` and ``args``."""
    for arg in tree_leaves(args):
        if not hasattr(arg, "dtype") and not isinstance(arg, (bool, int, float, complex)):
            raise TypeError(f"The contents of odeint *args must be arrays or scalars, but got {arg}.")
    t = fnp.asarray(t)
    if not fnp.issubdtype(t.dtype, fnp.floating):
        raise TypeError(f"t must be an array of floats, but got {t}.")
    converted, consts = closure_convert(func, y0, t[0], *args)
    return _odeint_wrapper(converted, rtol, atol, mxstep, hmax, y0, t, *args, *consts)


@functools.partial(jit, static_argnums=(0, 1, 2, 3, 4))
def _odeint_wrapper(func: Callable[..., Any], rtol: float, atol: float, mxstep: float, hmax: float, y0: Any,
                    ts: Any, *args: Any) -> Any:
    y0, unravel = ravel_pytree(y0)

    def flat_func(y: Any, t: Any, *args: Any) -> Any:
        return ravel_pytree(func(unravel(y), t, *args))[0]

    out = _odeint(flat_func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return vmap(unravel)(out)


@functools.partial(custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4))
def _odeint(func: Callable[..., Any], rtol: float, atol: float, mxstep: float, hmax: float, y0: Any, ts: Any,
            *args: Any) -> Any:
    def fun(y: Any, t: Any) -> Any:
        return func(y, t, *args)

    def to_output_time(carry: list[Any], target_t: Any) -> tuple[list[Any], Any]:
        def keep_stepping(state: list[Any]) -> Any:
            i, _, _, t, dt, _, _ = state
            return (t < target_t) & (i < mxstep) & (dt > 0)

        def step(state: list[Any]) -> list[Any]:
            i, y, f, t, dt, last_t, interp_coeff = state
            next_y, next_f, next_y_error, k = _runge_kutta_step(fun, y, f, t, dt)
            ratio = _mean_error_ratio(next_y_error, rtol, atol, y, next_y)
            new_interp_coeff = _interp_fit(y, next_y, k, dt)
            next_dt = fnp.clip(_optimal_step_size(dt, ratio), min=0., max=hmax)
            new = [i + 1, next_y, next_f, t + dt, next_dt, t, new_interp_coeff]
            old = [i + 1, y, f, t, next_dt, last_t, interp_coeff]
            return [fnp.where(ratio <= 1., a, b) for a, b in zip(new, old)]

        _, *carry = lax.while_loop(keep_stepping, step, [0, *carry])
        _, _, t, _, last_t, interp_coeff = carry
        relative_time = (target_t - last_t) / (t - last_t)
        return carry, fnp.polyval(interp_coeff, relative_time.astype(interp_coeff.dtype))

    f0 = fun(y0, ts[0])
    dt = fnp.clip(_initial_step_size(fun, ts[0], y0, 4, rtol, atol, f0), min=0., max=hmax)
    init = [y0, f0, ts[0], dt, ts[0], fnp.stack([y0] * 5)]
    _, ys = lax.scan(to_output_time, init, ts[1:])
    return fnp.concatenate((y0[None], ys))


def _odeint_fwd(func: Callable[..., Any], rtol: float, atol: float, mxstep: float, hmax: float, y0: Any, ts: Any,
                *args: Any) -> tuple[Any, Any]:
    ys = _odeint(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _odeint_rev(func: Callable[..., Any], rtol: float, atol: float, mxstep: float, hmax: float, res: Any,
                g: Any) -> tuple[Any, ...]:
    """The adjoint: between consecutive output times, solve backwards for the state, its
    cotangent, the time cotangent and the arguments' cotangents together."""
    ys, ts, args = res

    def aug_dynamics(augmented_state: Any, t: Any, *args: Any) -> Any:
        y, y_bar, *_ = augmented_state
        y_dot, vjp_fun = vjp(func, y, -t, *args)
        return (-y_dot, *vjp_fun(y_bar))

    def back_one_interval(carry: Any, i: Any) -> Any:
        y_bar, t0_bar, args_bar = carry
        t_bar = fnp.real(fnp.dot(func(ys[i], ts[i], *args), g[i]))
        t0_bar = t0_bar - t_bar
        _, y_bar, t0_bar, args_bar = odeint(aug_dynamics, (ys[i], y_bar, t0_bar, args_bar),
                                            fnp.stack([-ts[i], -ts[i - 1]]), *args, rtol=rtol, atol=atol,
                                            mxstep=mxstep, hmax=hmax)
        y_bar, t0_bar, args_bar = tree_map(operator.itemgetter(1), (y_bar, t0_bar, args_bar))
        return (y_bar + g[i - 1], t0_bar, args_bar), t_bar

    init = (g[-1], fnp.zeros((), ts.dtype), tree_map(fnp.zeros_like, args))
    (y_bar, t0_bar, args_bar), rev_ts_bar = lax.scan(back_one_interval, init, fnp.arange(len(ts) - 1, 0, -1))
    ts_bar = fnp.concatenate([fnp.stack([t0_bar]), rev_ts_bar[::-1]])
    return (y_bar, ts_bar, *args_bar)


_odeint.defvjp(_odeint_fwd, _odeint_rev)
