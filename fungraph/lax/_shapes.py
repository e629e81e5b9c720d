"""``jax.lax``'s shape operations with explicit shapes: ``reshape``, ``broadcast_in_dim``,
``pad`` with interior padding, ``concatenate``, ``split``/``tile``/``stack``, and the constant
makers ``iota``/``full``. Each binds fungraph's shape primitives."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph.core import ShapeError
from fungraph.ir import aval_of
from fungraph.lax._elementwise import _same_dtype
from fungraph.lax._linalg import _no_sharding
from fungraph.numpy._util import asarray


def reshape(operand: Any, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None) -> Any:
    """``operand`` (transposed by ``dimensions`` first, when given) with shape ``new_sizes``."""
    x = asarray(operand)
    if dimensions is not None:
        x = fnp.transpose(x, tuple(dimensions))
    return fnp.reshape(x, tuple(int(d) for d in new_sizes))


def transpose(operand: Any, permutation: Sequence[int]) -> Any:
    return fnp.transpose(asarray(operand), tuple(permutation))


def broadcast_in_dim(operand: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Any:
    """``operand``'s axis ``i`` becomes axis ``broadcast_dimensions[i]`` of ``shape`` (size kept
    or 1); the other axes are new."""
    x = asarray(operand)
    shape = tuple(int(d) for d in shape)
    dims = tuple(int(d) for d in broadcast_dimensions)
    xs = aval_of(x).shape
    if len(dims) != len(xs) or any(not 0 <= d < len(shape) for d in dims) or list(dims) != sorted(set(dims)) or \
            any(s not in (1, shape[d]) for s, d in zip(xs, dims)):
        raise ShapeError(f"lax.broadcast_in_dim: cannot place {aval_of(x)} at dimensions {dims} of shape {shape}")
    expanded = [1] * len(shape)
    for s, d in zip(xs, dims):
        expanded[d] = s
    return fnp.broadcast_to(fnp.reshape(x, tuple(expanded)), shape)


def broadcast(operand: Any, sizes: Sequence[int]) -> Any:
    """``operand`` with leading axes ``sizes`` added."""
    x = asarray(operand)
    rank = len(aval_of(x).shape)
    return broadcast_in_dim(x, tuple(sizes) + aval_of(x).shape, tuple(range(len(sizes), len(sizes) + rank)))


def squeeze(array: Any, dimensions: Sequence[int]) -> Any:
    return fnp.squeeze(asarray(array), axis=tuple(dimensions))


def expand_dims(array: Any, dimensions: Sequence[int]) -> Any:
    return fnp.expand_dims(asarray(array), tuple(dimensions))


def rev(operand: Any, dimensions: Sequence[int]) -> Any:
    return fnp.flip(asarray(operand), axis=tuple(dimensions)) if len(dimensions) else asarray(operand)


def collapse(operand: Any, start_dimension: int, stop_dimension: int | None = None) -> Any:
    """Axes ``start_dimension:stop_dimension`` merged into one."""
    x = asarray(operand)
    shape = aval_of(x).shape
    stop = len(shape) if stop_dimension is None else stop_dimension
    merged = int(np.prod(shape[start_dimension:stop], dtype=np.int64))
    return fnp.reshape(x, shape[:start_dimension] + (merged,) + shape[stop:])


def concatenate(operands: Sequence[Any], dimension: int) -> Any:
    xs = _same_dtype("concatenate", *operands)
    return fnp.concatenate(xs, axis=dimension)


def pad(operand: Any, padding_value: Any, padding_config: Sequence[tuple[int, int, int]]) -> Any:
    """``(low, high, interior)`` per axis: ``interior`` values between neighbours, then ``low``
    before and ``high`` after; negative ``low``/``high`` crop."""
    x, value = _same_dtype("pad", operand, padding_value)
    shape = aval_of(x).shape
    config = [tuple(int(v) for v in c) for c in padding_config]
    if len(config) != len(shape) or any(len(c) != 3 or c[2] < 0 for c in config):
        raise ShapeError(f"lax.pad: padding_config {padding_config} needs one (low, high, interior >= 0) per "
                         f"axis of {aval_of(x)}")
    if any(c[2] for c in config):
        spread = tuple(s + (s - 1) * c[2] if s else 0 for s, c in zip(shape, config))
        base = fnp.broadcast_to(fnp.reshape(value, ()), spread)
        x = fnp.at(base)[tuple(builtins.slice(None, None, c[2] + 1) for c in config)].set(x)
        shape = spread
    grow = [(builtins.max(lo, 0), builtins.max(hi, 0)) for lo, hi, _ in config]
    if any(lo or hi for lo, hi in grow):
        x = fnp.pad(x, grow, constant_values=value)
    crop = tuple(builtins.slice(-lo if lo < 0 else None, hi if hi < 0 else None) for lo, hi, _ in config)
    out = x[crop]
    if any(d < 0 for d in aval_of(out).shape):
        raise ShapeError(f"lax.pad: padding_config {padding_config} crops more than {aval_of(operand)} holds")
    return out


def split(operand: Any, sizes: Sequence[int], axis: int = 0) -> list[Any]:
    """``operand`` cut along ``axis`` into consecutive pieces of ``sizes`` (summing to its size)."""
    x = asarray(operand)
    shape = aval_of(x).shape
    axis = int(axis) % builtins.max(len(shape), 1)
    sizes = [int(s) for s in sizes]
    if any(s < 0 for s in sizes) or sum(sizes) != shape[axis]:
        raise ShapeError(f"lax.split: sizes {sizes} must be >= 0 and sum to axis {axis} of {aval_of(x)}")
    cuts = np.cumsum([0] + sizes)
    index = [builtins.slice(None)] * len(shape)
    out = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        index[axis] = builtins.slice(int(lo), int(hi))
        out.append(x[tuple(index)])
    return out


def tile(operand: Any, reps: Sequence[int]) -> Any:
    """``operand`` repeated ``reps[i]`` times along axis ``i`` (one entry per axis)."""
    x = asarray(operand)
    reps = tuple(int(r) for r in reps)
    if len(reps) != len(aval_of(x).shape) or any(r < 0 for r in reps):
        raise TypeError(f"lax.tile: reps {reps} needs one non-negative entry per axis of {aval_of(x)}")
    return fnp.tile(x, reps)


def broadcast_to_rank(x: Any, rank: int) -> Any:
    """``x`` with leading unit axes up to ``rank`` (unchanged when it has as many already)."""
    x = asarray(x)
    nd = len(aval_of(x).shape)
    return x if nd >= rank else fnp.reshape(x, (1,) * (int(rank) - nd) + aval_of(x).shape)


def stack(operands: Sequence[Any], axis: int = 0) -> Any:
    """The operands (one shape, one dtype) joined along a new ``axis``."""
    return fnp.stack(_same_dtype("stack", *operands), axis=axis)


def unstack(x: Any, axis: int = 0) -> tuple[Any, ...]:
    """``x``'s slices along ``axis``, that axis removed."""
    x = asarray(x)
    return tuple(fnp.moveaxis(x, axis, 0)[k] for k in range(aval_of(x).shape[axis]))


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape numpy broadcasting gives ``shapes``."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*(tuple(s) for s in shapes)))
    except ValueError:
        raise ValueError(f"lax.broadcast_shapes: incompatible shapes {[tuple(s) for s in shapes]}") from None


# --- constants ------------------------------------------------------------------------------------


def iota(dtype: Any, size: int) -> Any:
    return np.arange(int(size), dtype=dtypes.canonical(dtype))


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int) -> Any:
    shape = tuple(int(d) for d in shape)
    line = np.arange(shape[dimension], dtype=dtypes.canonical(dtype))
    return np.broadcast_to(line.reshape([-1 if k == dimension else 1 for k in range(len(shape))]), shape).copy()


def full(shape: Sequence[int], fill_value: Any, dtype: Any = None) -> Any:
    return fnp.full(tuple(int(d) for d in shape), fill_value, dtype=dtype)


def full_like(x: Any, fill_value: Any, dtype: Any = None, shape: Sequence[int] | None = None) -> Any:
    a = aval_of(asarray(x))
    return full(a.shape if shape is None else shape, fill_value, a.dtype if dtype is None else dtype)


def empty(shape: Sequence[int], dtype: Any, *, out_sharding: Any = None) -> Any:
    """An array of ``shape`` whose values must not be read (zeros here)."""
    _no_sharding("empty", out_sharding)
    return fnp.zeros(tuple(int(d) for d in shape), dtypes.canonical(dtype))
