"""``fungraph.scipy.interpolate``: ``RegularGridInterpolator`` as ``jax.scipy.interpolate``
defines it: linear or nearest interpolation on a rectilinear grid, points outside the grid
extrapolated (``fill_value=None``) or filled, and the interpolator a pytree of (grid, values,
fill value) so it passes through ``jit`` and ``vmap``."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from fungraph import numpy as jnp
from fungraph.numpy._util import promote
from fungraph.tree_util import register_pytree_node

__all__ = ["RegularGridInterpolator"]

_METHODS = ("linear", "nearest")


def _points_array(xi: Any, ndim: int) -> Any:
    """The sample points as one (..., ndim) array: a tuple of coordinate arrays is stacked last
    (in the default float dtype, as JAX does), a 1-d array read as rows of ``ndim``."""
    if isinstance(xi, tuple) and len(xi) == 1:
        xi = xi[0]
    if isinstance(xi, tuple):
        parts = jnp.broadcast_arrays(*xi)
        return jnp.stack([jnp.asarray(p, dtype=float) for p in parts], axis=-1)
    xi = jnp.asarray(xi)
    return xi.reshape(-1, ndim) if xi.ndim == 1 else xi


class RegularGridInterpolator:
    """``jax.scipy.interpolate.RegularGridInterpolator``: ``values`` given on the grid ``points``
    (one sorted 1-d array per leading axis of ``values``) interpolated at the points passed to
    the call. Points outside the grid take ``fill_value`` (NaN by default), or are extrapolated
    when it is None; ``bounds_error=True`` is refused, as in JAX."""

    def __init__(self, points: Any, values: Any, method: str = "linear", bounds_error: bool = False,
                 fill_value: Any = np.nan) -> None:
        if method not in _METHODS:
            raise ValueError(f"method {method!r} is not defined; use 'linear' or 'nearest'")
        self.method = method
        self.bounds_error = bounds_error
        if bounds_error:
            raise NotImplementedError("RegularGridInterpolator: `bounds_error` takes no effect under JIT")
        values = jnp.asarray(values)
        if len(points) > values.ndim:
            raise ValueError(f"there are {len(points)} point arrays, but values has {values.ndim} dimensions")
        values = jnp.asarray(promote(values, to_inexact=True)[0])
        if fill_value is not None:
            fill_value = jnp.asarray(fill_value)
            if not np.can_cast(fill_value.dtype, values.dtype, casting="same_kind"):
                raise ValueError(f"fill_value must be either 'None' or of a type compatible with values: "
                                 f"{fill_value.dtype} does not cast to {values.dtype}")
        self.fill_value = fill_value
        self.grid = tuple(jnp.asarray(p) for p in points)
        self.values = values

    def __call__(self, xi: Any, method: str | None = None) -> Any:
        method = self.method if method is None else method
        if method not in _METHODS:
            raise ValueError(f"method {method!r} is not defined; use 'linear' or 'nearest'")
        ndim = len(self.grid)
        xi = _points_array(xi, ndim)
        if xi.shape[-1] != ndim:
            raise ValueError(f"the requested sample points xi have dimension {xi.shape[-1]}, but this "
                             f"RegularGridInterpolator has dimension {ndim}")
        shape = xi.shape
        flat = xi.reshape(-1, shape[-1])
        indices, distances, outside = self._find_indices(flat.T)
        if method == "linear":
            result = self._linear(indices, distances)
        else:
            result = self._nearest(indices, distances)
        if self.fill_value is not None:
            mask = outside.reshape(result.shape[:1] + (1,) * (result.ndim - 1))
            result = jnp.where(mask, self.fill_value, result)
        return result.reshape(shape[:-1] + self.values.shape[ndim:])

    def _linear(self, indices: list[Any], distances: list[Any]) -> Any:
        """The weighted sum over the 2**ndim corners of each point's grid cell."""
        trailing = (slice(None),) + (None,) * (self.values.ndim - len(indices))
        total = jnp.asarray(0.0)
        for corner in itertools.product(*[(i, i + 1) for i in indices]):
            weight = jnp.asarray(1.0)
            for ci, i, d in zip(corner, indices, distances):
                weight = weight * (1 - d if ci is i else d)
            total = total + self.values[corner] * weight[trailing]
        return total

    def _nearest(self, indices: list[Any], distances: list[Any]) -> Any:
        return self.values[tuple(jnp.where(d <= 0.5, i, i + 1) for i, d in zip(indices, distances))]

    def _find_indices(self, xi: Any) -> tuple[list[Any], list[Any], Any]:
        """Per axis, the cell's lower index and the point's fractional position in the cell, and
        whether the point is off the grid on any axis."""
        indices, distances = [], []
        outside = jnp.zeros((xi.shape[1],), dtype=bool)
        for x, g in zip(xi, self.grid):
            i = jnp.clip(jnp.searchsorted(g, x) - 1, 0, g.size - 2)
            indices.append(i)
            distances.append((x - g[i]) / (g[i + 1] - g[i]))
            outside = outside | (x < g[0]) | (x > g[-1])
        return indices, distances, outside


register_pytree_node(
    RegularGridInterpolator,
    lambda obj: ((obj.grid, obj.values, obj.fill_value), (obj.method, obj.bounds_error)),
    lambda aux, children: RegularGridInterpolator(children[0], children[1], aux[0], aux[1], children[2]),
)
