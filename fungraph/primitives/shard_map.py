"""``shard_map``: run a function on each process's block of its arguments, with collectives
over the mesh axes running over the processes (JAX's ``shard_map`` with one device per process).

Every process passes its own block for an input split over an axis (``P("dp")``) and the
same value for a replicated one (``P()``). The function is staged once per call on the
blocks' shapes, with the mesh's axis names in scope (so ``psum(x, "dp")`` binds the MPI
collective), then typed: each value is marked with the mesh axes it varies over (JAX's
``vma``), and a ``pvary`` goes in wherever an operation mixes a value invariant over an axis
with one varying over it, and before each collective that reads an invariant value. The
typed graph is bound as one call (``jit_call[name=shard_map(f)]``, the higher-order primitive
that holds a graph), so an eager ``shard_map`` compiles its body once, and ``jit``, ``grad``,
``vmap`` and ``jvp`` transform the body through the call's rules (``jit`` inlines it); the
transposes ``psum^T = pvary``, ``pvary^T = psum`` give JAX's gradients.

``jit_call``, ``remat``, ``cond``, ``scan`` and ``while`` are typed through their sub-graphs
(branches joined, loop carries grown to a fixed point); ``custom_jvp_call``/``custom_vjp_call``
through the function's graph, their rules staged typed when they run (JAX's rule). Other
sub-graphs (linear solves, the while tape's loops) are typed conservatively: when any input of
such an equation varies over an axis, all its inputs and outputs are taken to vary over it
(values are unchanged; a replicated ``P()`` output then needs ``psum`` or ``check_vma=False``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from fungraph import _mpi, dtypes
from fungraph.interpreters.eval import eval_graph
from fungraph.interpreters.staging import abstractify, stage
from fungraph.ir import Atom, Eqn, Graph, Literal, Params, Var
from fungraph.jit import jit_call_p
from fungraph.primitives.mesh_collectives import (
    INVARIANT_RESULT,
    PER_OPERAND,
    MeshAxes,
    MeshPrimitive,
    mesh_axes_in_scope,
    mesh_axis_index_p,
    pvary_p,
)
from fungraph.sharding import Mesh, PartitionSpec
from fungraph.tree_util import tree_broadcast, tree_flatten, tree_unflatten

_INVARIANT: frozenset = frozenset()


def _is_spec(x: Any) -> bool:
    return x is None or isinstance(x, PartitionSpec)


def _flat_specs(specs: Any, tree: Any, what: str) -> list[PartitionSpec]:
    """One spec per leaf of ``tree``: ``specs`` is a prefix of it (JAX's rule)."""
    try:
        full = tree_broadcast(specs, tree, is_leaf=_is_spec)
    except (ValueError, TypeError) as err:
        raise ValueError(f"shard_map {what} {specs!r} must be a pytree prefix of the function's "
                         f"{'arguments' if what == 'in_specs' else 'outputs'}: {err}") from None
    leaves, _ = tree_flatten(full, is_leaf=_is_spec)
    return [PartitionSpec() if s is None else s for s in leaves]


def _check_spec(spec: PartitionSpec, mesh: Mesh, ndim: int, what: str) -> None:
    for name in spec.axis_names():
        if name not in mesh.shape:
            raise ValueError(f"shard_map {what} {spec!r} names axis {name!r}, which the mesh {mesh!r} does not have")
    if len(spec) > ndim:
        raise ValueError(f"shard_map {what} {spec!r} has {len(spec)} entries for a value of rank {ndim}")


# --- typing: which mesh axes each value varies over --------------------------------------------


def _axis_order(mesh: MeshAxes) -> Callable[[Hashable], int]:
    names = [n for n, _ in mesh]
    return lambda name: names.index(name) if name in names else len(names)


class _Typer:
    """Builds the typed copy of one graph: its equations with ``pvary`` inserted."""

    def __init__(self, mesh: MeshAxes) -> None:
        self.mesh = mesh
        self.vma: dict[Var, frozenset] = {}
        self.eqns: list[Eqn] = []
        #: outputs of dropped ``pvary``s, and the atoms that replace them
        self.alias: dict[Var, Atom] = {}

    def read(self, a: Atom) -> Atom:
        return self.alias.get(a, a) if isinstance(a, Var) else a

    def of(self, a: Atom) -> frozenset:
        a = self.read(a)
        return _INVARIANT if isinstance(a, Literal) else self.vma[a]

    def lift(self, a: Atom, target: frozenset, mesh: MeshAxes, source: str | None) -> Atom:
        """``a`` made to vary over ``target`` by one ``pvary`` per missing axis (inexact values
        only: no cotangent reaches the others, whose type is recorded all the same)."""
        if isinstance(a, Literal):
            return a
        missing = target - self.vma[a]
        if not missing:
            return a
        if not dtypes.is_inexact(a.aval.dtype):
            self.vma[a] = self.vma[a] | missing
            return a
        for name in sorted(missing, key=_axis_order(mesh)):
            out = Var(a.aval)
            self.eqns.append(Eqn(pvary_p, (a,), (out,), Params({"axis_name": name, "mesh": mesh}), source))
            self.vma[out] = self.vma[a] | {name}
            a = out
        return a

    def equation(self, e: Eqn) -> None:
        e = Eqn(e.primitive, tuple(self.read(a) for a in e.inputs), e.outputs, e.params, e.source)
        ins = [self.of(a) for a in e.inputs]
        if isinstance(e.primitive, MeshPrimitive):
            name, mesh = e.params["axis_name"], e.params["mesh"]
            if e.primitive is mesh_axis_index_p:
                self._emit(e, e.inputs, [frozenset({name})] * len(e.outputs))
                return
            if e.primitive is pvary_p:
                if name in ins[0]:  # already varying: staged before its input's type was known
                    self.alias[e.outputs[0]] = self.read(e.inputs[0])
                    return
                self._emit(e, e.inputs, [ins[0] | {name}])
                return
            x = self.lift(e.inputs[0], ins[0] | {name}, mesh, e.source)
            after = self.of(x) - {name} if e.primitive in INVARIANT_RESULT else self.of(x) | {name}
            self._emit(e, (x,), [after])
            return
        if e.primitive.name in PER_OPERAND:
            self._emit(e, e.inputs, ins)
            return
        typed = _SUBGRAPH_RULES.get(e.primitive.name)
        if typed is not None and e.subgraphs:
            typed(self, e, ins)
            return
        union = frozenset().union(*ins)
        inputs = tuple(self.lift(a, union, self.mesh, e.source) for a in e.inputs)
        if e.subgraphs and union:
            params = {k: _typed_param(v, union, self.mesh) for k, v in e.params.items()}
            e = Eqn(e.primitive, e.inputs, e.outputs, Params(params), e.source)
        self._emit(e, inputs, [union] * len(e.outputs))

    def _emit(self, e: Eqn, inputs: Sequence[Atom], out_vma: Sequence[frozenset]) -> None:
        self.eqns.append(Eqn(e.primitive, tuple(inputs), e.outputs, e.params, e.source))
        self.vma.update(zip(e.outputs, out_vma))


def _join(rows: Sequence[Sequence[frozenset]]) -> list[frozenset]:
    return [frozenset().union(*col) for col in zip(*rows)]


def _type_call(typer: _Typer, e: Eqn, ins: list[frozenset]) -> None:
    """``jit_call``: its graph typed with the inputs' types, outputs as the graph gives them."""
    call, out_vma = typed_graph(e.params["call"], ins, typer.mesh)
    typer._emit(Eqn(e.primitive, e.inputs, e.outputs, Params({**e.params.kwargs(), "call": call}), e.source),
                e.inputs, out_vma)


def _type_cond(typer: _Typer, e: Eqn, ins: list[frozenset]) -> None:
    """``cond``: each output varies over what it varies over in any branch (JAX's rule); the
    branches' outputs are lifted to that, and an index that varies makes everything vary."""
    operands = ins[1:]
    if ins[0]:
        operands = [v | ins[0] for v in operands]
    inputs = (e.inputs[0],) + tuple(typer.lift(a, v, typer.mesh, e.source) for a, v in zip(e.inputs[1:], operands))
    branches = e.params["branches"]
    out = _join([typed_graph(b, operands, typer.mesh)[1] for b in branches])
    out = [v | ins[0] for v in out]
    typed = tuple(typed_graph(b, operands, typer.mesh, lift_outputs_to=out)[0] for b in branches)
    typer._emit(Eqn(e.primitive, inputs, e.outputs, Params({**e.params.kwargs(), "branches": typed}), e.source),
                inputs, out)


def _type_scan(typer: _Typer, e: Eqn, ins: list[frozenset]) -> None:
    """``scan``: the carries' types grow to a fixed point (at most one step per mesh axis)."""
    nc = e.params["num_carry"]
    body = e.params["body"]
    carry = list(ins[:nc])
    while True:
        out = typed_graph(body, carry + list(ins[nc:]), typer.mesh)[1]
        grown = [c | o for c, o in zip(carry, out[:nc])]
        if grown == carry:
            break
        carry = grown
    inputs = tuple(typer.lift(a, v, typer.mesh, e.source) for a, v in zip(e.inputs, carry + list(ins[nc:])))
    out = typed_graph(body, carry + list(ins[nc:]), typer.mesh)[1]
    typed = typed_graph(body, carry + list(ins[nc:]), typer.mesh, lift_outputs_to=carry + out[nc:])[0]
    typer._emit(Eqn(e.primitive, inputs, e.outputs, Params({**e.params.kwargs(), "body": typed}), e.source),
                inputs, carry + out[nc:])


def _type_while(typer: _Typer, e: Eqn, ins: list[frozenset]) -> None:
    """``while``: the carries' types grow to a fixed point; a predicate that varies makes every
    carry vary (the processes may stop after different numbers of steps)."""
    ncc, nbc = e.params["n_cc"], e.params["n_bc"]
    cc, bc, carry = list(ins[:ncc]), list(ins[ncc:ncc + nbc]), list(ins[ncc + nbc:])
    cond, body = e.params["cond_graph"], e.params["body_graph"]
    while True:
        pred = typed_graph(cond, carry + cc, typer.mesh)[1][0]
        out = typed_graph(body, carry + bc, typer.mesh)[1]
        grown = [c | o | pred for c, o in zip(carry, out)]
        if grown == carry:
            break
        carry = grown
    lifted = tuple(typer.lift(a, v, typer.mesh, e.source) for a, v in zip(e.inputs[ncc + nbc:], carry))
    inputs = tuple(e.inputs[:ncc + nbc]) + lifted
    params = {**e.params.kwargs(), "cond_graph": typed_graph(cond, carry + cc, typer.mesh)[0],
              "body_graph": typed_graph(body, carry + bc, typer.mesh, lift_outputs_to=carry)[0]}
    typer._emit(Eqn(e.primitive, inputs, e.outputs, Params(params), e.source), inputs, carry)


@dataclasses.dataclass(frozen=True, eq=False)
class _TypedRule:
    """A custom rule (custom_jvp's ``jvp``, custom_vjp's ``fwd``/``bwd``) run as JAX runs it
    inside ``shard_map``: staged with its inputs typed (``pvary`` where an invariant value
    meets a varying one, so its transpose sums over the processes), then evaluated. ``in_vma``
    gives the axes of each argument list's values; ``out_box`` receives the staged outputs'
    (``fwd`` hands its residuals' to ``bwd`` through it)."""

    rule: Callable[..., Any]
    in_vma: tuple[Any, ...]
    mesh: MeshAxes
    out_box: list = dataclasses.field(default_factory=list, repr=False)
    check_outputs: tuple[frozenset, ...] | None = None

    @property
    def __name__(self) -> str:
        return getattr(self.rule, "__name__", "rule")

    def __call__(self, *lists: list[Any]) -> Any:
        vmas = [v() if callable(v) else v for v in self.in_vma]
        flat = [x for part in lists for x in part]
        avals = [dataclasses.replace(abstractify(x), vma=v) for part, vma in zip(lists, vmas)
                 for x, v in zip(part, vma)]
        sizes = [len(part) for part in lists]
        shape: list[tuple[bool, list[int]]] = []

        def staged(*xs: Any) -> list[Any]:
            parts, start = [], 0
            for n in sizes:
                parts.append(list(xs[start:start + n]))
                start += n
            outs = self.rule(*parts)
            groups = [list(o) for o in outs] if isinstance(outs, tuple) else [list(outs)]
            shape.append((isinstance(outs, tuple), [len(g) for g in groups]))
            return [x for g in groups for x in g]

        with mesh_axes_in_scope(self.mesh):
            graph, closure = stage(staged, avals)
        out_vma = [v.aval.vma if isinstance(v, Var) else _INVARIANT for v in graph.outvars]
        self.out_box[:] = [out_vma]
        if self.check_outputs is not None:
            _check_cotangent_types(self.__name__, out_vma, self.check_outputs)
        values = eval_graph(graph, *flat, *closure)
        is_tuple, sizes_out = shape[0]
        groups, start = [], 0
        for n in sizes_out:
            groups.append(list(values[start:start + n]))
            start += n
        return tuple(groups) if is_tuple else groups[0]


def _check_cotangent_types(name: str, got: Sequence[frozenset], want: Sequence[frozenset]) -> None:
    """JAX's rule: a custom_vjp ``bwd`` gives each input a cotangent of the input's own type."""
    for i, (g, w) in enumerate(zip(got, want)):
        if g - w:
            raise ValueError(f"custom_vjp bwd rule {name} gave input {i} a cotangent varying over mesh axes "
                             f"{sorted(g - w, key=repr)}, but the input is invariant over them; psum it over "
                             "those axes in bwd (JAX requires the same)")


def _type_custom(typer: _Typer, e: Eqn, ins: list[frozenset]) -> None:
    """``custom_jvp_call``/``custom_vjp_call``: outputs typed by the function's own graph (JAX's
    rule), the user's rules staged with typed inputs when they run (:class:`_TypedRule`)."""
    call, out_vma = typed_graph(e.params["call"], ins, typer.mesh)
    n = len(ins) - e.params["num_consts"]
    params = {**e.params.kwargs(), "call": call}
    if e.primitive.name == "custom_jvp_call":
        params["jvp"] = _TypedRule(e.params["jvp"], (ins[:n], ins[:n]), typer.mesh)
    else:
        fwd = _TypedRule(e.params["fwd"], (ins[:n],), typer.mesh)

        def residuals() -> list[frozenset]:
            return list(fwd.out_box[0][len(out_vma):]) if fwd.out_box else []

        params["fwd"] = fwd
        params["bwd"] = _TypedRule(e.params["bwd"], (residuals, tuple(out_vma)), typer.mesh,
                                   check_outputs=tuple(ins[:n]))
    typer._emit(Eqn(e.primitive, e.inputs, e.outputs, Params(params), e.source), e.inputs, out_vma)


def _type_remat_tangent(typer: _Typer, e: Eqn, ins: list[frozenset]) -> None:
    """``remat_tangent``: its JVP graph (inputs and tangents, not the saved values) typed; the
    tangents it gives are that graph's second half of outputs."""
    np_, ns = e.params["num_primals"], e.params.get("num_saved", 0)
    graph, out_vma = typed_graph(e.params["jvp_graph"], ins[:np_] + ins[np_ + ns:], typer.mesh)
    params = Params({**e.params.kwargs(), "jvp_graph": graph})
    typer._emit(Eqn(e.primitive, e.inputs, e.outputs, params, e.source), e.inputs, out_vma[len(out_vma) // 2:])


def _typed_param(value: Any, vma: frozenset, mesh: MeshAxes) -> Any:
    if isinstance(value, Graph):
        return typed_graph(value, [vma] * len(value.invars), mesh, lift_outputs_to=vma)[0]
    if isinstance(value, tuple):
        return tuple(_typed_param(v, vma, mesh) for v in value)
    return value


def typed_graph(graph: Graph, in_vma: Sequence[frozenset], mesh: MeshAxes,
                lift_outputs_to: frozenset | Sequence[frozenset] | None = None) -> tuple[Graph, list[frozenset]]:
    """``graph`` with ``pvary`` inserted so that every equation reads values of one type, and
    the mesh axes each output varies over (inputs vary over ``in_vma``, constants over none);
    ``lift_outputs_to`` (one set for all outputs, or one per output) raises the outputs' types."""
    typer = _Typer(mesh)
    typer.vma.update(zip(graph.invars, in_vma))
    typer.vma.update((v, _INVARIANT) for v in graph.constvars)
    for e in graph.eqns:
        typer.equation(e)
    outs = [typer.read(a) for a in graph.outvars]
    if lift_outputs_to is not None:
        targets = [lift_outputs_to] * len(outs) if isinstance(lift_outputs_to, frozenset) else lift_outputs_to
        outs = [typer.lift(a, t, mesh, None) for a, t in zip(outs, targets)]
    typed = Graph(graph.invars, graph.constvars, graph.consts, tuple(typer.eqns), tuple(outs))
    return typed, [typer.of(a) for a in outs]


_SUBGRAPH_RULES: dict[str, Callable[[_Typer, Eqn, list[frozenset]], None]] = {
    "jit_call": _type_call,
    "cond": _type_cond,
    "scan": _type_scan,
    "while": _type_while,
    "remat": _type_call,
    "custom_jvp_call": _type_custom,
    "custom_vjp_call": _type_custom,
    "remat_tangent": _type_remat_tangent,
}


# --- shard_map --------------------------------------------------------------------------------


def _name(f: Callable[..., Any]) -> str:
    return getattr(f, "__name__", type(f).__name__)


def shard_map(f: Callable[..., Any] | None = None, /, *, mesh: Mesh, in_specs: Any, out_specs: Any,
              check_vma: bool = True, axis_names: Any = frozenset()) -> Any:
    """Map ``f`` over the blocks of a mesh, one device per process (JAX's ``shard_map``): each
    process calls the result with its own blocks and gets its own blocks back. Inside ``f``
    the collectives over the mesh's axis names run over the processes. ``check_vma`` (JAX's
    name) checks that an output declared replicated (an axis absent from its out spec) does
    not vary over that axis."""
    if f is None:
        return functools.partial(shard_map, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                 check_vma=check_vma, axis_names=axis_names)
    return _mapped(f, mesh, in_specs, out_specs, check_vma, per_device=False)


def per_device_map(f: Callable[..., Any], mesh: Mesh, in_specs: Any, out_specs: Any) -> Callable[..., Any]:
    """``shard_map`` with ``pmap``'s rules: every value varies over the mesh, and a reduction's
    result is each device's own copy, so its transpose sums over the devices (``pmap``'s
    gradients, which JAX's ``pmap`` keeps)."""
    return _mapped(f, mesh, in_specs, out_specs, check_vma=False, per_device=True)


def _mapped(f: Callable[..., Any], mesh: Mesh, in_specs: Any, out_specs: Any, check_vma: bool,
            per_device: bool) -> Callable[..., Any]:
    if not isinstance(mesh, Mesh):
        raise TypeError(f"shard_map needs mesh=fungraph.sharding.Mesh (from fungraph.make_mesh), got {mesh!r}")

    @functools.wraps(f)
    def mapped(*args: Any) -> Any:
        if mesh.size != _mpi.process_count():
            raise ValueError(f"shard_map over {mesh!r} ({mesh.size} devices) needs one process per device, but "
                             f"{_mpi.process_count()} processes run (start them with mpiexec -n {mesh.size})")
        leaves, in_tree = tree_flatten(args)
        specs = _flat_specs(in_specs, args, "in_specs")
        everything = frozenset(mesh.axis_names)
        in_vma = [everything if per_device else frozenset(s.axis_names()) for s in specs]
        avals = [dataclasses.replace(abstractify(x), vma=v) for x, v in zip(leaves, in_vma)]
        for s, a in zip(specs, avals):
            _check_spec(s, mesh, a.ndim, "in_specs")
        out_tree: list[Any] = []

        def flat(*xs: Any) -> list[Any]:
            out = f(*tree_unflatten(in_tree, xs))
            out_leaves, tree = tree_flatten(out)
            out_tree.append((tree, out))
            return out_leaves

        with mesh_axes_in_scope(mesh.shape_tuple, checked=not per_device):
            graph, closure = stage(flat, avals)
        typed, out_vma = typed_graph(graph, in_vma + [_INVARIANT] * len(closure), mesh.shape_tuple)
        tree, example = out_tree[0]
        for j, (s, v, a) in enumerate(zip(_flat_specs(out_specs, example, "out_specs"), out_vma, graph.out_avals)):
            _check_spec(s, mesh, a.ndim, "out_specs")
            extra = v - set(s.axis_names())
            if check_vma and extra:
                raise ValueError(
                    f"shard_map out_specs {s!r} for output {j} ({a}) say it is replicated over mesh axes "
                    f"{sorted(extra, key=repr)}, but it varies over them; reduce it (psum, pmean, pmax, all_gather) "
                    "or name the axes in its out spec (or pass check_vma=False)")
        outs = jit_call_p.bind(*leaves, *closure, call=typed, name=f"shard_map({_name(f)})", backend="cpu")
        return tree_unflatten(tree, list(outs))

    return mapped
