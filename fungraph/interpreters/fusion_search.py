"""The search over fusion decisions: per independent component of the graph, best-first
branch and bound under the whole-plan cost model of ``fusion_model`` (its regions, rules and
cost model are documented there), with greedy growth as the incumbent and the fallback;
:func:`plan_fusion` is the cost-model policy of ``regions.fuse_regions``.

**Search.** The graph splits into independent *components*: equations joined by producer to
consumer edges out of fusible producers (reductions and matmuls separate them). Each
component is searched by best-first branch and bound (A* order, as Dali's kernel search) over
its equations in reverse program order, so an equation is decided after all of its
consumers; a state fixes, for a suffix of the program, whether each equation joins one of the
regions holding its consumers or is materialised.

- ``g`` is the cost the decisions settle: launches, writes, recomputation, each read whose
  producer is decided or lies outside the component, and the spill cost of the regions as
  they stand (a lower bound, since the peak only grows as members join; recomputed every
  eighth member of a large region, and exactly once the plan is complete).
- ``h`` bounds what the undecided equations will add, from each equation's *possible roots*
  (necessary conditions for lying in a root's region, with a lower bound on the evaluations
  it would get there, so rule 2 prunes too). An equation whose only possible root is itself
  is a root in every plan: a launch, its writes, and a read by each region its consumers lie
  in (consumers with disjoint possible roots lie in different regions). Any other equation
  costs at least the cheapest of its options. Disjoint sets of possible roots that avoid every
  forced root need a launch each, and an outside value is read once by each region its
  readers must lie in. ``h`` never overestimates, so a finished search is optimal.

The greedy plan (``fusion_model._greedy``) is the incumbent: states with ``g + h`` not below it are
dropped, so the search only returns a plan that is cheaper under the model. The open state of
least ``g + h`` (the deepest among equals) is taken next and followed along its cheapest
children down to a complete plan, its other children queued: a weak bound (spills, re-reads)
then still finds good plans early and prunes with them. A component with more than
``MAX_SEARCH_EQNS`` fusible equations, or one reached after the graph's ``SEARCH_NODES``
expansions are spent (each control-flow body is a graph of its own), keeps the greedy plan;
a search cut off by the budget keeps the best plan it found. An expansion takes ~35 us here
(~120 us while a large region is over the register budget), so planning stays within tens
of milliseconds: ~6 ms for an MLP step.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fungraph.interpreters import fusion_model
from fungraph.interpreters.fusion_model import (
    BUDGET_HIT,
    FALLBACK,
    MAX_MULTIPLICITY,
    OPTIMAL,
    ComponentStats,
    CostModel,
    FusionPlan,
    Region,
    _assemble,
    _Facts,
    _greedy,
    _new_region,
    _peak_live,
    _recompute,
    _region_cost,
    _spill,
    _try_join,
    _weight,
    _work,
)
from fungraph.ir import Graph, Var

if TYPE_CHECKING:
    from fungraph.interpreters.regions import FusionCapability

# --- components and the bound -------------------------------------------------------------------


def _components(f: _Facts) -> list[list[int]]:
    """Independent groups of candidate equations (each in reverse program order): a fusible
    producer is grouped with its fusible or reducing consumers."""
    parent = list(range(f.n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, e in enumerate(f.eqns):
        if f.kind[i] != "fusible":
            continue
        for o in e.outputs:
            for c in f.uses.get(o, ()):
                if c < f.n and f.kind[c] is not None:
                    parent[find(c)] = find(i)
    groups: dict[int, list[int]] = {}
    for i in range(f.n - 1, -1, -1):
        if f.kind[i] is not None:
            groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def _possible_roots(f: _Facts, comp: list[int]) -> dict[int, dict[int, float]]:
    """Per equation, the roots whose region it could belong to (itself when it can be a
    root), each with a lower bound on how often that region evaluates it. Only necessary
    conditions are checked: equation ``j`` can join root ``r``'s region if ``r`` is possible
    for one of its consumers, each consumer either possibly lies in that region too or comes
    after ``r`` with ``r`` elementwise of ``j``'s shape (the kernel then writes ``j``), and
    the evaluations it must get from the consumers that may lie there stay within
    ``MAX_MULTIPLICITY``."""
    poss: dict[int, dict[int, float]] = {}

    def evaluations(o: Var, d: int, r: int) -> float:
        de = f.eqns[d]
        if de.primitive.name in f.cap.roots:
            return float(o.aval.size)
        ev = poss[d][r]
        if de.primitive.name not in f.cap.index_ops and all(x.aval.shape == o.aval.shape for x in de.outputs):
            return ev
        return ev * sum(1 for a in de.inputs if a is o)

    for j in comp:
        e = f.eqns[j]
        mine: dict[int, float] = {}
        if f.how[j] == "root":
            mine[j] = float(e.outputs[0].aval.size)
        if f.kind[j] == "fusible":
            cons = list(dict.fromkeys(c for o in e.outputs for c in f.uses.get(o, ())))
            shapes = {o.aval.shape for o in e.outputs}
            limit = MAX_MULTIPLICITY * max(float(e.outputs[0].aval.size), 1.0)
            candidates = {r: 0.0 for c in cons for r in poss.get(c, ())}
            if len(candidates) > 12:   # not worth checking one by one
                poss[j] = {**mine, **candidates}
                continue
            for r in sorted(candidates):
                writable = f.kind[r] == "fusible" and shapes == {f.eqns[r].outputs[0].aval.shape}
                if not all(r in poss.get(c, ()) or (writable and c > r) for c in cons):
                    continue
                low = 0.0
                for o in e.outputs:
                    ds = [d for d in f.uses.get(o, ()) if r in poss.get(d, ())]
                    low = max(low, min((evaluations(o, d, r) for d in ds), default=0.0))
                if low <= limit:
                    mine[r] = low
        poss[j] = mine
    return poss


def _disjoint(sets: list[set[int]]) -> list[set[int]]:
    """A greedy packing of pairwise disjoint sets, smallest first."""
    used: set[int] = set()
    out = []
    for s in sorted(sets, key=lambda s: (len(s), sorted(s))):
        if s and not s & used:
            used |= s
            out.append(s)
    return out


def _bounds(f: _Facts, comp: list[int], model: CostModel) -> list[float]:
    """``h[d]``: what deciding ``comp[d:]`` costs at least, whatever is chosen (see the module
    docstring); ``h[len(comp)] = 0``. Built from the possible roots: two equations whose
    possible roots are disjoint lie in different regions."""
    poss = _possible_roots(f, comp)
    position = {i: d for d, i in enumerate(comp)}
    forced_roots = {i for i in comp if set(poss[i]) == {i}}
    # an equation that can be a root but shares no possible root with the forced ones needs a
    # launch among its possible roots; disjoint such sets need distinct launches, counted while
    # all their equations are undecided
    free = [set(poss[j]) for j in comp if f.kind[j] == "fusible" and j in poss[j] and not set(poss[j]) & forced_roots]
    packed = _disjoint(free)
    launched = set().union(*packed)
    low = [0.0] * len(comp)
    for s in packed:
        low[position[max(s)]] += model.launch_bytes

    def readers(o: Var, but: int | None) -> int:
        """At least how many regions (other than ``but``'s) read ``o``."""
        sets = [set(poss[c]) for c in f.uses.get(o, ()) if c < f.n and f.how[c] == "root"
                and (but is None or but not in poss[c])]
        return len(_disjoint(sets))

    # an outside value is read once by each region its readers lie in: the reads of disjoint
    # readers (that cannot be free aliases) count while every reader that could share their
    # region is undecided
    readers_of: dict[Var, list[int]] = {}
    for i in comp:
        for a in f.external[i]:
            readers_of.setdefault(a, []).append(i)
    for a, cs in readers_of.items():
        sets = [set(poss[c]) for c in cs if f.how[c] == "root"]
        for s in _disjoint(sets):
            first = max(c for c in cs if not s.isdisjoint(poss[c]) or c in s)
            low[position[first]] += float(a.aval.nbytes)
    for d, i in enumerate(comp):
        e = f.eqns[i]
        how = f.how[i]
        if how == "skip":
            continue
        fusible = f.kind[i] == "fusible"
        options = []
        if how == "alias":
            base = float(e.inputs[0].aval.nbytes)
            options.append(sum(readers(o, None) * min(float(o.aval.nbytes), base) for o in e.outputs))
        else:   # a root: a launch (unless counted above), its writes, a read by each consumer's region
            launch = 0.0 if i in launched else model.launch_bytes
            read_back = sum(readers(o, None) * float(o.aval.nbytes) for o in e.outputs) if fusible else 0.0
            options.append(launch + f.out_bytes[i] + read_back)
        joins = [r for r in poss[i] if r != i]
        cons = {c for o in e.outputs for c in f.uses.get(o, ())}
        if len(joins) > 8:   # many ways to join: not worth bounding
            options.append(0.0)
        for r in joins[:8]:
            written = any(r not in poss.get(c, ()) for c in cons)
            extra = 0.0
            if len(e.outputs) == 1:
                extra = max(0.0, poss[i][r] - e.outputs[0].aval.size) * f.cap.op_cost(e.primitive.name)
            options.append(extra + (f.out_bytes[i] if written else 0.0)
                           + sum(readers(o, r) * float(o.aval.nbytes) for o in e.outputs))
            if options[-1] == 0.0:
                break
        low[d] += min(options)
    h = [0.0] * (len(comp) + 1)
    for d in range(len(comp) - 1, -1, -1):
        h[d] = h[d + 1] + low[d]
    return h


# --- search states and the expansion loop ---------------------------------------------------------


class _Node:
    """A search state: the decisions of its ancestors plus ``choice`` for ``comp[depth - 1]``."""

    __slots__ = ("parent", "choice", "depth", "g")

    def __init__(self, parent: _Node | None, choice: tuple | None, depth: int, g: float) -> None:
        self.parent = parent
        self.choice = choice
        self.depth = depth
        self.g = g


class _Workspace:
    """The partial plan of one search state, changed in place by :meth:`apply` (which returns
    the cost the decision settles) and restored by :meth:`undo`; :meth:`goto` moves it between
    states through their common ancestor."""

    def __init__(self, f: _Facts, model: CostModel, comp: list[int]) -> None:
        self.f = f
        self.model = model
        self.comp = comp
        self.regions: dict[int, Region] = {}
        self.region_of: dict[int, Region] = {}
        self.aliases: set[int] = set()
        self.evals: dict[Var, float] = {}
        self.charged: dict[int, set[Var]] = {}   # region root -> the values it reads, already costed
        self.bound: dict[int, float] = {}        # region root -> upper bound on its live temporaries
        self.spill: dict[int, float] = {}        # region root -> its spill cost as it stands
        self.work: dict[int, float] = {}         # region root -> elements it iterates over
        self.depths: dict[int, int] = {}         # member -> how deep below its root it lies
        self.trail: list[tuple] = []
        self.at = _Node(None, None, 0, 0.0)

    def choices(self, i: int) -> list[tuple]:
        """Join each region holding a consumer (where allowed), then materialise."""
        out: list[tuple] = []
        if self.f.kind[i] == "fusible":
            tried: set[int] = set()
            for o in self.f.eqns[i].outputs:
                for c in self.f.uses.get(o, ()):
                    r = self.region_of.get(c)
                    if r is not None and r.root not in tried:
                        tried.add(r.root)
                        got = _try_join(self.f, r, i, self.evals, self.depths)
                        if got is not None:
                            out.append(("join", r.root, *got))
        out.append((self.f.how[i],))
        return out

    def apply(self, i: int, choice: tuple) -> float:
        f, model = self.f, self.model
        how = choice[0]
        cost = 0.0
        region: Region | None = None
        written = 0
        new_evals: dict[Var, float] = {}
        if how == "join":
            region = self.regions[choice[1]]
            new_evals = choice[2]
            cost += _recompute(f, f.eqns[i], new_evals)
            if choice[3]:
                outs = f.eqns[i].outputs
                region.outputs.extend(outs)
                written = len(outs)
                cost += f.out_bytes[i]
            region.members.add(i)
            self.depths[i] = choice[4]
        elif how == "root":
            region = _new_region(f, i)
            self.regions[i] = region
            self.charged[i] = set()
            self.bound[i] = 0.0
            self.spill[i] = 0.0
            self.work[i] = _work(region)
            self.depths[i] = 0
            cost += model.launch_bytes + f.out_bytes[i]
            if region.kind == "elementwise":
                new_evals = {o: float(o.aval.size) for o in f.eqns[i].outputs}
        elif how == "alias":
            self.aliases.add(i)
        charged: list[tuple[int, Var]] = []
        region_of, charged_by = self.region_of, self.charged
        for o, nbytes, through_alias, consumers in f.produces[i]:   # regions that read what ``i`` computes
            for c in consumers:
                other = region_of.get(c)
                if other is not None and other is not region:
                    seen = charged_by[other.root]
                    if o not in seen:
                        seen.add(o)
                        charged.append((other.root, o))
                        cost += through_alias if how == "alias" else nbytes
        grown = 0.0
        old_spill = 0.0
        if region is not None:
            root = region.root
            region_of[i] = region
            self.evals.update(new_evals)
            seen = charged_by[root]
            for a in f.external[i]:   # outside values ``i`` reads
                if a not in seen:
                    seen.add(a)
                    charged.append((root, a))
                    cost += a.aval.nbytes
            work = self.work[root]
            grown = float(len(f.eqns[i].inputs))
            for o in f.eqns[i].outputs:
                grown += _weight(o, new_evals, work)
            self.bound[root] += grown
            old_spill = self.spill[root]
            members = len(region.members)
            if self.bound[root] > model.register_budget and (members <= 24 or members % 8 == 0):
                # the peak only grows as members join, so a value computed a few members ago
                # is still a lower bound; :meth:`settle` makes it exact
                self.spill[root] = _spill(_peak_live(f, region, self.evals), work, model)
                cost += self.spill[root] - old_spill
        self.trail.append((i, how, region, written, new_evals, charged, grown, old_spill))
        return cost

    def settle(self) -> float:
        """The spill cost not yet counted, once every region is complete."""
        extra = 0.0
        for root, region in self.regions.items():
            if self.bound[root] > self.model.register_budget:
                extra += _spill(_peak_live(self.f, region, self.evals), self.work[root], self.model) - self.spill[root]
        return extra

    def undo(self) -> None:
        i, how, region, written, new_evals, charged, grown, old_spill = self.trail.pop()
        for root, v in charged:
            self.charged[root].discard(v)
        if how == "alias":
            self.aliases.discard(i)
        if region is None:
            return
        root = region.root
        for v in new_evals:
            del self.evals[v]
        del self.region_of[i], self.depths[i]
        if how == "root":
            del self.regions[i], self.charged[i], self.bound[i], self.spill[i], self.work[i]
            return
        self.bound[root] -= grown
        self.spill[root] = old_spill
        if written:
            del region.outputs[-written:]
        region.members.discard(i)

    def goto(self, node: _Node) -> None:
        a, b = self.at, node
        down: list[_Node] = []
        while a.depth > b.depth:
            self.undo()
            a = a.parent
        while b.depth > a.depth:
            down.append(b)
            b = b.parent
        while a is not b:
            self.undo()
            a = a.parent
            down.append(b)
            b = b.parent
        for n in reversed(down):
            self.apply(self.comp[n.depth - 1], n.choice)
        self.at = node


@dataclass
class _Outcome:
    decisions: list[tuple] | None   # the best plan found, if cheaper than the incumbent
    cost: float
    expansions: int
    complete: bool                  # the search proved it optimal under the model


def _tolerance(cost: float) -> float:
    return 1e-9 * abs(cost) + 1e-6 if math.isfinite(cost) else 0.0


def _search(f: _Facts, comp: list[int], model: CostModel, incumbent: float, budget: int) -> _Outcome:
    """Best-first branch and bound over the decisions for ``comp``: take the open state of
    least ``g + h`` (the deepest among equals) and dive along its cheapest children to a
    complete plan, queueing the others; drop states not below the incumbent."""
    h = _bounds(f, comp, model)
    ws = _Workspace(f, model, comp)
    best_cost, best = incumbent, None
    heap: list[tuple[float, int, int, _Node]] = [(h[0], 0, 0, ws.at)]
    counter = 1
    expansions = 0
    complete = True
    while heap and complete:
        bound, _, _, node = heapq.heappop(heap)
        if bound >= best_cost - _tolerance(best_cost):
            break
        ws.goto(node)
        while bound < best_cost - _tolerance(best_cost):
            if expansions >= budget:
                complete = False
                break
            expansions += 1
            i = comp[node.depth]
            depth = node.depth + 1
            children = []
            for choice in ws.choices(i):
                g = node.g + ws.apply(i, choice)
                if depth == len(comp):
                    g += ws.settle()
                ws.undo()
                if depth == len(comp):
                    if g < best_cost - _tolerance(best_cost):
                        best_cost, best = g, _Node(node, choice, depth, g)
                elif g + h[depth] < best_cost - _tolerance(best_cost):
                    children.append((g + h[depth], counter, _Node(node, choice, depth, g)))
                    counter += 1
            if not children:
                break
            children.sort(key=lambda c: c[:2])
            for fc, k, child in children[1:]:
                heapq.heappush(heap, (fc, -depth, k, child))
            bound, k, child = children[0]
            ws.apply(i, child.choice)
            ws.at = node = child
    decisions = None
    if best is not None:
        decisions = []
        n: _Node | None = best
        while n is not None and n.choice is not None:
            decisions.append(n.choice)
            n = n.parent
        decisions.reverse()
    return _Outcome(decisions, best_cost, expansions, complete)


def _replay(f: _Facts, comp: list[int], decisions: list[tuple], model: CostModel) -> tuple[list[Region], set[int]]:
    ws = _Workspace(f, model, comp)
    for i, choice in zip(comp, decisions):
        ws.apply(i, choice)
    return list(ws.regions.values()), set(ws.aliases)


# --- the plan, component by component -----------------------------------------------------------


def search_components(f: _Facts, greedy: list[Region], greedy_aliases: set[int],
                      model: CostModel) -> tuple[list[Region], set[int], list[ComponentStats]]:
    """Each component's regions and free aliases, searched under ``model`` within its node
    budget and kept only where cheaper than the greedy plan's, with how each was planned."""
    comps = sorted(_components(f), key=len)
    comp_of = {i: k for k, comp in enumerate(comps) for i in comp}
    greedy_by: list[list[Region]] = [[] for _ in comps]
    for r in greedy:
        greedy_by[comp_of[r.root]].append(r)
    budget = model.search_nodes
    regions: list[Region] = []
    aliases: set[int] = set()
    stats: list[ComponentStats] = []
    for k, comp in enumerate(comps):
        chosen = greedy_by[k]
        chosen_aliases = {a for a in greedy_aliases if comp_of[a] == k}
        greedy_cost = sum(_region_cost(f, r, chosen_aliases, model) for r in chosen)
        cost = greedy_cost
        fusible = sum(1 for i in comp if f.kind[i] == "fusible")
        expansions = 0
        if fusible > model.max_search_eqns or budget <= 0:
            origin = FALLBACK
        else:
            out = _search(f, comp, model, greedy_cost, budget)
            budget -= out.expansions
            expansions = out.expansions
            origin = OPTIMAL if out.complete else BUDGET_HIT
            if out.decisions is not None:
                found, found_aliases = _replay(f, comp, out.decisions, model)
                found_cost = sum(_region_cost(f, r, found_aliases, model) for r in found)
                if found_cost < greedy_cost - _tolerance(greedy_cost):
                    chosen, chosen_aliases, cost = found, found_aliases, found_cost
        for r in chosen:
            r.origin = origin
        regions += chosen
        aliases |= chosen_aliases
        stats.append(ComponentStats(len(comp), fusible, origin, cost, greedy_cost, expansions))
    return regions, aliases, stats


def plan_fusion(graph: Graph, capability: FusionCapability, fuse: bool = True, model: CostModel | None = None,
                search: bool = True) -> FusionPlan:
    """The fused regions for ``graph`` on a backend that can fuse what ``capability`` says:
    searched per component under ``model`` (default: ``fusion_model.DEFAULT_MODEL``), never
    costlier than greedy growth; ``search=False``: the greedy plan alone; ``fuse=False``: one
    kernel per equation."""
    model = model or fusion_model.DEFAULT_MODEL
    f = _Facts(graph, capability)
    greedy, greedy_aliases = _greedy(f, fuse, model)
    if not fuse or not search:
        for r in greedy:
            _region_cost(f, r, greedy_aliases, model)
            r.origin = "greedy" if fuse else "unfused"
        return _assemble(greedy, greedy_aliases, [])
    regions, aliases, stats = search_components(f, greedy, greedy_aliases, model)
    return _assemble(regions, aliases, stats)
