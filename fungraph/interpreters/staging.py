"""Staging: trace a Python function into a closed Graph (``make_graph``)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fungraph import _ref_frames as ref_frames
from fungraph import dtypes
from fungraph.array import Array
from fungraph.core import (
    NestingError,
    Primitive,
    Trace,
    Tracer,
    TypedConstant,
    checked_abstract_eval,
    deep_recursion,
    full_raise,
    nesting_error,
    new_dynamic,
    new_main,
    to_concrete_dtype_array,
    user_source,
)
from fungraph.ir import CONST_REF, Atom, Eqn, Graph, Literal, Params, ShapedArray, Var, literal_ref
from fungraph.primitives.mesh_collectives import pvary_p, staged_types, typing_mesh
from fungraph.tree_util import PyTreeDef, register_pytree_node, tree_flatten, tree_map, tree_unflatten


class GraphTracer(Tracer):
    __slots__ = ("_aval",)

    def __init__(self, trace: GraphTrace, aval: ShapedArray) -> None:
        self._trace = trace
        self._aval = aval

    @property
    def aval(self) -> ShapedArray:
        return self._aval


class WeakGraphTracer(GraphTracer):
    """A jit argument passed as a Python scalar: weakly typed, as JAX's, so promotion keeps the
    other operand's dtype (``x - lr * x`` stays float32 for ``lr=0.1``)."""

    __slots__ = ()
    weak_type = True


class GraphBuilder:
    """Collects equations; values from outside (concrete arrays, outer tracers) become constants."""

    def __init__(self) -> None:
        self.eqns: list[Eqn] = []
        self.tracer_to_atom: dict[int, Atom] = {}
        self.tracers: list[GraphTracer] = []
        self.const_tracers: dict[int, GraphTracer] = {}
        self.const_values: dict[Var, Any] = {}
        # The values behind ``const_tracers``' keys: an id stays theirs while the builder lives.
        self.const_keys: list[Any] = []
        self.invars: list[Var] = []
        # The graph's structural key, built while tracing (see Graph.structural_key).
        self.refs: dict[Var, int] = {}
        self.rows: list[tuple[int, ...]] = []
        self.n_concrete = 0
        self.n_outs = 0
        self.n_closure = 0
        self.n_args_at_first_closure: int | None = None

    def ref(self, a: Atom) -> int:
        return self.refs[a] if isinstance(a, Var) else literal_ref(a)

    def new_tracer(self, trace: GraphTrace, aval: ShapedArray) -> tuple[GraphTracer, Var]:
        t = GraphTracer(trace, aval)
        v = Var(aval)
        self.tracers.append(t)
        self.tracer_to_atom[id(t)] = v
        return t, v

    def atom(self, t: GraphTracer) -> Atom:
        try:
            return self.tracer_to_atom[id(t)]
        except KeyError:
            raise TypeError(f"tracer {t} belongs to a different staging context") from None


