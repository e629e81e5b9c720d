"""Graph-to-graph transformations, cached by the graph's structural hash: the JVP graph,
the partial evaluation, the transposed graph and the batched graph of a sub-graph. Call-like
primitives (jit_call, cond, loops) use them so that repeated transformations of the same
sub-graph cost a dictionary lookup, as Dali's transformation cache does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fungraph._caches import LRUCache
from fungraph.core import innermost_main
from fungraph.interpreters.batching import BatchTracer, batching_axis_name, vmap_flat
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
    def build() -> Graph:
        n_out = len(call.outvars)
        return stage(lambda *a: vmap_flat(lambda *b: eval_graph(call, *b), a, in_dims, [0] * n_out, size),
                     list(in_avals))[0]

    return _cached("batch", call, (in_dims, size, in_avals, batching_axis_name()), build)




def batched_graph_where_needed(call: Graph, in_dims: tuple[int | None, ...], size: int, in_avals: tuple,
                               force: tuple[bool, ...]) -> tuple[Graph, tuple[bool, ...]]:
    """``call`` mapped over ``in_dims``, batching (on axis 0) only the outputs that depend on the
    mapped axis or that ``force`` names, and which outputs are batched: JAX's batching of a loop
    body, which keeps a carry such as a loop counter unbatched when nothing batched reaches it."""
    def build() -> tuple[Graph, tuple[bool, ...]]:
        batched: list[tuple[bool, ...]] = []

        def out_dims(raw: list[Any]) -> list[int | None]:
            main = innermost_main()
            mask = tuple(f or (isinstance(o, BatchTracer) and o._trace.main is main and o.bdim is not None)
                         for o, f in zip(raw, force))
            batched.append(mask)
            return [0 if m else None for m in mask]

        graph = stage(lambda *a: vmap_flat(lambda *b: eval_graph(call, *b), a, in_dims, out_dims, size),
                      list(in_avals))[0]
        return graph, batched[0]

    return _cached("batch_needed", call, (in_dims, size, in_avals, force, batching_axis_name()), build)


def loop_carry_batched(body: Graph, carry_in: tuple[bool, ...], other_dims: tuple[int | None, ...], size: int,
                       avals: Callable[[tuple[bool, ...]], tuple], num_carry: int) -> tuple[bool, ...]:
    """Which carries of a loop must be batched: the fixpoint of "batched initially, or the body
    returns it batched given the batched carries", as JAX's scan and while batching find it.
    ``avals(carry_mask)`` gives the body's input avals for a mask of batched carries."""
    batched = carry_in
    while True:
        dims = tuple(0 if b else None for b in batched) + other_dims
        force = batched + (False,) * (len(body.outvars) - len(batched))
        _, out = batched_graph_where_needed(body, dims, size, avals(batched), force)
        new = tuple(a or b for a, b in zip(batched, out[:num_carry]))
        if new == batched:
            return batched
        batched = new
