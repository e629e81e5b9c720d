"""Derivatives of any order through ``while_loop``'s tape primitives.

A tape hides how its residuals depend on the forward loop's inputs, so its readers
(``while_lin``, ``while_bwd``) take those inputs too (``n_deps``) and the rules here rebuild
the loops they stand for from them: the JVP of ``while_fwd`` and ``while_lin`` re-run the
forward loop as ``while`` equations, which differentiate again by ``while``'s own rules (a new
tape, with the same checkpoint policy). The JVP of ``while_bwd`` is ``while_bwd_lin``, linear
in the tangents: it runs a backward loop over the tape of the forward loop's JVP (O(n), the
checkpoint policy kept), and its transpose is a forward loop plus the gradient of one, so
reverse over reverse mode (``grad(grad(f))``) stays O(n) too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Primitive
from fungraph.ir import Graph, ShapedArray
from fungraph.primitives._rules import aval, instantiate, zeros
from fungraph.primitives.graph_utils import force_unknown
from fungraph.primitives.while_loop import (
    _stage,
    n_deps,
    while_bwd_p,
    while_fwd_p,
    while_lin_p,
    while_p,
)


@dataclass(frozen=True)
class _Forward:
    """The forward loop of a tape: ``cond(carry, cc)``, ``body(carry, bc) -> (carry, res)``,
    over a batch of independent lanes (finished lanes keep their carry) when ``batched``."""

    cond: Graph
    body: Graph
    n_cc: int
    n_bc: int
    num_res: int
    policy: str
    batched: bool

    @staticmethod
    def of(params: dict[str, Any], num_res: int, batched: bool) -> _Forward:
        return _Forward(params["fwd_cond"], params["fwd_body"], params["fwd_n_cc"], params["fwd_n_bc"], num_res,
                        params["policy"], batched)

    @property
    def num_deps(self) -> int:
        return n_deps(self.body, self.num_res, self.n_cc, self.n_bc)

    def split(self, deps: Sequence[Any]) -> tuple[list[Any], list[Any], list[Any]]:
        n_cc, n_bc = self.n_cc, self.n_bc
        return list(deps[:n_cc]), list(deps[n_cc:n_cc + n_bc]), list(deps[n_cc + n_bc:])

    def step(self, carry: Sequence[Any], cc: Sequence[Any], bc: Sequence[Any]) -> tuple[list[Any], list[Any], Any]:
        """One iteration: the next carry, its residuals, and (batched) which lanes ran."""
        from fungraph.interpreters.eval import eval_graph

        outs = eval_graph(self.body, *carry, *bc)
        nc = len(outs) - self.num_res
        if not self.batched:
            return outs[:nc], outs[nc:], None
        pred = eval_graph(self.cond, *carry, *cc)[0]
        return _lanes(pred, outs[:nc], carry), outs[nc:], pred

    def loop(self, cc: Sequence[Any], bc: Sequence[Any], carry: Sequence[Any]) -> list[Any]:
        """The final carry, as a ``while`` equation."""
        from fungraph.interpreters.eval import eval_graph
        from fungraph.primitives.reductions import reduce_max_p

        nc, n_cc = len(carry), len(cc)

        def cond(*a: Any) -> list[Any]:
            pred = eval_graph(self.cond, *a)[0]
            return [reduce_max_p.bind(pred, axes=tuple(range(aval(pred).ndim)))] if self.batched else [pred]

        def body(*a: Any) -> list[Any]:
            return self.step(a[:nc], a[nc:nc + n_cc], a[nc + n_cc:])[0]

        c_av, cc_av, bc_av = [aval(c) for c in carry], [aval(c) for c in cc], [aval(b) for b in bc]
        return list(while_p.bind(*cc, *cc, *bc, *carry, cond_graph=_stage(cond, c_av + cc_av),
                                 body_graph=_stage(body, c_av + cc_av + bc_av), n_cc=n_cc, n_bc=n_cc + len(bc),
                                 policy=self.policy))


def _lanes(pred: Any, new: Sequence[Any], old: Sequence[Any]) -> list[Any]:
    """``new`` in the lanes where ``pred`` holds, ``old`` elsewhere (lanes on axis 0)."""
    from fungraph.primitives.elementwise import select
    from fungraph.primitives.shape import reshape

    shape = aval(pred).shape
    return [select(reshape(pred, shape + (1,) * (aval(o).ndim - len(shape))), x, o) for x, o in zip(new, old)]


@while_fwd_p.def_jvp
def _fwd_jvp(primals: tuple, tangents: tuple, *, cond_graph: Graph, body_graph: Graph, n_cc: int, n_bc: int,
             num_res: int, policy: str, batched: bool = False) -> tuple:
    """The carry and its tangent come from the JVP of the loop the tape records, run again;
    the tape itself is recorded only if a reader of it remains (else DCE drops the equation)."""
    from fungraph.interpreters.jvp import jvp_flat

    outs = while_fwd_p.bind(*primals, cond_graph=cond_graph, body_graph=body_graph, n_cc=n_cc, n_bc=n_bc,
                            num_res=num_res, policy=policy, batched=batched)
    fwd = _Forward(cond_graph, body_graph, n_cc, n_bc, num_res, policy, batched)
    p, t = jvp_flat(lambda *d: fwd.loop(*fwd.split(d)), primals, tangents, instantiate=False)
    return list(p) + list(outs[-2:]), list(t) + [None, None]


def _lin_loop(fwd: _Forward, lin_body: Graph, deps: Sequence[Any], tk: Sequence[Any], tc: Sequence[Any]) -> list[Any]:
    """What ``while_lin`` computes, with the residuals recomputed alongside: the forward loop
    and ``lin_body`` stepped together while the forward loop's condition holds."""
    from fungraph.interpreters.eval import eval_graph
    from fungraph.primitives.reductions import reduce_max_p

    cc, bc, carry = fwd.split(deps)
    nc, n_cc, n_bc, ns = len(carry), len(cc), len(bc), len(carry) + len(tc)

    def cond(*a: Any) -> list[Any]:
        pred = eval_graph(fwd.cond, *a[:nc], *a[ns:])[0]
        return [reduce_max_p.bind(pred, axes=tuple(range(aval(pred).ndim)))] if fwd.batched else [pred]

    def body(*a: Any) -> list[Any]:
        c, t = a[:nc], a[nc:ns]
        k_cc, k_bc, k_tk = a[ns:ns + n_cc], a[ns + n_cc:ns + n_cc + n_bc], a[ns + n_cc + n_bc:]
        new, res, pred = fwd.step(c, k_cc, k_bc)
        t_new = eval_graph(lin_body, *res, *t, *k_tk)
        return new + (t_new if pred is None else _lanes(pred, t_new, t))

    s_av = [aval(x) for x in list(carry) + list(tc)]
    cc_av = [aval(x) for x in cc]
    outs = while_p.bind(*cc, *cc, *bc, *tk, *carry, *tc, cond_graph=_stage(cond, s_av + cc_av),
                        body_graph=_stage(body, s_av + cc_av + [aval(x) for x in list(bc) + list(tk)]),
                        n_cc=n_cc, n_bc=n_cc + n_bc + len(tk), policy=fwd.policy)
    return list(outs[nc:])