class GraphTrace(Trace):
    """Records every primitive applied to its tracers as an equation."""

    @property
    def builder(self) -> GraphBuilder:
        return self.main.global_data

    def new_arg(self, aval: ShapedArray, weak: bool = False) -> GraphTracer:
        b = self.builder
        t, v = b.new_tracer(self, aval)
        if weak:
            t.__class__ = WeakGraphTracer
        b.refs[v] = -1 - len(b.invars)
        b.invars.append(v)
        return t

    def pure(self, val: Any) -> GraphTracer:
        key = id(val)
        existing = self.builder.const_tracers.get(key)
        if existing is not None:
            return existing
        original = val
        if val.__class__ is TypedConstant:
            val = val.view(np.ndarray)
            aval = ShapedArray(val.shape, val.dtype)
        elif not isinstance(val, Tracer):
            val = np.asarray(val)
            val = val.astype(dtypes.canonicalize(val.dtype), copy=False)
            aval = ShapedArray(val.shape, val.dtype)
        else:
            aval = val.aval
        t = GraphTracer(self, aval)
        self.builder.tracers.append(t)
        if not isinstance(val, Tracer) and val.ndim == 0:
            self.builder.tracer_to_atom[id(t)] = Literal(val.item(), aval)
        else:
            v = Var(aval)
            self.builder.tracer_to_atom[id(t)] = v
            self._add_const(v, val)
            self.builder.const_tracers[key] = t
            self.builder.const_keys.append(original)
        return t

    def _add_const(self, v: Var, val: Any) -> None:
        b = self.builder
        b.const_values[v] = val
        if isinstance(val, Tracer):
            if b.n_args_at_first_closure is None:
                b.n_args_at_first_closure = len(b.invars)
            b.refs[v] = -1 - b.n_args_at_first_closure - b.n_closure
            b.n_closure += 1
        else:
            b.refs[v] = CONST_REF - b.n_concrete
            b.n_concrete += 1

    lift = pure

    def process_primitive(self, prim: Primitive, tracers: Sequence[Any], params: Params) -> list[GraphTracer]:
        mesh = typing_mesh()
        if mesh is not None:
            return self._typed(prim, tracers, params, mesh)
        avals_out = checked_abstract_eval(prim, [t.aval for t in tracers], params)
        return self._record(prim, tracers, params, avals_out)

    def _typed(self, prim: Primitive, tracers: Sequence[Any], params: Params, mesh: Any) -> list[GraphTracer]:
        """Inside ``shard_map``: raise inputs with ``pvary`` to the axes the equation needs
        them to vary over, and give its outputs the axes they vary over (JAX's ``vma``), so
        that transformations traced inside (``grad`` of a local loss) transpose correctly."""
        avals_out = checked_abstract_eval(prim, [t.aval for t in tracers], params)
        targets, out_vma, pvary_mesh = staged_types(prim, [t.aval.vma for t in tracers], params, len(avals_out),
                                                    mesh)
        tracers = [self._lift(t, want, pvary_mesh) for t, want in zip(tracers, targets)] + list(tracers[len(targets):])
        avals_out = [dataclasses.replace(a, vma=v) for a, v in zip(avals_out, out_vma)]
        return self._record(prim, tracers, params, avals_out)

    def _lift(self, t: GraphTracer, want: frozenset, mesh: Any) -> GraphTracer:
        missing = want - t.aval.vma
        if not missing or not dtypes.is_inexact(t.aval.dtype) or isinstance(self.builder.atom(t), Literal):
            return t
        order = [n for n, _ in mesh]
        for name in sorted(missing, key=lambda n: order.index(n) if n in order else len(order)):
            t = self.process_primitive(pvary_p, [t], Params({"axis_name": name, "mesh": mesh}))[0]
        return t

    def _record(self, prim: Primitive, tracers: Sequence[Any], params: Params,
                avals_out: Sequence[ShapedArray]) -> list[GraphTracer]:
        b = self.builder
        inputs = tuple(b.atom(t) for t in tracers)
        outs = []
        outvars = []
        refs = b.refs
        for a in avals_out:
            t, v = b.new_tracer(self, a)
            outs.append(t)
            outvars.append(v)
        eqn = Eqn(prim, inputs, tuple(outvars), params, user_source())
        b.rows.append((eqn.signature, *[b.ref(a) for a in inputs]))
        for v in outvars:
            refs[v] = b.n_outs
            b.n_outs += 1
        b.eqns.append(eqn)
        return outs


def stage(fun: Callable[..., Sequence[Any]], in_avals: Sequence[ShapedArray],
          weak: Sequence[bool] = ()) -> tuple[Graph, list[Any]]:
    """Trace ``fun`` (flat arrays in, flat arrays out) to a Graph; ``weak[i]`` marks argument
    ``i`` weakly typed (a Python scalar).

    Returns ``(graph, closure_args)``: values ``fun`` closed over that are tracers of an
    outer transformation become extra trailing graph inputs, and must be passed after the
    arguments when the graph is evaluated. Concrete closed-over arrays become constants.
    """
    builder = GraphBuilder()
    with ref_frames.frame() as refs, deep_recursion(), new_main(GraphTrace, builder) as main:
        with new_dynamic(main):
            trace = GraphTrace(main)
            weak = tuple(weak) + (False,) * (len(in_avals) - len(weak))
            args = [trace.new_arg(a, w) for a, w in zip(in_avals, weak)]
            try:
                outs = fun(*args)
            except RecursionError as err:
                if isinstance(err, NestingError):
                    raise
                raise nesting_error("the traced function", main.level) from None
            out_tracers = [_raise_out(trace, o) for o in outs]
    if refs.touched:
        raise ref_frames.RefsTouched(list(refs.touched))
    return build_graph(builder, out_tracers)


def weak_positions(values: Sequence[Any]) -> tuple[int, ...]:
    """Where ``values`` are weakly typed (Python scalars, weak arrays and traced values)."""
    return tuple(i for i, v in enumerate(values) if dtypes.is_weak(v))


def _raise_out(trace: GraphTrace, out: Any) -> GraphTracer:
    if isinstance(out, Tracer) or isinstance(out, (np.ndarray, np.generic, bool, int, float)):
        t = full_raise(trace, out)
        if isinstance(trace.builder.tracer_to_atom.get(id(t)), Literal):
            return _materialise_literal(trace, t)
        return t
    raise TypeError(f"a traced function returned {type(out).__name__}, which is not an array")


def _materialise_literal(trace: GraphTrace, t: GraphTracer) -> GraphTracer:
    lit = trace.builder.tracer_to_atom[id(t)]
    assert isinstance(lit, Literal)
    new, v = trace.builder.new_tracer(trace, lit.aval)
    trace._add_const(v, np.asarray(lit.value, lit.aval.dtype))
    return new


def split_consts(builder: GraphBuilder) -> tuple[list[Var], list[Any], list[Var], list[Any]]:
    """What ``builder`` closed over: ``(constvars, concrete values, closure vars, outer tracers)``."""
    constvars: list[Var] = []
    consts: list[Any] = []
    closure_vars: list[Var] = []
    closure_args: list[Any] = []
    for v, val in builder.const_values.items():
        if isinstance(val, Tracer):
            closure_vars.append(v)
            closure_args.append(val)
        else:
            constvars.append(v)
            consts.append(val)
    return constvars, consts, closure_vars, closure_args


