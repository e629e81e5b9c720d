"""``dot_product_attention``: ``jax.nn.dot_product_attention`` composed from fungraph.numpy, so
grad, vmap, jit and the OpenCL backend see only ordinary operations.

Shapes follow JAX: query ``BTNH``, key and value ``BSKH`` (or the same without ``B``), where
``N`` query heads share ``K`` key/value heads in groups of ``G = N // K`` (query head ``n``
reads key/value head ``n // G``). Logits, bias and masks are ``BNTS``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph.numpy._util import asarray
from fungraph.primitives.callback import stop_gradient


def _as_4d(x: Any) -> Any:
    """JAX's rule: missing leading axes (the batch, for a ``TNH`` query) are added as size 1."""
    x = asarray(x)
    return fnp.reshape(x, (1,) * (4 - x.ndim) + x.shape) if x.ndim < 4 else x


def _check(x: Any, name: str, shape: tuple[int, ...], dtype: np.dtype | None) -> None:
    """JAX's argument checks: rank, dtype, and each size that is not -1."""
    if x.ndim != len(shape):
        raise ValueError(f"dot_product_attention: {name} must have {len(shape)} dimensions, got shape {x.shape}")
    if dtype is not None and x.dtype != dtype:
        raise ValueError(f"dot_product_attention: {name} dtype should be {dtype}, but got {x.dtype}")
    if any(want not in (-1, got) for want, got in zip(shape, x.shape)):
        wanted = tuple("?" if s == -1 else s for s in shape)
        raise ValueError(f"dot_product_attention: {name} shape should be {wanted}, but got {x.shape}")


def _lengths(x: Any, name: str, batch: int) -> Any:
    if x is None:
        return None
    x = asarray(x)
    if x.shape != (batch,) or x.dtype != dtypes.int32:
        raise ValueError(f"dot_product_attention: {name} must be an int32 array of shape ({batch},), as JAX's "
                         f"(int64 lengths are refused with x64 on), got {x.dtype}{list(x.shape)}")
    return x


def _window(local_window_size: int | tuple[int, int] | None) -> tuple[int, int] | None:
    if local_window_size is None:
        return None
    if isinstance(local_window_size, int):
        return (local_window_size, local_window_size)
    left, right = local_window_size
    return (int(left), int(right))


def _static_mask(t: int, s: int, is_causal: bool, window: tuple[int, int] | None) -> np.ndarray | None:
    """The ``(T, S)`` positions that causality and the local window allow (query ``i`` sees key
    ``j`` when ``j <= i``, and when ``i - left <= j <= i + right``), or None without either."""
    if not is_causal and window is None:
        return None
    q = np.arange(t)[:, None]
    k = np.arange(s)[None, :]
    allowed = np.ones((t, s), bool)
    if is_causal:
        allowed &= k <= q
    if window is not None:
        left, right = window
        allowed &= (q - left <= k) & (k <= q + right)
    return allowed


def _allowed(mask: Any, static: np.ndarray | None, q_len: Any, kv_len: Any, t: int, s: int) -> Any:
    """Where the logits take part (broadcastable to ``BNTS``), or None when everything does."""
    parts = [p for p in (mask, static) if p is not None]
    if q_len is not None:
        parts.append(fnp.less(np.arange(t)[None, None, :, None], fnp.reshape(q_len, (-1, 1, 1, 1))))
    if kv_len is not None:
        parts.append(fnp.less(np.arange(s)[None, None, None, :], fnp.reshape(kv_len, (-1, 1, 1, 1))))
    if not parts:
        return None
    allowed = parts[0]
    for p in parts[1:]:
        allowed = fnp.logical_and(allowed, p)
    return allowed


def _masked_value(dtype: np.dtype) -> np.ndarray:
    """JAX's stand-in for a masked logit: large and negative but finite in float32 too, so a
    row with every logit masked gets equal weights (the mean of the values) rather than NaN."""
    big = min(float(np.finfo(dtype).max), float(np.finfo(np.float32).max))
    return np.asarray(-0.7 * big, dtype)


