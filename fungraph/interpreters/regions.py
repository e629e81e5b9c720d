"""Fusion regions, the one representation of fusion that every engine consumes: a ``fusion``
equation whose ``call`` parameter is a closed sub-graph (no constants) of the equations the
engine runs as one unit, in program order, the last one the region's *root*; its inputs are
the values the members read from outside, its outputs the values used outside, in order.

Which equations form regions depends on what the backend can fuse: each backend gives its
factory a :class:`FusionCapability` (``factory.fusion``), and :func:`fuse_regions`, the one
pass, applies its policy: ``"chains"`` (:func:`find_regions`: elementwise chains of one
shape, the CPU engine's) or ``"search"`` (``fusion_search.plan_fusion``: a cost model over
the whole plan, elementwise and index-map members, reductions as roots; the OpenCL
engine's). The CPU engine streams a region through cache-sized chunks (every op of the chain
on rows ``[i, i + k)`` before moving on), so a chain of n ops reads its inputs once from
memory and writes its outputs once; the OpenCL engine makes each region one kernel.

A region is a scheduling hint with no meaning of its own: evaluating, differentiating or
batching a ``fusion`` equation is the same as doing so to its body, and ``inline_calls``
dissolves it again; :func:`expand_regions` puts the bodies back in place and says where each
region lies, for an engine that indexes its regions by equation.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from typing import Literal as Choice

from fungraph.core import Primitive, get_primitive
from fungraph.interpreters.eval import eval_graph
from fungraph.interpreters.fusion_model import FusionPlan, plan_of_regions
from fungraph.interpreters.fusion_search import plan_fusion
from fungraph.ir import Atom, Eqn, Graph, Literal, Params, ShapedArray, Var


def _fusion_impl(*args: Any, call: Graph) -> list[Any]:
    return eval_graph(call, *args)


def _fusion_aval(*avals: ShapedArray, call: Graph) -> tuple[ShapedArray, ...]:
    """The body's output types, once its inputs have the operands' types and it is closed
    (the verifier checks every ``fusion`` equation through this rule)."""
    if tuple(avals) != call.in_avals:
        raise TypeError(f"fusion: operands {', '.join(map(str, avals))} do not match the region's inputs "
                        f"{', '.join(map(str, call.in_avals))}")
    if call.constvars or not call.eqns:
        raise TypeError("fusion: a region's body holds equations and no constants (they are its inputs)")
    return call.out_avals


def _fusion_inplace(eqn: Eqn, j: int) -> tuple[int, ...]:
    """Output ``j`` may overwrite an input of its type that no equation of the body reads after
    the one producing ``j``: a chunk of the input is then dead once that chunk of the output is
    written (the body runs chunk by chunk, the same rows of both)."""
    body: Graph = eqn.params["call"]
    out = body.outvars[j]
    producer = next(i for i, e in enumerate(body.eqns) if out in e.outputs)
    read_later = {a for e in body.eqns[producer + 1:] for a in e.inputs if isinstance(a, Var)}
    return tuple(k for k, v in enumerate(body.invars) if v.aval == out.aval and v not in read_later)


fusion_p = Primitive("fusion", impl=_fusion_impl, abstract_eval=_fusion_aval, multiple_results=True,
                     inplace_rule=_fusion_inplace)


# A region differentiates and batches as the call it stands for: jit_call, a layer above, found by name.
@fusion_p.def_jvp
def _fusion_jvp(primals: tuple, tangents: tuple, *, call: Graph) -> tuple:
    return get_primitive("jit_call").rule("jvp")(primals, tangents, call=call, name="fusion", backend="cpu")


@fusion_p.def_transpose
def _fusion_transpose(cts: Sequence[Any], *args: Any, call: Graph) -> tuple:
    return get_primitive("jit_call").rule("transpose")(cts, *args, call=call, name="fusion", backend="cpu")


@fusion_p.def_batch
def _fusion_batch(args: Sequence[Any], dims: Sequence[int | None], *, call: Graph) -> tuple:
    return get_primitive("jit_call").rule("batch")(args, dims, call=call, name="fusion", backend="cpu")


def elementwise_member(e: Eqn) -> bool:
    """An elementwise equation with one output and no effect: what any engine can fuse."""
    return e.primitive.elementwise and not e.effectful and len(e.outputs) == 1


def _no_free_views(graph: Graph) -> set[int]:
    return set()


def _unit_cost(name: str) -> float:
    return 0.5


def _never(e: Eqn) -> bool:
    return False


@dataclass(frozen=True)
class FusionCapability:
    """What a backend can run as one region, and the policy that groups its regions.

    ``policy``: ``"chains"`` (:func:`find_regions`) or ``"search"`` (the cost model of
    ``fusion_model``); ``member``: which equations may lie in a region; ``roots``: the
    reductions that may end a region (their operand's producers fused in); ``index_ops``:
    members evaluated at other indices than their consumer's (views, pads, gathers);
    ``op_cost``: an operation's cost per recomputed element, in byte-equivalents;
    ``free_views``: the view equations that cost nothing outside a region (the engine reads
    them through strides); ``min_bytes``: the smallest output a region's widest member may have (a
    region's members share one shape, so a comparison's one-byte mask joins the wider values
    around it);
    ``product_epilogues``: the engine computes the region that consumes a matrix product
    with the product (so the simplifier leaves a scalar scale of a product in that region);
    ``planned_by``: ``"pipeline"`` when ``jit``'s pass manager runs :func:`fuse_regions`
    (before scheduling, regions then scheduled and planned as units) or ``"engine"`` when
    the engine runs it on its final program order (the search's regions depend on it);
    ``reduces``: the reductions a ``"chains"`` region may hold (:func:`find_regions`: over
    trailing axes of the region's shape, with the members feeding them and the row values
    computed from their results, or over leading axes with the members feeding them), for an
    engine that runs such a region row by row or column by column (the native CPU engine's
    softmax, layer norm and bias gradients)."""

    policy: Choice["chains", "search"] = "chains"
    member: Callable[[Eqn], bool] = elementwise_member
    roots: frozenset[str] = frozenset()
    index_ops: frozenset[str] = frozenset()
    op_cost: Callable[[str], float] = _unit_cost
    free_views: Callable[[Graph], set[int]] = _no_free_views
    min_bytes: int = 0
    product_epilogues: bool = False
    planned_by: Choice["pipeline", "engine"] = "pipeline"
    reduces: Callable[[Eqn], bool] = _never

    def __post_init__(self) -> None:
        if self.policy not in ("chains", "search"):
            raise ValueError(f"FusionCapability: policy {self.policy!r} is neither 'chains' nor 'search'")
        if self.planned_by not in ("pipeline", "engine"):
            raise ValueError(f"FusionCapability: planned_by {self.planned_by!r} is neither 'pipeline' nor 'engine'")


#: Elementwise chains of any size: the default of :func:`fuse_regions`.
ELEMENTWISE_CHAINS = FusionCapability()


def _fusible(graph: Graph, capability: FusionCapability) -> list[bool]:
    """Per equation, whether it may be a member: one of ``capability``'s, whose shape some
    member of the graph fills with ``min_bytes`` (the widest member of a region decides,
    :func:`find_regions` drops the regions below; this keeps small graphs from tracking any)."""
    widest: dict[tuple[int, ...], int] = {}
    members = [capability.member(e) and len(e.outputs) == 1 for e in graph.eqns]
    for e, ok in zip(graph.eqns, members):
        if ok:
            aval = e.outputs[0].aval
            widest[aval.shape] = max(widest.get(aval.shape, 0), aval.nbytes)
    return [ok and widest[e.outputs[0].aval.shape] >= capability.min_bytes for e, ok in zip(graph.eqns, members)]


#: Equations after an outside read of a region's value during which the region may still grow.
READ_WINDOW = 8


def trailing_axes(shape: Sequence[int], axes: Sequence[int]) -> bool:
    """Whether a reduction of ``shape`` over ``axes`` reduces more than one element per row
    and its axes come after every kept axis longer than 1: each row is then one contiguous
    run of the operand, and the rows of the result are in the operand's order."""
    kept = [k for k, d in enumerate(shape) if k not in axes and d > 1]
    reduced = 1
    for a in axes:
        reduced *= shape[a]
    return bool(axes) and reduced > 1 and all(k < min(axes) for k in kept)


def leading_axes(shape: Sequence[int], axes: Sequence[int]) -> bool:
    """Whether a reduction of ``shape`` over ``axes`` reduces more than one element per kept
    element and every reduced axis longer than 1 comes before every kept one longer than 1
    (a bias gradient's ``sum(g, axis=0)``): each of the operand's ``prod(reduced)`` slices
    is then one contiguous run of the result's elements, its *columns*."""
    kept = [k for k, d in enumerate(shape) if k not in axes and d > 1]
    reduced = [a for a in axes if shape[a] > 1]
    return bool(reduced) and bool(kept) and max(reduced) < min(kept)


def row_layout(shape: Sequence[int], domain: Sequence[int], axes: Sequence[int]) -> bool:
    """Whether a value of ``shape`` holds one element per row of ``domain`` reduced over
    ``axes``, in row order (its axes longer than 1 are the kept ones)."""
    return [d for d in shape if d > 1] == [d for k, d in enumerate(domain) if k not in axes and d > 1]


def broadcasts_by_row(shape: Sequence[int], domain: Sequence[int], axes: Sequence[int]) -> bool:
    """Whether a value of ``shape`` broadcast against ``domain`` (numpy's right-aligned rules)
    repeats one element per row along ``axes``: a reduction's result in keep-dims form."""
    if len(shape) > len(domain):
        return False
    padded = (1,) * (len(domain) - len(shape)) + tuple(shape)
    return all(p == 1 if k in axes else p == domain[k] for k, p in enumerate(padded))


def find_regions(graph: Graph, capability: FusionCapability = ELEMENTWISE_CHAINS) -> list[list[int]]:
    """Groups of equation indices, in graph order, each a chain of members (``capability``) of
    one output shape whose contraction to one node keeps the graph acyclic.

    Equations are visited in order; one joins the regions of its producers of the same shape
    (merging them when it reads from several, as GELU's ``0.5 * x`` times the ``tanh`` chain
    does) unless some value read from outside them depends on one of them (which would make
    the fused node both before and after that equation), or an equation outside a region
    read one of its values more than :data:`READ_WINDOW` equations before: the fused node
    runs where its last member was, so joining holds that reader back, and a backward-pass
    use of a forward value (a saved ``checkpoint`` value) would pull the forward region, and
    whatever it waits for, out of order, keeping both values alive in between.
    ``deps[v]`` is the set of regions ``v`` depends on, as a bit mask of region numbers;
    ``bits[r]`` the numbers merged into region ``r``.

    With ``capability.reduces``, a reduction over trailing axes of a region's shape joins
    the region of its operand (or starts one of that shape), and its result is a *row value*
    of the region (one element per row): elementwise equations, reshapes and broadcasts of
    row values in row layout join as well, and a member of the region's shape may read a row
    value in keep-dims form. A reduction over leading axes (:func:`leading_axes`) joins the
    same way, its results one value per column, but no member of the region's shape reads
    them (the engine computes such a region in one pass). All reductions of a region reduce
    the same axes."""
    region_of: dict[int, int] = {}
    producer: dict[Var, int] = {}
    deps: dict[Var, int] = {}
    regions: list[list[int]] = []
    shapes: list[tuple[int, ...]] = []
    axes_of: list[tuple[int, ...] | None] = []
    bits: list[int] = []
    outside_reads: list[set[Var]] = []
    read_at: dict[int, int] = {}
    rows: set[Var] = set()

    def made_in(a: Var) -> int | None:
        return region_of.get(producer.get(a, -1))

    def acyclic(group: list[int], var_ins: list[Var]) -> bool:
        mask = 0
        for c in group:
            mask |= bits[c]
        reads = list(var_ins)
        if len(group) > 1:
            reads += [b for c in group for b in outside_reads[c]]
        return all(made_in(b) in group or not deps.get(b, 0) & mask for b in reads)

    def near(c: int, i: int) -> bool:
        return i - read_at.get(c, i) <= READ_WINDOW

    def new_region(shape: tuple[int, ...], axes: tuple[int, ...] | None) -> int:
        regions.append([])
        shapes.append(shape)
        axes_of.append(axes)
        bits.append(1 << (len(regions) - 1))
        outside_reads.append(set())
        return len(regions) - 1

    def reads_rows_as_full(var_ins: list[Var], group: list[int]) -> bool:
        """The row values of ``group`` that a member of its shape reads broadcast by row."""
        for a in var_ins:
            c = made_in(a)
            if a in rows and c in group and a.aval.shape != shapes[c]:
                if not (trailing_axes(shapes[c], axes_of[c] or ()) and broadcasts_by_row(a.aval.shape, shapes[c],
                                                                                          axes_of[c] or ())):
                    return False
        return True

    def chain(i: int, e: Eqn, var_ins: list[Var]) -> int | None:
        shape = e.outputs[0].aval.shape
        group: list[int] = []
        axes: set[tuple[int, ...]] = set()
        for a in var_ins:
            cand = made_in(a)
            if cand is None or cand in group or shapes[cand] != shape or not near(cand, i):
                continue
            more = axes | ({axes_of[cand]} - {None})
            if len(more) < 2 and reads_rows_as_full(var_ins, [*group, cand]) and acyclic([*group, cand], var_ins):
                group.append(cand)
                axes = more
        if not group:
            return new_region(shape, None)
        r = min(group)
        for s in group:
            if s != r:
                _merge(regions, region_of, bits, outside_reads, read_at, r, s)
                axes_of[r] = axes_of[r] or axes_of[s]
        return r

    def row_member(i: int, e: Eqn, var_ins: list[Var]) -> int | None:
        """The region whose row values ``e`` computes on in row layout (module docstring)."""
        homes = {made_in(a) for a in var_ins if a in rows}
        if len(homes) != 1:
            return None
        (c,) = homes
        domain, axes = shapes[c], axes_of[c] or ()
        out = e.outputs[0].aval.shape
        if e.primitive.name == "reshape" or e.primitive.name == "broadcast_in_dim":
            ok = row_layout(out, domain, axes) or (out == domain and e.primitive.name == "broadcast_in_dim"
                                                   and trailing_axes(domain, axes)
                                                   and broadcasts_by_row(expanded_shape(e), domain, axes))
        else:
            ok = (capability.member(e) and len(e.outputs) == 1 and out != domain and row_layout(out, domain, axes)
                  and all(a.aval.shape == out if a in rows else (made_in(a) != c and a.aval.shape in (out, ()))
                          for a in var_ins))
        return c if ok and near(c, i) and acyclic([c], var_ins) else None

    def reduction(i: int, e: Eqn, var_ins: list[Var]) -> int | None:
        (a,) = var_ins
        domain, axes = a.aval.shape, tuple(sorted(e.params["axes"]))
        if a.aval.nbytes < capability.min_bytes or not (trailing_axes(domain, axes) or leading_axes(domain, axes)):
            return None
        c = made_in(a)
        if (c is not None and shapes[c] == domain and axes_of[c] in (None, axes) and near(c, i)
                and acyclic([c], var_ins)):
            axes_of[c] = axes
            return c
        return new_region(domain, axes)

    fusible = _fusible(graph, capability)
    for i, e in enumerate(graph.eqns):
        var_ins = [a for a in e.inputs if isinstance(a, Var)]
        mask = 0
        for a in var_ins:
            mask |= deps.get(a, 0)
        r = None
        if any(a in rows for a in var_ins):
            r = row_member(i, e, var_ins)
            if r is not None:
                rows.update(e.outputs)
        if r is None and capability.reduces(e) and len(var_ins) == 1 == len(e.inputs):
            r = reduction(i, e, var_ins)
            if r is not None:
                rows.update(e.outputs)
        if r is None and fusible[i]:
            r = chain(i, e, var_ins)
        if r is not None:
            regions[r].append(i)
            region_of[i] = r
            outside_reads[r].update(a for a in var_ins if made_in(a) != r)
            mask |= bits[r]
        for a in var_ins:
            read = made_in(a)
            if read is not None and read != r:
                read_at.setdefault(read, i)
        for o in e.outputs:
            producer[o] = i
            deps[o] = mask
    wide = [m for m in regions
            if len(m) >= 2 and max(graph.eqns[i].outputs[0].aval.nbytes for i in m) >= capability.min_bytes]
    return sorted((sorted(m) for m in wide), key=lambda m: m[0])


def expanded_shape(e: Eqn) -> tuple[int, ...]:
    """A ``broadcast_in_dim``'s operand shape placed on its output's axes (1 elsewhere)."""
    expanded = [1] * len(e.params["shape"])
    for k, d in enumerate(e.params["broadcast_dimensions"]):
        expanded[d] = e.inputs[0].aval.shape[k]
    return tuple(expanded)


def _merge(regions: list[list[int]], region_of: dict[int, int], bits: list[int], outside_reads: list[set[Var]],
           read_at: dict[int, int], r: int, s: int) -> None:
    """Move region ``s`` into region ``r`` (both of :func:`find_regions`'s tables)."""
    for i in regions[s]:
        region_of[i] = r
    regions[r].extend(regions[s])
    regions[s] = []
    bits[r] |= bits[s]
    outside_reads[r] |= outside_reads[s]
    outside_reads[s] = set()
    if s in read_at:
        t = read_at.pop(s)
        read_at[r] = min(t, read_at.get(r, t))


def _region_eqn(graph: Graph, members: Sequence[int], outputs: Sequence[Var]) -> Eqn:
    """One ``fusion`` equation computing ``members``: inputs are the values they read from
    outside, outputs ``outputs`` (the values used outside, or returned)."""
    member_eqns = [graph.eqns[i] for i in members]
    defined = {o for e in member_eqns for o in e.outputs}
    inputs: dict[Var, Var] = {}
    for e in member_eqns:
        for a in e.inputs:
            if isinstance(a, Var) and a not in defined and a not in inputs:
                inputs[a] = Var(a.aval)
    rename: dict[Var, Var] = dict(inputs)
    body_eqns = []
    for e in member_eqns:
        ins: tuple[Atom, ...] = tuple(a if isinstance(a, Literal) else rename[a] for a in e.inputs)
        outs = tuple(Var(o.aval) for o in e.outputs)
        rename.update(zip(e.outputs, outs))
        body_eqns.append(Eqn(e.primitive, ins, outs, e.params, e.source))
    body = Graph(tuple(inputs.values()), (), (), tuple(body_eqns), tuple(rename[o] for o in outputs))
    return Eqn(fusion_p, tuple(inputs), tuple(outputs), Params({"call": body}), member_eqns[-1].source)


def _used_outside(graph: Graph, regions: Sequence[Sequence[int]]) -> list[list[Var]]:
    """Per region, the values of its members that an equation outside it reads or the graph
    returns, in program order."""
    region_of = {i: k for k, members in enumerate(regions) for i in members}
    made_by = {o: k for k, members in enumerate(regions) for i in members for o in graph.eqns[i].outputs}
    read_outside: set[Var] = {a for a in graph.outvars if isinstance(a, Var)}
    for i, e in enumerate(graph.eqns):
        for a in e.inputs:
            if isinstance(a, Var) and region_of.get(i) != made_by.get(a):
                read_outside.add(a)
    return [[o for i in members for o in graph.eqns[i].outputs if o in read_outside] for members in regions]


def contract(graph: Graph, regions: Sequence[tuple[Sequence[int], Sequence[Var]]], resort: bool = True) -> Graph:
    """``graph`` with each region (its members' indices in program order, and the values it
    writes) replaced by one ``fusion`` equation at its last member's position; regions of one
    equation stay as they are. With ``resort`` the contracted graph is re-sorted
    topologically, keeping every unit as close to that position as dependencies allow (a
    graph already in a valid order keeps it); without, the caller knows the order is valid
    (the cost-model policy's regions: every value a region writes is read after its root)."""
    regions = [(list(m), list(o)) for m, o in regions if len(m) >= 2]
    if not regions:
        return graph
    unit_of = list(range(len(graph.eqns)))
    for members, _ in regions:
        for i in members:
            unit_of[i] = members[-1]
    units: dict[int, Eqn] = {}
    for members, outputs in regions:
        units[members[-1]] = _region_eqn(graph, members, outputs)
    for i, e in enumerate(graph.eqns):
        if unit_of[i] == i and units.get(i) is None:
            units[i] = e
    eqns = _topological(units) if resort else tuple(units[i] for i in sorted(units))
    return Graph(graph.invars, graph.constvars, graph.consts, eqns, graph.outvars)


def plan_regions(graph: Graph, capability: FusionCapability = ELEMENTWISE_CHAINS,
                 fuse: bool = True) -> tuple[list[tuple[list[int], list[Var]]], FusionPlan | None]:
    """The regions ``capability``'s policy finds in ``graph`` (members and written values),
    and for the ``"search"`` policy the plan with its cost-model figures, for reports."""
    if capability.policy == "search":
        plan = plan_fusion(graph, capability, fuse)
        return [(sorted(r.members), list(r.outputs)) for r in plan.regions], plan
    found = find_regions(graph, capability) if fuse else []
    return list(zip(found, _used_outside(graph, found))), None


def fuse_regions(graph: Graph, capability: FusionCapability = ELEMENTWISE_CHAINS) -> Graph:
    """Replace each region that ``capability``'s policy finds by one ``fusion`` equation."""
    return contract(graph, plan_regions(graph, capability)[0], resort=capability.policy == "chains")


def expand_regions(graph: Graph) -> tuple[Graph, list[tuple[tuple[int, ...], tuple[Var, ...]]]]:
    """``graph`` with every ``fusion`` equation's body put back in its place (fresh names for
    the values inside), and for each region the indices of its equations there and the
    values it writes: an engine that indexes regions by equation lowers the result."""
    eqns: list[Eqn] = []
    spans: list[tuple[tuple[int, ...], tuple[Var, ...]]] = []
    for e in graph.eqns:
        if e.primitive is not fusion_p:
            eqns.append(e)
            continue
        body: Graph = e.params["call"]
        rename: dict[Var, Var] = dict(zip(body.invars, e.inputs))  # type: ignore[arg-type]
        rename.update({v: o for v, o in zip(body.outvars, e.outputs) if isinstance(v, Var)})
        start = len(eqns)
        for q in body.eqns:
            outs = tuple(rename.setdefault(o, Var(o.aval)) for o in q.outputs)
            ins = tuple(a if isinstance(a, Literal) else rename[a] for a in q.inputs)
            eqns.append(Eqn(q.primitive, ins, outs, q.params, q.source))
        spans.append((tuple(range(start, len(eqns))), e.outputs))
    if not spans:
        return graph, []
    return Graph(graph.invars, graph.constvars, graph.consts, tuple(eqns), graph.outvars), spans


def regions_of(graph: Graph, capability: FusionCapability) -> tuple[Graph, FusionPlan]:
    """The expanded graph (:func:`expand_regions`) and its plan: each ``fusion`` equation a
    region, every other equation that can be a root (``capability``) a region of its own and
    every free view outside them an alias."""
    flat, spans = expand_regions(graph)
    return flat, plan_of_regions(flat, spans, capability)


def _topological(units: dict[int, Eqn]) -> tuple[Eqn, ...]:
    """Kahn's algorithm over the units, smallest original position first."""
    made_by: dict[Var, int] = {}
    for u, e in units.items():
        for o in e.outputs:
            made_by[o] = u
    waits = {u: {made_by[a] for a in e.inputs if isinstance(a, Var) and a in made_by} - {u}
             for u, e in units.items()}
    users: dict[int, list[int]] = {u: [] for u in units}
    for u, ds in waits.items():
        for d in ds:
            users[d].append(u)
    ready = [u for u, ds in waits.items() if not ds]
    heapq.heapify(ready)
    order = []
    while ready:
        u = heapq.heappop(ready)
        order.append(units[u])
        for w in users[u]:
            waits[w].discard(u)
            if not waits[w]:
                heapq.heappush(ready, w)
    if len(order) != len(units):
        raise AssertionError("fusion regions made the graph cyclic")
    return tuple(order)
