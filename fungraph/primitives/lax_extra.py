"""Primitives behind ``jax.lax`` functions that no composition of the others expresses
exactly: ``bitcast_convert_type`` (the bits of one dtype read as another), Hurwitz ``zeta``,
``igamma_grad_a`` (dP(a, x)/da) and ``custom_linear_solve`` (a solve that is linear in its
right-hand side, transposed with the user's transpose solve)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import NOT_DIFFERENTIABLE, Primitive, ShapeError
from fungraph.interpreters.eval import eval_graph
from fungraph.interpreters.graph_transforms import batched_graph
from fungraph.interpreters.jvp import jvp_flat
from fungraph.ir import Graph, ShapedArray
from fungraph.primitives._batching import batch_size, broadcast_batch, to_front
from fungraph.primitives._rules import aval, instantiate, is_undefined, zeros
from fungraph.primitives.elementwise import add, log, mul, neg, sub
from fungraph.primitives.special import (
    _CF_EPS,
    _EPS,
    _FPMIN,
    _MAXIT,
    _digamma64,
    _hurwitz_zeta64,
    _igamma_dx,
    _lgamma64,
    _nary,
    digamma_p,
)

# --- bitcast_convert_type -----------------------------------------------------------------


def _bitcast_aval(x: ShapedArray, *, new_dtype: np.dtype) -> ShapedArray:
    old, new = np.dtype(x.dtype).itemsize, np.dtype(new_dtype).itemsize
    if x.dtype == dtypes.bool_ or new_dtype == dtypes.bool_:
        raise ShapeError(f"bitcast_convert_type: bool has no bit pattern to reinterpret ({x} to {new_dtype})")
    if old == new:
        return ShapedArray(x.shape, new_dtype)
    if old > new:
        return ShapedArray(x.shape + (old // new,), new_dtype)
    if not x.shape or x.shape[-1] != new // old:
        raise ShapeError(f"bitcast_convert_type: {x} to the wider {np.dtype(new_dtype).name} needs a last axis of "
                         f"{new // old}")
    return ShapedArray(x.shape[:-1], new_dtype)


def _bitcast_impl(x: Any, *, new_dtype: np.dtype) -> np.ndarray:
    out_shape = _bitcast_aval(ShapedArray(np.shape(x), np.asarray(x).dtype), new_dtype=new_dtype).shape
    return np.ascontiguousarray(x).view(new_dtype).reshape(out_shape)


bitcast_convert_type_p = Primitive("bitcast_convert_type", impl=_bitcast_impl, abstract_eval=_bitcast_aval,
                                   arity=1, jvp=NOT_DIFFERENTIABLE)


@bitcast_convert_type_p.def_batch
def _bitcast_batch(args: Sequence[Any], dims: Sequence[int | None], *, new_dtype: np.dtype) -> tuple[Any, int]:
    return bitcast_convert_type_p.bind(to_front(args[0], dims[0]), new_dtype=new_dtype), 0


def bitcast_convert_type(x: Any, new_dtype: np.dtype) -> Any:
    return bitcast_convert_type_p.bind(x, new_dtype=np.dtype(new_dtype))


# --- zeta and igamma_grad_a -------------------------------------------------------------------


def _zeta64(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Hurwitz zeta(x, q) = sum_k (q + k)^-x, with JAX's values off its domain: nan for x < 1
    or a non-finite operand, nan for q < 0 unless x is an integer, and at the poles
    q = 0, -1, ... inf for an even x and nan otherwise."""
    int_x = x == np.floor(x)
    pole = (q <= 0) & (q == np.floor(q))
    bad = (x < 1) | ~np.isfinite(x) | ~np.isfinite(q) | ((q < 0) & ~int_x)
    ok = ~(bad | pole | (x == 1))
    val = _hurwitz_zeta64(np.where(ok, x, 2.0), np.where(ok, q, 1.0))
    at_pole = np.where(int_x & (np.mod(x, 2) == 0), np.inf, np.nan)
    out = np.where(x == 1, np.inf, np.where(pole, at_pole, val))
    return np.where(bad, np.nan, out)


zeta_p = _nary("zeta", _zeta64,                                           # d/dq zeta(x, q) = -x zeta(x + 1, q)
               (None, lambda x, q, y: neg(mul(x, zeta_p.bind(add(x, np.asarray(1, aval(x).dtype)), q)))),
               ("x", "q"))


