"""The batched-coordinate (BCOO) sparse array of ``jax.experimental.sparse``, built from
fungraph.numpy's gathers and scatter-adds, so every transformation applies with no sparse
primitive of its own.

A BCOO array of ``shape = batch + sparse + dense`` stores ``data`` of shape
``batch + (nse,) + dense`` and ``indices`` of shape ``batch + (nse, n_sparse)``: entry ``e`` of
batch ``b`` holds ``data[b, e]`` at sparse position ``indices[b, e]``. Duplicate positions add
up; an index equal to its dimension's size marks padding, which :func:`bcoo_todense` drops.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import dtypes, lax
from fungraph import numpy as fnp
from fungraph.api import vmap
from fungraph.core import ConcretizationError, Tracer
from fungraph.tree_util import register_pytree_node_class

__all__ = ["BCOO", "JAXSparse", "SparseEfficiencyError", "SparseEfficiencyWarning", "bcoo_concatenate",
           "bcoo_dot_general",
           "bcoo_extract", "bcoo_fromdense", "bcoo_multiply_dense", "bcoo_reduce_sum", "bcoo_reshape",
           "bcoo_sort_indices", "bcoo_sum_duplicates", "bcoo_todense", "bcoo_transpose", "bcoo_update_layout",
           "empty", "eye", "todense"]


class JAXSparse:
    """The base of the sparse array classes, as ``jax.experimental.sparse.JAXSparse``: what
    they share with arrays' operator protocol, and their refusal to densify implicitly."""

    #: above the arrays' (1000): an array's operator defers to ours (``X @ A``, ``2 * A``)
    __array_priority__ = 2000
    #: a numpy array's operators defer to ours too (``np_array @ A``)
    __array_ufunc__ = None
    __hash__ = None  # type: ignore[assignment]

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{self!r} is sparse and is not converted to a dense array implicitly: call .todense(), "
                        "or wrap the function in sparse.sparsify")


def todense(arr: Any) -> Any:
    """``arr`` as a dense array: a sparse array's ``todense()``, anything else as it is."""
    return arr.todense() if isinstance(arr, JAXSparse) else arr


@register_pytree_node_class
class BCOO(JAXSparse):
    """A sparse array in batched-coordinate form, as ``jax.experimental.sparse.BCOO``: a pytree
    of ``(data, indices)``. Its batch and dense sizes are read from ``data``, so ``vmap`` over a
    batch axis (``in_axes=0``) sees the BCOO of one batch element, as JAX's does."""

    def __init__(self, args: tuple[Any, Any], *, shape: Sequence[int], indices_sorted: bool = False,
                 unique_indices: bool = False) -> None:
        data, indices = args
        self.data = fnp.asarray(data)
        self.indices = fnp.asarray(indices)
        shape = tuple(operator.index(s) for s in shape)
        _validate(self.data, self.indices, shape)
        n_batch = self.indices.ndim - 2
        self._sparse_shape = shape[n_batch:n_batch + self.indices.shape[-1]]
        self.indices_sorted = indices_sorted
        self.unique_indices = unique_indices

    @property
    def n_batch(self) -> int:
        return self.indices.ndim - 2

    @property
    def n_sparse(self) -> int:
        return self.indices.shape[-1]

    @property
    def n_dense(self) -> int:
        return self.data.ndim - 1 - self.n_batch

    @property
    def nse(self) -> int:
        return self.indices.shape[-2]

    @property
    def shape(self) -> tuple[int, ...]:
        n_batch = self.n_batch
        return tuple(self.data.shape[:n_batch]) + self._sparse_shape + tuple(self.data.shape[n_batch + 1:])

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def T(self) -> BCOO:  # noqa: N802 - numpy's name
        return self.transpose()

    def __repr__(self) -> str:
        extra = f", nse={self.nse}"
        if self.n_batch:
            extra += f", n_batch={self.n_batch}"
        if self.n_dense:
            extra += f", n_dense={self.n_dense}"
        text = f"BCOO({self.dtype}{list(self.shape)}{extra})"
        if isinstance(self.data, Tracer):
            text = f"{type(self.data).__name__}[{text}]"
        return text

    @classmethod
    def fromdense(cls, mat: Any, *, nse: int | None = None, index_dtype: Any = np.int32, n_dense: int = 0,
                  n_batch: int = 0) -> BCOO:
        """The BCOO form of the dense array ``mat`` (see :func:`bcoo_fromdense`)."""
        return bcoo_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense, n_batch=n_batch)

    @classmethod
    def from_scipy_sparse(cls, mat: Any, *, index_dtype: Any = None, n_dense: int = 0, n_batch: int = 0) -> BCOO:
        """The BCOO form of a ``scipy.sparse`` matrix or array (anything with ``tocoo()``)."""
        if n_dense or n_batch:
            raise NotImplementedError("BCOO.from_scipy_sparse with nonzero n_dense or n_batch")
        coo = mat.tocoo()
        indices = np.stack([np.asarray(coo.row), np.asarray(coo.col)], axis=1).astype(index_dtype or np.int32)
        return cls((np.asarray(coo.data), indices), shape=coo.shape)

    def todense(self) -> Any:
        """The dense array this one stands for."""
        return bcoo_todense(self)

    def transpose(self, axes: Sequence[int] | None = None) -> BCOO:
        """The array with its axes permuted (reversed by default), within each of the batch,
        sparse and dense blocks."""
        perm = tuple(range(self.ndim))[::-1] if axes is None else tuple(axes)
        return bcoo_transpose(self, permutation=perm)

    def sum_duplicates(self, nse: int | None = None, remove_zeros: bool = True) -> BCOO:
        """Duplicate positions summed, indices sorted; ``remove_zeros`` first drops stored zeros.
        ``nse`` (the output's size) is needed under ``jit``: by default it is counted."""
        return bcoo_sum_duplicates(self, nse=nse, remove_zeros=remove_zeros)

    def sort_indices(self) -> BCOO:
        """The entries sorted by their indices, lexicographically."""
        return bcoo_sort_indices(self)

    def astype(self, dtype: Any) -> BCOO:
        """The array with its data cast to ``dtype``."""
        return BCOO((self.data.astype(dtype), self.indices), shape=self.shape, indices_sorted=self.indices_sorted,
                     unique_indices=self.unique_indices)

    def reshape(self, *new_sizes: Any) -> BCOO:
        """The array reshaped (C order); supported for arrays without batch or dense dimensions."""
        if len(new_sizes) == 1 and not isinstance(new_sizes[0], int):
            new_sizes = tuple(new_sizes[0])
        return bcoo_reshape(self, new_sizes=new_sizes)

    def update_layout(self, *, n_batch: int | None = None, n_dense: int | None = None,
                      on_inefficient: str | None = "error") -> BCOO:
        """The same array with ``n_batch`` batch and ``n_dense`` dense dimensions (see
        :func:`bcoo_update_layout`)."""
        return bcoo_update_layout(self, n_batch=n_batch, n_dense=n_dense, on_inefficient=on_inefficient)

    def block_until_ready(self) -> BCOO:
        self.data.block_until_ready()
        self.indices.block_until_ready()
        return self

    def tree_flatten(self) -> tuple[tuple[Any, Any], tuple[Any, ...]]:
        return (self.data, self.indices), (self._sparse_shape, self.indices_sorted, self.unique_indices)

    @classmethod
    def tree_unflatten(cls, aux: tuple[Any, ...], children: Sequence[Any]) -> BCOO:
        out = object.__new__(cls)
        out.data, out.indices = children
        out._sparse_shape, out.indices_sorted, out.unique_indices = aux
        if getattr(out.indices, "ndim", 2) < 2:
            raise ValueError(f"BCOO: indices of shape {tuple(out.indices.shape)} lost their entry axis: vmap (in_axes "
                             "or out_axes) over a BCOO must map one of its batch dimensions (n_batch of them lead "
                             "its shape)")
        return out


