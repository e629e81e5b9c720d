"""``fungraph.scipy.ndimage``: ``map_coordinates`` as ``jax.scipy.ndimage`` defines it (orders 0
and 1; the modes as SciPy documents them, which is JAX's reading: "constant" is SciPy's
"grid-constant" and "wrap" its "grid-wrap").

Each output is a weighted sum of gathers at the corner indices around each coordinate, written
with ``fungraph.numpy``, so ``grad`` (through the weights, i.e. the coordinates and the input),
``vmap`` and ``jit`` come for free.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import dtypes, lax
from fungraph import numpy as jnp

__all__ = ["map_coordinates"]


def _mirror(index: Any, size: int) -> Any:
    """Reflection about the edge samples (SciPy's "mirror"): a triangular wave of period 2(size - 1)."""
    s = size - 1
    if s == 0:
        return jnp.zeros_like(index)
    return jnp.abs((index + s) % (2 * s) - s)


def _reflect(index: Any, size: int) -> Any:
    """Reflection about the edges between samples (SciPy's "reflect"): mirror on a half-step grid."""
    return jnp.floor_divide(_mirror(2 * index + 1, 2 * size + 1) - 1, 2)


_INDEX_FIXERS: dict[str, Callable[[Any, int], Any]] = {
    "constant": lambda index, size: index,
    "nearest": lambda index, size: jnp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _round_half_away(a: Any) -> Any:
    return a if dtypes.is_int(a.dtype) else lax.round(a)


def _nearest(coordinate: Any) -> list[tuple[Any, Any]]:
    """The one (index, weight) pair of order 0: the coordinate rounded half away from zero."""
    index = _round_half_away(coordinate).astype(np.int32)
    return [(index, np.dtype(coordinate.dtype).type(1))]


def _linear(coordinate: Any) -> list[tuple[Any, Any]]:
    """The two (index, weight) pairs of order 1: floor and floor + 1, weighted by distance."""
    lower = jnp.floor(coordinate)
    upper_weight = coordinate - lower
    index = lower.astype(np.int32)
    return [(index, 1 - upper_weight), (index + 1, upper_weight)]


def map_coordinates(input: Any, coordinates: Sequence[Any], order: int, mode: str = "constant",  # noqa: A002
                    cval: Any = 0.0) -> Any:
    """``jax.scipy.ndimage.map_coordinates``: ``input`` interpolated (``order`` 0: nearest, 1:
    linear) at the points whose i-th coordinates are ``coordinates[i]``; points outside take
    ``mode``'s extension of ``input`` ("constant" fills with ``cval``). The result has
    ``input``'s dtype (integers rounded half away from zero)."""
    image = jnp.asarray(input)
    coords = [jnp.asarray(c) for c in coordinates]
    fill = jnp.asarray(cval, image.dtype)
    if len(coords) != image.ndim:
        raise ValueError(f"map_coordinates: coordinates must be a sequence of length input.ndim, but "
                         f"{len(coords)} != {image.ndim} (input shape {tuple(image.shape)})")
    fixer = _INDEX_FIXERS.get(mode)
    if fixer is None:
        raise NotImplementedError(f"map_coordinates does not support mode {mode!r}; the supported modes are "
                                  f"{sorted(_INDEX_FIXERS)}")
    if order == 0:
        nodes = _nearest
    elif order == 1:
        nodes = _linear
    else:
        raise NotImplementedError(f"map_coordinates supports order 0 and 1, got order={order!r}")
    per_axis = []
    for coordinate, size in zip(coords, image.shape):
        per_axis.append([(fixer(index, size), _valid(index, size, mode), weight)
                         for index, weight in nodes(coordinate)])
    terms = []
    for corner in itertools.product(*per_axis):
        indices, valids, weights = zip(*corner)
        value = image[tuple(indices)]
        if mode == "constant":
            value = jnp.where(functools.reduce(operator.and_, valids), value, fill)
        terms.append(functools.reduce(operator.mul, weights) * value)
    result = functools.reduce(operator.add, terms)
    if dtypes.is_int(image.dtype):
        result = _round_half_away(result)
    return result.astype(image.dtype)


def _valid(index: Any, size: int, mode: str) -> Any:
    return (index >= 0) & (index < size) if mode == "constant" else True
