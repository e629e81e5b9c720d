"""``fungraph.nn``: ``jax.nn``'s activations, the softmax family, pooling (NCHW) and ``dot_product_attention``."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph import initializers as initializers
from fungraph import numpy as fnp
from fungraph._attention import dot_product_attention as dot_product_attention
from fungraph._softmax import log_softmax as log_softmax
from fungraph._softmax import logsumexp as logsumexp
from fungraph._softmax import softmax as softmax
from fungraph.core import ShapeError
from fungraph.ir import aval_of
from fungraph.numpy._util import asarray, normalize_axes, promote
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh
from fungraph.primitives.indexing import take

#: ``fungraph.nn`` is a module, so ``from fungraph.nn.initializers import glorot_normal`` (JAX
#: programs' ``from jax.nn.initializers import ...``) finds the submodule here.
sys.modules[f"{__name__}.initializers"] = initializers


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












def _float(x: Any) -> Any:
    (x,) = promote(x, to_inexact=True)
    return x


def identity(x: Any) -> Any:
    return asarray(x)


def tanh(x: Any) -> Any:
    return fnp.tanh(x)


def softplus(x: Any) -> Any:
    """log(1 + e^x), without overflow: ``logaddexp(x, 0)``."""
    x = _float(x)
    return fnp.logaddexp(x, np.zeros((), x.dtype))


def log_sigmoid(x: Any) -> Any:
    """log(sigmoid(x)) = -softplus(-x), accurate for large |x|."""
    return ew.neg(softplus(ew.neg(_float(x))))


def silu(x: Any) -> Any:
    """x * sigmoid(x) (also ``swish``)."""
    x = _float(x)
    return ew.mul(x, sigmoid(x))


swish = silu


def mish(x: Any) -> Any:
    x = _float(x)
    return ew.mul(x, fnp.tanh(softplus(x)))


def soft_sign(x: Any) -> Any:
    x = _float(x)
    return ew.div(x, ew.add(fnp.abs(x), np.ones((), x.dtype)))


def leaky_relu(x: Any, negative_slope: float = 1e-2) -> Any:
    """x where x >= 0, else ``negative_slope * x`` (slope 1 at 0, as in JAX)."""
    x = _float(x)
    return fnp.where(fnp.greater_equal(x, 0), x, ew.mul(np.asarray(negative_slope, x.dtype), x))


def _expm1_negative_part(x: Any, alpha: Any, divide: bool) -> Any:
    """``alpha * expm1(min(x, 0))`` (``/ alpha`` inside when ``divide``): the negative branch of
    elu and celu, its exponential never evaluated at large positive x (no inf * 0 in the
    gradient)."""
    neg = ew.select(fnp.greater(x, 0), np.zeros((), x.dtype), x)
    return ew.mul(alpha, fnp.expm1(ew.div(neg, alpha) if divide else neg))


def elu(x: Any, alpha: float = 1.0) -> Any:
    x = _float(x)
    return fnp.where(fnp.greater(x, 0), x, _expm1_negative_part(x, np.asarray(alpha, x.dtype), False))


def celu(x: Any, alpha: float = 1.0) -> Any:
    """``max(x, 0) + alpha * expm1(min(x, 0) / alpha)``, written as JAX's, so the derivatives at
    0 are JAX's (the kinks' ties split in half: celu'' (0) = 1 / (4 alpha))."""
    x = _float(x)
    a = np.asarray(alpha, x.dtype)
    zero = np.zeros((), x.dtype)
    return ew.add(fnp.maximum(x, zero), ew.mul(a, fnp.expm1(ew.div(fnp.minimum(x, zero), a))))


def selu(x: Any) -> Any:
    """``scale * elu(x, alpha)`` with the self-normalising constants."""
    x = _float(x)
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return ew.mul(np.asarray(scale, x.dtype), elu(x, alpha))


def relu6(x: Any) -> Any:
    """min(max(x, 0), 6), with derivative 0 at both kinks (as JAX)."""
    x = asarray(x)
    inside = fnp.logical_and(fnp.greater(x, 0), fnp.less(x, 6))
    return fnp.where(inside, x, fnp.where(fnp.greater_equal(x, 6), np.asarray(6, x.dtype), np.zeros((), x.dtype)))


def hard_tanh(x: Any) -> Any:
    x = _float(x)
    one = np.ones((), x.dtype)
    return fnp.where(fnp.greater(x, 1), one, fnp.where(fnp.less(x, -1), ew.neg(one), x))


def hard_sigmoid(x: Any) -> Any:
    """relu6(x + 3) / 6."""
    x = _float(x)
    return ew.div(relu6(ew.add(x, np.asarray(3, x.dtype))), np.asarray(6, x.dtype))


def hard_silu(x: Any) -> Any:
    """x * hard_sigmoid(x) (also ``hard_swish``)."""
    x = _float(x)
    return ew.mul(x, hard_sigmoid(x))


hard_swish = hard_silu


def squareplus(x: Any, b: float = 4) -> Any:
    """(x + sqrt(x^2 + b)) / 2, a smooth relu."""
    x = _float(x)
    return ew.mul(np.asarray(0.5, x.dtype), ew.add(x, fnp.sqrt(ew.add(ew.mul(x, x), np.asarray(b, x.dtype)))))


def sparse_plus(x: Any) -> Any:
    """0 below -1, (x + 1)^2 / 4 on [-1, 1], x above 1."""
    x = _float(x)
    mid = ew.mul(np.asarray(0.25, x.dtype), fnp.square(ew.add(x, np.ones((), x.dtype))))
    return fnp.where(fnp.less_equal(x, -1), np.zeros((), x.dtype), fnp.where(fnp.greater_equal(x, 1), x, mid))


def sparse_sigmoid(x: Any) -> Any:
    """The derivative of ``sparse_plus``: 0 below -1, (x + 1) / 2 on [-1, 1], 1 above."""
    x = _float(x)
    return ew.mul(np.asarray(0.5, x.dtype), fnp.clip(ew.add(x, np.ones((), x.dtype)), 0, 2))


def glu(x: Any, axis: int = -1) -> Any:
    """``a * sigmoid(b)`` for the two halves ``a, b`` of ``x`` along ``axis``."""
    x = _float(x)
    n = x.shape[axis]
    if n % 2:
        raise ShapeError(f"glu: axis {axis} of {aval_of(x)} has odd size {n}")
    a, b = fnp.split(x, 2, axis=axis)
    return ew.mul(a, sigmoid(b))


def standardize(x: Any, axis: Any = -1, mean: Any = None, variance: Any = None, epsilon: float = 1e-5,
                where: Any = None, *, algorithm: str = "fast") -> Any:
    """(x - mean) / sqrt(variance + epsilon) along ``axis``, the moments computed over the
    ``where`` elements when not given: ``algorithm="fast"`` takes mean(x^2) - mean(x)^2 (clipped
    at 0), ``"stable"`` the two-pass mean((x - mean)^2), as JAX's."""
    if algorithm not in ("fast", "stable"):
        raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
    x = _float(x)
    if mean is None:
        mean = fnp.mean(x, axis=axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = fnp.mean(fnp.square(ew.sub(x, mean)), axis=axis, keepdims=True, where=where)
        else:
            variance = ew.sub(fnp.mean(fnp.square(x), axis=axis, keepdims=True, where=where), fnp.square(mean))
            variance = fnp.clip(variance, 0)
    return ew.mul(ew.sub(x, mean), fnp.reciprocal(fnp.sqrt(ew.add(variance, np.asarray(epsilon, x.dtype)))))


def log1mexp(x: Any) -> Any:
    """log(1 - e^-x) for x > 0, accurate at both ends (Maechler's switch at log 2)."""
    x = _float(x)
    small = fnp.less(x, math.log(2))
    safe_small = fnp.where(small, x, np.ones((), x.dtype))
    safe_large = fnp.where(small, np.ones((), x.dtype), x)
    return fnp.where(small, fnp.log(ew.neg(fnp.expm1(ew.neg(safe_small)))),
                     fnp.log1p(ew.neg(fnp.exp(ew.neg(safe_large)))))


def logmeanexp(x: Any, axis: Any = None, where: Any = None, keepdims: bool = False) -> Any:
    """log(mean(exp(x))) along ``axis`` over the ``where`` elements, as ``logsumexp`` minus the
    log of their count."""
    x = _float(x)
    axes = normalize_axes(axis, x.ndim, "logmeanexp")
    if where is None:
        count = math.prod(x.shape[a] for a in axes)
        return ew.sub(logsumexp(x, axis=axes, keepdims=keepdims), np.asarray(math.log(count), x.dtype))
    mask = fnp.broadcast_to(fnp.asarray(where, dtype=bool), x.shape)
    count = fnp.sum(mask, axis=axes, keepdims=keepdims, dtype=x.dtype)
    return ew.sub(logsumexp(x, axis=axes, keepdims=keepdims, where=mask), fnp.log(count))


def one_hot(x: Any, num_classes: int, *, dtype: Any = None, axis: int = -1) -> Any:
    """1 where an entry of ``x`` equals a class index (a new axis ``axis`` of ``num_classes``), else 0."""
    x = asarray(x)
    out_axis = normalize_axes(axis, x.ndim + 1, "one_hot")[0]
    classes = np.arange(num_classes, dtype=x.dtype).reshape((1,) * x.ndim + (num_classes,))
    hot = fnp.astype(fnp.equal(fnp.expand_dims(x, -1), classes), dtype or dtypes.default_float())
    return hot if out_axis == x.ndim else fnp.moveaxis(hot, -1, out_axis)


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
