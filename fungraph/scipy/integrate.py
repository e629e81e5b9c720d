"""``fungraph.scipy.integrate``: ``trapezoid`` (JAX's), and ``odeint``, an adaptive Dormand–Prince 5(4) solver staged as
``lax`` control flow, whose gradient is the adjoint method (attached with ``custom_vjp``).

The forward solve is a ``scan`` over the output intervals; each interval is a ``while_loop``
of step attempts, clipped so that a step lands exactly on the next output time (no dense
output interpolation). The backward pass solves the augmented adjoint system — the state, its
cotangent and the parameters' running cotangent — backwards in time with the same solver,
restarting the state from the saved outputs at every output time. See
docs/scipy_signal_integrate.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph.api import abstractify, vjp
from fungraph.core import Tracer
from fungraph.custom_derivatives import custom_vjp
from fungraph.interpreters.eval import eval_graph
from fungraph.interpreters.staging import stage
from fungraph.lax import scan, stop_gradient, while_loop
from fungraph.numpy._util import asarray, cast
from fungraph.tree_util import tree_flatten, tree_unflatten

__all__ = ["odeint", "trapezoid"]

#: ``jax.scipy.integrate.trapezoid``, the same function as ``numpy.trapezoid``
trapezoid = fnp.trapezoid

# --- the Dormand–Prince 5(4) tableau (Dormand & Prince 1980) ----------------------------------

_C = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_A = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),   # = the 5th-order weights (FSAL)
)
_B4 = (5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40)
_E = tuple(b5 - b4 for b5, b4 in zip(_A[6] + (0.0,), _B4))          # error weights: 5th - 4th order

_SAFETY, _MIN_FACTOR, _MAX_FACTOR = 0.9, 0.2, 10.0

Dynamics = Callable[[Any, Any], Any]       # flat state vector, time -> flat derivative vector


@dataclass(frozen=True)
class _Options:
    rtol: float
    atol: float
    mxstep: float
    hmax: float


# --- one step, the first step size, one interval ----------------------------------------------


def _combine(y: Any, h: Any, weights: Sequence[float], ks: Sequence[Any]) -> Any:
    """``y + h * sum_j weights[j] * ks[j]`` (zero weights skipped)."""
    acc = None
    for wgt, k in zip(weights, ks):
        if wgt != 0.0:
            term = k * wgt
            acc = term if acc is None else acc + term
    return y if acc is None else y + h * acc


def _rk_step(fun: Dynamics, y: Any, f0: Any, t: Any, h: Any) -> tuple[Any, Any, Any]:
    """One Dormand–Prince step from ``(t, y)`` with ``f0 = fun(y, t)``: the 5th-order solution,
    ``fun`` at it (the next step's ``f0``), and the local error estimate."""
    ks = [f0]
    for i in range(1, 7):
        ks.append(fun(_combine(y, h, _A[i], ks), t + h * _C[i]))
    y_new = _combine(y, h, _A[6], ks)
    err = _combine(fnp.zeros_like(y), h, _E, ks)
    return y_new, ks[6], err


def _rms(x: Any) -> Any:
    return fnp.sqrt(fnp.mean(x * x))


def _scaled_error(err: Any, y0: Any, y1: Any, opts: _Options) -> Any:
    return _rms(err / (opts.atol + opts.rtol * fnp.maximum(fnp.abs(y0), fnp.abs(y1))))


def _initial_step(fun: Dynamics, y0: Any, f0: Any, t0: Any, opts: _Options) -> Any:
    """A first step size from the sizes of ``y0``, ``f0`` and a finite-difference estimate of
    the second derivative (Hairer, Nørsett & Wanner, II.4). Step sizes are control, not
    values: they carry no derivative, so differentiating *through* the solver (what ``grad`` of
    a ``vmap`` of ``odeint`` does, see the docs) gives the derivative of the discrete solution at
    fixed steps, with no ``sqrt``-at-zero NaN from the error norms."""
    y0, f0 = stop_gradient(y0), stop_gradient(f0)
    scale = opts.atol + fnp.abs(y0) * opts.rtol
    d0 = _rms(y0 / scale)
    d1 = _rms(f0 / scale)
    h0 = fnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / fnp.maximum(d1, 1e-300))
    f1 = stop_gradient(fun(y0 + h0 * f0, stop_gradient(t0) + h0))
    d2 = _rms((f1 - f0) / scale) / h0
    biggest = fnp.maximum(d1, d2)
    h1 = fnp.where(biggest <= 1e-15, fnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / fnp.maximum(biggest, 1e-300)) ** (1 / 5))
    return fnp.minimum(fnp.minimum(100 * h0, h1), opts.hmax)