def build_graph(builder: GraphBuilder, outs: Sequence[GraphTracer]) -> tuple[Graph, list[Any]]:
    """The closed Graph of what ``builder`` recorded, with ``outs`` as outputs, and the outer
    tracers it closes over (its trailing inputs)."""
    constvars, consts, closure_vars, closure_args = split_consts(builder)
    outvars = tuple(builder.atom(t) for t in outs)
    graph = Graph(tuple(builder.invars) + tuple(closure_vars), tuple(constvars), tuple(consts),
                  tuple(builder.eqns), outvars)
    if builder.n_args_at_first_closure in (None, len(builder.invars)):
        key = graph.key_from_rows(tuple(builder.rows), tuple(builder.ref(a) for a in outvars))
        graph.__dict__["structural_key"] = key
    return graph, closure_args


# --- pytrees of arguments around a trace (api, jit and custom_derivatives call these) --------


@dataclass(frozen=True, repr=False)
class ShapeDtypeStruct:
    """An abstract argument: tracing needs only its shape and dtype. ``sharding`` and
    ``weak_type`` are kept for programs that read them back, as ``jax.ShapeDtypeStruct``'s."""

    shape: tuple[int, ...]
    dtype: Any
    sharding: Any = dataclasses.field(default=None, kw_only=True, compare=False)
    weak_type: bool = dataclasses.field(default=False, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if not isinstance(self.dtype, dtypes.KeyDType):
            object.__setattr__(self, "dtype", dtypes.canonicalize(self.dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def update(self, **changes: Any) -> ShapeDtypeStruct:
        """A copy with the given fields (``shape``, ``dtype``, ``sharding``, ``weak_type``) replaced."""
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"


def abstractify(x: Any) -> ShapedArray:
    """The abstract value of an argument leaf; errors name the offending type."""
    if isinstance(x, Tracer):
        return x.aval
    if isinstance(x, (ShapeDtypeStruct, ShapedArray)):
        return ShapedArray(x.shape, x.dtype)
    if isinstance(x, Array):
        # a host result made by numpy's own operators may hold a 64-bit dtype in 32-bit mode
        aval = x.aval
        dt = dtypes.canonicalize(aval.dtype)
        return aval if dt == aval.dtype else ShapedArray(aval.shape, dt)
    try:
        arr = to_concrete_dtype_array(x)
    except TypeError as err:
        raise TypeError(f"argument of type {type(x).__name__} is not an array: {err}") from None
    if arr.dtype == object:
        raise TypeError(f"argument of type {type(x).__name__} is not a valid array")
    return ShapedArray(arr.shape, arr.dtype)


def split_static(args: Sequence[Any], static_argnums: Sequence[int]) -> tuple[list[Any], dict[int, Any]]:
    n = len(args)
    static = {i % n: args[i] for i in static_argnums if -n <= i < n}
    dynamic = [a for i, a in enumerate(args) if i not in static]
    return dynamic, static


def merge_static(dynamic: Sequence[Any], static: dict[int, Any]) -> list[Any]:
    it = iter(dynamic)
    return [static[i] if i in static else next(it) for i in range(len(dynamic) + len(static))]


class _Float0Zeros:
    """A ``float0`` output (the gradient of an integer input) held in the output tree rather
    than as a value: a float0 array is always zeros, known by its shape alone, and the IR has
    no float0 dtype to carry it through ``jit`` or ``vmap``."""

    __slots__ = ("shape",)

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape


register_pytree_node(_Float0Zeros, lambda z: ((), z.shape), lambda shape, _: np.zeros(shape, dtypes.float0))


def _is_float0(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.dtype == dtypes.float0


def flatten_outputs(out: Any) -> tuple[list[Any], PyTreeDef]:
    """``tree_flatten`` of a traced function's output, its float0 leaves moved into the tree
    (unflattening makes them again as float0 zeros)."""
    leaves, tree = tree_flatten(out)
    if not any(_is_float0(x) for x in leaves):
        return leaves, tree
    return tree_flatten(tree_map(lambda x: _Float0Zeros(x.shape) if _is_float0(x) else x, out))


def flat_fun(fun: Callable[..., Any], in_tree: PyTreeDef, static: dict[int, Any],
             out_tree_box: list[PyTreeDef], weak_box: list[tuple[int, ...]] | None = None) -> Callable[..., list[Any]]:
    """``fun`` as a function of flat leaves returning flat leaves; records its output tree, and
    in ``weak_box`` the positions of its weakly typed outputs (JAX's weak outputs of ``jit``)."""

    def flat(*leaves: Any) -> list[Any]:
        dynamic = tree_unflatten(in_tree, leaves)
        out = fun(*merge_static(dynamic, static))
        out_leaves, out_tree = flatten_outputs(out)
        out_tree_box.append(out_tree)
        if weak_box is not None:
            weak_box.append(weak_positions(out_leaves))
        return out_leaves

    return flat
