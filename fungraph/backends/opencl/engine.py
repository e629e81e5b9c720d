"""The OpenCL executable: a planned graph turned into one program of generated kernels, one
arena buffer, and a flat list of launches (and host round-trips) run back to back.

Compile time: choose fused regions (``fusion.plan_fusion``), give every value that must be
stored a *slot* (an input, a constant, an arena range, a fresh output, or kernel scratch),
generate one kernel per region or primitive, pack the arena slots with the interval planner
(``offsets.plan_offsets``, 64-byte aligned, at kernel granularity: fusion changes which
values exist and when they die, so the per-equation plan of the jit is not reused), build
the program once and launch every kernel once to warm PoCL's work-group compilation.

Call time: bind the inputs (device arrays as they are, numpy arrays copied into per-input
staging buffers), allocate one fresh buffer per output, set the changing kernel arguments
and enqueue everything; nothing waits until the caller reads a result.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.backends.opencl.codegen import Access, contiguous, preamble
from fungraph.backends.opencl.device import (
    TRANSFER_STATS,
    OpenCLArray,
    download,
    get_device,
    upload,
)
from fungraph.backends.opencl.fusion import FusionPlan, plan_fusion
from fungraph.backends.opencl.kernels import (
    KernelSpec,
    canonical_copy_access,
    conv_kernel,
    dot_kernels,
    elementwise_kernel,
    graph_has_dtype,
    merged_stride,
    reduce_kernels,
    scatter_kernel,
)
from fungraph.interpreters.memory import MemoryPlan
from fungraph.interpreters.offsets import plan_offsets
from fungraph.ir import Eqn, Graph, Literal, ShapedArray, Var

ALIGNMENT = 64
ENGINE_STATS = {"executables": 0, "kernels_built": 0, "build_seconds": 0.0, "output_allocations": 0}


@dataclass
class Slot:
    kind: str                      # input, const, arena, scratch, output
    aval: ShapedArray
    index: int = -1                # input or output position
    first: int = 0                 # first step that touches it
    last: int = 0                  # last step that touches it
    byte_offset: int = 0


@dataclass
class Step:
    kind: str                      # "kernels" or "host"
    eqns: list[int] = field(default_factory=list)
    specs: list[KernelSpec] = field(default_factory=list)
    host_inputs: list[Access | Literal] = field(default_factory=list)
    host_outputs: list[int] = field(default_factory=list)


class OpenCLExecutable:
    """``run(args) -> outputs`` on the device; outputs are :class:`OpenCLArray` values."""

    def __init__(self, graph: Graph, plan: MemoryPlan, donated: Sequence[bool] = (), fuse: bool = True) -> None:
        t0 = time.perf_counter()
        self.dev = get_device()
        self.info = self.dev.info
        self.graph = graph
        self.plan = plan
        self.donated = tuple(donated) + (False,) * (len(graph.invars) - len(donated))
        if graph_has_dtype(graph, dtypes.float64):
            self.dev.check_dtype(ShapedArray((), dtypes.float64), "this graph")
        sizes = [v.aval.size for v in graph.invars] + [o.aval.size for e in graph.eqns for o in e.outputs]
        self.idx_type = "long" if max(sizes, default=0) >= 2**31 - 1 else "int"
        self.fusion: FusionPlan = plan_fusion(graph, fuse)
        self.slots: list[Slot] = []
        self.access: dict[Var, Access] = {}
        self.steps: list[Step] = []
        self.const_host: dict[int, np.ndarray] = {}
        self._n_kernels = 0
        self._lower()
        self._plan_arena()
        self._build()
        self.compile_seconds = time.perf_counter() - t0
        ENGINE_STATS["executables"] += 1

    # --- lowering the graph to steps ---------------------------------------------------

    def _slot(self, kind: str, aval: ShapedArray, index: int = -1) -> int:
        step = len(self.steps)
        self.slots.append(Slot(kind, aval, index, step, step))
        return len(self.slots) - 1

    def _store(self, v: Var) -> Access:
        """A contiguous slot for a value computed by the step being built."""
        j = self._out_index.get(v)
        if j is not None and j not in self._out_taken:
            self._out_taken.add(j)
            s = self._slot("output", v.aval, j)
            self._out_slot[j] = s
        else:
            s = self._slot("arena", v.aval)
        a = Access(s, v.aval, 0, contiguous(v.aval.shape))
        self.access[v] = a
        return a

    def _scratch(self, aval: ShapedArray) -> Access:
        return Access(self._slot("scratch", aval), aval, 0, contiguous(aval.shape))

    def _const(self, value: np.ndarray) -> Access:
        arr = np.ascontiguousarray(value)
        aval = ShapedArray(arr.shape, arr.dtype)
        s = self._slot("const", aval)
        self.const_host[s] = arr
        return Access(s, aval, 0, contiguous(arr.shape))

    def _atom_access(self, a: Var | Literal) -> Access:
        return self._const(a.array) if isinstance(a, Literal) else self.access[a]

    def _name(self, what: str) -> str:
        self._n_kernels += 1
        return f"k{self._n_kernels}_{what}"

    def _lower(self) -> None:
        g = self.graph
        self._out_index: dict[Var, int] = {}
        produced = {o for e in g.eqns for o in e.outputs}
        for j, a in enumerate(g.outvars):
            if isinstance(a, Var) and a in produced and a not in self._out_index:
                self._out_index[a] = j
        self._out_taken: set[int] = set()
        self._out_slot: dict[int, int] = {}
        for i, v in enumerate(g.invars):
            s = self._slot("input", v.aval, i)
            self.access[v] = Access(s, v.aval, 0, contiguous(v.aval.shape))
        for v, c in zip(g.constvars, g.consts):
            self.access[v] = self._const(c)
        fusion = self.fusion
        for i, e in enumerate(g.eqns):
            region = fusion.region_of.get(i)
            if i in fusion.aliases:
                from fungraph.backends.opencl.codegen import view_access

                self.access[e.outputs[0]] = view_access(e, self.access[e.inputs[0]])
            elif region is not None and region.root == i:
                self._lower_region(region)
            elif region is not None:
                continue
            elif e.primitive.name == "dot_general":
                self._lower_dot(i, e)
            elif e.primitive.name == "conv":
                self._lower_kernel_step(i, [conv_kernel(self._name("conv"), self._atom_access(e.inputs[0]),
                                                        self._atom_access(e.inputs[1]), self._store(e.outputs[0]),
                                                        e.params, self.info, self.idx_type)])
            elif e.primitive.name == "scatter_add":
                upd, idx = (self._atom_access(a) for a in e.inputs)
                spec = scatter_kernel(self._name("scatter_add"), upd, idx, self._store(e.outputs[0]),
                                      e.params["axis"], self.info, self.idx_type)
                self._lower_kernel_step(i, [spec])
            else:
                self._lower_host(i, e)
        self._lower_outputs()

    def _lower_kernel_step(self, i: int | list[int], specs: list[KernelSpec]) -> None:
        eqns = i if isinstance(i, list) else [i]
        step = Step("kernels", eqns, specs)
        for spec in specs:
            spec.eqns = eqns
            for s, _ in spec.slots:
                self.slots[s].last = len(self.steps)
        self.steps.append(step)

    def _lower_region(self, region: Any) -> None:
        g = self.graph
        members = {o: g.eqns[m] for m in region.members for o in g.eqns[m].outputs}
        eqns = sorted(region.members)
        if region.kind == "reduce":
            e = g.eqns[region.root]
            inner = {v: m for v, m in members.items() if m is not e}
            out = self._store(e.outputs[0])
            specs = reduce_kernels(self._name(e.primitive.name), e, inner, self.access.get, out, self._scratch,
                                   self.idx_type, self.info)
            self._lower_kernel_step(eqns, specs)
            return
        outs = [(v, self._store(v)) for v in region.outputs]
        spec = elementwise_kernel(self._name("fused" if len(eqns) > 1 else g.eqns[region.root].primitive.name),
                                  region.shape, outs, members, self.access.get, self.idx_type, self.info)
        self._lower_kernel_step(eqns, [spec])

    def _lower_dot(self, i: int, e: Eqn) -> None:
        """Pick a dot kernel and copy operands into the layout it needs: the register-blocked
        kernel wants rows of ``rhs`` contiguous (n >= 16, m >= 4); otherwise, for k >= 16, the
        dot-product kernel wants both operands contiguous along k; else the scalar kernel."""
        lhs, rhs = (self._atom_access(a) for a in e.inputs)
        (lc, rc), (lb, rb) = e.params["dimension_numbers"]
        lf = tuple(d for d in range(len(lhs.shape)) if d not in lc and d not in lb)
        rf = tuple(d for d in range(len(rhs.shape)) if d not in rc and d not in rb)
        size = lambda a, ds: int(np.prod([a.shape[d] for d in ds], dtype=np.int64))  # noqa: E731
        m, k, n = size(lhs, lf), size(lhs, lc), size(rhs, rf)
        out = self._store(e.outputs[0])
        specs: list[KernelSpec] = []
        if n >= 16 and m >= 4:
            lhs_order, rhs_order = lb + lf + lc, rb + rc + rf
            lhs_ok = all(merged_stride(lhs, g) is not None for g in (lb, lf, lc))
            rhs_ok = merged_stride(rhs, rb) is not None and merged_stride(rhs, rc) is not None \
                and merged_stride(rhs, rf) == 1
        elif k >= 16:
            lhs_order, rhs_order = lb + lf + lc, rb + rf + rc
            lhs_ok = merged_stride(lhs, lb) is not None and merged_stride(lhs, lf) is not None \
                and merged_stride(lhs, lc) == 1
            rhs_ok = merged_stride(rhs, rb) is not None and merged_stride(rhs, rf) is not None \
                and merged_stride(rhs, rc) == 1
        else:
            lhs_order, rhs_order = lb + lf + lc, rb + rc + rf
            lhs_ok = all(merged_stride(lhs, g) is not None for g in (lb, lf, lc))
            rhs_ok = all(merged_stride(rhs, g) is not None for g in (rb, rc, rf))
        if not lhs_ok:
            lhs, spec = self._copy_canonical(lhs, lhs_order)
            specs.append(spec)
            lb, lf, lc = _ranges(len(lb), len(lf), len(lc))
        if not rhs_ok:
            rhs, spec = self._copy_canonical(rhs, rhs_order)
            specs.append(spec)
            if rhs_order == rb + rf + rc:
                rb, rf, rc = _ranges(len(rb), len(rf), len(rc))
            else:
                rb, rc, rf = _ranges(len(rb), len(rc), len(rf))
        dims = ((lc, rc), (lb, rb))
        specs += dot_kernels(self._name("dot_general"), lhs, rhs, out, dims, self.info, self.idx_type) or []
        self._lower_kernel_step(i, specs)

    def _copy_canonical(self, a: Access, order: tuple[int, ...]) -> tuple[Access, KernelSpec]:
        shape = tuple(a.shape[d] for d in order)
        dst_scratch = self._scratch(ShapedArray(shape, a.aval.dtype))
        src, dst = canonical_copy_access(a, order, dst_scratch.slot, 0)
        tmp = Var(src.aval)
        spec = elementwise_kernel(self._name("relayout"), shape, [(tmp, dst)], {},
                                  lambda v: src if v is tmp else None, self.idx_type, self.info)
        spec.kind = "copy"
        return dst, spec

    def _lower_host(self, i: int, e: Eqn) -> None:
        ins = [a if isinstance(a, Literal) else self.access[a] for a in e.inputs]
        outs = [self._store(o).slot for o in e.outputs]
        step = Step("host", [i], host_inputs=ins, host_outputs=outs)
        for a in ins:
            if isinstance(a, Access):
                self.slots[a.slot].last = len(self.steps)
        self.steps.append(step)

    def _lower_outputs(self) -> None:
        """Outputs that no step writes (inputs, constants, literals, aliases) are copied into
        their fresh output buffers by one last kernel each, on the device."""
        for j, a in enumerate(self.graph.outvars):
            if j in self._out_slot:
                continue
            if isinstance(a, Var) and a in self._out_index and self._out_index[a] != j:
                continue
            s = self._slot("output", a.aval, j)
            self._out_slot[j] = s
            dst = Access(s, a.aval, 0, contiguous(a.aval.shape))
            tmp = Var(a.aval)
            if isinstance(a, Literal):
                spec = elementwise_kernel(self._name("fill"), a.aval.shape, [(tmp, dst)], {}, lambda v: None,
                                          self.idx_type, self.info, values=[a])
            else:
                src = self.access[a]
                spec = elementwise_kernel(self._name("copy"), a.aval.shape, [(tmp, dst)], {},
                                          lambda v, src=src, tmp=tmp: src if v is tmp else None,
                                          self.idx_type, self.info)
            spec.kind = "copy"
            self._lower_kernel_step([], [spec])
        self.output_plan: list[int] = []
        for j, a in enumerate(self.graph.outvars):
            if isinstance(a, Var) and a in self._out_index:
                self.output_plan.append(self._out_slot[self._out_index[a]])
            else:
                self.output_plan.append(self._out_slot[j])

    # --- the arena -----------------------------------------------------------------------

    def _plan_arena(self) -> None:
        arena = [k for k, s in enumerate(self.slots) if s.kind in ("arena", "scratch")]
        intervals = [(self.slots[k].first, self.slots[k].last + 1, _aligned(self.slots[k].aval.nbytes))
                     for k in arena]
        if intervals:
            plan = plan_offsets(intervals, "greedy_size", alignment=ALIGNMENT)
            for k, off in zip(arena, plan.offsets):
                self.slots[k].byte_offset = int(off)
            self.arena_bytes = int(plan.arena_bytes)
        else:
            self.arena_bytes = 0

    # --- building and binding --------------------------------------------------------------

    def _build(self) -> None:
        dev, cl = self.dev, self.dev.cl
        self.arena = dev.alloc(self.arena_bytes)
        self.buf: list[Any] = [None] * len(self.slots)
        self.off: list[int] = [0] * len(self.slots)
        self.staging: dict[int, Any] = {}
        for k, s in enumerate(self.slots):
            if s.kind in ("arena", "scratch"):
                self.buf[k] = self.arena
                self.off[k] = s.byte_offset // s.aval.dtype.itemsize
            elif s.kind == "const":
                self.buf[k] = upload(dev, self.const_host[k])
            elif s.kind == "input":
                self.staging[s.index] = dev.alloc(s.aval.nbytes)
        self.input_slots = [k for k, s in enumerate(self.slots) if s.kind == "input"]
        self.output_slots = [k for k, s in enumerate(self.slots) if s.kind == "output"]
        specs = [spec for st in self.steps if st.kind == "kernels" for spec in st.specs]
        used = {dtypes.canonical(dt) for spec in specs for _, dt in spec.slots}
        self.source = preamble(used) + "\n" + "\n".join(spec.source for spec in specs)
        t0 = time.perf_counter()
        options = ["-w"] + (["-cl-fp32-correctly-rounded-divide-sqrt"] if self.info.correctly_rounded_sqrt else [])
        self.program = None
        if specs:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.program = cl.Program(dev.context, self.source).build(options=options)
        self.build_seconds = time.perf_counter() - t0
        ENGINE_STATS["kernels_built"] += len(specs)
        ENGINE_STATS["build_seconds"] += self.build_seconds
        self.program_steps: list[tuple] = []
        for st in self.steps:
            if st.kind == "host":
                self.program_steps.append(("host", st))
                continue
            for spec in st.specs:
                kernel = cl.Kernel(self.program, spec.name)
                dyn = []
                for a, (s, _) in enumerate(spec.slots):
                    if self.slots[s].kind in ("input", "output"):
                        dyn.append((2 * a, s))
                    else:
                        kernel.set_arg(2 * a, self.buf[s])
                        kernel.set_arg(2 * a + 1, np.int64(self.off[s]))
                launches = [lc for lc in spec.launches if all(d > 0 for d in lc[0])]
                if launches:
                    self.program_steps.append(("kernel", kernel, tuple(dyn), tuple(launches)))
        self._warm()

    def _warm(self) -> None:
        """Launch every kernel once (inputs: staging buffers, outputs: one dummy buffer) so
        PoCL compiles its work-group functions now rather than on the first call."""
        nbytes = max([self.slots[s].aval.nbytes for s in self.output_slots], default=1)
        dummy = self.dev.alloc(nbytes)
        for s in self.input_slots:
            self.buf[s] = self.staging[self.slots[s].index]
            self.off[s] = 0
        for s in self.output_slots:
            self.buf[s] = dummy
            self.off[s] = 0
        t0 = time.perf_counter()
        self._enqueue_kernels_only()
        self.dev.queue.finish()
        self.warm_seconds = time.perf_counter() - t0

    def _enqueue_kernels_only(self) -> None:
        for item in self.program_steps:
            if item[0] == "kernel":
                self._launch(item)

    def _launch(self, item: tuple) -> None:
        _, kernel, dyn, launches = item
        buf, off = self.buf, self.off
        for a, s in dyn:
            kernel.set_arg(a, buf[s])
            kernel.set_arg(a + 1, np.int64(off[s]))
        q = self.dev.queue
        enqueue = self.dev.cl.enqueue_nd_range_kernel
        for gsize, lsize, goff in launches:
            enqueue(q, kernel, gsize, lsize, global_work_offset=goff)

    # --- running -----------------------------------------------------------------------------

    def run(self, args: Sequence[Any], into: Sequence[Any] | None = None) -> list[OpenCLArray]:
        dev = self.dev
        for s in self.input_slots:
            i = self.slots[s].index
            x = args[i]
            if isinstance(x, OpenCLArray):
                self.buf[s] = x.buffer
                self.off[s] = x.offset
            else:
                host = np.asarray(x)
                if host.dtype != self.slots[s].aval.dtype:
                    host = host.astype(self.slots[s].aval.dtype)
                self.buf[s] = upload(dev, host, self.staging[i])
                self.off[s] = 0
        for s in self.output_slots:
            j = self.slots[s].index
            if into is not None:
                self.buf[s] = into[j].buffer
                self.off[s] = into[j].offset
            else:
                self.buf[s] = dev.take(self.slots[s].aval.nbytes)
                self.off[s] = 0
        if into is None:
            ENGINE_STATS["output_allocations"] += len(self.output_slots)
        for item in self.program_steps:
            if item[0] == "kernel":
                self._launch(item)
            else:
                self._run_host(item[1])
        dev.queue.flush()
        pooled = into is None
        arrays = {s: OpenCLArray(self.buf[s], self.slots[s].aval, self.off[s], pooled) for s in self.output_slots}
        outs = [arrays[s] for s in self.output_plan]
        for s in self.input_slots + self.output_slots:
            self.buf[s] = None
        return list(into) if into is not None else outs

    def _run_host(self, step: Step) -> None:
        """Copy the inputs to the host, run the primitive's numpy impl, copy the results back."""
        e = self.graph.eqns[step.eqns[0]]
        ins = []
        for a in step.host_inputs:
            if isinstance(a, Literal):
                ins.append(a.array)
            else:
                ins.append(download(self.dev, self.buf[a.slot], a.aval, self.off[a.slot] + a.offset, a.strides))
        res = e.primitive.impl(*ins, **e.params.kwargs())
        outs = res if e.primitive.multiple_results else [res]
        for s, r in zip(step.host_outputs, outs):
            slot = self.slots[s]
            arr = np.asarray(r, dtype=slot.aval.dtype).reshape(slot.aval.shape)
            upload(self.dev, arr, self.buf[s], self.off[s] * slot.aval.dtype.itemsize)
        TRANSFER_STATS["host_round_trips"] += 1

    # --- inspection -----------------------------------------------------------------------------

    @property
    def kernel_count(self) -> int:
        return sum(len(st.specs) for st in self.steps if st.kind == "kernels")

    @property
    def host_steps(self) -> int:
        return sum(1 for st in self.steps if st.kind == "host")

    def describe(self) -> str:
        """Each kernel (and host round-trip) with the equations it covers, in launch order."""
        from fungraph.ir_text import _format_eqn, _Namer

        namer = _Namer()
        for v in self.graph.invars + self.graph.constvars:
            namer(v)
        text: dict[int, str] = {}
        for i, e in enumerate(self.graph.eqns):
            text[i] = _format_eqn(e, namer, 0, False).strip()
        lines = [f"OpenCL executable on {self.info.name!r}: {self.kernel_count} kernels, {self.host_steps} host "
                 f"round-trips, {len(self.fusion.aliases)} free views; arena {self.arena_bytes} B "
                 f"(jit plan {self.plan.arena_bytes} B); build {self.build_seconds * 1e3:.0f} ms, "
                 f"warm-up {self.warm_seconds * 1e3:.0f} ms"]
        for st in self.steps:
            if st.kind == "host":
                lines.append(f"host round-trip ({self.graph.eqns[st.eqns[0]].primitive.name}):")
                lines.append(f"    {text[st.eqns[0]]}")
                continue
            for spec in st.specs:
                grid = ", ".join(f"{g}/{lsz}" + (f"@{o}" if o else "") for g, lsz, o in spec.launches)
                note = f", {spec.note}" if spec.note else ""
                lines.append(f"kernel {spec.name} [{spec.kind}{note}] launches {grid or '-'}; "
                             f"{len(spec.eqns)} eqns:")
                lines += [f"    {text[i]}" for i in spec.eqns]
        return "\n".join(lines)


def _ranges(*sizes: int) -> list[tuple[int, ...]]:
    out, start = [], 0
    for n in sizes:
        out.append(tuple(range(start, start + n)))
        start += n
    return out


def _aligned(n: int) -> int:
    return max(ALIGNMENT, -(-n // ALIGNMENT) * ALIGNMENT)
