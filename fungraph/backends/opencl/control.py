"""Control flow on the device: ``cond``, ``while`` and ``scan`` lowered into the executable's
own program and arena, so their sub-graphs run as generated kernels like the rest of the graph.

- ``cond``: every branch is lowered with the same operands and writes its results into the
  same output slots; at run time the branch index (one scalar) is read back and only that
  branch's kernels are enqueued. A literal index picks the branch at compile time.
- ``while``: the carries live in two arena slots each, A and B. The condition and the body
  are lowered once (reading A, writing B) and instantiated twice: even iterations bind
  (A, B), odd ones (B, A), so no carry is copied between iterations. Per iteration the only
  transfer is the predicate (one scalar read); after an odd trip count one device-side copy
  per carry moves B back to A, where the loop's results live. Carries the body passes through
  unchanged keep one slot and are neither swapped nor copied.
- ``scan``: the same carries, and no readback at all: the trip count is static, so the slot
  holding each final carry is known at compile time. ``xs[i]`` and ``ys[i]`` are *windows*:
  slots whose element offset moves by one row per iteration (set as a kernel argument).

Lifetimes: each loop takes a clock tick before its body; every slot alive at that tick (the
carries, the stacked ``ys``, outer values the body reads) is kept alive until the loop ends,
so the interval planner never lets a body temporary overwrite them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from fungraph.backends.opencl.codegen import Access, contiguous, is_fusible
from fungraph.backends.opencl.fusion import REDUCTIONS
from fungraph.backends.opencl.kernels.batched_loops import batch_fits, batched_loop_kernel
from fungraph.backends.opencl.kernels.loops import LoopOperands, loop_fits, loop_kernel, slow_float64_loop
from fungraph.backends.opencl.program import Step, StepLowering, step_lowering
from fungraph.core import get_primitive, register_lowering
from fungraph.interpreters.eval import eval_graph
from fungraph.interpreters.fusion_model import FusionPlan
from fungraph.interpreters.staging import stage
from fungraph.ir import Eqn, Graph, Literal, ShapedArray, Var
from fungraph.primitives.elementwise import select

if TYPE_CHECKING:
    from fungraph.backends.opencl.lowering import Lowering


def updated_in_place(g: Graph, fusion: FusionPlan, n: int) -> list[bool]:
    """For each of the first ``n`` outputs of the body ``g``: whether it is a
    ``dynamic_update_slice`` of the same input that no kernel reads after the update
    (:func:`read_before`), so the update may write that input's slot in place and the carry
    needs one slot, not two."""
    producer = {o: i for i, e in enumerate(g.eqns) for o in e.outputs}
    out = []
    for j in range(n):
        x, v = g.invars[j], g.outvars[j]
        k = producer.get(v) if isinstance(v, Var) else None
        out.append(k is not None and g.eqns[k].primitive.name == "dynamic_update_slice" and g.eqns[k].inputs[0] is x
                   and g.outvars.count(v) == 1 and read_before(g, x, k, fusion))
    return out


def read_before(g: Graph, x: Var, k: int, fusion: FusionPlan) -> bool:
    """Whether every kernel reading ``x`` of ``g`` (directly or through free views of it; a
    fused read counts where its region is emitted) runs before equation ``k``, which reads it
    only as its operand, and ``g`` returns neither ``x`` nor a view of it: then ``k`` may
    overwrite ``x``'s slot."""
    emitted = {i: fusion.region_of[i].root if i in fusion.region_of else i for i in range(len(g.eqns))}
    derived = {x}
    for i, e in enumerate(g.eqns):
        if not any(isinstance(a, Var) and a in derived for a in (e.inputs[1:] if i == k else e.inputs)):
            continue
        if i in fusion.aliases:
            derived.update(e.outputs)
        elif i == k or emitted[i] >= k:
            return False
    return not any(isinstance(a, Var) and a in derived for a in g.outvars)


def _carries(exe: Lowering, init: list[Access], passthrough: list[bool]) -> tuple[list[Access], list[Access]]:
    """Slots A (initialised from ``init`` by a device copy) and B for each carry; a carry the
    body passes through unchanged, or updates in place, uses A for both."""
    a_slots, b_slots = [], []
    for x, same in zip(init, passthrough):
        a = exe.arena_access(x.aval)
        exe.copy_into(a, x)
        a_slots.append(a)
        b_slots.append(a if same else exe.arena_access(x.aval))
    return a_slots, b_slots


def _swap(a_slots: list[Access], b_slots: list[Access]) -> dict[int, int]:
    swap = {}
    for a, b in zip(a_slots, b_slots):
        if a.slot != b.slot:
            swap[a.slot] = b.slot
            swap[b.slot] = a.slot
    return swap


