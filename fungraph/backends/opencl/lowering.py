"""Lowering a planned graph to the device program's slots and steps.

Fused regions are the graph's ``fusion`` equations (the compiler's ``regions.fuse_regions``
under :data:`~fungraph.backends.opencl.fusion.OPENCL_FUSION`), each lowered to one kernel, or
computed by the product or reduction it consumes (``epilogue``); every value that must be stored gets a *slot*
(an input, a constant, an arena range, a fresh output, kernel scratch, or a *window*: a
per-iteration slice of another slot); each region or primitive becomes kernels
(:mod:`~fungraph.backends.opencl.kernels`), ``cond``/``while``/``scan`` sub-graphs are lowered
into the same program (``control.py``), and the rest runs on the host. A clock tick per step
records each slot's lifetime for the arena planner (:mod:`~fungraph.backends.opencl.planning`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from fungraph.backends import backend_factory
from fungraph.backends.opencl import control
from fungraph.backends.opencl.codegen import Access, contiguous, merged_stride, view_access
from fungraph.backends.opencl.device import DeviceInfo
from fungraph.backends.opencl.epilogue import (
    Epilogue,
    broadcast_access,
    find_epilogues,
    find_reduce_epilogues,
    kernel_strides,
    lane_epilogue,
    region_inputs,
)
from fungraph.backends.opencl.fusion import OPENCL_FUSION
from fungraph.backends.opencl.kernels import matmul
from fungraph.backends.opencl.kernels.conv import conv_kernel
from fungraph.backends.opencl.kernels.copies import canonical_copy_access, merge_copies, pack_kernel, pack_tail_kernel
from fungraph.backends.opencl.kernels.elementwise import elementwise_kernel, elementwise_kernels
from fungraph.backends.opencl.kernels.indexing import (
    scatter_kernel,
    scatter_order,
    scatter_sort_kernels,
    scatter_sorts,
    window_update_kernel,
)
from fungraph.backends.opencl.kernels.matmul import (
    DOT_COLS,
    NARROW_MIN_ROWS,
    PACK_MIN_ROWS,
    PACK_ROWS,
    dot_kernels,
    dot_panels,
    dot_row_panels,
    fused_panels,
    overlap_row_panel,
)
from fungraph.backends.opencl.kernels.reductions import column_sum_operand, reduce_kernels
from fungraph.backends.opencl.kernels.spec import KernelSpec
from fungraph.backends.opencl.planning import views_of
from fungraph.backends.opencl.program import Slot, Step, StepLowering, Window, graph_avals, step_lowering
from fungraph.core import register_lowering
from fungraph.interpreters.fusion_model import FusionPlan, Region
from fungraph.interpreters.optimize import backend_passes, optimize
from fungraph.interpreters.regions import fuse_regions, regions_of
from fungraph.ir import Eqn, Graph, Literal, ShapedArray, Var
from fungraph.primitives.conv import conv_p
from fungraph.primitives.indexing import dynamic_update_slice_p, scatter_add_p
from fungraph.primitives.linalg import dot_general_p


class Lowering:
    """The slots and steps of ``graph`` (its donated inputs marked by ``donated``; its regions
    its ``fusion`` equations) for the device ``info``; ``self.graph`` is ``graph`` with the
    regions' bodies in place and ``self.fusion`` says where they lie. :meth:`lower` fills
    ``slots``, ``steps``, ``const_host`` (constant slot -> host value) and ``output_plan``
    (output position -> slot). ``control.py`` lowers control flow through the same methods
    (``store``, ``lower_subgraph``, ``tick``, ...)."""

    def __init__(self, graph: Graph, donated: Sequence[bool], info: DeviceInfo, fuse: bool = True) -> None:
        self.graph, self.fusion = regions_of(graph, OPENCL_FUSION)
        self.donated = tuple(donated)
        self.info = info
        self.idx_type = "long" if max((a.size for a in graph_avals(self.graph)), default=0) >= 2**31 - 1 else "int"
        self._fuse = fuse
        self.slots: list[Slot] = []
        self.access: dict[Var, Access] = {}
        self.steps: list[Step] = []
        self._block = self.steps
        self._dest: dict[Var, Access] = {}
        self._depth = 0
        self._clock = 0
        self.const_host: dict[int, np.ndarray] = {}
        self._n_kernels = 0

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

    def constant(self, value: np.ndarray) -> Access:
        """A constant slot holding ``value`` (a sub-graph's ``consts``), uploaded once."""
        return self._const(value)

    def kernel_name(self, what: str) -> str:
        """A name for a new kernel of the program, unique within it."""
        return self._name(what)

    def atom_access(self, a: Var | Literal) -> Access:
        return self._const(a.array) if isinstance(a, Literal) else self.access[a]

    def _name(self, what: str) -> str:
        self._n_kernels += 1
        return f"k{self._n_kernels}_{what}"

    # --- lowering the graph to steps ---------------------------------------------------

    def lower(self) -> None:
        """Lower the whole graph: inputs, constants, equations, then the outputs no step writes."""
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
        donated = {v for x, d in zip(g.invars, self.donated) if d for v in views_of(g.eqns, x)} \
            if g is self.graph else set()
        absorbed: set[int] = set()
        for i, e in enumerate(g.eqns):
            region = fusion.region_of.get(i)
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
            elif i in epilogues and not _reads_donated_later(g, i, epilogues[i][0], donated):
                site = epilogues[i]
                if self._lower_dot(e, (g, *site)):
                    absorbed |= site[0].members
            else:
                self._lower_own(e)

    def _lower_own(self, e: Eqn) -> None:
        """An equation outside the fused regions: its primitive's own steps (the ``"opencl"``
        :class:`StepLowering`), or a host round-trip when it has none."""
        rule = step_lowering(e)
        if rule is None:
            self._lower_host(e)
        else:
            rule.lower(self, e)

    def _lower_conv(self, e: Eqn) -> None:
        self.add_kernels([e], [conv_kernel(self._name("conv"), self.atom_access(e.inputs[0]),
                                           self.atom_access(e.inputs[1]), self.store(e.outputs[0]),
                                           e.params, self.info, self.idx_type)])

    def _lower_scatter_add(self, e: Eqn) -> None:
        """Sorted by index first (on the device, or at compile time for constant indices)
        when that pays, then one kernel adding each update into its row."""
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
                       planned: tuple[Graph, FusionPlan] | None = None) -> list[Step]:
        """Lower a closed sub-graph (a branch, a loop body or condition) with its inputs read
        from ``ins`` and its outputs written into ``dests`` (``planned``: the sub-graph with its
        regions from :meth:`plan_fusion`, when the caller has planned them already); returns
        its steps."""
        g, fusion = planned if planned is not None else self.plan_fusion(g)
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
        self._lower_eqns(g, fusion)
        for v, d in zip(g.outvars, dests):
            src = v if isinstance(v, Literal) else self.access[v]
            if src != d:
                self.copy_into(d, src)
        self._depth -= 1
        block = self._block
        self.access, self._block, self._dest = saved
        return block

    def plan_fusion(self, g: Graph) -> tuple[Graph, FusionPlan]:
        """A sub-graph's regions (the compiler's pass, as for the whole graph), expanded in
        place: the graph to lower and where its regions lie."""
        return regions_of(fuse_regions(g, OPENCL_FUSION) if self._fuse else g, OPENCL_FUSION)

    def optimized(self, g: Graph) -> Graph:
        """A sub-graph (branch, loop condition or body) after the optimiser passes ``jit`` runs
        on this backend's graphs (CSE, folding, ``fma``, ...), which do not enter sub-graphs."""
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
            aliasing = matmul.DOT_PACK_LHS and not fused and row_bytes % matmul.ALIAS_BYTES == 0
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


