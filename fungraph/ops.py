"""``fungraph.ops``: JAX's segment reductions (``jax.ops.segment_sum`` and its kin), which graph
networks and molecular-dynamics codes use to pool values by an index (per node, per particle).

Each is a scatter into an array filled with the reduction's identity, as JAX writes them: a
segment no index names holds the identity (0, 1, the dtype's lowest or highest value), and an
index outside ``[0, num_segments)`` is dropped (``mode="clip"`` clamps it instead)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph.core import ConcretizationError
from fungraph.lax._slicing import GatherScatterMode

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]


def _identity(op: str, dtype: np.dtype) -> Any:
    """The value a segment with no data holds: JAX's ``_get_identity``."""
    if op == "add":
        return 0
    if op == "multiply":
        return 1
    lowest = op == "max"
    if dtype == dtypes.bool_:
        return not lowest
    if dtypes.is_int(dtype):
        info = np.iinfo(dtype)
        return info.min if lowest else info.max
    return -np.inf if lowest else np.inf


def _num_segments(name: str, segment_ids: Any, num_segments: Any) -> int:
    if num_segments is None:
        try:
            num_segments = int(fnp.max(segment_ids)) + 1
        except ConcretizationError as e:
            raise ConcretizationError(f"{name}: `num_segments` must be given when the segment ids are traced "
                                      f"(inside jit, vmap or a loop body)") from e
    num_segments = int(num_segments)
    if num_segments < 0:
        raise ValueError("num_segments must be non-negative.")
    return num_segments


def _segment_update(name: str, op: str, data: Any, segment_ids: Any, num_segments: Any,
                    indices_are_sorted: bool, unique_indices: bool, bucket_size: int | None, mode: Any) -> Any:
    """Scatter ``data`` by ``segment_ids`` with ``op`` into an array of the identity; negative
    ids are out of bounds (JAX does not wrap them here)."""
    data, segment_ids = fnp.asarray(data), fnp.asarray(segment_ids)
    if not dtypes.is_int(segment_ids.dtype):
        raise TypeError(f"{name}: segment_ids must be integers, got {segment_ids.dtype}")
    n = _num_segments(name, segment_ids, num_segments)
    clip = GatherScatterMode.from_any(mode) is GatherScatterMode.CLIP
    ids = fnp.clip(segment_ids, 0, max(n - 1, 0)) if clip else fnp.where(segment_ids < 0, n, segment_ids)
    fill = _identity(op, data.dtype)
    kwargs = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode="clip" if clip else "drop")
    if bucket_size is None:
        out = fnp.full((n,) + data.shape[1:], fill, dtype=data.dtype)
        return getattr(out.at[ids], op)(data, **kwargs)
    buckets = -(-ids.shape[0] // bucket_size)
    out = fnp.full((buckets, n) + data.shape[1:], fill, dtype=data.dtype)
    out = getattr(out.at[fnp.arange(ids.shape[0]) // bucket_size, ids[None, :]], op)(data, **kwargs)
    reducer = {"add": fnp.sum, "multiply": fnp.prod, "max": fnp.max, "min": fnp.min}[op]
    return reducer(out, axis=0).astype(data.dtype)


def segment_sum(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
                unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None) -> Any:
    """The sum of ``data``'s rows in each segment: ``out[i] = sum(data[segment_ids == i])``."""
    return _segment_update("segment_sum", "add", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode)


def segment_prod(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
                 unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None) -> Any:
    """The product of ``data``'s rows in each segment (1 where a segment is empty)."""
    return _segment_update("segment_prod", "multiply", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode)


def segment_max(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
                unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None) -> Any:
    """The maximum of ``data``'s rows in each segment (the dtype's lowest value where empty)."""
    return _segment_update("segment_max", "max", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode)


def segment_min(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
                unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None) -> Any:
    """The minimum of ``data``'s rows in each segment (the dtype's highest value where empty)."""
    return _segment_update("segment_min", "min", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode)
