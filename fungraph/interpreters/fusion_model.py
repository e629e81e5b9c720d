"""The cost-model policy for fusion regions: which equations share one kernel, searched under
a cost model over the whole plan (the way Dali searches kernel fusions with A*). This module
holds the plan's data structures, the rules a region obeys, the cost model, greedy growth, the
checks and the report; the search over fusion decisions is in ``fusion_search``, and
``regions.fuse_regions`` turns a plan into ``fusion`` equations. What may be a member, which
reductions may be roots, which members re-index and what each operation costs come from the
backend's :class:`~fungraph.interpreters.regions.FusionCapability` (the OpenCL engine's today).

**Regions.** A region has a *root* (an elementwise or index-map equation, or a reduction) and
*members* that precede it: producers (elementwise, select, convert, fma, integer_pow,
comparisons, and the index maps reshape/transpose/broadcast/slice/rev/pad/concatenate/take)
evaluated inside the root's kernel. Reductions are only ever roots. A producer ``P`` may join
a region that holds one of its consumers when

1. every consumer of ``P``'s outputs is in the region, or (multi-output) the region is
   elementwise, ``P``'s outputs have the region's iteration shape and are evaluated once per
   element, and every other consumer comes after the root (the kernel then also writes them);
2. the region evaluates ``P`` at most ``MAX_MULTIPLICITY`` times per element of ``P``, and
   holds at most ``MAX_REGION_EQNS`` equations chained at most ``MAX_REGION_DEPTH`` deep
   (the kernel emitter recurses along the chain).

``evals(P)`` counts how often the region evaluates ``P``: uses at the consumer's own index
share one evaluation; a broadcast or re-indexed use costs one per evaluation of the consumer.
A producer that joins no region is *materialised*: it becomes a root of its own, or, for a view
whose output is an affine view of its input's storage (the capability's ``free_views``), a free alias.

**Schedule.** A region runs at its root's position: members precede the root and consumers
of its outputs follow it (rule 1), so the kernel-level program stays topologically ordered
without re-sorting. The lowering relies on exactly this (``lowering.Lowering._lower_eqns``).

**Cost model** (byte-equivalents of memory traffic), summed over the regions of a plan:

    cost(region) = LAUNCH_BYTES                               # one kernel launch
                 + sum(nbytes(v) for v the region reads)      # each outside input, once
                 + sum(nbytes(v) for v the region writes)     # root and multi-output values
                 + sum((evals(P) - size(P)) * op_cost(P))     # recomputation of members
                 + max(0, live - REGISTER_BUDGET) * work * SPILL_BYTES   # register pressure

An input read through a free alias costs ``min(nbytes(view), nbytes(its base))`` (a broadcast
reads its small base). ``op_cost`` (the capability's; OpenCL's is ``codegen.OP_COST``) is ~0.5
for add/mul/compare, 4 for exp/tanh/sqrt/div and 16 for sin/cos/log/pow. ``LAUNCH_BYTES``
(16 KiB) is the ~2 us launch overhead at ~8 GB/s. ``live`` is the peak number of scalar
temporaries alive at once when the region is evaluated in the emitter's order (depth-first
from the outputs, or a reduction's operand, operands left to right, each value computed once
and kept until its last use; outputs live until they are stored at the end; a member evaluated at k indices per element
counts k times, a loaded input once); ``work`` is the number of elements the kernel iterates
over. Each temporary beyond ``REGISTER_BUDGET`` (24) costs ``SPILL_BYTES`` (16) per element:
a spill store and reload, and the vector lanes or GPU occupancy it costs (a model constant,
not a measurement). Equations outside every region (matmuls, host steps) cost the same in
every plan and are left out.

**Search** (``fusion_search``): the graph splits into independent components, each searched by
best-first branch and bound over its fusion decisions under this cost model, with the greedy
plan below as the incumbent and the fallback; ``fusion_search.plan_fusion`` runs it.

**Greedy** (the incumbent and the fallback) grows each region backwards from the last
unassigned root, taking a producer when rules 1 and 2 hold and

       extra  = (evals(P) - size(P)) * op_cost(P)     <=     saved = 2 * nbytes(P) + LAUNCH_BYTES

(``saved = nbytes(P) + LAUNCH_BYTES`` when ``P``'s output is still written). Each producer is
judged alone, so greedy can recompute a cheap producer whose own producers then cannot
follow it, where materialising it would have cost nothing extra; the search sees the whole
plan.

**Reporting.** :meth:`FusionPlan.describe` gives a line per region (members, written values,
inputs, bytes saved against one kernel per equation, recomputation, live temporaries and
whether search or the greedy fallback chose it); the engine's ``describe`` appends it, so it
shows in ``jit(f, backend="opencl").lower(...).text``. :func:`verify_plan` checks the
invariants above and :func:`plan_cost` recomputes a plan's cost, for tests.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fungraph.ir import Eqn, Graph, Var

if TYPE_CHECKING:
    from fungraph.interpreters.regions import FusionCapability

LAUNCH_BYTES = 16384.0
MAX_MULTIPLICITY = 8
MAX_REGION_EQNS = 256
MAX_REGION_DEPTH = 128   # chained members below a root: the emitter recurses a few Python frames per link
REGISTER_BUDGET = 24
SPILL_BYTES = 16.0
SEARCH_NODES = 1000
MAX_SEARCH_EQNS = 200
OPTIMAL = "search: optimal"
BUDGET_HIT = "search: node budget hit"
FALLBACK = "greedy fallback"


@dataclass(frozen=True)
class CostModel:
    """The cost model's constants (see the module docstring) and the search's limits (``fusion_search``)."""

    launch_bytes: float = LAUNCH_BYTES
    register_budget: int = REGISTER_BUDGET
    spill_bytes: float = SPILL_BYTES
    search_nodes: int = SEARCH_NODES        # expansions per graph, over all its components
    max_search_eqns: int = MAX_SEARCH_EQNS  # larger components keep the greedy plan


DEFAULT_MODEL = CostModel()


@dataclass
class Region:
    """One kernel's worth of equations; ``outputs`` are the values it writes."""

    root: int
    kind: str                      # "elementwise" or "reduce"
    shape: tuple[int, ...]         # iteration shape (elementwise) or the reduced operand's shape
    members: set[int] = field(default_factory=set)
    outputs: list[Var] = field(default_factory=list)
    saved_bytes: float = 0.0       # traffic and launches saved against one kernel per equation
    extra_bytes: float = 0.0       # recomputation, byte-equivalents
    spill_bytes: float = 0.0       # register-pressure penalty
    live: float = 0.0              # peak live scalar temporaries
    cost: float = 0.0              # the region's cost under the model
    inputs: list[Var] = field(default_factory=list)
    origin: str = ""               # OPTIMAL, BUDGET_HIT, FALLBACK, "greedy" or "unfused"


