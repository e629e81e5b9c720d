"""The OpenCL executable: a planned graph turned into one program of generated kernels, one
arena buffer, and a tree of steps (kernel launches, host round-trips, and device-resident
control flow) run back to back.

Compile time, one module per stage: the compiler's ``regions.fuse_regions`` writes the fused
regions into the graph as ``fusion`` equations (under :data:`~fungraph.backends.opencl.fusion.
OPENCL_FUSION`, on the program order the donation ordering leaves); ``lowering`` gives every
value a slot and turns regions, primitives and control flow into steps of generated kernels;
``planning`` decides which outputs take over donated input buffers and packs the arena;
``building`` builds the program once (or takes a cached one) and instantiates every kernel;
``running`` launches every kernel once to warm PoCL's work-group compilation.

Call time (``running``): bind the inputs (device arrays as they are, numpy arrays copied into
per-input staging buffers), allocate one fresh buffer per output, set the changing kernel
arguments and enqueue everything; the only waits are the scalar reads of a ``cond`` index or a
``while`` predicate, and the caller reading a result.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from fungraph.backends import taking_turns
from fungraph.backends.opencl import binaries, compile_pool, control
from fungraph.backends.opencl.building import Bindings, build_program
from fungraph.backends.opencl.device import OpenCLArray, get_device
from fungraph.backends.opencl.fusion import OPENCL_FUSION
from fungraph.backends.opencl.lowering import Lowering
from fungraph.backends.opencl.planning import donation_order, plan_arena, plan_donation
from fungraph.backends.opencl.program import ENGINE_STATS, Step, graph_avals, kernel_specs, walk
from fungraph.backends.opencl.running import Runner
from fungraph.interpreters.fusion_model import FusionPlan
from fungraph.interpreters.memory import MemoryPlan
from fungraph.interpreters.regions import contract, plan_regions
from fungraph.ir import Eqn, Graph, Literal, Namer, Var, format_eqn

_REENTERED = ("an OpenCL-jitted function was called again from a host callback inside its own call; its "
               "arena and kernel arguments are in use (call it after the outer call returns, or jit the "
               "callback's work with backend='cpu')")


class OpenCLExecutable:
    """``run(args) -> outputs`` on the device; outputs are :class:`OpenCLArray` values.

    Thread safety: a call binds its buffers into shared state (the runner's slot tables ``buf`` and
    ``off``, the argument lists and ``set_args`` of shared kernel objects, the per-input
    staging buffers) and its kernels share one arena, so calls of one executable take turns
    under a lock held from binding the inputs to the last enqueue (waits for a loop's
    predicate or a host step included). A buffer set per call would buy little: the process
    has one in-order queue, which runs commands one after another anyway, and which runs a
    call's kernels before the next call's staging upload or kernels touch the arena. Outputs
    are fresh buffers per call, independent of the arena. The turns are shared with every
    stateful executable (:func:`~fungraph.backends.taking_turns`), so host callbacks that call
    other jitted functions cannot deadlock; one that re-enters the executable it runs in
    raises.
    """

    def __init__(self, graph: Graph, plan: MemoryPlan, donated: Sequence[bool] = (), fuse: bool = True) -> None:
        t0 = time.perf_counter()
        self.dev = get_device()
        self.info = self.dev.info
        self.donated = tuple(donated) + (False,) * (len(graph.invars) - len(donated))
        ordered = donation_order(graph, self.donated)
        self.plan = plan
        for a in graph_avals(ordered):
            self.dev.check_dtype(a, "this graph")
        regions, self.fusion = plan_regions(ordered, OPENCL_FUSION, fuse)
        #: the program order the regions were chosen on, which ``fusion``'s indices name
        self.ordered = ordered
        #: the graph the engine runs: its regions as ``fusion`` equations
        self.graph = contract(ordered, regions, resort=False)
        lowered = Lowering(self.graph, self.donated, self.info, fuse)
        lowered.lower()
        self.free_views = len(lowered.fusion.aliases)
        self._same = _same_values(lowered.graph, lowered.fusion, ordered, self.fusion)
        self.idx_type = lowered.idx_type
        self.slots, self.steps = lowered.slots, lowered.steps
        self.donation = plan_donation(lowered.graph, self.donated, self.slots, self.steps)
        self.arena_bytes = plan_arena(self.slots)
        specs = list(kernel_specs(self.steps))
        compile_pool.start(self.dev, specs)
        built = build_program(self.dev, specs)
        self.source, self.program, self.build_seconds = built.source, built.program, built.seconds
        jobs = compile_pool.share(self.dev, built, specs, self.slots) if built.origin == "source" else None
        bindings = Bindings(self.dev, built, self.slots, self.steps, lowered.const_host, self.arena_bytes)
        self._runner = Runner(self.dev, self.slots, bindings, self.donation, lowered.output_plan)
        self.warm_seconds = self._runner.warm(jobs)
        if built.origin == "source" and binaries.store(self.dev, built.key, built.program):
            ENGINE_STATS["binaries_stored"] += 1
        self.compile_seconds = time.perf_counter() - t0
        ENGINE_STATS["executables"] += 1

    def run(self, args: Sequence[Any], into: Sequence[Any] | None = None) -> list[OpenCLArray]:
        """Outputs go to pooled buffers, into the arrays ``into``, or (donation) into the
        buffers of donated device arrays, which are then deleted. Calls from several threads
        take turns (see the class docstring)."""
        with taking_turns(self, _REENTERED):
            return self._runner.call(args, into)

    # --- inspection -----------------------------------------------------------------------------

    @property
    def kernel_count(self) -> int:
        return sum(1 for _ in kernel_specs(self.steps))

    @property
    def host_steps(self) -> int:
        return sum(1 for st in walk(self.steps) if st.kind == "host")

    def describe(self) -> str:
        """Each kernel, host round-trip and control-flow step with the equations it covers,
        in launch order (loop bodies and branches indented), then the fused regions with their
        cost-model figures; values are named as the graph's own listing names them."""
        names = Namer()
        for v in self.ordered.invars + self.ordered.constvars:
            names(v)
        for e in self.ordered.eqns:
            for o in e.outputs:
                names(o)

        def namer(v: Var) -> str:
            return names(self._same.get(v, v))

        lines = [f"OpenCL executable on {self.info.name!r}: {self.kernel_count} kernels, {self.host_steps} host "
                 f"round-trips, {self.free_views} free views; arena {self.arena_bytes} B "
                 f"(jit plan {self.plan.arena_bytes} B); build {self.build_seconds * 1e3:.0f} ms, "
                 f"warm-up {self.warm_seconds * 1e3:.0f} ms"]

        def eqn_text(e: Eqn) -> str:
            if e.primitive in control.CONTROL_FLOW:
                outs = " ".join(f"{namer(o)}:{o.aval}" for o in e.outputs)
                ins = " ".join(str(a) if isinstance(a, Literal) else namer(a) for a in e.inputs)
                return f"{outs} = {e.primitive.name} {ins}"
            return format_eqn(e, namer, 0, False).strip()  # type: ignore[arg-type]

        def show(steps: list[Step], pad: str) -> None:
            for st in steps:
                if st.kind == "host":
                    lines.append(f"{pad}host round-trip ({st.eqns[0].primitive.name}):")
                    lines.append(f"{pad}    {eqn_text(st.eqns[0])}")
                elif st.kind == "kernels":
                    for spec in st.specs:
                        grid = ", ".join(f"{g}/{lsz}" + (f"@{o}" if o else "") for g, lsz, o in spec.launches)
                        note = f", {spec.note}" if spec.note else ""
                        lines.append(f"{pad}kernel {spec.name} [{spec.kind}{note}] launches {grid or '-'}; "
                                     f"{len(spec.eqns)} eqns:")
                        lines.extend(f"{pad}    {eqn_text(e)}" for e in spec.eqns)
                else:
                    lines.append(f"{pad}{control.header(st)}:")
                    lines.append(f"{pad}    {eqn_text(st.eqns[0])}")
                    for label, block in zip(control.block_labels(st), st.blocks):
                        if not block:
                            continue
                        lines.append(f"{pad}  {label}:")
                        show(block, pad + "    ")

        show(self.steps, "")
        if self.fusion is not None:
            lines.extend(self.fusion.describe(self.ordered, names))
        return "\n".join(lines)




def _same_values(flat: Graph, flat_plan: FusionPlan, ordered: Graph, plan: FusionPlan | None) -> dict[Var, Var]:
    """Each value computed inside a region of the lowered graph (where the regions' bodies,
    expanded, hold values of their own) mapped to the same value of the graph the regions were
    chosen on, so that ``describe`` names both alike. Regions match by their root's outputs,
    which are the same values in both graphs, and their members by order."""
    if plan is None:
        return {}
    by_root = {o: r for r in plan.regions for o in ordered.eqns[r.root].outputs}
    same: dict[Var, Var] = {}
    for r in flat_plan.regions:
        q = by_root.get(flat.eqns[r.root].outputs[0])
        if q is None or len(q.members) != len(r.members):
            continue
        for i, j in zip(sorted(r.members), sorted(q.members)):
            same.update(zip(flat.eqns[i].outputs, ordered.eqns[j].outputs))
    return same
