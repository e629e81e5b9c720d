"""Constant folding: equations whose inputs are all constants run once, at compile time.

Expansions (a broadcast of a scalar into a big array) are not folded: they would trade one
cheap equation for a large constant held for the graph's lifetime.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph.interpreters.rewrite import Rewriter
from fungraph.ir import Atom, Graph, Literal, Var

MAX_EXPANSION_ELEMENTS = 1024
_NEVER = {"pure_callback"}


def fold_constants(graph: Graph) -> Graph:
    rw = Rewriter(graph)
    values: dict[Var, np.ndarray] = dict(zip(graph.constvars, graph.consts))

    def value(a: Atom) -> Any:
        if isinstance(a, Literal):
            return a.array
        return values.get(a)

    for e in graph.eqns:
        ins = rw.inputs(e)
        vals = [value(a) for a in ins]
        if e.primitive.name in _NEVER or e.effectful or any(v is None for v in vals):
            rw.keep(e)
            continue
        in_size = max([np.size(v) for v in vals] + [1])
        if any(o.aval.size > max(in_size, MAX_EXPANSION_ELEMENTS) for o in e.outputs):
            rw.keep(e)
            continue
        with np.errstate(all="ignore"):
            out = e.primitive.impl(*vals, **e.params)
        outs = out if e.primitive.multiple_results else (out,)
        for o, val in zip(e.outputs, outs):
            arr = np.asarray(val, dtype=o.aval.dtype).reshape(o.aval.shape)
            atom = rw.const(arr)
            rw.replace(o, atom)
            if isinstance(atom, Var):
                values[atom] = arr
            else:
                values[o] = arr
    return rw.finish()