@dataclass
class ComponentStats:
    """How one independent component of the graph was planned."""

    eqns: int
    fusible: int
    origin: str
    cost: float
    greedy_cost: float
    expansions: int


@dataclass
class FusionPlan:
    regions: list[Region]
    region_of: dict[int, Region]
    aliases: set[int]              # view equations that become free aliases
    components: list[ComponentStats] = field(default_factory=list)

    @property
    def cost(self) -> float:
        return sum(r.cost for r in self.regions)

    @property
    def greedy_cost(self) -> float:
        return sum(c.greedy_cost for c in self.components) if self.components else self.cost

    @property
    def expansions(self) -> int:
        return sum(c.expansions for c in self.components)

    def describe(self, graph: Graph, name: Callable[[Var], str]) -> list[str]:
        """The regions with their members, outputs and cost-model figures, one line each."""
        origins = [c.origin for c in self.components]
        if not self.components:
            head = "no search"
        else:
            head = (f"{len(self.components)} components: {origins.count(OPTIMAL)} searched to optimality, "
                    f"{origins.count(BUDGET_HIT)} cut at the node budget, {origins.count(FALLBACK)} greedy "
                    f"fallbacks ({self.expansions} expansions)")
        lines = [f"fusion: {len(self.regions)} regions, {len(self.aliases)} free views; {head}; model cost "
                 f"{_fmt_bytes(self.cost)} (greedy {_fmt_bytes(self.greedy_cost)})"]
        for r in self.regions:
            members = " ".join(f"{','.join(name(o) for o in graph.eqns[m].outputs)}:{graph.eqns[m].primitive.name}"
                               for m in sorted(r.members))
            outs = " ".join(f"{name(v)}:{v.aval}" for v in r.outputs)
            ins = " ".join(name(v) for v in r.inputs) or "-"
            shape = "[" + ",".join(map(str, r.shape)) + "]"
            spill = f" (spill {_fmt_bytes(r.spill_bytes)})" if r.spill_bytes else ""
            lines.append(f"  region {r.kind} {shape}: members {members}; writes {outs}; reads {ins}; "
                         f"saved {_fmt_bytes(r.saved_bytes)}, recompute {_fmt_bytes(r.extra_bytes)}, "
                         f"live {r.live:g}{spill}; {r.origin}")
        return lines


