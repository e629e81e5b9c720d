"""Graph-level memory planning: every intermediate gets an arena offset before execution.

Values are grouped into *buffers*: an elementwise equation may write into an input's buffer
at that input's last use (in-place), and a view (reshape, transpose, slice, broadcast, rev)
shares its base's buffer and extends its lifetime. Inputs, constants and outputs are pinned:
they live outside the arena and are never reused. An equation may also declare *scratch*
(``scratch_bytes(eqn)``, a backend's rule: a conv's gathered taps, a loop's sub-arena): a
block live only during that equation. Buffer lifetimes and scratch blocks become intervals
that the interval planner (``offsets.plan_offsets``) packs into one arena, 64-byte aligned;
the liveness lower bound is taken over the same intervals, so it counts scratch too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fungraph.core import ALIGNMENT
from fungraph.interpreters.offsets import plan_offsets, verify_offsets
from fungraph.ir import Eqn, Graph, Var

VIEW_PRIMITIVES = frozenset({"reshape", "transpose", "broadcast_in_dim", "slice", "rev"})


@dataclass(frozen=True)
class Placement:
    """Where one value lives: ``kind`` is buffer, inplace (reuses ``origin``'s buffer),
    view (of ``origin``), or pinned (input, constant, output: outside the arena). ``start`` is
    the step that defines the value (for an equation the engine starts early, the step it starts
    at: its output is written from then on) and ``end`` the step after its buffer's last use."""

    kind: str
    offset: int
    size: int
    start: int
    end: int
    origin: Var | None = None


@dataclass(frozen=True)
class MemoryPlan:
    arena_bytes: int
    lower_bound_bytes: int
    unplanned_bytes: int
    pinned_bytes: int
    strategy: str
    placements: dict[Var, Placement]
    planning_seconds: float
    scratch: dict[int, Placement] = field(default_factory=dict)
    #: equations the engine may start early, each at the step given (see ``plan_memory``)
    early: dict[int, int] = field(default_factory=dict)

    @property
    def scratch_bytes(self) -> int:
        """The largest scratch block (blocks live one equation each, so never two at once)."""
        return max((p.size for p in self.scratch.values()), default=0)

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for p in self.placements.values():
            counts[p.kind] = counts.get(p.kind, 0) + 1
        if self.scratch:
            counts["scratch"] = len(self.scratch)
        ratio = self.arena_bytes / self.unplanned_bytes if self.unplanned_bytes else 0.0
        return (f"arena {self.arena_bytes} B (liveness lower bound {self.lower_bound_bytes} B, "
                f"{ratio:.1%} of the {self.unplanned_bytes} B of unplanned intermediates and scratch); "
                f"pinned {self.pinned_bytes} B; largest scratch {self.scratch_bytes} B; strategy {self.strategy}; "
                + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))


def _aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


#: When the default greedy packing is above the liveness bound on a graph of at most this many
#: buffers, ``auto`` (the other greedies, then the search) gets this many seconds to close it.
REPAIR_MAX_INTERVALS = 2000
REPAIR_BUDGET_S = 0.2


