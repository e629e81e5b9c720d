"""Shape arithmetic of windowed operations (convolutions, reduce_window), the helpers of
``jax.lax`` that JAX's example libraries (``stax``) call to size layers before running them:
pure functions of shapes, returning Python ints as JAX's do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fungraph.core import ShapeError
from fungraph.lax._convolution import conv_dimension_numbers
from fungraph.lax._windows import padding_pairs


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int], window_strides: Sequence[int],
                    padding: str) -> list[tuple[int, int]]:
    """'SAME', 'SAME_LOWER' or 'VALID' as one (low, high) pair per spatial axis (SAME puts the
    odd element high, SAME_LOWER low)."""
    if not isinstance(padding, str) or padding.upper() not in ("SAME", "SAME_LOWER", "VALID"):
        raise RuntimeError(f"Unrecognized padding type: expected 'VALID', 'SAME', or 'SAME_LOWER', got {padding}.")
    return list(padding_pairs(padding, in_shape, window_shape, window_strides))


def _stride_dim(d: int, window: int, stride: int) -> int:
    return max(0, d - window + stride) // stride


def _dilate_shape(shape: Sequence[int], dilation: Sequence[int]) -> tuple[int, ...]:
    if any(d <= 0 for d in dilation):
        raise TypeError(f"All dilations must be positive, got {tuple(dilation)}.")
    dilation = (1,) * (len(shape) - len(dilation)) + tuple(dilation)
    return tuple(0 if n == 0 else 1 + d * (n - 1) for n, d in zip(shape, dilation))


def conv_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], strides: Sequence[int], pads: Any,
                     batch_group_count: int = 1) -> tuple[int, ...]:
    """The output shape of a convolution of an (N, C, spatial...) input by an (O, I, spatial...)
    kernel."""
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected {len(lhs_shape) - 2}, "
                        f"got {len(pads)}.")
    padded = [int(n) + int(lo) + int(hi) for n, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        raise ValueError(f"Negative padding is larger than the size of the corresponding dimension: got "
                         f"padding={pads} for lhs_shape[2:]={tuple(lhs_shape[2:])}")
    space = tuple(_stride_dim(p, int(k), int(s)) for p, k, s in zip(padded, rhs_shape[2:], strides))
    batch = int(lhs_shape[0]) // batch_group_count
    return (batch, int(rhs_shape[0])) + space


def _canonical(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
               dimension_numbers: Any) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    lhs_perm, rhs_perm, out_perm = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    return tuple(int(lhs_shape[i]) for i in lhs_perm), tuple(int(rhs_shape[i]) for i in rhs_perm), tuple(out_perm)


def _in_layout(canonical: Sequence[int], out_perm: Sequence[int]) -> tuple[int, ...]:
    out = [0] * len(canonical)
    for size, axis in zip(canonical, out_perm):
        out[axis] = int(size)
    return tuple(out)


def conv_general_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], window_strides: Sequence[int],
                             padding: Any, dimension_numbers: Any) -> tuple[int, ...]:
    """The output shape of ``conv_general_dilated`` (no dilation) in the output layout."""
    lhs, rhs, out_perm = _canonical(lhs_shape, rhs_shape, dimension_numbers)
    return _in_layout(conv_shape_tuple(lhs, rhs, window_strides, padding), out_perm)


def _transpose_padding(k: int, s: int, padding: Any) -> tuple[int, int]:
    """The (before, after) padding of one axis of ``conv_transpose``, as JAX's."""
    if padding == "SAME":
        total = k + s - 2
        before = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        before = k - 1
    else:
        raise ValueError(f"Invalid padding mode: {padding}")
    return before, total - before


def conv_transpose_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], window_strides: Sequence[int],
                               padding: Any, dimension_numbers: Any) -> tuple[int, ...]:
    """The output shape of ``conv_transpose`` in the output layout."""
    lhs, rhs, out_perm = _canonical(lhs_shape, rhs_shape, dimension_numbers)
    if isinstance(padding, str):
        padding = [_transpose_padding(k, s, padding) for k, s in zip(rhs[2:], window_strides)]
    totals = [sum(int(p) for p in pair) for pair in padding]
    space = tuple((i - 1) * s - k + 2 + p for i, k, s, p in zip(lhs[2:], rhs[2:], window_strides, totals))
    return _in_layout((lhs[0], rhs[0]) + space, out_perm)


def reduce_window_shape_tuple(operand_shape: Sequence[int], window_dimensions: Sequence[int],
                              window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
                              base_dilation: Sequence[int] | None = None,
                              window_dilation: Sequence[int] | None = None) -> tuple[int, ...]:
    """The output shape of ``reduce_window`` with explicit (low, high) padding."""
    if base_dilation is not None:
        operand_shape = _dilate_shape(operand_shape, base_dilation)
    if window_dilation is not None:
        window_dimensions = _dilate_shape(window_dimensions, window_dilation)
    if not (len(operand_shape) == len(window_dimensions) == len(window_strides) == len(padding)):
        raise ShapeError(f"reduce_window_shape_tuple: operand shape {tuple(operand_shape)}, window "
                         f"{tuple(window_dimensions)}, strides {tuple(window_strides)} and padding {padding} "
                         f"need one entry per axis")
    padded = [int(d) + int(lo) + int(hi) for d, (lo, hi) in zip(operand_shape, padding)]
    return tuple(_stride_dim(p, int(w), int(s)) for p, w, s in zip(padded, window_dimensions, window_strides))
