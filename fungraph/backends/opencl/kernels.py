"""Kernel source generators: fused elementwise regions, reductions (with a fused elementwise
prologue and epilogue), dot_general (register-blocked), direct convolution, scatter_add and copies.

Every generator returns a :class:`KernelSpec`: the source of one ``__kernel`` function, the
storage slots it takes as ``(__global T* p<slot>, long o<slot>)`` argument pairs, and its
launches. Launches use exact grids (PoCL vectorises a work-group loop only without a bounds
guard): the bulk of ``n`` work-items in work-groups of 256/128/64 and the remainder as one
small work-group at a global offset.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from fungraph import dtypes
from fungraph.backends.opencl.codegen import (
    VIEW_OPS,
    Access,
    Emitter,
    c_literal,
    contiguous,
    ctype,
    merged_stride,
    view_access,
    wrapping,
)
from fungraph.backends.opencl.device import DeviceInfo
from fungraph.backends.opencl.epilogue import (
    BlockStore,
    Epilogue,
    broadcast_access,
    kernel_strides,
    lane_epilogue,
)
from fungraph.ir import Eqn, Graph, ShapedArray, Var
from fungraph.primitives.indexing import _normalize_indices

Launch = tuple[tuple[int, ...], tuple[int, ...] | None, tuple[int, ...] | None]   # global, local, offset


@dataclass
class KernelSpec:
    name: str
    source: str
    slots: list[tuple[int, np.dtype]]
    launches: list[Launch]
    eqns: list[int] = field(default_factory=list)
    kind: str = "elementwise"
    note: str = ""
    #: elementwise kernels: the slots work-item ``gid`` only loads at element ``gid``, and the
    #: slots it only stores at element ``gid`` (after all its loads) and never loads
    own_loads: frozenset[int] = frozenset()
    own_stores: frozenset[int] = frozenset()
    #: one-dimensional copies: the body after ``gid`` is declared (:func:`merge_copies` runs
    #: several such bodies side by side in one launch)
    per_item: tuple[str, ...] = ()
    #: a copy ``(dst, src)`` between call slots, skipped when a call binds both to one buffer
    #: (an output taking over the donated input it copies)
    unless_same: tuple[int, int] | None = None


class Params:
    """Collects the slots a kernel reads or writes, in first-use order."""

    def __init__(self) -> None:
        self.slots: list[tuple[int, np.dtype]] = []

    def __call__(self, slot: int, dtype: np.dtype) -> tuple[str, str]:
        if all(s != slot for s, _ in self.slots):
            self.slots.append((slot, dtypes.canonical(dtype)))
        return f"p{slot}", f"o{slot}"

    def signature(self) -> str:
        return ", ".join(f"__global {ctype(dt)}* restrict_not p{s}, long o{s}".replace(" restrict_not", "")
                         for s, dt in self.slots)


#: Work below this many elements stays in one work-group where it can: waking a second PoCL
#: worker thread costs more than it saves (a 132-element loop body went from 26 to 450 us
#: per iteration when its launches were split over both cores).
SPREAD_MIN_WORK = 1 << 15


def exact_launches(n: int, info: DeviceInfo, work: int | None = None) -> list[Launch]:
    """A bulk launch with a work-group size of 256, 128 or 64 dividing it, plus a tail. On a
    CPU, when the launch does at least ``SPREAD_MIN_WORK`` elements of work (``work``,
    default ``n``), the largest size that still gives every compute unit two work-groups is
    preferred (one work-group runs on one core)."""
    if n == 0:
        return []
    cap = min(256, info.max_work_group_size)
    heavy = (n if work is None else work) >= SPREAD_MIN_WORK
    spread = 2 * info.compute_units if info.is_cpu and heavy else 1
    sizes = [lo for lo in (256, 128, 64) if lo <= cap]
    if spread > 1:
        fits = [lo for lo in sizes if n >= lo * spread] or [lo for lo in sizes[::-1] if n >= lo]
    else:
        fits = [lo for lo in sizes if n >= lo]
    if not fits:
        return [((n,), (n,) if n <= cap else None, None)]
    local = fits[0]
    bulk = n - n % local
    out: list[Launch] = [((bulk,), (local,), None)]
    if n - bulk:
        out.append(((n - bulk,), (n - bulk,), (bulk,)))
    return out


def _kernel(name: str, params: Params, body: Sequence[str]) -> str:
    return f"__kernel void {name}({params.signature()}) {{\n" + "\n".join(body) + "\n}\n"


def _copy_spec(name: str, params: Params, per_item: Sequence[str], count: int, info: DeviceInfo, it: str,
               note: str) -> KernelSpec:
    """A one-dimensional copy of ``count`` work-items whose lines ``per_item`` read ``gid``."""
    body = [f"  const {it} gid = get_global_id(0);", *per_item]
    return KernelSpec(name, _kernel(name, params, body), params.slots, exact_launches(count, info), kind="copy",
                      note=note, per_item=tuple(per_item))


def _prod(shape: Sequence[int]) -> int:
    return int(math.prod(shape))


# --- fused elementwise regions -------------------------------------------------------------


class RegionEmitter(Emitter):
    """An emitter that reads views of stored values through composed accesses."""

    def value(self, atom, idx):  # noqa: ANN001, ANN201
        if isinstance(atom, Var) and atom in self.region:
            a = self.composed(atom)
            if a is not None:
                key = (atom, tuple(idx))
                if key not in self.cache:
                    self.cache[key] = self.load(a, idx)
                return self.cache[key]
        return super().value(atom, idx)

    def composed(self, v: Var) -> Access | None:
        e = self.region.get(v)
        if e is None:
            return self.access_of(v)
        if e.primitive.name not in VIEW_OPS or not isinstance(e.inputs[0], Var):
            return None
        a = self.composed(e.inputs[0])
        return view_access(e, a) if a is not None else None


class _PinnedEmitter(RegionEmitter):
    """A region emitter with values that are the same expression at every index it reads
    them (a reduction's result, which an epilogue reads only at the element it stores)."""

    pinned: dict[Var, str]

    def value(self, atom, idx):  # noqa: ANN001, ANN201
        if isinstance(atom, Var) and atom in self.pinned:
            return self.pinned[atom]
        return super().value(atom, idx)


def region_emitter(idx_type: str, members: dict[Var, Eqn], access_of: Callable[[Var], Access | None],
                   params: Params) -> RegionEmitter:
    def leaf(v: Var) -> Access | None:
        return None if v in members else access_of(v)

    return RegionEmitter(idx_type, members, leaf, params)


def elementwise_kernel(name: str, shape: tuple[int, ...], outputs: Sequence[tuple[Var, Access]],
                       members: dict[Var, Eqn], access_of: Callable[[Var], Access | None], idx_type: str,
                       info: DeviceInfo, values: Sequence[Var] | None = None) -> KernelSpec:
    """One kernel computing ``outputs`` (each at the iteration ``shape``) from ``members``."""
    params = Params()
    em = region_emitter(idx_type, members, access_of, params)
    em.lines.append(f"  const {idx_type} gid = get_global_id(0);")
    base = em.set_base("gid", shape)
    stores = []
    for k, (v, out) in enumerate(outputs):
        src = values[k] if values is not None else v
        val = em.value(src, base)
        p, o = params(out.slot, out.aval.dtype)
        stores.append(f"  {p}[{o} + {out.offset} + gid] = {val};")
    stored = [out for _, out in outputs]
    strided = {o.slot for o in stored if o.offset or not o.is_contiguous() or o.shape != tuple(shape)}
    own_stores = {o.slot for o in stored} - set(em.own_loads) - strided
    return KernelSpec(name, _kernel(name, params, em.lines + stores), params.slots,
                      exact_launches(_prod(shape), info),
                      own_loads=frozenset(slot for slot, own in em.own_loads.items() if own),
                      own_stores=frozenset(own_stores))


#: Whether large elementwise kernels on a CPU store with non-temporal stores
#: (:func:`elementwise_kernels`), and from how many bytes of outputs: past the last-level cache
#: an ordinary store first reads the line it writes.
STREAM_STORES = True
STREAM_MIN_BYTES = 16 << 20


def elementwise_kernels(name: str, shape: tuple[int, ...], outputs: Sequence[tuple[Var, Access]],
                        members: dict[Var, Eqn], access_of: Callable[[Var], Access | None], idx_type: str,
                        info: DeviceInfo) -> list[KernelSpec]:
    """:func:`elementwise_kernel`; on a CPU, when the outputs take at least
    ``STREAM_MIN_BYTES`` and every input is read at the element it is stored at (or is a
    scalar), the first ``n - n % 8`` elements are computed 8 per work-item and stored with one
    non-temporal 8-wide store per output (plain stores where an output is not 32-byte aligned),
    and the plain kernel does the rest: a 10-op chain over 10M float32 went from 3.5-3.9 to
    2.9-3.2 ms (median; it writes 40 MB, which an ordinary store also reads first)."""
    plain = elementwise_kernel(name, shape, outputs, members, access_of, idx_type, info)
    n = _prod(shape)
    sizes = {np.dtype(out.aval.dtype).itemsize for _, out in outputs}
    if not (STREAM_STORES and info.is_cpu and n >= 8 and sizes <= {4, 8}
            and n * sum(np.dtype(out.aval.dtype).itemsize for _, out in outputs) >= STREAM_MIN_BYTES):
        return [plain]
    params = Params()
    em = region_emitter(idx_type, members, access_of, params)
    lines = [f"  const {idx_type} wi8 = get_global_id(0);"]
    lines += [f"  {ctype(out.aval.dtype)} lanes{k}[8];" for k, (_, out) in enumerate(outputs)]
    em.lines.append(f"  const {idx_type} gid = wi8 * 8 + lane;")
    base = em.set_base("gid", shape)
    values = [em.value(v, base) for v, _ in outputs]
    scalars = {a.slot for e in members.values() for v in e.inputs
               if isinstance(v, Var) and v not in members and (a := access_of(v)) is not None and _prod(a.shape) == 1}
    if any(not own and slot not in scalars for slot, own in em.own_loads.items()):
        return [plain]
    lines += ["  for (int lane = 0; lane < 8; ++lane) {", *em.lines]
    lines += [f"    lanes{k}[lane] = {val};" for k, val in enumerate(values)]
    lines.append("  }")
    for k, (_, out) in enumerate(outputs):
        t = ctype(out.aval.dtype)
        p, o = params(out.slot, out.aval.dtype)
        lines += [f"  __global {t}* out{k} = {p} + {o} + {out.offset} + wi8 * 8;",
                  f"  if ((((ulong)out{k}) & 31) == 0)",
                  f"    __builtin_nontemporal_store(vload8(0, lanes{k}), (__global {t}8*)out{k});",
                  f"  else vstore8(vload8(0, lanes{k}), 0, out{k});"]
    stream = KernelSpec(name + "_stream", _kernel(name + "_stream", params, lines), params.slots,
                        exact_launches(n // 8, info), kind=plain.kind,
                        note=f"8 elements per work-item, non-temporal stores ({n - n % 8} elements)",
                        own_loads=plain.own_loads, own_stores=plain.own_stores)
    if n % 8 == 0:
        return [stream]
    plain.launches = [((n % 8,), (n % 8,), (n - n % 8,))]
    plain.note = f"the last {n % 8} elements"
    return [stream, plain]


# --- reductions --------------------------------------------------------------------------------

_IDENTITY = {"reduce_sum": 0, "reduce_prod": 1}


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
    """One step of reduction ``op``; integer sums and products wrap (:func:`codegen.wrapping`)."""
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
    m = _prod([xs[d] for d in range(len(xs)) if d not in axes])
    k = _prod([xs[d] for d in axes])
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
    m = _prod([xs[d] for d in kept])
    k = _prod([xs[d] for d in axes])
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
        specs.append(KernelSpec(name, _kernel(name, params, lines + store), params.slots,
                                exact_launches(m, info, m * k), kind="reduce", note=note[2:], **own))
        return specs
    pp, po_ = params(partial.slot, dt)
    if tree:
        groups = chunks // tree
        lines += [*_tree_lines(op, dt, tree, "acc"),
                  f"  if (lid == 0) {pp}[{po_} + {partial.offset} + gid / {tree}] = red[0];"]
        specs.append(KernelSpec(name, _kernel(name, params, lines), params.slots, [((m * chunks,), (tree,), None)],
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
        specs.append(KernelSpec(name + "_pass2", _kernel(name + "_pass2", p2, lines2), p2.slots,
                                [((m * tree,), (tree,), None)], kind="reduce",
                                note="pass 2: a work-group per row" + note, **own))
        return specs
    lines.append(f"  {pp}[{po_} + {partial.offset} + gid] = acc;")
    if is_arg:
        ip, io = params(pidx.slot, dtypes.int64)
        lines.append(f"  {ip}[{io} + {pidx.offset} + gid] = bi;")
    specs.append(KernelSpec(name, _kernel(name, params, lines), params.slots, exact_launches(m * chunks, info, m * k),
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
    specs.append(KernelSpec(name + "_pass2", _kernel(name + "_pass2", p2, lines2 + store), p2.slots,
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
    local = _divisor(groups, max(1, min(16, groups // (2 * info.compute_units)) or 1))
    return KernelSpec(name, _kernel(name, params, body), params.slots, [((groups,), (local,), None)],
                      kind="reduce", note="16 columns per work-item", **own)


# --- dot_general ---------------------------------------------------------------------------------


#: Steps of ``k`` the packed kernel's inner loop is unrolled by: one loop test and two address
#: increments per four steps rather than per step, where each step is twelve FMAs. Paired
#: speed-up over numpy's BLAS, unrolled 1 / 4 / 8 (16 was worse than 4): 512 0.89 / 0.98 / 1.07,
#: 1000 0.98 / 1.06 / 1.07, 2048 1.01 / 1.10 / 1.06; 1024 unchanged.
DOT_UNROLL = 4
#: Fewest multiply-adds for which the loop is unrolled: smaller products are bound by dispatch
#: (~50-60 us a launch on PoCL), and an unrolled kernel's first launch compiles 70-120 ms
#: longer (the 1024 product's: 105-173 -> 174-261 ms), which a test suite of small products pays
#: hundreds of times on a cold cache.
DOT_UNROLL_MIN_WORK = 1 << 22
#: Lines of ``rhs`` the fused kernel's panel copy moves per loop step, in products of at least
#: ``DOT_UNROLL_MIN_WORK``: each line is on its own page when rows are 4 KiB apart, out of the
#: prefetcher's reach, and more loads in flight hide more of the misses. 48 x 784 x 1024: 0.88
#: -> 0.94-0.95x numpy's BLAS (two A/B runs of 15 rounds); 24 x 1024 x 1024 and 512^3 alike.
COPY_UNROLL = 8
#: Rows and columns of ``out`` one work-item of the unpacked register-blocked matmul computes:
#: four 16-wide accumulators.
DOT_ROWS, DOT_COLS = 4, 16
#: The packed kernel's block: 6 rows x 16 columns, twelve 8-wide accumulators (of AVX2's 16
#: vector registers), two panel loads and six broadcasts per step of ``k``.
PACK_ROWS = 6
#: Work-group of the packed kernel: ``DOT_GROUP[0]`` column panels x up to ``DOT_GROUP[1]`` row
#: panels. A work-group runs on one core, which reads its column panel once per row panel, so
#: more row panels keep it in cache longer: a 2048 product ran 12-15% faster with 38-171 row
#: panels per work-group than with 6; 1024 (both operands packed, 170 row panels) ran at 1.04-1.05x
#: numpy's BLAS with 34, 0.94-0.95x with 85 and 0.92x with 10.
DOT_GROUP = (1, 34)
#: Work-groups the packed kernel keeps per compute unit, so that a core left short is not idle.
DOT_GROUPS_PER_UNIT = 8
#: Whether packed products copy ``rhs`` panels inside the product kernel (:func:`fused_panels`).
DOT_FUSED_PACK = True
#: Most row panels one work-item of the fused kernel computes from its local panel, and the
#: fewest (copying a panel costs about what one to four row panels of products do).
FUSED_GROUP, FUSED_MIN_RUN = 64, 8
#: Largest product (multiply-adds) whose ``rhs`` panels are copied by the product kernel: the
#: MLP's 256 x 1024 x 1024 layers and smaller.
FUSED_MAX_WORK = 1 << 28
#: Lines of ``k`` one work-item of the row-major panel copy moves (1024 x 1024: 0.55 -> 0.38 ms
#: at best, 0.87 -> 0.56 at median, against 0.32 / 0.47 for a plain copy of the same bytes).
PACK_LINES = 8
#: Use the packed 6x16 kernel (``rhs`` panels, copied inside the product when small enough)
#: when ``m`` is at least this, two row panels; below it the 4x16 kernel reads ``rhs`` rows in
#: place. Paired speed-up over numpy's BLAS with the 4x16 kernel / packed: 12 x 1024 x 1024
#: 0.97-0.99 / 1.23-1.25, 24 x 1024 x 1024 0.72-0.74 / 1.00-1.04, 48 x 784 x 1024 0.52-0.56 /
#: 0.88-0.91; at ``m = 8`` packed was worse (0.65-0.66 against 0.68-0.76). The threshold had
#: been 64.
PACK_MIN_ROWS = 12
#: Whether products too large for the fused copy pack ``lhs`` rows that are contiguous along
#: ``k`` too (in the same launch as ``rhs``) when they lie a multiple of ``ALIAS_BYTES`` apart:
#: six such rows share few L1 sets (4 KiB apart, one). Packed, the 1024 product ran at 1.04x
#: numpy's BLAS against 0.96x in place, 2048 at 1.04x against 1.00x; 1000 (rows 4000 bytes
#: apart) at 0.95x packed against 1.00x in place.
DOT_PACK_LHS = True
ALIAS_BYTES = 2048
#: A narrow product (``n < 16``) whose rows lie side by side in ``lhs`` (a transposed
#: operand, as in ``x.T @ g``) runs one row per work-item, with no copy, from this many rows.
NARROW_MIN_ROWS = 64
#: Tile of the local-memory kernel for devices that are not CPUs: ``TILE`` x ``TILE`` blocks
#: of both operands in local memory, ``TILE_WORK`` outputs per work-item.
TILE, TILE_WORK = 16, 4
#: The register-blocked GPU kernel: 16 x 16 work-items each computing ``R x R`` outputs of a
#: ``16R x 16R`` tile, ``k`` staged in local memory 16 at a time; ``R`` is the largest of these
#: that still gives every compute unit a work-group.
BLOCK_WORK = (4, 2)


def _panels(a: Access, batch: tuple, free: tuple, contracting: tuple, width: int, slot: int,
            pad: bool) -> tuple[Access, Access] | None:
    """(a strided view of ``a`` as ``[b, f // width, k, width]``, its contiguous copy, with one
    more panel for the last ``f % width`` lines when ``pad``), or None when the batch, free or
    contracting axes do not merge into one stride each."""
    sb, sf, sk = merged_stride(a, batch), merged_stride(a, free), merged_stride(a, contracting)
    if sb is None or sf is None or sk is None:
        return None
    b, f, k = (_prod([a.shape[d] for d in ds]) for ds in (batch, free, contracting))
    shape = (b, f // width, k, width)
    view = Access(a.slot, ShapedArray(shape, a.aval.dtype), a.offset, (sb, width * sf, sk, sf))
    full = (b, -(-f // width) if pad else f // width, k, width)
    return view, Access(slot, ShapedArray(full, a.aval.dtype), 0, contiguous(full))


def dot_panels(rhs: Access, dims: tuple, slot: int) -> tuple[Access, Access] | None:
    """``rhs`` as 16-column panels ``[b, n // 16, k, 16]`` (the last ``n % 16`` columns in one
    more, zero-padded panel): the layout the packed kernel streams through, one cache line
    per ``k`` and no 4 KiB stride between rows."""
    (_, rc), (_, rb) = dims
    rf = tuple(d for d in range(len(rhs.shape)) if d not in rc and d not in rb)
    return _panels(rhs, rb, rf, rc, DOT_COLS, slot, pad=True)


def dot_row_panels(lhs: Access, dims: tuple, slot: int, overlap: bool = False) -> tuple[Access, Access] | None:
    """``lhs`` as 6-row panels ``[b, m // 6, k, 6]``: the six values the packed kernel
    broadcasts at each ``k`` lie side by side. ``overlap`` (``m % 6`` rows left over) makes room
    for one more panel, the last six rows (:func:`overlap_row_panel`), so the product covers
    the last rows without a kernel of its own."""
    (lc, _), (lb, _) = dims
    lf = tuple(d for d in range(len(lhs.shape)) if d not in lc and d not in lb)
    return _panels(lhs, lb, lf, lc, PACK_ROWS, slot, pad=overlap)


def overlap_row_panel(view: Access, panels: Access, m: int) -> tuple[Access, Access]:
    """(the last six rows of ``lhs``, seen like :func:`dot_row_panels`' ``view``, and the extra
    panel of ``panels`` they are packed into): the packed kernel's last row panel starts at row
    ``m - 6`` and stores only the rows the whole panels leave."""
    b, g, k, w = view.shape
    one = ShapedArray((b, 1, k, w), view.aval.dtype)
    rows = Access(view.slot, one, view.offset + (m - w) * view.strides[3], view.strides)
    return rows, Access(panels.slot, one, panels.offset + g * panels.strides[1], panels.strides)


def pack_kernel(name: str, src: Access, dst: Access, info: DeviceInfo, it: str,
                what: str | None = None) -> list[KernelSpec]:
    """Copy the strided view ``src`` of shape ``[b, x, k, w]`` into the panels ``dst``: one
    work-item per ``w``-wide row (a 16-wide vector load when the row is contiguous), walking
    fastest along whichever of ``x``/``k`` is closer in memory; for a view contiguous along
    ``k``, 16 x ``w`` blocks transposed in registers (:func:`_pack_transposed`) and this kernel
    for the last ``k % 16``. A zero-padded last panel is :func:`pack_tail_kernel`'s. ``what``:
    the kernels' note, when not how they copy."""
    b, x, k, w = src.shape
    _, sx, sk, sw = src.strides
    dk = dst.strides[2]
    dt = dst.aval.dtype
    k16 = k - k % 16
    if sk == 1 and sw != 1 and k16 and dk == w:
        specs = [_pack_transposed(name, src, dst, k16, info, it, what)]
        if k16 < k:
            tail = (b, x, k - k16, w)
            specs += pack_kernel(name + "_k", Access(src.slot, ShapedArray(tail, dt), src.offset + k16, src.strides),
                                 Access(dst.slot, ShapedArray(tail, dt), dst.offset + k16 * dk, dst.strides), info, it,
                                 what)
        return specs
    params = Params()
    fast_k = abs(sk) <= abs(sx)
    rows = 1 if fast_k else _divisor(k, PACK_LINES)
    inner, outer = (k, x) if fast_k else (x, k // rows)
    body = [f"  const {it} bb = gid / {inner * outer};",
            f"  const {it} rest = gid % {inner * outer};",
            f"  const {it} {'kk' if fast_k else 'xx'} = rest % {inner};",
            f"  const {it} {'xx' if fast_k else 'kk'} = rest / {inner} * {rows};",
            *_pack_pointers(params, src, dst, "xx", "kk")]
    stream = w == 16 and sw == 1 and _stream_pack(dst, info)
    if stream:
        line = ["const {t}16 v = vload16(0, s + (long)l * {sk});", *_stream16("v", "d + l * {dk}", ctype(dt))]
    elif w == 16 and sw == 1:
        line = ["vstore16(vload16(0, s + (long)l * {sk}), 0, d + l * {dk});"]
    else:
        line = [f"d[l * {{dk}} + {j}] = s[(long)l * {{sk}} + {j * sw}];" for j in range(w)]
    body.append(f"  for (int l = 0; l < {rows}; ++l) {{")
    body += ["    " + text.format(sk=sk, dk=dk, t=ctype(dt)) for text in line]
    body.append("  }")
    note = f"pack {w}-wide panels" + (f", {rows} lines per work-item" if rows > 1 else "") \
        + (", non-temporal stores" if stream else "")
    work = b * x * k // rows
    return [_copy_spec(name, params, body, work, info, it, what or note)] if work else []


#: Whether panel copies of at least ``PACK_STREAM_MIN_BYTES`` (on a CPU) store past the caches:
#: panels that large leave the last-level cache before the product reads them, and a plain
#: store first reads each line it writes. Packing both 2048 x 2048 operands: 2.7-3.0 -> 1.9-2.0
#: ms, the product unchanged. Smaller panels stay cached for the product and store plainly.
PACK_STREAM = True
#: From this many bytes of panels (a 1024 x 1024 float32 operand) a panel copy streams: at
#: 1024 the product then ran at 1.05-1.06x numpy's BLAS against 1.03-1.04x; 1000 unchanged.
PACK_STREAM_MIN_BYTES = 4 << 20


def _stream_pack(dst: Access, info: DeviceInfo) -> bool:
    return PACK_STREAM and info.is_cpu and dst.aval.nbytes >= PACK_STREAM_MIN_BYTES


def _stream16(value: str, address: str, t: str, indent: str = "") -> list[str]:
    """Store the 16-vector ``value`` at ``address`` past the caches when it is 64-byte aligned
    (a panel line is one cache line), with a plain store otherwise."""
    return [f"{indent}if ((((ulong)({address})) & 63) == 0) "
            f"__builtin_nontemporal_store({value}, (__global {t}16*)({address}));",
            f"{indent}else vstore16({value}, 0, {address});"]


def _pack_pointers(params: Params, src: Access, dst: Access, xx: str, kk: str) -> list[str]:
    """Declarations of ``s`` and ``d``: where line ``(bb, xx, kk)`` of the view ``src``
    (``[b, x, k, w]``) and of the panels ``dst`` start."""
    dt = dst.aval.dtype
    t = ctype(dt)
    ps, os_ = params(src.slot, dt)
    pd, od = params(dst.slot, dt)
    (sb, sx, sk, _), (db, dx, dk, _) = src.strides, dst.strides
    return [f"  __global const {t}* s = {ps} + {os_} + {src.offset} + (long)bb * {sb} + (long)({xx}) * {sx} "
            f"+ (long)({kk}) * {sk};",
            f"  __global {t}* d = {pd} + {od} + {dst.offset} + (long)bb * {db} + (long)({xx}) * {dx} "
            f"+ (long)({kk}) * {dk};"]


def _pack_transposed(name: str, src: Access, dst: Access, k16: int, info: DeviceInfo, it: str,
                     what: str | None = None) -> KernelSpec:
    """Panels from an operand contiguous along ``k`` (``lhs`` rows, or ``rhs`` given as its
    transpose): each work-item loads 16 values of ``k`` from each of the ``w`` lines with
    ``vload16`` and writes the interleaved ``16 x w`` block as ``w`` vector stores."""
    b, x, _, w = src.shape
    sw = src.strides[3]
    t = ctype(dst.aval.dtype)
    params = Params()
    chunks = k16 // 16
    body = [f"  const {it} kc = gid % {chunks};",
            f"  const {it} xx = (gid / {chunks}) % {x};", f"  const {it} bb = gid / {chunks * x};",
            *_pack_pointers(params, src, dst, "xx", "kc * 16")]
    body += [f"  const {t}16 v{j} = vload16(0, s + {j * sw});" for j in range(w)]
    stream = _stream_pack(dst, info)
    for q in range(w):
        comps = ", ".join(f"v{e % w}.s{e // w:x}" for e in range(16 * q, 16 * q + 16))
        if stream:
            body += [f"  const {t}16 q{q} = ({t}16)({comps});", *_stream16(f"q{q}", f"d + {16 * q}", t, "  ")]
        else:
            body.append(f"  vstore16(({t}16)({comps}), {q}, d);")
    return _copy_spec(name, params, body, b * x * chunks, info, it,
                      what or f"pack {w}-wide panels, 16 x {w} blocks transposed in registers"
                      + (", non-temporal stores" if stream else ""))


def merge_copies(name: str, specs: Sequence[KernelSpec], info: DeviceInfo, it: str) -> KernelSpec:
    """One launch running the one-dimensional copies ``specs`` (:func:`_copy_spec`) side by
    side: work-item ``gid0`` runs the body of the copy whose range of work-items holds it. Packing both
    operands of a product in one launch rather than two: PoCL often runs the second of two
    chained kernels on one worker for a while."""
    params = Params()
    body = [f"  const {it} gid0 = get_global_id(0);"]
    start = 0
    for spec in specs:
        count = max(g[0] + (o[0] if o else 0) for g, _, o in spec.launches)
        for slot, dt in spec.slots:
            params(slot, dt)
        body += [f"  {'if' if start == 0 else 'else if'} (gid0 < {start + count}) {{",
                 f"  const {it} gid = gid0 - {start};", *spec.per_item, "  }"]
        start += count
    return KernelSpec(name, _kernel(name, params, body), params.slots, exact_launches(start, info), kind="copy",
                      note="; ".join(spec.note for spec in specs) + f" ({len(specs)} copies in one launch)")


def pack_tail_kernel(name: str, src: Access, cols: int, dst: Access, info: DeviceInfo, it: str) -> KernelSpec:
    """Fill the last panel of ``dst`` (``[b, x + 1, k, w]``) from the ``cols`` columns that
    follow the whole panels of ``src`` (``[b, x, k, w]``), zero beyond them."""
    b, x, k, w = src.shape
    sw = src.strides[3]
    dt = dst.aval.dtype
    params = Params()
    body = [f"  const {it} bb = gid / {k};", f"  const {it} kk = gid % {k};",
            *_pack_pointers(params, src, dst, str(x), "kk")]
    zero = c_literal(0, dt)
    body += [f"  d[{j}] = {f's[{j * sw}]' if j < cols else zero};" for j in range(w)]
    return _copy_spec(name, params, body, b * k, info, it, f"pack the last {cols} columns, zero-padded")


def _divisor(n: int, cap: int) -> int:
    """The largest power of two <= ``cap`` dividing ``n``."""
    d = 1
    while d * 2 <= cap and n % (d * 2) == 0:
        d *= 2
    return d


def dot_kernels(name: str, lhs: Access, rhs: Access, out: Access, dims: tuple, info: DeviceInfo,
                idx_type: str, panels: Access | None = None, row_panels: Access | None = None,
                epilogue: Epilogue | None = None, fused: bool = False) -> list[KernelSpec] | None:
    """``out[b, m, n] = sum_k lhs[b, m, k] rhs[b, k, n]`` when each operand's batch, free and
    contracting axes merge into one stride each (else None: the engine copies first).
    On a CPU a register-blocked kernel covers the bulk: with ``panels`` (``rhs`` packed by
    :func:`dot_panels`; ``lhs`` packed by :func:`dot_row_panels` into ``row_panels``, or None
    when its rows are contiguous along ``k``) 6x16 blocks whose work-groups share row panels
    (``fused``: ``panels`` is :func:`dot_panels`' view of ``rhs``, copied by the product kernel);
    without, 4x16 blocks that need ``rhs`` rows contiguous.
    Small kernels cover the edges, so no kernel has a bounds test. Other devices get the
    local-memory tiled kernel (:func:`tiled_dot_kernel`). With an ``epilogue`` (packed kernels
    only; ``out`` is then its first output) the kernels store its outputs instead."""
    (lc, rc), (lb, rb) = dims
    lf = tuple(d for d in range(len(lhs.shape)) if d not in lc and d not in lb)
    rf = tuple(d for d in range(len(rhs.shape)) if d not in rc and d not in rb)
    strides = [merged_stride(lhs, lb), merged_stride(lhs, lf), merged_stride(lhs, lc),
               merged_stride(rhs, rb), merged_stride(rhs, rc), merged_stride(rhs, rf)]
    if any(s is None for s in strides):
        return None
    sab, sam, sak, sbb, sbk, sbn = strides
    b = _prod([lhs.shape[d] for d in lb])
    m = _prod([lhs.shape[d] for d in lf])
    k = _prod([lhs.shape[d] for d in lc])
    n = _prod([rhs.shape[d] for d in rf])
    if b * m * n == 0:
        return []
    nb, nf = len(lb), len(lf)
    ostrides = kernel_strides(out, nb, nf)
    if ostrides is None or (panels is None and not out.is_contiguous()):
        raise ValueError(f"dot_kernels: output strides {out.strides} of shape {out.shape} are not supported")
    _, som, son = ostrides
    if epilogue is not None and panels is None:
        raise ValueError("dot_kernels: an epilogue needs the packed kernels")
    if not info.is_cpu:
        blocked = _blocked_tile_dot_kernel(name, lhs, rhs, out, (b, m, k, n), tuple(strides), info, idx_type)
        return [blocked or tiled_dot_kernel(name, lhs, rhs, out, (b, m, k, n), tuple(strides), info, idx_type)]
    dt = out.aval.dtype
    t = ctype(dt)
    it = idx_type
    specs = []
    m4, n16 = m - m % 4, n - n % 16
    packed = panels is not None and k > 0
    if packed:
        m4 = m
    blocked = packed or (sbn == 1 and m4 > 0 and n16 > 0 and k > 0)
    narrow = not blocked and sam == 1 and n < DOT_COLS and m >= NARROW_MIN_ROWS and k > 0
    kdot = not blocked and not narrow and sak == 1 and sbk == 1 and k >= 16
    fma = (lambda a, v, c: f"fma(({t}16)({a}), {v}, {c})") if dtypes.is_float(dt) else \
        (lambda a, v, c: f"{c} + ({a}) * {v}")

    def common(params: Params) -> tuple[str, str, str, str, str, str]:
        pa, oa = params(lhs.slot, dt)
        pb, ob = params(rhs.slot, dt)
        pc, oc = params(out.slot, dt)
        return pa, f"{oa} + {lhs.offset}", pb, f"{ob} + {rhs.offset}", pc, f"{oc} + {out.offset}"

    if packed:
        specs += _packed_dot_kernels(name, lhs, out, panels, row_panels, (b, m, k, n), (sab, sam, sak),
                                     (nb, nf, som, son), info, it, t, fma, epilogue, fused)
    elif blocked:
        params = Params()
        pa, oa, pb, ob, pc, oc = common(params)
        rows = range(DOT_ROWS)
        body = [f"  const {it} n0 = get_global_id(0) * 16;", f"  const {it} m0 = get_global_id(1) * 4;",
                f"  const {it} bb = get_global_id(2);",
                f"  const long abase = {oa} + (long)bb * {sab};", f"  const long bbase = {ob} + (long)bb * {sbb} + n0;"]
        body += [f"  {t}16 c{r} = ({t}16)(0);" for r in rows]
        body += [f"  for ({it} kk = 0; kk < {k}; ++kk) {{",
                 f"    const {t}16 bv = vload16(0, {pb} + bbase + (long)kk * {sbk});"]
        body += [f"    c{r} = {fma(f'{pa}[abase + (long)(m0 + {r}) * {sam} + (long)kk * {sak}]', 'bv', f'c{r}')};"
                 for r in rows]
        body += ["  }"]
        body += [f"  vstore16(c{r}, 0, {pc} + {oc} + (long)bb * {m * n} + (long)(m0 + {r}) * {n} + n0);" for r in rows]
        g0 = n16 // 16
        cap = min(16, info.max_work_group_size)
        l0 = max(d for d in (16, 8, 4, 2, 1) if g0 % d == 0 and d <= cap)
        specs.append(KernelSpec(name + "_blk", _kernel(name + "_blk", params, body), params.slots,
                                [((g0, m4 // 4, b), (l0, 1, 1), None)], kind="dot", note="4x16 register-blocked"))
    if narrow:
        specs += _narrow_dot_kernels(name, (lhs, rhs, out), (b, m, k, n), strides, info, it, t)
        return specs
    if kdot:
        params = Params()
        pa, oa, pb, ob, pc, oc = common(params)
        k16 = k - k % 16
        body = [f"  const {it} nn = get_global_id(0);", f"  const {it} mm = get_global_id(1);",
                f"  const {it} bb = get_global_id(2);",
                f"  __global const {t}* ar = {pa} + {oa} + (long)bb * {sab} + (long)mm * {sam};",
                f"  __global const {t}* br = {pb} + {ob} + (long)bb * {sbb} + (long)nn * {sbn};",
                f"  {t}16 s = ({t}16)(0);",
                f"  for ({it} kk = 0; kk < {k16}; kk += 16) s += vload16(0, ar + kk) * vload16(0, br + kk);",
                f"  {t}8 h = s.lo + s.hi; {t}4 g = h.lo + h.hi; {t}2 f = g.lo + g.hi;",
                f"  {t} acc = f.x + f.y;",
                f"  for ({it} kk = {k16}; kk < {k}; ++kk) acc += ar[kk] * br[kk];",
                f"  {pc}[{oc} + (long)bb * {m * n} + (long)mm * {n} + nn] = acc;"]
        specs.append(KernelSpec(name, _kernel(name, params, body), params.slots, [((n, m, b), None, None)],
                                kind="dot", note="16-wide dot products along k"))
        return specs
    params = Params()
    pa, oa = params(lhs.slot, dt)
    pb, ob = params(rhs.slot, dt)
    store = BlockStore(epilogue, out, (nb, nf), params, ("bb", "mm", "nn"), 1)
    body = [f"  const {it} nn = get_global_id(0);", f"  const {it} mm = get_global_id(1);",
            f"  const {it} bb = get_global_id(2);", *store.lines, f"  {t} acc = {c_literal(0, dt)};",
            f"  for ({it} kk = 0; kk < {k}; ++kk)",
            f"    acc += {pa}[{oa} + {lhs.offset} + (long)bb * {sab} + (long)mm * {sam} + (long)kk * {sak}] * "
            f"{pb}[{ob} + {rhs.offset} + (long)bb * {sbb} + (long)kk * {sbk} + (long)nn * {sbn}];",
            *store.block(["acc"], 1)]
    launches: list[Launch] = []
    if packed:
        m6 = m - m % PACK_ROWS
        rows_left = row_panels is not None and row_panels.shape[1] * PACK_ROWS < m
        if m - m6 and n - n16 and (rows_left or not m6):
            launches.append(((n - n16, m - m6, b), None, (n16, m6, 0)))
    elif blocked:
        if m - m4:
            launches.append(((n, m - m4, b), None, (0, m4, 0)))
        if n - n16:
            launches.append(((n - n16, m4, b), None, (n16, 0, 0)))
    else:
        launches.append(((n, m, b), None, None))
    if launches:
        specs.append(KernelSpec(name, _kernel(name, params, body), params.slots, launches, kind="dot",
                                note="scalar corner" if packed else "scalar edges" if blocked else "scalar",
                                **(epilogue.own(out, (lhs.slot, rhs.slot)) if epilogue else {})))
    return specs


#: Rows of ``out`` one work-item of the narrow kernel computes, as one vector per column.
NARROW_ROWS = 8


def _narrow_dot_kernels(name: str, accesses: tuple[Access, Access, Access], sizes: tuple[int, int, int, int],
                        strides: Sequence[int], info: DeviceInfo, it: str, t: str) -> list[KernelSpec]:
    """``out`` with ``n < 16`` columns whose rows lie side by side in ``lhs`` (``h.T @ g``):
    each work-item loads 8 adjacent rows of ``lhs`` at each ``k`` as one vector and keeps one
    vector accumulator per column (PoCL does not vectorise the one-row-per-work-item form
    across work-items: it ran at ~9 GFLOP/s); the last ``m % 8`` rows one per work-item."""
    lhs, rhs, out = accesses
    b, m, k, n = sizes
    sab, _, sak, sbb, sbk, sbn = strides
    dt = out.aval.dtype
    w = NARROW_ROWS
    mw = m - m % w
    specs = []
    for rows, count in ((w, b * (mw // w)), (1, b * (m - mw))):
        if not count:
            continue
        params = Params()
        pa, oa = params(lhs.slot, dt)
        pb, ob = params(rhs.slot, dt)
        pc, oc = params(out.slot, dt)
        per_batch = mw // w if rows == w else m - mw
        first = f"(gid % {per_batch}) * {w}" if rows == w else f"{mw} + gid % {per_batch}"
        vt = f"{t}{w}" if rows == w else t
        load = f"vload{w}(0, ar + (long)kk * {sak})" if rows == w else f"ar[(long)kk * {sak}]"
        body = [f"  const {it} gid = get_global_id(0);", f"  const {it} bb = gid / {per_batch};",
                f"  const {it} mm = {first};",
                f"  __global const {t}* ar = {pa} + {oa} + {lhs.offset} + (long)bb * {sab} + mm;",
                f"  __global const {t}* br = {pb} + {ob} + {rhs.offset} + (long)bb * {sbb};",
                f"  __global {t}* cr = {pc} + {oc} + {out.offset} + (long)bb * {m * n} + (long)mm * {n};"]
        body += [f"  {vt} c{j} = ({vt})({c_literal(0, dt)});" for j in range(n)]
        body += [f"  for ({it} kk = 0; kk < {k}; ++kk) {{", f"    const {vt} a = {load};"]
        for j in range(n):
            bv = f"({vt})(br[(long)kk * {sbk} + {j * sbn}])"
            body.append(f"    c{j} = fma(a, {bv}, c{j});" if dtypes.is_float(dt) else f"    c{j} += a * {bv};")
        body += ["  }"]
        if rows == w:
            body += [f"  cr[{i * n + j}] = c{j}.s{i:x};" for i in range(w) for j in range(n)]
        else:
            body += [f"  cr[{j}] = c{j};" for j in range(n)]
        kname = name + ("_narrow" if rows == w else "_narrow_rows")
        note = (f"{n} columns x {w} adjacent rows per work-item" if rows == w
                else f"last {m - mw} rows, {n} columns per work-item")
        specs.append(KernelSpec(kname, _kernel(kname, params, body), params.slots,
                                exact_launches(count, info, count * k * n * rows), kind="dot", note=note))
    return specs


def _runs(count: int, cap: int, others: int, min_groups: int, least: int = 1) -> tuple[int, int]:
    """(size, number) of equal runs of ``count`` row panels, each at most ``cap`` (and at
    least ``least``) long, enough of them that with ``others`` along the other axes there are
    ``min_groups``. The last run may be short: its missing panels are skipped."""
    number = max(-(-min_groups // max(others, 1)), -(-count // cap), 1)
    size = min(max(-(-count // number), least), max(count, 1))
    return size, -(-count // size)


def _row_group(count: int, cap: int, others: int = 1, min_groups: int = 1) -> int:
    """Row panels per work-group: the largest size up to ``cap`` dividing ``count`` (so one
    launch covers them all) that still leaves ``min_groups`` work-groups, given ``others``
    work-groups along the other axes; 1 when none does. A tail launch of the last
    ``count % 8`` panels had cost 0.45 ms where its share of the work was 0.24 (1024 product)."""
    fits = [d for d in range(1, cap + 1) if count % d == 0 and (count // d) * others >= min_groups]
    return max(fits, default=1)


def fused_panels(sizes: tuple[int, int, int, int], dtype: np.dtype, info: DeviceInfo) -> bool:
    """Whether a packed product (``sizes``: batch, m, k, n) copies each ``rhs`` column panel
    into local memory inside the product kernel (:func:`_local_panel`) rather than in a pack
    kernel before it: on a CPU, for products of at most ``FUSED_MAX_WORK`` multiply-adds, while
    a panel takes at most half the local memory (PoCL's is one block per worker thread that
    stays in its cache). Larger products amortise the pack kernel's launch, and reading a
    panel down its column of ``rhs`` costs more there than the pack kernel's row-wise pass
    (2048^3: 0.92 against 0.95 of numpy's BLAS; 1000^3: 0.98 against 1.02)."""
    b, m, k, n = sizes
    return (DOT_FUSED_PACK and info.is_cpu and b * m * k * n <= FUSED_MAX_WORK
            and k * DOT_COLS * np.dtype(dtype).itemsize * 2 <= info.local_mem_size)


def _local_panel(params: Params, view: Access, p: str, cols: int, it: str,
                 unroll: bool = False) -> tuple[list[str], str]:
    """Lines that copy column panel ``p`` of ``view`` (``rhs`` as ``[b, x, k, 16]``, strided)
    into ``__local bl[k * 16]``, zero beyond its first ``cols`` columns, and how: a 16-wide
    load per line of ``k`` when the columns are adjacent (that loop unrolled ``COPY_UNROLL``
    lines when ``unroll``), 16 x 16 blocks transposed in registers when ``k`` is (``rhs``
    given as its transpose), else element by element."""
    _, _, k, _ = view.shape
    sb, sx, sk, sw = view.strides
    dt = view.aval.dtype
    t = ctype(dt)
    ps, os_ = params(view.slot, dt)
    lines = [f"  __local {t} bl[{k * DOT_COLS}];",
             f"  __global const {t}* bs = {ps} + {os_} + {view.offset} + (long)bb * {sb} + (long)({p}) * {sx};"]
    if cols == DOT_COLS and sw == 1:
        copy = f"  for ({it} kk = 0; kk < {k}; ++kk) vstore16(vload16(0, bs + (long)kk * {sk}), kk, bl);"
        return [*lines, *([f"  #pragma unroll {COPY_UNROLL}"] if unroll and COPY_UNROLL > 1 else []), copy], \
            "16-wide lines"
    k16 = k - k % 16 if sk == 1 and cols == DOT_COLS else 0
    if k16:
        lines.append(f"  for ({it} kc = 0; kc < {k16}; kc += 16) {{")
        lines += [f"    const {t}16 v{j} = vload16(0, bs + {j * sw} + kc);" for j in range(DOT_COLS)]
        lines += [f"    vstore16(({t}16)({', '.join(f'v{j}.s{i:x}' for j in range(DOT_COLS))}), kc + {i}, bl);"
                  for i in range(16)]
        lines.append("  }")
    zero = c_literal(0, dt)
    lines.append(f"  for ({it} kk = {k16}; kk < {k}; ++kk) {{")
    lines += [f"    bl[kk * {DOT_COLS} + {j}] = {f'bs[(long)kk * {sk} + {j * sw}]' if j < cols else zero};"
              for j in range(DOT_COLS)]
    return [*lines, "  }"], "16 x 16 blocks transposed in registers" if k16 else "element by element"


def _packed_dot_kernels(name: str, lhs: Access, out: Access, panels: Access, row_panels: Access | None,
                        sizes: tuple[int, int, int, int], lstrides: tuple[int, int, int],
                        ostrides: tuple[int, int, int, int], info: DeviceInfo, it: str, t: str,
                        fma: Callable[[str, str, str], str], epilogue: Epilogue | None = None,
                        fused: bool = False) -> list[KernelSpec]:
    """The 6x16 kernel over the packed ``rhs`` and ``lhs`` (packed into ``row_panels``, or read
    in place when None: rows contiguous along ``k``); for the last ``n % 16`` columns (all of
    them when ``n < 16``) the same kernel on the zero-padded last panel storing only those
    columns, as one more column panel of the launch when there are whole panels (one edge
    launch fewer; the fused kernel keeps a launch of its own). The last ``m % 6`` rows: one more
    row panel that starts at ``m - 6`` and stores only its last rows, read in place or packed
    into one more panel of ``row_panels`` (:func:`overlap_row_panel`); with packed rows and no
    such panel, one work-item per column panel reading ``lhs`` where it lies. ``out`` may be
    strided (a transposed product stores ``out.T``): 16-wide stores when its columns are
    adjacent, else one store per element.
    ``ostrides``: ``out``'s batch and row axis counts, then its row and column strides. An
    ``epilogue`` runs on each row of a block before the store (the overlapping row panel
    neither loads nor stores the rows it does not own).

    ``fused``: ``panels`` is ``rhs`` itself seen as ``[b, n // 16, k, 16]`` (:func:`dot_panels`'
    view), and each work-item copies its column panel into local memory (:func:`_local_panel`)
    and computes a run of row panels from it, the last ``m % 6`` packed rows included: one
    launch where a pack kernel and the product were two. PoCL often runs the second of two
    chained kernels on one worker thread for a while (its other worker still asleep): a 512
    product went from 4.0 to 2.6 ms."""
    b, m, k, n = sizes
    sab, sam, sak = lstrides
    nb, nf, som, son = ostrides
    unroll = DOT_UNROLL > 1 and b * m * k * n >= DOT_UNROLL_MIN_WORK
    dt = out.aval.dtype
    g, n16 = m // PACK_ROWS, n - n % DOT_COLS
    panels_n = n16 // DOT_COLS
    rest = m - g * PACK_ROWS
    overlap = bool(rest) and g > 0 and (row_panels is None or row_panels.shape[1] > g)
    specs = []

    def block(params: Params, rows: int, a_of: Callable[[Params], tuple[list[str], str]], row0: str,
              cols: int, guard: Callable[[int], str | None], edge: int = 0) -> list[str]:
        a_lines, a_load = a_of(params)
        store = BlockStore(epilogue, out, (nb, nf), params, ("bb", "row0", f"p * {DOT_COLS}"), DOT_COLS)
        body = [f"  const long row0 = {row0};", *a_lines, *store.lines]
        body += [f"  {t}16 c{r} = ({t}16)(0);" for r in range(rows)]
        body += [*([f"  #pragma unroll {DOT_UNROLL}"] if unroll else []),
                 f"  for ({it} kk = 0; kk < {k}; ++kk) {{", f"    const {t}16 bv = vload16(kk, bq);"]
        body += [f"    c{r} = {fma(a_load.format(r=r), 'bv', f'c{r}')};" for r in range(rows)]
        body += ["  }"]
        accs = [f"c{r}" for r in range(rows)]
        if edge:
            return body + [f"  if (p < {panels_n}) {{", *store.block(accs, cols, guard), "  } else {",
                           *store.block(accs, edge, guard), "  }"]
        return body + store.block(accs, cols, guard)

    def kernel(kname: str, rows: int, a_of: Callable[[Params], tuple[list[str], str]], row0: str,
               launches: list[Launch], note: str, cols: int = DOT_COLS, run: int = 1,
               last_rows: bool = False, edge: int = 0) -> KernelSpec:
        params = Params()
        body = [f"  const {it} p = get_global_id(0);", f"  const {it} bb = get_global_id(2);"]
        if fused:
            copy, how = _local_panel(params, panels, "p", cols, it, unroll)
            body += [*copy, f"  __local const {t}* bq = bl;"]
            note = note.replace("copied to local memory", f"copied to local memory ({how})")
        else:
            pp, op = params(panels.slot, dt)
            body.append(f"  __global const {t}* bq = {pp} + {op} + {panels.offset} + (long)bb * {panels.strides[0]} "
                        f"+ (long)p * {k * DOT_COLS};")
        guarded = overlap and rows == PACK_ROWS
        guard = (lambda r: f"rb < {g}" if guarded and r < PACK_ROWS - rest else None)
        inner = block(params, rows, a_of, row0, cols, guard, edge)
        if fused:
            body += [f"  for ({it} rr = 0; rr < {run}; ++rr) {{", f"  const {it} rb = get_global_id(1) * {run} + rr;",
                     *([f"  if (rb >= {row_count}) break;"] if row_count % run else []), *inner, "  }"]
            if last_rows:
                body += [f"  if (get_global_id(1) == {runs - 1}) {{",
                         *block(params, rest, strided_a, str(g * PACK_ROWS), cols, lambda r: None), "  }"]
        else:
            padded = launches[0][0][1] > row_count
            body += [f"  const {it} rb = get_global_id(1);", *([f"  if (rb >= {row_count}) return;"] if padded else []),
                     *inner]
        operands = (panels.slot, lhs.slot if row_panels is None or a_of is strided_a else row_panels.slot)
        if last_rows:
            operands += (lhs.slot,)
        return KernelSpec(kname, _kernel(kname, params, body), params.slots, launches, kind="dot", note=note,
                          **(epilogue.own(out, operands) if epilogue else {}))

    def packed_a(params: Params) -> tuple[list[str], str]:
        if row_panels is None:
            pa, oa = params(lhs.slot, dt)
            return ([f"  __global const {t}* ar = {pa} + {oa} + {lhs.offset} + (long)bb * {sab} + row0 * {sam};"],
                    f"ar[(long){{r}} * {sam} + kk]")
        pa, oa = params(row_panels.slot, dt)
        return ([f"  __global const {t}* aq = {pa} + {oa} + {row_panels.offset} + (long)bb * {row_panels.strides[0]} "
                 f"+ (long)rb * {k * PACK_ROWS};"], f"aq[kk * {PACK_ROWS} + {{r}}]")

    def strided_a(params: Params) -> tuple[list[str], str]:
        pa, oa = params(lhs.slot, dt)
        return ([f"  __global const {t}* ar = {pa} + {oa} + {lhs.offset} + (long)bb * {sab} + row0 * {sam};"],
                f"ar[(long){{r}} * {sam} + (long)kk * {sak}]")

    row_count = g + 1 if overlap else g
    row0 = f"rb < {g} ? (long)rb * {PACK_ROWS} : {m - PACK_ROWS}" if overlap else f"(long)rb * {PACK_ROWS}"
    operands = "both operands packed" if row_panels is not None else "rhs packed, lhs rows read in place"
    tail = f", the last {rest} rows from a panel at row {m - PACK_ROWS}" if overlap else ""
    last_rows = fused and bool(rest) and not overlap
    if fused:
        run, runs = _runs(row_count, FUSED_GROUP, b * (panels_n + (n > n16)), DOT_GROUPS_PER_UNIT * info.compute_units,
                          FUSED_MIN_RUN)
        lhs_how = "lhs packed" if row_panels is not None else "lhs rows read in place"
        how = (f"rhs panels copied to local memory, {lhs_how}, {run} row panels per work-item{tail}"
               + (f", the last {rest} rows by the last work-item of each panel" if last_rows else ""))
        for kname, p0, count, cols in ((name + "_blk", 0, panels_n, DOT_COLS), (name + "_cols", panels_n, 1, n - n16)):
            if count and cols and runs:
                launch: Launch = ((count, runs, b), (1, 1, 1), (p0, 0, 0) if p0 else None)
                note = f"{PACK_ROWS}x{DOT_COLS} register-blocked, {how}" \
                    + ("" if cols == DOT_COLS else f"; the last {cols} columns, zero-padded")
                specs.append(kernel(kname, PACK_ROWS, packed_a, row0, [launch], note, cols, run,
                                    last_rows and cols == DOT_COLS))
        return specs
    cols = n - n16
    edge = cols if panels_n else 0
    columns = panels_n + (1 if edge else 0)
    lp = _divisor(columns, min(DOT_GROUP[0], info.max_work_group_size))
    lm, groups = _runs(row_count, max(1, min(DOT_GROUP[1], info.max_work_group_size // lp)),
                       b * (columns // lp), DOT_GROUPS_PER_UNIT * info.compute_units)
    grid: list[Launch] = [((columns, lm * groups, b), (lp, lm, 1), None)]
    if row_count and panels_n:
        specs.append(kernel(name + "_blk", PACK_ROWS, packed_a, row0, grid,
                            f"{PACK_ROWS}x{DOT_COLS} register-blocked, {operands}, "
                            f"work-groups of {lp}x{lm} panels{tail}"
                            + (f", the last {cols} columns from the zero-padded panel" if edge else ""),
                            edge=edge))
    if row_count and cols and not edge:
        lc = _row_group(row_count, min(8, info.max_work_group_size))
        specs.append(kernel(name + "_cols", PACK_ROWS, packed_a, row0,
                            [((1, row_count, b), (1, lc, 1), (panels_n, 0, 0))],
                            f"last {cols} columns from the zero-padded panel", cols))
    if rest and panels_n and not overlap:
        lt = _divisor(panels_n, min(16, info.max_work_group_size))
        specs.append(kernel(name + "_rows", rest, strided_a, str(g * PACK_ROWS),
                            [((panels_n, 1, b), (lt, 1, 1), None)], f"last {rest} rows, {rest}x{DOT_COLS} blocks"))
    return specs


def _tile_operands(lhs: Access, rhs: Access, out: Access, batch_strides: tuple[int, int],
                   it: str) -> tuple[Params, tuple[str, str], list[str]]:
    """A tiled product's parameters, ``out``'s (pointer, offset) names and the lines pointing
    ``A`` and ``B`` at batch ``bb``'s operands (``bb`` the third global index)."""
    dt = out.aval.dtype
    t = ctype(dt)
    params = Params()
    pa, oa = params(lhs.slot, dt)
    pb, ob = params(rhs.slot, dt)
    pc, oc = params(out.slot, dt)
    sab, sbb = batch_strides
    return params, (pc, oc), [f"  const {it} bb = get_global_id(2);",
                              f"  __global const {t}* A = {pa} + {oa} + {lhs.offset} + (long)bb * {sab};",
                              f"  __global const {t}* B = {pb} + {ob} + {rhs.offset} + (long)bb * {sbb};"]


def _blocked_tile_dot_kernel(name: str, lhs: Access, rhs: Access, out: Access, sizes: tuple[int, int, int, int],
                             strides: tuple, info: DeviceInfo, it: str) -> KernelSpec | None:
    """The GPU matmul for products of at least one 32 x 32 tile: work-groups of 16 x 16
    work-items stage a ``16R``-row slice of ``lhs`` and a ``16R``-column slice of ``rhs``, 16
    steps of ``k`` at a time, in local memory; each work-item accumulates ``R x R`` outputs in
    registers (rows ``ty + 16i``, columns ``tx + 16j``: neighbouring work-items read adjacent
    words of local memory and store adjacent columns). None when the device's work-group or
    local memory is too small, or the product is smaller than one tile (then
    :func:`tiled_dot_kernel`). Loads past the edges read zeros; stores are guarded."""
    b, m, k, n = sizes
    sab, sam, sak, sbb, sbk, sbn = strides
    dt = out.aval.dtype
    item = np.dtype(dt).itemsize
    if info.max_work_group_size < 256 or min(m, n) < 32:
        return None
    fits = [r for r in BLOCK_WORK if 16 * (32 * r + 1) * item <= info.local_mem_size]
    if not fits:
        return None
    groups = lambda r: b * -(-m // (16 * r)) * -(-n // (16 * r))  # noqa: E731
    r = next((r for r in fits if groups(r) >= info.compute_units), fits[-1])
    tile = 16 * r
    t = ctype(dt)
    params, (pc, oc), operands = _tile_operands(lhs, rhs, out, (sab, sbb), it)
    zero = c_literal(0, dt)
    body = [f"  __local {t} As[16][{tile + 1}];", f"  __local {t} Bs[16][{tile}];",
            f"  const {it} tx = get_local_id(0);", f"  const {it} ty = get_local_id(1);",
            f"  const {it} tid = ty * 16 + tx;",
            f"  const {it} c0 = get_group_id(0) * {tile};", f"  const {it} r0 = get_group_id(1) * {tile};",
            *operands]
    body += [f"  {t} acc{i}_{j} = {zero};" for i in range(r) for j in range(r)]
    body += [f"  for ({it} t0 = 0; t0 < {k}; t0 += 16) {{"]
    for q in range(r):
        body += [f"    {{ const {it} e = tid + {256 * q};",
                 f"      const {it} ar = r0 + e / 16, ak = t0 + e % 16;",
                 f"      As[e % 16][e / 16] = (ar < {m} && ak < {k}) ? "
                 f"A[(long)ar * {sam} + (long)ak * {sak}] : {zero};",
                 f"      const {it} bk = t0 + e / {tile}, bc = c0 + e % {tile};",
                 f"      Bs[e / {tile}][e % {tile}] = (bk < {k} && bc < {n}) ? "
                 f"B[(long)bk * {sbk} + (long)bc * {sbn}] : {zero}; }}"]
    body += ["    barrier(CLK_LOCAL_MEM_FENCE);", "    for (int q = 0; q < 16; ++q) {"]
    body += [f"      const {t} a{i} = As[q][ty + {16 * i}];" for i in range(r)]
    body += [f"      const {t} b{j} = Bs[q][tx + {16 * j}];" for j in range(r)]
    body += [f"      acc{i}_{j} += a{i} * b{j};" for i in range(r) for j in range(r)]
    body += ["    }", "    barrier(CLK_LOCAL_MEM_FENCE);", "  }"]
    for i in range(r):
        for j in range(r):
            row, col = f"(r0 + ty + {16 * i})", f"(c0 + tx + {16 * j})"
            body.append(f"  if ({row} < {m} && {col} < {n}) "
                        f"{pc}[{oc} + {out.offset} + (long)bb * {m * n} + (long){row} * {n} + {col}] = acc{i}_{j};")
    grid = (-(-n // tile) * 16, -(-m // tile) * 16, b)
    return KernelSpec(name + "_tiled", _kernel(name + "_tiled", params, body), params.slots,
                      [(grid, (16, 16, 1), None)], kind="dot",
                      note=f"local-memory tiles {tile}x{tile}x16, {r}x{r} outputs per work-item in registers")


def tiled_dot_kernel(name: str, lhs: Access, rhs: Access, out: Access, sizes: tuple[int, int, int, int],
                     strides: tuple, info: DeviceInfo, it: str) -> KernelSpec:
    """The GPU matmul: work-groups of ``tile x tile/work`` work-items stage ``tile x tile``
    blocks of both operands in local memory; each work-item accumulates ``work`` outputs of
    one column. The tile is the largest of 16/8/4 the device's work-group limit and local
    memory admit; loads and stores past the edges are guarded (cheap on GPUs)."""
    b, m, k, n = sizes
    sab, sam, sak, sbb, sbk, sbn = strides
    dt = out.aval.dtype
    t = ctype(dt)
    item = np.dtype(dt).itemsize
    tile = next((ts for ts in (TILE, 8, 4) if ts * (ts // min(TILE_WORK, ts)) <= info.max_work_group_size
                 and 2 * ts * ts * item <= info.local_mem_size), 1)
    work = min(TILE_WORK, tile)
    rs = tile // work
    params, (pc, oc), operands = _tile_operands(lhs, rhs, out, (sab, sbb), it)
    zero = c_literal(0, dt)
    body = [f"  __local {t} As[{tile}][{tile}];", f"  __local {t} Bs[{tile}][{tile}];",
            f"  const {it} col = get_local_id(0);", f"  const {it} row = get_local_id(1);",
            f"  const {it} gc = get_group_id(0) * {tile} + col;", f"  const {it} gr = get_group_id(1) * {tile};",
            *operands]
    body += [f"  {t} acc{w} = {zero};" for w in range(work)]
    body += [f"  for ({it} t0 = 0; t0 < {k}; t0 += {tile}) {{"]
    for w in range(work):
        r = f"(row + {w * rs})"
        body += [f"    As[{r}][col] = (gr + {r} < {m} && t0 + col < {k}) ? "
                 f"A[(long)(gr + {r}) * {sam} + (long)(t0 + col) * {sak}] : {zero};",
                 f"    Bs[{r}][col] = (t0 + {r} < {k} && gc < {n}) ? "
                 f"B[(long)(t0 + {r}) * {sbk} + (long)gc * {sbn}] : {zero};"]
    body += ["    barrier(CLK_LOCAL_MEM_FENCE);", f"    for (int q = 0; q < {tile}; ++q) {{",
             f"      const {t} bv = Bs[q][col];"]
    body += [f"      acc{w} += As[row + {w * rs}][q] * bv;" for w in range(work)]
    body += ["    }", "    barrier(CLK_LOCAL_MEM_FENCE);", "  }"]
    body += [f"  if (gr + row + {w * rs} < {m} && gc < {n}) "
             f"{pc}[{oc} + {out.offset} + (long)bb * {m * n} + (long)(gr + row + {w * rs}) * {n} + gc] = acc{w};"
             for w in range(work)]
    grid = ((-(-n // tile)) * tile, (-(-m // tile)) * rs, b)
    return KernelSpec(name + "_tiled", _kernel(name + "_tiled", params, body), params.slots,
                      [(grid, (tile, rs, 1), None)], kind="dot",
                      note=f"local-memory tiles {tile}x{tile}, {work} outputs per work-item")


# --- convolution ----------------------------------------------------------------------------------


def conv_kernel(name: str, lhs: Access, rhs: Access, out: Access, p: dict, info: DeviceInfo,
                idx_type: str) -> KernelSpec:
    """Direct convolution: one work-item per output element loops over (c, kh, kw); input
    dilation and padding become index tests, so nothing is materialised."""
    params = Params()
    dt = out.aval.dtype
    t = ctype(dt)
    it = idx_type
    _, c, h, w = lhs.shape
    _, _, kh, kw = rhs.shape
    (sh, sw), ((plh, _), (plw, _)) = p["window_strides"], p["padding"]
    (ldh, ldw), (rdh, rdw) = p["lhs_dilation"], p["rhs_dilation"]
    em = Emitter(it, {}, lambda v: None, params)
    em.lines.append(f"  const {it} gid = get_global_id(0);")
    ni, oi, ohi, owi = em.set_base("gid", out.shape)
    pa, oa = params(lhs.slot, dt)
    pb, ob = params(rhs.slot, dt)
    pc, oc = params(out.slot, dt)
    sa, sb = lhs.strides, rhs.strides
    body = em.lines + [
        f"  {t} acc = {c_literal(0, dt)};",
        f"  for ({it} ky = 0; ky < {kh}; ++ky) {{",
        f"    const {it} py = {ohi} * {sh} + ky * {rdh} - ({plh});",
        f"    if (py < 0 || py % {ldh} != 0 || py / {ldh} >= {h}) continue;",
        f"    for ({it} kx = 0; kx < {kw}; ++kx) {{",
        f"      const {it} px = {owi} * {sw} + kx * {rdw} - ({plw});",
        f"      if (px < 0 || px % {ldw} != 0 || px / {ldw} >= {w}) continue;",
        f"      for ({it} cc = 0; cc < {c}; ++cc)",
        f"        acc += {pa}[{oa} + {lhs.offset} + (long){ni} * {sa[0]} + (long)cc * {sa[1]} + "
        f"(long)(py / {ldh}) * {sa[2]} + (long)(px / {ldw}) * {sa[3]}] * "
        f"{pb}[{ob} + {rhs.offset} + (long){oi} * {sb[0]} + (long)cc * {sb[1]} + (long)ky * {sb[2]} + "
        f"(long)kx * {sb[3]}];",
        "    }",
        "  }",
        f"  {pc}[{oc} + {out.offset} + gid] = acc;"]
    return KernelSpec(name, _kernel(name, params, body), params.slots, exact_launches(out.aval.size, info),
                      kind="conv", note="direct")


# --- scatter_add ------------------------------------------------------------------------------------


def _normalized_index(raw: str, n: int) -> str:
    """C for an index into an axis of ``n``: negative ones counted from the end, then clamped
    (``take``'s and ``scatter_add``'s rule)."""
    return f"clamp((long){raw} < 0 ? (long){raw} + {n}L : (long){raw}, 0L, {max(n - 1, 0)}L)"


def scatter_order(idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """For indices known at compile time: the positions of ``idx`` sorted by the output row
    they name (stably, so in index order within a row) and each row's range in that order."""
    flat = _normalize_indices(np.asarray(idx, np.int64).reshape(-1), n)
    order = np.argsort(flat, kind="stable").astype(np.int64)
    return order, np.searchsorted(flat[order], np.arange(n + 1)).astype(np.int64)


def scatter_kernel(name: str, upd: Access, idx: Access, out: Access, axis: int, info: DeviceInfo,
                   idx_type: str, order: tuple[Access, Access] | None = None, sorted_here: bool = False) -> KernelSpec:
    """Deterministic scatter-add: one work-item per output element sums the updates whose index
    names its row, in index order (no atomics). With ``order`` (:func:`scatter_order` of
    indices known at compile time, or ``sorted_here`` by :func:`scatter_sort_kernels`) it
    reads only those updates, O(output size + updates); otherwise it scans every index,
    O(output size x number of indices)."""
    params = Params()
    dt = out.aval.dtype
    it = idx_type
    em = Emitter(it, {}, lambda v: None, params)
    em.lines.append(f"  const {it} gid = get_global_id(0);")
    oidx = em.set_base("gid", out.shape)
    n = out.shape[axis]
    nidx = idx.aval.size
    if order is not None:
        when = "sorted on the device" if sorted_here else "known at compile time"
        return _ordered_scatter(name, upd, idx, out, axis, order, em, oidx, info, when)
    if out.aval.size > n:
        return _row_scan_scatter(name, upd, idx, out, axis, info, it)
    pre = em.lines
    em.lines = []
    ii = em.unravel("s", idx.shape, "z")
    raw = em.load(idx, ii)
    uidx = tuple(oidx[:axis]) + ii + tuple(oidx[axis + 1:])
    u = em.load(upd, uidx)
    inner = em.lines
    norm = _normalized_index(raw, n)
    pc, oc = params(out.slot, dt)
    acc_init = c_literal(0, dt)
    combine = "acc | " if dt == dtypes.bool_ else "acc + "
    body = pre + [f"  {ctype(dt)} acc = {acc_init};", f"  for ({it} s = 0; s < {nidx}; ++s) {{"]
    body += ["  " + line for line in inner]
    body += [f"    if ({norm} == (long){oidx[axis]}) acc = {combine}{u};", "  }",
             f"  {pc}[{oc} + {out.offset} + gid] = acc;"]
    return KernelSpec(name, _kernel(name, params, body), params.slots, exact_launches(out.aval.size, info),
                      kind="scatter", note="deterministic scan")


def window_update_kernel(name: str, upd: Access, starts: Sequence[Access], out: Access, mode: str,
                         info: DeviceInfo, idx_type: str) -> KernelSpec:
    """``dynamic_update_slice``'s window: one work-item per element of ``upd`` writes it into
    ``out`` (already holding the operand) at the start indices, read from the device and
    clamped so the window fits (``mode="clamp"``) or, negative ones counted from the end,
    not written when one is out of range (``"drop"``)."""
    params = Params()
    it = idx_type
    em = Emitter(it, {}, lambda v: None, params)
    em.lines.append(f"  const {it} gid = get_global_id(0);")
    widx = em.set_base("gid", upd.shape)
    terms, inside = [], []
    for st, w, d, n, stride in zip(starts, widx, out.shape, upd.shape, out.strides):
        raw = em.fresh("long", f"(long){em.load(st, ())}")
        if mode == "drop":
            raw = em.fresh("long", f"{raw} < 0 ? {raw} + {d}L : {raw}")
        inside.append(f"({raw} >= 0 && {raw} <= {d - n}L)")
        terms.append(f"(clamp({raw}, 0L, {d - n}L) + {w}) * {stride}")
    if mode == "drop" and inside:
        em.lines.append(f"  if (!({' && '.join(inside)})) return;")
    value = em.load(upd, widx)
    pc, oc = params(out.slot, out.aval.dtype)
    body = em.lines + [f"  {pc}[{oc} + {out.offset} + {' + '.join(terms) or '0'}] = {value};"]
    return KernelSpec(name, _kernel(name, params, body), params.slots, exact_launches(upd.aval.size, info),
                      kind="copy", note=f"dynamic_update_slice window ({mode})")


#: Output elements of one row (the axes other than the scattered one, flattened) that one
#: work-item of the scanning scatter accumulates.
SCATTER_CHUNK = 32


def _row_scan_scatter(name: str, upd: Access, idx: Access, out: Access, axis: int, info: DeviceInfo,
                      it: str) -> KernelSpec:
    """:func:`scatter_kernel` for indices computed on the device: one work-item per output row
    and run of ``SCATTER_CHUNK`` of its elements scans the indices once and adds each matching
    update to its run's accumulators, so an index is compared once per run rather than once
    per element (sums in index order, as the one-element form)."""
    params = Params()
    dt = out.aval.dtype
    t = ctype(dt)
    shape = out.shape
    n = shape[axis]
    pre_shape, post_shape = shape[:axis], shape[axis + 1:]
    post = _prod(post_shape)
    size = _prod(pre_shape) * post
    c = min(SCATTER_CHUNK, size)
    chunks = -(-size // c)
    em = Emitter(it, {}, lambda v: None, params)
    ii = em.unravel("s", idx.shape, "z")
    raw = em.load(idx, ii)
    scan = em.lines
    em.lines = []
    pidx = em.unravel("p", pre_shape, "a") if pre_shape else ()
    qidx = em.unravel("q", post_shape, "b") if post_shape else ()
    u = em.load(upd, pidx + ii + qidx)
    element = em.lines
    norm = _normalized_index(raw, n)
    pc, oc = params(out.slot, dt)
    combine = " | " if dt == dtypes.bool_ else " + "
    run = [f"    const {it} e = e0 + k;", *([f"    if (e >= {size}) break;"] if size % c else []),
           f"    const {it} p = e / {post};", f"    const {it} q = e % {post};"]
    body = [f"  const {it} gid = get_global_id(0);", f"  const {it} r = gid / {chunks};",
            f"  const {it} e0 = (gid % {chunks}) * {c};", f"  {t} acc[{c}];",
            f"  for (int k = 0; k < {c}; ++k) acc[k] = {c_literal(0, dt)};",
            f"  for ({it} s = 0; s < {idx.aval.size}; ++s) {{", *scan, f"    if ({norm} != (long)r) continue;",
            f"    for (int k = 0; k < {c}; ++k) {{", *["  " + line for line in run],
            *["    " + line for line in element], f"      acc[k] = acc[k]{combine}{u};", "    }", "  }",
            f"  for (int k = 0; k < {c}; ++k) {{", *run,
            f"    {pc}[{oc} + {out.offset} + (p * {n} + r) * {post} + q] = acc[k];", "  }"]
    return KernelSpec(name, _kernel(name, params, body), params.slots, exact_launches(n * chunks, info),
                      kind="scatter", note=f"deterministic scan, {c} elements of a row per work-item")


#: A scatter whose indices are computed on the device sorts them there first
#: (:func:`scatter_sort_kernels`) when the scan would compare each index with more than this
#: many runs of output elements and there are more than this many indices: the scan is
#: O(runs x indices), the sort O(indices x log indices + rows) in log2(indices / 16) + 2
#: launches. A 10000 x 64 embedding gradient of 2048 tokens: 26.6 ms scanning, 2.2 sorting;
#: 100000 single-element rows, as many indices: 5.3 s scanning, 3.6 ms of sort kernels.
SCATTER_SORT_MIN = 256
#: Indices one work-item of the sort's first pass orders in registers (insertion sort), and
#: outputs one work-item of a merge pass writes (a power of two, at most ``2 * SORT_RUN``, so
#: a work-item's outputs never straddle two merges).
SORT_RUN, MERGE_RUN = 16, 32


def scatter_runs(shape: tuple[int, ...], axis: int) -> int:
    """Work-items of the scanning scatter into ``shape`` along ``axis``: one per output
    element of a one-row-wide output, else one per row and run of ``SCATTER_CHUNK`` of its
    elements (:func:`_row_scan_scatter`)."""
    n = shape[axis]
    size = _prod(shape) // n if n else 0
    return n if size <= 1 else n * -(-size // min(SCATTER_CHUNK, size))


def scatter_sorts(shape: tuple[int, ...], axis: int, nidx: int) -> bool:
    """Whether a scatter with indices computed on the device sorts them first."""
    return nidx > SCATTER_SORT_MIN and scatter_runs(shape, axis) > SCATTER_SORT_MIN


def scatter_sort_kernels(name: str, idx: Access, n: int, scratch: Callable[[ShapedArray], Access],
                         info: DeviceInfo, it: str) -> tuple[list[KernelSpec], tuple[Access, Access]]:
    """Kernels that order the ``m`` indices ``idx`` by the row of an axis of ``n`` they name
    (normalised as ``take`` does), stably, and find each row's range in that order; and the
    (positions, ranges) they leave, which :func:`scatter_kernel` reads as its ``order``. A
    merge sort: ``SORT_RUN`` indices per work-item by insertion, then one launch per doubling
    of the sorted runs, each work-item merging ``MERGE_RUN`` outputs from where one binary
    search puts them on the merge path; then each sorted position writes the ranges of the rows
    that begin there. Stable, so each row's updates are summed in index order, as with indices
    known at compile time."""
    m = idx.aval.size
    kt = np.dtype(np.int32 if it == "int" else np.int64)
    keys = [scratch(ShapedArray((m,), kt)) for _ in range(2)]
    pos = [scratch(ShapedArray((m,), kt)) for _ in range(2)]
    ranges = scratch(ShapedArray((n + 1,), kt))
    params = Params()
    em = Emitter(it, {}, lambda v: None, params)
    raw = em.load(idx, em.unravel("s", idx.shape, "z"))
    load = em.lines
    (pk, ok), (pq, oq) = params(keys[0].slot, kt), params(pos[0].slot, kt)
    r = SORT_RUN
    count = f"({m} - s0 < {r} ? {m} - s0 : {r})" if m % r else str(r)
    body = [f"  const {it} s0 = get_global_id(0) * {r};", f"  const {it} c = {count};",
            f"  {it} kk[{r}], pp[{r}];", f"  for ({it} t = 0; t < c; ++t) {{", f"    const {it} s = s0 + t;",
            *["  " + line for line in load],
            f"    const {it} key = ({it}){_normalized_index(raw, n)};", f"    {it} u = t;",
            "    for (; u > 0 && kk[u - 1] > key; --u) { kk[u] = kk[u - 1]; pp[u] = pp[u - 1]; }",
            "    kk[u] = key; pp[u] = s;", "  }",
            f"  for ({it} t = 0; t < c; ++t) {{ {pk}[{ok} + s0 + t] = kk[t]; {pq}[{oq} + s0 + t] = pp[t]; }}"]
    runs = -(-m // r)
    specs = [KernelSpec(name + "_runs", _kernel(name + "_runs", params, body), params.slots,
                        exact_launches(runs, info), kind="sort", note=f"sort runs of {r} indices by row")]
    src, width, c = 0, r, MERGE_RUN
    while width < m:
        params = Params()
        (ki, oki), (pi, opi) = params(keys[src].slot, kt), params(pos[src].slot, kt)
        (ko, oko), (po, opo) = params(keys[1 - src].slot, kt), params(pos[1 - src].slot, kt)
        a_at, b_at = f"{ki}[{oki} + lo + {{}}]", f"{ki}[{oki} + mid + {{}}]"
        body = [f"  const {it} d0 = get_global_id(0) * {c};", f"  const {it} lo = d0 / {2 * width} * {2 * width};",
                f"  const {it} mid = min(lo + {width}, ({it}){m});",
                f"  const {it} hi = min(lo + {2 * width}, ({it}){m});",
                f"  const {it} na = mid - lo, nb = hi - mid, d = d0 - lo;",
                f"  {it} a = d > nb ? d - nb : 0, b = d < na ? d : na;",
                "  while (a < b) {", f"    const {it} h = (a + b) / 2;",
                f"    if ({a_at.format('h')} <= {b_at.format('d - h - 1')}) a = h + 1; else b = h;", "  }",
                f"  {it} i = a, j = d - a;", f"  const {it} e = min(d0 + {c}, hi);",
                f"  for ({it} o = d0; o < e; ++o) {{",
                f"    const int left = j >= nb || (i < na && {a_at.format('i')} <= {b_at.format('j')});",
                f"    const {it} at = left ? lo + i : mid + j;",
                f"    {ko}[{oko} + o] = {ki}[{oki} + at];", f"    {po}[{opo} + o] = {pi}[{opi} + at];",
                "    if (left) ++i; else ++j;", "  }"]
        kname = f"{name}_merge{width}"
        specs.append(KernelSpec(kname, _kernel(kname, params, body), params.slots, exact_launches(-(-m // c), info),
                                kind="sort", note=f"merge sorted runs of {width}, {c} outputs per work-item"))
        src, width = 1 - src, 2 * width
    params = Params()
    (kf, okf), (pr, opr) = params(keys[src].slot, kt), params(ranges.slot, kt)
    body = [f"  const {it} i = get_global_id(0);", f"  const {it} prev = i > 0 ? {kf}[{okf} + i - 1] : -1;",
            f"  const {it} cur = i < {m} ? {kf}[{okf} + i] : {n};",
            f"  for ({it} r = prev + 1; r <= cur; ++r) {pr}[{opr} + r] = i;"]
    specs.append(KernelSpec(name + "_ranges", _kernel(name + "_ranges", params, body), params.slots,
                            exact_launches(m + 1, info), kind="sort", note="each row's range of sorted indices"))
    return specs, (pos[src], ranges)


def _ordered_scatter(name: str, upd: Access, idx: Access, out: Access, axis: int, order: tuple[Access, Access],
                     em: Emitter, oidx: tuple[str, ...], info: DeviceInfo, when: str) -> KernelSpec:
    """:func:`scatter_kernel` over the rows' own updates (``order``: positions, row ranges)."""
    it = em.idx_type
    dt = out.aval.dtype
    pos, ranges = order
    lo = em.load(ranges, (oidx[axis],))
    hi = em.load(ranges, (f"({oidx[axis]} + 1)",))
    pre = em.lines
    em.lines = []
    q = em.load(pos, ("s",))
    ii = em.unravel(f"(({it}){q})", idx.shape, "z")
    u = em.load(upd, tuple(oidx[:axis]) + ii + tuple(oidx[axis + 1:]))
    inner = em.lines
    pc, oc = em.param_of(out.slot, dt)
    combine = "acc | " if dt == dtypes.bool_ else "acc + "
    body = pre + [f"  {ctype(dt)} acc = {c_literal(0, dt)};", f"  for ({it} s = ({it}){lo}; s < ({it}){hi}; ++s) {{"]
    body += ["  " + line for line in inner]
    body += [f"    acc = {combine}{u};", "  }", f"  {pc}[{oc} + {out.offset} + gid] = acc;"]
    return KernelSpec(name, _kernel(name, em.param_of, body), em.param_of.slots, exact_launches(out.aval.size, info),
                      kind="scatter", note=f"deterministic, each row's updates by an index order {when}")


def canonical_copy_access(a: Access, order: Sequence[int], slot: int, offset: int) -> tuple[Access, Access]:
    """(source view permuted to ``order``, contiguous destination) for a layout copy."""
    shape = tuple(a.shape[d] for d in order)
    src = Access(a.slot, ShapedArray(shape, a.aval.dtype), a.offset, tuple(a.strides[d] for d in order))
    dst = Access(slot, ShapedArray(shape, a.aval.dtype), offset, contiguous(shape))
    return src, dst


def graph_avals(graph: Graph) -> list[ShapedArray]:
    """Every value type of ``graph`` and of the sub-graphs its equations carry."""
    avals = [v.aval for v in graph.invars + graph.constvars]
    for e in graph.eqns:
        avals.extend(o.aval for o in e.outputs)
        for g in e.subgraphs:
            avals.extend(graph_avals(g))
    return avals