def _validate(data: Any, indices: Any, shape: tuple[int, ...]) -> None:
    """Check that ``data``, ``indices`` and ``shape`` describe one BCOO array."""
    what = f"BCOO: data {data.dtype}{list(data.shape)}, indices {indices.dtype}{list(indices.shape)}, shape {shape}"
    if indices.ndim < 2:
        raise ValueError(f"{what}: indices must have at least 2 dimensions (batch..., nse, n_sparse)")
    if not np.issubdtype(indices.dtype, np.integer):
        raise TypeError(f"{what}: indices must be integers")
    n_batch, n_sparse, nse = indices.ndim - 2, indices.shape[-1], indices.shape[-2]
    n_dense = data.ndim - 1 - n_batch
    if n_dense < 0 or n_batch + n_sparse + n_dense != len(shape):
        raise ValueError(f"{what}: data must have shape batch + (nse,) + dense, with "
                         f"{n_batch} batch and {n_sparse} sparse dimensions of the shape")
    if data.shape[n_batch] != nse:
        raise ValueError(f"{what}: data and indices disagree on the number of specified elements")
    for d, (a, i, s) in enumerate(zip(data.shape[:n_batch], indices.shape[:n_batch], shape[:n_batch])):
        if a != s or i not in (1, s):
            raise ValueError(f"{what}: batch dimension {d} has size {a} in data and {i} in indices, expected {s}")
    if tuple(data.shape[n_batch + 1:]) != shape[len(shape) - n_dense:]:
        raise ValueError(f"{what}: the dense dimensions of data must be the trailing ones of the shape")


def _batch_index(batch_shape: tuple[int, ...]) -> tuple[Any, ...]:
    """Index arrays of shape ``batch_shape + (1,)`` counting along each batch axis: with an
    entry axis of ``nse`` they address every batch element's entries."""
    full = tuple(batch_shape) + (1,)
    return tuple(lax.broadcasted_iota(np.int32, full, d) for d in range(len(batch_shape)))


def _sparse_index(indices: Any) -> tuple[Any, ...]:
    return tuple(indices[..., k] for k in range(indices.shape[-1]))


def _over_batch(fun: Callable[..., Any], n_batch: int, in_axes: Sequence[Any]) -> Callable[..., Any]:
    """``fun`` of one batch element mapped over ``n_batch`` leading axes of the arguments
    whose ``in_axes`` is 0."""
    for _ in range(n_batch):
        fun = vmap(fun, in_axes=tuple(in_axes))
    return fun


def _full_indices(indices: Any, batch_shape: tuple[int, ...]) -> Any:
    """``indices`` with its broadcast (size-1) batch axes expanded to ``batch_shape``."""
    return fnp.broadcast_to(indices, tuple(batch_shape) + tuple(indices.shape[-2:]))


def _in_bounds(indices: Any, sparse_shape: tuple[int, ...]) -> Any:
    """True for the entries whose every index lies inside ``sparse_shape`` (not padding)."""
    if not sparse_shape:
        return fnp.ones(indices.shape[:-1], bool)
    return fnp.all(indices < fnp.asarray(sparse_shape, indices.dtype), axis=-1)


def bcoo_todense(mat: BCOO) -> Any:
    """The dense array ``mat`` stands for: its data scatter-added at its indices, padding dropped."""
    return _todense(mat.data, mat.indices, mat.shape)


def _todense(data: Any, indices: Any, shape: tuple[int, ...]) -> Any:
    n_batch = indices.ndim - 2
    if indices.shape[-1] == 0:
        return fnp.broadcast_to(fnp.sum(data, axis=n_batch), shape)
    index = _batch_index(shape[:n_batch]) + _sparse_index(indices)
    return fnp.zeros(shape, data.dtype).at[index].add(data, mode="drop")


