"""``jax.lax.ragged_dot`` and ``ragged_dot_general``: products where one axis of ``lhs`` is cut
into consecutive groups of ``group_sizes`` rows, each group taking its own slice of ``rhs`` (the
grouped matmul of mixture-of-experts layers).

Composed as masked dense products: a 0/1 membership mask per group over the ragged axis, one
``dot_general`` with the groups as a batch axis, then a sum over groups where the modes call
for it. This does ``g`` times the work of a dense product, and every rule (grad, vmap, jit)
comes from ``dot_general``'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError
from fungraph.ir import aval_of
from fungraph.lax._linalg import DotDimensionNumbers, _finish, canonical_precision, preferred_operands
from fungraph.primitives import cumulative
from fungraph.primitives import elementwise as ew
from fungraph.primitives import reductions as red
from fungraph.primitives import shape as sh
from fungraph.primitives.linalg import dot_general as dot_general_
from fungraph.primitives.operands import asarray


@dataclass(frozen=True)
class RaggedDotDimensionNumbers:
    """The dot dimension numbers of a ragged product, its ``lhs`` ragged axis and ``rhs``'s group
    axis, if any (``jax.lax.RaggedDotDimensionNumbers``)."""

    dot_dimension_numbers: DotDimensionNumbers
    lhs_ragged_dimensions: tuple[int, ...]
    rhs_group_dimensions: tuple[int, ...]

    def __init__(self, dot_dimension_numbers: Any, lhs_ragged_dimensions: Any, rhs_group_dimensions: Any) -> None:
        object.__setattr__(self, "dot_dimension_numbers", tuple(tuple(map(tuple, t)) for t in dot_dimension_numbers))
        object.__setattr__(self, "lhs_ragged_dimensions", tuple(int(d) for d in lhs_ragged_dimensions))
        object.__setattr__(self, "rhs_group_dimensions", tuple(int(d) for d in rhs_group_dimensions))


def _membership(group_sizes: Any, size: int, dtype: np.dtype) -> Any:
    """``mask[g, i]``: 1 where row ``i`` of the ragged axis lies in group ``g``, else 0."""
    sizes = asarray(group_sizes)
    ends = cumulative.cumsum(sizes, 0)
    starts = ew.sub(ends, sizes)
    groups = aval_of(sizes).shape[0]
    rows = sh.broadcast_to(np.arange(size, dtype=aval_of(sizes).dtype)[None, :], (groups, size))
    inside = ew.and_p.bind(ew.ge_p.bind(rows, sh.broadcast_in_dim(starts, (groups, size), (0,))),
                           ew.lt(rows, sh.broadcast_in_dim(ends, (groups, size), (0,))))
    return ew.convert(inside, dtype)


def _masked(lhs: Any, mask: Any, axis: int) -> Any:
    """``lhs`` repeated per group along a new leading axis, zero outside each group's rows."""
    shape = aval_of(lhs).shape
    groups = aval_of(mask).shape[0]
    full = (groups, *shape)
    return ew.mul(sh.broadcast_in_dim(lhs, full, tuple(range(1, len(full)))),
                  sh.broadcast_in_dim(mask, full, (0, axis + 1)))


def ragged_dot_general(lhs: Any, rhs: Any, group_sizes: Any, ragged_dot_dimension_numbers: RaggedDotDimensionNumbers,
                       precision: Any = None, preferred_element_type: Any = None, group_offset: Any = None,
                       out_sharding: Any = None) -> Any:
    """``dot_general`` with ``lhs``'s ragged axis cut into groups (``jax.lax.ragged_dot_general``):
    a ragged non-contracting axis takes ``rhs``'s group slice per group; a ragged contracting
    axis gives one product per group (a new leading axis); a ragged batch axis keeps the rows
    inside the groups. ``group_sizes`` is one-dimensional."""
    del out_sharding
    canonical_precision(precision)
    if group_offset is not None:
        raise NotImplementedError("lax.ragged_dot_general: group_offset is not supported")
    (a, b), after = preferred_operands("ragged_dot_general", (lhs, rhs), preferred_element_type)
    sizes = asarray(group_sizes)
    if len(aval_of(sizes).shape) != 1 or not dtypes.is_int(aval_of(sizes).dtype):
        raise TypeError(f"lax.ragged_dot_general: group_sizes must be a 1-D integer array, got {aval_of(sizes)}")
    dn = ragged_dot_dimension_numbers
    (lc, rc), (lb, rb) = dn.dot_dimension_numbers
    if len(dn.lhs_ragged_dimensions) != 1 or len(dn.rhs_group_dimensions) > 1:
        raise ShapeError(f"lax.ragged_dot_general: needs one lhs ragged dimension and at most one rhs group dimension, "
                         f"got {dn}")
    (ragged,) = dn.lhs_ragged_dimensions
    sa, sbs = aval_of(a).shape, aval_of(b).shape
    groups = aval_of(sizes).shape[0]
    mask = _membership(sizes, sa[ragged], aval_of(a).dtype)
    masked = _masked(a, mask, ragged)
    lc1, lb1 = tuple(d + 1 for d in lc), tuple(d + 1 for d in lb)
    if ragged in lc:
        if dn.rhs_group_dimensions:
            raise ShapeError("lax.ragged_dot_general: a ragged contracting dimension takes no rhs group dimension")
        out = dot_general_(masked, b, ((lc1, tuple(rc)), (lb1, tuple(rb))))
        # the group axis is lhs's first free axis, after the batch axes: move it to the front
        nb = len(lb)
        rank = len(aval_of(out).shape)
        return _finish(sh.transpose(out, (nb, *range(nb), *range(nb + 1, rank))), after)
    if ragged in lb:
        out = dot_general_(a, b, ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))))
        keep = red.reduce_sum(mask, (0,))
        return _finish(ew.mul(out, sh.broadcast_in_dim(keep, aval_of(out).shape, (lb.index(ragged),))), after)
    if len(dn.rhs_group_dimensions) != 1:
        raise ShapeError("lax.ragged_dot_general: a ragged non-contracting dimension needs an rhs group dimension")
    (gdim,) = dn.rhs_group_dimensions
    if sbs[gdim] != groups:
        raise ShapeError(f"lax.ragged_dot_general: rhs group dimension {gdim} of {aval_of(b)} must have the "
                         f"{groups} groups of group_sizes")
    out = dot_general_(masked, b, ((lc1, tuple(rc)), ((0, *lb1), (gdim, *rb))))
    return _finish(red.reduce_sum(out, (0,)), after)


def ragged_dot(lhs: Any, rhs: Any, group_sizes: Any, precision: Any = None, preferred_element_type: Any = None,
               group_offset: Any = None, out_sharding: Any = None) -> Any:
    """``[m, k] x [g, k, n] -> [m, n]``: the rows of ``lhs`` in group ``i`` (consecutive, of
    ``group_sizes[i]`` rows) times ``rhs[i]``; rows past the groups give zeros (``jax.lax.ragged_dot``)."""
    a, b = asarray(lhs), asarray(rhs)
    if len(aval_of(a).shape) != 2 or len(aval_of(b).shape) != 3:
        raise ShapeError(f"lax.ragged_dot: expected lhs [m, k] and rhs [g, k, n], got {aval_of(a)} and {aval_of(b)}")
    dn = RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (0,))
    return ragged_dot_general(a, b, group_sizes, dn, precision, preferred_element_type, group_offset, out_sharding)
