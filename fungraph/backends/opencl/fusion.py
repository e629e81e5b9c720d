"""Choosing fused regions: which equations share one generated kernel.

A region has a *root* (an elementwise or index-map equation, or a reduction) and absorbs its
producers backwards, one at a time in reverse program order (so every in-region consumer of a
candidate has been decided before it). A producer ``P`` (elementwise, select, convert, fma,
integer_pow, comparisons, and the index maps reshape/transpose/broadcast/slice/rev/pad/
concatenate/take) joins when

1. each consumer of ``P``'s outputs is in the region, or (multi-output) ``P``'s output has
   the region's iteration shape, is evaluated once per element, and all its other
   consumers come after the root (the kernel then also writes it); and
2. the cost model says it pays: with ``evals(P)`` the number of evaluations of ``P`` in the
   region (numpy broadcasting or a differently-indexed use re-evaluates it),

       extra  = (evals(P) - size(P)) * op_cost(P)          # recomputation, byte-equivalents
       saved  = 2 * nbytes(P) + LAUNCH_BYTES                # write + read back + one launch
       (saved = nbytes(P) + LAUNCH_BYTES when P's output is still written)
       join   iff  extra <= saved

``op_cost`` is ~0.5 for add/mul/compare, 4 for exp/tanh/sqrt/div, 16 for sin/cos/log/pow
(``codegen.OP_COST``). ``LAUNCH_BYTES`` (16 KiB) is the ~2 us launch overhead at ~8 GB/s,
so small arrays always fuse and a large broadcast of an expensive small value does not.

The schedule keeps program order: a region runs at its root's position. Members precede
the root, consumers of its outputs follow it, so the kernel-level program is topologically
ordered without any re-sorting. View equations left outside every region cost nothing:
their output is an affine alias of their input's storage.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from fungraph.backends.opencl.codegen import VIEW_OPS, Access, is_fusible, op_cost, view_access
from fungraph.ir import Eqn, Graph, ShapedArray, Var

LAUNCH_BYTES = 16384.0
MAX_MULTIPLICITY = 8
MAX_REGION_EQNS = 256
REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin"})


@dataclass
class Region:
    """One kernel's worth of equations; ``outputs`` are the values it writes."""

    root: int
    kind: str                      # "elementwise" or "reduce"
    shape: tuple[int, ...]         # iteration shape (elementwise) or the reduced operand's shape
    members: set[int] = field(default_factory=set)
    outputs: list[Var] = field(default_factory=list)
    saved_bytes: float = 0.0
    extra_bytes: float = 0.0


@dataclass
class FusionPlan:
    regions: list[Region]
    region_of: dict[int, Region]
    aliases: set[int]              # view equations that become free aliases


def _uses(graph: Graph) -> dict[Var, list[int]]:
    uses: dict[Var, list[int]] = {}
    n = len(graph.eqns)
    for i, e in enumerate(graph.eqns):
        for a in e.inputs:
            if isinstance(a, Var):
                uses.setdefault(a, []).append(i)
    for a in graph.outvars:
        if isinstance(a, Var):
            uses.setdefault(a, []).append(n)
    return uses


def aliasable_views(graph: Graph) -> set[int]:
    """View equations whose output is an affine view of their input's storage, assuming every
    computed value is stored contiguously (true for every kernel output)."""
    layout: dict[Var, Access | None] = {}
    ok: set[int] = set()

    def lay(v: Var) -> Access:
        got = layout.get(v)
        return got if got is not None else Access(0, v.aval, 0, _contig(v.aval))

    for i, e in enumerate(graph.eqns):
        if e.primitive.name in VIEW_OPS and isinstance(e.inputs[0], Var):
            a = view_access(e, lay(e.inputs[0]))
            if a is not None:
                layout[e.outputs[0]] = a
                ok.add(i)
    return ok


def _contig(aval: ShapedArray) -> tuple[int, ...]:
    from fungraph.backends.opencl.codegen import contiguous

    return contiguous(aval.shape)


