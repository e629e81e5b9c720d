"""Reductions (sums, products, min/max, argmin/argmax) as one or two passes, with a fused
elementwise prologue that computes the operand and an epilogue that consumes the result; a
CPU float sum over leading axes sums 16 columns per work-item (:func:`column_sum_operand`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from fungraph import dtypes
from fungraph.backends.opencl.codegen import Access, Emitter, c_literal, ctype
from fungraph.backends.opencl.device import DeviceInfo
from fungraph.backends.opencl.epilogue import BlockStore, Epilogue, broadcast_access, lane_epilogue
from fungraph.backends.opencl.expressions import wrapping
from fungraph.backends.opencl.kernels.elementwise import RegionEmitter, region_emitter
from fungraph.backends.opencl.kernels.spec import KernelSpec, Params, divisor, exact_launches, kernel_source, prod
from fungraph.ir import Eqn, ShapedArray, Var

_IDENTITY = {"reduce_sum": 0, "reduce_prod": 1}

class _PinnedEmitter(RegionEmitter):
    """A region emitter with values that are the same expression at every index it reads
    them (a reduction's result, which an epilogue reads only at the element it stores)."""

    pinned: dict[Var, str]

    def value(self, atom, idx):  # noqa: ANN001, ANN201
        if isinstance(atom, Var) and atom in self.pinned:
            return self.pinned[atom]
        return super().value(atom, idx)


def _init(op: str, dt: np.dtype) -> str:
    if op in _IDENTITY:
        return c_literal(_IDENTITY[op], dt)
    big = op in ("reduce_min", "argmin")
    if dtypes.is_float(dt):
        return c_literal(math.inf if big else -math.inf, dt)
    if dt == dtypes.bool_:
        return c_literal(big, dt)
    info = np.iinfo(dt)
    return c_literal(info.max if big else info.min, dt)


def _combine(op: str, dt: np.dtype, acc: str, v: str) -> str:
    """One step of reduction ``op``; integer sums and products wrap (:func:`expressions.wrapping`)."""
    if op == "reduce_sum":
        return f"{acc} | {v}" if dt == dtypes.bool_ else wrapping(dt, acc, "+", v)
    if op == "reduce_prod":
        return f"{acc} & {v}" if dt == dtypes.bool_ else wrapping(dt, acc, "*", v)
    cmp = ">" if op == "reduce_max" else "<"
    nan = f" || isnan({v})" if dtypes.is_float(dt) else ""
    return f"(({v} {cmp} {acc}){nan}) ? {v} : {acc}"


def _better(op: str, dt: np.dtype, v: str, best: str) -> str:
    """``v`` replaces ``best`` in argmax/argmin (first NaN wins, as numpy)."""
    cmp = ">" if op == "argmax" else "<"
    if dtypes.is_float(dt):
        return f"(({v} {cmp} {best}) || (isnan({v}) && !isnan({best})))"
    return f"({v} {cmp} {best})"


def _reduce_store(res: str, out: Access | None, epilogue: Epilogue | None, params: Params, it: str,
                  before: Emitter | None) -> tuple[list[str], dict[str, frozenset[int]]]:
    """The lines storing a reduction's result ``res`` for output element ``gid``: into ``out``,
    or, with an ``epilogue`` (whose inputs are the engine's accesses), the epilogue's outputs
    computed from it; and, for donation, the kernel's ``own_loads``/``own_stores`` (the slots
    it reads and writes only at element ``gid``, counting the loads of ``before``, the
    emitter of the kernel's other lines)."""
    if epilogue is None:
        assert out is not None
        po, oo = params(out.slot, out.aval.dtype)
        return [f"  {po}[{oo} + {out.offset} + gid] = {res};"], {}
    y = epilogue.product
    shape = epilogue.outputs[0][0].aval.shape
    em = _PinnedEmitter(it, {o: q for q in epilogue.eqns for o in q.outputs}, dict(epilogue.inputs).get, params)
    em.pinned = {y: res}
    em.counter = before.counter if before is not None else 0
    base = em.set_base("gid", shape)
    stores = []
    for v, a in epilogue.outputs:
        val = em.value(v, base)
        p, o = params(a.slot, a.aval.dtype)
        stores.append(f"  {p}[{o} + {a.offset} + gid] = {val};")
    loads = dict(em.own_loads)
    for slot, own in (before.own_loads if before is not None else {}).items():
        loads[slot] = loads.get(slot, True) and own
    strided = {a.slot for _, a in epilogue.outputs if a.offset or not a.is_contiguous() or a.shape != shape}
    own = {"own_loads": frozenset(slot for slot, ok in loads.items() if ok),
           "own_stores": frozenset(a.slot for _, a in epilogue.outputs) - set(loads) - strided}
    return em.lines + stores, own


def column_sum_operand(e: Eqn, members: dict[Var, Eqn], access_of: Callable[[Var], Access | None],
                       info: DeviceInfo) -> Access | None:
    """The stored operand of a float sum over the leading axes of a contiguous value with a
    multiple of 16 columns on a CPU (a bias gradient), which :func:`_column_sum_kernel` sums
    16 columns per work-item; else None."""
    x = e.inputs[0]
    if not info.is_cpu or e.primitive.name != "reduce_sum" or not dtypes.is_float(x.aval.dtype):
        return None
    stored = access_of(x) if isinstance(x, Var) and x not in members else None
    axes = tuple(e.params["axes"])
    xs = x.aval.shape
    m = prod([xs[d] for d in range(len(xs)) if d not in axes])
    k = prod([xs[d] for d in axes])
    if stored is None or not stored.is_contiguous() or axes != tuple(range(len(axes))) or m % 16 or k < 2:
        return None
    return stored


def reduce_kernels(name: str, e: Eqn, members: dict[Var, Eqn], access_of: Callable[[Var], Access | None],
                   out: Access | None, scratch: Callable[[ShapedArray], Access], idx_type: str,
                   info: DeviceInfo, epilogue: Epilogue | None = None) -> list[KernelSpec]:
    """``out = op(x, axes)`` as one or two passes: pass 1 gives each of ``chunks`` work-items
    per output row a contiguous chunk (CPU) or an interleaved share (GPU) of the row; pass 2
    combines the chunk results per row. ``x`` may be computed in-kernel by ``members``. With
    an ``epilogue`` (from :func:`~fungraph.backends.opencl.epilogue.find_reduce_epilogues`;
    ``out`` is then None) the last pass stores the epilogue's outputs instead of the result."""
    op = e.primitive.name
    x = e.inputs[0]
    xs = x.aval.shape
    dt = x.aval.dtype
    axes = tuple(e.params["axes"]) if "axes" in e.params else (e.params["axis"],)
    kept = tuple(d for d in range(len(xs)) if d not in axes)
    m = prod([xs[d] for d in kept])
    k = prod([xs[d] for d in axes])
    is_arg = op in ("argmax", "argmin")
    note = "" if epilogue is None else f"; {epilogue.note}"
    stored = column_sum_operand(e, members, access_of, info)
    if stored is not None:
        if epilogue is not None and not lane_epilogue(epilogue.eqns, dt):
            raise ValueError("reduce_kernels: the 16-column sum takes only a lane epilogue (lane_epilogue)")
        spec = _column_sum_kernel(name, stored, out, m, k, info, idx_type, epilogue)
        spec.note += note
        return [spec]
    target = 256 * info.compute_units if info.is_cpu else 16384
    chunks = 1
    if m < target and k >= 8192:
        chunks = max(1, min(-(-target // m), k // 2048))
    tree = _tree_size(info, dt) if chunks > 1 and not info.is_cpu and not is_arg else 0
    if tree:
        chunks = max(tree, min(-(-TREE_ITEMS_PER_UNIT * info.compute_units // m), k // 16) // tree * tree)
    ch = -(-k // chunks) if chunks else 0
    it = idx_type
    t = ctype(dt)
    params = Params()
    em = region_emitter(it, members, access_of, params)
    partial = scratch(ShapedArray((m * chunks // max(tree, 1),), dt)) if chunks > 1 else None
    pidx = scratch(ShapedArray((m * chunks,), dtypes.int64)) if chunks > 1 and is_arg else None
    lines = [f"  const {it} gid = get_global_id(0);",
             f"  const {it} row = gid / {chunks};" if chunks > 1 else f"  const {it} row = gid;",
             f"  const {it} c = gid % {chunks};" if chunks > 1 else f"  const {it} c = 0;"]
    em.lines = lines
    kept_idx = em.unravel("row", [xs[d] for d in kept], "q")
    lo, hi = f"c * {ch}", f"min(({it})(c * {ch} + {ch}), ({it}){k})"
    leaf = em.composed(x) if isinstance(x, Var) else None
    vector = (info.is_cpu and op == "reduce_sum" and dtypes.is_float(dt) and leaf is not None
              and leaf.is_contiguous() and axes == tuple(range(len(xs) - len(axes), len(xs))) and k >= 64)
    lines.append(f"  {t} acc = {_init(op, dt)};")
    if is_arg:
        lines.append("  long bi = -1;")
    if vector:
        p, o = params(leaf.slot, dt)
        lines += [f"  __global const {t}* base = {p} + {o} + {leaf.offset} + (long)row * {k} + {lo};",
                  f"  const {it} n = {hi} - ({lo});",
                  f"  {t}16 s = ({t}16)(0), s2 = ({t}16)(0);",
                  f"  {it} j = 0;",
                  "  for (; j + 32 <= n; j += 32) { s += vload16(0, base + j); s2 += vload16(0, base + j + 16); }",
                  "  s += s2;",
                  "  for (; j + 16 <= n; j += 16) s += vload16(0, base + j);",
                  "  for (; j < n; ++j) acc += base[j];",
                  f"  {t}8 h = s.lo + s.hi; {t}4 g = h.lo + h.hi; {t}2 f = g.lo + g.hi;",
                  "  acc += f.x + f.y;"]
    else:
        loop = (f"  for ({it} kk = {lo}; kk < {hi}; ++kk) {{" if info.is_cpu or chunks == 1
                else f"  for ({it} kk = c; kk < {k}; kk += {chunks}) {{")
        lines.append(loop)
        outer = em.lines
        em.lines = []
        red_idx = em.unravel("kk", [xs[d] for d in axes], "w")
        full = [""] * len(xs)
        for d, i in zip(kept, kept_idx):
            full[d] = i
        for d, i in zip(axes, red_idx):
            full[d] = i
        v = em.value(x, tuple(full))
        body = em.lines
        em.lines = outer
        lines = outer + ["  " + b for b in body]
        if is_arg:
            lines.append(f"    if (bi < 0 || {_better(op, dt, v, 'acc')}) {{ acc = {v}; bi = kk; }}")
        else:
            lines.append(f"    acc = {_combine(op, dt, 'acc', v)};")
        lines.append("  }")
    specs = []
    res_type = ctype(e.outputs[0].aval.dtype)
    if chunks == 1:
        res = f"(({res_type})bi)" if is_arg else "acc"
        store, own = _reduce_store(res, out, epilogue, params, it, em)
        specs.append(KernelSpec(name, kernel_source(name, params, lines + store), params.slots,
                                exact_launches(m, info, m * k), kind="reduce", note=note[2:], **own))
        return specs
    pp, po_ = params(partial.slot, dt)
    if tree:
        groups = chunks // tree
        lines += [*_tree_lines(op, dt, tree, "acc"),
                  f"  if (lid == 0) {pp}[{po_} + {partial.offset} + gid / {tree}] = red[0];"]
        specs.append(KernelSpec(name, kernel_source(name, params, lines), params.slots,
                                [((m * chunks,), (tree,), None)],
                                kind="reduce", note=f"pass 1: {chunks} interleaved shares per row, "
                                                    f"{groups} work-group sums"))
        p2 = Params()
        pp, po_ = p2(partial.slot, dt)
        lines2 = [f"  const {it} gid = get_group_id(0);", f"  {t} acc = {_init(op, dt)};",
                  f"  for ({it} c = get_local_id(0); c < {groups}; c += {tree}) {{",
                  f"    {t} v = {pp}[{po_} + {partial.offset} + gid * {groups} + c];",
                  f"    acc = {_combine(op, dt, 'acc', 'v')};",
                  "  }", *_tree_lines(op, dt, tree, "acc")]
        store, own = _reduce_store("red[0]", out, epilogue, p2, it, None)
        lines2 += ["  if (lid == 0) {", *store, "  }"]
        specs.append(KernelSpec(name + "_pass2", kernel_source(name + "_pass2", p2, lines2), p2.slots,
                                [((m * tree,), (tree,), None)], kind="reduce",
                                note="pass 2: a work-group per row" + note, **own))
        return specs
    lines.append(f"  {pp}[{po_} + {partial.offset} + gid] = acc;")
    if is_arg:
        ip, io = params(pidx.slot, dtypes.int64)
        lines.append(f"  {ip}[{io} + {pidx.offset} + gid] = bi;")
    specs.append(KernelSpec(name, kernel_source(name, params, lines), params.slots,
                            exact_launches(m * chunks, info, m * k),
                            kind="reduce", note=f"pass 1: {chunks} chunks per row"))
    p2 = Params()
    pp, po_ = p2(partial.slot, dt)
    lines2 = [f"  const {it} gid = get_global_id(0);", f"  {t} acc = {_init(op, dt)};"]
    if is_arg:
        ip, io = p2(pidx.slot, dtypes.int64)
        lines2 += ["  long bi = -1;",
                   f"  for ({it} c = 0; c < {chunks}; ++c) {{",
                   f"    {t} v = {pp}[{po_} + {partial.offset} + gid * {chunks} + c];",
                   f"    long i = {ip}[{io} + {pidx.offset} + gid * {chunks} + c];",
                   "    if (i < 0) continue;",
                   f"    if (bi < 0 || {_better(op, dt, 'v', 'acc')} || ((v == acc || "
                   f"({'isnan(v) && isnan(acc)' if dtypes.is_float(dt) else '0'})) && i < bi)) {{ acc = v; bi = i; }}",
                   "  }"]
    else:
        lines2 += [f"  for ({it} c = 0; c < {chunks}; ++c) {{",
                   f"    {t} v = {pp}[{po_} + {partial.offset} + gid * {chunks} + c];",
                   f"    acc = {_combine(op, dt, 'acc', 'v')};",
                   "  }"]
    res = f"(({res_type})bi)" if is_arg else "acc"
    store, own = _reduce_store(res, out, epilogue, p2, it, None)
    specs.append(KernelSpec(name + "_pass2", kernel_source(name + "_pass2", p2, lines2 + store), p2.slots,
                            exact_launches(m, info), kind="reduce", note="pass 2" + note, **own))
    return specs


#: Work-items per compute unit that a long reduction on a GPU spreads over (with a work-group
#: tree in local memory, so the second pass has few partial results to combine).
TREE_ITEMS_PER_UNIT = 1024


def _tree_size(info: DeviceInfo, dt: np.dtype) -> int:
    """The work-group size of a GPU reduction's local-memory tree: the largest power of two up
    to 256 that the device's work-group and local memory admit; 0 below 32 (no tree)."""
    size = 256
    while size >= 32 and (size > info.max_work_group_size or size * np.dtype(dt).itemsize > info.local_mem_size):
        size //= 2
    return size if size >= 32 else 0


def _tree_lines(op: str, dt: np.dtype, size: int, value: str) -> list[str]:
    """Lines combining each work-item's ``value`` across its work-group of ``size`` in local
    memory; the result is ``red[0]`` and ``lid`` the work-item's local index."""
    return [f"  __local {ctype(dt)} red[{size}];", "  const int lid = get_local_id(0);", f"  red[lid] = {value};",
            "  barrier(CLK_LOCAL_MEM_FENCE);",
            f"  for (int s = {size // 2}; s > 0; s >>= 1) {{",
            f"    if (lid < s) red[lid] = {_combine(op, dt, 'red[lid]', 'red[lid + s]')};",
            "    barrier(CLK_LOCAL_MEM_FENCE);", "  }"]


def _column_sum_kernel(name: str, x: Access, out: Access | None, m: int, k: int, info: DeviceInfo, it: str,
                       epilogue: Epilogue | None = None) -> KernelSpec:
    """A sum over leading axes of a contiguous ``[k, m]`` operand (a bias gradient): each
    work-item adds 16 adjacent columns down all ``k`` rows with vector loads, where one
    work-item per column would read one float per cache line. An ``epilogue`` (a bias update)
    is evaluated on the 16 sums as vectors before they are stored."""
    dt = x.aval.dtype
    t = ctype(dt)
    params = Params()
    px, ox = params(x.slot, dt)
    if epilogue is None:
        assert out is not None
        po, oo = params(out.slot, dt)
        store = [f"  vstore16(s + s2, 0, {po} + {oo} + {out.offset} + (long)gid * 16);"]
        own: dict[str, frozenset[int]] = {}
    else:
        shape = epilogue.outputs[0][0].aval.shape
        lanes = dataclasses.replace(epilogue, inputs=tuple((v, broadcast_access(a, shape)) for v, a in epilogue.inputs))
        bs = BlockStore(lanes, epilogue.outputs[0][1], (0, 0), params, ("0", "0", "(long)gid * 16"), 16)
        store = [*bs.lines, f"  const {t}16 sums = s + s2;", *bs.block(["sums"], 16)]
        own = lanes.own(epilogue.outputs[0][1], [x.slot])
    body = [f"  const {it} gid = get_global_id(0);",
            f"  __global const {t}* base = {px} + {ox} + {x.offset} + (long)gid * 16;",
            f"  {t}16 s = vload16(0, base), s2 = ({t}16)(0);",
            f"  {it} kk = 1;",
            f"  for (; kk + 2 <= {k}; kk += 2) {{ s += vload16(0, base + (long)kk * {m}); "
            f"s2 += vload16(0, base + (long)(kk + 1) * {m}); }}",
            f"  if (kk < {k}) s += vload16(0, base + (long)kk * {m});", *store]
    groups = m // 16
    local = divisor(groups, max(1, min(16, groups // (2 * info.compute_units)) or 1))
    return KernelSpec(name, kernel_source(name, params, body), params.slots, [((groups,), (local,), None)],
                      kind="reduce", note="16 columns per work-item", **own)