def _fmt_bytes(x: float) -> str:
    for unit, scale in (("MiB", 2.0**20), ("KiB", 2.0**10)):
        if abs(x) >= scale:
            return f"{x / scale:.1f} {unit}"
    return f"{x:.0f} B"


# --- facts about the graph -------------------------------------------------------------------


class _Facts:
    """What planning needs to know about a graph, computed once: consumers (the index
    ``len(eqns)`` stands for "a graph output"), producers, equation kinds, and per equation
    the outside values it reads and the bytes it writes."""

    def __init__(self, graph: Graph, capability: FusionCapability) -> None:
        self.graph = graph
        self.cap = capability
        self.eqns = graph.eqns
        n = self.n = len(graph.eqns)
        self.uses: dict[Var, list[int]] = {}
        for i, e in enumerate(graph.eqns):
            for a in dict.fromkeys(a for a in e.inputs if isinstance(a, Var)):
                self.uses.setdefault(a, []).append(i)
        for a in dict.fromkeys(a for a in graph.outvars if isinstance(a, Var)):
            self.uses.setdefault(a, []).append(n)
        self.producer = {o: i for i, e in enumerate(graph.eqns) for o in e.outputs}
        self.graph_outs = {a for a in graph.outvars if isinstance(a, Var)}
        self.alias_ok = capability.free_views(graph)
        self.kind: list[str | None] = []
        for e in graph.eqns:
            self.kind.append("reduce" if e.primitive.name in capability.roots else
                             "fusible" if capability.member(e) else None)
        # inputs whose producer is not fusible: graph inputs, constants, matmuls, reductions, ...
        self.external: list[tuple[Var, ...]] = []
        for e in graph.eqns:
            ins = dict.fromkeys(a for a in e.inputs if isinstance(a, Var))
            self.external.append(tuple(a for a in ins if self.kind_of(a) != "fusible"))
        self.out_bytes = [float(sum(o.aval.nbytes for o in e.outputs)) for e in graph.eqns]
        self.var_inputs = [tuple(a for a in e.inputs if isinstance(a, Var)) for e in graph.eqns]
        self.how = [_materialise(self, i) for i in range(n)]
        # per equation, each output with its bytes, its bytes read through a free alias, its consumers
        self.produces: list[tuple[tuple[Var, float, float, tuple[int, ...]], ...]] = []
        for i, e in enumerate(graph.eqns):
            base = e.inputs[0].aval.nbytes if self.how[i] == "alias" else math.inf
            self.produces.append(tuple((o, float(o.aval.nbytes), float(min(o.aval.nbytes, base)),
                                        tuple(self.uses.get(o, ()))) for o in e.outputs))

    def kind_of(self, v: Var) -> str | None:
        p = self.producer.get(v)
        return None if p is None else self.kind[p]

    def read_bytes(self, v: Var, aliases: set[int]) -> float:
        """What reading ``v`` costs a region: through a free alias, at most its base."""
        p = self.producer.get(v)
        if p is not None and p in aliases:
            base = self.eqns[p].inputs[0]
            return float(min(v.aval.nbytes, base.aval.nbytes))
        return float(v.aval.nbytes)


def _materialise(f: _Facts, i: int) -> str | None:
    """What equation ``i`` becomes when it joins no region: a root, a free alias, or (a
    fusible equation with outputs of several shapes) nothing fused at all."""
    return _how(f.eqns[i], f.kind[i], i in f.alias_ok, f.graph_outs)


def _how(e: Eqn, kind: str | None, aliasable: bool, graph_outs: set[Var]) -> str | None:
    if kind == "reduce":
        return "root"
    if kind != "fusible":
        return None
    if aliasable and not any(o in graph_outs for o in e.outputs):
        return "alias"
    shape = e.outputs[0].aval.shape
    return "root" if all(o.aval.shape == shape for o in e.outputs) else "skip"


def _new_region(f: _Facts, i: int) -> Region:
    return _region_of(f.eqns[i], i, f.kind[i] == "reduce")


