"""Inline call-like equations (nested jit, custom derivative wrappers, remat) into the graph,
so the optimiser and the planner see one flat program."""

from __future__ import annotations

from fungraph.ir import Atom, Eqn, Graph, Literal, Var

CALL_PRIMITIVES = frozenset({"jit_call", "custom_jvp_call", "custom_vjp_call", "custom_vmap_call", "remat"})


def inline_calls(graph: Graph) -> Graph:
    if not any(e.primitive.name in CALL_PRIMITIVES for e in graph.eqns):
        return graph
    eqns: list[Eqn] = []
    consts: dict[Var, object] = dict(zip(graph.constvars, graph.consts))
    subst: dict[Var, Atom] = {}

    def atom(a: Atom) -> Atom:
        return subst.get(a, a) if isinstance(a, Var) else a

    for e in graph.eqns:
        ins = tuple(atom(a) for a in e.inputs)
        if e.primitive.name not in CALL_PRIMITIVES:
            eqns.append(Eqn(e.primitive, ins, e.outputs, e.params, e.source))
            continue
        inner = inline_calls(e.params["call"])
        rename: dict[Var, Atom] = dict(zip(inner.invars, ins))
        for v, c in zip(inner.constvars, inner.consts):
            nv = Var(v.aval)
            consts[nv] = c
            rename[v] = nv
        for ie in inner.eqns:
            new_ins = tuple(rename.get(a, a) if isinstance(a, Var) else a for a in ie.inputs)
            new_outs = tuple(Var(o.aval) for o in ie.outputs)
            rename.update(zip(ie.outputs, new_outs))
            eqns.append(Eqn(ie.primitive, new_ins, new_outs, ie.params, ie.source))
        for o, a in zip(e.outputs, inner.outvars):
            subst[o] = a if isinstance(a, Literal) else rename[a]
    outs = tuple(atom(a) for a in graph.outvars)
    return Graph(graph.invars, tuple(consts), tuple(consts.values()), tuple(eqns), outs)