@while_lin_p.def_jvp
def _lin_jvp(primals: tuple, tangents: tuple, *, lin_body: Graph, num_res: int, n_bcu: int,
             batched: bool = False, **params: Any) -> tuple:
    from fungraph.interpreters.jvp import jvp_flat

    fwd = _Forward.of(params, num_res, batched)
    nd = fwd.num_deps

    def run(*a: Any) -> list[Any]:
        return _lin_loop(fwd, lin_body, a[:nd], a[nd:nd + n_bcu], a[nd + n_bcu:])

    return jvp_flat(run, primals[2:], tangents[2:], instantiate=False)




# --- the JVP of the backward loop -----------------------------------------------------------


def _inexact(avals: Sequence[ShapedArray]) -> list[bool]:
    return [dtypes.is_inexact(a.dtype) for a in avals]


def _pick(xs: Sequence[Any], mask: Sequence[bool]) -> list[Any]:
    return [x for x, m in zip(xs, mask) if m]


def _tangent_loop(fwd: _Forward, lin_body: Graph) -> tuple[_Forward, Graph]:
    """The forward loop of ``(carry, dcarry)`` with ``bc`` and ``dbc`` (inputs ``(cc, bc, dbc,
    carry, dcarry)``, tangents for the inexact ones) and the JVP of ``lin_body`` in its
    residuals and linear inputs, ``((tc, dtc), (tk, dtk)) -> (tc', dtc')``, linear in those.
    What that JVP computes from the residuals and their tangents alone is moved into the
    forward body, which records it on the tape in their place."""
    from fungraph.interpreters.graph_transforms import partial_eval_graph

    lin2, n_known = _tangent_lin_body(lin_body, fwd.num_res)
    known, linear, r, out_unknown = partial_eval_graph(lin2, tuple([False] * n_known + [True] * (
        len(lin2.invars) - n_known)))
    known, linear, r, _ = force_unknown(known, linear, r, out_unknown, [True] * len(out_unknown))
    return _tangent_forward(fwd, known), linear


