"""The multivariate normal distribution N(mean, cov) over the last axis of ``x``.

``cov`` may be a (d, d) positive-definite matrix, a vector (a diagonal) or a scalar, as in
SciPy; the log-density uses its Cholesky factor. Unlike SciPy the result keeps the shape
``x.shape[:-1]`` (SciPy squeezes a single point to a scalar), and there is no ``allow_singular``."""

from __future__ import annotations

import math
from typing import Any

from fungraph import numpy as fnp
from fungraph.scipy.stats._util import const, floats


def _full_cov(cov: Any, d: int) -> Any:
    if cov.ndim == 0:
        return fnp.multiply(cov, fnp.eye(d, dtype=cov.dtype))
    if cov.ndim == 1:
        return fnp.diag(cov)
    return cov


def logpdf(x: Any, mean: Any = None, cov: Any = 1) -> Any:
    x, cov = floats(x, cov)
    if mean is not None:
        x, mean, cov = floats(x, mean, cov)
    x = fnp.atleast_1d(x)
    d = x.shape[-1]
    diff = x if mean is None else fnp.subtract(x, mean)
    chol = fnp.linalg.cholesky(_full_cov(cov, d))
    flat = fnp.transpose(fnp.reshape(diff, (-1, d)))
    z = fnp.linalg.solve(chol, flat)
    maha = fnp.reshape(fnp.sum(fnp.square(z), axis=0), diff.shape[:-1])
    log_det = fnp.multiply(const(2, chol), fnp.sum(fnp.log(fnp.diagonal(chol))))
    total = fnp.add(fnp.add(maha, log_det), const(d * math.log(2 * math.pi), maha))
    return fnp.multiply(const(-0.5, total), total)


def pdf(x: Any, mean: Any = None, cov: Any = 1) -> Any:
    return fnp.exp(logpdf(x, mean, cov))