def plan_fusion(graph: Graph, fuse: bool = True) -> FusionPlan:
    eqns = graph.eqns
    uses = _uses(graph)
    producer = {o: i for i, e in enumerate(eqns) for o in e.outputs}
    graph_outs = {a for a in graph.outvars if isinstance(a, Var)}
    alias_ok = aliasable_views(graph)
    assigned: dict[int, Region] = {}
    aliases: set[int] = set()
    regions: list[Region] = []
    for r in range(len(eqns) - 1, -1, -1):
        if r in assigned:
            continue
        e = eqns[r]
        name = e.primitive.name
        if name in REDUCTIONS:
            region = Region(r, "reduce", e.inputs[0].aval.shape, {r}, list(e.outputs))
        elif is_fusible(e):
            if name in VIEW_OPS and r in alias_ok and not any(o in graph_outs for o in e.outputs):
                aliases.add(r)
                continue
            shape = e.outputs[0].aval.shape
            if any(o.aval.shape != shape for o in e.outputs):
                continue
            region = Region(r, "elementwise", shape, {r}, list(e.outputs))
        else:
            continue
        assigned[r] = region
        regions.append(region)
        if fuse:
            _grow(graph, region, uses, producer, graph_outs, assigned)
    regions.sort(key=lambda reg: reg.root)
    return FusionPlan(regions, assigned, aliases)


def _evals(graph: Graph, region: Region, v: Var, uses: dict[Var, list[int]], evals: dict[Var, float]) -> float:
    """How many times the region evaluates ``v`` (uses at the consumer's own index share one
    evaluation; broadcast or re-indexed uses each cost one per consumer evaluation)."""
    same = 0.0
    distinct = 0.0
    for c in uses.get(v, []):
        if c not in region.members:
            continue
        ce = graph.eqns[c]
        if ce.primitive.name in REDUCTIONS:
            same = max(same, float(v.aval.size))
            continue
        ev = max(evals.get(o, 0.0) for o in ce.outputs)
        same_index = (ce.primitive.name not in VIEW_OPS and ce.primitive.name not in ("pad", "concatenate", "take")
                      and all(o.aval.shape == v.aval.shape for o in ce.outputs))
        if same_index:
            same = max(same, ev)
        else:
            distinct += ev * sum(1 for a in ce.inputs if a is v)
    return same + distinct


def _grow(graph: Graph, region: Region, uses: dict[Var, list[int]], producer: dict[Var, int],
          graph_outs: set[Var], assigned: dict[int, Region]) -> None:
    eqns = graph.eqns
    root = eqns[region.root]
    evals: dict[Var, float] = {}
    if region.kind == "elementwise":
        for o in root.outputs:
            evals[o] = float(o.aval.size)
    heap: list[int] = []
    seen: set[int] = set()

    def push_inputs(e: Eqn) -> None:
        for a in e.inputs:
            if isinstance(a, Var) and a in producer:
                p = producer[a]
                if p not in seen:
                    seen.add(p)
                    heapq.heappush(heap, -p)

    push_inputs(root)
    while heap and len(region.members) < MAX_REGION_EQNS:
        p = -heapq.heappop(heap)
        if p in assigned:
            continue
        e = eqns[p]
        if not is_fusible(e):
            continue
        outside = [c for o in e.outputs for c in uses.get(o, []) if c not in region.members]
        written = False
        if outside:
            if region.kind != "elementwise" or any(c <= region.root for c in outside):
                continue
            if any(o.aval.shape != region.shape for o in e.outputs):
                continue
            written = True
        ev = {o: _evals(graph, region, o, uses, evals) for o in e.outputs}
        size = float(e.outputs[0].aval.size)
        if any(x > MAX_MULTIPLICITY * max(size, 1.0) for x in ev.values()):
            continue
        if written and any(x != o.aval.size for o, x in ev.items()):
            continue
        extra = sum(max(0.0, x - o.aval.size) for o, x in ev.items()) * op_cost(e.primitive.name)
        nbytes = sum(o.aval.nbytes for o in e.outputs)
        saved = (nbytes if written else 2.0 * nbytes) + LAUNCH_BYTES
        if e.primitive.name in VIEW_OPS:
            saved = max(saved, LAUNCH_BYTES)
        if extra > saved:
            continue
        region.members.add(p)
        region.saved_bytes += saved
        region.extra_bytes += extra
        assigned[p] = region
        evals.update(ev)
        if written:
            region.outputs.extend(o for o in e.outputs if o not in region.outputs)
        push_inputs(e)