def bcoo_extract(sparr: BCOO, arr: Any) -> BCOO:
    """The values of the dense ``arr`` at ``sparr``'s indices, as a BCOO of ``sparr``'s layout
    (zero at padding)."""
    arr = fnp.asarray(arr)
    if tuple(arr.shape) != sparr.shape:
        raise ValueError(f"bcoo_extract: arr of shape {tuple(arr.shape)} does not match the sparse shape {sparr.shape}")
    data = _extract(sparr.indices, arr, sparr.n_batch)
    return BCOO((data, sparr.indices), shape=sparr.shape, indices_sorted=sparr.indices_sorted,
                unique_indices=sparr.unique_indices)


def _extract(indices: Any, arr: Any, n_batch: int) -> Any:
    nse = indices.shape[-2]
    if indices.shape[-1] == 0:
        expanded = fnp.expand_dims(arr, n_batch)
        return fnp.broadcast_to(expanded, arr.shape[:n_batch] + (nse,) + arr.shape[n_batch:])
    index = _batch_index(tuple(arr.shape[:n_batch])) + _sparse_index(indices)
    return arr.at[index].get(mode="fill", fill_value=0)


def bcoo_fromdense(mat: Any, *, nse: int | None = None, n_batch: int = 0, n_dense: int = 0,
                   index_dtype: Any = np.int32) -> BCOO:
    """The BCOO form of the dense ``mat``: its nonzero positions in row-major order within each
    batch element, padded to ``nse`` entries. ``nse`` defaults to the largest count of nonzeros
    of a batch element, which needs a concrete ``mat`` (pass ``nse`` under ``jit``)."""
    mat = fnp.asarray(mat)
    n_batch, n_dense = operator.index(n_batch), operator.index(n_dense)
    n_sparse = mat.ndim - n_batch - n_dense
    if n_batch < 0 or n_dense < 0 or n_sparse < 0:
        raise ValueError(f"bcoo_fromdense: n_batch={n_batch}, n_dense={n_dense} do not fit a mat of shape "
                         f"{tuple(mat.shape)}")
    batch_shape = tuple(mat.shape[:n_batch])
    sparse_shape = tuple(mat.shape[n_batch:n_batch + n_sparse])
    mask = mat != 0
    if n_dense:
        mask = fnp.any(mask, axis=tuple(range(mat.ndim - n_dense, mat.ndim)))
    counts = fnp.sum(mask.reshape(batch_shape + (-1,)), axis=-1)
    nse = _count_nse(counts, "bcoo_fromdense") if nse is None else operator.index(nse)
    if n_sparse == 0:
        indices = fnp.zeros(batch_shape + (nse, 0), index_dtype)
        data = _extract(indices, mat, n_batch)
        keep = fnp.arange(nse) < counts[..., None]
        return BCOO((fnp.where(keep.reshape(keep.shape + (1,) * n_dense), data, 0), indices), shape=mat.shape,
                    indices_sorted=True, unique_indices=True)
    indices = _nonzero_positions(mask.reshape(batch_shape + (-1,)), nse, sparse_shape).astype(index_dtype)
    return BCOO((_extract(indices, mat, n_batch), indices), shape=mat.shape, indices_sorted=True,
                unique_indices=True)


def _count_nse(counts: Any, who: str) -> int:
    """The largest of concrete ``counts`` (0 for none): a default ``nse``."""
    if isinstance(counts, Tracer):
        raise ConcretizationError(f"{who}: the number of specified elements depends on traced values; pass nse= "
                                  "explicitly under jit, vmap or grad")
    counts = np.asarray(counts)
    return int(counts.max()) if counts.size else 0