def _advance(fun: Dynamics, y: Any, f0: Any, t: Any, target: Any, dt: Any, opts: _Options) -> tuple:
    """Step from ``t`` to ``target``; returns ``(y, f, dt, accepted, rejected)`` with ``y`` NaN
    when the interval could not be finished (``mxstep`` attempts, or a step too small to move)."""
    zero = np.asarray(0, np.int64)

    def cond(c: tuple) -> Any:
        y_, f_, t_, dt_, n, acc, rej = c
        h = fnp.minimum(dt_, target - t_)
        going = (t_ < target) & (t_ + h > t_)
        if np.isfinite(opts.mxstep):
            going = going & (n < int(opts.mxstep))
        return going

    def body(c: tuple) -> tuple:
        y_, f_, t_, dt_, n, acc, rej = c
        last = dt_ >= target - t_
        h = fnp.where(last, target - t_, dt_)
        y_new, f_new, err = _rk_step(fun, y_, f_, t_, h)
        # Step-size control carries no derivative (see _initial_step).
        ratio = _scaled_error(*(stop_gradient(v) for v in (err, y_, y_new)), opts)
        ok = ratio <= 1.0
        factor = fnp.clip(_SAFETY * (ratio + 1e-30) ** (-1 / 5), _MIN_FACTOR, _MAX_FACTOR)
        proposed = stop_gradient(h) * factor
        # A step shortened to land on ``target`` says little about the natural step size.
        proposed = fnp.where(ok & last, fnp.maximum(proposed, dt_), proposed)
        proposed = fnp.minimum(proposed, opts.hmax)
        t_next = fnp.where(last, target, t_ + h)
        return (fnp.where(ok, y_new, y_), fnp.where(ok, f_new, f_), fnp.where(ok, t_next, t_), proposed,
                n + 1, acc + ok.astype(np.int64), rej + (~ok).astype(np.int64))

    y, f, t_end, dt, _, acc, rej = while_loop(cond, body, (y, f0, t, dt, zero, zero, zero))
    y = fnp.where(t_end >= target, y, fnp.nan)
    return y, f, dt, acc, rej


def _solve(fun: Dynamics, y0: Any, ts: Any, opts: _Options) -> tuple[Any, Any, Any]:
    """``y`` at every time in ``ts`` (shape ``(len(ts), n)``) and the accepted and rejected
    step counts."""
    f0 = fun(y0, ts[0])
    dt = _initial_step(fun, y0, f0, ts[0], opts)
    zero = np.asarray(0, np.int64)

    def interval(carry: tuple, target: Any) -> tuple:
        y, f, t, dt_, acc, rej = carry
        y, f, dt_, a, r = _advance(fun, y, f, t, target, dt_, opts)
        return (y, f, target, dt_, acc + a, rej + r), y

    (_, _, _, _, acc, rej), ys = scan(interval, (y0, f0, ts[0], dt, zero, zero), ts[1:])
    return fnp.concatenate([y0[None], ys], axis=0), acc, rej


# --- flat vectors of pytrees ------------------------------------------------------------------


def _ravel(leaves: Sequence[Any], dtype: np.dtype) -> Any:
    parts = [fnp.reshape(cast(asarray(x), dtype), (-1,)) for x in leaves]
    return fnp.concatenate(parts) if parts else np.zeros(0, dtype)


def _unravel(vec: Any, avals: Sequence[Any], lead: tuple[int, ...] = ()) -> list[Any]:
    """Split the last axis of ``vec`` back into arrays of ``avals``' shapes and dtypes."""
    out, offset = [], 0
    for a in avals:
        size = int(np.prod(a.shape, dtype=np.int64))
        piece = fnp.reshape(vec[..., offset:offset + size], lead + tuple(a.shape))
        out.append(cast(piece, a.dtype))
        offset += size
    return out