def _region_of(e: Eqn, i: int, reduce: bool) -> Region:
    """A region of equation ``i`` alone."""
    if reduce:
        return Region(i, "reduce", e.inputs[0].aval.shape, {i}, list(e.outputs))
    return Region(i, "elementwise", e.outputs[0].aval.shape, {i}, list(e.outputs))


def _evals(f: _Facts, region: Region, v: Var, evals: dict[Var, float]) -> float:
    """How many times the region evaluates ``v`` (uses at the consumer's own index share one
    evaluation; broadcast or re-indexed uses each cost one per consumer evaluation)."""
    same = 0.0
    distinct = 0.0
    for c in f.uses.get(v, ()):
        if c not in region.members:
            continue
        ce = f.eqns[c]
        name = ce.primitive.name
        if name in f.cap.roots:
            same = max(same, float(v.aval.size))
            continue
        ev = max(evals.get(o, 0.0) for o in ce.outputs)
        if name not in f.cap.index_ops and all(o.aval.shape == v.aval.shape for o in ce.outputs):
            same = max(same, ev)
        else:
            distinct += ev * sum(1 for a in ce.inputs if a is v)
    return same + distinct


def _try_join(f: _Facts, region: Region, i: int, evals: dict[Var, float],
              depths: dict[int, int]) -> tuple[dict[Var, float], bool, int] | None:
    """Whether equation ``i`` (its consumers all decided) may join ``region``: the evaluations
    of its outputs there, whether the kernel must also write them, and how deep below the
    root it would lie; None if it may not."""
    if f.kind[i] != "fusible" or len(region.members) >= MAX_REGION_EQNS:
        return None
    e = f.eqns[i]
    depth = 1 + max(depths[c] for o in e.outputs for c in f.uses.get(o, ()) if c in region.members)
    if depth > MAX_REGION_DEPTH:
        return None
    outside = [c for o in e.outputs for c in f.uses.get(o, ()) if c not in region.members]
    written = bool(outside)
    if written:
        if region.kind != "elementwise" or any(c <= region.root for c in outside):
            return None
        if any(o.aval.shape != region.shape for o in e.outputs):
            return None
    ev = {o: _evals(f, region, o, evals) for o in e.outputs}
    size = float(e.outputs[0].aval.size)
    if any(x > MAX_MULTIPLICITY * max(size, 1.0) for x in ev.values()):
        return None
    if written and any(x != o.aval.size for o, x in ev.items()):
        return None
    return ev, written, depth


def _recompute(f: _Facts, e: Eqn, ev: dict[Var, float]) -> float:
    return sum(max(0.0, x - o.aval.size) for o, x in ev.items()) * f.cap.op_cost(e.primitive.name)


# --- the cost model ------------------------------------------------------------------------------


def _work(region: Region) -> float:
    return float(max(1, math.prod(region.shape)))


def _weight(v: Var, evals: dict[Var, float], work: float) -> float:
    """Temporaries a member's value occupies per element: one per index it is evaluated at."""
    return max(1.0, math.ceil(evals.get(v, work) / work - 1e-9))


def _peak_live(f: _Facts, region: Region, evals: dict[Var, float]) -> float:
    """Peak live scalar temporaries of the region's kernel, in the emitter's order: depth-first
    from each output (a reduction: from its operand), operands left to right, each value once;
    outputs stay live until they are stored at the end."""
    work = _work(region)
    members = region.members
    if region.kind == "elementwise":
        starts = list(region.outputs)
    else:
        members = members - {region.root}
        starts = list(f.var_inputs[region.root][:1])
    born: dict[Var, int] = {}
    last: dict[Var, int] = {}
    weight: dict[Var, float] = {}
    t = 0
    for s in starts:
        stack = [(s, False)]
        while stack:
            v, ready = stack.pop()
            if not ready and v in born:
                continue
            p = f.producer.get(v)
            if p is None or p not in members:
                born[v] = t
                weight[v] = 1.0
                t += 1
                continue
            ins = f.var_inputs[p]
            if not ready:
                stack.append((v, True))
                stack.extend((a, False) for a in reversed(ins) if a not in born)
                continue
            for a in ins:
                last[a] = t
            born[v] = t
            weight[v] = max(1.0, math.ceil(evals.get(v, work) / work - 1e-9))
            t += 1
    for s in starts:
        last[s] = t
    diff = [0.0] * (t + 2)
    for v, b in born.items():
        w = weight[v]
        diff[b] += w
        diff[max(last.get(v, b), b) + 1] -= w
    return max(itertools.accumulate(diff))


