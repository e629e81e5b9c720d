"""Slicing and indexing of BCOO arrays, as ``jax.experimental.sparse``'s: ``bcoo_slice``,
``bcoo_dynamic_slice``, ``bcoo_squeeze``, ``bcoo_rev``, ``bcoo_broadcast_in_dim``, and ``A[idx]``
built from them the way ``jax.numpy`` builds basic indexing (a slice or a dynamic slice, then
reversal, squeeze and new axes).

A slice of the batch and dense dimensions slices ``data`` and ``indices``; a slice of the sparse
dimensions keeps every entry, shifting the indices of those inside the window and turning the
others into padding, so ``nse`` is kept unless it exceeds the window's size, when duplicates are
summed into that many entries (JAX's rule, so shapes and ``nse`` agree with JAX's).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes, lax
from fungraph import numpy as fnp
from fungraph.array import Array
from fungraph.core import Tracer
from fungraph.experimental.sparse.bcoo import BCOO, bcoo_sum_duplicates

__all__ = ["bcoo_broadcast_in_dim", "bcoo_dynamic_slice", "bcoo_getitem", "bcoo_rev", "bcoo_slice", "bcoo_squeeze"]


def _split(values: Sequence[Any], mat: BCOO) -> tuple[list[Any], list[Any], list[Any]]:
    """``values`` (one per axis of ``mat``) split into its batch, sparse and dense parts."""
    n_batch, n_sparse = mat.n_batch, mat.n_sparse
    values = list(values)
    return values[:n_batch], values[n_batch:n_batch + n_sparse], values[n_batch + n_sparse:]


def _per_entry(values: Sequence[Any], n_batch: int, dtype: Any) -> Any:
    """One value per sparse dimension, shaped to broadcast against indices of ``n_batch`` batch
    dimensions (``batch + (nse, n_sparse)``)."""
    row = fnp.stack([fnp.asarray(v).astype(dtype) for v in values])
    return row.reshape((1,) * (n_batch + 1) + (len(values),))


def _masked_data(data: Any, keep: Any, n_dense: int) -> Any:
    """``data`` with the entries where ``keep`` (``batch + (nse,)``) is False zeroed."""
    return fnp.where(keep.reshape(tuple(keep.shape) + (1,) * n_dense), data, fnp.zeros((), data.dtype))


def _fitted(data: Any, indices: Any, shape: tuple[int, ...], sparse_size: int, nse: int) -> BCOO:
    """The BCOO of ``(data, indices)``; when it holds more entries than its sparse window has
    positions, duplicates are summed into that many entries, as JAX's slices do."""
    out = BCOO((data, indices), shape=shape)
    if nse > sparse_size:
        out = bcoo_sum_duplicates(out, nse=sparse_size)
        return BCOO((out.data, out.indices), shape=shape)
    return out