# --- the adjoint gradient ---------------------------------------------------------------------


def _odeint_adjoint(dyn: Callable[..., Any], opts: _Options, y0: Any, ts: Any, params: list[Any]) -> Any:
    """``_solve`` of ``dyn(y, t, *params)`` with the adjoint method as its VJP."""
    param_avals = [abstractify(p) for p in params]
    is_float = [dtypes.is_float(a.dtype) for a in param_avals]

    def primal(y0: Any, ts: Any, *params: Any) -> Any:
        return _solve(lambda y, t: dyn(y, t, *params), y0, ts, opts)[0]

    def fwd(y0: Any, ts: Any, *params: Any) -> tuple[Any, tuple]:
        ys = primal(y0, ts, *params)
        return ys, (ys, ts, params)

    def bwd(res: tuple, g: Any) -> tuple:
        ys, ts, params = res
        n = ys.shape[1]
        dtype = ys.dtype
        float_params = [p for p, f in zip(params, is_float) if f]

        def with_floats(fps: Sequence[Any]) -> list[Any]:
            it = iter(fps)
            return [next(it) if f else p for p, f in zip(params, is_float)]

        def augmented(state: Any, s: Any) -> Any:
            """The adjoint system in reversed time ``s = -t``: the state runs backwards, its
            cotangent ``a`` grows by ``a^T df/dy``, the parameters' cotangent by ``a^T df/dp``."""
            y, a = state[:n], state[n:2 * n]
            out, pull = vjp(lambda y_, *fps: dyn(y_, -s, *with_floats(fps)), y, *float_params)
            cts = pull(a)
            return fnp.concatenate([-out, cts[0]] + [_ravel([c], dtype) for c in cts[1:]])

        def interval(carry: tuple, x: tuple) -> tuple:
            a, gp, dt = carry
            y_end, g_end, t_end, t_start = x
            a = a + g_end
            t_bar = fnp.dot(g_end, dyn(y_end, t_end, *params))
            state = fnp.concatenate([y_end, a, gp])
            f0 = augmented(state, -t_end)
            state, _, dt, _, _ = _advance(augmented, state, f0, -t_end, -t_start, dt, opts)
            return (state[n:2 * n], state[2 * n:], dt), t_bar

        n_gp = sum(int(np.prod(a.shape, dtype=np.int64)) for a, f in zip(param_avals, is_float) if f)
        gp0 = fnp.zeros((n_gp,), dtype)
        a_last = g[-1]
        state_last = fnp.concatenate([ys[-1], a_last, gp0])
        dt0 = _initial_step(augmented, state_last, augmented(state_last, -ts[-1]), -ts[-1], opts)
        xs = (ys[1:], g[1:], ts[1:], ts[:-1])
        (a, gp, _), t_bars = scan(interval, (fnp.zeros_like(ys[0]), gp0, dt0), xs, reverse=True)
        y0_bar = a + g[0]
        t0_bar = -fnp.dot(a, dyn(ys[0], ts[0], *params))
        ts_bar = fnp.concatenate([t0_bar[None], t_bars])
        float_bars = iter(_unravel(gp, [a for a, f in zip(param_avals, is_float) if f]))
        params_bar = tuple(next(float_bars) if f else np.zeros(a.shape, a.dtype)
                           for a, f in zip(param_avals, is_float))
        return (y0_bar, ts_bar) + params_bar

    solve = custom_vjp(primal)
    solve.defvjp(fwd, bwd)
    return solve(y0, ts, *params)


# --- public API -------------------------------------------------------------------------------


