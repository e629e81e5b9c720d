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
        if prev is not None and e.primitive.name != "pure_callback" and not e.effectful and e.primitive.mergeable:
            for o, p in zip(e.outputs, prev):
                rw.replace(o, p)
            continue
        seen[key] = e.outputs
        rw.keep(e)
    return rw.finish()


#: Identity equations that only matter until CSE: barriers, and the labels ``checkpoint``'s
#: policies read (``checkpoint_name``, ``remat_saved``).
STRIPPED = frozenset({"optimization_barrier", "checkpoint_name", "remat_saved"})


def strip_barriers(graph: Graph) -> Graph:
    """Replace each ``optimization_barrier`` (and each ``checkpoint`` label) by its operands
    once CSE has run: the barrier kept CSE from merging a recomputation (``checkpoint``) with
    the values it recomputes, and no pass after CSE merges, so the engines never see it."""
    if not any(e.primitive.name in STRIPPED for e in graph.eqns):
        return graph
    rw = Rewriter(graph)
    for e in graph.eqns:
        if e.primitive.name in STRIPPED:
            for o, a in zip(e.outputs, rw.inputs(e)):
                rw.replace(o, a)
            continue
        rw.keep(e)
    return rw.finish()
