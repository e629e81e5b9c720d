"""Elementwise fusion regions: group chains of elementwise equations of one output shape into
a single ``fusion`` equation holding the chain as a sub-graph.

A backend runs a region as one unit: the CPU engine streams it through cache-sized chunks
(every op of the chain on rows ``[i, i + k)`` before moving on), so a chain of n ops reads
its inputs once from memory and writes its outputs once. A region is a scheduling hint with
no meaning of its own: evaluating, differentiating or batching a ``fusion`` equation is the
same as doing so to its body, and ``inline_calls`` dissolves it again.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from fungraph.core import Primitive, get_primitive
from fungraph.interpreters.eval import eval_graph
from fungraph.ir import Atom, Eqn, Graph, Literal, Params, ShapedArray, Var


def _fusion_impl(*args: Any, call: Graph) -> list[Any]:
    return eval_graph(call, *args)


def _fusion_aval(*avals: ShapedArray, call: Graph) -> tuple[ShapedArray, ...]:
    return call.out_avals


def _fusion_inplace(eqn: Eqn, j: int) -> tuple[int, ...]:
    """Output ``j`` may overwrite an input of its type that no equation of the body reads after
    the one producing ``j``: a chunk of the input is then dead once that chunk of the output is
    written (the body runs chunk by chunk, the same rows of both)."""
    body: Graph = eqn.params["call"]
    out = body.outvars[j]
    producer = next(i for i, e in enumerate(body.eqns) if out in e.outputs)
    read_later = {a for e in body.eqns[producer + 1:] for a in e.inputs if isinstance(a, Var)}
    return tuple(k for k, v in enumerate(body.invars) if v.aval == out.aval and v not in read_later)


fusion_p = Primitive("fusion", impl=_fusion_impl, abstract_eval=_fusion_aval, multiple_results=True,
                     inplace_rule=_fusion_inplace)


# A region differentiates and batches as the call it stands for: jit_call, a layer above, found by name.
@fusion_p.def_jvp
def _fusion_jvp(primals: tuple, tangents: tuple, *, call: Graph) -> tuple:
    return get_primitive("jit_call").rule("jvp")(primals, tangents, call=call, name="fusion", backend="cpu")


@fusion_p.def_transpose
def _fusion_transpose(cts: Sequence[Any], *args: Any, call: Graph) -> tuple:
    return get_primitive("jit_call").rule("transpose")(cts, *args, call=call, name="fusion", backend="cpu")


@fusion_p.def_batch
def _fusion_batch(args: Sequence[Any], dims: Sequence[int | None], *, call: Graph) -> tuple:
    return get_primitive("jit_call").rule("batch")(args, dims, call=call, name="fusion", backend="cpu")


def _fusible(e: Eqn, min_bytes: int) -> bool:
    return (e.primitive.elementwise and not e.effectful and len(e.outputs) == 1
            and e.outputs[0].aval.nbytes >= min_bytes)


#: Equations after an outside read of a region's value during which the region may still grow.
READ_WINDOW = 8


def find_regions(graph: Graph, min_bytes: int = 0) -> list[list[int]]:
    """Groups of equation indices, in graph order, each an elementwise chain of one output
    shape whose contraction to one node keeps the graph acyclic.

    Equations are visited in order; one joins the region of a producer of the same shape
    unless some other input depends on that region through an equation outside it (which
    would make the fused node both before and after that equation), or an equation outside
    the region read one of its values more than :data:`READ_WINDOW` equations before: the
    fused node runs where its last member was, so joining holds that reader back, and a
    backward-pass use of a forward value (a saved ``checkpoint`` value) would pull the forward
    region, and whatever it waits for, out of order, keeping both values alive in between.
    ``deps[v]`` is the set of regions ``v`` depends on, as a bit mask."""
    region_of: dict[int, int] = {}
    producer: dict[Var, int] = {}
    deps: dict[Var, int] = {}
    regions: list[list[int]] = []
    shapes: list[tuple[int, ...]] = []
    read_at: dict[int, int] = {}
    for i, e in enumerate(graph.eqns):
        var_ins = [a for a in e.inputs if isinstance(a, Var)]
        mask = 0
        for a in var_ins:
            mask |= deps.get(a, 0)
        r = None
        if _fusible(e, min_bytes):
            shape = e.outputs[0].aval.shape
            for a in var_ins:
                cand = region_of.get(producer.get(a, -1))
                if cand is None or shapes[cand] != shape or i - read_at.get(cand, i) > READ_WINDOW:
                    continue
                if all(region_of.get(producer.get(b, -1)) == cand or not (deps.get(b, 0) >> cand) & 1
                       for b in var_ins):
                    r = cand
                    break
            if r is None:
                r = len(regions)
                regions.append([])
                shapes.append(shape)
            regions[r].append(i)
            region_of[i] = r
            mask |= 1 << r
        for a in var_ins:
            read = region_of.get(producer.get(a, -1))
            if read is not None and read != r:
                read_at.setdefault(read, i)
        for o in e.outputs:
            producer[o] = i
            deps[o] = mask
    return [r for r in regions if len(r) >= 2]


def _region_eqn(graph: Graph, members: list[int], used_outside: set[Var]) -> Eqn:
    """One ``fusion`` equation computing ``members``: inputs are the values they read from
    outside, outputs the values used outside (or returned)."""
    member_eqns = [graph.eqns[i] for i in members]
    defined = {o for e in member_eqns for o in e.outputs}
    inputs: dict[Var, Var] = {}
    for e in member_eqns:
        for a in e.inputs:
            if isinstance(a, Var) and a not in defined and a not in inputs:
                inputs[a] = Var(a.aval)
    rename: dict[Var, Var] = dict(inputs)
    body_eqns = []
    for e in member_eqns:
        ins: tuple[Atom, ...] = tuple(a if isinstance(a, Literal) else rename[a] for a in e.inputs)
        outs = tuple(Var(o.aval) for o in e.outputs)
        rename.update(zip(e.outputs, outs))
        body_eqns.append(Eqn(e.primitive, ins, outs, e.params, e.source))
    outputs = [o for e in member_eqns for o in e.outputs if o in used_outside]
    body = Graph(tuple(inputs.values()), (), (), tuple(body_eqns), tuple(rename[o] for o in outputs))
    return Eqn(fusion_p, tuple(inputs), tuple(outputs), Params({"call": body}), member_eqns[-1].source)


def fuse_regions(graph: Graph, min_bytes: int = 0) -> Graph:
    """Replace each elementwise region (see :func:`find_regions`) by one ``fusion`` equation.

    The contracted graph is re-sorted topologically, keeping every unit as close to its
    original position (its last member's) as dependencies allow."""
    regions = find_regions(graph, min_bytes)
    if not regions:
        return graph
    unit_of = list(range(len(graph.eqns)))
    for members in regions:
        for i in members:
            unit_of[i] = members[-1]
    users: dict[Var, set[int]] = {}
    for i, e in enumerate(graph.eqns):
        for a in e.inputs:
            if isinstance(a, Var):
                users.setdefault(a, set()).add(unit_of[i])
    returned = {a for a in graph.outvars if isinstance(a, Var)}
    used_outside = {o for members in regions for i in members for o in graph.eqns[i].outputs
                    if o in returned or users.get(o, set()) - {members[-1]}}
    units: dict[int, Eqn] = {}
    for members in regions:
        units[members[-1]] = _region_eqn(graph, members, used_outside)
    for i, e in enumerate(graph.eqns):
        if unit_of[i] == i and units.get(i) is None:
            units[i] = e
    return Graph(graph.invars, graph.constvars, graph.consts, _topological(units), graph.outvars)


def _topological(units: dict[int, Eqn]) -> tuple[Eqn, ...]:
    """Kahn's algorithm over the units, smallest original position first."""
    made_by: dict[Var, int] = {}
    for u, e in units.items():
        for o in e.outputs:
            made_by[o] = u
    waits = {u: {made_by[a] for a in e.inputs if isinstance(a, Var) and a in made_by} - {u}
             for u, e in units.items()}
    users: dict[int, list[int]] = {u: [] for u in units}
    for u, ds in waits.items():
        for d in ds:
            users[d].append(u)
    ready = [u for u, ds in waits.items() if not ds]
    heapq.heapify(ready)
    order = []
    while ready:
        u = heapq.heappop(ready)
        order.append(units[u])
        for w in users[u]:
            waits[w].discard(u)
            if not waits[w]:
                heapq.heappush(ready, w)
    if len(order) != len(units):
        raise AssertionError("fusion regions made the graph cyclic")
    return tuple(order)
