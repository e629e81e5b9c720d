"""``jax.ops``: segment reductions (``segment_sum``, ``segment_prod``, ``segment_max``,
``segment_min``), as JAX defines them: a scatter of ``data`` into ``num_segments`` rows that start
at the reduction's identity, out-of-range and negative ids dropped (JAX's ``FILL_OR_DROP``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import core
from fungraph import numpy as jnp
from fungraph.errors import ConcretizationTypeError
from fungraph.lax._slicing import GatherScatterMode

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]


def _identity(op: str, dtype: np.dtype) -> Any:
    """The value an empty segment holds: the identity of the scatter's reduction."""
    if op == "add":
        return 0
    if op == "multiply":
        return 1
    largest = op == "min"
    if dtype == np.bool_:
        return largest
    if np.issubdtype(dtype, np.inexact):
        return np.inf if largest else -np.inf
    info = np.iinfo(dtype)
    return info.max if largest else info.min


def _num_segments(num_segments: Any, segment_ids: Any, name: str) -> int:
    """``num_segments``, or ``max(segment_ids) + 1`` of concrete ids (as JAX, which needs a static
    output shape)."""
    if num_segments is None:
        if isinstance(segment_ids, core.Tracer):
            raise ConcretizationTypeError(
                f"{name}: num_segments=None needs concrete segment_ids to size the output, but they are traced "
                f"({segment_ids.aval}); pass num_segments as a Python int")
        num_segments = int(np.max(np.asarray(segment_ids))) + 1 if np.size(segment_ids) else 0
    if isinstance(num_segments, core.Tracer):
        raise ConcretizationTypeError(f"{name}: num_segments must be a static int, got a traced value "
                                      f"({num_segments.aval}); mark it static (static_argnums)")
    num_segments = int(num_segments)
    if num_segments < 0:
        raise ValueError(f"{name}: num_segments must be non-negative, got {num_segments}")
    return num_segments


def _segment(name: str, op: str, reducer: Callable[..., Any], data: Any, segment_ids: Any,
             num_segments: int | None, indices_are_sorted: bool, unique_indices: bool,
             bucket_size: int | None, mode: Any) -> Any:
    data, segment_ids = jnp.asarray(data), jnp.asarray(segment_ids)
    if not np.issubdtype(segment_ids.dtype, np.integer):
        raise TypeError(f"{name}: segment_ids must be integers, got {segment_ids.dtype.name}{list(segment_ids.shape)}")
    if segment_ids.ndim == 0 or data.ndim == 0 or data.shape[:segment_ids.ndim] != segment_ids.shape:
        raise ValueError(f"{name}: segment_ids {segment_ids.dtype.name}{list(segment_ids.shape)} must index the "
                         f"leading axes of data {data.dtype.name}{list(data.shape)}")
    if data.dtype == np.bool_ and op in ("add", "multiply"):
        raise TypeError(f"{name}: data of dtype bool cannot be {'summed' if op == 'add' else 'multiplied'} "
                        f"(as in JAX): convert it first (data.astype(int)); got {data.dtype.name}{list(data.shape)}")
    n = _num_segments(num_segments, segment_ids, name)
    mode = "drop" if mode is None else mode
    if GatherScatterMode.from_any(mode) is GatherScatterMode.CLIP:
        segment_ids = jnp.clip(segment_ids, 0, max(n - 1, 0))          # JAX does not wrap a negative id first
    elif not np.issubdtype(segment_ids.dtype, np.unsignedinteger):
        segment_ids = jnp.where(segment_ids < 0, n, segment_ids)
    tail = data.shape[segment_ids.ndim:]
    fill = _identity(op, data.dtype)
    kwargs = {"mode": mode, "indices_are_sorted": indices_are_sorted, "unique_indices": unique_indices}
    if bucket_size is None:
        out = jnp.full((n, *tail), fill, dtype=data.dtype)
        return getattr(out.at[segment_ids], op)(data, **kwargs)
    if segment_ids.ndim != 1:
        raise ValueError(f"{name}: bucket_size needs one-dimensional segment_ids, got {list(segment_ids.shape)}")
    buckets = -(-segment_ids.shape[0] // bucket_size)
    out = jnp.full((buckets, n, *tail), fill, dtype=data.dtype)
    bucket = jnp.arange(segment_ids.shape[0]) // bucket_size
    out = getattr(out.at[bucket, segment_ids], op)(data, **kwargs)
    return reducer(out, axis=0).astype(data.dtype)


def segment_sum(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
                unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None) -> Any:
    """Sums of the rows of ``data`` by segment id: ``out[i] = sum(data[segment_ids == i])``."""
    return _segment("segment_sum", "add", jnp.sum, data, segment_ids, num_segments, indices_are_sorted,
                    unique_indices, bucket_size, mode)


def segment_prod(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
                 unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None) -> Any:
    """Products of the rows of ``data`` by segment id (1 for an empty segment)."""
    return _segment("segment_prod", "multiply", jnp.prod, data, segment_ids, num_segments, indices_are_sorted,
                    unique_indices, bucket_size, mode)


def segment_max(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
                unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None) -> Any:
    """Maxima of the rows of ``data`` by segment id (the dtype's lowest value, ``-inf`` for
    floats, for an empty segment)."""
    return _segment("segment_max", "max", jnp.max, data, segment_ids, num_segments, indices_are_sorted,
                    unique_indices, bucket_size, mode)


def segment_min(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
                unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None) -> Any:
    """Minima of the rows of ``data`` by segment id (the dtype's highest value, ``inf`` for
    floats, for an empty segment)."""
    return _segment("segment_min", "min", jnp.min, data, segment_ids, num_segments, indices_are_sorted,
                    unique_indices, bucket_size, mode)
