"""Whole loops as one kernel: a ``while`` whose condition reads only scalars, or a ``scan``
without scanned inputs or outputs (what a ``fori_loop`` with static bounds becomes), whose body
is elementwise over its array carries, runs all its iterations inside one kernel launch instead
of a launch (and a predicate readback) per iteration.

Every work-item owns one element of the carries (element ``gid`` of each array carry) and
runs the whole loop for it, keeping its carries in private variables: each iteration evaluates
the condition and the body's scalar equations (identically in every work-item: they read only
scalars, so every work-item runs the same number of iterations), then the body's array
equations at its element. Scalar carries are private too, and work-item 0 stores them at the
end. This is valid because no array value of the body reads another element of a carry: an
equation reading a carry-derived value must be elementwise at that carry's shape, and values
from carries of two shapes never meet (:func:`loop_fits`; ``vmap`` batches a fori loop's
counter beside its wider carries); loop-invariant values (the body's other inputs, scalars)
may still be read through any index map.

A work-group barrier ends each iteration: it synchronises nothing, but makes PoCL run the
work-group's work-items one after another *inside* the iteration loop, a loop it vectorises
(without it the iteration loop sits inside the work-item loop and stays scalar: 2-10x slower
per element for ``exp`` or ``tanh``). The barrier is legal because the trip count is uniform.
One launch covers whole work-groups of the largest carry: a work-item past a carry's last
element computes a copy of that element and stores nothing of it. A work-item that reads an
array only at its own element, and stores its results after the loop, lets a donated input's
buffer take the result (``KernelSpec.own_loads``/``own_stores``, as an elementwise kernel's).

The native CPU engine's ``backends/native/loops.py`` runs the same class of loops the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fungraph.backends.opencl.codegen import Access, ctype, is_fusible
from fungraph.backends.opencl.device import DeviceInfo
from fungraph.backends.opencl.kernels.elementwise import region_emitter
from fungraph.backends.opencl.kernels.spec import KernelSpec, Params, kernel_source, prod
from fungraph.ir import Graph, Literal, Var


def _varying(g: Graph, carries: Sequence[Var]) -> dict[Var, tuple[int, ...]] | None:
    """The values of ``g`` computed from its array carries ``carries``, each with the shape of
    the carries it comes from, or None when an equation is not a kernel expression, or reads
    such a value other than elementwise at that shape (a view, a reduction or a broadcast
    would read other elements; carries of two shapes may not meet)."""
    varying = {v: tuple(v.aval.shape) for v in carries}
    for e in g.eqns:
        if not is_fusible(e):
            return None
        shapes = {varying[a] for a in e.inputs if isinstance(a, Var) and a in varying}
        if not shapes:
            continue
        shape = shapes.pop()
        if shapes or not e.primitive.elementwise or any(o.aval.shape != shape for o in e.outputs):
            return None
        if any(isinstance(a, Var) and a in varying and a.aval.shape != shape for a in e.inputs):
            return None
        varying.update(dict.fromkeys(e.outputs, shape))
    return varying


#: Primitives whose float64 form (the OpenCL library's function) ran 2-3x slower per element
#: inside a loop kernel than in a kernel of its own on PoCL's CPU driver (``tanh``: 60 against
#: 21 ns at 100,000 elements, 60 against 37 us per iteration at 1,000, launches included): its
#: library call there stops the vectoriser that the loop kernel's barrier is for. On PoCL CPU
#: devices, loops computing them on more than ``SLOW_FLOAT64_MAX_ELEMENTS`` elements keep a
#: launch per iteration (at 10 elements the loop kernel took 0.24 us per iteration against 20);
#: other drivers have no such measurement and take the loop kernel.
SLOW_FLOAT64 = frozenset({"tanh"})
SLOW_FLOAT64_MAX_ELEMENTS = 256


def is_pocl_cpu(info: DeviceInfo) -> bool:
    """Whether ``info`` is a CPU device of PoCL ("Portable Computing Language")."""
    platform = info.platform.lower()
    return info.is_cpu and ("portable computing language" in platform or "pocl" in platform)


def slow_float64_loop(body: Graph, n: int, info: DeviceInfo) -> bool:
    """Whether a loop whose body is ``body`` over ``n`` elements runs slower as one kernel on
    ``info``'s device than with a launch per iteration (:data:`SLOW_FLOAT64`)."""
    return is_pocl_cpu(info) and n > SLOW_FLOAT64_MAX_ELEMENTS and any(
        e.primitive.name in SLOW_FLOAT64 and np.dtype(e.outputs[0].aval.dtype) == np.float64 for e in body.eqns)


