"""The elementwise product of two BCOO arrays, as ``jax.experimental.sparse.bcoo_multiply_sparse``:
every pair of entries (one from each operand) at the same position multiplies, in an output of
``lhs.nse * rhs.nse`` entries (JAX's bound, so ``nse`` agrees with JAX's), the matching pairs
first in row-major order of the pair, the rest padding."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.experimental.sparse.bcoo import BCOO, _over_batch, bcoo_update_layout

__all__ = ["bcoo_multiply_sparse"]


def bcoo_multiply_sparse(lhs: BCOO, rhs: BCOO) -> BCOO:
    """``lhs * rhs`` of two BCOO arrays of one rank and one number of dense dimensions, with
    numpy broadcasting of size-1 axes; the shared leading batch dimensions are mapped, extra
    batch dimensions of one operand become sparse ones first."""
    if not isinstance(lhs, BCOO) or not isinstance(rhs, BCOO):
        raise TypeError(f"bcoo_multiply_sparse: expected two BCOO arrays, got {type(lhs)} and {type(rhs)}")
    if lhs.ndim != rhs.ndim:
        raise TypeError(f"bcoo_multiply_sparse: arrays must have same number of dimensions, got {lhs.shape}, "
                        f"{rhs.shape}")
    if lhs.n_dense != rhs.n_dense:
        raise NotImplementedError(f"bcoo_multiply_sparse: arrays with differing numbers of dense dimensions: "
                                  f"{lhs!r}, {rhs!r}")
    out_shape = tuple(np.broadcast_shapes(lhs.shape, rhs.shape))
    n_batch = min(lhs.n_batch, rhs.n_batch)
    lhs, rhs = (_batch_at_most(m, n_batch) for m in (lhs, rhs))
    lhs_shape, rhs_shape = lhs.shape[n_batch:], rhs.shape[n_batch:]
    n_sparse = lhs.n_sparse
    def unbatched(ld: Any, li: Any, rd: Any, ri: Any) -> tuple[Any, Any]:
        return _multiply_unbatched(ld, li, rd, ri, lhs_shape, rhs_shape, n_sparse)

    batch_shape = out_shape[:n_batch]
    args = (_batch_full(lhs.data, n_batch, batch_shape), _batch_full(lhs.indices, n_batch, batch_shape),
            _batch_full(rhs.data, n_batch, batch_shape), _batch_full(rhs.indices, n_batch, batch_shape))
    data, indices = _over_batch(unbatched, n_batch, (0, 0, 0, 0))(*args)
    return BCOO((data, indices), shape=out_shape)


def _batch_at_most(mat: BCOO, n_batch: int) -> BCOO:
    """``mat`` with its batch dimensions beyond the first ``n_batch`` made sparse."""
    return mat if mat.n_batch == n_batch else bcoo_update_layout(mat, n_batch=n_batch)


def _batch_full(x: Any, n_batch: int, batch_shape: tuple[int, ...]) -> Any:
    """``x`` with its leading ``n_batch`` (possibly size-1) axes broadcast to ``batch_shape``."""
    return fnp.broadcast_to(x, tuple(batch_shape) + tuple(x.shape[n_batch:]))


def _multiply_unbatched(lhs_data: Any, lhs_indices: Any, rhs_data: Any, rhs_indices: Any,
                        lhs_shape: tuple[int, ...], rhs_shape: tuple[int, ...], n_sparse: int) -> tuple[Any, Any]:
    """The pairs of entries that agree on every sparse axis neither operand broadcasts (size 1),
    each at the larger of the two indices (the non-broadcast one); padding takes the largest
    size of the shape as its index, as JAX's."""
    lhs_nse, rhs_nse = lhs_indices.shape[0], rhs_indices.shape[0]
    nse = lhs_nse * rhs_nse
    pairs = zip(lhs_shape[:n_sparse], rhs_shape[:n_sparse])
    compared = np.asarray([k for k, (a, b) in enumerate(pairs) if a != 1 and b != 1], np.int32)
    if len(compared):
        mask = fnp.all(lhs_indices[:, None, compared] == rhs_indices[None, :, compared], axis=-1)
    else:
        mask = fnp.ones((lhs_nse, rhs_nse), bool)
    if nse == 0:
        data = fnp.zeros((0,) + tuple(lhs_data.shape[1:]), fnp.result_type(lhs_data.dtype, rhs_data.dtype))
        return data, fnp.zeros((0, lhs_indices.shape[1]), lhs_indices.dtype)
    i_lhs, i_rhs = fnp.nonzero(mask, size=nse, fill_value=(lhs_nse, rhs_nse))
    data = (lhs_data.at[i_lhs].get(mode="fill", fill_value=0) * rhs_data.at[i_rhs].get(mode="fill", fill_value=0))
    fill_lhs, fill_rhs = max(lhs_shape, default=0), max(rhs_shape, default=0)
    indices = fnp.maximum(lhs_indices.at[i_lhs].get(mode="fill", fill_value=fill_lhs),
                          rhs_indices.at[i_rhs].get(mode="fill", fill_value=fill_rhs))
    return data, indices.astype(lhs_indices.dtype)

