"""Evaluate a Graph by binding each equation's primitive: the simplest interpreter.

Because it binds, evaluating a graph under another transformation transforms it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import TypedConstant, as_typed_constant, source_stack
from fungraph.ir import Atom, Graph, Literal, Var, format_eqn_in


def eval_graph(graph: Graph, *args: Any) -> list[Any]:
    """Run ``graph`` on ``args`` (flat) and return its flat outputs. A graph holding 64-bit
    values runs in x64 mode, so that 32-bit mode's narrowing of eager results keeps its types."""
    if len(args) != len(graph.invars):
        raise TypeError(f"graph takes {len(graph.invars)} inputs, got {len(args)}")
    if graph.has_64bit_values and not dtypes.x64_enabled():
        previous = dtypes.set_x64_override(True)
        try:
            return _eval_graph(graph, args)
        finally:
            dtypes.set_x64_override(previous)
    return _eval_graph(graph, args)


def _eval_graph(graph: Graph, args: Sequence[Any]) -> list[Any]:
    env: dict[Var, Any] = {}

    def read(a: Atom) -> Any:
        return as_typed_constant(a.array) if isinstance(a, Literal) else env[a]

    env.update(zip(graph.invars, args))
    env.update(zip(graph.constvars, map(as_typed_constant, graph.consts)))
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
    return [_unmarked(read(a)) for a in graph.outvars]


def _unmarked(value: Any) -> Any:
    return value.view(np.ndarray) if value.__class__ is TypedConstant else value


def add_eqn_note(err: Exception, graph: Graph, index: int) -> None:
    """Say which equation failed ("while executing eqn 17: ...") once, innermost first."""
    if not getattr(err, "_fungraph_noted", False):
        err.add_note(f"while executing eqn {index}: `{format_eqn_in(graph, index)}`")
        err._fungraph_noted = True  # type: ignore[attr-defined]