def _spill(live: float, work: float, model: CostModel) -> float:
    return max(0.0, live - model.register_budget) * work * model.spill_bytes


def _region_cost(f: _Facts, r: Region, aliases: set[int], model: CostModel) -> float:
    """The region's cost under the model, from scratch; also fills its reported figures."""
    eqns = f.eqns
    evals: dict[Var, float] = {}
    if r.kind == "elementwise":
        for o in eqns[r.root].outputs:
            evals[o] = float(o.aval.size)
    extra = 0.0
    for m in sorted(r.members, reverse=True):
        if m != r.root:
            ev = {o: _evals(f, r, o, evals) for o in eqns[m].outputs}
            evals.update(ev)
            extra += _recompute(f, eqns[m], ev)
    reads: dict[Var, float] = {}
    unfused = 0.0
    for m in sorted(r.members):
        ins = dict.fromkeys(a for a in eqns[m].inputs if isinstance(a, Var))
        unfused += model.launch_bytes + f.out_bytes[m] + sum(f.read_bytes(a, aliases) for a in ins)
        for a in ins:
            if f.producer.get(a) not in r.members:
                reads[a] = f.read_bytes(a, aliases)
    traffic = model.launch_bytes + sum(reads.values()) + sum(float(o.aval.nbytes) for o in r.outputs)
    r.live = _peak_live(f, r, evals)
    r.spill_bytes = _spill(r.live, _work(r), model)
    r.extra_bytes = extra
    r.saved_bytes = unfused - traffic
    r.inputs = list(reads)
    r.cost = traffic + extra + r.spill_bytes
    return r.cost


def plan_cost(graph: Graph, plan: FusionPlan, capability: FusionCapability, model: CostModel | None = None) -> float:
    """The cost of ``plan`` for ``graph`` under the model, recomputed from scratch."""
    f = _Facts(graph, capability)
    return sum(_region_cost(f, r, plan.aliases, model or DEFAULT_MODEL) for r in plan.regions)


# --- greedy growth: the incumbent and the fallback ------------------------------------------------


def _greedy(f: _Facts, fuse: bool, model: CostModel) -> tuple[list[Region], set[int]]:
    assigned: dict[int, Region] = {}
    aliases: set[int] = set()
    regions: list[Region] = []
    for r in range(f.n - 1, -1, -1):
        if r in assigned:
            continue
        how = f.how[r]
        if how == "alias":
            aliases.add(r)
        if how != "root":
            continue
        region = _new_region(f, r)
        assigned[r] = region
        regions.append(region)
        if fuse:
            _grow(f, region, assigned, model)
    return regions, aliases


def _grow(f: _Facts, region: Region, assigned: dict[int, Region], model: CostModel) -> None:
    """Take producers in reverse program order (so every in-region consumer of a candidate
    has been decided before it) while the per-producer cost test says it pays."""
    root = f.eqns[region.root]
    evals: dict[Var, float] = {}
    if region.kind == "elementwise":
        for o in root.outputs:
            evals[o] = float(o.aval.size)
    depths = {region.root: 0}
    heap: list[int] = []
    seen: set[int] = set()

    def push_inputs(e: Eqn) -> None:
        for a in e.inputs:
            p = f.producer.get(a) if isinstance(a, Var) else None
            if p is not None and p not in seen:
                seen.add(p)
                heapq.heappush(heap, -p)

    push_inputs(root)
    while heap and len(region.members) < MAX_REGION_EQNS:
        p = -heapq.heappop(heap)
        if p in assigned:
            continue
        got = _try_join(f, region, p, evals, depths)
        if got is None:
            continue
        ev, written, depth = got
        e = f.eqns[p]
        saved = (f.out_bytes[p] if written else 2.0 * f.out_bytes[p]) + model.launch_bytes
        if _recompute(f, e, ev) > saved:
            continue
        region.members.add(p)
        assigned[p] = region
        evals.update(ev)
        depths[p] = depth
        if written:
            region.outputs.extend(o for o in e.outputs if o not in region.outputs)
        push_inputs(e)


# --- the plan -----------------------------------------------------------------------------------


