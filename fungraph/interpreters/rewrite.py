"""A small helper for passes: walk a graph's equations, substitute vars, emit new equations."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph.core import Primitive
from fungraph.interpreters.dce import dce
from fungraph.ir import Atom, Eqn, Graph, Literal, Params, ShapedArray, Var, aval_of


class Rewriter:
    """Builds a new graph from an old one: ``keep`` an equation, ``replace`` a var by an atom,
    or ``emit`` a fresh equation; ``finish`` substitutes the outputs and drops unused constants."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.subst: dict[Var, Atom] = {}
        self.eqns: list[Eqn] = []
        self.new_consts: dict[Var, np.ndarray] = {}
        self.made_by: dict[Var, Eqn] = {}
        self._uses: Counter[Var] | None = None
        self._consts: dict[Var, np.ndarray] | None = None

    def uses(self, a: Atom) -> int:
        """How many times ``a`` is read in the old graph (kept equations keep their outputs)."""
        if self._uses is None:
            self._uses = use_counts(self.graph)
        return self._uses.get(a, 0) if isinstance(a, Var) else 0

    def producer(self, a: Atom) -> Eqn | None:
        """The equation of the new graph that defines ``a`` (None for inputs and literals)."""
        return self.made_by.get(a) if isinstance(a, Var) else None

    def const_value(self, a: Atom) -> np.ndarray | None:
        """The array of a constant var of the old graph or one made by :meth:`const` (None
        for anything else)."""
        if not isinstance(a, Var):
            return None
        if a in self.new_consts:
            return self.new_consts[a]
        if self._consts is None:
            self._consts = dict(zip(self.graph.constvars, self.graph.consts))
        return self._consts.get(a)

    def _record(self, eqn: Eqn) -> None:
        self.eqns.append(eqn)
        for o in eqn.outputs:
            self.made_by[o] = eqn

    def atom(self, a: Atom) -> Atom:
        while isinstance(a, Var) and a in self.subst:
            a = self.subst[a]
        return a

    def inputs(self, eqn: Eqn) -> tuple[Atom, ...]:
        return tuple(self.atom(a) for a in eqn.inputs)

    def keep(self, eqn: Eqn) -> None:
        ins = self.inputs(eqn)
        self._record(eqn if ins == eqn.inputs else Eqn(eqn.primitive, ins, eqn.outputs, eqn.params, eqn.source))

    def replace(self, v: Var, a: Atom) -> None:
        self.subst[v] = a

    def emit(self, prim: Primitive, inputs: Sequence[Atom], params: dict[str, Any] | Params | None = None,
             source: str | None = None, outputs: Sequence[Var] | None = None) -> tuple[Var, ...]:
        p = params if isinstance(params, Params) else Params(params or {})
        avals = prim.abstract_eval_tuple([a.aval for a in inputs], p)
        outs = tuple(outputs) if outputs is not None else tuple(Var(a) for a in avals)
        self._record(Eqn(prim, tuple(inputs), outs, p, source))
        return outs

    def const(self, value: Any) -> Atom:
        arr = np.asarray(value)
        aval = aval_of(arr)
        if arr.ndim == 0:
            return Literal(arr.item(), aval)
        v = Var(aval)
        self.new_consts[v] = arr
        return v

    def finish(self) -> Graph:
        g = self.graph
        constvars = tuple(g.constvars) + tuple(self.new_consts)
        consts = tuple(g.consts) + tuple(self.new_consts.values())
        outs = tuple(self.atom(a) for a in g.outvars)
        return dce(Graph(g.invars, constvars, consts, tuple(self.eqns), outs))


def use_counts(graph: Graph) -> Counter[Var]:
    """How many times each var is read (as an equation input or a graph output)."""
    counts: Counter[Var] = Counter()
    for e in graph.eqns:
        counts.update(a for a in e.inputs if isinstance(a, Var))
    counts.update(a for a in graph.outvars if isinstance(a, Var))
    return counts


def producers(graph: Graph) -> dict[Var, Eqn]:
    return {o: e for e in graph.eqns for o in e.outputs}


def literal_value(a: Atom) -> Any:
    """The scalar value of a literal, or None."""
    return a.value if isinstance(a, Literal) else None


def same_type(a: Atom, aval: ShapedArray) -> bool:
    return a.aval == aval
