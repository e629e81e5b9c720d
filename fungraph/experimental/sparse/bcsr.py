"""The batched compressed-sparse-row (BCSR) array of ``jax.experimental.sparse``, in its basic
form: two sparse dimensions (no batch or dense ones), made from and turned into dense arrays
and BCOO ones, and multiplied with dense arrays through its BCOO form."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.experimental.sparse.bcoo import BCOO, JAXSparse, bcoo_fromdense
from fungraph.tree_util import register_pytree_node_class

__all__ = ["BCSR", "bcsr_fromdense", "bcsr_todense"]


@register_pytree_node_class
class BCSR(JAXSparse):
    """A 2-d sparse matrix in compressed-row form, as ``jax.experimental.sparse.BCSR``: ``data``
    and column ``indices`` of its ``nse`` entries in row order, and ``indptr``, where row ``i``'s
    entries are ``indptr[i]:indptr[i + 1]``."""

    def __init__(self, args: tuple[Any, Any, Any], *, shape: Sequence[int], indices_sorted: bool = False,
                 unique_indices: bool = False) -> None:
        data, indices, indptr = (fnp.asarray(a) for a in args)
        self.shape = tuple(operator.index(s) for s in shape)
        rows = self.shape[0] if self.shape else -1
        if len(self.shape) != 2 or data.ndim != 1 or indices.shape != data.shape or indptr.shape != (rows + 1,):
            raise NotImplementedError(f"BCSR: fungraph supports 2-d matrices without batch or dense dimensions; got "
                                      f"data {list(data.shape)}, indices {list(indices.shape)}, indptr "
                                      f"{list(indptr.shape)} for shape {self.shape}")
        self.data, self.indices, self.indptr = data, indices, indptr
        self.indices_sorted = indices_sorted
        self.unique_indices = unique_indices

    @property
    def nse(self) -> int:
        return self.indices.shape[-1]

    n_batch = 0
    n_dense = 0
    n_sparse = 2

    def __repr__(self) -> str:
        return f"BCSR({self.dtype}{list(self.shape)}, nse={self.nse})"

    @classmethod
    def fromdense(cls, mat: Any, *, nse: int | None = None, index_dtype: Any = np.int32, n_dense: int = 0,
                  n_batch: int = 0) -> BCSR:
        """The BCSR form of the dense matrix ``mat``."""
        return bcsr_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense, n_batch=n_batch)

    @classmethod
    def from_bcoo(cls, arr: BCOO) -> BCSR:
        """The BCSR form of a 2-d BCOO array whose indices are sorted."""
        if arr.ndim != 2 or arr.n_batch or arr.n_dense:
            raise NotImplementedError(f"BCSR.from_bcoo: fungraph converts only 2-d BCOO arrays without batch or dense "
                                      f"dimensions, got {arr!r}")
        rows, columns = arr.indices[:, 0], arr.indices[:, 1]
        counts = fnp.zeros(arr.shape[0], arr.indices.dtype).at[rows].add(1, mode="drop")
        indptr = fnp.concatenate([fnp.zeros(1, arr.indices.dtype), fnp.cumsum(counts, dtype=arr.indices.dtype)])
        return cls((arr.data, columns, indptr), shape=arr.shape, indices_sorted=arr.indices_sorted,
                   unique_indices=arr.unique_indices)

    def to_bcoo(self) -> BCOO:
        """The same matrix as a BCOO array: each entry's row read off ``indptr``."""
        positions = fnp.arange(self.nse, dtype=self.indptr.dtype)
        rows = fnp.searchsorted(self.indptr[1:], positions, side="right").astype(self.indices.dtype)
        indices = fnp.stack([rows, self.indices], axis=-1)
        return BCOO((self.data, indices), shape=self.shape, indices_sorted=self.indices_sorted,
                    unique_indices=self.unique_indices)

    def todense(self) -> Any:
        """The dense matrix."""
        return self.to_bcoo().todense()

    def tree_flatten(self) -> tuple[tuple[Any, Any, Any], tuple[Any, ...]]:
        return (self.data, self.indices, self.indptr), (self.shape, self.indices_sorted, self.unique_indices)

    @classmethod
    def tree_unflatten(cls, aux: tuple[Any, ...], children: Sequence[Any]) -> BCSR:
        out = object.__new__(cls)
        out.data, out.indices, out.indptr = children
        out.shape, out.indices_sorted, out.unique_indices = aux
        return out


def bcsr_fromdense(mat: Any, *, nse: int | None = None, n_batch: int = 0, n_dense: int = 0,
                   index_dtype: Any = np.int32) -> BCSR:
    """The BCSR form of the dense matrix ``mat``: its nonzeros in row-major order, padded to
    ``nse`` (padding entries sit past the last row's end, column index ``shape[1]``)."""
    mat = fnp.asarray(mat)
    if mat.ndim != 2 or n_batch or n_dense:
        raise NotImplementedError(f"bcsr_fromdense: fungraph supports 2-d matrices without batch or dense dimensions, "
                                  f"got shape {tuple(mat.shape)} with n_batch={n_batch}, n_dense={n_dense}")
    return BCSR.from_bcoo(bcoo_fromdense(mat, nse=nse, index_dtype=index_dtype))


def bcsr_todense(mat: BCSR) -> Any:
    """The dense matrix ``mat`` stands for."""
    return mat.todense()
