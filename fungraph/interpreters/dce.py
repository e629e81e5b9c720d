"""Dead-code elimination: keep the equations some output depends on, and every effectful one
(except those whose effect only their outputs' readers see)."""

from __future__ import annotations

from fungraph.ir import Graph, Var


def dce(graph: Graph) -> Graph:
    """``graph`` without equations and constants that no output needs."""
    live: set[Var] = {a for a in graph.outvars if isinstance(a, Var)}
    kept = []
    for e in reversed(graph.eqns):
        if e.kept_when_dead or any(o in live for o in e.outputs):
            kept.append(e)
            live.update(a for a in e.inputs if isinstance(a, Var))
    consts = [(v, c) for v, c in zip(graph.constvars, graph.consts) if v in live]
    return Graph(graph.invars, tuple(v for v, _ in consts), tuple(c for _, c in consts), tuple(kept[::-1]),
                 graph.outvars)
