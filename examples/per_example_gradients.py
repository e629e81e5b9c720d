"""Per-example gradients with vmap(grad(loss)): one batched program, no Python loop."""

from __future__ import annotations

import numpy as np

import fungraph as fg
import fungraph.numpy as fnp


def loss(w, x, y):
    return (fnp.dot(x, w) - y) ** 2


def main(batch: int = 8) -> np.ndarray:
    rng = np.random.default_rng(0)
    w = rng.standard_normal(3)
    xs = rng.standard_normal((batch, 3))
    ys = rng.standard_normal(batch)
    per_example = fg.jit(fg.vmap(fg.grad(loss), in_axes=(None, 0, 0)))(w, xs, ys)
    loop = np.stack([fg.grad(loss)(w, xs[i], ys[i]) for i in range(batch)])
    print("per-example gradients", per_example.shape, "match a loop:", np.allclose(per_example, loop))
    return per_example


if __name__ == "__main__":
    main()
