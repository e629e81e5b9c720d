"""The OpenCL executable: a planned graph turned into one program of generated kernels, one
arena buffer, and a tree of steps (kernel launches, host round-trips, and device-resident
control flow) run back to back.

Compile time: choose fused regions (``fusion.plan_fusion``), give every value that must be
stored a *slot* (an input, a constant, an arena range, a fresh output, kernel scratch, or a
*window*: a per-iteration slice of another slot), generate one kernel per region or
primitive, lower ``cond``/``while``/``scan`` sub-graphs into the same program and arena
(``control.py``), pack the arena slots with the interval planner (``offsets.plan_offsets``,
64-byte aligned, at kernel granularity: fusion changes which values exist and when they die,
so the per-equation plan of the jit is not reused), build the program once and launch every
kernel once to warm PoCL's work-group compilation.

Call time: bind the inputs (device arrays as they are, numpy arrays copied into per-input
staging buffers), allocate one fresh buffer per output, set the changing kernel arguments
and enqueue everything; the only waits are the scalar reads of a ``cond`` index or a
``while`` predicate, and the caller reading a result.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph._caches import on_clear
from fungraph.backends import taking_turns
from fungraph.backends.opencl import control, kernels
from fungraph.backends.opencl.codegen import VIEW_OPS, Access, contiguous, merged_stride, preamble, view_access
from fungraph.backends.opencl.device import (
    TRANSFER_STATS,
    OpenCLArray,
    download,
    get_device,
    read_scalar,
    upload,
)
from fungraph.backends.opencl.epilogue import (
    Epilogue,
    broadcast_access,
    find_epilogues,
    find_reduce_epilogues,
    kernel_strides,
    lane_epilogue,
    region_inputs,
)
from fungraph.backends.opencl.fusion import FusionPlan, Region, plan_fusion
from fungraph.backends.opencl.kernels import (
    DOT_COLS,
    NARROW_MIN_ROWS,
    PACK_MIN_ROWS,
    PACK_ROWS,
    KernelSpec,
    canonical_copy_access,
    column_sum_operand,
    conv_kernel,
    dot_kernels,
    dot_panels,
    dot_row_panels,
    elementwise_kernel,
    elementwise_kernels,
    fused_panels,
    graph_avals,
    merge_copies,
    overlap_row_panel,
    pack_kernel,
    pack_tail_kernel,
    reduce_kernels,
    scatter_kernel,
    scatter_order,
    scatter_sort_kernels,
    scatter_sorts,
    window_update_kernel,
)
from fungraph.interpreters.memory import MemoryPlan
from fungraph.interpreters.offsets import plan_offsets
from fungraph.ir import Eqn, Graph, Literal, ShapedArray, Var

ALIGNMENT = 64
ENGINE_STATS = {"executables": 0, "kernels_built": 0, "build_seconds": 0.0, "output_allocations": 0,
                "donated_outputs": 0, "loop_iterations": 0, "programs_reused": 0, "copies_skipped": 0}
#: Built programs by (context, source, options), most recently used last: an executable whose kernels
#: are identical to an earlier one's (the same graph jitted again by another function) takes its
#: program instead of building it; ``clear_caches`` empties it, and pyopencl's and PoCL's disk caches
#: serve a new process.
PROGRAM_CACHE_SIZE = 64
_PROGRAMS: dict[tuple[int, str, tuple[str, ...]], Any] = {}
on_clear(_PROGRAMS.clear)
@dataclass
class Slot:
    kind: str                      # input, const, arena, scratch, output, window
    aval: ShapedArray
    index: int = -1                # input or output position
    first: int = 0                 # first clock tick that touches it
    last: int = 0                  # last clock tick that touches it
    byte_offset: int = 0
    parent: int = -1               # window: the slot it slices


@dataclass
class Window:
    """Slot ``slot`` is ``parent`` at element offset ``base + i * stride`` in iteration ``i``."""

    slot: int
    parent: int
    base: int
    stride: int


@dataclass
class Step:
    kind: str                      # kernels, host, cond, while, scan
    eqns: list[Eqn] = field(default_factory=list)
    specs: list[KernelSpec] = field(default_factory=list)
    host_inputs: list[Access | Literal] = field(default_factory=list)
    host_outputs: list[int] = field(default_factory=list)
    blocks: list[list[Step]] = field(default_factory=list)   # cond: branches; while: cond, body, odd tail; scan: body
    index: Access | None = None    # cond: the branch index (None: chosen at compile time); while: the predicate
    swap: dict[int, int] = field(default_factory=dict)       # carry slots exchanged on odd iterations
    windows: list[Window] = field(default_factory=list)
    length: int = 0
    reverse: bool = False
    speculative: bool = False      # while: masked iterations enqueued in batches per readback


_REENTERED = ("an OpenCL-jitted function was called again from a host callback inside its own call; its "
               "arena and kernel arguments are in use (call it after the outer call returns, or jit the "
               "callback's work with backend='cpu')")


class OpenCLExecutable:
    """``run(args) -> outputs`` on the device; outputs are :class:`OpenCLArray` values.

    Thread safety: a call binds its buffers into shared state (the slot tables ``buf`` and
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
        graph = donation_order(graph, self.donated)
        self.graph = graph
        self.plan = plan
        avals = graph_avals(graph)
        for a in avals:
            self.dev.check_dtype(a, "this graph")
        self.idx_type = "long" if max((a.size for a in avals), default=0) >= 2**31 - 1 else "int"
        self._fuse = fuse
        self.fusion: FusionPlan = plan_fusion(graph, fuse)
        self.slots: list[Slot] = []
        self.access: dict[Var, Access] = {}
        self.steps: list[Step] = []
        self._block = self.steps
        self._dest: dict[Var, Access] = {}
        self._depth = 0
        self._clock = 0
        self.const_host: dict[int, np.ndarray] = {}
        self._n_kernels = 0
        self._lower()
        self._plan_donation()
        self._plan_arena()
        self._build()
        self.compile_seconds = time.perf_counter() - t0
        ENGINE_STATS["executables"] += 1

    # --- slots and the clock ------------------------------------------------------------

    def _slot(self, kind: str, aval: ShapedArray, index: int = -1, parent: int = -1) -> int:
        self.slots.append(Slot(kind, aval, index, self._clock, self._clock, parent=parent))
        return len(self.slots) - 1

    def touch(self, s: int) -> None:
        """``s`` (and the slots a window slices) is used at the current clock tick."""
        while s >= 0:
            slot = self.slots[s]
            slot.last = max(slot.last, self._clock)
            s = slot.parent

    def tick(self) -> int:
        self._clock += 1
        return self._clock - 1

    def extend_lifetimes(self, start: int, end: int) -> None:
        """A loop runs its body many times: every slot alive when the loop starts (carries,
        stacked outputs, values the body reads) stays alive until the loop ends."""
        for slot in self.slots:
            if slot.first <= start <= slot.last:
                slot.last = max(slot.last, end)

    def store(self, v: Var) -> Access:
        """A contiguous slot for a value computed by the step being built: the destination a
        sub-graph's caller chose for it, a graph output, or an arena range."""
        dest = self._dest.pop(v, None)
        if dest is not None:
            self.access[v] = dest
            self.touch(dest.slot)
            return dest
        last = self._updated_into.get(v) if self._depth == 0 else None
        if last is not None and last in self._update_slots:
            a = self._update_slots[last]
            self.access[v] = a
            self.touch(a.slot)
            return a
        j = self._out_index.get(v if last is None else last) if self._depth == 0 else None
        if j is not None and j not in self._out_taken:
            self._out_taken.add(j)
            s = self._slot("output", v.aval, j)
            self._out_slot[j] = s
        else:
            s = self._slot("arena", v.aval)
        a = Access(s, v.aval, 0, contiguous(v.aval.shape))
        self.access[v] = a
        if last is not None:
            self._update_slots[last] = a
        return a

    def arena_access(self, aval: ShapedArray) -> Access:
        return Access(self._slot("arena", aval), aval, 0, contiguous(aval.shape))

    def _scratch(self, aval: ShapedArray) -> Access:
        return Access(self._slot("scratch", aval), aval, 0, contiguous(aval.shape))

    def window(self, parent: Access, aval: ShapedArray, stride: int, strides: tuple[int, ...]) -> tuple[Window, Access]:
        """A per-iteration slice ``parent[i]`` (a scan's ``xs[i]`` or ``ys[i]``)."""
        s = self._slot("window", aval, parent=parent.slot)
        return Window(s, parent.slot, parent.offset, stride), Access(s, aval, 0, strides)

    def _const(self, value: np.ndarray) -> Access:
        """A constant slot typed as ``value`` is (a scalar keeps shape ``()``: numpy's
        ``ascontiguousarray`` makes it ``(1,)``, and a kernel indexing by that type reads
        fewer axes than the value it meets)."""
        arr = np.ascontiguousarray(value).reshape(np.shape(value))
        aval = ShapedArray(arr.shape, arr.dtype)
        s = self._slot("const", aval)
        self.const_host[s] = arr
        return Access(s, aval, 0, contiguous(arr.shape))

    def atom_access(self, a: Var | Literal) -> Access:
        return self._const(a.array) if isinstance(a, Literal) else self.access[a]

    def _name(self, what: str) -> str:
        self._n_kernels += 1
        return f"k{self._n_kernels}_{what}"

    # --- lowering the graph to steps ---------------------------------------------------

    def _lower(self) -> None:
        g = self.graph
        self._out_index: dict[Var, int] = {}
        produced = {o for e in g.eqns for o in e.outputs}
        for j, a in enumerate(g.outvars):
            if isinstance(a, Var) and a in produced and a not in self._out_index:
                self._out_index[a] = j
        self._out_taken: set[int] = set()
        self._out_slot: dict[int, int] = {}
        self._updated_into = updated_in_place_chains(g, self.fusion)
        self._update_slots: dict[Var, Access] = {}
        for i, v in enumerate(g.invars):
            s = self._slot("input", v.aval, i)
            self.access[v] = Access(s, v.aval, 0, contiguous(v.aval.shape))
        for v, c in zip(g.constvars, g.consts):
            self.access[v] = self._const(c)
        self._lower_eqns(g, self.fusion)
        self._lower_outputs()

    def _lower_eqns(self, g: Graph, fusion: FusionPlan) -> None:
        epilogues = find_epilogues(g, fusion) if self.info.is_cpu and self._fuse and DOT_EPILOGUES else {}
        reduce_sites = find_reduce_epilogues(g, fusion) if self._fuse and REDUCE_EPILOGUES else {}
        donated = {v for x, d in zip(g.invars, self.donated) if d for v in _views_of(g.eqns, x)} \
            if g is self.graph else set()
        absorbed: set[int] = set()
        for i, e in enumerate(g.eqns):
            region = fusion.region_of.get(i)
            name = e.primitive.name
            if i in absorbed:
                continue
            if i in fusion.aliases:
                self.access[e.outputs[0]] = view_access(e, self.access[e.inputs[0]])
            elif region is not None and region.root == i:
                site = reduce_sites.get(i)
                if self._lower_region(g, region, None if site is None else (g, *site)):
                    absorbed |= site[0].members
            elif region is not None:
                continue
            elif name == "dot_general":
                site = epilogues.get(i)
                if site is not None and _reads_donated_later(g, i, site[0], donated):
                    site = None
                if self._lower_dot(e, None if site is None else (g, *site)):
                    absorbed |= site[0].members
            elif name == "conv":
                self.add_kernels([e], [conv_kernel(self._name("conv"), self.atom_access(e.inputs[0]),
                                                   self.atom_access(e.inputs[1]), self.store(e.outputs[0]),
                                                   e.params, self.info, self.idx_type)])
            elif name == "scatter_add":
                upd, idx = (self.atom_access(a) for a in e.inputs)
                known = self.const_host.get(idx.slot)
                shape, axis = e.params["shape"], e.params["axis"]
                order, specs = None, []
                if known is not None:
                    order = tuple(self._const(a) for a in scatter_order(known, shape[axis]))
                elif scatter_sorts(shape, axis, idx.aval.size):
                    specs, order = scatter_sort_kernels(self._name("scatter_sort"), idx, shape[axis], self._scratch,
                                                        self.info, self.idx_type)
                specs.append(scatter_kernel(self._name("scatter_add"), upd, idx, self.store(e.outputs[0]),
                                            axis, self.info, self.idx_type, order, sorted_here=bool(specs)))
                self.add_kernels([e], specs)
            elif name == "dynamic_update_slice":
                self._lower_update_window(e)
            elif name in control.LOWERINGS:
                control.LOWERINGS[name](self, e)
            else:
                self._lower_host(e)

    def _lower_update_window(self, e: Eqn) -> None:
        """The operand copied into the output, then the update's window written over it. No
        copy when the operand shares the output's slot (:func:`updated_in_place_chains`); a
        donated input the output takes over at run time skips it then (``unless_same``)."""
        x, upd, *starts = (self.atom_access(a) for a in e.inputs)
        out = self.store(e.outputs[0])
        if out != x:
            kinds = (self.slots[x.slot].kind, self.slots[out.slot].kind)
            whole = x.offset == 0 and x.strides == contiguous(x.shape) and self._depth == 0
            self.copy_into(out, x, whole and kinds == ("input", "output"))
        if upd.aval.size:
            self.add_kernels([e], [window_update_kernel(self._name("update_window"), upd, starts, out,
                                                        e.params["mode"], self.info, self.idx_type)])

    def lower_subgraph(self, g: Graph, ins: Sequence[Access], dests: Sequence[Access],
                       fusion: FusionPlan | None = None) -> list[Step]:
        """Lower a closed sub-graph (a branch, a loop body or condition) with its inputs read
        from ``ins`` and its outputs written into ``dests`` (``fusion``: its regions, when the
        caller has planned them already); returns its steps."""
        saved = (self.access, self._block, self._dest)
        self.access = dict(zip(g.invars, ins))
        for v, c in zip(g.constvars, g.consts):
            self.access[v] = self._const(c)
        self._block = []
        self._dest = {}
        for v, d in zip(g.outvars, dests):
            if isinstance(v, Var) and v not in self.access and v not in self._dest:
                self._dest[v] = d
        self._depth += 1
        self._lower_eqns(g, fusion or self.plan_fusion(g))
        for v, d in zip(g.outvars, dests):
            src = v if isinstance(v, Literal) else self.access[v]
            if src != d:
                self.copy_into(d, src)
        self._depth -= 1
        block = self._block
        self.access, self._block, self._dest = saved
        return block

    def plan_fusion(self, g: Graph) -> FusionPlan:
        return plan_fusion(g, self._fuse)

    def optimized(self, g: Graph) -> Graph:
        """A sub-graph (branch, loop condition or body) after the optimiser passes ``jit`` runs
        on this backend's graphs (CSE, folding, ``fma``, ...), which do not enter sub-graphs."""
        from fungraph.backends import backend_factory
        from fungraph.interpreters.optimize import optimize
        from fungraph.jit import backend_passes

        return optimize(g, backend_passes(backend_factory("opencl")))[0]

    @property
    def clock(self) -> int:
        return self._clock

    def record(self, lower: Callable[[], object]) -> list[Step]:
        """The steps ``lower()`` adds, kept apart from the current block."""
        saved = self._block
        self._block = []
        lower()
        block = self._block
        self._block = saved
        return block

    def add_step(self, step: Step) -> None:
        self._block.append(step)

    def add_kernels(self, eqns: list[Eqn], specs: list[KernelSpec]) -> None:
        for spec in specs:
            spec.eqns = eqns
            for s, _ in spec.slots:
                self.touch(s)
        self._block.append(Step("kernels", eqns, specs))
        self.tick()

    def copy_into(self, dst: Access, src: Access | Literal, unless_same: bool = False) -> None:
        """One kernel writing ``src`` (an access or a literal) into the contiguous ``dst``;
        ``unless_same``: skipped in a call that binds both slots to one buffer."""
        tmp = Var(dst.aval)
        if isinstance(src, Literal):
            spec = elementwise_kernel(self._name("fill"), dst.shape, [(tmp, dst)], {}, lambda v: None,
                                      self.idx_type, self.info, values=[src])
        else:
            spec = elementwise_kernel(self._name("copy"), dst.shape, [(tmp, dst)], {},
                                      lambda v: src if v is tmp else None, self.idx_type, self.info)
        spec.kind = "copy"
        if unless_same:
            spec.unless_same = (dst.slot, src.slot)
        self.add_kernels([], [spec])

    def _lower_region(self, g: Graph, region: Region,
                      epilogue: tuple[Graph, Region, tuple[Eqn, ...]] | None = None) -> bool:
        """One region's kernels; a reduction also computes ``epilogue`` (a graph, the fused
        region of it that consumes the result and the free views to take early, from
        :func:`find_reduce_epilogues`) when every value that region reads is on the device.
        Returns whether it did."""
        members = {o: g.eqns[m] for m in region.members for o in g.eqns[m].outputs}
        eqns = [g.eqns[m] for m in sorted(region.members)]
        if region.kind == "reduce":
            e = g.eqns[region.root]
            inner = {v: m for v, m in members.items() if m is not e}
            lanes = column_sum_operand(e, inner, self.access.get, self.info) is not None
            ep = self._reduce_epilogue(e.outputs[0], *epilogue, lanes) if epilogue is not None else None
            out = self.store(e.outputs[0]) if ep is None else None
            specs = reduce_kernels(self._name(e.primitive.name), e, inner, self.access.get, out, self._scratch,
                                   self.idx_type, self.info, ep)
            self.add_kernels(eqns if ep is None else [*eqns, *ep.eqns], specs)
            return ep is not None
        outs = [(v, self.store(v)) for v in region.outputs]
        specs = elementwise_kernels(self._name("fused" if len(eqns) > 1 else g.eqns[region.root].primitive.name),
                                    region.shape, outs, members, self.access.get, self.idx_type, self.info)
        self.add_kernels(eqns, specs)
        return False

    def _reduce_epilogue(self, result: Var, g: Graph, region: Region, views: tuple[Eqn, ...],
                         lanes: bool) -> Epilogue | None:
        """The region as an :class:`Epilogue` of a reduction's ``result``, its inputs read
        through the engine's own accesses and its outputs stored now; None when a value it
        reads is not on the device yet, an output must go to a strided destination, or the sum
        is computed on vector lanes (``lanes``: 16 columns per work-item) and the region is not
        (the region then keeps its own kernel and the sum its faster form)."""
        eqns = tuple(g.eqns[j] for j in sorted(region.members))
        if lanes and not lane_epilogue(eqns, result.aval.dtype):
            return None
        self._take_views(views)
        inputs = region_inputs(g, region, result)
        if any(v not in self.access for v in inputs):
            return None
        shape = result.aval.shape
        if any((d := self._dest.get(v)) is not None and d.strides != contiguous(shape) for v in region.outputs):
            return None
        outs = tuple((v, self.store(v)) for v in region.outputs)
        return Epilogue(result, eqns, tuple((v, self.access[v]) for v in inputs), outs)

    def _take_views(self, views: tuple[Eqn, ...]) -> None:
        """Free views an epilogue reads, taken before their place in the program."""
        for v in views:
            src = self.access.get(v.inputs[0])
            view = view_access(v, src) if src is not None and v.outputs[0] not in self.access else None
            if view is not None:
                self.access[v.outputs[0]] = view

    def _lower_dot(self, e: Eqn, epilogue: tuple[Graph, Region, tuple[Eqn, ...]] | None = None) -> bool:
        """Pick a dot kernel and copy operands into the layout it needs: on a CPU a narrow
        ``out`` (n < 16) whose rows are adjacent in ``lhs`` needs no copy; otherwise for
        m >= PACK_MIN_ROWS (12) ``rhs`` is packed into 16-column panels (the last one zero-padded) and ``lhs``
        into 6-row panels unless its rows are contiguous along k; the unpacked register-blocked
        kernel wants rows of ``rhs`` contiguous (n >= 16, m >= 4); for k >= 16 the dot-product
        kernel wants both operands contiguous along k; else the scalar kernel. Other devices
        take any merged strides (the tiled kernel). ``epilogue`` (a graph, the fused region of it
        that consumes this product and the free views to take early, from
        :func:`find_epilogues`) is computed by the packed kernels when every value it reads is
        on the device; returns whether it was."""
        lhs, rhs = (self.atom_access(a) for a in e.inputs)
        (lc, rc), (lb, rb) = e.params["dimension_numbers"]
        lf = tuple(d for d in range(len(lhs.shape)) if d not in lc and d not in lb)
        rf = tuple(d for d in range(len(rhs.shape)) if d not in rc and d not in rb)
        size = lambda a, ds: int(np.prod([a.shape[d] for d in ds], dtype=np.int64))  # noqa: E731
        m, k, n = size(lhs, lf), size(lhs, lc), size(rhs, rf)
        specs: list[KernelSpec] = []
        narrow = n < DOT_COLS and m >= NARROW_MIN_ROWS and merged_stride(lhs, lf) == 1
        pack = self.info.is_cpu and not narrow and m >= PACK_MIN_ROWS and k > 0 and n > 0
        if not self.info.is_cpu or narrow:
            lhs_order, rhs_order = lb + lf + lc, rb + rc + rf
            lhs_ok = all(merged_stride(lhs, g) is not None for g in (lb, lf, lc))
            rhs_ok = all(merged_stride(rhs, g) is not None for g in (rb, rc, rf))
        elif pack or (n >= 16 and m >= 4):
            lhs_order, rhs_order = lb + lf + lc, rb + rc + rf
            lhs_ok = all(merged_stride(lhs, g) is not None for g in (lb, lf, lc))
            rhs_ok = merged_stride(rhs, rb) is not None and merged_stride(rhs, rc) is not None \
                and (pack or merged_stride(rhs, rf) == 1)
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
        swap = pack and _swap_operands(lhs, rhs, (lf, lc, rf, rc), (m, k, n))
        ep = self._epilogue(e.outputs[0], *epilogue, swap, (len(lb), len(lf), len(rf))) \
            if epilogue is not None and pack else None
        out = ep.outputs[0][1] if ep is not None else self.store(e.outputs[0])
        if swap:
            if ep is None:
                out = _transposed_out(out, len(lb), len(lf), len(rf))
            lhs, rhs, lb, lf, lc, rb, rf, rc = rhs, lhs, rb, rf, rc, lb, lf, lc
            m, n = n, m
        dims = ((lc, rc), (lb, rb))
        panels = row_panels = None
        fused = False
        if pack:
            b = int(np.prod([rhs.shape[d] for d in rb], dtype=np.int64))
            fused = fused_panels((b, m, k, n), rhs.aval.dtype, self.info)
            copies: list[KernelSpec] = []
            if fused:
                panels = dot_panels(rhs, dims, rhs.slot)[0]
            else:
                scratch = self._scratch(ShapedArray((b, -(-n // DOT_COLS), k, DOT_COLS), rhs.aval.dtype))
                view, panels = dot_panels(rhs, dims, scratch.slot)
                copies += pack_kernel(self._name("pack"), view, panels, self.info, self.idx_type)
                if n % DOT_COLS:
                    copies.append(pack_tail_kernel(self._name("pack_tail"), view, n % DOT_COLS, panels, self.info,
                                                   self.idx_type))
            row_bytes = (merged_stride(lhs, lf) or 0) * lhs.aval.dtype.itemsize
            aliasing = kernels.DOT_PACK_LHS and not fused and row_bytes % kernels.ALIAS_BYTES == 0
            if merged_stride(lhs, lc) not in (0, 1) or (merged_stride(lhs, lc) == 1 and aliasing):
                overlap = not fused and m % PACK_ROWS > 0 and m > PACK_ROWS
                scratch = self._scratch(ShapedArray((b, -(-m // PACK_ROWS) if overlap else m // PACK_ROWS, k,
                                                     PACK_ROWS), lhs.aval.dtype))
                view, row_panels = dot_row_panels(lhs, dims, scratch.slot, overlap)
                copies += pack_kernel(self._name("pack_rows"), view, row_panels, self.info, self.idx_type)
                if overlap:
                    copies += pack_kernel(self._name("pack_last_rows"), *overlap_row_panel(view, row_panels, m),
                                          self.info, self.idx_type,
                                          f"pack rows {m - PACK_ROWS}-{m - 1} into one more panel")
            copies = [c for c in copies if c.launches]
            specs += [merge_copies(self._name("pack"), copies, self.info, self.idx_type)] if len(copies) > 1 \
                else copies
        products = dot_kernels(self._name("dot_general"), lhs, rhs, out, dims, self.info, self.idx_type,
                               panels, row_panels, ep, fused) or []
        for spec in products:
            if swap:
                spec.note += "; transposed product out.T = rhs.T @ lhs.T"
            if ep is not None:
                spec.note += f"; {ep.note}"
        specs += products
        self.add_kernels([e, *ep.eqns] if ep is not None else [e], specs)
        return ep is not None

    def _epilogue(self, product: Var, g: Graph, region: Region, views: tuple[Eqn, ...], swap: bool,
                  sizes: tuple[int, int, int]) -> Epilogue | None:
        """The region as an :class:`Epilogue` of ``product`` (seen transposed when ``swap``), its
        outputs stored now; None when a value it reads is not on the device yet (its region is
        emitted later), or an access's axes do not merge into the kernels' three strides."""
        nb, nf, nr = sizes
        shape = product.aval.shape
        self._take_views(views)
        inputs = region_inputs(g, region, product)
        if any(v not in self.access for v in inputs):
            return None
        seen = (lambda a: _transposed_out(a, nb, nf, nr)) if swap else (lambda a: a)
        groups = (nb, nr if swap else nf)
        ins = tuple((v, seen(broadcast_access(self.access[v], shape))) for v in inputs)
        if any(kernel_strides(a, *groups) is None for _, a in ins):
            return None
        for v in region.outputs:
            dest = self._dest.get(v)
            if dest is not None and dest.strides != contiguous(shape):
                return None
        outs = tuple((v, seen(self.store(v))) for v in region.outputs)
        eqns = tuple(g.eqns[j] for j in sorted(region.members))
        return Epilogue(product, eqns, ins, outs)

    def _copy_canonical(self, a: Access, order: tuple[int, ...]) -> tuple[Access, KernelSpec]:
        shape = tuple(a.shape[d] for d in order)
        dst_scratch = self._scratch(ShapedArray(shape, a.aval.dtype))
        src, dst = canonical_copy_access(a, order, dst_scratch.slot, 0)
        return dst, self._relayout(src, dst, "relayout")

    def _relayout(self, src: Access, dst: Access, what: str) -> KernelSpec:
        """A copy kernel from the strided view ``src`` into the contiguous ``dst``."""
        tmp = Var(src.aval)
        spec = elementwise_kernel(self._name(what), src.shape, [(tmp, dst)], {},
                                  lambda v: src if v is tmp else None, self.idx_type, self.info)
        spec.kind = "copy"
        return spec

    def _lower_host(self, e: Eqn) -> None:
        ins = [a if isinstance(a, Literal) else self.access[a] for a in e.inputs]
        outs = [self.store(o).slot for o in e.outputs]
        for a in ins:
            if isinstance(a, Access):
                self.touch(a.slot)
        self.add_step(Step("host", [e], host_inputs=ins, host_outputs=outs))
        self.tick()

    def _lower_outputs(self) -> None:
        """Outputs that no step writes (inputs, constants, literals, aliases, loop carries) are
        copied into their fresh output buffers by one last kernel each, on the device."""
        for j, a in enumerate(self.graph.outvars):
            if j in self._out_slot:
                continue
            if isinstance(a, Var) and a in self._out_index and self._out_index[a] != j:
                continue
            s = self._slot("output", a.aval, j)
            self._out_slot[j] = s
            self.copy_into(Access(s, a.aval, 0, contiguous(a.aval.shape)), a if isinstance(a, Literal)
                           else self.access[a])
        self.output_plan: list[int] = []
        for j, a in enumerate(self.graph.outvars):
            if isinstance(a, Var) and a in self._out_index:
                self.output_plan.append(self._out_slot[self._out_index[a]])
            else:
                self.output_plan.append(self._out_slot[j])

    # --- donation ------------------------------------------------------------------------

    def _plan_donation(self) -> None:
        """``self.donation``: output slot -> the position of the donated input whose device
        buffer it is written into (same dtype and byte size). Safe when every read of the input
        comes before the output's first write: the input's last tick is before the output's
        first, or both fall on the output's first writer and that is one elementwise kernel
        whose work-item ``gid`` loads only element ``gid`` of the input, before it stores
        element ``gid`` of the output. An input the graph also returns (itself or a view of it)
        is never donated."""
        self.donation: dict[int, int] = {}
        returned = {a for a in self.graph.outvars if isinstance(a, Var)}
        inputs = [k for k, sl in enumerate(self.slots) if sl.kind == "input" and self.donated[sl.index]
                  and not _views_of(self.graph.eqns, self.graph.invars[sl.index]) & returned]
        outputs = [k for k, sl in enumerate(self.slots) if sl.kind == "output"]
        taken: set[int] = set()
        for k in inputs:
            inp = self.slots[k]

            def preference(s: int, inp: Slot = inp) -> tuple[bool, bool, int]:
                out = self.slots[s]
                return out.index != inp.index, out.aval.shape != inp.aval.shape, s

            for s in sorted(outputs, key=preference):
                out = self.slots[s]
                if s in taken or out.aval.dtype != inp.aval.dtype or out.aval.nbytes != inp.aval.nbytes:
                    continue
                if out.aval.nbytes == 0 or inp.last > out.first:
                    continue
                if inp.last == out.first and not self._own_element(k, s):
                    continue
                self.donation[s] = inp.index
                taken.add(s)
                break

    def _own_element(self, k: int, s: int) -> bool:
        """Whether the first top-level step that uses slot ``s`` is kernels where each one that
        writes ``s`` loads slot ``k`` only at the elements it stores, after loading them
        (``KernelSpec.own_loads`` / ``own_stores``: one elementwise kernel, or a product's
        kernels with an epilogue), and none reads ``k`` after the first of them has run."""
        first = next((st for st in self.steps if s in _slots_used(st)), None)
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

    def _takeover(self, args: Sequence[Any]) -> dict[int, OpenCLArray]:
        """The donated device arrays whose buffers this call's outputs take over: none whose
        buffer is also passed as another argument."""
        ptrs = [y.buffer.int_ptr for y in args if isinstance(y, OpenCLArray) and y.buffer is not None]
        taken: dict[int, OpenCLArray] = {}
        for s, i in self.donation.items():
            x = args[i]
            if isinstance(x, OpenCLArray) and x.buffer is not None and ptrs.count(x.buffer.int_ptr) == 1:
                taken[s] = x
        return taken

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

    # --- building: kernel instances per carry binding --------------------------------------

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
        self.window_slots = [k for k, s in enumerate(self.slots) if s.kind == "window"]
        specs = list(_specs(self.steps))
        used = {dtypes.canonical(dt) for spec in specs for _, dt in spec.slots}
        self.source = preamble(used) + "\n" + "\n".join(spec.source for spec in specs)
        t0 = time.perf_counter()
        options = ["-w"] + (["-cl-fp32-correctly-rounded-divide-sqrt"] if self.info.correctly_rounded_sqrt else [])
        self.program = None
        if specs:
            key = (id(dev.context), self.source, tuple(options))
            self.program = _PROGRAMS.pop(key, None)
            if self.program is None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    self.program = cl.Program(dev.context, self.source).build(options=options)
                ENGINE_STATS["kernels_built"] += len(specs)
            else:
                ENGINE_STATS["programs_reused"] += 1
            _PROGRAMS[key] = self.program
            while len(_PROGRAMS) > PROGRAM_CACHE_SIZE:
                _PROGRAMS.pop(next(iter(_PROGRAMS)))
        self.build_seconds = time.perf_counter() - t0
        ENGINE_STATS["build_seconds"] += self.build_seconds
        self._call_args: list[tuple[Any, list[Any], tuple[tuple[int, int], ...], bool]] = []
        self._instances: list[tuple] = []
        self.ops = self._ops(self.steps, {})
        self._windowed = [(op[2], op[3]) for op in self._instances if op[3]]
        self._warm()

    def _ops(self, steps: list[Step], remap: dict[int, int]) -> list[tuple]:
        """Executable ops for ``steps`` with carry slots bound through ``remap`` (a loop body
        is instantiated twice: even iterations read carries A and write B, odd ones the
        reverse, so no carry is ever copied)."""
        ops: list[tuple] = []
        for st in steps:
            if st.kind == "kernels":
                for spec in st.specs:
                    op = self._instance(spec, remap)
                    if op is not None:
                        ops.append(op if spec.unless_same is None else ("unless_same", *spec.unless_same, op))
            elif st.kind == "host":
                ins = [a if isinstance(a, Literal) else replace(a, slot=remap.get(a.slot, a.slot))
                       for a in st.host_inputs]
                ops.append(("host", st.eqns[0], ins, [remap.get(s, s) for s in st.host_outputs]))
            elif st.kind == "cond":
                idx = None if st.index is None else _scalar_ref(st.index, remap)
                ops.append(("cond", idx, [self._ops(b, remap) for b in st.blocks]))
            elif st.kind == "while" and st.speculative:
                odd = _swapped(remap, st.swap)
                masked, _, tail = st.blocks
                ops.append(("batched_while", _scalar_ref(st.index, remap),
                            (self._ops(masked, remap), self._ops(masked, odd)), self._ops(tail, remap)))
            elif st.kind == "while":
                odd = _swapped(remap, st.swap)
                cond, body, tail = st.blocks
                ops.append(("while", _scalar_ref(st.index, remap), (self._ops(cond, remap), self._ops(cond, odd)),
                            (self._ops(body, remap), self._ops(body, odd)), self._ops(tail, remap)))
            else:
                odd = _swapped(remap, st.swap)
                wins = tuple((w.slot, remap.get(w.parent, w.parent), w.base, w.stride) for w in st.windows)
                ops.append(("scan", st.length, st.reverse, wins,
                            (self._ops(st.blocks[0], remap), self._ops(st.blocks[0], odd))))
        return ops

    def _instance(self, spec: KernelSpec, remap: dict[int, int]) -> tuple | None:
        """One kernel object for ``spec`` and its argument list (a buffer and an element
        offset per slot): arena and constant slots bound now, call slots on each call,
        window slots on each launch. Arguments go through ``set_args`` with declared scalar
        types, which costs ~1 us a kernel where ``set_arg`` of an ``int64`` costs ~15 us."""
        launches = tuple(lc for lc in spec.launches if all(d > 0 for d in lc[0]))
        if not launches:
            return None
        kernel = self.dev.cl.Kernel(self.program, spec.name)
        kernel.set_scalar_arg_dtypes([None, np.int64] * len(spec.slots))
        argv: list[Any] = [None, 0] * len(spec.slots)
        per_call, per_iteration = [], []
        for a, (s, _) in enumerate(spec.slots):
            s = remap.get(s, s)
            kind = self.slots[s].kind
            if kind in ("input", "output"):
                per_call.append((2 * a, s))
            elif kind == "window":
                per_iteration.append((2 * a, s))
            else:
                argv[2 * a], argv[2 * a + 1] = self.buf[s], self.off[s]
        if per_call:
            self._call_args.append((kernel, argv, tuple(per_call), bool(per_iteration)))
        elif not per_iteration:
            kernel.set_args(*argv)
        op = ("kernel", kernel, argv, tuple(per_iteration), launches)
        self._instances.append(op)
        return op

    def _warm(self) -> None:
        """Launch every kernel instance once (inputs: staging buffers, outputs: one dummy
        buffer, windows at iteration 0) so PoCL compiles its work-group functions now rather
        than on the first call."""
        nbytes = max([self.slots[s].aval.nbytes for s in self.output_slots], default=1)
        dummy = self.dev.alloc(nbytes)
        for s in self.input_slots:
            self.buf[s] = self.staging[self.slots[s].index]
            self.off[s] = 0
        for s in self.output_slots:
            self.buf[s] = dummy
            self.off[s] = 0
        for s in self.window_slots:
            parent = self.slots[s].parent
            self.buf[s] = self.buf[parent]
            self.off[s] = self.off[parent]
        self._bind_call_args()
        t0 = time.perf_counter()
        for op in self._instances:
            self._launch(op)
        self.dev.queue.finish()
        self.warm_seconds = time.perf_counter() - t0
        self._release()

    def _bind_call_args(self) -> None:
        buf, off = self.buf, self.off
        for kernel, argv, per_call, windowed in self._call_args:
            for a, s in per_call:
                argv[a], argv[a + 1] = buf[s], off[s]
            if not windowed:
                kernel.set_args(*argv)

    def _launch(self, op: tuple) -> None:
        _, kernel, argv, per_iteration, launches = op
        if per_iteration:
            buf, off = self.buf, self.off
            for a, s in per_iteration:
                argv[a], argv[a + 1] = buf[s], off[s]
            kernel.set_args(*argv)
        q = self.dev.queue
        enqueue = self.dev.cl.enqueue_nd_range_kernel
        for gsize, lsize, goff in launches:
            enqueue(q, kernel, gsize, lsize, global_work_offset=goff)

    # --- running -----------------------------------------------------------------------------

    def run(self, args: Sequence[Any], into: Sequence[Any] | None = None) -> list[OpenCLArray]:
        """Outputs go to pooled buffers, into the arrays ``into``, or (donation) into the
        buffers of donated device arrays, which are then deleted. Calls from several threads
        take turns (see the class docstring)."""
        with taking_turns(self, _REENTERED):
            return self._call(args, into)

    def _call(self, args: Sequence[Any], into: Sequence[Any] | None) -> list[OpenCLArray]:
        dev = self.dev
        for s in self.input_slots:
            i = self.slots[s].index
            x = args[i]
            if isinstance(x, OpenCLArray):
                self.buf[s] = x.live_buffer()
                self.off[s] = x.offset
            else:
                host = np.asarray(x)
                if host.dtype != self.slots[s].aval.dtype:
                    host = host.astype(self.slots[s].aval.dtype)
                self.buf[s] = upload(dev, host, self.staging[i])
                self.off[s] = 0
        taken = self._takeover(args) if self.donation and into is None else {}
        pooled = dict.fromkeys(self.output_slots, into is None)
        for s in self.output_slots:
            j = self.slots[s].index
            if into is not None:
                self.buf[s] = into[j].buffer
                self.off[s] = into[j].offset
            elif s in taken:
                self.buf[s], self.off[s], pooled[s] = taken[s].donate()
            else:
                self.buf[s] = dev.take(self.slots[s].aval.nbytes)
                self.off[s] = 0
        if into is None:
            ENGINE_STATS["output_allocations"] += len(self.output_slots) - len(taken)
            ENGINE_STATS["donated_outputs"] += len(taken)
        self._bind_call_args()
        self._exec(self.ops)
        dev.queue.flush()
        arrays = {s: OpenCLArray(self.buf[s], self.slots[s].aval, self.off[s], pooled[s]) for s in self.output_slots}
        outs = [arrays[s] for s in self.output_plan]
        self._release()
        return list(into) if into is not None else outs

    def _release(self) -> None:
        """Drop this executable's references to the call's buffers (the kernels keep theirs)."""
        for s in self.input_slots + self.output_slots + self.window_slots:
            self.buf[s] = None
        for _, argv, per_call, _ in self._call_args:
            for a, _ in per_call:
                argv[a] = None
        for argv, per_iteration in self._windowed:
            for a, _ in per_iteration:
                argv[a] = None

    def _exec(self, ops: list[tuple]) -> None:
        for op in ops:
            tag = op[0]
            if tag == "kernel":
                self._launch(op)
            elif tag == "host":
                self._run_host(op)
            elif tag == "unless_same":
                _, dst, src, kernel_op = op
                if self.buf[dst] is not self.buf[src] or self.off[dst] != self.off[src]:
                    self._launch(kernel_op)
                else:
                    ENGINE_STATS["copies_skipped"] += 1
            elif tag == "cond":
                _, idx, branches = op
                k = 0 if idx is None else int(np.clip(self._scalar(idx), 0, len(branches) - 1))
                self._exec(branches[k])
            elif tag == "while":
                self._run_while(op)
            elif tag == "batched_while":
                self._run_batched_while(op)
            else:
                self._run_scan(op)

    def _run_while(self, op: tuple) -> None:
        """Only the predicate is read back, once per evaluation; even iterations read carries
        A and write B, odd ones the reverse; an odd trip count ends with one copy B -> A."""
        _, pred, conds, bodies, tail = op
        k = 0
        while True:
            self._exec(conds[k & 1])
            if not self._scalar(pred):
                break
            self._exec(bodies[k & 1])
            k += 1
        if k & 1:
            self._exec(tail)
        ENGINE_STATS["loop_iterations"] += k

    def _run_batched_while(self, op: tuple) -> None:
        """Masked iterations (the identity once the predicate is false) enqueued 1, 2, 4, ...
        at a time (at most ``SPECULATE_MAX``) per predicate readback; batches stop growing
        when an iteration takes longer than ``SPECULATE_BUDGET_S``, so a heavy body wastes
        little work. The carry ends in A after an even number of iterations, else B."""
        _, pred, steps, tail = op
        k = 0
        batch = 1
        while True:
            t0 = time.perf_counter()
            for _ in range(batch):
                self._exec(steps[k & 1])
                k += 1
            if not self._scalar(pred):
                break
            fast = (time.perf_counter() - t0) / batch < control.SPECULATE_BUDGET_S
            batch = min(2 * batch, control.SPECULATE_MAX) if fast else 1
        if k & 1:
            self._exec(tail)
        ENGINE_STATS["loop_iterations"] += k

    def _run_scan(self, op: tuple) -> None:
        """A static trip count: nothing is read back; windows move over ``xs`` and ``ys``."""
        _, length, reverse, windows, bodies = op
        buf, off = self.buf, self.off
        for k in range(length):
            i = length - 1 - k if reverse else k
            for w, parent, base, stride in windows:
                buf[w] = buf[parent]
                off[w] = off[parent] + base + i * stride
            self._exec(bodies[k & 1])
        ENGINE_STATS["loop_iterations"] += length

    def _scalar(self, ref: tuple[int, int, np.dtype]) -> Any:
        s, offset, dtype = ref
        return read_scalar(self.dev, self.buf[s], dtype, self.off[s] + offset)

    def _run_host(self, op: tuple) -> None:
        """Copy the inputs to the host, run the primitive's numpy impl, copy the results back."""
        _, e, host_inputs, host_outputs = op
        ins = []
        for a, v in zip(host_inputs, e.inputs):
            if isinstance(a, Literal):
                ins.append(a.array)
            else:
                x = download(self.dev, self.buf[a.slot], a.aval, self.off[a.slot] + a.offset, a.strides)
                ins.append(x.reshape(v.aval.shape))
        res = e.primitive.impl(*ins, **e.params.kwargs())
        outs = res if e.primitive.multiple_results else [res]
        for s, r in zip(host_outputs, outs):
            slot = self.slots[s]
            arr = np.asarray(r, dtype=slot.aval.dtype).reshape(slot.aval.shape)
            upload(self.dev, arr, self.buf[s], self.off[s] * slot.aval.dtype.itemsize)
        TRANSFER_STATS["host_round_trips"] += 1

    # --- inspection -----------------------------------------------------------------------------

    @property
    def kernel_count(self) -> int:
        return sum(1 for _ in _specs(self.steps))

    @property
    def host_steps(self) -> int:
        return sum(1 for st in _walk(self.steps) if st.kind == "host")

    def describe(self) -> str:
        """Each kernel, host round-trip and control-flow step with the equations it covers,
        in launch order (loop bodies and branches indented), then the fused regions with their
        cost-model figures; values are named as the graph's own listing names them."""
        from fungraph.ir_text import _format_eqn, _Namer

        namer = _Namer()
        for v in self.graph.invars + self.graph.constvars:
            namer(v)
        for e in self.graph.eqns:
            for o in e.outputs:
                namer(o)
        lines = [f"OpenCL executable on {self.info.name!r}: {self.kernel_count} kernels, {self.host_steps} host "
                 f"round-trips, {len(self.fusion.aliases)} free views; arena {self.arena_bytes} B "
                 f"(jit plan {self.plan.arena_bytes} B); build {self.build_seconds * 1e3:.0f} ms, "
                 f"warm-up {self.warm_seconds * 1e3:.0f} ms"]

        def eqn_text(e: Eqn) -> str:
            if e.primitive.name in control.LOWERINGS:
                outs = " ".join(f"{namer(o)}:{o.aval}" for o in e.outputs)
                ins = " ".join(str(a) if isinstance(a, Literal) else namer(a) for a in e.inputs)
                return f"{outs} = {e.primitive.name} {ins}"
            return _format_eqn(e, namer, 0, False).strip()

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
        lines.extend(self.fusion.describe(self.graph, namer))
        return "\n".join(lines)


def _walk(steps: list[Step]) -> Any:
    for st in steps:
        yield st
        for block in st.blocks:
            yield from _walk(block)


def _specs(steps: list[Step]) -> Any:
    for st in _walk(steps):
        if st.kind == "kernels":
            yield from st.specs


#: Whether products on a CPU compute the elementwise region that consumes them
#: (:func:`~fungraph.backends.opencl.epilogue.find_epilogues`).
DOT_EPILOGUES = True
#: Whether reductions compute the elementwise region that consumes their result
#: (:func:`~fungraph.backends.opencl.epilogue.find_reduce_epilogues`).
REDUCE_EPILOGUES = True


#: Shortest contraction for which :func:`_swap_operands` computes a product transposed.
SWAP_MIN_K = 64


def _swap_operands(lhs: Access, rhs: Access, dims: tuple, sizes: tuple[int, int, int]) -> bool:
    """Whether to compute ``out.T = rhs.T @ lhs.T``: when both operands are contiguous along
    ``k`` (``g @ w.T``) either must be packed transposed, and packing the one with fewer rows
    (``g``) while the other's rows are read in place moves less memory. The transposed
    ``out`` is stored element by element, which costs more than the packing saves when ``k``
    is short (``k = 10``: 0.28 ms for a 256 x 1024 ``out``)."""
    lf, lc, rf, rc = dims
    m, k, n = sizes
    strides_ok = merged_stride(lhs, lc) == 1 and merged_stride(rhs, rc) == 1 \
        and merged_stride(rhs, rf) not in (None, 1) and merged_stride(lhs, lf) not in (None, 1)
    return strides_ok and k >= SWAP_MIN_K and DOT_COLS <= m < n and n >= PACK_MIN_ROWS


def _transposed_out(out: Access, nb: int, nf: int, nr: int) -> Access:
    """``out`` (batch, lhs-free, rhs-free axes) seen with its free axis groups swapped."""
    order = tuple(range(nb)) + tuple(range(nb + nf, nb + nf + nr)) + tuple(range(nb, nb + nf))
    shape = tuple(out.shape[d] for d in order)
    return Access(out.slot, ShapedArray(shape, out.aval.dtype), out.offset, tuple(out.strides[d] for d in order))


def updated_in_place_chains(graph: Graph, fusion: FusionPlan) -> dict[Var, Var]:
    """``x -> y`` for each ``y = dynamic_update_slice(x, ...)`` whose operand ``x`` the graph
    computes and nothing reads after the update (:func:`control.read_before`), followed to
    the last update of a chain: such values share one slot, so each update writes only its
    window, and when the last is an output the first producer writes the output's buffer."""
    produced = {o for e in graph.eqns for o in e.outputs}
    nxt = {e.inputs[0]: e.outputs[0] for k, e in enumerate(graph.eqns)
           if e.primitive.name == "dynamic_update_slice" and isinstance(e.inputs[0], Var)
           and e.inputs[0] in produced and control.read_before(graph, e.inputs[0], k, fusion)}
    chains: dict[Var, Var] = {}
    for x in nxt:
        last = nxt[x]
        while last in nxt:
            last = nxt[last]
        chains[x] = chains[nxt[x]] = last
    return chains


def donation_order(graph: Graph, donated: Sequence[bool]) -> Graph:
    """``graph`` with each equation that could write into a donated input's buffer (it reads
    the input and computes a graph output of the same dtype and byte size) moved to just after
    the input's last reader (views of it included), when nothing in between uses its result.
    An SGD update ``w - lr * g`` scheduled before the backward pass's last read of ``w`` would
    otherwise need a fresh buffer. This only orders; ``_plan_donation`` decides what is safe."""
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
        seen = _views_of(eqns, x)
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


def _reads_donated_later(g: Graph, i: int, region: Region, donated: set[Var]) -> bool:
    """Whether ``region`` reads a donated input (or a view of it) that an equation after
    product ``i`` and outside the region also reads. Computed as the product's epilogue, the
    region would write its outputs before that read, and an SGD update ``w - lr * g``, which
    :func:`donation_order` placed after the last read of ``w``, would need a fresh buffer."""
    read = {a for m in region.members for a in g.eqns[m].inputs if isinstance(a, Var) and a in donated}
    return bool(read) and any(isinstance(a, Var) and a in read for k in range(i + 1, len(g.eqns))
                              if k not in region.members for a in g.eqns[k].inputs)


def _views_of(eqns: Sequence[Eqn], x: Var) -> set[Var]:
    """``x`` and every value that is a view of it (reshape, transpose, slice, ...)."""
    seen = {x}
    for e in eqns:
        if e.primitive.name in VIEW_OPS and e.inputs and isinstance(e.inputs[0], Var) and e.inputs[0] in seen:
            seen.update(e.outputs)
    return seen


def _slots_used(st: Step) -> set[int]:
    """Every slot ``st`` (or a step nested in it) reads or writes."""
    used: set[int] = set()
    for x in _walk([st]):
        for spec in x.specs:
            used.update(k for k, _ in spec.slots)
        used.update(a.slot for a in x.host_inputs if isinstance(a, Access))
        used.update(x.host_outputs)
        if x.index is not None:
            used.add(x.index.slot)
        used.update(k for w in x.windows for k in (w.slot, w.parent))
    return used


def _scalar_ref(a: Access, remap: dict[int, int]) -> tuple[int, int, np.dtype]:
    return remap.get(a.slot, a.slot), a.offset, a.aval.dtype


def _swapped(remap: dict[int, int], swap: dict[int, int]) -> dict[int, int]:
    """The binding of an odd iteration: this loop's carries swapped, then the enclosing binding."""
    out = dict(remap)
    for a, b in swap.items():
        out[a] = remap.get(b, b)
    return out


def _ranges(*sizes: int) -> list[tuple[int, ...]]:
    out, start = [], 0
    for n in sizes:
        out.append(tuple(range(start, start + n)))
        start += n
    return out


def _aligned(n: int) -> int:
    return max(ALIGNMENT, -(-n // ALIGNMENT) * ALIGNMENT)