def odeint(func: Callable[..., Any], y0: Any, t: Any, *args: Any, rtol: float = 1.4e-8, atol: float = 1.4e-8,
           mxstep: float = np.inf, hmax: float = np.inf) -> Any:
    """Solve ``dy/dt = func(y, t, *args)`` from ``y(t[0]) = y0``; returns ``y`` at every time in
    ``t`` (each leaf of the pytree ``y0`` gains a leading axis of length ``len(t)``).

    Adaptive Dormand–Prince 5(4) steps with the error ``rms(err / (atol + rtol * |y|))`` kept
    below 1; ``mxstep`` bounds the step attempts per output interval (the remaining outputs are
    NaN when it is reached). ``t`` must be non-decreasing. Differentiable in reverse mode with
    respect to ``y0``, ``t``, ``args`` and the arrays ``func`` closes over, by the adjoint
    method; forward mode (``jvp``) is not supported.
    """
    y_leaves, y_tree = tree_flatten(y0)
    y_leaves = [asarray(x) for x in y_leaves]
    if not y_leaves:
        raise ValueError("odeint: y0 has no arrays")
    dtype = dtypes.result_type(*y_leaves)
    if not dtypes.is_float(dtype):
        dtype = dtypes.float64
    y_avals = [abstractify(x) for x in y_leaves]
    ts = cast(asarray(t), dtype)
    if ts.ndim != 1 or ts.shape[0] == 0:
        raise ValueError(f"odeint: t must be a non-empty 1-d array of times, got shape {tuple(ts.shape)}")
    if not isinstance(ts, Tracer) and np.any(np.diff(np.asarray(ts)) < 0):
        raise ValueError(f"odeint: t must be non-decreasing, got {np.asarray(ts)}")
    for name, v in (("rtol", rtol), ("atol", atol), ("hmax", hmax)):
        if not (isinstance(v, (int, float, np.floating)) and v > 0):
            raise ValueError(f"odeint: {name} must be a positive number, got {v!r}")
    if not (mxstep == np.inf or (int(mxstep) == mxstep and mxstep >= 1)):
        raise ValueError(f"odeint: mxstep must be a positive integer or inf, got {mxstep!r}")
    opts = _Options(float(rtol), float(atol), float(mxstep), float(hmax))

    arg_leaves, args_tree = tree_flatten(args)
    arg_leaves = [asarray(x) for x in arg_leaves]
    y_vec = _ravel(y_leaves, dtype)

    def flat_func(y: Any, tt: Any, *leaves: Any) -> list[Any]:
        out = func(tree_unflatten(y_tree, _unravel(y, y_avals)), tt, *tree_unflatten(args_tree, leaves))
        out_leaves, out_tree = tree_flatten(out)
        if out_tree != y_tree:
            raise TypeError(f"odeint: func must return the structure of y0 ({y_tree}), got {out_tree}")
        for o, a in zip(out_leaves, y_avals):
            if tuple(np.shape(o)) != tuple(a.shape):
                raise TypeError(f"odeint: func returned a leaf of shape {tuple(np.shape(o))} for a state leaf "
                                f"of shape {tuple(a.shape)}")
        return [_ravel(out_leaves, dtype)]

    # Closure conversion: values ``func`` closes over that are traced by an outer transformation
    # become explicit parameters, so the adjoint gradient reaches them too.
    graph, closure = stage(flat_func, [abstractify(y_vec), abstractify(ts[0])] + [abstractify(x) for x in arg_leaves])

    def dyn(y: Any, tt: Any, *params: Any) -> Any:
        return eval_graph(graph, y, tt, *params)[0]

    try:
        ys = _odeint_adjoint(dyn, opts, y_vec, ts, arg_leaves + list(closure))
    except TypeError as e:
        if "forward-mode" not in str(e):
            raise
        raise TypeError("odeint: forward-mode differentiation (jvp, jacfwd, linearize) is not supported: odeint's "
                        "derivative is the adjoint method, a custom_vjp rule; use grad, vjp or jacrev") from e
    return tree_unflatten(y_tree, _unravel(ys, y_avals, (int(ts.shape[0]),)))


def _stats(func: Callable[..., Any], y0: Any, t: Any, *args: Any, rtol: float = 1.4e-8,
           atol: float = 1.4e-8) -> tuple[int, int]:
    """(accepted, rejected) step counts of the forward solve of ``odeint`` on 1-d float ``y0``
    (for tests and the docs' measurements)."""
    y = asarray(y0)
    ts = cast(asarray(t), y.dtype)
    _, acc, rej = _solve(lambda yy, tt: asarray(func(yy, tt, *args)), y, ts, _Options(rtol, atol, np.inf, np.inf))
    return int(acc), int(rej)