def dot_product_attention(query: Any, key: Any, value: Any, bias: Any = None, mask: Any = None, *,
                          scale: float | None = None, is_causal: bool = False, query_seq_lengths: Any = None,
                          key_value_seq_lengths: Any = None, local_window_size: int | tuple[int, int] | None = None,
                          implementation: str | None = None, return_residual: bool = False) -> Any:
    """``softmax(scale * Q K^T + bias, masked) V`` per head, as ``jax.nn.dot_product_attention``
    (the softmax in float32 whatever the dtype, as JAX's).

    ``mask`` is boolean (True takes part), ``bias`` is added to the logits; both broadcast to
    ``BNTS``. ``query_seq_lengths``/``key_value_seq_lengths`` mask padding (query rows past their
    length come out zero); ``local_window_size`` is ``(left, right)`` or one int for both.
    ``return_residual`` also returns the logsumexp of each row's logits (``BTN``, no gradient).
    ``implementation`` may be None or ``"xla"`` (the same computation here)."""
    if implementation == "cudnn":
        raise NotImplementedError("dot_product_attention: implementation='cudnn' is cuDNN's CUDA flash attention, "
                                  "which fungraph does not have; use implementation=None or 'xla' (fungraph "
                                  "composes attention from its own operations on every backend)")
    if implementation not in (None, "xla"):
        raise ValueError(f"dot_product_attention: unsupported implementation {implementation!r}; "
                         "use None or 'xla'")
    out_shape = asarray(query).shape
    q, k, v = _as_4d(query), _as_4d(key), _as_4d(value)
    b, s, kv_heads, h = k.shape
    _check(v, "value", (b, s, kv_heads, h), k.dtype)
    _check(q, "query", (b, -1, -1, h), k.dtype)
    t, n = q.shape[1], q.shape[2]
    if n % kv_heads:
        raise ValueError(f"dot_product_attention: the number of query heads must be a multiple of key/value "
                         f"heads, but got {n} vs {kv_heads}")
    if mask is not None:
        mask = _as_4d(mask)
        _check(mask, "mask", (-1, -1, -1, -1), dtypes.bool_)
    if bias is not None:
        bias = _as_4d(bias)
    q_len = _lengths(query_seq_lengths, "query_seq_lengths", b)
    kv_len = _lengths(key_value_seq_lengths, "key_value_seq_lengths", b)
    groups = n // kv_heads

    logits_dtype = dtypes.promote_types(q.dtype, dtypes.float32)
    grouped_q = fnp.reshape(q.astype(logits_dtype), (b, t, kv_heads, groups, h))
    logits = fnp.einsum("btkgh,bskh->bkgts", grouped_q, k.astype(logits_dtype))
    logits = fnp.reshape(logits, (b, n, t, s))
    factor = 1.0 / math.sqrt(h) if scale is None else scale
    logits = logits * np.asarray(factor, logits_dtype)
    if bias is not None:
        logits = (logits + bias).astype(logits_dtype)
    allowed = _allowed(mask, _static_mask(t, s, is_causal, _window(local_window_size)), q_len, kv_len, t, s)
    if allowed is not None:
        logits = fnp.where(allowed, logits, _masked_value(logits_dtype))

    logits = logits.astype(dtypes.float32)
    row_max = stop_gradient(fnp.max(logits, axis=-1, keepdims=True))
    weights = fnp.exp(logits - row_max)
    total = fnp.sum(weights, axis=-1, keepdims=True)
    probs = (weights / total).astype(k.dtype)
    grouped_probs = fnp.reshape(probs, (b, kv_heads, groups, t, s))
    out = fnp.reshape(fnp.einsum("bkgts,bskh->btkgh", grouped_probs, v), (b, t, n, h))
    if q_len is not None:
        valid = fnp.less(np.arange(t)[None, :, None, None], fnp.reshape(q_len, (-1, 1, 1, 1)))
        out = out * valid.astype(out.dtype)
    out = fnp.reshape(out, out_shape)
    if not return_residual:
        return out
    lse = (fnp.log(total[..., 0]) + row_max[..., 0]).astype(k.dtype)
    residual = fnp.reshape(fnp.transpose(lse, (0, 2, 1)), out_shape[:-1])
    return out, stop_gradient(residual)