def lower_cond(exe: Lowering, e: Eqn) -> None:
    branches = [exe.optimized(b) for b in e.params["branches"]]
    index = e.inputs[0]
    ops = [exe.atom_access(a) for a in e.inputs[1:]]
    dests = [exe.store(o) for o in e.outputs]
    if isinstance(index, Literal):
        k = int(np.clip(int(index.value), 0, len(branches) - 1))
        chosen, idx = [branches[k]], None
    else:
        chosen, idx = list(branches), exe.access[index]
        exe.touch(idx.slot)
    step = Step("cond", [e], index=idx)
    exe.tick()
    step.blocks = [exe.lower_subgraph(b, ops, dests) for b in chosen]
    exe.add_step(step)
    exe.tick()


def speculate() -> bool:
    """``FUNGRAPH_OPENCL_SPECULATE=0`` (read at compile time) turns off batched while loops."""
    return os.environ.get("FUNGRAPH_OPENCL_SPECULATE", "1") not in ("", "0")


def device_only(g: Graph) -> bool:
    """Whether ``g`` lowers to kernels only: no host round-trip and no readback inside."""
    for e in g.eqns:
        name = e.primitive.name
        if name == "scan":
            if not device_only(e.params["body"]):
                return False
        elif e.primitive in CONTROL_FLOW or not (step_lowering(e) is not None or name in REDUCTIONS
                                                 or is_fusible(e)):
            return False
    return True


def loop_kernels() -> bool:
    """``FUNGRAPH_OPENCL_LOOP_KERNELS=0`` (read at compile time) turns off one-kernel loops."""
    return os.environ.get("FUNGRAPH_OPENCL_LOOP_KERNELS", "1") not in ("", "0")


def lower_loop_kernel(exe: Lowering, e: Eqn, cond: Graph | None, body: Graph, length: int | None,
                      ins: tuple[list[Access], list[Access], list[Access]]) -> bool:
    """The loop ``e`` as one kernel running every iteration (:mod:`~fungraph.backends.opencl.
    kernels.loops`) when its condition reads only scalars and its body is elementwise over the
    carries, or, for a batched while (``vmap``), when each example's loop can run on its own
    (:mod:`~fungraph.backends.opencl.kernels.batched_loops`); ``ins`` are the condition's
    constants, the body's constants and the initial carries. Returns whether it was."""
    if not loop_kernels():
        return False
    nc = len(body.outvars)
    batch = None
    if not loop_fits(cond, body, nc, exe.info):
        if cond is None:
            return False
        n_cc, n_bc = e.params["n_cc"], e.params["n_bc"]
        batch = batch_fits(cond, body, nc, e.inputs[:n_cc], e.inputs[n_cc:n_cc + n_bc])
        if batch is None or slow_float64_loop(body, batch.size, exe.info) or (
                batch.one_group and batch.size > exe.info.max_work_group_size):
            return False
    cond_ins, body_ins, init = ins
    consts = [exe.constant(c) for g in (body, cond) if g is not None for c in g.consts]
    ops = LoopOperands(cond_ins, body_ins, consts, init, [exe.store(o) for o in e.outputs])
    name = exe.kernel_name(e.primitive.name)
    if batch is not None:
        spec = batched_loop_kernel(name, cond, body, batch, ops, exe.idx_type, exe.info)
    else:
        spec = loop_kernel(name, cond, body, length, ops, exe.idx_type, exe.info)
    exe.add_kernels([e], [spec])
    return True


def masked_step(cg: Graph, bg: Graph, n_cc: int, n_bc: int) -> Graph:
    """``(carry, cc, bc) -> (pred, pred ? body(carry) : carry)`` with ``pred = cond(carry)``:
    one iteration that is the identity once the loop is over, so iterations can be enqueued
    ahead of the predicate's readback (ping-pong keeps the extra ones harmless)."""

    nc = len(bg.outvars)
    passthrough = [bg.outvars[j] is bg.invars[j] for j in range(nc)]

    def fun(*args: Any) -> list[Any]:
        c, cc, bc = args[:nc], args[nc:nc + n_cc], args[nc + n_cc:]
        (pred,) = eval_graph(cg, *c, *cc)
        new = eval_graph(bg, *c, *bc)
        return [pred] + [old if same else select(pred, n, old) for n, old, same in zip(new, c, passthrough)]

    avals = list(bg.in_avals[:nc]) + list(cg.in_avals[nc:]) + list(bg.in_avals[nc:])
    return stage(fun, avals)[0]


