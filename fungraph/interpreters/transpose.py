"""Reverse mode from the IR: split a JVP graph into its primal part and its linear tangent
part (partial evaluation), then run the tangent part backwards with transpose rules."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fungraph import dtypes
from fungraph.core import MissingTransposeError, source_of
from fungraph.interpreters.dce import dce
from fungraph.interpreters.eval import add_eqn_note, eval_graph
from fungraph.interpreters.jvp import jvp_flat
from fungraph.interpreters.staging import stage
from fungraph.ir import Atom, Eqn, Graph, Literal, ShapedArray, Var
from fungraph.primitives._rules import UndefinedPrimal, zeros
from fungraph.primitives.elementwise import add


@dataclass(frozen=True)
class Linearized:
    """A function split at a primal point: ``known`` maps primals to (known outputs,
    residuals); ``linear`` maps (residuals, tangents) to the tangent outputs that depend on
    the tangents, and is linear in them. ``out_unknown[i]`` says whether tangent output ``i``
    comes from ``linear`` (otherwise it is a known zero). ``known`` is None when the primal
    part ran concretely (``linearize_concrete``)."""

    known: Graph | None
    linear: Graph
    num_residuals: int
    num_primal_outputs: int
    out_unknown: tuple[bool, ...]


def partial_eval(graph: Graph, unknown_inputs: Sequence[bool]) -> tuple[Graph, Graph, int, tuple[bool, ...]]:
    """Split ``graph`` by dependence on the unknown inputs.

    Returns ``(known, unknown, r, out_unknown)``: ``known`` takes the known inputs and returns
    the outputs that do not depend on unknowns followed by ``r`` residuals; ``unknown`` takes
    the residuals then the unknown inputs and returns the remaining outputs, in order;
    ``out_unknown`` says which of ``graph``'s outputs went where.
    """
    unknown: set[Var] = {v for v, u in zip(graph.invars, unknown_inputs) if u}

    def is_unknown(a: Atom) -> bool:
        return isinstance(a, Var) and a in unknown

    known_eqns: list[Eqn] = []
    unknown_eqns: list[Eqn] = []
    for e in graph.eqns:
        mask = [is_unknown(a) for a in e.inputs]
        if not any(mask):
            known_eqns.append(e)
        elif e.primitive.partial_eval is not None and not all(mask):
            known_part, unknown_part = e.primitive.partial_eval(e, mask)
            known_eqns.extend(known_part)
            unknown_eqns.extend(unknown_part)
            unknown.update(o for u in unknown_part for o in u.outputs)
        else:
            unknown_eqns.append(e)
            unknown.update(e.outputs)
    residuals: list[Var] = []
    seen: set[Var] = set()
    for e in unknown_eqns:
        for a in e.inputs:
            if isinstance(a, Var) and a not in unknown and a not in seen:
                seen.add(a)
                residuals.append(a)
    known_outs = [a for a in graph.outvars if not is_unknown(a)]
    unknown_outs = [a for a in graph.outvars if is_unknown(a)]
    known_eqns = _live_eqns(known_eqns, known_outs + residuals)
    known_invars = [v for v, u in zip(graph.invars, unknown_inputs) if not u]
    constvars = [v for v in graph.constvars]
    known = Graph(tuple(known_invars), tuple(constvars), graph.consts, tuple(known_eqns),
                  tuple(known_outs) + tuple(residuals))
    lin_invars = [Var(r.aval) for r in residuals]
    rename = dict(zip(residuals, lin_invars))
    unk_invars = [v for v, u in zip(graph.invars, unknown_inputs) if u]
    lin_eqns = tuple(Eqn(e.primitive, tuple(rename.get(a, a) if isinstance(a, Var) else a for a in e.inputs),
                         e.outputs, e.params, e.source) for e in unknown_eqns)
    linear = Graph(tuple(lin_invars) + tuple(unk_invars), (), (), lin_eqns, tuple(unknown_outs))
    return known, linear, len(residuals), tuple(is_unknown(a) for a in graph.outvars)


def _live_eqns(eqns: Sequence[Eqn], outs: Sequence[Atom]) -> list[Eqn]:
    return list(dce(Graph((), (), (), tuple(eqns), tuple(a for a in outs if isinstance(a, Var)))).eqns)


def linearize_flat(fun: Callable[..., Sequence[Any]], primals: Sequence[Any],
                   in_avals: Sequence[ShapedArray], differentiable: Sequence[bool],
                   ) -> tuple[list[Any], Linearized, list[Any], list[Any]]:
    """Stage the JVP of ``fun``, split it, and evaluate the known part on ``primals``.

    Returns ``(primal outputs, Linearized, known tangent outputs, residual values)``.
    """
    tan_avals = [a for a, d in zip(in_avals, differentiable) if d]
    n = len(in_avals)

    def jvp_fun(*args: Any) -> list[Any]:
        ps, ts = args[:n], iter(args[n:])
        tangents = [next(ts) if d else None for d in differentiable]
        p_out, t_out = jvp_flat(fun, ps, tangents)
        return list(p_out) + list(t_out)

    weak = [dtypes.is_weak(p) for p in primals]
    graph, closure = stage(jvp_fun, list(in_avals) + tan_avals, weak + [w for w, d in zip(weak, differentiable) if d])
    n_tan = len(tan_avals)
    # closure values are trailing invars after the tangents; they are known
    unknown_mask = [False] * n + [True] * n_tan + [False] * len(closure)
    known, linear, r, out_unknown = partial_eval(graph, unknown_mask)
    n_out = len(graph.outvars) // 2
    if any(out_unknown[:n_out]):
        raise AssertionError("a primal output depends on tangents")
    known_vals = eval_graph(known, *primals, *closure)
    n_known = len(known.outvars) - r
    lin = Linearized(known, linear, r, n_out, out_unknown[n_out:])
    return known_vals[:n_out], lin, known_vals[n_out:n_known], known_vals[n_known:]


def eval_linear(lin: Linearized, residuals: Sequence[Any], known_tangents: Sequence[Any],
                tangents: Sequence[Any]) -> list[Any]:
    """Push tangents through the linear part (forward mode at the saved point)."""
    unknown_vals = iter(eval_graph(lin.linear, *residuals, *tangents))
    known_vals = iter(known_tangents)
    return [next(unknown_vals) if u else next(known_vals) for u in lin.out_unknown]


def transpose_linear(lin: Linearized, residuals: Sequence[Any], cts: Sequence[Any]) -> list[Any]:
    """Cotangents of the tangent inputs, given cotangents of all tangent outputs."""
    return backward_pass(lin.linear, residuals, [c for c, u in zip(cts, lin.out_unknown) if u])


def backward_pass(linear: Graph, residuals: Sequence[Any], cts_out: Sequence[Any],
                  linear_mask: Sequence[bool] | None = None) -> list[Any]:
    """Cotangents of ``linear``'s linear inputs given cotangents of its outputs (None = zero).

    By default the first ``len(residuals)`` inputs are the known residuals and the rest are
    linear; ``linear_mask`` marks the linear inputs explicitly instead.
    """
    if linear_mask is None:
        linear_mask = [False] * len(residuals) + [True] * (len(linear.invars) - len(residuals))
    known_vars = [v for v, m in zip(linear.invars, linear_mask) if not m]
    env: dict[Var, Any] = dict(zip(known_vars, residuals))
    env.update(zip(linear.constvars, linear.consts))
    lin_inputs = [v for v, m in zip(linear.invars, linear_mask) if m]
    linear_vars: set[Var] = set(lin_inputs)
    for e in linear.eqns:
        if any(isinstance(a, Var) and a in linear_vars for a in e.inputs) or not e.inputs:
            linear_vars.update(e.outputs)
        else:
            _eval_known(e, env)
    ct_env: dict[Var, Any] = {}

    def write(v: Atom, ct: Any) -> None:
        if ct is None or not isinstance(v, Var) or v not in linear_vars:
            return
        ct_env[v] = add(ct_env[v], ct) if v in ct_env else ct

    def read(a: Atom) -> Any:
        if isinstance(a, Literal):
            return a.array
        if a in linear_vars:
            return UndefinedPrimal(a.aval)
        return env[a]

    for v, ct in zip(linear.outvars, cts_out):
        write(v, ct)
    for i in range(len(linear.eqns) - 1, -1, -1):
        e = linear.eqns[i]
        cts = [ct_env.pop(o, None) for o in e.outputs]
        if all(c is None for c in cts):
            continue
        prim = e.primitive
        if prim.transpose is None:
            raise MissingTransposeError(f"cannot transpose `{prim.name}`: it is not linear (no transpose rule); "
                                        "this is a bug in a jvp rule that applied it to tangents")
        ct = [zeros(o.aval) if c is None else c for o, c in zip(e.outputs, cts)] if prim.multiple_results else cts[0]
        try:
            with source_of(e.source):
                cts_in = prim.transpose(ct, *map(read, e.inputs), **e.params.kwargs())
        except Exception as err:
            add_eqn_note(err, linear, i)
            raise
        for a, c in zip(e.inputs, cts_in):
            write(a, c)
    return [ct_env.get(v) for v in lin_inputs]


def _eval_known(e: Eqn, env: dict[Var, Any]) -> None:
    """Evaluate an equation of a linear graph that reads no linear value (a batched graph
    moves or broadcasts its residuals so): its outputs are known, not linear."""
    with source_of(e.source):
        out = e.primitive.bind(*[a.array if isinstance(a, Literal) else env[a] for a in e.inputs], **e.params)
    env.update(zip(e.outputs, out if e.primitive.multiple_results else (out,)))