def _tangent_forward(fwd: _Forward, residuals: Graph) -> _Forward:
    """The JVP'd forward loop whose body returns ``residuals(res, dres)`` as its residuals."""
    from fungraph.interpreters.eval import eval_graph
    from fungraph.interpreters.jvp import jvp_flat

    body, nc = fwd.body, len(fwd.body.outvars) - fwd.num_res
    c_av, b_av, r_av = body.in_avals[:nc], body.in_avals[nc:], body.out_avals[nc:]
    fc, fb, fr = _inexact(c_av), _inexact(b_av), _inexact(r_av)
    nfc, nb = sum(fc), len(b_av)

    def step(*a: Any) -> list[Any]:
        dc, db = iter(a[nc:nc + nfc]), iter(a[nc + nfc + nb:])
        tangents = [next(dc) if f else None for f in fc] + [next(db) if f else None for f in fb]
        p, t = jvp_flat(lambda *z: eval_graph(body, *z), list(a[:nc]) + list(a[nc + nfc:nc + nfc + nb]), tangents)
        return p[:nc] + _pick(t[:nc], fc) + eval_graph(residuals, *p[nc:], *_pick(t[nc:], fr))

    def cond(*a: Any) -> list[Any]:
        return eval_graph(fwd.cond, *a[:nc], *a[nc + nfc:])

    dc_av, db_av = _pick(c_av, fc), _pick(b_av, fb)
    body2 = _stage(step, list(c_av) + dc_av + list(b_av) + db_av)
    cond2 = _stage(cond, list(c_av) + dc_av + list(fwd.cond.in_avals[nc:]))
    return _Forward(cond2, body2, fwd.n_cc, fwd.n_bc + len(db_av), len(residuals.outvars), fwd.policy, fwd.batched)


def _tangent_lin_body(lin_body: Graph, num_res: int) -> tuple[Graph, int]:
    """The JVP of ``lin_body`` in its residuals and linear inputs: ``(res, dres, (tc, dtc),
    (tk, dtk)) -> (tc', dtc')``, and how many inputs precede the linear ones."""
    from fungraph.interpreters.eval import eval_graph
    from fungraph.interpreters.jvp import jvp_flat

    r_av, rest = lin_body.in_avals[:num_res], lin_body.in_avals[num_res:]
    fr = _inexact(r_av)
    nc = len(lin_body.outvars)
    tc_av, tk_av = list(rest[:nc]), list(rest[nc:])
    nk, nfr = len(tk_av), sum(fr)

    def fn(*a: Any) -> list[Any]:
        dres = iter(a[num_res:num_res + nfr])
        lin = a[num_res + nfr:]
        tc, dtc, tk, dtk = lin[:nc], lin[nc:2 * nc], lin[2 * nc:2 * nc + nk], lin[2 * nc + nk:]
        p, t = jvp_flat(lambda *z: eval_graph(lin_body, *z), list(a[:num_res]) + list(tc) + list(tk),
                        [next(dres) if f else None for f in fr] + list(dtc) + list(dtk))
        return list(p) + list(t)

    return _stage(fn, list(r_av) + _pick(r_av, fr) + tc_av + tc_av + tk_av + tk_av), num_res + nfr


def _diff_positions(fwd: _Forward, deps: Sequence[Any]) -> list[int]:
    """The positions among the forward loop's inputs whose tangents the backward loop's JVP
    takes: its inexact body constants, then its inexact carries."""
    return [i for i in range(fwd.n_cc, len(deps)) if dtypes.is_inexact(aval(deps[i]).dtype)]


