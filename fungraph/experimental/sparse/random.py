"""``random_bcoo``: a BCOO array of random values at random positions, drawn as JAX's is."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import dtypes, random
from fungraph import numpy as fnp
from fungraph.api import vmap
from fungraph.experimental.sparse.bcoo import BCOO

__all__ = ["random_bcoo"]


def random_bcoo(key: Any, shape: Sequence[int], *, dtype: Any = dtypes.float64, indices_dtype: Any = None,
                nse: float | int = 0.2, n_batch: int = 0, n_dense: int = 0, unique_indices: bool = True,
                sorted_indices: bool = False, generator: Callable[..., Any] = random.uniform,
                **kwds: Any) -> BCOO:
    """A BCOO of ``shape`` with ``nse`` entries (a fraction of the sparse size when below 1) per
    batch element: positions by ``random.choice`` (without repeats when ``unique_indices``),
    values by ``generator(key, shape=, dtype=)``; keys split as JAX splits them. As JAX's, the
    default ``dtype`` is float64, truncated with JAX's warning when x64 is off."""
    shape = tuple(operator.index(s) for s in shape)
    n_batch, n_dense = operator.index(n_batch), operator.index(n_dense)
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > len(shape):
        raise ValueError(f"random_bcoo: invalid n_batch={n_batch}, n_dense={n_dense} for shape={shape}")
    n_sparse = len(shape) - n_batch - n_dense
    batch_shape, sparse_shape = shape[:n_batch], shape[n_batch:n_batch + n_sparse]
    dense_shape = shape[n_batch + n_sparse:]
    sparse_size = math.prod(sparse_shape)
    if not 0 <= nse < sparse_size:
        raise ValueError(f"random_bcoo: got nse={nse}, expected to be between 0 and {sparse_size}")
    if 0 < nse < 1:
        nse = int(math.ceil(nse * sparse_size))
    nse = operator.index(nse)
    index_dtype = dtypes.default_int() if indices_dtype is None else dtypes.canonicalize(indices_dtype, "astype")
    if sparse_size > np.iinfo(index_dtype).max:
        raise ValueError(f"random_bcoo: indices_dtype={index_dtype} does not have enough range to generate sparse "
                         f"indices of size {sparse_size}")
    dtype = dtypes.canonicalize(dtype, "")

    def draw_indices(k: Any) -> Any:
        if not sparse_shape:
            return fnp.zeros((nse, 0), index_dtype)
        flat = random.choice(k, sparse_size, shape=(nse,), replace=not unique_indices).astype(index_dtype)
        return fnp.stack(fnp.unravel_index(flat, sparse_shape), axis=1)

    keys = random.split(key, math.prod(batch_shape) + 1)
    data = generator(keys[0], shape=batch_shape + (nse,) + dense_shape, dtype=dtype, **kwds)
    indices = vmap(draw_indices)(keys[1:]).reshape(batch_shape + (nse, n_sparse))
    mat = BCOO((data, indices.astype(np.dtype(index_dtype))), shape=shape)
    return mat.sort_indices() if sorted_indices else mat
