"""Direct convolution: one work-item per output element, dilation and padding as index tests.
"""

from __future__ import annotations

from fungraph.backends.opencl.codegen import Access, Emitter, c_literal, ctype
from fungraph.backends.opencl.device import DeviceInfo
from fungraph.backends.opencl.kernels.spec import KernelSpec, Params, exact_launches, kernel_source


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
    return KernelSpec(name, kernel_source(name, params, body), params.slots, exact_launches(out.aval.size, info),
                      kind="conv", note="direct")