def _nonzero_positions(flat_mask: Any, nse: int, sparse_shape: tuple[int, ...]) -> Any:
    """The sparse indices of the first ``nse`` true entries of each row of ``flat_mask``
    (``batch + (prod(sparse_shape),)``), padded with ``sparse_shape``: shape
    ``batch + (nse, len(sparse_shape))``."""
    batch_shape = tuple(flat_mask.shape[:-1])
    size = flat_mask.shape[-1]
    rank = fnp.cumsum(flat_mask, axis=-1, dtype=np.int32) - 1
    slot = fnp.where(flat_mask, rank, nse)
    positions = fnp.broadcast_to(fnp.arange(size, dtype=np.int32), flat_mask.shape)
    flat = fnp.full(batch_shape + (nse,), size, np.int32).at[_batch_index(batch_shape) + (slot,)].set(
        positions, mode="drop")
    columns = []
    stride = size
    for dim in sparse_shape:
        stride //= max(dim, 1)
        columns.append(fnp.where(flat == size, dim, (flat // max(stride, 1)) % max(dim, 1)))
    return fnp.stack(columns, axis=-1)


def bcoo_transpose(mat: BCOO, *, permutation: Sequence[int]) -> BCOO:
    """``mat`` with its axes permuted; the permutation must keep the batch, sparse and dense
    axes within their blocks, as JAX's does."""
    perm = tuple(operator.index(p) for p in permutation)
    n_batch, n_sparse = mat.n_batch, mat.n_sparse
    if sorted(perm) != list(range(mat.ndim)):
        raise ValueError(f"bcoo_transpose: {perm} is not a permutation of the axes of shape {mat.shape}")
    batch_perm, sparse_perm, dense_perm = perm[:n_batch], perm[n_batch:n_batch + n_sparse], perm[n_batch + n_sparse:]
    if (sorted(batch_perm) != list(range(n_batch)) or sorted(sparse_perm) != list(range(n_batch, n_batch + n_sparse))):
        raise NotImplementedError(f"bcoo_transpose: the permutation {perm} mixes batch, sparse and dense dimensions "
                                  f"(n_batch={n_batch}, n_sparse={n_sparse}, n_dense={mat.n_dense}); convert with "
                                  ".todense() first")
    data = fnp.transpose(mat.data, batch_perm + (n_batch,) + tuple(n_batch + 1 + p - n_batch - n_sparse
                                                                   for p in dense_perm))
    indices = fnp.transpose(mat.indices, batch_perm + (n_batch, n_batch + 1))
    if sparse_perm != tuple(range(n_batch, n_batch + n_sparse)):
        indices = indices[..., np.asarray([p - n_batch for p in sparse_perm], np.int32)]
    shape = tuple(mat.shape[p] for p in perm)
    keeps_order = sparse_perm == tuple(range(n_batch, n_batch + n_sparse))
    return BCOO((data, indices), shape=shape, indices_sorted=mat.indices_sorted and keeps_order,
                unique_indices=mat.unique_indices)


def bcoo_dot_general(lhs: Any, rhs: Any, *, dimension_numbers: Any, precision: Any = None,
                     preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """``lax.dot_general`` with one BCOO operand and one dense one; the result is dense. The
    dot's batch dimensions must be leading batch dimensions of the sparse operand."""
    del out_sharding
    (lc, rc), (lb, rb) = dimension_numbers
    dims = (tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))
    if isinstance(lhs, BCOO) and isinstance(rhs, BCOO):
        return _spdot(lhs, rhs, dims, preferred_element_type)
    if isinstance(lhs, BCOO):
        return _dot_sparse_dense(lhs, fnp.asarray(rhs), dims, precision, preferred_element_type)
    if isinstance(rhs, BCOO):
        lhs = fnp.asarray(lhs)
        (lc, rc), (lb, rb) = dims
        out = _dot_sparse_dense(rhs, lhs, ((rc, lc), (rb, lb)), precision, preferred_element_type)
        n_b = len(lb)
        n_sparse_free = rhs.ndim - len(rc) - n_b
        n_dense_free = lhs.ndim - len(lc) - n_b
        perm = (tuple(range(n_b)) + tuple(range(n_b + n_sparse_free, n_b + n_sparse_free + n_dense_free))
                + tuple(range(n_b, n_b + n_sparse_free)))
        return fnp.transpose(out, perm)
    return lax.dot_general(lhs, rhs, dims, precision=precision, preferred_element_type=preferred_element_type)


def _dot_sparse_dense(mat: BCOO, rhs: Any, dims: Any, precision: Any, preferred: Any) -> Any:
    (lc, rc), (lb, rb) = dims
    n_batch, n_sparse = mat.n_batch, mat.n_sparse
    leading = 0
    while leading < len(lb) and lb[leading] == leading and leading < n_batch:
        leading += 1
    sparse_lb = lb[leading:]
    supported = (all(n_batch <= d < n_batch + n_sparse for d in sparse_lb) and (not sparse_lb or leading == n_batch)
                 and all(d >= n_batch for d in lc))
    if not supported:
        raise NotImplementedError(f"bcoo_dot_general: dimension_numbers {dims} with a sparse operand of "
                                  f"n_batch={n_batch}, n_sparse={n_sparse}: the dot's batch dimensions must be the "
                                  "sparse operand's leading batch dimensions, then sparse ones, and it must not "
                                  "contract batch dimensions")
    dtype = fnp.result_type(mat.dtype, rhs.dtype)
    data, rhs = mat.data.astype(dtype), rhs.astype(dtype)
    indices = _full_indices(mat.indices, tuple(mat.data.shape[:n_batch]))
    sparse_shape = mat.shape[n_batch:n_batch + n_sparse]

    def unbatched(data: Any, indices: Any, rhs: Any, lc: tuple[int, ...], rc: tuple[int, ...],
                  lb: tuple[int, ...], rb: tuple[int, ...]) -> Any:
        return _dot_unbatched(data, indices, sparse_shape, rhs, (lc, rc), (lb, rb), precision, preferred)

    return _dot_batched(unbatched, data, indices, rhs, lc, rc, lb, rb)


def _dot_batched(unbatched: Callable[..., Any], data: Any, indices: Any, rhs: Any, lc: tuple[int, ...],
                 rc: tuple[int, ...], lb: tuple[int, ...], rb: tuple[int, ...]) -> Any:
    """Peel the sparse operand's leading batch axis off with ``vmap`` (mapping ``rhs`` along
    its matching batch axis, if the dot has one) until one batch element remains."""
    if indices.ndim == 2:
        return unbatched(data, indices, rhs, lc, rc, lb, rb)
    lc = tuple(d - 1 for d in lc)
    if lb and lb[0] == 0:
        axis = rb[0]
        rc = tuple(d - (d > axis) for d in rc)
        lb, rb = tuple(d - 1 for d in lb[1:]), tuple(d - (d > axis) for d in rb[1:])
    else:
        axis = None
        lb = tuple(d - 1 for d in lb)

    def inner(d: Any, i: Any, r: Any) -> Any:
        return _dot_batched(unbatched, d, i, r, lc, rc, lb, rb)

    return vmap(inner, in_axes=(0, 0, axis))(data, indices, rhs)


def _dot_unbatched(data: Any, indices: Any, sparse_shape: tuple[int, ...], rhs: Any, contracting: Any,
                   batch: Any, precision: Any, preferred: Any) -> Any:
    """The dot of an unbatched BCOO (``data`` ``(nse,) + dense``) with the dense ``rhs``: the
    slices of ``rhs`` at each entry's batch and contracted indices, times the entry,
    scatter-added at its batch and free indices."""
    (lc, rc), (lb, rb) = contracting, batch
    n_sparse = len(sparse_shape)
    sparse_pairs = [(d, r) for d, r in zip(lc, rc) if d < n_sparse]
    dense_pairs = [(d - n_sparse, r) for d, r in zip(lc, rc) if d >= n_sparse]
    free_sparse = [d for d in range(n_sparse) if d not in lc and d not in lb]
    rhs_free = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    rhs = fnp.transpose(rhs, list(rb) + [r for _, r in sparse_pairs] + [r for _, r in dense_pairs] + rhs_free)
    gathered = list(lb) + [d for d, _ in sparse_pairs]
    if gathered:
        rows = rhs.at[tuple(indices[:, d] for d in gathered)].get(mode="fill", fill_value=0)
    else:
        rows = fnp.broadcast_to(rhs[None], (indices.shape[0],) + tuple(rhs.shape))
    if dense_pairs:
        contract = ((tuple(1 + d for d, _ in dense_pairs), tuple(range(1, 1 + len(dense_pairs)))), ((0,), (0,)))
        products = lax.dot_general(data, rows, contract, precision=precision, preferred_element_type=preferred)
    else:
        products = _outer(data, rows, preferred)
    scattered = list(lb) + free_sparse
    if not scattered:
        return fnp.sum(products, axis=0)
    out_shape = tuple(sparse_shape[d] for d in scattered) + tuple(products.shape[1:])
    return fnp.zeros(out_shape, products.dtype).at[tuple(indices[:, d] for d in scattered)].add(
        products, mode="drop")


def _spdot(lhs: BCOO, rhs: BCOO, dims: Any, preferred: Any) -> BCOO:
    """The product of two sparse arrays, as a sparse one: every pair of entries whose
    contracted indices agree multiplies, at the pair's free indices; pairs are combined as
    :func:`bcoo_sum_duplicates` does (without dropping zeros), as JAX's."""
    (lc, rc), (lb, rb) = dims
    if lb or rb or lhs.n_batch or rhs.n_batch or lhs.n_dense or rhs.n_dense:
        raise NotImplementedError(f"bcoo_dot_general of two sparse arrays: fungraph supports them without batch or "
                                  f"dense dimensions and without batched dots, got {lhs!r}, {rhs!r}, "
                                  f"dimension_numbers {dims}")
    lhs_free = [d for d in range(lhs.n_sparse) if d not in lc]
    rhs_free = [d for d in range(rhs.n_sparse) if d not in rc]
    lhs_key, rhs_key = lhs.indices[:, np.asarray(lc, np.int32)], rhs.indices[:, np.asarray(rc, np.int32)]
    overlap = fnp.all(lhs_key[:, None] == rhs_key[None, :], axis=-1)
    valid = (_in_bounds(lhs_key, tuple(lhs.shape[d] for d in lc))[:, None]
             & _in_bounds(rhs_key, tuple(rhs.shape[d] for d in rc))[None, :])
    dtype = preferred or fnp.result_type(lhs.dtype, rhs.dtype)
    products = lhs.data.astype(dtype)[:, None] * rhs.data.astype(dtype)[None, :]
    data = fnp.where(overlap & valid, products, 0).ravel()
    index_dtype = fnp.result_type(lhs.indices.dtype, rhs.indices.dtype)
    pairs = (lhs.nse, rhs.nse)
    left = fnp.broadcast_to(lhs.indices[:, None, np.asarray(lhs_free, np.int32)], pairs + (len(lhs_free),))
    right = fnp.broadcast_to(rhs.indices[None, :, np.asarray(rhs_free, np.int32)], pairs + (len(rhs_free),))
    indices = fnp.concatenate([left.astype(index_dtype), right.astype(index_dtype)], axis=-1)
    out_shape = tuple(lhs.shape[d] for d in lhs_free) + tuple(rhs.shape[d] for d in rhs_free)
    nse = (lhs.nse if lhs_free else 1) * (rhs.nse if rhs_free else 1)
    out = BCOO((data, indices.reshape(data.shape[0], -1)), shape=out_shape)
    return bcoo_sum_duplicates(out, nse=min(nse, math.prod(out_shape)))


def _outer(data: Any, rows: Any, preferred: Any) -> Any:
    """Each entry's dense block times its row of the other operand: ``(nse,) + dense`` and
    ``(nse,) + rest`` give ``(nse,) + dense + rest`` (a dot with nothing contracted)."""
    n_rest, n_dense = rows.ndim - 1, data.ndim - 1
    left = data.reshape(tuple(data.shape) + (1,) * n_rest)
    right = rows.reshape((rows.shape[0],) + (1,) * n_dense + tuple(rows.shape[1:]))
    products = left * right
    return products if preferred is None else products.astype(preferred)


def bcoo_multiply_dense(sp_mat: BCOO, v: Any) -> Any:
    """The data of ``sp_mat * v`` for a dense ``v`` that broadcasts to ``sp_mat``'s shape
    (the product keeps ``sp_mat``'s indices)."""
    v = fnp.asarray(v)
    shape = sp_mat.shape
    if v.ndim > len(shape) or any(a not in (1, b) for a, b in zip(v.shape[::-1], shape[::-1])):
        raise NotImplementedError(f"bcoo_multiply_dense: a dense operand of shape {tuple(v.shape)} that does not "
                                  f"broadcast to the sparse shape {shape} would densify the result; multiply "
                                  ".todense() instead")
    if v.ndim == 0:
        return sp_mat.data * v
    v = v.reshape((1,) * (len(shape) - v.ndim) + tuple(v.shape))
    n_batch = sp_mat.n_batch
    batch = tuple(fnp.minimum(i, v.shape[d] - 1) for d, i in enumerate(_batch_index(shape[:n_batch])))
    sparse = tuple(fnp.minimum(i, v.shape[n_batch + k] - 1) for k, i in enumerate(_sparse_index(sp_mat.indices)))
    index = batch + sparse
    picked = v[index] if index else v[None]
    return sp_mat.data * picked


def bcoo_reduce_sum(mat: BCOO, *, axes: Sequence[int]) -> BCOO:
    """``mat`` summed over ``axes``, as a BCOO (batch axes summed turn the batch into sparse
    dimensions first)."""
    ndim = mat.ndim
    axes = tuple(sorted({operator.index(a) % ndim if ndim else operator.index(a) for a in axes}))
    if any(a < mat.n_batch for a in axes):
        mat = _unbatched(mat)
    n_batch, n_sparse = mat.n_batch, mat.n_sparse
    shape = mat.shape
    sparse_shape = shape[n_batch:n_batch + n_sparse]
    data, indices = mat.data, mat.indices
    dense_axes = tuple(n_batch + 1 + a - n_batch - n_sparse for a in axes if a >= n_batch + n_sparse)
    if dense_axes:
        data = fnp.sum(data, axis=dense_axes)
    summed = [a - n_batch for a in axes if n_batch <= a < n_batch + n_sparse]
    if summed:
        inside = _in_bounds(indices, sparse_shape)
        data = fnp.where(inside.reshape(inside.shape + (1,) * (data.ndim - inside.ndim)), data, 0)
        kept = [k for k in range(n_sparse) if k not in summed]
        kept_shape = tuple(sparse_shape[k] for k in kept)
        indices = indices[..., np.asarray(kept, np.int32)]
        indices = fnp.where(inside[..., None], indices, fnp.asarray(kept_shape, indices.dtype))
    out_shape = tuple(s for a, s in enumerate(shape) if a not in axes)
    return BCOO((data, indices), shape=out_shape)


def _unbatched(mat: BCOO) -> BCOO:
    """``mat`` with its batch dimensions turned into leading sparse ones (``n_batch`` 0)."""
    if mat.n_batch == 0:
        return mat
    data, indices = _batch_to_sparse(mat.data, _full_indices(mat.indices, tuple(mat.data.shape[:mat.n_batch])))
    return BCOO((data, indices), shape=mat.shape)


def _batch_to_sparse(data: Any, indices: Any) -> tuple[Any, Any]:
    """Every batch dimension of ``(data, indices)`` made a leading sparse one."""
    n_batch = indices.ndim - 2
    batch_shape = tuple(indices.shape[:n_batch])
    nse = indices.shape[-2]
    full = batch_shape + (nse, 1)
    batch_cols = [lax.broadcasted_iota(indices.dtype, full, d) for d in range(n_batch)]
    indices = fnp.concatenate(batch_cols + [indices], axis=-1)
    count = math.prod(batch_shape) * nse
    data = data.reshape((count,) + tuple(data.shape[n_batch + 1:]))
    return data, indices.reshape(count, indices.shape[-1])


def _dense_to_sparse(data: Any, indices: Any, count: int) -> tuple[Any, Any]:
    """The first ``count`` dense dimensions of unbatched ``(data, indices)`` made trailing
    sparse ones: each entry becomes one per position of those dimensions."""
    nse, moved = indices.shape[0], tuple(data.shape[1:1 + count])
    size = math.prod(moved)
    data = data.reshape((nse * size,) + tuple(data.shape[1 + count:]))
    grid = fnp.stack([g.ravel() for g in fnp.meshgrid(*[fnp.arange(n, dtype=indices.dtype) for n in moved],
                                                      indexing="ij")], axis=-1)
    old = fnp.broadcast_to(indices[:, None, :], (nse, size, indices.shape[1]))
    new = fnp.broadcast_to(grid[None], (nse, size, count))
    return data, fnp.concatenate([old, new], axis=-1).reshape(nse * size, indices.shape[1] + count)


class SparseEfficiencyError(ValueError):
    """A layout change that would store many explicit zeros, refused (``on_inefficient="error"``)."""


class SparseEfficiencyWarning(UserWarning):
    """A layout change that stores many explicit zeros (``on_inefficient="warn"``)."""


def bcoo_update_layout(mat: BCOO, *, n_batch: int | None = None, n_dense: int | None = None,
                       on_inefficient: str | None = "error") -> BCOO:
    """``mat`` with ``n_batch`` batch and ``n_dense`` dense dimensions. Fewer of either move
    dimensions into the sparse ones, as JAX's does; more of either store explicit zeros, which
    ``on_inefficient`` (``"error"``, ``"warn"`` or None) governs as in JAX, and go through the
    dense array (so they need a concrete ``mat``)."""
    n_batch = mat.n_batch if n_batch is None else operator.index(n_batch)
    n_dense = mat.n_dense if n_dense is None else operator.index(n_dense)
    if (n_batch, n_dense) == (mat.n_batch, mat.n_dense):
        return mat
    if on_inefficient not in ("error", "warn", None):
        raise ValueError(f"bcoo_update_layout: on_inefficient={on_inefficient!r}; expected 'error', 'warn' or None")
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > mat.ndim:
        raise ValueError(f"bcoo_update_layout: n_batch={n_batch}, n_dense={n_dense} do not fit shape {mat.shape}")
    grows_dense = n_dense > mat.n_dense and any(d > 1 for d in mat.shape[mat.ndim - n_dense:mat.ndim - mat.n_dense])
    grows_batch = n_batch > mat.n_batch and any(d > 1 for d in mat.shape[mat.n_batch:n_batch])
    if (grows_dense or grows_batch) and on_inefficient is not None:
        message = (f"bcoo_update_layout: for a matrix of shape {mat.shape}, going from n_batch={mat.n_batch}, "
                   f"n_dense={mat.n_dense} to n_batch={n_batch}, n_dense={n_dense} results in inefficient storage.")
        if on_inefficient == "error":
            raise SparseEfficiencyError(message + " Pass on_inefficient='warn' or None to allow it.")
        warnings.warn(message, SparseEfficiencyWarning, stacklevel=2)
    if n_batch > mat.n_batch or n_dense > mat.n_dense:
        return bcoo_fromdense(mat.todense(), n_batch=n_batch, n_dense=n_dense, index_dtype=mat.indices.dtype)
    keep = mat.n_batch
    data, indices = mat.data, _full_indices(mat.indices, tuple(mat.data.shape[:keep]))
    if n_dense < mat.n_dense:
        count = mat.n_dense - n_dense
        data, indices = _over_batch(lambda d, i: _dense_to_sparse(d, i, count), keep, (0, 0))(data, indices)
    if n_batch < keep:
        data, indices = _over_batch(_batch_to_sparse, n_batch, (0, 0))(data, indices)
    return BCOO((data, indices), shape=mat.shape)


def _padded(mat: BCOO, nse: int) -> BCOO:
    """``mat`` with padding entries appended up to ``nse`` entries."""
    extra = nse - mat.nse
    if extra <= 0:
        return mat
    batch = tuple(mat.data.shape[:mat.n_batch])
    sparse_shape = mat.shape[mat.n_batch:mat.n_batch + mat.n_sparse]
    data = fnp.concatenate([mat.data, fnp.zeros(batch + (extra,) + tuple(mat.data.shape[mat.n_batch + 1:]),
                                                mat.dtype)], axis=mat.n_batch)
    pad = fnp.broadcast_to(fnp.asarray(sparse_shape, mat.indices.dtype), batch + (extra, mat.n_sparse))
    indices = fnp.concatenate([_full_indices(mat.indices, batch), pad], axis=mat.n_batch)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=mat.indices_sorted,
                unique_indices=mat.unique_indices)


def bcoo_concatenate(operands: Sequence[BCOO], *, dimension: int) -> BCOO:
    """``lax.concatenate`` of BCOO arrays of one layout along a batch or sparse dimension, as
    JAX's: along a batch dimension the entries are padded to one ``nse``, along a sparse one
    the entries are joined with the indices shifted by each operand's offset."""
    operands = list(operands)
    dimension = operator.index(dimension)
    if not operands or not all(isinstance(op, BCOO) for op in operands):
        raise ValueError(f"bcoo_concatenate: expected a sequence of BCOO arrays, got {operands}")
    first = operands[0]
    if any(op.ndim != first.ndim or any(a != b for d, (a, b) in enumerate(zip(op.shape, first.shape))
                                        if d != dimension) for op in operands) or not 0 <= dimension < first.ndim:
        raise ValueError(f"bcoo_concatenate: shapes {[op.shape for op in operands]} do not concatenate along "
                         f"dimension {dimension}")
    layouts = {(op.n_batch, op.n_dense) for op in operands}
    if len(layouts) != 1:
        raise ValueError(f"bcoo_concatenate requires operands of one layout (n_batch, n_dense), got {sorted(layouts)}")
    n_batch, n_sparse = first.n_batch, first.n_sparse
    shape = list(first.shape)
    shape[dimension] = sum(op.shape[dimension] for op in operands)
    if dimension < n_batch:
        nse = max(op.nse for op in operands)
        padded = [_padded(op, nse) for op in operands]
        batch = [tuple(op.data.shape[:n_batch]) for op in padded]
        data = fnp.concatenate([op.data for op in padded], axis=dimension)
        indices = fnp.concatenate([_full_indices(op.indices, b) for op, b in zip(padded, batch)], axis=dimension)
    elif dimension < n_batch + n_sparse:
        column = dimension - n_batch
        offsets = np.cumsum([0] + [op.shape[dimension] for op in operands[:-1]])
        data = fnp.concatenate([op.data for op in operands], axis=n_batch)
        shifted = [_full_indices(op.indices, tuple(op.data.shape[:n_batch])).at[..., column].add(int(offset))
                   for op, offset in zip(operands, offsets)]
        indices = fnp.concatenate(shifted, axis=n_batch)
    else:
        raise NotImplementedError("bcoo_concatenate along a dense dimension is not supported (nor by JAX)")
    return BCOO((data, indices), shape=tuple(shape))


def _lexicographic_order(indices: Any) -> Any:
    """The stable permutation sorting the rows of ``indices`` (``(nse, n_sparse)``)."""
    order = fnp.arange(indices.shape[0], dtype=np.int32)
    for k in reversed(range(indices.shape[1])):
        order = order[fnp.argsort(indices[order, k], stable=True)]
    return order


def bcoo_sort_indices(mat: BCOO) -> BCOO:
    """``mat`` with each batch element's entries in lexicographic order of their indices."""
    n_batch = mat.n_batch
    indices = _full_indices(mat.indices, tuple(mat.data.shape[:n_batch]))

    def sort(data: Any, indices: Any) -> tuple[Any, Any]:
        order = _lexicographic_order(indices)
        return data[order], indices[order]

    data, indices = _over_batch(sort, n_batch, (0, 0))(mat.data, indices)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True, unique_indices=mat.unique_indices)


def bcoo_sum_duplicates(mat: BCOO, nse: int | None = None, remove_zeros: bool = False) -> BCOO:
    """``mat`` with entries at one position summed into one, sorted, padded to ``nse``
    (by default the largest count of distinct positions, which needs concrete indices);
    ``remove_zeros`` first turns stored zeros into padding."""
    n_batch = mat.n_batch
    sparse_shape = mat.shape[n_batch:n_batch + mat.n_sparse]
    bound = fnp.asarray(sparse_shape, mat.indices.dtype)
    indices = _full_indices(mat.indices, tuple(mat.data.shape[:n_batch]))
    keep = _in_bounds(indices, sparse_shape)
    if remove_zeros:
        nonzero = mat.data != 0
        if mat.n_dense:
            nonzero = fnp.any(nonzero, axis=tuple(range(n_batch + 1, mat.data.ndim)))
        keep = keep & nonzero
    indices = fnp.where(keep[..., None], indices, bound)
    if nse is None:
        nse = _count_nse(_distinct_counts(indices, sparse_shape), "bcoo_sum_duplicates")

    def combine(data: Any, indices: Any) -> tuple[Any, Any]:
        return _combine_duplicates(data, indices, bound, nse)

    data, indices = _over_batch(combine, n_batch, (0, 0))(mat.data, indices)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True, unique_indices=True)


