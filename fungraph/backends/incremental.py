"""Incremental evaluation: keep every intermediate of the last call and recompute only the
equations downstream of inputs whose contents changed (Owl's and libnnc's memoisation)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph._fp_errors import quiet, restore
from fungraph.backends import taking_turns
from fungraph.ir import Graph, Literal, Var


class IncrementalExecutable:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        index = {v: i for i, v in enumerate(graph.invars)}
        deps: dict[Var, frozenset[int]] = {v: frozenset({i}) for v, i in index.items()}
        for v in graph.constvars:
            deps[v] = frozenset()
        self.eqn_deps: list[frozenset[int]] = []
        for e in graph.eqns:
            d = frozenset().union(*(deps[a] for a in e.inputs if isinstance(a, Var)))
            self.eqn_deps.append(d)
            for o in e.outputs:
                deps[o] = d
        self.env: dict[Var, Any] = dict(zip(graph.constvars, graph.consts))
        self.last: list[np.ndarray] | None = None
        self.recomputed = 0

    def run(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The outputs for ``args``, recomputing only what depends on inputs that changed since
        the last call; calls from several threads take turns (a call reads and rewrites the
        kept intermediates; :func:`~fungraph.backends.taking_turns`)."""
        with taking_turns(self, "an incremental jitted function was called again from a host callback "
                                "inside its own call; its kept intermediates are in use"):
            token = quiet()
            try:
                return self._run(args)
            finally:
                restore(token)

    def _run(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        g = self.graph
        if self.last is None:
            changed = set(range(len(args)))
        else:
            changed = {i for i, (a, b) in enumerate(zip(args, self.last))
                       if a.shape != b.shape or not np.array_equal(a, b, equal_nan=True)}
        self.env.update(zip(g.invars, args))
        self.recomputed = 0
        for e, d in zip(g.eqns, self.eqn_deps):
            if self.last is not None and not (d & changed):
                continue
            ins = [a.array if isinstance(a, Literal) else self.env[a] for a in e.inputs]
            out = e.primitive.impl(*ins, **e.params)
            outs = out if e.primitive.multiple_results else (out,)
            self.env.update(zip(e.outputs, (np.asarray(o) for o in outs)))
            self.recomputed += 1
        self.last = [np.array(a, copy=True) for a in args]
        return [np.array(a.array if isinstance(a, Literal) else self.env[a], copy=True) for a in g.outvars]