def plan_memory(graph: Graph, donated: Sequence[bool] = (), strategy: str = "greedy_size",
                inplace: bool = True, scratch_bytes: Callable[[Eqn], int] | None = None,
                early_starts: Callable[[Graph], dict[int, int]] | None = None) -> MemoryPlan:
    """Plan ``graph``'s intermediates. ``donated[i]`` lets input ``i``'s buffer be reused
    by an in-place equation (it still lives outside the arena). ``scratch_bytes(eqn)`` asks
    for a block live only while that equation runs (the interval ``[i, i + 1)``, packed and
    counted in the lower bound like any buffer): the temporaries of a backend's lowering
    (a conv's gathered taps and per-tap product) and, where a backend runs a sub-graph (a
    cond branch, a loop body) from its own plan, that plan's arena, so sub-graph memory is
    planned recursively. ``early_starts(graph)`` names equations a backend may start at an
    earlier step, while the equations between run (``{equation: step}``, the CPU engine's
    overlapped matrix products): their outputs' buffers live from that step, so nothing run
    meanwhile shares their memory, and their inputs are read at the equation's own step, so
    they stay live that long already."""
    import time

    t0 = time.perf_counter()
    early = early_starts(graph) if early_starts is not None else {}
    outputs = {a for a in graph.outvars if isinstance(a, Var)}
    donated_inputs = {v for v, d in zip(graph.invars, donated) if d}
    last_use: dict[Var, int] = {}
    for i, e in enumerate(graph.eqns):
        for a in e.inputs:
            if isinstance(a, Var):
                last_use[a] = i
    n = len(graph.eqns)
    for a in outputs:
        last_use[a] = n
    root: dict[Var, Var] = {}
    pinned: set[Var] = set(graph.invars) | set(graph.constvars) | outputs
    for v in graph.invars + graph.constvars:
        root[v] = v
    start: dict[Var, int] = {}
    end: dict[Var, int] = {}
    kind: dict[Var, str] = {}
    origin: dict[Var, Var] = {}
    defined_at: dict[Var, int] = {}
    for i, e in enumerate(graph.eqns):
        for o in e.outputs:
            defined_at[o] = i
            view_src = e.inputs[0] if e.primitive.name in VIEW_PRIMITIVES else None
            if isinstance(view_src, Var) and o not in outputs:
                r = root[view_src]
                root[o] = r
                kind[o] = "view"
                origin[o] = view_src
                end[r] = max(end.get(r, 0), last_use.get(o, i) + 1)
                continue
            reuse = _inplace_candidate(e, o, i, root, kind, last_use, end, pinned, donated_inputs, outputs) \
                if inplace else None
            if reuse is not None and o in outputs and root[reuse] in donated_inputs and \
                    sum(1 for a in graph.outvars if a is o) > 1:
                reuse = None
            if reuse is not None:
                r = root[reuse]
                root[o] = r
                kind[o] = "inplace"
                origin[o] = reuse
                end[r] = max(end[r], last_use.get(o, i) + 1) if r in end else last_use.get(o, i) + 1
                continue
            root[o] = o
            kind[o] = "pinned" if o in pinned else "buffer"
            start[o] = early.get(i, i)
            end[o] = max(end.get(o, 0), last_use.get(o, i) + 1)
    buffers = [v for v in start if kind[v] == "buffer"]
    intervals = [(start[v], end[v], _aligned(v.aval.nbytes)) for v in buffers]
    scratch_sizes = {i: scratch_bytes(e) for i, e in enumerate(graph.eqns)} if scratch_bytes else {}
    scratch_sizes = {i: n for i, n in scratch_sizes.items() if n > 0}
    intervals += [(i, i + 1, _aligned(n)) for i, n in scratch_sizes.items()]
    plan = plan_offsets(intervals, strategy=strategy, alignment=ALIGNMENT) if intervals else None
    if strategy == "greedy_size" and plan is not None and plan.arena_bytes > plan.lower_bound_bytes \
            and len(intervals) <= REPAIR_MAX_INTERVALS:
        repaired = plan_offsets(intervals, strategy="auto", alignment=ALIGNMENT, time_budget_s=REPAIR_BUDGET_S)
        plan = repaired if repaired.arena_bytes < plan.arena_bytes else plan
    offsets = dict(zip(buffers, plan.offsets)) if plan else {}
    scratch = {i: Placement("scratch", off, n, i, i + 1)
               for (i, n), off in zip(scratch_sizes.items(), plan.offsets[len(buffers):] if plan else ())}
    placements: dict[Var, Placement] = {}
    for v in list(graph.invars) + list(graph.constvars):
        placements[v] = Placement("pinned", -1, v.aval.nbytes, -1, last_use.get(v, -1) + 1)
    for v, k in kind.items():
        r = root[v]
        off = offsets.get(r, -1)
        s = start.get(v, defined_at[v])
        placements[v] = Placement(k, off, v.aval.nbytes, s, end.get(r, defined_at[v] + 1), origin.get(v))
    pinned_bytes = sum(v.aval.nbytes for v in pinned)
    unplanned = sum(o.aval.nbytes for e in graph.eqns for o in e.outputs if o not in outputs)
    unplanned += sum(scratch_sizes.values())
    return MemoryPlan(plan.arena_bytes if plan else 0, plan.lower_bound_bytes if plan else 0, unplanned,
                      pinned_bytes, plan.strategy if plan else "none", placements, time.perf_counter() - t0,
                      scratch, dict(early))


