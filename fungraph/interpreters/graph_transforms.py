"""Graph-to-graph transformations, cached by the graph's structural hash: the JVP graph,
the partial evaluation, the transposed graph and the batched graph of a sub-graph. Call-like
primitives (jit_call, cond, loops) use them so that repeated transformations of the same
sub-graph cost a dictionary lookup, as Dali's transformation cache does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fungraph._caches import LRUCache
from fungraph.interpreters.eval import eval_graph
from fungraph.interpreters.jvp import jvp_flat
from fungraph.interpreters.staging import stage
from fungraph.interpreters.transpose import backward_pass, partial_eval
from fungraph.ir import Graph
from fungraph.primitives._rules import zeros

_TRANSFORMED: LRUCache[tuple[str, Graph, Any], Any] = LRUCache("transformed graphs")


def _cached(kind: str, graph: Graph, mask: Any, build: Callable[[], Any]) -> Any:
    key = (kind, graph, mask)
    out = _TRANSFORMED.get(key)
    if out is None:
        out = _TRANSFORMED[key] = build()
    return out


def jvp_graph(call: Graph, differentiable: tuple[bool, ...]) -> Graph:
    """The graph of ``(primals, tangents) -> (outputs, output tangents)`` (cached)."""

    def build() -> Graph:
        n = len(call.invars)
        tan_avals = [v.aval for v, d in zip(call.invars, differentiable) if d]

        def fun(*args: Any) -> list[Any]:
            ts = iter(args[n:])
            tangents = [next(ts) if d else None for d in differentiable]
            p, t = jvp_flat(lambda *a: eval_graph(call, *a), args[:n], tangents)
            return list(p) + list(t)

        return stage(fun, list(call.in_avals) + tan_avals)[0]

    return _cached("jvp", call, differentiable, build)


def partial_eval_graph(call: Graph, unknown: tuple[bool, ...]) -> tuple:
    """``partial_eval(call, unknown)``, cached."""
    return _cached("pe", call, unknown, lambda: partial_eval(call, unknown))


def transpose_graph(call: Graph, linear_mask: tuple[bool, ...]) -> Graph:
    """The graph of ``(known inputs, output cotangents) -> cotangents of the linear inputs``."""

    def build() -> Graph:
        known_avals = [v.aval for v, m in zip(call.invars, linear_mask) if not m]
        k = len(known_avals)

        def fun(*args: Any) -> list[Any]:
            cts = backward_pass(call, args[:k], args[k:], linear_mask)
            lin_avals = [v.aval for v, m in zip(call.invars, linear_mask) if m]
            return [zeros(a) if c is None else c for c, a in zip(cts, lin_avals)]

        return stage(fun, known_avals + list(call.out_avals))[0]

    return _cached("transpose", call, linear_mask, build)


def batched_graph(call: Graph, in_dims: tuple[int | None, ...], size: int, in_avals: tuple) -> Graph:
    """The graph of ``call`` mapped over ``in_dims`` (outputs batched along axis 0), cached per
    axis name too: the name decides what the graph's collectives reduce over."""
    from fungraph.interpreters.batching import batching_axis_name, vmap_flat

    def build() -> Graph:
        n_out = len(call.outvars)
        return stage(lambda *a: vmap_flat(lambda *b: eval_graph(call, *b), a, in_dims, [0] * n_out, size),
                     list(in_avals))[0]

    return _cached("batch", call, (in_dims, size, in_avals, batching_axis_name()), build)


