"""Small synthetic datasets generated on the spot (no downloads), for examples and the demo."""

from __future__ import annotations

import numpy as np


def spirals(n_per_class: int = 100, classes: int = 3, seed: int = 0, dtype: type = np.float64) -> tuple:
    """Interleaved 2-D spirals: inputs (N, 2) and one-hot labels (N, classes)."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.05, 1.0, n_per_class)
        t = np.linspace(c * 4.0, (c + 1) * 4.0, n_per_class) + rng.normal(0, 0.15, n_per_class)
        xs.append(np.stack([r * np.sin(t), r * np.cos(t)], axis=1))
        ys.append(np.full(n_per_class, c))
    x = np.concatenate(xs).astype(dtype)
    y = np.eye(classes, dtype=dtype)[np.concatenate(ys)]
    return x, y