def loop_fits(cond: Graph | None, body: Graph, nc: int, info: DeviceInfo) -> bool:
    """Whether the loop with ``nc`` carries, ``cond`` (None for a scan) and ``body`` runs as
    one kernel on ``info``'s device (module docstring)."""
    carries = body.invars[:nc]
    if len(body.outvars) != nc or slow_float64_loop(body, max((v.aval.size for v in carries), default=0), info):
        return False
    if _varying(body, [v for v in carries if v.aval.shape != ()]) is None:
        return False
    if any(isinstance(v, Literal) and v.aval.shape != () for v in body.outvars):
        return False
    if cond is not None:
        pred = cond.outvars[0]
        if pred.aval.shape != () or np.dtype(pred.aval.dtype) != np.bool_:
            return False
        touched = _varying(cond, [v for v in cond.invars[:nc] if v.aval.shape != ()])
        if touched is None or any(isinstance(a, Var) and a in touched for e in cond.eqns for a in e.inputs):
            return False
    return True


@dataclass(frozen=True)
class LoopOperands:
    """Where a one-kernel loop reads and writes: the condition's and the body's constant
    inputs (``cond_ins``, ``body_ins``), the constants of the body then of the condition
    (``consts``, one per ``constvar``), the initial
    carries (``init``) and the slots the final carries end in (``out``, contiguous)."""

    cond_ins: Sequence[Access]
    body_ins: Sequence[Access]
    consts: Sequence[Access]
    init: Sequence[Access]
    out: Sequence[Access]


