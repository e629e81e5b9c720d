"""A small CNN (conv, relu, max pooling, dense) forward and backward, eager and jitted."""

from __future__ import annotations

import numpy as np

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax, nn


def init(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"conv": rng.standard_normal((8, 1, 3, 3)).astype(np.float32) * 0.3,
            "dense": rng.standard_normal((8 * 7 * 7, 10)).astype(np.float32) * 0.05}


def loss(params, images, labels):
    h = nn.relu(lax.conv(images, params["conv"], (1, 1), "SAME"))
    h = nn.max_pool(h, (2, 2), (2, 2))
    logits = fnp.reshape(h, (h.shape[0], -1)) @ params["dense"]
    return -fnp.mean(fnp.sum(labels * nn.log_softmax(logits), axis=-1))


def main(batch: int = 16) -> float:
    rng = np.random.default_rng(1)
    images = rng.standard_normal((batch, 1, 14, 14)).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    params = init()
    value, grads = fg.jit(fg.value_and_grad(loss))(params, images, labels)
    eager = fg.grad(loss)(params, images, labels)
    diff = max(float(np.max(np.abs(grads[k] - eager[k]))) for k in grads)
    print(f"loss {float(value):.4f}; max |jit - eager| over the gradient = {diff:.2e}")
    return diff


if __name__ == "__main__":
    main()
