"""The Dirichlet distribution with concentrations ``alpha`` (shape (K,)).

As in SciPy, ``x`` holds the components along its *first* axis: shape (K,) or (K, N), or K - 1
components, the last one then being 1 minus their sum. Points off the simplex give -inf (SciPy
raises a ValueError there, which traced code cannot do)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import const, floats


def _complete(x: Any, k: int) -> Any:
    if x.shape[0] == k:
        return x
    if x.shape[0] != k - 1:
        raise ValueError(f"dirichlet: x must have {k} or {k - 1} entries along its first axis, got shape {x.shape}")
    last = fnp.subtract(const(1, x), fnp.sum(x, axis=0, keepdims=True))
    return fnp.concatenate([x, last], axis=0)


def logpdf(x: Any, alpha: Any) -> Any:
    x, alpha = floats(x, alpha)
    if alpha.ndim != 1:
        raise ValueError(f"dirichlet: alpha must be one-dimensional, got shape {alpha.shape}")
    k = alpha.shape[0]
    x = _complete(x, k)
    alpha_b = fnp.reshape(alpha, (k,) + (1,) * (x.ndim - 1))
    log_norm = fnp.subtract(fnp.sum(special.gammaln(alpha)), special.gammaln(fnp.sum(alpha)))
    tol = 1e-4 if x.dtype == np.float32 else 1e-10
    on_simplex = fnp.logical_and(fnp.all(fnp.greater_equal(x, const(0, x)), axis=0),
                                 fnp.less_equal(fnp.abs(fnp.subtract(fnp.sum(x, axis=0), const(1, x))), tol))
    xs = fnp.where(on_simplex, x, const(1 / k, x))  # keeps the unused branch (and its derivative) finite
    val = fnp.subtract(fnp.sum(special.xlogy(fnp.subtract(alpha_b, const(1, alpha)), xs), axis=0), log_norm)
    return fnp.where(on_simplex, val, const(-np.inf, val))


def pdf(x: Any, alpha: Any) -> Any:
    return fnp.exp(logpdf(x, alpha))