def loop_kernel(name: str, cond: Graph | None, body: Graph, length: int | None, ops: LoopOperands,
                idx_type: str, info: DeviceInfo) -> KernelSpec:
    """The kernel running every iteration of the loop (``cond`` and ``body`` as
    :func:`loop_fits` accepted them; ``length``: a scan's trip count, None for a while) over
    ``ops`` (module docstring)."""
    nc = len(body.outvars)
    params = Params()
    stored: dict[Var, Access] = dict(zip(body.invars[nc:], ops.body_ins))
    stored.update(zip([*body.constvars, *(cond.constvars if cond is not None else [])], ops.consts))
    members = {o: e for e in body.eqns for o in e.outputs}
    if cond is not None:
        stored.update(zip(cond.invars[nc:], ops.cond_ins))
        members.update({o: e for e in cond.eqns for o in e.outputs})
    scalars = [j for j in range(nc) if body.invars[j].aval.shape == ()]
    arrays = [j for j in range(nc) if body.invars[j].aval.shape != () and body.invars[j].aval.size]
    shapes = sorted({tuple(body.invars[j].aval.shape) for j in arrays}, key=lambda sh: -prod(sh))
    n = prod(shapes[0]) if shapes else 1
    em = region_emitter(idx_type, members, stored.get, params)
    it = idx_type
    em.lines += [f"  const {it} wi = get_global_id(0);", f"  const {it} gid = min(wi, ({it}){n - 1});"]
    index: dict[tuple[int, ...], str] = {}
    bases: dict[tuple[int, ...], tuple[str, ...]] = {}
    for k, sh in enumerate(shapes):
        if k == 0:
            index[sh], bases[sh] = "gid", em.set_base("gid", sh)
        else:
            index[sh] = f"g{k}"
            em.lines.append(f"  const {it} g{k} = min(wi, ({it}){prod(sh) - 1});")
            bases[sh] = em.unravel(f"g{k}", sh, f"j{k}_")
    where = {j: tuple(body.invars[j].aval.shape) for j in arrays}
    cond_ins = [*cond.invars[nc:], *cond.constvars] if cond is not None else []
    for v in [*body.invars[nc:], *body.constvars, *cond_ins]:
        if v.aval.shape == ():
            em.value(v, ())
    for j in scalars + arrays:
        v = body.invars[j]
        idx = bases[where[j]] if j in where else ()
        em.lines.append(f"  {ctype(v.aval.dtype)} c{j} = {em.load(ops.init[j], idx)};")
        # a size-1 axis is read at index "0" by a broadcasting operand (``Emitter.operand``)
        for at in {idx, tuple("0" if d == 1 else i for i, d in zip(idx, v.aval.shape))}:
            em.cache[(v, at)] = f"c{j}"
            if cond is not None:
                em.cache[(cond.invars[j], at)] = f"c{j}"
    saved, cache = em.lines, dict(em.cache)
    em.lines = []
    if cond is not None:
        em.lines.append(f"  if (!{em.value(cond.outvars[0], ())}) break;")
    for e in body.eqns:
        if e.outputs[0].aval.shape == ():
            em.value(e.outputs[0], ())
    moved = [j for j in scalars + arrays if body.outvars[j] is not body.invars[j]]
    news = [(j, em.fresh(ctype(body.invars[j].aval.dtype), em.value(body.outvars[j], bases.get(where.get(j), ()))))
            for j in moved]
    em.lines += [f"  c{j} = {t};" for j, t in news]
    em.lines.append("  barrier(CLK_LOCAL_MEM_FENCE);")
    loop = f"  for (long it = 0; it < {length}L; ++it) {{" if cond is None else "  for (;;) {"
    body_lines = em.lines
    em.lines, em.cache = saved, cache
    em.lines += [loop, *("  " + x for x in body_lines), "  }"]
    for sh in shapes:
        em.lines.append(f"  if (wi < {prod(sh)}) {{")
        em.lines += [f"    {store_at(params, ops.out[j], index[sh])} = c{j};" for j in arrays if where[j] == sh]
        em.lines.append("  }")
    if scalars:
        em.lines.append("  if (wi == 0) {")
        em.lines += [f"    {store_at(params, ops.out[j], '')} = c{j};" for j in scalars]
        em.lines.append("  }")
    what = "scan" if cond is None else "while"
    local = group_size(n, info)
    launch = ((-(-n // local) * local,), (local,), None)
    stored_at = {ops.out[j].slot for j in arrays if where[j] == shapes[0] and ops.out[j].offset == 0
                 and ops.out[j].is_contiguous()}
    return KernelSpec(name, kernel_source(name, params, em.lines), params.slots, [launch], kind="loop", warm=False,
                      note=f"every iteration of the {what} inside the kernel, one work-item per element",
                      own_loads=frozenset(slot for slot, own in em.own_loads.items() if own),
                      own_stores=frozenset(stored_at - set(em.own_loads)))


def group_size(n: int, info: DeviceInfo) -> int:
    """The work-group size of a loop over ``n`` elements, launched once over whole work-groups
    (the last one's extra work-items compute a copy of the last element and store nothing): at
    most 256, and on a CPU halved down to 64 until every compute unit gets two work-groups."""
    local = min(256, info.max_work_group_size, max(n, 1))
    while info.is_cpu and local > 64 and -(-n // local) < 2 * info.compute_units:
        local //= 2
    return local


def store_at(params: Params, a: Access, flat: str) -> str:
    """The lvalue of element ``flat`` of the contiguous ``a`` (``""``: its only element)."""
    p, o = params(a.slot, a.aval.dtype)
    return f"{p}[{o} + {a.offset}" + (f" + {flat}]" if flat else "]")
