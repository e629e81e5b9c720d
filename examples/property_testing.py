"""Property testing your own function with fungraph.testing: its derivatives against finite
differences, and a pass against random programs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.interpreters.cse import cse
from fungraph.testing import Program, check_grads, programs


def softplus(x):
    return fnp.log1p(fnp.exp(-fnp.abs(x))) + fnp.maximum(x, 0.0)


def check_my_function() -> None:
    check_grads(softplus, [np.array([-2.0, -0.3, 0.7, 3.0])], order=2)


@settings(max_examples=25, deadline=None)
@given(prog=programs())
def check_cse_preserves_meaning(prog: Program) -> None:
    new = cse(prog.graph)
    new.verify()
    for a, b in zip(fg.eval_graph(new, *prog.args), fg.eval_graph(prog.graph, *prog.args)):
        np.testing.assert_allclose(a, b)


def main() -> None:
    check_my_function()
    check_cse_preserves_meaning()
    print("softplus derivatives and CSE on random programs: ok")


if __name__ == "__main__":
    main()