def plan_of_regions(graph: Graph, spans: Sequence[tuple[Sequence[int], Sequence[Var]]],
                    capability: FusionCapability) -> FusionPlan:
    """The plan whose regions are ``spans`` (each its members' indices, root last, and the
    values it writes, in order), every other equation that can be a root a region of its own
    and every free view outside them an alias: how an engine reads the regions of a graph
    whose ``fusion`` equations were expanded in place (``regions.expand_regions``)."""
    roots = capability.roots
    regions: list[Region] = []
    spanned: set[int] = set()
    for members, outputs in spans:
        root = members[-1]
        region = _region_of(graph.eqns[root], root, graph.eqns[root].primitive.name in roots)
        region.members = set(members)
        region.outputs = list(outputs)
        regions.append(region)
        spanned.update(members)
    alias_ok = capability.free_views(graph)
    graph_outs = {a for a in graph.outvars if isinstance(a, Var)}
    aliases: set[int] = set()
    for i, e in enumerate(graph.eqns):
        if i in spanned:
            continue
        reduce = e.primitive.name in roots
        how = _how(e, "reduce" if reduce else "fusible" if capability.member(e) else None, i in alias_ok, graph_outs)
        if how == "alias":
            aliases.add(i)
        elif how == "root":
            regions.append(_region_of(e, i, reduce))
    return _assemble(regions, aliases, [])


def _assemble(regions: list[Region], aliases: set[int], stats: list[ComponentStats]) -> FusionPlan:
    regions = sorted(regions, key=lambda r: r.root)
    region_of = {m: r for r in regions for m in r.members}
    return FusionPlan(regions, region_of, aliases, stats)


def verify_plan(graph: Graph, plan: FusionPlan, capability: FusionCapability) -> None:
    """Check the invariants the engine's lowering relies on (see the module docstring); raise
    ``AssertionError`` naming the equation that breaks one."""
    f = _Facts(graph, capability)
    for i in plan.aliases:
        assert f.how[i] == "alias" and i not in plan.region_of, f"eqn {i} cannot be a free alias"
    evaluated: dict[Var, float] = {}
    for r in plan.regions:
        root = f.eqns[r.root]
        assert r.root == max(r.members) and f.how[r.root] == "root", f"eqn {r.root} is not the last member and a root"
        assert len(r.members) <= MAX_REGION_EQNS
        shape = root.inputs[0].aval.shape if r.kind == "reduce" else root.outputs[0].aval.shape
        assert r.kind == ("reduce" if f.kind[r.root] == "reduce" else "elementwise") and r.shape == shape
        assert all(o in r.outputs for o in root.outputs), f"region of eqn {r.root} does not write its root"
        if r.kind == "elementwise":
            evaluated.update({o: float(o.aval.size) for o in root.outputs})
        depths = {r.root: 0}
        for m in sorted(r.members, reverse=True):
            assert plan.region_of.get(m) is r, f"eqn {m} is not mapped to its region"
            if m == r.root:
                continue
            e = f.eqns[m]
            depths[m] = 1 + max(depths[c] for o in e.outputs for c in f.uses.get(o, ()) if c in r.members)
            assert depths[m] <= MAX_REGION_DEPTH, f"eqn {m} lies too deep below its root {r.root}"
            assert f.kind[m] == "fusible", f"eqn {m} ({e.primitive.name}) cannot be a member"
            size = max(float(e.outputs[0].aval.size), 1.0)
            for o in e.outputs:
                evaluated[o] = _evals(f, r, o, evaluated)
                assert evaluated[o] <= MAX_MULTIPLICITY * size, f"eqn {m} is evaluated too often"
                for c in f.uses.get(o, ()):
                    if c in r.members:
                        continue
                    assert r.kind == "elementwise" and c > r.root and o in r.outputs, \
                        f"eqn {m}'s output is used by eqn {c} outside its region (root {r.root})"
                    assert o.aval.shape == r.shape and evaluated[o] == o.aval.size, f"eqn {m} cannot be written"
        assert all(f.producer.get(o) in r.members for o in r.outputs)
    # every value is stored (or aliased) before the step that reads it runs
    ready: dict[Var, int] = {}
    for i, e in enumerate(f.eqns):
        r = plan.region_of.get(i)
        at = r.root if r is not None else i
        for a in e.inputs:
            p = f.producer.get(a) if isinstance(a, Var) else None
            if p is None or (r is not None and p in r.members):
                continue
            assert a in ready and ready[a] < at, f"eqn {i} reads a value its region's root {at} runs before"
        for o in e.outputs:
            if r is None or o in r.outputs:
                ready[o] = at