def _bwd_tangent(fwd: _Forward, lin_body: Graph, k_avals: Sequence[ShapedArray], deps: Sequence[Any],
                 ct: Sequence[Any], d_deps: Sequence[Any], dct: Sequence[Any]) -> list[Any]:
    """The tangent of ``while_bwd``'s output, ``J(x)^T dct + d/dx[J(x)^T ct] dx``: the backward
    loop of the JVP'd linear body over the tape of the JVP'd forward loop, run with the
    cotangents swapped (``dct`` for the outputs, ``ct`` for their tangents); its other half of
    outputs, ``J^T ct``, is unused."""
    fwd2, lin2 = _tangent_loop(fwd, lin_body)
    cc, bc, carry = fwd.split(deps)
    pos = _diff_positions(fwd, deps)
    n_bc_d = sum(p < fwd.n_cc + fwd.n_bc for p in pos)
    deps2 = cc + bc + list(d_deps[:n_bc_d]) + carry + list(d_deps[n_bc_d:])
    outs = while_fwd_p.bind(*deps2, cond_graph=fwd2.cond, body_graph=fwd2.body, n_cc=fwd2.n_cc, n_bc=fwd2.n_bc,
                            num_res=fwd2.num_res, policy=fwd.policy, batched=fwd.batched)
    back = while_bwd_p.bind(outs[-2], outs[-1], *deps2, *dct, *ct, lin_body=lin2, num_res=fwd2.num_res,
                            k_avals=tuple(k_avals) * 2, fwd_cond=fwd2.cond, fwd_body=fwd2.body, fwd_n_cc=fwd2.n_cc,
                            fwd_n_bc=fwd2.n_bc, policy=fwd.policy, batched=fwd.batched)
    nc, nk = len(ct), len(k_avals)
    return list(back[:nc]) + list(back[2 * nc:2 * nc + nk])


def _bwd_lin_parts(args: Sequence[Any], num_res: int, params: dict[str, Any]) -> tuple:
    """``while_bwd_lin``'s inputs ``(deps, ct, d_deps, dct)``, split."""
    fwd = _Forward.of(params, num_res, params.get("batched", False))
    nd = fwd.num_deps
    deps = args[:nd]
    n_d = len(_diff_positions(fwd, deps))
    nc = (len(args) - nd - n_d) // 2
    rest = args[nd:]
    return fwd, list(deps), list(rest[:nc]), list(rest[nc:nc + n_d]), list(rest[nc + n_d:])


def _bwd_lin_impl(*args: Any, lin_body: Graph, num_res: int, k_avals: tuple, **params: Any) -> list[Any]:
    fwd, deps, ct, d_deps, dct = _bwd_lin_parts(args, num_res, params)
    return _bwd_tangent(fwd, lin_body, k_avals, deps, ct, d_deps, dct)


def _bwd_lin_aval(*avals: ShapedArray, lin_body: Graph, num_res: int, k_avals: tuple,
                  **params: Any) -> tuple[ShapedArray, ...]:
    return tuple(lin_body.out_avals) + tuple(k_avals)


#: ``while_bwd_lin(deps, ct, d_deps, dct)``: the tangent of ``while_bwd``, linear in
#: ``(d_deps, dct)``; ``d_deps`` are the tangents of the inexact body constants and carries.
while_bwd_lin_p = Primitive("while_bwd_lin", impl=_bwd_lin_impl, abstract_eval=_bwd_lin_aval,
                            multiple_results=True)


def _bwd_tangent_fun(args: Sequence[Any], lin_body: Graph, num_res: int, k_avals: tuple,
                     params: dict[str, Any]) -> Any:
    """``while_bwd_lin``'s computation as a function of its inputs."""
    fwd, deps, ct, d_deps, _ = _bwd_lin_parts(args, num_res, params)
    nd, nc, n_d = len(deps), len(ct), len(d_deps)

    def run(*a: Any) -> list[Any]:
        return _bwd_tangent(fwd, lin_body, k_avals, a[:nd], a[nd:nd + nc], a[nd + nc:nd + nc + n_d],
                            a[nd + nc + n_d:])

    return run


