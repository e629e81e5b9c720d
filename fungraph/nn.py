"""``fungraph.nn``: activations, softmax family and pooling (NCHW), like ``jax.nn``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph.core import ShapeError
from fungraph.numpy._util import asarray, normalize_axes, promote
from fungraph.primitives import elementwise as ew
from fungraph.primitives import reductions as red
from fungraph.primitives import shape as sh
from fungraph.primitives.callback import stop_gradient
from fungraph.primitives.indexing import take


def relu(x: Any) -> Any:
    """max(x, 0), written as a select so its derivative is one select (relu'(0) = 0, as in JAX)."""
    x = asarray(x)
    zero = np.asarray(0, x.dtype)
    return ew.select(ew.gt(x, zero), x, zero)


def sigmoid(x: Any) -> Any:
    (x,) = promote(x, to_inexact=True)
    return ew.logistic_p.bind(x)


def gelu(x: Any, approximate: bool = True) -> Any:
    (x,) = promote(x, to_inexact=True)
    dt = x.dtype
    if approximate:
        c = np.asarray(math.sqrt(2 / math.pi), dt)
        inner = ew.mul(c, ew.add(x, ew.mul(np.asarray(0.044715, dt), ew.integer_pow(x, 3))))
        return ew.mul(ew.mul(np.asarray(0.5, dt), x), ew.add(np.asarray(1, dt), ew.tanh_p.bind(inner)))
    erf = ew.erf_p.bind(ew.mul(x, np.asarray(1 / math.sqrt(2), dt)))
    return ew.mul(ew.mul(np.asarray(0.5, dt), x), ew.add(np.asarray(1, dt), erf))


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    (x,) = promote(x, to_inexact=True)
    axes = normalize_axes(axis, x.ndim, "logsumexp")
    m = stop_gradient(fnp.max(x, axis=axes, keepdims=True))
    m = ew.select(fnp.isfinite(m), m, np.zeros((), x.dtype))
    s = red.reduce_sum(fnp.exp(ew.sub(x, m)), axes)
    out = ew.add(ew.log_p.bind(s), fnp.reshape(m, s.shape) if not keepdims else fnp.reshape(m, s.shape))
    if keepdims:
        out = fnp.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
    return out


def log_softmax(x: Any, axis: Any = -1) -> Any:
    (x,) = promote(x, to_inexact=True)
    shifted = ew.sub(x, stop_gradient(fnp.max(x, axis=axis, keepdims=True)))
    return ew.sub(shifted, logsumexp(shifted, axis=axis, keepdims=True))


def softmax(x: Any, axis: Any = -1) -> Any:
    (x,) = promote(x, to_inexact=True)
    unnormalized = fnp.exp(ew.sub(x, stop_gradient(fnp.max(x, axis=axis, keepdims=True))))
    return ew.div(unnormalized, fnp.sum(unnormalized, axis=axis, keepdims=True))


def one_hot(x: Any, num_classes: int, dtype: Any = np.float64) -> Any:
    x = asarray(x)
    classes = np.arange(num_classes, dtype=x.dtype)
    return fnp.astype(fnp.equal(fnp.expand_dims(x, -1), classes), dtype)


def _pool_geometry(shape: tuple[int, ...], window: tuple[int, int], strides: tuple[int, int],
                   padding: Any) -> tuple[tuple[tuple[int, int], ...], tuple[int, int]]:
    from fungraph.lax import padding_pairs

    pads = padding_pairs(padding, shape[-2:], window, strides)
    out = tuple((shape[-2 + i] + pads[i][0] + pads[i][1] - window[i]) // strides[i] + 1 for i in range(2))
    if min(out) <= 0:
        raise ShapeError(f"pool: window {window} does not fit input spatial shape {shape[-2:]} with padding {padding}")
    return pads, out  # type: ignore[return-value]


def _patches(x: Any, window: tuple[int, int], strides: tuple[int, int], padding: Any, fill: float) -> Any:
    """Windows of the last two axes as a trailing axis: (..., OH, OW, KH*KW), by one gather."""
    x = asarray(x)
    if x.ndim < 2:
        raise ShapeError(f"pooling needs an input with at least two (spatial) axes, got {x.shape}")
    pads, (oh, ow) = _pool_geometry(x.shape, window, strides, padding)
    if any(p != (0, 0) for p in pads):
        x = sh.pad(x, np.asarray(fill, x.dtype), [(0, 0, 0)] * (x.ndim - 2) + [(lo, hi, 0) for lo, hi in pads])
    hp, wp = x.shape[-2:]
    rows = (np.arange(oh) * strides[0])[:, None, None, None] + np.arange(window[0])[None, None, :, None]
    cols = (np.arange(ow) * strides[1])[None, :, None, None] + np.arange(window[1])[None, None, None, :]
    idx = (rows * wp + cols).reshape(oh, ow, window[0] * window[1]).astype(np.int64)
    flat = sh.reshape(x, x.shape[:-2] + (hp * wp,))
    return take(flat, idx, x.ndim - 2)


def _window_args(window_shape: Sequence[int], strides: Sequence[int] | None) -> tuple[tuple[int, int], tuple[int, int]]:
    window = tuple(int(w) for w in window_shape)
    if len(window) != 2:
        raise ValueError(f"pooling windows are 2-D (over the last two axes), got {window_shape}")
    stride = tuple(int(s) for s in strides) if strides is not None else window
    return window, stride  # type: ignore[return-value]


def max_pool(x: Any, window_shape: Sequence[int], strides: Sequence[int] | None = None,
             padding: Any = "VALID") -> Any:
    """Max over windows of the last two axes (NCHW); padding counts as -inf."""
    window, stride = _window_args(window_shape, strides)
    x = asarray(x)
    fill = -np.inf if dtypes.is_float(x.dtype) else np.iinfo(x.dtype).min
    return fnp.max(_patches(x, window, stride, padding, fill), axis=-1)


def avg_pool(x: Any, window_shape: Sequence[int], strides: Sequence[int] | None = None,
             padding: Any = "VALID") -> Any:
    """Mean over windows of the last two axes (NCHW); padded zeros count, as in flax's default."""
    window, stride = _window_args(window_shape, strides)
    (x,) = promote(x, to_inexact=True)
    return fnp.mean(_patches(x, window, stride, padding, 0.0), axis=-1)
