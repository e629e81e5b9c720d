"""JAX's ``jax.extend.core``: user-defined primitives and the IR's classes under JAX's names.

A staged graph is closed, so ``ClosedJaxpr`` and ``Jaxpr`` are both :class:`~fungraph.ir.Graph`
(``graph.jaxpr`` is the graph itself, see docs/ir.md); vars, literals and equations are the IR's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fungraph import core as _core
from fungraph.core import MissingRule
from fungraph.interpreters.eval import eval_graph
from fungraph.ir import Eqn, Graph, Literal, ShapedArray, Var

ClosedJaxpr = Graph
Jaxpr = Graph
JaxprEqn = Eqn


class Primitive(_core.Primitive):
    """A user's primitive named ``name`` (JAX's ``jax.extend.core.Primitive``): its rules come
    later, from ``def_impl``, ``def_abstract_eval`` and the ``ad`` and ``batching`` tables.

    It is not entered in the table of names the IR parser reads: JAX lets two primitives share
    a name, and a user's may take a built-in one's. Equations (and so the jit cache) tell
    primitives apart by object, not by name."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"Primitive(name): the name must be a str, got {type(name).__name__}")
        super().__init__(name, MissingRule("evaluation", name, "def_impl"),
                         MissingRule("abstract evaluation", name, "def_abstract_eval"))

    def __post_init__(self) -> None:
        """Nothing to register (see the class docstring)."""


def jaxpr_as_fun(closed_jaxpr: Graph) -> Callable[..., list[Any]]:
    """A function running ``closed_jaxpr`` on flat arguments and returning its flat outputs."""
    if not isinstance(closed_jaxpr, Graph):
        raise TypeError(f"jaxpr_as_fun: expected a graph from make_jaxpr, got {type(closed_jaxpr).__name__}")

    def fun(*args: Any) -> list[Any]:
        return eval_graph(closed_jaxpr, *args)

    return fun


__all__ = ["ClosedJaxpr", "Jaxpr", "JaxprEqn", "Literal", "Primitive", "ShapedArray", "Var", "jaxpr_as_fun"]
