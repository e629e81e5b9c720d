"""``jax.lax``'s shape operations with explicit shapes: ``reshape``, ``broadcast_in_dim``,
``pad`` with interior padding, ``concatenate``, ``split``/``tile``/``stack``, and the constant
makers ``iota``/``full``. Each binds fungraph's shape primitives."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError, Tracer
from fungraph.ir import aval_of
from fungraph.lax._elementwise import _same_dtype
from fungraph.lax._linalg import _no_sharding
from fungraph.primitives import shape as sh
from fungraph.primitives._rules import normalize_axis
from fungraph.primitives.elementwise import weak as weakly_typed
from fungraph.primitives.operands import asarray, cast, is_weak, normalize_axes, take_static


def reshape(operand: Any, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None, *,
            out_sharding: Any = None) -> Any:
    """``operand`` (transposed by ``dimensions`` first, when given) with shape ``new_sizes``."""
    _no_sharding("reshape", out_sharding)
    x = asarray(operand)
    if dimensions is not None:
        x = sh.transpose(x, tuple(int(d) for d in dimensions))
    return sh.reshape(x, tuple(int(d) for d in new_sizes))


def transpose(operand: Any, permutation: Sequence[int]) -> Any:
    return sh.transpose(asarray(operand), tuple(int(d) for d in permutation))


def broadcast_in_dim(operand: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int], *,
                     out_sharding: Any = None) -> Any:
    """``operand``'s axis ``i`` becomes axis ``broadcast_dimensions[i]`` of ``shape`` (size kept
    or 1); the other axes are new."""
    _no_sharding("broadcast_in_dim", out_sharding)
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
    return sh.broadcast_to(sh.reshape(x, tuple(expanded)), shape)


def broadcast_like(arr: Any, like_arr: Any) -> Any:
    """``arr`` broadcast (numpy's rules) to the shape of ``like_arr`` (``jax.lax.broadcast_like``)."""
    x = asarray(arr)
    shape = tuple(aval_of(asarray(like_arr)).shape)
    xs = aval_of(x).shape
    if len(xs) > len(shape) or any(s not in (1, t) for s, t in zip(xs[::-1], shape[::-1])):
        raise ValueError(f"lax.broadcast_like: cannot broadcast {aval_of(x)} to the shape {shape} of like_arr")
    return broadcast_in_dim(x, shape, tuple(range(len(shape) - len(xs), len(shape))))


def broadcast(operand: Any, sizes: Sequence[int], *, out_sharding: Any = None) -> Any:
    """``operand`` with leading axes ``sizes`` added."""
    _no_sharding("broadcast", out_sharding)
    x = asarray(operand)
    rank = len(aval_of(x).shape)
    return broadcast_in_dim(x, tuple(sizes) + aval_of(x).shape, tuple(range(len(sizes), len(sizes) + rank)))


def squeeze(array: Any, dimensions: Sequence[int]) -> Any:
    x = asarray(array)
    shape = aval_of(x).shape
    axes = normalize_axes(tuple(dimensions), len(shape), "squeeze")
    for ax in axes:
        if shape[ax] != 1:
            raise ShapeError(f"squeeze: cannot select an axis to squeeze out which has size not equal to one "
                             f"(axis {ax} of shape {shape})")
    return sh.reshape(x, tuple(d for i, d in enumerate(shape) if i not in axes))


def expand_dims(array: Any, dimensions: Sequence[int]) -> Any:
    x = asarray(array)
    out_ndim = len(aval_of(x).shape) + len(dimensions)
    axes = normalize_axes(tuple(dimensions), out_ndim, "expand_dims")
    sizes = iter(aval_of(x).shape)
    return sh.reshape(x, tuple(1 if i in axes else next(sizes) for i in range(out_ndim)))


def rev(operand: Any, dimensions: Sequence[int]) -> Any:
    x = asarray(operand)
    return sh.rev(x, normalize_axes(tuple(dimensions), len(aval_of(x).shape), "flip")) if len(dimensions) else x


def collapse(operand: Any, start_dimension: int, stop_dimension: int | None = None) -> Any:
    """Axes ``start_dimension:stop_dimension`` merged into one."""
    x = asarray(operand)
    shape = aval_of(x).shape
    stop = len(shape) if stop_dimension is None else stop_dimension
    merged = int(np.prod(shape[start_dimension:stop], dtype=np.int64))
    return sh.reshape(x, shape[:start_dimension] + (merged,) + shape[stop:])


def concatenate(operands: Sequence[Any], dimension: int) -> Any:
    xs = _same_dtype("concatenate", *operands)
    if any(not aval_of(x).shape for x in xs):
        raise ShapeError("concatenate: zero-dimensional arrays cannot be concatenated")
    return sh.concatenate(xs, normalize_axis(int(dimension), len(aval_of(xs[0]).shape), "concatenate"))


def pad(operand: Any, padding_value: Any, padding_config: Sequence[tuple[int, int, int]]) -> Any:
    """``(low, high, interior)`` per axis: ``interior`` values between neighbours, then ``low``
    before and ``high`` after; negative ``low``/``high`` crop."""
    x, value = _same_dtype("pad", operand, padding_value)
    shape = aval_of(x).shape
    config = [tuple(int(v) for v in c) for c in padding_config]
    if len(config) != len(shape) or any(len(c) != 3 or c[2] < 0 for c in config):
        raise ShapeError(f"lax.pad: padding_config {padding_config} needs one (low, high, interior >= 0) per "
                         f"axis of {aval_of(x)}")
    grown = [(builtins.max(lo, 0), builtins.max(hi, 0), c) for lo, hi, c in config]
    if any(g != (0, 0, 0) for g in grown):
        x = sh.pad(x, sh.reshape(value, ()), grown)
    padded = aval_of(x).shape
    start = [-lo if lo < 0 else 0 for lo, _, _ in config]
    stop = [d + hi if hi < 0 else d for d, (_, hi, _) in zip(padded, config)]
    if any(b < a for a, b in zip(start, stop)):
        raise ShapeError(f"lax.pad: padding_config {padding_config} crops more than {aval_of(operand)} holds")
    return sh.slice_(x, start, stop, None) if (start, stop) != ([0] * len(padded), list(padded)) else x


def split(operand: Any, sizes: Sequence[int], axis: int = 0) -> list[Any]:
    """``operand`` cut along ``axis`` into consecutive pieces of ``sizes`` (summing to its size)."""
    x = asarray(operand)
    shape = aval_of(x).shape
    axis = int(axis) % builtins.max(len(shape), 1)
    sizes = [int(s) for s in sizes]
    if any(s < 0 for s in sizes) or sum(sizes) != shape[axis]:
        raise ShapeError(f"lax.split: sizes {sizes} must be >= 0 and sum to axis {axis} of {aval_of(x)}")
    cuts = np.cumsum([0] + sizes)
    out = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        start, stop = [0] * len(shape), list(shape)
        start[axis], stop[axis] = int(lo), int(hi)
        out.append(sh.slice_(x, start, stop, None))
    return out


def tile(operand: Any, reps: Sequence[int]) -> Any:
    """``operand`` repeated ``reps[i]`` times along axis ``i`` (one entry per axis)."""
    x = asarray(operand)
    reps = tuple(int(r) for r in reps)
    if len(reps) != len(aval_of(x).shape) or any(r < 0 for r in reps):
        raise TypeError(f"lax.tile: reps {reps} needs one non-negative entry per axis of {aval_of(x)}")
    shape = aval_of(x).shape
    inter = tuple(d for pair in zip(reps, shape) for d in pair)
    out = sh.broadcast_in_dim(x, inter, tuple(range(1, 2 * len(shape), 2)))
    return sh.reshape(out, tuple(r * d for r, d in zip(reps, shape)))


def broadcast_to_rank(x: Any, rank: int) -> Any:
    """``x`` with leading unit axes up to ``rank`` (unchanged when it has as many already)."""
    x = asarray(x)
    nd = len(aval_of(x).shape)
    return x if nd >= rank else sh.reshape(x, (1,) * (int(rank) - nd) + aval_of(x).shape)


def stack(operands: Sequence[Any], axis: int = 0) -> Any:
    """The operands (one shape, one dtype) joined along a new ``axis``."""
    xs = _same_dtype("stack", *operands)
    if not xs:
        raise ValueError("need at least one array to stack")
    if len({aval_of(x).shape for x in xs}) != 1:
        raise ShapeError(f"stack: all input arrays must have the same shape, got {[aval_of(x).shape for x in xs]}")
    return concatenate([expand_dims(x, (axis,)) for x in xs], axis)


def unstack(x: Any, axis: int = 0) -> tuple[Any, ...]:
    """``x``'s slices along ``axis``, that axis removed."""
    x = asarray(x)
    (axis,) = normalize_axes(axis, len(aval_of(x).shape), "unstack")
    return tuple(take_static(x, k, axis) for k in range(aval_of(x).shape[axis]))


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape numpy broadcasting gives ``shapes``."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*(tuple(s) for s in shapes)))
    except ValueError:
        raise ValueError(f"lax.broadcast_shapes: incompatible shapes {[tuple(s) for s in shapes]}") from None


# --- constants ------------------------------------------------------------------------------------


def iota(dtype: Any, size: int) -> Any:
    return np.arange(int(size), dtype=dtypes.canonicalize(dtype))


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int, *, out_sharding: Any = None) -> Any:
    _no_sharding("broadcasted_iota", out_sharding)
    shape = tuple(int(d) for d in shape)
    line = np.arange(shape[dimension], dtype=dtypes.canonicalize(dtype))
    return np.broadcast_to(line.reshape([-1 if k == dimension else 1 for k in range(len(shape))]), shape).copy()


