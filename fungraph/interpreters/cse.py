"""Common-subexpression elimination: an equation equal to an earlier one (same primitive,
same inputs after substitution, same parameters) reuses the earlier outputs."""

from __future__ import annotations

from fungraph.interpreters.rewrite import Rewriter
from fungraph.ir import Graph, Literal


def _key(a: object) -> object:
    return ("lit", repr(a.value), str(a.aval)) if isinstance(a, Literal) else ("var", id(a))


def cse(graph: Graph) -> Graph:
    rw = Rewriter(graph)
    seen: dict[tuple, tuple] = {}
    for e in graph.eqns:
        ins = rw.inputs(e)
        key = (e.primitive.name, tuple(_key(a) for a in ins), e.params)
        prev = seen.get(key)
        if prev is not None and e.primitive.name != "pure_callback" and not e.effectful:
            for o, p in zip(e.outputs, prev):
                rw.replace(o, p)
            continue
        seen[key] = e.outputs
        rw.keep(e)
    return rw.finish()
