"""Evaluate a Graph by binding each equation's primitive: the simplest interpreter.

Because it binds, evaluating a graph under another transformation transforms it.
"""

from __future__ import annotations

from typing import Any

from fungraph.core import source_stack
from fungraph.ir import Atom, Graph, Literal, Var


def eval_graph(graph: Graph, *args: Any) -> list[Any]:
    """Run ``graph`` on ``args`` (flat) and return its flat outputs."""
    if len(args) != len(graph.invars):
        raise TypeError(f"graph takes {len(graph.invars)} inputs, got {len(args)}")
    env: dict[Var, Any] = {}

    def read(a: Atom) -> Any:
        return a.array if isinstance(a, Literal) else env[a]

    env.update(zip(graph.invars, args))
    env.update(zip(graph.constvars, graph.consts))
    sources = source_stack()
    for i, eqn in enumerate(graph.eqns):
        try:
            sources.append(eqn.source)
            try:
                outs = eqn.primitive.bind(*map(read, eqn.inputs), **eqn.params.kwargs())
            finally:
                sources.pop()
        except Exception as err:
            add_eqn_note(err, graph, i)
            raise
        env.update(zip(eqn.outputs, outs if eqn.primitive.multiple_results else (outs,)))
    return [read(a) for a in graph.outvars]


def add_eqn_note(err: Exception, graph: Graph, index: int) -> None:
    """Say which equation failed ("while executing eqn 17: ...") once, innermost first."""
    from fungraph.ir_text import format_eqn_in

    if not getattr(err, "_fungraph_noted", False):
        err.add_note(f"while executing eqn {index}: `{format_eqn_in(graph, index)}`")
        err._fungraph_noted = True  # type: ignore[attr-defined]
