"""Where the lowered program's values live: which donated input buffer each output is
written into (:func:`plan_donation`, after :func:`donation_order` has moved the equations
that could write into one to after the input's last read), and the arena offsets of the
other slots, packed by the interval planner (``offsets.plan_offsets``, 64-byte aligned, at
kernel granularity: fusion changes which values exist and when they die, so the
per-equation plan of the jit is not reused).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from fungraph.backends.opencl.codegen import VIEW_OPS
from fungraph.backends.opencl.program import Slot, Step, slots_used
from fungraph.interpreters.offsets import plan_offsets
from fungraph.ir import Eqn, Graph, Var

ALIGNMENT = 64


def plan_donation(graph: Graph, donated: Sequence[bool], slots: Sequence[Slot],
                  steps: Sequence[Step]) -> dict[int, int]:
    """Output slot -> the position of the donated input whose device buffer it is written into
    (same dtype and byte size). Safe when every read of the input comes before the output's
    first write: the input's last tick is before the output's first, or both fall on the
    output's first writer and that is one elementwise kernel whose work-item ``gid`` loads only
    element ``gid`` of the input, before it stores element ``gid`` of the output. An input the
    graph also returns (itself or a view of it) is never donated."""
    donation: dict[int, int] = {}
    returned = {a for a in graph.outvars if isinstance(a, Var)}
    inputs = [k for k, sl in enumerate(slots) if sl.kind == "input" and donated[sl.index]
              and not views_of(graph.eqns, graph.invars[sl.index]) & returned]
    outputs = [k for k, sl in enumerate(slots) if sl.kind == "output"]
    taken: set[int] = set()
    for k in inputs:
        inp = slots[k]

        def preference(s: int, inp: Slot = inp) -> tuple[bool, bool, int]:
            out = slots[s]
            return out.index != inp.index, out.aval.shape != inp.aval.shape, s

        for s in sorted(outputs, key=preference):
            out = slots[s]
            if s in taken or out.aval.dtype != inp.aval.dtype or out.aval.nbytes != inp.aval.nbytes:
                continue
            if out.aval.nbytes == 0 or inp.last > out.first:
                continue
            if inp.last == out.first and not _own_element(steps, k, s):
                continue
            donation[s] = inp.index
            taken.add(s)
            break
    return donation


def _own_element(steps: Sequence[Step], k: int, s: int) -> bool:
    """Whether the first top-level step that uses slot ``s`` is kernels where each one that
    writes ``s`` loads slot ``k`` only at the elements it stores, after loading them
    (``KernelSpec.own_loads`` / ``own_stores``: one elementwise kernel, or a product's
    kernels with an epilogue), and none reads ``k`` after the first of them has run."""
    first = next((st for st in steps if s in slots_used(st)), None)
    if first is None or first.kind != "kernels":
        return False
    writing = False
    for spec in first.specs:
        reads_k = any(slot == k for slot, _ in spec.slots)
        if any(slot == s for slot, _ in spec.slots):
            if s not in spec.own_stores or (reads_k and k not in spec.own_loads):
                return False
            writing = True
        elif reads_k and writing:
            return False
    return writing


def plan_arena(slots: Sequence[Slot]) -> int:
    """Give each arena and scratch slot its ``byte_offset`` (the interval planner over the
    slots' clock ticks); returns the arena's size in bytes."""
    arena = [k for k, s in enumerate(slots) if s.kind in ("arena", "scratch")]
    intervals = [(slots[k].first, slots[k].last + 1, _aligned(slots[k].aval.nbytes)) for k in arena]
    if not intervals:
        return 0
    plan = plan_offsets(intervals, "greedy_size", alignment=ALIGNMENT)
    for k, off in zip(arena, plan.offsets):
        slots[k].byte_offset = int(off)
    return int(plan.arena_bytes)


def donation_order(graph: Graph, donated: Sequence[bool]) -> Graph:
    """``graph`` with each equation that could write into a donated input's buffer (it reads
    the input and computes a graph output of the same dtype and byte size) moved to just after
    the input's last reader (views of it included), when nothing in between uses its result.
    An SGD update ``w - lr * g`` scheduled before the backward pass's last read of ``w`` would
    otherwise need a fresh buffer. This only orders; :func:`plan_donation` decides what is safe."""
    if not any(donated):
        return graph
    eqns = list(graph.eqns)
    outs: dict[Var, int] = {}
    for j, v in enumerate(graph.outvars):
        if isinstance(v, Var):
            outs.setdefault(v, j)
    for i, (x, d) in enumerate(zip(graph.invars, donated)):
        if not d:
            continue
        seen = views_of(eqns, x)
        readers = [k for k, e in enumerate(eqns) if any(isinstance(a, Var) and a in seen for a in e.inputs)]
        writers = [k for k in readers if len(eqns[k].outputs) == 1 and eqns[k].outputs[0] in outs
                   and any(a is x for a in eqns[k].inputs) and eqns[k].outputs[0].aval.dtype == x.aval.dtype
                   and eqns[k].outputs[0].aval.nbytes == x.aval.nbytes]
        if not writers:
            continue
        k = min(writers, key=lambda k: (outs[eqns[k].outputs[0]] != i, eqns[k].outputs[0].aval.shape != x.aval.shape,
                                        k))
        last = max(readers)
        result = eqns[k].outputs[0]
        if last > k and not any(a is result for e in eqns[k + 1:last + 1] for a in e.inputs):
            eqns.insert(last, eqns.pop(k))
    return graph if all(a is b for a, b in zip(eqns, graph.eqns)) else replace(graph, eqns=tuple(eqns))


def views_of(eqns: Sequence[Eqn], x: Var) -> set[Var]:
    """``x`` and every value that is a view of it (reshape, transpose, slice, ...)."""
    seen = {x}
    for e in eqns:
        if e.primitive.name in VIEW_OPS and e.inputs and isinstance(e.inputs[0], Var) and e.inputs[0] in seen:
            seen.update(e.outputs)
    return seen


def _aligned(n: int) -> int:
    return max(ALIGNMENT, -(-n // ALIGNMENT) * ALIGNMENT)
