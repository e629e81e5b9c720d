"""Indexing kernels: deterministic ``scatter_add`` (a scan over the indices, or an order of
them known at compile time or sorted on the device by a merge sort) and
``dynamic_update_slice``'s window write.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from fungraph import dtypes
from fungraph.backends.opencl.codegen import Access, Emitter, c_literal, ctype
from fungraph.backends.opencl.device import DeviceInfo
from fungraph.backends.opencl.kernels.spec import KernelSpec, Params, exact_launches, kernel_source, prod
from fungraph.ir import ShapedArray


def _normalized_index(raw: str, n: int) -> str:
    """C for an index into an axis of ``n``: negative ones counted from the end, then clamped
    (``take``'s and ``scatter_add``'s rule)."""
    return f"clamp((long){raw} < 0 ? (long){raw} + {n}L : (long){raw}, 0L, {max(n - 1, 0)}L)"


def scatter_order(idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """For indices known at compile time: the positions of ``idx`` sorted by the output row
    they name (stably, so in index order within a row) and each row's range in that order."""
    from fungraph.primitives.indexing import _normalize_indices

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
    return KernelSpec(name, kernel_source(name, params, body), params.slots, exact_launches(out.aval.size, info),
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
    return KernelSpec(name, kernel_source(name, params, body), params.slots, exact_launches(upd.aval.size, info),
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
    post = prod(post_shape)
    size = prod(pre_shape) * post
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
    return KernelSpec(name, kernel_source(name, params, body), params.slots, exact_launches(n * chunks, info),
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
    size = prod(shape) // n if n else 0
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
    specs = [KernelSpec(name + "_runs", kernel_source(name + "_runs", params, body), params.slots,
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
        specs.append(KernelSpec(kname, kernel_source(kname, params, body), params.slots,
                                exact_launches(-(-m // c), info),
                                kind="sort", note=f"merge sorted runs of {width}, {c} outputs per work-item"))
        src, width = 1 - src, 2 * width
    params = Params()
    (kf, okf), (pr, opr) = params(keys[src].slot, kt), params(ranges.slot, kt)
    body = [f"  const {it} i = get_global_id(0);", f"  const {it} prev = i > 0 ? {kf}[{okf} + i - 1] : -1;",
            f"  const {it} cur = i < {m} ? {kf}[{okf} + i] : {n};",
            f"  for ({it} r = prev + 1; r <= cur; ++r) {pr}[{opr} + r] = i;"]
    specs.append(KernelSpec(name + "_ranges", kernel_source(name + "_ranges", params, body), params.slots,
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
    return KernelSpec(name, kernel_source(name, em.param_of, body), em.param_of.slots,
                      exact_launches(out.aval.size, info),
                      kind="scatter", note=f"deterministic, each row's updates by an index order {when}")
