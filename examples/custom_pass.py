"""Writing an optimiser pass: a pure function Graph -> Graph, checked on random programs.

The pass rewrites ``exp(log(x))`` to ``x`` (valid where log is defined).
"""

from __future__ import annotations

import numpy as np

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.interpreters.rewrite import Rewriter


def drop_exp_log(graph: fg.Graph) -> fg.Graph:
    rw = Rewriter(graph)
    for eqn in graph.eqns:
        (x,) = rw.inputs(eqn) if len(eqn.inputs) == 1 else (None,)
        inner = rw.producer(x) if x is not None else None
        if eqn.primitive.name == "exp" and inner is not None and inner.primitive.name == "log":
            rw.replace(eqn.outputs[0], inner.inputs[0])
        else:
            rw.keep(eqn)
    return rw.finish()


def main() -> fg.Graph:
    g = fg.make_graph(lambda x: fnp.exp(fnp.log(x)) * 2.0)(np.ones(3))
    new = drop_exp_log(g)
    new.verify()
    print(g, "\n->\n", new, sep="")
    x = np.array([0.5, 1.0, 2.0])
    assert np.allclose(fg.eval_graph(new, x)[0], fg.eval_graph(g, x)[0])
    return new


if __name__ == "__main__":
    main()
