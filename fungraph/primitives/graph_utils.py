"""Small structural edits of sub-graphs used by the control-flow rules: reorder inputs and
outputs, add unused inputs, and make chosen known outputs flow through a linear graph."""

from __future__ import annotations

from collections.abc import Sequence

from fungraph.ir import Graph, ShapedArray, Var

#: Counters of while loops run (eager and by the CPU engine, which counts its own loops here too),
#: read by tests of the loop's copies and tapes.
LOOP_STATS = {"iterations": 0, "carry_copies": 0, "final_copies": 0, "last_tape_peak": 0, "last_tape_length": 0,
              "max_tape_peak": 0}


def permute(graph: Graph, in_order: Sequence[int] | None = None, out_order: Sequence[int] | None = None) -> Graph:
    """The same program with inputs ``invars[in_order[k]]`` and outputs ``outvars[out_order[k]]``."""
    invars = graph.invars if in_order is None else tuple(graph.invars[i] for i in in_order)
    outvars = graph.outvars if out_order is None else tuple(graph.outvars[i] for i in out_order)
    return Graph(invars, graph.constvars, graph.consts, graph.eqns, outvars)


def with_unused_inputs(graph: Graph, before: Sequence[ShapedArray], after: Sequence[ShapedArray]) -> Graph:
    """``graph`` taking extra unused inputs of the given types before and after its own."""
    pre = tuple(Var(a) for a in before)
    post = tuple(Var(a) for a in after)
    return Graph(pre + graph.invars + post, graph.constvars, graph.consts, graph.eqns, graph.outvars)


def insert_unused_inputs(graph: Graph, position: int, avals: Sequence[ShapedArray]) -> Graph:
    extra = tuple(Var(a) for a in avals)
    inv = graph.invars
    return Graph(inv[:position] + extra + inv[position:], graph.constvars, graph.consts, graph.eqns, graph.outvars)


def force_unknown(known: Graph, linear: Graph, num_res: int, out_unknown: Sequence[bool],
                  want_unknown: Sequence[bool]) -> tuple[Graph, Graph, int, tuple[bool, ...]]:
    """Make outputs with ``want_unknown`` come from the linear graph: a known value there is
    passed to the linear graph as an extra residual and returned unchanged."""
    moved = [j for j, (u, w) in enumerate(zip(out_unknown, want_unknown)) if w and not u]
    if not moved:
        return known, linear, num_res, tuple(out_unknown)
    known_positions = [j for j, u in enumerate(out_unknown) if not u]
    n_known_outs = len(known.outvars) - num_res
    keep = [k for k, j in enumerate(known_positions) if j not in moved]
    moved_atoms = [known.outvars[known_positions.index(j)] for j in moved]
    new_known = Graph(known.invars, known.constvars, known.consts, known.eqns,
                      tuple(known.outvars[k] for k in keep) + tuple(known.outvars[n_known_outs:]) + tuple(moved_atoms))
    new_res = tuple(Var(a.aval) for a in moved_atoms)
    lin_in = linear.invars[:num_res] + new_res + linear.invars[num_res:]
    unknown_iter = iter(linear.outvars)
    moved_iter = iter(new_res)
    outs = []
    for j, u in enumerate(out_unknown):
        if u:
            outs.append(next(unknown_iter))
        elif j in moved:
            outs.append(next(moved_iter))
    new_linear = Graph(lin_in, linear.constvars, linear.consts, linear.eqns, tuple(outs))
    new_unknown = tuple(u or j in moved for j, u in enumerate(out_unknown))
    return new_known, new_linear, num_res + len(moved), new_unknown
