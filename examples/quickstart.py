"""Quick start: grad(jit(f)) and jit(grad(f)) agree, and both are graphs you can print."""

from __future__ import annotations

import numpy as np

import fungraph as fg
import fungraph.numpy as fnp


def f(x, w):
    return fnp.sum(fnp.tanh(x @ w) ** 2)


def main() -> None:
    x = np.linspace(-1, 1, 12).reshape(4, 3)
    w = np.ones((3, 2)) * 0.5
    g1 = fg.grad(fg.jit(f), argnums=1)(x, w)
    g2 = fg.jit(fg.grad(f, argnums=1))(x, w)
    print("grad(jit(f)) == jit(grad(f)):", np.allclose(g1, g2, rtol=1e-12))
    print(fg.jit(fg.grad(f, argnums=1)).lower(x, w).text)


if __name__ == "__main__":
    main()
