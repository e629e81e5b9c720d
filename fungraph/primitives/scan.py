"""``scan``: a loop of known length over the leading axis of ``xs``, carrying state.

Inputs are ``(*init, *xs, *consts)``; the body graph maps ``(carry, x, consts)`` to
``(carry, y)``. Reverse mode is pure IR: the forward scan stacks the residuals the linear
body needs as extra outputs, and the transposed scan runs backwards over them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Primitive, ShapeError
from fungraph.interpreters.eval import eval_graph
from fungraph.interpreters.graph_transforms import (
    _cached,
    batched_graph_where_needed,
    loop_carry_batched,
    partial_eval_graph,
)
from fungraph.interpreters.jvp import jvp_flat
from fungraph.interpreters.staging import stage
from fungraph.interpreters.transpose import backward_pass
from fungraph.ir import Eqn, Graph, Params, ShapedArray, Var
from fungraph.jit import compile_graph
from fungraph.primitives._batching import batch_size, broadcast_batch, example_aval, to_front
from fungraph.primitives._rules import aval, instantiate, is_undefined, zeros
from fungraph.primitives.elementwise import add
from fungraph.primitives.graph_utils import force_unknown, permute
from fungraph.primitives.shape import transpose


def _split(seq: Sequence[Any], nc: int, nx: int) -> tuple[list[Any], list[Any], list[Any]]:
    return list(seq[:nc]), list(seq[nc:nc + nx]), list(seq[nc + nx:])


def _scan_impl(*args: Any, body: Graph, length: int, reverse: bool, num_carry: int, num_xs: int) -> list[Any]:
    exe = compile_graph(body).executable
    carry, xs, consts = _split([np.asarray(a) for a in args], num_carry, num_xs)
    ys = [np.empty((length,) + a.shape, a.dtype) for a in body.out_avals[num_carry:]]
    views = [[np.empty(a.shape, a.dtype) for a in body.out_avals[:num_carry]] for _ in range(2)]
    for k, i in enumerate(range(length - 1, -1, -1) if reverse else range(length)):
        outs = exe.run(carry + [x[i] for x in xs] + consts, views[k % 2] + [y[i, ...] for y in ys])
        carry = outs[:num_carry]
    return [np.array(c) for c in carry] + ys


def _scan_aval(*avals: ShapedArray, body: Graph, length: int, reverse: bool, num_carry: int,
               num_xs: int) -> tuple[ShapedArray, ...]:
    carry, xs, consts = _split(avals, num_carry, num_xs)
    for x in xs:
        if not x.shape or x.shape[0] != length:
            raise ShapeError(f"scan: every xs leaf needs leading axis {length}, got {x}")
    expected = tuple(carry) + tuple(ShapedArray(x.shape[1:], x.dtype) for x in xs) + tuple(consts)
    if body.in_avals != expected:
        raise ShapeError(f"scan body takes {list(map(str, body.in_avals))}, got {list(map(str, expected))}")
    carry_out = body.out_avals[:num_carry]
    if carry_out != tuple(carry):
        raise ShapeError(f"scan body returns carry {list(map(str, carry_out))}, but the carry is "
                         f"{list(map(str, carry))}")
    return tuple(carry) + tuple(ShapedArray((length,) + a.shape, a.dtype) for a in body.out_avals[num_carry:])


scan_p = Primitive("scan", impl=_scan_impl, abstract_eval=_scan_aval, multiple_results=True)


def _scan_jvp_graph(body: Graph, nc: int, nx: int, t_mask: tuple[bool, ...], ty_mask: tuple[bool, ...]) -> Graph:
    """Body of the JVP scan: (carry, t_carry, x, t_x, consts, t_consts) -> (carry, t_carry, y, t_y)."""

    def build() -> Graph:
        avals = body.in_avals
        groups = _split(list(range(len(avals))), nc, nx)
        order: list[tuple[int, bool]] = []
        for g in groups:
            order += [(i, False) for i in g] + [(i, True) for i in g if t_mask[i]]

        def fun(*args: Any) -> list[Any]:
            primals: list[Any] = [None] * len(avals)
            tangents: list[Any] = [None] * len(avals)
            for (i, is_t), a in zip(order, args):
                (tangents if is_t else primals)[i] = a
            p, t = jvp_flat(lambda *a: eval_graph(body, *a), primals, tangents)
            t_carry = [tc for tc, m in zip(t[:nc], t_mask[:nc]) if m]
            t_ys = [ty for ty, m in zip(t[nc:], ty_mask) if m]
            return p[:nc] + t_carry + p[nc:] + t_ys

        return stage(fun, [avals[i] for i, _ in order])[0]

    return _cached("scan_jvp", body, (nc, nx, t_mask, ty_mask), build)


@scan_p.def_jvp
def _scan_jvp(primals: tuple, tangents: tuple, *, body: Graph, length: int, reverse: bool, num_carry: int,
              num_xs: int) -> tuple:
    nc, nx = num_carry, num_xs
    carry, xs, consts = _split(primals, nc, nx)
    tc, tx, tk = _split(tangents, nc, nx)
    tc = [instantiate(t, aval(c)) if dtypes.is_float(aval(c).dtype) else None for c, t in zip(carry, tc)]
    t_mask = tuple(t is not None for t in tc + tx + tk)
    ty_mask = tuple(dtypes.is_float(a.dtype) for a in body.out_avals[nc:])
    jg = _scan_jvp_graph(body, nc, nx, t_mask, ty_mask)
    present = lambda ts: [t for t in ts if t is not None]  # noqa: E731
    n_tc = len(present(tc))
    n_tx = len(present(tx))
    outs = scan_p.bind(*carry, *present(tc), *xs, *present(tx), *consts, *present(tk), body=jg, length=length,
                       reverse=reverse, num_carry=nc + n_tc, num_xs=nx + n_tx)
    carry_out, t_carry_out = outs[:nc], iter(outs[nc:nc + n_tc])
    ys = outs[nc + n_tc:nc + n_tc + len(ty_mask)]
    t_ys = iter(outs[nc + n_tc + len(ty_mask):])
    t_c = [next(t_carry_out) if m else None for m in t_mask[:nc]]
    t_y = [next(t_ys) if m else None for m in ty_mask]
    return list(carry_out) + list(ys), t_c + t_y


def _scan_partial_eval(eqn: Eqn, unknown: Sequence[bool]) -> tuple[list[Eqn], list[Eqn]]:
    p = eqn.params
    body, nc, nx = p["body"], p["num_carry"], p["num_xs"]
    carry_unk, xs_unk, k_unk = _split(list(unknown), nc, nx)
    while True:
        known_b, lin_b, r, out_unk = partial_eval_graph(body, tuple(carry_unk + xs_unk + k_unk))
        grown = [a or b for a, b in zip(carry_unk, out_unk[:nc])]
        if grown == carry_unk:
            break
        carry_unk = grown
    known_b, lin_b, r, out_unk = force_unknown(known_b, lin_b, r, out_unk, carry_unk + list(out_unk[nc:]))
    n_known_out = len(known_b.outvars) - r
    res_vars = list(known_b.outvars[n_known_out:])
    const_invars = [v for v, u in zip(body.invars[nc + nx:], k_unk) if not u]
    hoisted = [i for i, v in enumerate(res_vars) if v in const_invars]
    stacked = [i for i in range(r) if i not in hoisted]
    known_b = Graph(known_b.invars, known_b.constvars, known_b.consts, known_b.eqns,
                    tuple(known_b.outvars[:n_known_out]) + tuple(res_vars[i] for i in stacked))
    ins = eqn.inputs
    c_in, x_in, k_in = _split(ins, nc, nx)
    k_known_atoms = [a for a, u in zip(k_in, k_unk) if not u]
    hoisted_atoms = [k_known_atoms[const_invars.index(res_vars[i])] for i in hoisted]
    length = p["length"]
    stacked_vars = [Var(ShapedArray((length,) + res_vars[i].aval.shape, res_vars[i].aval.dtype)) for i in stacked]
    outs_c, outs_y = eqn.outputs[:nc], eqn.outputs[nc:]
    y_unk = out_unk[nc:]
    n_ck = sum(not u for u in carry_unk)
    known_eqn = Eqn(scan_p,
                    tuple(a for a, u in zip(c_in, carry_unk) if not u) + tuple(a for a, u in zip(x_in, xs_unk) if not u)
                    + tuple(k_known_atoms),
                    tuple(o for o, u in zip(outs_c, carry_unk) if not u)
                    + tuple(o for o, u in zip(outs_y, y_unk) if not u) + tuple(stacked_vars),
                    Params({"body": known_b, "length": length, "reverse": p["reverse"], "num_carry": n_ck,
                            "num_xs": sum(not u for u in xs_unk)}), eqn.source)
    # linear body invars: (residuals..., carry_u, xs_u, consts_u) -> (carry_u, stacked res, xs_u, hoisted, consts_u)
    n_cu, n_xu = sum(carry_unk), sum(xs_unk)
    order = (list(range(r, r + n_cu)) + stacked + list(range(r + n_cu, r + n_cu + n_xu)) + hoisted
             + list(range(r + n_cu + n_xu, len(lin_b.invars))))
    lin_body = permute(lin_b, order)
    lin_eqn = Eqn(scan_p,
                  tuple(a for a, u in zip(c_in, carry_unk) if u) + tuple(stacked_vars)
                  + tuple(a for a, u in zip(x_in, xs_unk) if u) + tuple(hoisted_atoms)
                  + tuple(a for a, u in zip(k_in, k_unk) if u),
                  tuple(o for o, u in zip(outs_c, carry_unk) if u) + tuple(o for o, u in zip(outs_y, y_unk) if u),
                  Params({"body": lin_body, "length": length, "reverse": p["reverse"], "num_carry": n_cu,
                          "num_xs": len(stacked) + n_xu}), eqn.source)
    return [known_eqn], [lin_eqn]


scan_p.partial_eval = _scan_partial_eval


def _scan_transpose_body(body: Graph, nc: int, nx: int, x_lin: tuple[bool, ...], k_lin: tuple[bool, ...]) -> Graph:
    """(ct_carry, ct_consts_acc, known_x, ct_y, known_consts) -> (ct_carry, ct_consts_acc, ct_x)."""

    def build() -> Graph:
        avals = body.in_avals
        c_av, x_av, k_av = _split(avals, nc, nx)
        y_av = body.out_avals[nc:]
        k_lin_av = [a for a, m in zip(k_av, k_lin) if m]
        x_known_av = [a for a, m in zip(x_av, x_lin) if not m]
        k_known_av = [a for a, m in zip(k_av, k_lin) if not m]
        mask = [True] * nc + list(x_lin) + list(k_lin)
        sizes = [nc, len(k_lin_av), len(x_known_av), len(y_av), len(k_known_av)]

        def fun(*args: Any) -> list[Any]:
            it = iter(args)
            ct_c, acc, xk, ct_y, kk = ([next(it) for _ in range(n)] for n in sizes)
            known = list(xk) + list(kk)
            cts = backward_pass(body, known, list(ct_c) + list(ct_y), mask)
            lin_avals = [a for a, m in zip(avals, mask) if m]
            cts = [zeros(a) if c is None else c for c, a in zip(cts, lin_avals)]
            new_c = cts[:nc]
            ct_x = cts[nc:nc + sum(x_lin)]
            ct_k = cts[nc + sum(x_lin):]
            return new_c + [add(a, b) for a, b in zip(acc, ct_k)] + ct_x

        return stage(fun, list(c_av) + k_lin_av + x_known_av + list(y_av) + k_known_av)[0]

    return _cached("scan_transpose", body, (nc, nx, x_lin, k_lin), build)


@scan_p.def_transpose
def _scan_transpose(cts: Sequence[Any], *args: Any, body: Graph, length: int, reverse: bool, num_carry: int,
                    num_xs: int) -> tuple:
    nc, nx = num_carry, num_xs
    carry, xs, consts = _split(args, nc, nx)
    x_lin = tuple(is_undefined(x) for x in xs)
    k_lin = tuple(is_undefined(k) for k in consts)
    tb = _scan_transpose_body(body, nc, nx, x_lin, k_lin)
    out_avals = _scan_aval(*[aval(a) for a in args], body=body, length=length, reverse=reverse, num_carry=nc,
                           num_xs=nx)
    cts = [zeros(a) if c is None else c for c, a in zip(cts, out_avals)]
    acc0 = [zeros(aval(k)) for k, m in zip(consts, k_lin) if m]
    known_x = [x for x, m in zip(xs, x_lin) if not m]
    known_k = [k for k, m in zip(consts, k_lin) if not m]
    outs = scan_p.bind(*cts[:nc], *acc0, *known_x, *cts[nc:], *known_k, body=tb, length=length,
                       reverse=not reverse, num_carry=nc + len(acc0), num_xs=len(known_x) + len(cts) - nc)
    ct_init = outs[:nc]
    ct_k = iter(outs[nc:nc + len(acc0)])
    ct_x = iter(outs[nc + len(acc0):])
    return (tuple(ct_init) + tuple(next(ct_x) if m else None for m in x_lin)
            + tuple(next(ct_k) if m else None for m in k_lin))


@scan_p.def_batch
def _scan_batch(args: Sequence[Any], dims: Sequence[int | None], *, body: Graph, length: int, reverse: bool,
                num_carry: int, num_xs: int) -> tuple:
    """A carry is batched (axis 0) when it starts batched or the body makes it so (JAX's fixpoint,
    so a loop counter stays unbatched); batched xs are mapped on axis 1, next to the scan axis,
    and so are the ys that depend on the batch."""

    nc, nx = num_carry, num_xs
    size = batch_size(args, dims)
    carry, xs, consts = _split(args, nc, nx)
    dc, dx, dk = _split(dims, nc, nx)
    xs_b = []
    for x, d in zip(xs, dx):
        if d is None:
            xs_b.append(x)
            continue
        xf = to_front(x, d)
        nd = aval(xf).ndim
        xs_b.append(transpose(xf, (1, 0) + tuple(range(2, nd))))
    consts_b = [to_front(k, d) for k, d in zip(consts, dk)]
    other_dims = tuple([None if d is None else 0 for d in dx] + [None if d is None else 0 for d in dk])
    other_avals = [ShapedArray(aval(x).shape[1:], aval(x).dtype) for x in xs_b] + [aval(k) for k in consts_b]

    examples = [example_aval(c, d) for c, d in zip(carry, dc)]

    def body_avals(batched: tuple[bool, ...]) -> tuple[ShapedArray, ...]:
        carry_avals = [ShapedArray(((size,) if b else ()) + a.shape, a.dtype) for a, b in zip(examples, batched)]
        return tuple(carry_avals + other_avals)

    batched = loop_carry_batched(body, tuple(d is not None for d in dc), other_dims, size, body_avals, nc)
    carry_b = [broadcast_batch(c, d, size) if b else c for c, d, b in zip(carry, dc, batched)]
    force = batched + (False,) * (len(body.outvars) - nc)
    bb, out_batched = batched_graph_where_needed(body, tuple(0 if b else None for b in batched) + other_dims, size,
                                                 body_avals(batched), force)
    outs = scan_p.bind(*carry_b, *xs_b, *consts_b, body=bb, length=length, reverse=reverse, num_carry=nc,
                       num_xs=nx)
    return outs, [0 if b else None for b in batched] + [1 if b else None for b in out_batched[nc:]]
