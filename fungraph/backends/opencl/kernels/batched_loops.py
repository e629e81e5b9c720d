"""Which batched while loops run as one kernel (:mod:`~fungraph.backends.opencl.kernels.loops`).

``vmap`` of a ``while_loop`` whose predicate depends on the batch gives a loop whose condition
is ``any`` over a per-example predicate ``p`` (``reduce_max``/``reduce_or`` over the batch
axes) and whose body replaces each carry ``c`` by ``select(p, body(c), c)``, with ``p``
computed again from the same carries. Once ``p`` is false for an example, that example's
carries no longer change, so running each example's loop until its own ``p`` is false gives
the batched loop's values exactly, whatever the other examples do. That makes the loop one
kernel when, besides, the body is per example: every value computed from the carries has the
batch shape ``B`` followed either by size-1 axes (a per-example scalar, such as the counter)
or by the shape ``R`` of one of the array carries, and reads carries elementwise at its example
(a per-example scalar meets ``B + R`` values only through a size-1 axis or a
``broadcast_in_dim`` along the batch axes; values of two different array shapes never meet).
:func:`batch_fits` checks the three conditions.
A body that does not freeze finished examples (a hand-written ``any`` loop) keeps the loop's
``any``: the kernel is then one work-group over every element (``BatchedLoop.one_group``,
where the device's work-groups are large enough). Anything else (a reduction or view across
elements, values of two array shapes combined) falls back (None).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fungraph.backends.opencl.codegen import Access, ctype, is_fusible
from fungraph.backends.opencl.device import DeviceInfo
from fungraph.backends.opencl.kernels.elementwise import region_emitter
from fungraph.backends.opencl.kernels.loops import LoopOperands, group_size, store_at
from fungraph.backends.opencl.kernels.spec import KernelSpec, Params, kernel_source, prod
from fungraph.ir import Eqn, Graph, Literal, Var

#: Reductions whose result over every axis of a boolean value is ``any`` of it.
ANY = frozenset({"reduce_max", "reduce_or"})


def _per_example(shape: tuple[int, ...], batch: tuple[int, ...]) -> bool:
    return shape[:len(batch)] == batch and all(n == 1 for n in shape[len(batch):])


Kind = str | tuple[int, ...]


def _kind(shape: tuple[int, ...], batch: tuple[int, ...], fulls: Sequence[tuple[int, ...]]) -> Kind | None:
    """``"example"`` for per-example scalars (batch axes, then size-1 axes), the shape itself
    for values of one of the array carries' shapes ``fulls``, None otherwise."""
    if _per_example(shape, batch):
        return "example"
    return shape if shape in fulls else None


def _reads_fit(e: Eqn, kinds: dict[Var, Kind], batch: tuple[int, ...],
               fulls: Sequence[tuple[int, ...]]) -> Kind | None:
    """The kind of ``e``'s outputs when it reads values computed from the carries (``kinds``)
    only at its own example and element, else None."""
    out = tuple(e.outputs[0].aval.shape)
    out_kind = _kind(out, batch, fulls)
    if out_kind is None or any(tuple(o.aval.shape) != out for o in e.outputs):
        return None
    ins = [a for a in e.inputs if isinstance(a, Var) and a in kinds]
    name = e.primitive.name
    if name == "reshape" or (name == "broadcast_in_dim" and
                             tuple(e.params["broadcast_dimensions"][:len(batch)]) == tuple(range(len(batch)))):
        x = e.inputs[0]
        ok = kinds.get(x) == "example" and (name == "broadcast_in_dim" or out_kind == "example")
        return out_kind if ok and len(ins) == 1 else None
    if not e.primitive.elementwise:
        return None
    for a in ins:
        shape = tuple(a.aval.shape)
        same = shape == out
        widened = kinds[a] == "example" and out_kind != "example" and len(shape) == len(out)
        if not (same or widened):
            return None
    return out_kind


