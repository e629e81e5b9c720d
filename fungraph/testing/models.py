"""A small reference model shared by tests and benchmarks: a ReLU MLP with softmax
cross-entropy and its SGD step, written with ``fungraph.numpy``/``fungraph.nn`` only."""

from __future__ import annotations

from typing import Any

import numpy as np

import fungraph as fg
from fungraph import nn
from fungraph import numpy as fnp


def mlp_params(sizes: list[int], dtype: Any = np.float32, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """He-initialised weights and zero biases for layers ``sizes[0] -> ... -> sizes[-1]``."""
    rng = np.random.default_rng(seed)
    return [{"w": (rng.standard_normal((m, n)) * np.sqrt(2 / m)).astype(dtype), "b": np.zeros(n, dtype)}
            for m, n in zip(sizes[:-1], sizes[1:])]


def mlp_loss(params: list[dict[str, Any]], x: Any, y: Any) -> Any:
    """Mean softmax cross-entropy of one-hot ``y`` against the MLP's logits on ``x``."""
    h = x
    for layer in params[:-1]:
        h = nn.relu(h @ layer["w"] + layer["b"])
    logits = h @ params[-1]["w"] + params[-1]["b"]
    return -fnp.mean(fnp.sum(y * nn.log_softmax(logits), axis=-1))


def sgd_step(params: list[dict[str, Any]], x: Any, y: Any, lr: float = 0.01) -> tuple[list[dict[str, Any]], Any]:
    """One plain SGD step: the new parameters and the loss before the step."""
    loss, grads = fg.value_and_grad(mlp_loss)(params, x, y)
    return [{"w": p["w"] - lr * g["w"], "b": p["b"] - lr * g["b"]} for p, g in zip(params, grads)], loss
