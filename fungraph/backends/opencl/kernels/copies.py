"""Copies: layout copies into panels for the packed products (:func:`pack_kernel`,
:func:`pack_tail_kernel`), several one-dimensional copies merged into one launch
(:func:`merge_copies`), and the permuted view a relayout copies from
(:func:`canonical_copy_access`).
"""

from __future__ import annotations

from collections.abc import Sequence

from fungraph.backends.opencl.codegen import Access, c_literal, contiguous, ctype
from fungraph.backends.opencl.device import DeviceInfo
from fungraph.backends.opencl.kernels.spec import KernelSpec, Params, divisor, exact_launches, kernel_source
from fungraph.ir import ShapedArray


def _copy_spec(name: str, params: Params, per_item: Sequence[str], count: int, info: DeviceInfo, it: str,
               note: str) -> KernelSpec:
    """A one-dimensional copy of ``count`` work-items whose lines ``per_item`` read ``gid``."""
    body = [f"  const {it} gid = get_global_id(0);", *per_item]
    return KernelSpec(name, kernel_source(name, params, body), params.slots, exact_launches(count, info), kind="copy",
                      note=note, per_item=tuple(per_item))


#: Lines of ``k`` one work-item of the row-major panel copy moves (1024 x 1024: 0.55 -> 0.38 ms
#: at best, 0.87 -> 0.56 at median, against 0.32 / 0.47 for a plain copy of the same bytes).
PACK_LINES = 8


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
    rows = 1 if fast_k else divisor(k, PACK_LINES)
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
    return KernelSpec(name, kernel_source(name, params, body), params.slots, exact_launches(start, info), kind="copy",
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


def canonical_copy_access(a: Access, order: Sequence[int], slot: int, offset: int) -> tuple[Access, Access]:
    """(source view permuted to ``order``, contiguous destination) for a layout copy."""
    shape = tuple(a.shape[d] for d in order)
    src = Access(a.slot, ShapedArray(shape, a.aval.dtype), a.offset, tuple(a.strides[d] for d in order))
    dst = Access(slot, ShapedArray(shape, a.aval.dtype), offset, contiguous(shape))
    return src, dst
