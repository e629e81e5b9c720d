"""``check_grads``: JVPs against central differences and VJPs against JVPs, to any order.

Complex arguments get complex directions (so real and imaginary parts are both perturbed), and
the dot-product test pairs values by ``Re(sum(a * b))``, the pairing under which fungraph's
(JAX's) non-conjugating transposes are adjoints."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.api import jvp, vjp
from fungraph.tree_util import tree_flatten, tree_leaves, tree_unflatten


def _as_float_arrays(args: Sequence[Any]) -> list[np.ndarray]:
    return [np.asarray(a, dtype=np.result_type(np.asarray(a).dtype, np.float32)) for a in args]


def _flat_out(out: Any) -> list[np.ndarray]:
    return [np.asarray(x) for x in tree_leaves(out)]


def numerical_jvp(f: Callable[..., Any], args: Sequence[np.ndarray], tangents: Sequence[np.ndarray],
                  eps: float) -> list[np.ndarray]:
    plus = _flat_out(f(*[a + eps * t for a, t in zip(args, tangents)]))
    minus = _flat_out(f(*[a - eps * t for a, t in zip(args, tangents)]))
    return [(p - m) / (2 * eps) for p, m in zip(plus, minus)]


def _vdot(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray]) -> float:
    return float(sum(np.real(np.sum(np.asarray(x, np.complex128) * np.asarray(y, np.complex128)))
                     for x, y in zip(xs, ys)))


def _random_like(rng: np.random.Generator, a: np.ndarray) -> np.ndarray:
    """A standard normal array of ``a``'s shape and dtype (complex: both parts random)."""
    if dtypes.is_complex(a.dtype):
        return (rng.standard_normal(a.shape) + 1j * rng.standard_normal(a.shape)).astype(a.dtype)
    return rng.standard_normal(a.shape).astype(a.dtype)


def _check_close(name: str, got: Sequence[np.ndarray], want: Sequence[np.ndarray], atol: float, rtol: float) -> None:
    for i, (g, w) in enumerate(zip(got, want)):
        wide = np.complex128 if np.iscomplexobj(g) or np.iscomplexobj(w) else np.float64
        g, w = np.asarray(g, wide), np.asarray(w, wide)
        if g.shape != w.shape:
            raise AssertionError(f"{name}: output {i} has shape {g.shape}, expected {w.shape}")
        np.testing.assert_allclose(g, w, atol=atol, rtol=rtol, err_msg=f"{name}: output {i}")


def check_grads(f: Callable[..., Any], args: Sequence[Any], order: int = 2, modes: Sequence[str] = ("fwd", "rev"),
                eps: float | None = None, atol: float | None = None, rtol: float | None = None,
                seed: int = 0, rev_vs_numerical: bool = False) -> None:
    """Check ``f``'s derivatives at ``args`` up to ``order``.

    Forward mode: ``jvp`` must match central differences along a random direction.
    Reverse mode: ``<ct, J t> == <J^T ct, t>`` for random ``t`` and ``ct`` (the dot-product test),
    ``J t`` from ``jvp``, or from central differences with ``rev_vs_numerical`` (as JAX's
    ``check_vjp``, so a wrong rule that ``jvp`` and ``vjp`` share is caught in reverse mode alone).
    Higher orders apply the same checks to the derivative functions themselves.
    """
    args = _as_float_arrays(args)
    is64 = dtypes.x64_enabled() and all(a.dtype in (dtypes.float64, dtypes.complex128) for a in args)
    eps = eps if eps is not None else (1e-6 if is64 else 1e-2)
    atol = atol if atol is not None else (1e-5 if is64 else 5e-2)
    rtol = rtol if rtol is not None else (1e-5 if is64 else 5e-2)
    rng = np.random.default_rng(seed)
    tangents = [_random_like(rng, a) for a in args]

    if "fwd" in modes:
        _, t_out = jvp(f, tuple(args), tuple(tangents))
        _check_close("jvp vs finite differences", _flat_out(t_out), numerical_jvp(f, args, tangents, eps), atol, rtol)
    if "rev" in modes:
        out, f_vjp = vjp(f, *args)
        outs = _flat_out(out)
        # outputs that are themselves NaN or infinite (0/0 in a nan-reduction of all NaNs) get
        # no cotangent, and their tangents are left out of <ct, J t>; every other one must stay finite
        finite = [np.isfinite(o) for o in outs]
        cts = [np.where(m, _random_like(rng, o), 0).astype(o.dtype) for o, m in zip(outs, finite)]

        ct_tree = tree_unflatten(tree_flatten(out)[1], cts)
        grads = [np.asarray(g) for g in f_vjp(ct_tree)]
        if rev_vs_numerical:
            t_flat = numerical_jvp(f, args, tangents, eps)
        else:
            t_flat = _flat_out(jvp(f, tuple(args), tuple(tangents))[1])
        lhs = _vdot(cts, [np.where(m, t, 0) for t, m in zip(t_flat, finite)])
        rhs = _vdot(grads, tangents)
        if not (np.isfinite(lhs) and np.isfinite(rhs)):
            raise AssertionError(f"vjp or jvp is not finite: <ct, J t> = {lhs!r}, <J^T ct, t> = {rhs!r}")
        scale = max(1.0, abs(lhs), abs(rhs))
        if abs(lhs - rhs) > atol * scale + rtol * scale:
            raise AssertionError(f"vjp fails the dot-product test: <ct, J t> = {lhs!r} but <J^T ct, t> = {rhs!r}")

    if order > 1:
        def f_jvp(*primals: Any) -> Any:
            return jvp(f, primals, tuple(tangents))[1]

        if "fwd" in modes:
            check_grads(f_jvp, args, order - 1, ("fwd",), eps, atol, rtol, seed + 1, rev_vs_numerical)
        if "rev" in modes:
            out = f(*args)
            cts = [_random_like(rng, o) for o in _flat_out(out)]

            ct_tree = tree_unflatten(tree_flatten(out)[1], cts)

            def f_vjp(*primals: Any) -> Any:
                return vjp(f, *primals)[1](ct_tree)

            check_grads(f_vjp, args, order - 1, ("rev",), eps, atol, rtol, seed + 1, rev_vs_numerical)