@while_bwd_lin_p.def_jvp
def _bwd_lin_jvp(primals: tuple, tangents: tuple, *, lin_body: Graph, num_res: int, k_avals: tuple,
                 **params: Any) -> tuple:
    from fungraph.interpreters.jvp import jvp_flat

    run = _bwd_tangent_fun(primals, lin_body, num_res, k_avals, params)
    return jvp_flat(run, primals, tangents, instantiate=False)


@while_bwd_lin_p.def_batch
def _bwd_lin_batch(args: Sequence[Any], dims: Sequence[int | None], *, lin_body: Graph, num_res: int,
                   k_avals: tuple, **params: Any) -> tuple:
    from fungraph.interpreters.batching import vmap_flat
    from fungraph.primitives._batching import batch_size

    run = _bwd_tangent_fun(args, lin_body, num_res, k_avals, params)
    n_out = len(lin_body.outvars) + len(k_avals)
    outs = vmap_flat(run, args, dims, [0] * n_out, batch_size(args, dims))
    return outs, [0] * n_out


@while_bwd_lin_p.def_transpose
def _bwd_lin_transpose(cts: Sequence[Any], *args: Any, lin_body: Graph, num_res: int, k_avals: tuple,
                       **params: Any) -> tuple:
    """``T(dx, dct) = J^T dct + M dx`` transposes to ``dct: J out`` (the forward linear loop)
    and ``dx: M^T out``, the gradient in ``x`` of ``<ct, J(x) out>``."""
    from fungraph.interpreters.transpose import linearize_flat, transpose_linear
    from fungraph.primitives.elementwise import add, mul
    from fungraph.primitives.reductions import reduce_sum

    fwd, deps, ct, d_deps, dct = _bwd_lin_parts(args, num_res, params)
    nc = len(ct)
    outs = [zeros(a) if c is None else c for c, a in zip(cts, _bwd_lin_aval(lin_body=lin_body, num_res=num_res,
                                                                         k_avals=k_avals))]
    out_c, out_k = outs[:nc], outs[nc:]
    ct_dct = _lin_loop(fwd, lin_body, deps, out_k, out_c)
    pos = _diff_positions(fwd, deps)

    def pairing(*xs: Any) -> list[Any]:
        full = list(deps)
        for p, x in zip(pos, xs):
            full[p] = x
        total = None
        for o, c in zip(_lin_loop(fwd, lin_body, full, out_k, out_c), ct):
            term = reduce_sum(mul(o, c), tuple(range(aval(o).ndim)))
            total = term if total is None else add(total, term)
        return [total]

    xs = [deps[p] for p in pos]
    _, lin, _, res = linearize_flat(pairing, xs, [aval(x) for x in xs], [True] * len(xs))
    seed = np.ones((), aval(ct[0]).dtype if ct else np.float64)
    ct_dx = [zeros(aval(x)) if g is None else g for g, x in zip(transpose_linear(lin, res, [seed]), xs)]
    return (None,) * (len(deps) + nc) + tuple(ct_dx) + tuple(ct_dct)


@while_bwd_p.def_jvp
def _bwd_jvp(primals: tuple, tangents: tuple, *, lin_body: Graph, num_res: int, k_avals: tuple,
             batched: bool = False, **params: Any) -> tuple:
    """The primal reads the tape; the tangent is ``while_bwd_lin``."""
    outs = while_bwd_p.bind(*primals, lin_body=lin_body, num_res=num_res, k_avals=k_avals, batched=batched,
                            **params)
    fwd = _Forward.of(params, num_res, batched)
    nd = fwd.num_deps
    deps, ct = primals[2:2 + nd], primals[2 + nd:]
    d_deps = [instantiate(tangents[2 + p], aval(deps[p])) for p in _diff_positions(fwd, deps)]
    dct = [instantiate(t, aval(c)) for t, c in zip(tangents[2 + nd:], ct)]
    t = while_bwd_lin_p.bind(*deps, *ct, *d_deps, *dct, lin_body=lin_body, num_res=num_res,
                             k_avals=k_avals, batched=batched, **params)
    return outs, list(t)


for _prim in (while_fwd_p, while_lin_p, while_bwd_lin_p):
    _prim.joint_jvp = True
