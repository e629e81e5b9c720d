"""Train a small MLP on generated spirals with value_and_grad and plain SGD.

    python examples/mlp_training.py [--steps 300]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


import fungraph as fg  # noqa: E402
import fungraph.numpy as fnp  # noqa: E402
from fungraph import nn  # noqa: E402
from fungraph.datasets import spirals  # noqa: E402


def init_params(sizes: list[int], seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"w": rng.standard_normal((m, n)) * np.sqrt(2.0 / m), "b": np.zeros(n)}
            for m, n in zip(sizes[:-1], sizes[1:])]


def predict(params, x):
    for layer in params[:-1]:
        x = nn.relu(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def loss(params, x, y):
    return -fnp.mean(fnp.sum(y * nn.log_softmax(predict(params, x)), axis=-1))


def train(steps: int = 300, lr: float = 0.5, verbose: bool = True) -> tuple[float, float]:
    x, y = spirals()
    params = init_params([2, 64, 64, 3])
    step = fg.value_and_grad(loss)
    first = last = float("nan")
    for i in range(steps):
        value, grads = step(params, x, y)
        params = fg.tree_map(lambda p, g: p - lr * g, params, grads)
        if i == 0:
            first = float(value)
        last = float(value)
        if verbose and (i % max(steps // 10, 1) == 0 or i == steps - 1):
            print(f"step {i:4d}  loss {last:.4f}")
    return first, last


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    first, last = train(args.steps)
    print(f"loss {first:.4f} -> {last:.4f} ({first / last:.1f}x lower)")
