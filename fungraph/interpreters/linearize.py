"""Reverse mode at concrete primals, JAX's ``linearize`` outside ``jit``.

A JVP whose primals are concrete arrays and whose tangents are tracers of a staging trace
below it: every primal operation runs now, so Python control flow on values works inside
``grad``, and only the tangent operations are recorded, into a graph that is linear in the
tangents. ``transpose.py`` then runs that graph backwards, as for the staged path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fungraph import dtypes
from fungraph.core import NOT_DIFFERENTIABLE, Primitive, Tracer, new_main
from fungraph.interpreters.dce import dce
from fungraph.interpreters.eval import eval_graph
from fungraph.interpreters.jvp import JVPTrace, JVPTracer, jvp_flat
from fungraph.interpreters.staging import GraphBuilder, GraphTrace, GraphTracer, split_consts, stage
from fungraph.interpreters.transpose import Linearized, partial_eval
from fungraph.ir import Graph, Literal, Params, ShapedArray, Var, aval_of, readonly
from fungraph.primitives._rules import zeros


class LinearizeTrace(JVPTrace):
    """A JVP trace over concrete primals. A primitive whose jvp rule binds primal and tangent
    in one equation (control flow, jit calls: those with a ``partial_eval`` rule or marked
    ``joint_jvp``) is split here, one equation at a time, so that its primal outputs are
    concrete too."""

    def process_primitive(self, prim: Primitive, tracers: Sequence[Any], params: Params) -> list[JVPTracer]:
        tangents = [t.tangent for t in tracers]
        joint = prim.partial_eval is not None or prim.joint_jvp
        if not joint or prim.jvp is NOT_DIFFERENTIABLE or all(t is None for t in tangents):
            return super().process_primitive(prim, tracers, params)
        p_out, t_out = _split_jvp(prim, [t.primal for t in tracers], tangents, params)
        return [JVPTracer(self, p, t) for p, t in zip(p_out, t_out)]


def _split_jvp(prim: Primitive, primals: Sequence[Any], tangents: Sequence[Any], params: Params,
               ) -> tuple[list[Any], list[Any]]:
    """Stage the primitive's JVP, evaluate its primal part now, and bind its linear part on
    the tangents (which records it in the graph being built)."""
    n = len(primals)
    mask = [t is not None for t in tangents]
    t_in = [t for t in tangents if t is not None]

    def jvp_fun(*args: Any) -> list[Any]:
        ts = iter(args[n:])
        p_out, t_out = prim.rule("jvp")(list(args[:n]), [next(ts) if m else None for m in mask], **params)
        if not prim.multiple_results:
            p_out, t_out = [p_out], [t_out]
        return list(p_out) + [zeros(aval_of(p)) if t is None else t for p, t in zip(p_out, t_out)]

    graph, closure = stage(jvp_fun, [aval_of(p) for p in primals] + [aval_of(t) for t in t_in])
    known, linear, r, out_unknown = partial_eval(graph, [False] * n + [True] * len(t_in) + [False] * len(closure))
    n_out = len(graph.outvars) // 2
    known_vals = eval_graph(known, *primals, *closure)
    n_known = len(known.outvars) - r
    lin_vals = iter(eval_graph(linear, *known_vals[n_known:], *t_in))
    known_t = iter(known_vals[n_out:n_known])
    t_out = [next(lin_vals) if u else next(known_t) for u in out_unknown[n_out:]]
    p_out = known_vals[:n_out]
    return p_out, [t if dtypes.is_inexact(aval_of(p).dtype) else None for p, t in zip(p_out, t_out)]


def linearize_concrete(fun: Callable[..., Sequence[Any]], primals: Sequence[Any],
                       in_avals: Sequence[ShapedArray], differentiable: Sequence[bool],
                       ) -> tuple[list[Any], Linearized, list[Any], list[Any]]:
    """``linearize_flat`` at concrete primals: ``(primal outputs, Linearized, known tangent
    outputs, residual values)``; the residuals are the concrete arrays (and values of outer
    transformations) the tangent operations read."""
    builder = GraphBuilder()
    with new_main(GraphTrace, builder) as gmain:
        trace = GraphTrace(gmain)
        # a tangent is typed as its primal, weakly where the primal is (JAX's tangent types)
        t_args = iter([trace.new_arg(a, dtypes.is_weak(p)) for p, a, d in zip(primals, in_avals, differentiable) if d])
        tangents = [next(t_args) if d else None for d in differentiable]
        p_out, t_out = jvp_flat(fun, primals, tangents, instantiate=False, trace_type=LinearizeTrace)
        staged = [_staged_var(builder, t, gmain) is not None for t in t_out]
        # A rule that binds a primitive on primals and tangents together leaves primal outputs
        # staged (an island): the split below computes them.
        island = [_staged_var(builder, p, gmain) is not None for p in p_out]
        outs = [t for t, s in zip(t_out, staged) if s] + [p for p, s in zip(p_out, island) if s]
        outvars = tuple(builder.atom(t) for t in outs)
    constvars, consts, closure_vars, closure = split_consts(builder)
    # The residuals are inputs of the linear graph, not constants: a graph's constants are
    # hashed into its structural key, which this graph never needs. Like constants, they are
    # read-only (a caller's writeable array is copied: changing it later changes no gradient).
    res_vals = [readonly(c) for c in consts] + closure
    linear = Graph(tuple(constvars) + tuple(closure_vars) + tuple(builder.invars), (), (),
                   tuple(builder.eqns), outvars)
    linear, res_vals, unknown, known_vals = _split_nonlinear(linear, res_vals, len(builder.invars), any(island))
    n_staged = sum(staged)
    if any(unknown[n_staged:]):
        raise AssertionError("a primal output depends on tangents")
    linear = Graph(linear.invars, linear.constvars, linear.consts, linear.eqns, linear.outvars[:sum(unknown)])
    linear = dce(linear)
    known = iter(known_vals)
    unknown_t = iter(unknown[:n_staged])
    out_unknown: list[bool] = []
    known_tangents: list[Any] = []
    for p, t, s in zip(p_out, t_out, staged):
        if s and next(unknown_t):
            out_unknown.append(True)
            continue
        out_unknown.append(False)
        value = next(known) if s else _known_value(builder, t, gmain)
        known_tangents.append(zeros(aval_of(p)) if value is None else value)
    primals_out = [next(known) if s else _known_value(builder, p, gmain) for p, s in zip(p_out, island)]
    lin = Linearized(None, linear, len(res_vals), len(p_out), tuple(out_unknown))
    return primals_out, lin, known_tangents, res_vals


def _staged_var(builder: GraphBuilder, t: Any, main: Any) -> Var | None:
    """The graph variable of tangent ``t`` when an equation of the linear graph computes it
    (or it is a tangent input), else None: a zero, a constant or an outer value."""
    if not isinstance(t, GraphTracer) or t._trace.main is not main:
        return None
    atom = builder.tracer_to_atom[id(t)]
    if isinstance(atom, Literal) or atom in builder.const_values:
        return None
    return atom


def _known_value(builder: GraphBuilder, t: Any, main: Any) -> Any:
    """The value of an output that no equation of the graph being built computes."""
    if not isinstance(t, GraphTracer) or t._trace.main is not main:
        return t
    atom = builder.tracer_to_atom[id(t)]
    return atom.array if isinstance(atom, Literal) else builder.const_values[atom]


def _split_nonlinear(linear: Graph, res_vals: list[Any], n_t: int, force: bool,
                     ) -> tuple[Graph, list[Any], list[bool], list[Any]]:
    """A primitive's jvp rule may bind another call-like primitive on primals and tangents
    together (the ``while`` inside ``while_fwd``'s rule): split such equations as the staged
    path does and evaluate their primal part now. Returns the linear graph, its residual
    values, for each output whether the linear graph computes it, and the others' values
    (``force``: some outputs are primal values of such equations)."""
    if not force and not any(e.primitive.partial_eval is not None or e.primitive.joint_jvp for e in linear.eqns):
        return linear, res_vals, [True] * len(linear.outvars), []
    n_r = len(res_vals)
    known, lin, r, out_unknown = partial_eval(linear, [False] * n_r + [True] * n_t)
    known_vals = eval_graph(known, *res_vals)
    n_known = len(known.outvars) - r
    return lin, list(known_vals[n_known:]), list(out_unknown), list(known_vals[:n_known])


def is_concrete(x: Any) -> bool:
    """Whether ``x`` is a concrete array or stands for one (a JVP over concrete primals)."""
    return not isinstance(x, Tracer) or x.to_concrete_value() is not None
