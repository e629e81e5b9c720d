"""``fungraph.lax``: lower-level operations, like ``jax.lax``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fungraph.core import ShapeError
from fungraph.numpy._util import asarray, promote
from fungraph.primitives import conv as _conv
from fungraph.primitives.callback import stop_gradient
from fungraph.primitives.linalg import dot_general

__all__ = ["conv", "conv_general_dilated", "dot_general", "padding_pairs", "stop_gradient"]

_ = (stop_gradient, dot_general)


def padding_pairs(padding: Any, in_shape: Sequence[int], window: Sequence[int],
                  strides: Sequence[int], dilation: Sequence[int] | None = None) -> tuple[tuple[int, int], ...]:
    """"SAME"/"VALID" or explicit (lo, hi) pairs, as explicit pairs (JAX's SAME split)."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return tuple((0, 0) for _ in in_shape)
        if mode == "SAME":
            dil = dilation or (1,) * len(window)
            pairs = []
            for n, k, s, d in zip(in_shape, window, strides, dil):
                out = -(-n // s)
                total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
                pairs.append((total // 2, total - total // 2))
            return tuple(pairs)
        raise ValueError(f"padding must be 'SAME', 'VALID' or (lo, hi) pairs, got {padding!r}")
    pairs = tuple((int(lo), int(hi)) for lo, hi in padding)
    if len(pairs) != len(in_shape):
        raise ShapeError(f"padding {padding} needs one (lo, hi) pair per spatial axis ({len(in_shape)})")
    return pairs


def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                         lhs_dilation: Sequence[int] | None = None,
                         rhs_dilation: Sequence[int] | None = None) -> Any:
    """2-D convolution of an NCHW input with an OIHW kernel."""
    x, w = (asarray(a) for a in promote(lhs, rhs, to_inexact=True))
    if x.ndim != 4 or w.ndim != 4:
        raise ShapeError(f"conv: expected NCHW input and OIHW kernel (rank 4), got shapes {x.shape} and {w.shape}")
    strides = tuple(window_strides)
    rd = tuple(rhs_dilation or (1, 1))
    pads = padding_pairs(padding, x.shape[2:], w.shape[2:], strides, rd)
    return _conv.conv(x, w, strides, pads, tuple(lhs_dilation or (1, 1)), rd)


def conv(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any) -> Any:
    """``jax.lax.conv``: NCHW input, OIHW kernel, strides and "SAME"/"VALID"/explicit padding."""
    return conv_general_dilated(lhs, rhs, window_strides, padding)