def _distinct_counts(indices: Any, sparse_shape: tuple[int, ...]) -> Any:
    """How many distinct in-bounds positions each batch element of concrete ``indices`` holds."""
    if isinstance(indices, Tracer):
        return indices
    idx = np.asarray(indices)
    rows = idx.reshape(-1, idx.shape[-2], idx.shape[-1])
    inside = np.all(rows < np.asarray(sparse_shape, idx.dtype), axis=-1)
    return np.asarray([len({tuple(r) for r in b[m]}) for b, m in zip(rows, inside)], np.int64)


def _combine_duplicates(data: Any, indices: Any, bound: Any, nse: int) -> tuple[Any, Any]:
    """One entry per distinct row of ``indices`` (padding, all equal to ``bound``, sorts last and
    is one more), data summed, in the first ``nse`` slots; slots beyond are padding."""
    order = _lexicographic_order(indices)
    data, indices = data[order], indices[order]
    fresh = fnp.concatenate([fnp.ones((1,), bool), fnp.any(indices[1:] != indices[:-1], axis=-1)])
    segment = fnp.cumsum(fresh, dtype=np.int32) - 1
    out_data = fnp.zeros((nse,) + tuple(data.shape[1:]), data.dtype).at[segment].add(data, mode="drop")
    out_indices = fnp.broadcast_to(bound, (nse, indices.shape[1])).at[segment].set(indices, mode="drop")
    return out_data, out_indices