def bcoo_slice(mat: BCOO, *, start_indices: Sequence[int], limit_indices: Sequence[int],
               strides: Sequence[int] | None = None) -> BCOO:
    """``lax.slice`` of a BCOO array: ``mat[start:limit:stride]`` on every axis, static bounds."""
    if not isinstance(mat, BCOO):
        raise TypeError(f"bcoo_slice: input should be BCOO array, got type(mat)={type(mat)}")
    starts = [operator.index(i) for i in start_indices]
    limits = [operator.index(i) for i in limit_indices]
    steps = [1] * mat.ndim if strides is None else [operator.index(i) for i in strides]
    if not len(starts) == len(limits) == len(steps) == mat.ndim:
        raise ValueError(f"bcoo_slice: start_indices {tuple(starts)}, limit_indices {tuple(limits)} and strides "
                         f"{tuple(steps)} must each have mat.ndim={mat.ndim} entries")
    if any(s <= 0 for s in steps):
        raise ValueError(f"strides must be a sequence of positive integers; got {steps}")
    if not all(0 <= s <= e <= d for s, e, d in zip(starts, limits, mat.shape)):
        raise ValueError(f"bcoo_slice: invalid indices. Got start_indices={starts}, limit_indices={limits} and "
                         f"shape={mat.shape}")
    n_batch = mat.n_batch
    start_b, start_s, start_d = _split(starts, mat)
    limit_b, limit_s, limit_d = _split(limits, mat)
    step_b, step_s, step_d = _split(steps, mat)
    data_index: list[slice] = []
    indices_index: list[slice] = []
    for i, window in enumerate(slice(*a) for a in zip(start_b, limit_b, step_b)):
        data_index.append(slice(None) if mat.data.shape[i] != mat.shape[i] else window)
        indices_index.append(slice(None) if mat.indices.shape[i] != mat.shape[i] else window)
    data_index.append(slice(None))
    data_index += [slice(*a) for a in zip(start_d, limit_d, step_d)]
    data, indices = mat.data[tuple(data_index)], mat.indices[tuple(indices_index)]
    new_shape = tuple(-(-(e - s) // st) for s, e, st in zip(starts, limits, steps))
    if not mat.n_sparse:
        return BCOO((data, indices), shape=new_shape)
    lo = _per_entry(start_s, n_batch, indices.dtype)
    hi = _per_entry(limit_s, n_batch, indices.dtype)
    step = _per_entry(step_s, n_batch, indices.dtype)
    keep = fnp.all((indices >= lo) & (indices < hi) & ((indices - lo) % step == 0), axis=-1, keepdims=True)
    indices = fnp.where(keep, (indices - lo + step - 1) // step, (hi - lo + step - 1) // step)
    data = _masked_data(data, keep[..., 0], mat.n_dense)
    sparse_size = math.prod(new_shape[n_batch:n_batch + mat.n_sparse])
    return _fitted(data, indices, new_shape, sparse_size, mat.nse)


def bcoo_dynamic_slice(mat: BCOO, start_indices: Sequence[Any], slice_sizes: Sequence[int]) -> BCOO:
    """``lax.dynamic_slice`` of a BCOO array: the ``slice_sizes`` window at (possibly traced)
    ``start_indices``; negative starts count from the end and windows are moved inside, as in
    ``lax.dynamic_slice``."""
    if not isinstance(mat, BCOO):
        raise TypeError(f"bcoo_dynamic_slice: input should be BCOO array, got type(mat)={type(mat)}")
    sizes = tuple(operator.index(i) for i in slice_sizes)
    starts = [fnp.asarray(i) for i in start_indices]
    if len(starts) != mat.ndim or len(sizes) != mat.ndim:
        raise ValueError(f"bcoo_dynamic_slice: start_indices ({len(starts)}) and slice_sizes {sizes} must have "
                         f"mat.ndim={mat.ndim} entries")
    if any(s.shape != () or not dtypes.is_int(s.dtype) for s in starts):
        raise TypeError(f"bcoo_dynamic_slice: start indices must be integer scalars, got "
                        f"{[f'{s.dtype}{list(s.shape)}' for s in starts]}")
    if not all(0 <= s <= d for s, d in zip(sizes, mat.shape)):
        raise TypeError(f"slice_sizes must be less than or equal to operand shape, got slice_sizes {sizes} for "
                        f"operand shape {mat.shape}")
    n_batch = mat.n_batch
    start_b, start_s, start_d = _split(starts, mat)
    size_b, size_s, size_d = _split(sizes, mat)
    zero = fnp.zeros((), np.int32)
    data_start, data_sizes, indices_start, indices_sizes = [], [], [], []
    for i, (start, size) in enumerate(zip(start_b, size_b)):
        data_broadcast = mat.data.shape[i] != mat.shape[i]
        indices_broadcast = mat.indices.shape[i] != mat.shape[i]
        data_start.append(zero if data_broadcast else start)
        data_sizes.append(1 if data_broadcast else size)
        indices_start.append(zero if indices_broadcast else start)
        indices_sizes.append(1 if indices_broadcast else size)
    data = lax.dynamic_slice(mat.data, data_start + [zero] + start_d, data_sizes + [mat.nse] + size_d)
    indices = lax.dynamic_slice(mat.indices, indices_start + [zero, zero], indices_sizes + [mat.nse, mat.n_sparse])
    if not mat.n_sparse:
        return BCOO((data, indices), shape=sizes)
    dtype = indices.dtype
    sparse_shape = np.asarray(mat.shape[n_batch:n_batch + mat.n_sparse], dtype)
    lo = fnp.stack([s.astype(dtype) for s in start_s])
    lo = fnp.clip(fnp.where(lo < 0, lo + sparse_shape, lo), 0, sparse_shape - np.asarray(size_s, dtype))
    lo = lo.reshape((1,) * (n_batch + 1) + (mat.n_sparse,))
    width = np.asarray(size_s, dtype).reshape((1,) * (n_batch + 1) + (mat.n_sparse,))
    keep = fnp.all((indices >= lo) & (indices < lo + width), axis=-1, keepdims=True)
    indices = fnp.where(keep, indices - lo, width)
    data = _masked_data(data, keep[..., 0], mat.n_dense)
    return _fitted(data, indices, sizes, math.prod(size_s), mat.nse)


def bcoo_squeeze(arr: BCOO, *, dimensions: Sequence[int]) -> BCOO:
    """``lax.squeeze`` of a BCOO array: the size-1 axes ``dimensions`` removed."""
    ndim = arr.ndim
    dims = tuple(sorted({operator.index(d) % ndim if ndim else operator.index(d) for d in dimensions}))
    if any(not 0 <= d < ndim or arr.shape[d] != 1 for d in dims):
        raise ValueError("cannot select an axis to squeeze out which has size not equal to one, got "
                         f"shape={arr.shape} and dimensions={tuple(dimensions)}")
    n_batch, n_sparse = arr.n_batch, arr.n_sparse
    batch_dims = tuple(d for d in dims if d < n_batch)
    kept_sparse = np.asarray([k for k in range(n_sparse) if k + n_batch not in dims], np.int32)
    dense_dims = tuple(d - n_sparse + 1 for d in dims if d >= n_batch + n_sparse)
    data = lax.squeeze(arr.data, batch_dims + dense_dims)
    indices = arr.indices if len(kept_sparse) == n_sparse else arr.indices[..., kept_sparse]
    indices = lax.squeeze(indices, batch_dims)
    out_shape = tuple(s for i, s in enumerate(arr.shape) if i not in dims)
    return BCOO((data, indices), shape=out_shape, indices_sorted=arr.indices_sorted,
                unique_indices=arr.unique_indices)


def bcoo_rev(operand: BCOO, dimensions: Sequence[int]) -> BCOO:
    """``lax.rev`` of a BCOO array: the order along ``dimensions`` reversed (padding stays padding)."""
    ndim = operand.ndim
    dims = [operator.index(d) for d in dimensions]
    if any(not 0 <= d < ndim for d in dims) or len(set(dims)) != len(dims):
        raise ValueError(f"bcoo_rev: dimensions {tuple(dims)} must be distinct axes of shape {operand.shape}")
    n_batch, n_sparse = operand.n_batch, operand.n_sparse
    batch_dims = [d for d in dims if d < n_batch]
    dense_dims = [d + 1 - n_sparse for d in dims if d >= n_batch + n_sparse]
    data, indices = operand.data, operand.indices
    if batch_dims:
        indices = lax.rev(indices, [d for d in batch_dims if indices.shape[d] != 1])
    if batch_dims or dense_dims:
        data = lax.rev(data, [d for d in batch_dims if data.shape[d] != 1] + dense_dims)
    flipped = np.asarray([n_batch + k in dims for k in range(n_sparse)])
    if flipped.any():
        sparse_shape = np.asarray(operand.shape[n_batch:n_batch + n_sparse], indices.dtype)
        reversed_ = fnp.where(flipped, sparse_shape - 1 - indices, indices)
        indices = fnp.where(reversed_ < 0, sparse_shape, reversed_)
    return BCOO((data, indices), shape=operand.shape)


def bcoo_broadcast_in_dim(mat: BCOO, *, shape: Sequence[int], broadcast_dimensions: Sequence[int],
                          sharding: Any = None) -> BCOO:
    """``lax.broadcast_in_dim`` of a BCOO array: new axes before the sparse ones are batch axes,
    after them dense ones (when ``mat`` has dense axes); the data are repeated along them. New
    sparse axes may only have size 1, as in JAX."""
    del sharding
    shape = tuple(operator.index(s) for s in shape)
    dims = tuple(operator.index(d) for d in broadcast_dimensions)
    if len(dims) != mat.ndim:
        raise ValueError(f"mat.shape={mat.shape} and broadcast_dimensions={dims} must have the same length")
    if list(dims) != sorted(set(dims)) or any(not 0 <= d < len(shape) or mat.shape[i] not in (1, shape[d])
                                              for i, d in enumerate(dims)):
        raise ValueError(f"bcoo_broadcast_in_dim: cannot place shape {mat.shape} at dimensions {dims} of shape "
                         f"{shape}")
    n_batch, n_sparse, n_dense, nse = mat.n_batch, mat.n_sparse, mat.n_dense, mat.nse
    batch_dims, sparse_dims, dense_dims = list(dims[:n_batch]), list(dims[n_batch:n_batch + n_sparse]), \
        list(dims[n_batch + n_sparse:])
    new_n_batch = min(dims[n_batch:], default=len(shape))
    new_n_dense = n_dense and len(shape) - min(dims[len(dims) - n_dense:])
    new_n_sparse = len(shape) - new_n_batch - new_n_dense
    if math.prod(mat.shape[n_batch:n_batch + n_sparse]) != math.prod(shape[new_n_batch:new_n_batch + new_n_sparse]):
        raise NotImplementedError(f"bcoo_broadcast_in_dim: broadcasting shape {mat.shape} to {shape} adds sparse "
                                  "dimensions of length other than 1 (as in JAX); convert with .todense()")
    data, indices = mat.data, mat.indices
    if (new_n_batch, new_n_dense) != (n_batch, n_dense):
        data_shape = shape[:new_n_batch] + (nse,) + shape[new_n_batch + new_n_sparse:]
        data_dims = tuple(batch_dims) + (new_n_batch,) + tuple(d + 1 - new_n_sparse for d in dense_dims)
        data = lax.broadcast_in_dim(data, data_shape, data_dims)
        indices = lax.broadcast_in_dim(indices, shape[:new_n_batch] + (nse, n_sparse),
                                       tuple(batch_dims) + (new_n_batch, new_n_batch + 1))
    if new_n_sparse != n_sparse:
        columns = [d - new_n_batch for d in sparse_dims]
        placed = fnp.zeros(tuple(indices.shape[:-1]) + (new_n_sparse,), indices.dtype)
        indices = placed.at[..., np.asarray(columns, np.int32)].set(indices) if columns else placed
    return BCOO((data, indices), shape=shape)


def _expand_dims(mat: BCOO, dimensions: Sequence[int]) -> BCOO:
    """``mat`` with new size-1 axes at ``dimensions`` of the result (``lax.expand_dims``)."""
    ndim = mat.ndim + len(dimensions)
    new = sorted(d % ndim for d in dimensions)
    kept = [d for d in range(ndim) if d not in new]
    sizes = iter(mat.shape)
    shape = tuple(1 if d in new else next(sizes) for d in range(ndim))
    return bcoo_broadcast_in_dim(mat, shape=shape, broadcast_dimensions=kept)


# --- A[idx]: basic indexing as jax.numpy's static and dynamic slices ---------------------------

def _is_static_int(e: Any) -> bool:
    if isinstance(e, (bool, np.bool_)):
        return False
    if isinstance(e, (int, np.integer)):
        return True
    return isinstance(e, np.ndarray) and e.ndim == 0 and np.issubdtype(e.dtype, np.integer)


def _is_scalar_index(e: Any) -> bool:
    """A traced or array 0-d integer index (a dynamic start)."""
    if not isinstance(e, (Tracer, Array)):
        return False
    return e.shape == () and dtypes.is_int(e.dtype)


def _expanded(idx: Any, mat: BCOO) -> list[Any]:
    """The entries of ``idx`` with its ellipsis expanded and trailing full slices added; index
    arrays (a gather) are refused."""
    entries = list(idx) if isinstance(idx, tuple) else [idx]
    for e in entries:
        if not (e is None or e is Ellipsis or isinstance(e, slice) or _is_static_int(e) or _is_scalar_index(e)):
            what = f"{type(e).__name__} {getattr(e, 'dtype', '')}{list(getattr(e, 'shape', ()))}"
            kind = np.result_type(getattr(e, "dtype", type(e)))
            if isinstance(e, (list, str)) or np.ndim(e) == 0 or not (dtypes.is_int(kind) or kind == np.bool_):
                raise IndexError(f"BCOO indexing: only integers, slices (`:`), ellipsis (`...`), None and integer "
                                 f"scalar arrays are valid indices, got the {what} in {idx!r}")
            raise NotImplementedError(f"BCOO indexing: fungraph supports integers, slices, None and Ellipsis (and "
                                      f"traced integer scalars), not the index {what} of {idx!r} (an index array "
                                      "is JAX's bcoo_gather); index .todense() instead")
        if isinstance(e, slice) and any(v is not None and not _is_static_int(v) for v in (e.start, e.stop, e.step)):
            raise IndexError(f"Slice entries must be static integers. Got {e}")
    if sum(e is Ellipsis for e in entries) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(e is not None and e is not Ellipsis for e in entries)
    if consumed > mat.ndim:
        raise IndexError(f"Too many indices: {mat.ndim}-dimensional array indexed with {consumed} regular indices.")
    fill = [slice(None)] * (mat.ndim - consumed)
    if any(e is Ellipsis for e in entries):
        at = next(i for i, e in enumerate(entries) if e is Ellipsis)
        return entries[:at] + fill + entries[at + 1:]
    return entries + fill


def bcoo_getitem(mat: BCOO, idx: Any) -> BCOO:
    """``mat[idx]`` for basic indices (integers, slices, None, Ellipsis; integers may be traced
    scalars), as ``jax.numpy``'s: static indices slice, traced ones slice dynamically (both
    clamp an out-of-bounds integer into range), then reversed, squeezed and expanded axes."""
    entries = _expanded(idx, mat)
    dynamic = any(_is_scalar_index(e) for e in entries)
    if dynamic and any(isinstance(e, slice) and e.step not in (None, 1, -1) for e in entries):
        raise NotImplementedError(f"BCOO indexing: a traced integer with the strided slice in {idx!r} needs JAX's "
                                  "bcoo_gather, which fungraph does not provide; index .todense() instead")
    starts: list[Any] = []
    limits: list[int] = []
    steps: list[int] = []
    rev_axes: list[int] = []
    squeeze_axes: list[int] = []
    new_axes: list[int] = []
    for e in entries:
        if e is None:
            new_axes.append(len(starts) - len(squeeze_axes) + len(new_axes))
            continue
        axis = len(starts)
        size = mat.shape[axis]
        if isinstance(e, slice):
            start, stop, step = e.indices(size)
            if step < 0:
                first = min(size, stop + 1 + abs(start - stop - 1) % abs(step))
                starts.append(first)
                limits.append(max(first, start + 1))
                rev_axes.append(axis)
            else:
                starts.append(start)
                limits.append(max(start, stop))
            steps.append(abs(step))
            continue
        if size == 0:
            raise IndexError(f"index is out of bounds for axis {axis} with size 0")
        if _is_static_int(e) and not dynamic:
            k = int(e) + size if int(e) < 0 else int(e)
            k = min(max(k, 0), size - 1)
            starts.append(k)
            limits.append(k + 1)
        else:
            starts.append(e)
            limits.append(-1)
        steps.append(1)
        squeeze_axes.append(axis)
    if dynamic:
        sizes = [1 if a in squeeze_axes else lim - s for a, (s, lim) in enumerate(zip(starts, limits))]
        out = bcoo_dynamic_slice(mat, [fnp.asarray(s) for s in starts], sizes)
    elif tuple(starts) == (0,) * mat.ndim and tuple(limits) == mat.shape and set(steps) <= {1}:
        out = mat
    else:
        out = bcoo_slice(mat, start_indices=starts, limit_indices=limits, strides=steps)
    if rev_axes:
        out = bcoo_rev(out, rev_axes)
    if squeeze_axes:
        out = bcoo_squeeze(out, dimensions=squeeze_axes)
    if new_axes:
        out = _expand_dims(out, new_axes)
    return out
