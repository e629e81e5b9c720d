"""Whole loops as one kernel: a ``while`` whose condition reads only scalars, or a ``scan``
without scanned inputs or outputs (what a ``fori_loop`` with static bounds becomes), whose body
is elementwise over its array carries, runs all its iterations inside one kernel launch instead
of a launch (and a predicate readback) per iteration.

Every work-item owns one element of the carries' one shape and runs the whole loop for it,
keeping its carries in private variables: each iteration evaluates the condition and the body's
scalar equations (identically in every work-item: they read only scalars, so every work-item
runs the same number of iterations), then the body's array equations at its element. Scalar
carries are private too, and work-item 0 stores them at the end. This is valid because no
array value of the body reads another element of a carry: an equation reading a carry-derived
value must be elementwise at the carries' shape (:func:`loop_fits`); loop-invariant values
(the body's other inputs, scalars) may still be read through any index map. A work-group
barrier ends each iteration: it synchronises nothing, but makes PoCL run the work-group's
work-items one after another *inside* the iteration loop, a loop it vectorises (without it
the iteration loop sits inside the work-item loop and stays scalar: 2-10x slower per element
for ``exp`` or ``tanh``). The barrier is legal because the trip count is uniform. One
launch covers whole work-groups: the last one's extra work-items compute a copy of the last
element and store nothing. A work-item that reads an array only at its own element, and stores
its results after the loop, lets a donated input's buffer take the result
(``KernelSpec.own_loads``/``own_stores``, as an elementwise kernel's).

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


def _varying(g: Graph, carries: Sequence[Var], shape: tuple[int, ...]) -> set[Var] | None:
    """The values of ``g`` computed from its array carries ``carries`` (all of ``shape``), or
    None when an equation is not a kernel expression, or reads such a value other than
    elementwise at ``shape`` (a view, a reduction or a broadcast would read other elements)."""
    varying = set(carries)
    for e in g.eqns:
        if not is_fusible(e):
            return None
        if not any(isinstance(a, Var) and a in varying for a in e.inputs):
            continue
        if not e.primitive.elementwise or any(o.aval.shape != shape for o in e.outputs):
            return None
        if any(isinstance(a, Var) and a in varying and a.aval.shape != shape for a in e.inputs):
            return None
        varying.update(e.outputs)
    return varying


#: Primitives whose float64 form (the OpenCL library's function) ran 2-3x slower per element
#: inside a loop kernel than in a kernel of its own on PoCL (``tanh``: 60 against 21 ns at
#: 100,000 elements, 60 against 37 us per iteration at 1,000, launches included); loops
#: computing them on more than ``SLOW_FLOAT64_MAX_ELEMENTS`` elements keep a launch per
#: iteration (at 10 elements the loop kernel took 0.24 us per iteration against 20).
SLOW_FLOAT64 = frozenset({"tanh"})
SLOW_FLOAT64_MAX_ELEMENTS = 256


def _slow(g: Graph, n: int) -> bool:
    return n > SLOW_FLOAT64_MAX_ELEMENTS and any(
        e.primitive.name in SLOW_FLOAT64 and np.dtype(e.outputs[0].aval.dtype) == np.float64 for e in g.eqns)


def loop_fits(cond: Graph | None, body: Graph, nc: int) -> tuple[int, ...] | None:
    """The one shape of the array carries (``()`` when every carry is a scalar) when the loop
    with ``nc`` carries, ``cond`` (None for a scan) and ``body`` runs as one kernel, else None."""
    carries = body.invars[:nc]
    shapes = {tuple(v.aval.shape) for v in carries} - {()}
    if len(shapes) > 1 or len(body.outvars) != nc:
        return None
    shape = next(iter(shapes), ())
    if _slow(body, prod(shape)):
        return None
    arrays = [v for v in carries if v.aval.shape != ()]
    if _varying(body, arrays, shape) is None:
        return None
    if any(isinstance(v, Literal) and v.aval.shape != () for v in body.outvars):
        return None
    if cond is not None:
        pred = cond.outvars[0]
        if pred.aval.shape != () or np.dtype(pred.aval.dtype) != np.bool_:
            return None
        touched = _varying(cond, [v for v in cond.invars[:nc] if v.aval.shape != ()], shape)
        if touched is None or (isinstance(pred, Var) and pred in touched):
            return None
        if any(isinstance(a, Var) and a in touched for e in cond.eqns for a in e.inputs):
            return None
    return shape


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


def loop_kernel(name: str, shape: tuple[int, ...], cond: Graph | None, body: Graph, length: int | None,
                ops: LoopOperands, idx_type: str, info: DeviceInfo) -> KernelSpec:
    """The kernel running every iteration of the loop (``cond`` and ``body`` as
    :func:`loop_fits` accepted them; ``length``: a scan's trip count, None for a while) over
    ``ops`` (module docstring)."""
    nc = len(body.outvars)
    n = prod(shape)
    params = Params()
    stored: dict[Var, Access] = dict(zip(body.invars[nc:], ops.body_ins))
    stored.update(zip([*body.constvars, *(cond.constvars if cond is not None else [])], ops.consts))
    members = {o: e for e in body.eqns for o in e.outputs}
    if cond is not None:
        stored.update(zip(cond.invars[nc:], ops.cond_ins))
        members.update({o: e for e in cond.eqns for o in e.outputs})
    arrays = [j for j in range(nc) if body.invars[j].aval.shape != ()] if n else []
    scalars = [j for j in range(nc) if body.invars[j].aval.shape == ()]
    em = region_emitter(idx_type, members, stored.get, params)
    em.lines += [f"  const {idx_type} wi = get_global_id(0);",
                 f"  const {idx_type} gid = min(wi, ({idx_type}){max(n - 1, 0)});"]
    base = em.set_base("gid", shape) if arrays else ()
    cond_ins = [*cond.invars[nc:], *cond.constvars] if cond is not None else []
    for v in [*body.invars[nc:], *body.constvars, *cond_ins]:
        if v.aval.shape == ():
            em.value(v, ())
    for j in scalars + arrays:
        v = body.invars[j]
        idx = () if j in scalars else base
        em.lines.append(f"  {ctype(v.aval.dtype)} c{j} = {em.load(ops.init[j], idx)};")
        # a size-1 axis is read at index "0" by a broadcasting operand (``Emitter.operand``)
        for at in {idx, tuple("0" if d == 1 else i for i, d in zip(idx, shape))}:
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
    news = [(j, em.fresh(ctype(body.invars[j].aval.dtype), em.value(body.outvars[j], () if j in scalars else base)))
            for j in moved]
    em.lines += [f"  c{j} = {t};" for j, t in news]
    em.lines.append("  barrier(CLK_LOCAL_MEM_FENCE);")
    loop = f"  for (long it = 0; it < {length}L; ++it) {{" if cond is None else "  for (;;) {"
    body_lines = em.lines
    em.lines, em.cache = saved, cache
    em.lines += [loop, *("  " + x for x in body_lines), "  }"]
    if arrays:
        em.lines.append(f"  if (wi < {n}) {{")
        em.lines += [f"    {_store(params, ops.out[j])} = c{j};" for j in arrays]
        em.lines.append("  }")
    if scalars:
        em.lines.append("  if (wi == 0) {")
        em.lines += [f"    {_store(params, ops.out[j])} = c{j};" for j in scalars]
        em.lines.append("  }")
    what = "scan" if cond is None else "while"
    local = _group_size(n, info)
    launch = ((-(-max(n, 1) // local) * local,), (local,), None)
    stored_at = {ops.out[j].slot for j in arrays if ops.out[j].offset == 0 and ops.out[j].is_contiguous()}
    return KernelSpec(name, kernel_source(name, params, em.lines), params.slots, [launch], kind="loop", warm=False,
                      note=f"every iteration of the {what} inside the kernel, one work-item per element",
                      own_loads=frozenset(slot for slot, own in em.own_loads.items() if own),
                      own_stores=frozenset(stored_at - set(em.own_loads)))


def _group_size(n: int, info: DeviceInfo) -> int:
    """The work-group size of a loop over ``n`` elements, launched once over whole work-groups
    (the last one's extra work-items compute a copy of the last element and store nothing): at
    most 256, and on a CPU halved down to 64 until every compute unit gets two work-groups."""
    local = min(256, info.max_work_group_size, max(n, 1))
    while info.is_cpu and local > 64 and -(-n // local) < 2 * info.compute_units:
        local //= 2
    return local


def _store(params: Params, a: Access) -> str:
    """The lvalue of element ``e`` of the contiguous ``a`` (its only element for a scalar)."""
    p, o = params(a.slot, a.aval.dtype)
    index = f"{o} + {a.offset}" + (" + gid" if a.aval.shape != () else "")
    return f"{p}[{index}]"