def _tolerances(args: Sequence[np.ndarray], atol: float | None, rtol: float | None,
                eps: float | None) -> tuple[float, float, float]:
    is64 = dtypes.x64_enabled() and all(a.dtype in (dtypes.float64, dtypes.complex128) for a in args)
    return (eps if eps is not None else (1e-6 if is64 else 1e-2),
            atol if atol is not None else (1e-5 if is64 else 5e-2),
            rtol if rtol is not None else (1e-5 if is64 else 5e-2))


def check_jvp(f: Callable[..., Any], f_jvp: Callable[..., Any], args: Sequence[Any], atol: float | None = None,
              rtol: float | None = None, eps: float | None = None, err_msg: str = "", seed: int = 0) -> None:
    """``f_jvp(primals, tangents) -> (out, tangent_out)`` (``partial(jvp, f)`` or a hand-written
    rule) agrees with ``f`` and with central differences of ``f`` along a random direction."""
    args = _as_float_arrays(args)
    eps, atol, rtol = _tolerances(args, atol, rtol, eps)
    tangents = [_random_like(np.random.default_rng(seed), a) for a in args]
    out, t_out = f_jvp(tuple(args), tuple(tangents))
    prefix = f"{err_msg}: " if err_msg else ""
    _check_close(f"{prefix}check_jvp primal outputs", _flat_out(out), _flat_out(f(*args)), atol, rtol)
    _check_close(f"{prefix}check_jvp tangents vs finite differences", _flat_out(t_out),
                 numerical_jvp(f, args, tangents, eps), atol, rtol)


def check_vjp(f: Callable[..., Any], f_vjp: Callable[..., Any], args: Sequence[Any], atol: float | None = None,
              rtol: float | None = None, eps: float | None = None, err_msg: str = "", seed: int = 0) -> None:
    """``f_vjp(*args) -> (out, pullback)`` (``partial(vjp, f)`` or a hand-written rule) agrees with
    ``f``, and its pullback passes the dot-product test against central differences of ``f``:
    ``<J^T ct, t> == <ct, J t>`` for random ``t`` and ``ct``."""
    args = _as_float_arrays(args)
    eps, atol, rtol = _tolerances(args, atol, rtol, eps)
    rng = np.random.default_rng(seed)
    out, pullback = f_vjp(*args)
    prefix = f"{err_msg}: " if err_msg else ""
    outs = _flat_out(out)
    _check_close(f"{prefix}check_vjp primal outputs", outs, _flat_out(f(*args)), atol, rtol)
    tangents = [_random_like(rng, a) for a in args]
    cts = [_random_like(rng, o) for o in outs]
    grads = [np.conj(np.asarray(g)) for g in tree_leaves(pullback(tree_unflatten(tree_flatten(out)[1],
                                                                                 [np.conj(c) for c in cts])))]
    lhs = _vdot(numerical_jvp(f, args, tangents, eps), cts)
    rhs = _vdot(tangents, grads)
    scale = max(1.0, abs(lhs), abs(rhs))
    if not abs(lhs - rhs) <= (atol + rtol) * scale:
        raise AssertionError(f"{prefix}check_vjp: the pullback fails the dot-product test: <ct, J t> = {lhs!r} "
                             f"(J t by finite differences) but <J^T ct, t> = {rhs!r}")