def _igamma_grad_a64(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dP(a, x)/da: the series (x < a + 1) or Lentz's continued fraction for Q, each carried in
    forward mode (every recurrence variable beside its derivative in ``a``). nan for a <= 0
    or a non-finite operand, 0 at x = 0, as JAX gives."""
    bad = (a <= 0) | (x < 0) | ~np.isfinite(a) | ~np.isfinite(x)
    zero = (x == 0) & ~bad
    aa = np.where(bad | zero, 1.0, a)
    xx = np.where(bad | zero, 0.5, x)
    pref = np.exp(-xx + aa * np.log(xx) - _lgamma64(aa))
    dlog_pref = np.log(xx) - _digamma64(aa)
    series = xx < aa + 1.0
    # P = pref * sum t_n with t_0 = 1/a, t_n = t_{n-1} x / (a + n)
    t = np.where(series, 1.0 / aa, 0.0)
    dt = np.where(series, -1.0 / (aa * aa), 0.0)
    s, ds, denom = t.copy(), dt.copy(), aa.copy()
    for _ in range(_MAXIT):
        denom = denom + 1.0
        dt = (dt - t / denom) * xx / denom
        t = t * xx / denom
        s += t
        ds += dt
        if np.all((np.abs(t) <= np.abs(s) * _EPS) & (np.abs(dt) <= np.abs(ds) * _EPS)):
            break
    dp_series = pref * (dlog_pref * s + ds)
    # Q = pref * h, h the continued fraction with a_i = -i (i - a), b_i = x + 1 - a + 2 i
    b = np.where(series, 1.0, xx + 1.0 - aa)
    c = np.full_like(b, 1.0 / _FPMIN)
    dc = np.zeros_like(b)
    d = 1.0 / b
    dd = d * d
    h, dh = d.copy(), dd.copy()
    for i in range(1, _MAXIT):
        an = -i * (i - aa)
        b = b + 2.0
        den = an * d + b
        dden = i * d + an * dd - 1.0
        tiny = np.abs(den) < _FPMIN
        den, dden = np.where(tiny, _FPMIN, den), np.where(tiny, 0.0, dden)
        cn = b + an / c
        dcn = -1.0 + i / c - an * dc / c / c
        tiny = np.abs(cn) < _FPMIN
        c, dc = np.where(tiny, _FPMIN, cn), np.where(tiny, 0.0, dcn)
        d = 1.0 / den
        dd = -dden * d * d
        delta = d * c
        ddelta = dd * c + d * dc
        dh = dh * delta + h * ddelta
        h = h * delta
        done = (np.abs(delta - 1.0) <= _CF_EPS) & (np.abs(h * ddelta) <= _CF_EPS * np.abs(dh))
        if np.all(done[~series]):
            break
    dp_cf = -pref * (dlog_pref * h + dh)
    out = np.where(series, dp_series, dp_cf)
    return np.where(bad, np.nan, np.where(zero, 0.0, out))


def _igamma_grad_a_dx(a: Any, x: Any, y: Any) -> Any:
    """d/dx dP/da = d/da dP/dx = dP/dx (log x - psi(a))."""
    return mul(_igamma_dx(a, x, None), sub(log(x), digamma_p.bind(a)))


igamma_grad_a_p = _nary("igamma_grad_a", _igamma_grad_a64, (None, _igamma_grad_a_dx), ("a", "x"))


# --- custom_linear_solve ------------------------------------------------------------------------
#
# Inputs: the constants of ``matvec``, of ``solve`` and of ``transpose_solve``, then the
# right-hand side ``b``. Graphs: ``matvec(x, *cm)``, ``solve(b, *cs) -> (x, aux)`` and
# ``transpose_solve(ct, *ct_consts) -> b-cotangent`` (None: reverse mode is refused).


def _split(args: Sequence[Any], counts: tuple[int, int, int]) -> tuple[list, list, list, list]:
    nm, ns, nt = counts
    args = list(args)
    return args[:nm], args[nm:nm + ns], args[nm + ns:nm + ns + nt], args[nm + ns + nt:]


def _ls_impl(*args: Any, matvec: Graph, solve: Graph, transpose_solve: Graph | None,
             counts: tuple[int, int, int], num_aux: int) -> list[Any]:
    _, cs, _, b = _split(args, counts)
    return eval_graph(solve, *b, *cs)


def _ls_aval(*avals: ShapedArray, matvec: Graph, solve: Graph, transpose_solve: Graph | None,
             counts: tuple[int, int, int], num_aux: int) -> tuple[ShapedArray, ...]:
    _, _, _, b = _split(avals, counts)
    if tuple(b) != solve.in_avals[:len(b)]:
        raise ShapeError(f"custom_linear_solve: solve takes {[str(a) for a in solve.in_avals[:len(b)]]}, "
                         f"got b {[str(a) for a in b]}")
    return solve.out_avals


linear_solve_p = Primitive("custom_linear_solve", impl=_ls_impl, abstract_eval=_ls_aval, multiple_results=True)


@linear_solve_p.def_jvp
def _ls_jvp(primals: tuple, tangents: tuple, *, matvec: Graph, solve: Graph, transpose_solve: Graph | None,
            counts: tuple[int, int, int], num_aux: int) -> tuple:
    """x = A(theta)^-1 b, so dx = A^-1 (db - (dA/dtheta . dtheta) x): one more solve of the
    same kind, linear in its right-hand side. The constants of the solves carry no tangent."""

    params = dict(matvec=matvec, solve=solve, transpose_solve=transpose_solve, counts=counts, num_aux=num_aux)
    cm, cs, ct, b = _split(primals, counts)
    tm, _, _, tb = _split(tangents, counts)
    outs = linear_solve_p.bind(*primals, **params)
    n_x = len(outs) - num_aux
    x = outs[:n_x]
    rhs = list(tb)
    if any(t is not None for t in tm):
        _, moved = jvp_flat(lambda *c: eval_graph(matvec, *x, *c), cm, tm)
        rhs = [neg(m) if r is None else sub(r, m) for r, m in zip(rhs, moved)]
    if all(r is None for r in rhs):
        return outs, [None] * len(outs)
    rhs = [instantiate(r, aval(v)) for r, v in zip(rhs, b)]
    t_outs = linear_solve_p.bind(*cm, *cs, *ct, *rhs, **params)
    return outs, list(t_outs[:n_x]) + [None] * num_aux


@linear_solve_p.def_transpose
def _ls_transpose(cts: Sequence[Any], *args: Any, matvec: Graph, solve: Graph, transpose_solve: Graph | None,
                  counts: tuple[int, int, int], num_aux: int) -> tuple:
    cm, cs, ct, b = _split(args, counts)
    if any(is_undefined(a) for a in cm + cs + ct):
        raise TypeError("custom_linear_solve is linear in b only, not in the constants of matvec or solve")
    if transpose_solve is None:
        raise TypeError("custom_linear_solve: reverse-mode differentiation needs transpose_solve "
                        "(or symmetric=True)")
    n_x = len(solve.outvars) - num_aux
    ct_x = [zeros(v.aval) if c is None else c for c, v in zip(cts[:n_x], solve.outvars)]
    ct_b = eval_graph(transpose_solve, *ct_x, *ct)
    return (None,) * (len(args) - len(b)) + tuple(ct_b)


@linear_solve_p.def_batch
def _ls_batch(args: Sequence[Any], dims: Sequence[int | None], *, matvec: Graph, solve: Graph,
              transpose_solve: Graph | None, counts: tuple[int, int, int], num_aux: int) -> tuple:
    """Every graph mapped over the batch: the right-hand side (and so the solution and every
    cotangent) batched on axis 0, each constant as it comes."""
    size = batch_size(args, dims)
    cm, cs, ct, b = _split([to_front(a, d) for a, d in zip(args, dims)], counts)
    dm, ds, dt, _ = _split([None if d is None else 0 for d in dims], counts)
    b = [broadcast_batch(v, d, size) for v, d in zip(b, dims[len(dims) - len(b):])]
    n_x = len(solve.outvars) - num_aux
    x_avals = [ShapedArray((size,) + v.aval.shape, v.aval.dtype) for v in solve.outvars[:n_x]]

    def mapped(g: Graph | None, lead: Sequence[ShapedArray], consts: list[Any], cdims: list[Any]) -> Graph | None:
        if g is None:
            return None
        return batched_graph(g, (0,) * len(lead) + tuple(cdims), size, tuple(lead) + tuple(aval(c) for c in consts))

    b_avals = [aval(v) for v in b]
    new = dict(matvec=mapped(matvec, x_avals, cm, dm), solve=mapped(solve, b_avals, cs, ds),
               transpose_solve=mapped(transpose_solve, x_avals, ct, dt), counts=counts, num_aux=num_aux)
    outs = linear_solve_p.bind(*cm, *cs, *ct, *b, **new)
    return outs, [0] * len(outs)