def _varying(g: Graph, nc: int, batch: tuple[int, ...], fulls: Sequence[tuple[int, ...]],
             skip: frozenset[int] | set[int] = frozenset()) -> dict[Var, Kind] | None:
    """The values of ``g`` computed from its first ``nc`` inputs (the carries), each with its
    kind (:func:`_kind`), or None when one is read other than at its example and element
    (``skip``: the ids of equations left out, the condition's final ``any``)."""
    kinds: dict[Var, Kind] = {}
    for v in g.invars[:nc]:
        k = _kind(tuple(v.aval.shape), batch, fulls)
        if k is None:
            return None
        kinds[v] = k
    for e in g.eqns:
        if id(e) in skip:
            continue
        if not is_fusible(e):
            return None
        if not any(isinstance(a, Var) and a in kinds for a in e.inputs):
            continue
        k = _reads_fit(e, kinds, batch, fulls)
        if k is None:
            return None
        kinds.update(dict.fromkeys(e.outputs, k))
    return kinds


def _hashable(x: Any) -> Any:
    if isinstance(x, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return tuple(_hashable(v) for v in x)
    if isinstance(x, np.ndarray):
        return ("array", x.dtype.str, x.shape, x.tobytes())
    try:
        hash(x)
    except TypeError:
        return ("repr", repr(x))
    return x


def _expression(g: Graph, v: Var | Literal, leaves: dict[Var, Any], producer: dict[Var, tuple[Eqn, int]],
                depth: int = 0) -> Any:
    """``v`` of ``g`` as a nested tuple over ``leaves`` (its inputs named in the enclosing
    graph), equal for two graphs exactly when they compute ``v`` by the same equations."""
    if isinstance(v, Literal):
        return ("literal", np.dtype(v.aval.dtype).str, _hashable(np.asarray(v.value)))
    if v in leaves:
        return leaves[v]
    if v not in producer or depth > 64:
        return ("unknown", id(v))
    e, k = producer[v]
    return (e.primitive.name, _hashable(e.params), k, tuple(str(o.aval) for o in e.outputs),
            tuple(_expression(g, a, leaves, producer, depth + 1) for a in e.inputs))


def _leaves(g: Graph, nc: int, outer: Sequence[Any]) -> dict[Var, Any]:
    """``g``'s inputs named in the enclosing graph: carries by position, constant inputs by the
    enclosing atom (``outer``), captured constants by value."""
    names: dict[Var, Any] = {v: ("carry", j) for j, v in enumerate(g.invars[:nc])}
    for v, a in zip(g.invars[nc:], outer):
        names[v] = ("literal", _hashable(np.asarray(a.value))) if isinstance(a, Literal) else ("outer", id(a))
    for v, c in zip(g.constvars, g.consts):
        names[v] = ("const", _hashable(np.asarray(c)))
    return names


def _producers(g: Graph) -> dict[Var, tuple[Eqn, int]]:
    return {o: (e, k) for e in g.eqns for k, o in enumerate(e.outputs)}


def _predicate_source(g: Graph, v: Var | Literal, producer: dict[Var, tuple[Eqn, int]]) -> Var | Literal:
    """``v`` with the size-1 reshapes and broadcasts that widen a per-example mask peeled off."""
    while isinstance(v, Var) and v in producer and producer[v][0].primitive.name in ("reshape", "broadcast_in_dim"):
        v = producer[v][0].inputs[0]
    return v


def _frozen(body: Graph, v: Var | Literal, carry: Var, pred: Any, leaves: dict[Var, Any],
            producer: dict[Var, tuple[Eqn, int]], depth: int = 0) -> bool:
    """Whether ``v`` of ``body`` equals ``carry`` wherever the condition's per-example
    predicate (the expression ``pred``) is false: ``carry`` itself, or a ``select`` whose
    false branch is, when its mask is that predicate, else whose branches both are."""
    if v is carry:
        return True
    if not isinstance(v, Var) or v not in producer or depth > 16:
        return False
    e, _ = producer[v]
    if e.primitive.name != "select" or len(e.inputs) != 3:
        return False
    mask, on_true, on_false = e.inputs
    if not _frozen(body, on_false, carry, pred, leaves, producer, depth + 1):
        return False
    source = _predicate_source(body, mask, producer)
    return (_expression(body, source, leaves, producer) == pred
            or _frozen(body, on_true, carry, pred, leaves, producer, depth + 1))


@dataclass(frozen=True)
class BatchedLoop:
    """A batched while loop that runs one loop per example: the ``batch`` shape, the array
    carries' shapes ``fulls`` (the batch shape alone when every carry is per example), the
    condition's per-example predicate ``pred`` (before its ``any``) and each carry's new value
    ``outs`` (the body's outputs, masks implied by ``pred`` dropped: :func:`_implied`).
    ``one_group``: the body does not freeze finished examples, so the examples may not run
    apart; the kernel is then one work-group over every element, whose flag is the loop's own
    ``any``."""

    batch: tuple[int, ...]
    fulls: tuple[tuple[int, ...], ...]
    pred: Var
    outs: tuple[Var | Literal, ...]
    one_group: bool = False

    @property
    def width(self) -> int:
        """Work-items per example: the elements of an example in its largest array carry."""
        return max(prod(s[len(self.batch):]) for s in self.fulls)

    @property
    def size(self) -> int:
        """Work-items in all: one per element of each example's largest array carry."""
        return prod(self.batch) * self.width


def _any_chain(cond: Graph) -> tuple[Var, set[int]] | None:
    """The boolean value whose ``any`` the condition returns, through one or more ``any``
    reductions that together cover every axis (nested ``vmap``s reduce one level at a time),
    and the ids of those reductions."""
    producer = _producers(cond)
    v, chain, reduced = cond.outvars[0], set(), 0
    while isinstance(v, Var) and v in producer and producer[v][0].primitive.name in ANY:
        e = producer[v][0]
        chain.add(id(e))
        reduced += len(e.params.get("axes", ()))
        v = e.inputs[0]
    if not chain or not isinstance(v, Var) or np.dtype(v.aval.dtype) != np.bool_ or reduced != len(v.aval.shape):
        return None
    return v, chain


def _implied(body: Graph, mask: Var | Literal, pred: Any, leaves: dict[Var, Any],
             producer: dict[Var, tuple[Eqn, int]], depth: int = 0) -> bool:
    """Whether ``mask`` (per example, at each element) holds wherever the predicate ``pred``
    does: ``any`` over the trailing batch axes of such a value, widened again by size-1 axes,
    which an outer ``vmap`` level masks its carries by. Such a mask may be dropped from
    ``select(mask, t, carry)`` once ``t`` is frozen."""
    if not isinstance(mask, Var) or mask not in producer or depth > 8:
        return False
    e, _ = producer[mask]
    if e.primitive.name == "reshape":
        x = e.inputs[0]
        if not (isinstance(x, Var) and tuple(mask.aval.shape[:x.aval.ndim]) == tuple(x.aval.shape)
                and all(n == 1 for n in mask.aval.shape[x.aval.ndim:])):
            return False
        e, mask = (producer[x][0], x) if x in producer else (None, x)
        if e is None:
            return False
    if e.primitive.name not in ANY:
        return False
    x = e.inputs[0]
    kept = mask.aval.ndim
    if tuple(e.params.get("axes", ())) != tuple(range(kept, x.aval.ndim)):
        return False
    if _expression(body, x, leaves, producer) == pred:
        return True
    return _implied(body, x, pred, leaves, producer, depth + 1)


def _drop_implied_masks(body: Graph, out: Var | Literal, carry: Var, pred: Any, leaves: dict[Var, Any],
                        producer: dict[Var, tuple[Eqn, int]]) -> Var | Literal:
    """``out`` without its outer ``select(mask, t, carry)``s whose mask is implied by ``pred``
    and whose ``t`` is frozen: each equals its ``t`` everywhere."""
    while isinstance(out, Var) and out in producer and producer[out][0].primitive.name == "select":
        mask, on_true, on_false = producer[out][0].inputs
        if not (on_false is carry and _implied(body, mask, pred, leaves, producer)
                and _frozen(body, on_true, carry, pred, leaves, producer)):
            break
        out = on_true
    return out


def _needed(g: Graph, outs: Sequence[Var | Literal]) -> Graph:
    """``g`` keeping only the equations that ``outs`` need."""
    producer = _producers(g)
    keep: set[int] = set()
    stack = [v for v in outs if isinstance(v, Var)]
    while stack:
        v = stack.pop()
        if v in producer and id(producer[v][0]) not in keep:
            e = producer[v][0]
            keep.add(id(e))
            stack += [a for a in e.inputs if isinstance(a, Var)]
    return Graph(g.invars, g.constvars, g.consts, [e for e in g.eqns if id(e) in keep], list(outs))


def batch_fits(cond: Graph, body: Graph, nc: int, cond_outer: Sequence[Any],
               body_outer: Sequence[Any]) -> BatchedLoop | None:
    """How the batched while loop (``cond``, ``body`` over ``nc`` carries; ``cond_outer``/
    ``body_outer``: the enclosing atoms of their constant inputs) runs as one kernel with a
    loop per example (module docstring), or None when it cannot."""
    if len(body.outvars) != nc or not nc:
        return None
    chain = _any_chain(cond)
    if chain is None:
        return None
    p, reductions = chain
    batch = tuple(p.aval.shape)
    wide = [tuple(v.aval.shape) for v in body.invars[:nc] if not _per_example(tuple(v.aval.shape), batch)]
    fulls = tuple(dict.fromkeys(wide)) or (batch,)
    if any(s[:len(batch)] != batch or not prod(s) for s in fulls):
        return None
    kinds = _varying(cond, nc, batch, fulls, skip=reductions)
    if kinds is None or p not in kinds:
        return None
    want = _expression(cond, p, _leaves(cond, nc, cond_outer), _producers(cond))
    producer = _producers(body)
    leaves = _leaves(body, nc, body_outer)
    outs = [_drop_implied_masks(body, out, x, want, leaves, producer) for x, out in zip(body.invars[:nc], body.outvars)]
    frozen = all(_frozen(body, out, x, want, leaves, producer) for x, out in zip(body.invars[:nc], outs))
    if not frozen:
        outs = list(body.outvars)
    if _varying(_needed(body, outs), nc, batch, fulls) is None:
        return None
    return BatchedLoop(batch, fulls, p, tuple(outs), one_group=not frozen)


def batched_loop_kernel(name: str, cond: Graph, body: Graph, fit: BatchedLoop, ops: LoopOperands, idx_type: str,
                        info: DeviceInfo) -> KernelSpec:
    """The kernel running a batched while loop as :func:`batch_fits` found it (``fit``) over
    ``ops``: one work-item per element of each example's largest array carry, each running its
    example's loop until that example's predicate is false. A smaller carry's element ``e`` is
    computed by work-item ``e`` of the example, and its last element also by the work-items past
    its end, which compute the same value (every value is elementwise within its own shape) and
    store nothing.
    A work-group runs while any of its work-items' examples does (a ``__local`` flag, set by
    the work-items whose predicate holds and read after a barrier), so every barrier is
    reached by the whole work-group; the iterations past an example's end leave its carries
    as they are (the body's ``select``), so the values are the batched loop's."""
    batch, width = fit.batch, fit.width
    nc = len(body.outvars)
    params = Params()
    stored: dict[Var, Access] = dict(zip(body.invars[nc:], ops.body_ins))
    stored.update(zip(cond.invars[nc:], ops.cond_ins))
    stored.update(zip([*body.constvars, *cond.constvars], ops.consts))
    members = {o: e for g in (body, cond) for e in g.eqns for o in e.outputs}
    em = region_emitter(idx_type, members, stored.get, params)
    it = idx_type
    n = prod(batch) * width
    em.lines += [f"  const {it} wi = get_global_id(0);", f"  const {it} gid = min(wi, ({it}){n - 1});"]
    widest = next(s for s in fit.fulls if prod(s[len(batch):]) == width)
    base = em.set_base("gid", widest)
    example = base[:len(batch)]
    bases = {widest: base}
    for k, shape in enumerate(fit.fulls):
        rest = prod(shape[len(batch):])
        if shape not in bases:
            em.lines.append(f"  const {it} e{k} = min(gid % {width}, ({it}){rest - 1});")
            bases[shape] = example + em.unravel(f"e{k}", shape[len(batch):], prefix=f"s{k}_")

    def at(shape: tuple[int, ...]) -> tuple[str, ...]:
        return bases.get(shape) or example + ("0",) * (len(shape) - len(batch))

    for v in [*body.invars[nc:], *cond.invars[nc:]]:
        read = any(a is v for g in (body, cond) for e in g.eqns for a in e.inputs)
        if tuple(v.aval.shape) in (*fit.fulls, batch) and read:
            em.value(v, at(tuple(v.aval.shape)))
        elif v.aval.shape == ():
            em.value(v, ())
    live = [j for j in range(nc) if body.invars[j].aval.size]
    for j in live:
        v = body.invars[j]
        idx = at(tuple(v.aval.shape))
        em.lines.append(f"  {ctype(v.aval.dtype)} c{j} = {em.load(ops.init[j], idx)};")
        # a size-1 axis is read at index "0" by a broadcasting operand (``Emitter.operand``)
        for where in {idx, tuple("0" if d == 1 else i for i, d in zip(idx, v.aval.shape))}:
            em.cache[(v, where)] = em.cache[(cond.invars[j], where)] = f"c{j}"
    em.lines += ["  __local int go[2];", "  if (get_local_id(0) == 0) { go[0] = 0; go[1] = 0; }",
                 "  barrier(CLK_LOCAL_MEM_FENCE);"]
    saved, cache = em.lines, dict(em.cache)
    em.lines = ["  const int s = (int)(it & 1);"]
    em.lines += [f"  if ({em.value(fit.pred, example)}) go[s] = 1;", "  barrier(CLK_LOCAL_MEM_FENCE);",
                 "  if (!go[s]) break;", "  if (get_local_id(0) == 0) go[1 - s] = 0;"]
    for e in _needed(body, fit.outs).eqns:
        if e.outputs[0].aval.shape == ():
            em.value(e.outputs[0], ())
    moved = [j for j in live if fit.outs[j] is not body.invars[j]]
    news = [(j, em.fresh(ctype(body.invars[j].aval.dtype), em.value(fit.outs[j],
                                                                     at(tuple(body.invars[j].aval.shape)))))
            for j in moved]
    em.lines += [f"  c{j} = {t};" for j, t in news]
    em.lines.append("  barrier(CLK_LOCAL_MEM_FENCE);")
    body_lines = em.lines
    em.lines, em.cache = saved, cache
    em.lines += ["  for (long it = 0;; ++it) {", *("  " + x for x in body_lines), "  }"]
    em.lines.append(f"  if (wi < {n}) {{")
    for j in live:
        if tuple(body.invars[j].aval.shape) == widest:
            em.lines.append(f"    {store_at(params, ops.out[j], 'gid')} = c{j};")
    for shape in fit.fulls:
        rest = prod(shape[len(batch):])
        if shape == widest:
            continue
        em.lines.append(f"    if (gid % {width} < {rest}) {{")
        em.lines += [f"      {store_at(params, ops.out[j], f'gid / {width} * {rest} + gid % {width}')} = c{j};"
                     for j in live if tuple(body.invars[j].aval.shape) == shape]
        em.lines.append("    }")
    examples = [j for j in live if tuple(body.invars[j].aval.shape) not in fit.fulls]
    if examples:
        em.lines.append(f"    if (gid % {width} == 0) {{" if width > 1 else "    {")
        em.lines += [f"      {store_at(params, ops.out[j], f'gid / {width}' if width > 1 else 'gid')} = c{j};"
                     for j in examples]
        em.lines.append("    }")
    em.lines.append("  }")
    local = n if fit.one_group else group_size(n, info)
    launch = ((-(-n // local) * local,), (local,), None)
    stored_at = {ops.out[j].slot for j in live if tuple(body.invars[j].aval.shape) == widest
                 and ops.out[j].offset == 0 and ops.out[j].is_contiguous()}
    return KernelSpec(name, kernel_source(name, params, em.lines), params.slots, [launch], kind="loop", warm=False,
                      note="every iteration of the batched while inside the kernel, " + (
                          "one work-group whose work-items run while any element's predicate holds"
                          if fit.one_group else "one work-item per element running its example's loop"),
                      own_loads=frozenset(slot for slot, own in em.own_loads.items() if own),
                      own_stores=frozenset(stored_at - set(em.own_loads)))