def bcoo_reshape(mat: BCOO, *, new_sizes: Sequence[int], dimensions: Any = None) -> BCOO:
    """``mat`` reshaped in C order; fungraph supports it for arrays without batch or dense
    dimensions."""
    if dimensions is not None:
        raise NotImplementedError("bcoo_reshape: dimensions= is not supported")
    if mat.n_batch or mat.n_dense:
        raise NotImplementedError(f"bcoo_reshape: fungraph reshapes only BCOO arrays without batch or dense "
                                  f"dimensions (this one has n_batch={mat.n_batch}, n_dense={mat.n_dense})")
    new_shape = _resolved_shape(mat.shape, new_sizes)
    size = math.prod(mat.shape)
    dtype = np.int64 if size >= 2 ** 31 and dtypes.x64_enabled() else mat.indices.dtype
    indices = mat.indices.astype(dtype)
    inside = _in_bounds(indices, mat.shape)
    flat = fnp.zeros(indices.shape[:-1], dtype)
    for k, dim in enumerate(mat.shape):
        flat = flat * dim + indices[..., k]
    columns = []
    stride = size
    for dim in new_shape:
        stride //= max(dim, 1)
        column = (flat // max(stride, 1)) % max(dim, 1)
        columns.append(fnp.where(inside, column, dim))
    new = fnp.stack(columns, axis=-1) if columns else fnp.zeros(indices.shape[:-1] + (0,), dtype)
    return BCOO((mat.data, new.astype(mat.indices.dtype)), shape=new_shape)


def _resolved_shape(shape: tuple[int, ...], new_sizes: Sequence[int]) -> tuple[int, ...]:
    """``new_sizes`` with a -1 resolved; a size mismatch raises numpy's error."""
    sizes = tuple(operator.index(s) for s in new_sizes)
    total = math.prod(shape)
    if sizes.count(-1) == 1:
        rest = math.prod(s for s in sizes if s != -1)
        sizes = tuple(total // rest if s == -1 and rest else s for s in sizes)
    if math.prod(sizes) != total or any(s < 0 for s in sizes):
        raise ValueError(f"cannot reshape a BCOO array of shape {shape} into shape {tuple(new_sizes)}")
    return sizes


def empty(shape: Sequence[int], dtype: Any = None, index_dtype: Any = np.int32, n_batch: int = 0,
          n_dense: int = 0, nse: int = 0) -> BCOO:
    """A BCOO of ``shape`` with ``nse`` padding entries, all zero."""
    shape = tuple(operator.index(s) for s in shape)
    n_sparse = len(shape) - n_batch - n_dense
    if n_sparse < 0 or n_batch < 0 or n_dense < 0 or nse < 0:
        raise ValueError(f"empty: invalid shape={shape}, n_batch={n_batch}, n_dense={n_dense}, nse={nse}")
    batch, sparse, dense = shape[:n_batch], shape[n_batch:n_batch + n_sparse], shape[n_batch + n_sparse:]
    data = fnp.zeros(batch + (nse,) + dense, dtype)
    indices = fnp.broadcast_to(fnp.asarray(sparse, index_dtype), batch + (nse, n_sparse))
    return BCOO((data, indices), shape=shape, indices_sorted=True, unique_indices=True)


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None, index_dtype: Any = np.int32,  # noqa: N803
        n_batch: int = 0, n_dense: int = 0) -> BCOO:
    """The identity (ones on the ``k``-th diagonal) as a BCOO holding only the diagonal."""
    M = N if M is None else M  # noqa: N806 - numpy's names
    if n_batch or n_dense:
        return bcoo_fromdense(fnp.eye(N, M, k, dtype=dtype), n_batch=n_batch, n_dense=n_dense,
                              index_dtype=index_dtype)
    length = min(N, M - k) if k > 0 else min(N + k, M)
    if length <= 0:
        return empty((N, M), dtype=dtype, index_dtype=index_dtype)
    steps = np.arange(length)
    indices = np.stack([steps - min(k, 0), steps + max(k, 0)], axis=1).astype(index_dtype)
    return BCOO((fnp.ones(length, dtype), indices), shape=(N, M), indices_sorted=True, unique_indices=True)