def lower_while(exe: Lowering, e: Eqn) -> None:
    p = e.params
    cg, bg, n_cc, n_bc = exe.optimized(p["cond_graph"]), exe.optimized(p["body_graph"]), p["n_cc"], p["n_bc"]
    ins = [exe.atom_access(a) for a in e.inputs]
    cc, bc, init = ins[:n_cc], ins[n_cc:n_cc + n_bc], ins[n_cc + n_bc:]
    if lower_loop_kernel(exe, e, cg, bg, None, (cc, bc, init)):
        return
    speculative = speculate() and device_only(cg) and device_only(bg)
    planned = None if speculative else exe.plan_fusion(bg)
    in_place = [False] * len(init) if planned is None else updated_in_place(*planned, len(init))
    passthrough = [bg.outvars[j] is bg.invars[j] or in_place[j] for j in range(len(init))]
    a_slots, b_slots = _carries(exe, init, passthrough)
    pred = exe.arena_access(ShapedArray((), np.dtype(np.bool_)))
    start = exe.tick()
    if speculative:
        step = exe.lower_subgraph(masked_step(cg, bg, n_cc, n_bc), a_slots + cc + bc, [pred] + b_slots)
        cond, body = step, []
    else:
        cond = exe.lower_subgraph(cg, a_slots + cc, [pred])
        body = exe.lower_subgraph(bg, a_slots + bc, b_slots, planned)
    tail = exe.record(lambda: [exe.copy_into(a, b) for a, b in zip(a_slots, b_slots) if a.slot != b.slot])
    exe.extend_lifetimes(start, exe.clock)
    exe.add_step(Step("while", [e], blocks=[cond, body, tail], index=pred, swap=_swap(a_slots, b_slots),
                      speculative=not body))
    exe.tick()
    for o, a in zip(e.outputs, a_slots):
        exe.access[o] = a


def lower_scan(exe: Lowering, e: Eqn) -> None:
    p = e.params
    body, length, reverse, nc, nx = exe.optimized(p["body"]), p["length"], p["reverse"], p["num_carry"], p["num_xs"]
    ins = [exe.atom_access(a) for a in e.inputs]
    init, xs, consts = ins[:nc], ins[nc:nc + nx], ins[nc + nx:]
    if nx == 0 and len(body.outvars) == nc and lower_loop_kernel(exe, e, None, body, length, ([], consts, init)):
        return
    planned = exe.plan_fusion(body)
    in_place = updated_in_place(*planned, nc)
    passthrough = [body.outvars[j] is body.invars[j] or in_place[j] for j in range(nc)]
    a_slots, b_slots = _carries(exe, init, passthrough)
    windows, x_in, y_out = [], [], []
    for x, v in zip(xs, body.invars[nc:nc + nx]):
        w, acc = exe.window(x, v.aval, x.strides[0], x.strides[1:])
        windows.append(w)
        x_in.append(acc)
    for o, v in zip(e.outputs[nc:], body.outvars[nc:]):
        ys = exe.store(o)
        w, acc = exe.window(ys, v.aval, int(np.prod(o.aval.shape[1:], dtype=np.int64)), contiguous(v.aval.shape))
        windows.append(w)
        y_out.append(acc)
    start = exe.tick()
    block = exe.lower_subgraph(body, a_slots + x_in + consts, b_slots + y_out, planned)
    exe.extend_lifetimes(start, exe.clock)
    exe.add_step(Step("scan", [e], blocks=[block], swap=_swap(a_slots, b_slots), windows=windows,
                      length=length, reverse=reverse))
    exe.tick()
    final = b_slots if length % 2 else a_slots
    for o, a in zip(e.outputs[:nc], final):
        exe.access[o] = a


#: The largest batch of masked iterations enqueued per readback, and the time per iteration
#: above which batches stop growing (the readback is then a small part of an iteration).
SPECULATE_MAX = 32
SPECULATE_BUDGET_S = 200e-6

# Control flow lies above the engines in the layers, so its primitives are found by name; the
# backend is imported on first use, after ``import fungraph`` has defined them.
CONTROL_FLOW = (get_primitive("cond"), get_primitive("while"), get_primitive("scan"))
for _prim, _lower in zip(CONTROL_FLOW, (lower_cond, lower_while, lower_scan)):
    register_lowering(_prim, "opencl", StepLowering(_lower))


def header(st: Step) -> str:
    if st.kind == "cond":
        how = "index chosen at compile time" if st.index is None else "index read back (1 scalar)"
        return f"cond, {len(st.blocks)} branches, {how}"
    if st.kind == "while" and st.speculative:
        return (f"while on the device, masked iterations in batches of 1, 2, 4, ... {SPECULATE_MAX} per predicate "
                f"readback, {len(st.swap) // 2} double-buffered carries")
    if st.kind == "while":
        return f"while on the device, predicate read back per iteration, {len(st.swap) // 2} double-buffered carries"
    order = "reversed, " if st.reverse else ""
    return (f"scan of length {st.length}, {order}no readback, {len(st.swap) // 2} double-buffered carries, "
            f"{len(st.windows)} windows")


def block_labels(st: Step) -> list[str]:
    if st.kind == "cond":
        return [f"branch {k}" for k in range(len(st.blocks))]
    if st.kind == "while" and st.speculative:
        return ["masked iteration (pred = cond(c); c = pred ? body(c) : c)", "", "after an odd number of iterations"]
    if st.kind == "while":
        return ["condition", "body", "after an odd trip count"]
    return ["body"]

