"""``dot_general``: on a CPU, register-blocked kernels over ``rhs`` packed into 16-column
panels (copied inside the product when small, :func:`fused_panels`) and ``lhs`` packed into
6-row panels or read in place, narrow and dot-product forms, scalar edges; elsewhere
local-memory tiled kernels (:func:`tiled_dot_kernel`). The panel copies are in
:mod:`~fungraph.backends.opencl.kernels.copies`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from fungraph import dtypes
from fungraph.backends.opencl.codegen import Access, c_literal, contiguous, ctype, merged_stride
from fungraph.backends.opencl.device import DeviceInfo
from fungraph.backends.opencl.epilogue import BlockStore, Epilogue, kernel_strides
from fungraph.backends.opencl.kernels.spec import (
    KernelSpec,
    Launch,
    Params,
    divisor,
    exact_launches,
    kernel_source,
    prod,
)
from fungraph.ir import ShapedArray

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
    b, f, k = (prod([a.shape[d] for d in ds]) for ds in (batch, free, contracting))
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
    b = prod([lhs.shape[d] for d in lb])
    m = prod([lhs.shape[d] for d in lf])
    k = prod([lhs.shape[d] for d in lc])
    n = prod([rhs.shape[d] for d in rf])
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
        specs.append(KernelSpec(name + "_blk", kernel_source(name + "_blk", params, body), params.slots,
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
        specs.append(KernelSpec(name, kernel_source(name, params, body), params.slots, [((n, m, b), None, None)],
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
        specs.append(KernelSpec(name, kernel_source(name, params, body), params.slots, launches, kind="dot",
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
        specs.append(KernelSpec(kname, kernel_source(kname, params, body), params.slots,
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
        return KernelSpec(kname, kernel_source(kname, params, body), params.slots, launches, kind="dot", note=note,
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
    lp = divisor(columns, min(DOT_GROUP[0], info.max_work_group_size))
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
        lt = divisor(panels_n, min(16, info.max_work_group_size))
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
    return KernelSpec(name + "_tiled", kernel_source(name + "_tiled", params, body), params.slots,
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
    return KernelSpec(name + "_tiled", kernel_source(name + "_tiled", params, body), params.slots,
                      [(grid, (tile, rs, 1), None)], kind="dot",
                      note=f"local-memory tiles {tile}x{tile}, {work} outputs per work-item")