def inplace_inputs(e: Eqn, j: int) -> tuple[int, ...]:
    """The inputs of ``e`` whose buffer its output ``j`` may take over."""
    rule = e.primitive.inplace_rule
    return rule(e, j) if rule is not None else e.primitive.inplace


def _inplace_candidate(e, o, i, root, kind, last_use, end, pinned, donated, outputs) -> Var | None:  # noqa: ANN001
    """An input whose buffer the output may take over: elementwise, same type, last use here,
    and a whole buffer (a view's base may be smaller or laid out differently). A graph output
    may only take over a donated input (Owl's update edges: ``w = w - lr * g`` in place)."""
    for k in inplace_inputs(e, e.outputs.index(o)):
        if k >= len(e.inputs):
            continue
        a = e.inputs[k]
        if not isinstance(a, Var) or a.aval != o.aval or last_use.get(a) != i:
            continue
        r = root.get(a)
        if r is None or kind.get(a) == "view" or r.aval.nbytes != o.aval.nbytes:
            continue
        if r in pinned and r not in donated:
            continue
        if o in outputs and r not in donated:
            continue
        if end.get(r, i + 1) > i + 1:
            continue  # another alias of this buffer is still read later
        if any(b is not a and isinstance(b, Var) and root.get(b) is r for b in e.inputs):
            continue  # the same buffer feeds another operand with a different layout
        return a
    return None


def verify_plan(graph: Graph, plan: MemoryPlan, donated: Sequence[bool] = ()) -> None:
    """No two arena buffers or scratch blocks live at the same step overlap, and all fit in
    the arena; a scratch block lives exactly during its equation; pinned values are never
    reused; in-place reuse only where the primitive declares it."""
    roots = [p for p in plan.placements.values() if p.kind == "buffer"] + list(plan.scratch.values())
    verify_offsets([(p.start, p.end, _aligned(p.size)) for p in roots], [p.offset for p in roots])
    for v, p in plan.placements.items():
        if p.kind == "buffer" and p.offset + _aligned(p.size) > plan.arena_bytes:
            raise AssertionError(f"buffer of {v.aval} at {p.offset} exceeds the arena ({plan.arena_bytes} B)")
    for i, p in plan.scratch.items():
        if not 0 <= i < len(graph.eqns) or (p.kind, p.start, p.end) != ("scratch", i, i + 1):
            raise AssertionError(f"scratch of equation {i} must be kind scratch over [{i}, {i + 1}), got {p}")
        if p.offset < 0 or p.offset % ALIGNMENT or p.offset + _aligned(p.size) > plan.arena_bytes:
            raise AssertionError(f"scratch of equation {i} ({graph.eqns[i].primitive.name}) at {p.offset} "
                                 f"is misaligned or exceeds the arena ({plan.arena_bytes} B)")
    producer = {o: e for e in graph.eqns for o in e.outputs}
    for v, p in plan.placements.items():
        if p.kind == "inplace":
            e = producer[v]
            allowed = inplace_inputs(e, e.outputs.index(v))
            if p.origin not in [e.inputs[k] for k in allowed if k < len(e.inputs)]:
                raise AssertionError(f"{e.primitive.name} does not allow in-place reuse of that input")
        if p.kind == "pinned" and p.offset != -1:
            raise AssertionError("a pinned value was placed in the arena")
    donated_inputs = {v for v, d in zip(graph.invars, donated) if d}
    for v, p in plan.placements.items():
        if p.kind == "inplace" and p.offset < 0:
            root = v
            while plan.placements[root].kind == "inplace":
                root = plan.placements[root].origin
            if root not in donated_inputs:
                raise AssertionError(f"a value of type {v.aval} reuses the storage of a pinned, non-donated value")
