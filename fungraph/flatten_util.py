"""``fungraph.flatten_util.ravel_pytree``, as ``jax.flatten_util``: a pytree of arrays as one
flat vector (of the leaves' promoted dtype) and the function that rebuilds the tree from such a
vector, for optimisers and solvers written over flat parameter vectors."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph.tree_util import PyTreeDef, tree_flatten, tree_unflatten

__all__ = ["ravel_pytree"]


def ravel_pytree(pytree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``(flat, unravel)``: the leaves raveled and concatenated in flattening order (promoted
    to one dtype; an empty tree gives a float32 vector of size 0, as JAX's), and a function
    mapping a vector of that shape and dtype back to a pytree like ``pytree``."""
    leaves, treedef = tree_flatten(pytree)
    if not leaves:
        return fnp.zeros((0,), dtypes.float32), functools.partial(_unravel_empty, treedef)
    arrays = [fnp.asarray(leaf) for leaf in leaves]
    to_dtype = fnp.result_type(*leaves)
    flat = fnp.concatenate([fnp.ravel(a.astype(to_dtype)) for a in arrays])
    shapes = tuple(a.shape for a in arrays)
    from_dtypes = tuple(a.dtype for a in arrays)
    return flat, functools.partial(_unravel, treedef, shapes, from_dtypes, to_dtype)


def _unravel_empty(treedef: PyTreeDef, flat: Any) -> Any:
    return tree_unflatten(treedef, [])


def _unravel(treedef: PyTreeDef, shapes: Sequence[tuple[int, ...]], from_dtypes: Sequence[np.dtype],
             to_dtype: np.dtype, flat: Any) -> Any:
    """The pytree whose leaves are the consecutive chunks of ``flat``, reshaped, and cast back
    when the leaves had several dtypes (with one dtype they keep ``flat``'s, as JAX's)."""
    sizes = [math.prod(s) for s in shapes]
    total = sum(sizes)
    if fnp.shape(flat) != (total,):
        raise ValueError(f"The unravel function expected an array of shape {(total,)}, got shape {fnp.shape(flat)}.")
    flat_dtype = fnp.result_type(flat)
    if len(set(from_dtypes)) > 1 and flat_dtype != to_dtype:
        raise TypeError(f"unravel function given array of dtype {flat_dtype} but expected dtype {to_dtype}")
    bounds = np.cumsum([0, *sizes])
    chunks = [fnp.reshape(flat[int(lo):int(hi)], s) for lo, hi, s in zip(bounds[:-1], bounds[1:], shapes)]
    if len(set(from_dtypes)) > 1:
        chunks = [c.astype(d) for c, d in zip(chunks, from_dtypes)]
    return tree_unflatten(treedef, chunks)
