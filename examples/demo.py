"""fungraph's main demo: a small model is traced, differentiated, printed as IR, and evaluated.

    bash scripts/demo.sh
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mlp_training import init_params, loss, train  # noqa: E402

import fungraph as fg  # noqa: E402
from fungraph.interpreters.dce import dce  # noqa: E402


def main() -> None:
    params = init_params([2, 8, 3])
    x = np.random.default_rng(0).standard_normal((4, 2))
    y = np.eye(3)[[0, 1, 2, 0]]

    print("== 1. The loss of a 2-8-3 MLP, traced into the IR (make_graph)")
    forward = fg.make_graph(loss)(params, x, y)
    print(forward)

    print("\n== 2. Its gradient is another graph (make_graph(grad(loss))), after dead-code elimination")
    backward = dce(fg.make_graph(fg.grad(loss))(params, x, y))
    print(backward.pretty())
    print(f"\n   forward: {len(forward.eqns)} equations, gradient: {len(backward.eqns)} equations")

    print("\n== 3. Graphs are text: parse(str(g)) == g, and the verifier accepts both")
    again = fg.parse(str(backward))
    again.verify()
    print(f"   round trip equal: {again == backward}")

    print("\n== 4. Evaluating the graph equals calling the function")
    leaves = fg.tree_leaves((params, x, y))
    staged = fg.eval_graph(backward, *leaves)
    eager = fg.tree_leaves(fg.grad(loss)(params, x, y))
    print(f"   max |staged - eager| = {max(float(np.max(np.abs(a - b))) for a, b in zip(staged, eager)):.2e}")

    print("\n== 5. Training a 2-64-64-3 MLP on generated spirals with value_and_grad + SGD")
    first, last = train(steps=300, verbose=True)
    print(f"   loss {first:.4f} -> {last:.4f} ({first / last:.1f}x lower)")


if __name__ == "__main__":
    main()