def _reads_donated_later(g: Graph, i: int, region: Region, donated: set[Var]) -> bool:
    """Whether ``region`` reads a donated input (or a view of it) that an equation after
    product ``i`` and outside the region also reads. Computed as the product's epilogue, the
    region would write its outputs before that read, and an SGD update ``w - lr * g``, which
    :func:`~fungraph.backends.opencl.planning.donation_order` placed after the last read of
    ``w``, would need a fresh buffer."""
    read = {a for m in region.members for a in g.eqns[m].inputs if isinstance(a, Var) and a in donated}
    return bool(read) and any(isinstance(a, Var) and a in read for k in range(i + 1, len(g.eqns))
                              if k not in region.members for a in g.eqns[k].inputs)


def _ranges(*sizes: int) -> list[tuple[int, ...]]:
    out, start = [], 0
    for n in sizes:
        out.append(tuple(range(start, start + n)))
        start += n
    return out


register_lowering(dot_general_p, "opencl", StepLowering(Lowering._lower_dot))
register_lowering(conv_p, "opencl", StepLowering(Lowering._lower_conv))
register_lowering(scatter_add_p, "opencl", StepLowering(Lowering._lower_scatter_add))
register_lowering(dynamic_update_slice_p, "opencl", StepLowering(Lowering._lower_update_window))
