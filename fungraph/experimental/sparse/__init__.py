"""``fungraph.experimental.sparse``, as ``jax.experimental.sparse``: the BCOO and BCSR sparse
arrays, their operations, and ``sparsify``. Everything is composed of fungraph.numpy's
gathers, scatter-adds and dot products, so ``jit``, ``vmap`` and ``grad`` apply unchanged
(see docs/sparse.md)."""

from fungraph.experimental.sparse.bcoo import (
    BCOO,
    JAXSparse,
    SparseEfficiencyError,
    SparseEfficiencyWarning,
    bcoo_concatenate,
    bcoo_dot_general,
    bcoo_extract,
    bcoo_fromdense,
    bcoo_multiply_dense,
    bcoo_reduce_sum,
    bcoo_reshape,
    bcoo_sort_indices,
    bcoo_sum_duplicates,
    bcoo_todense,
    bcoo_transpose,
    bcoo_update_layout,
    empty,
    eye,
    todense,
)
from fungraph.experimental.sparse.bcoo_multiply import bcoo_multiply_sparse
from fungraph.experimental.sparse.bcoo_slicing import (
    bcoo_broadcast_in_dim,
    bcoo_dynamic_slice,
    bcoo_rev,
    bcoo_slice,
    bcoo_squeeze,
)
from fungraph.experimental.sparse.bcsr import BCSR, bcsr_fromdense, bcsr_todense
from fungraph.experimental.sparse.random import random_bcoo
from fungraph.experimental.sparse.transform import grad, sparsify, value_and_grad

__all__ = ["BCOO", "BCSR", "JAXSparse", "SparseEfficiencyError", "SparseEfficiencyWarning", "bcoo_broadcast_in_dim",
           "bcoo_concatenate", "bcoo_dot_general", "bcoo_dynamic_slice", "bcoo_extract", "bcoo_fromdense",
           "bcoo_multiply_dense", "bcoo_multiply_sparse", "bcoo_reduce_sum", "bcoo_reshape", "bcoo_rev", "bcoo_slice",
           "bcoo_sort_indices", "bcoo_squeeze", "bcoo_sum_duplicates", "bcoo_todense", "bcoo_transpose",
           "bcoo_update_layout", "bcsr_fromdense", "bcsr_todense", "empty", "eye", "grad", "random_bcoo", "sparsify",
           "todense", "value_and_grad"]