def full(shape: Sequence[int], fill_value: Any, dtype: Any = None, *, sharding: Any = None) -> Any:
    _no_sharding("full", sharding)
    shape = tuple(int(d) for d in shape)
    if dtype is None:
        weak = is_weak(fill_value)
        dt = dtypes.canonicalize(np.asarray(fill_value).dtype) if weak else aval_of(asarray(fill_value)).dtype
    else:
        dt = dtypes.canonicalize(dtype)
    v = cast(fill_value, dt)
    if not isinstance(v, Tracer):
        out = np.full(shape, v, dtype=dt)
    else:
        out = sh.broadcast_in_dim(v, shape, tuple(range(len(shape) - len(aval_of(v).shape), len(shape))))
    return weakly_typed(out) if dtype is None and dtypes.is_weak(fill_value) else out


def full_like(x: Any, fill_value: Any, dtype: Any = None, shape: Sequence[int] | None = None,
              sharding: Any = None) -> Any:
    """JAX's ``lax.full_like``: weakly typed when ``x`` is and no dtype is asked for."""
    _no_sharding("full_like", sharding)
    a = aval_of(asarray(x))
    out = full(a.shape if shape is None else shape, fill_value, a.dtype if dtype is None else dtype)
    return weakly_typed(out) if dtype is None and dtypes.is_weak(x) else out


def empty(shape: Sequence[int], dtype: Any, *, out_sharding: Any = None) -> Any:
    """An array of ``shape`` whose values must not be read (zeros here)."""
    _no_sharding("empty", out_sharding)
    return np.zeros(tuple(int(d) for d in shape), dtypes.canonicalize(dtype))
