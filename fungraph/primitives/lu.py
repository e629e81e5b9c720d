"""``lu``: the LU decomposition with partial pivoting over the last two axes (leading axes are a
batch), as LAPACK's ``getrf`` and JAX's ``lax.linalg.lu``: ``P A = L U`` packed in one matrix
(``L`` unit lower, strictly below the diagonal; ``U`` upper), the row interchanges (``pivots``)
and the resulting row order (``permutation``), both int32."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Primitive
from fungraph.ir import ShapedArray
from fungraph.primitives import elementwise as ew
from fungraph.primitives._rules import aval
from fungraph.primitives.linalg_ops import _leading_batch, _matrix, mm, mT, solve, tril
from fungraph.primitives.lu_factor import lu_factor
from fungraph.primitives.shape import broadcast_in_dim, slice_


def _lu_aval(a: ShapedArray) -> tuple[ShapedArray, ShapedArray, ShapedArray]:
    m, n = _matrix("lu", a, allow_complex=True)
    lead = a.shape[:-2]
    return a, ShapedArray(lead + (min(m, n),), dtypes.int32), ShapedArray(lead + (m,), dtypes.int32)


lu_p = Primitive("lu", impl=lu_factor, abstract_eval=_lu_aval, arity=1, multiple_results=True)


def permutation_matrix(perm: Any, dtype: np.dtype) -> Any:
    """Rows of the identity in ``perm``'s order: ``P[..., i, j] = (perm[..., i] == j)``, so
    ``P @ a`` is ``a[perm]``."""
    shape = aval(perm).shape
    m = shape[-1]
    nd = len(shape)
    rows = broadcast_in_dim(perm, shape + (m,), tuple(range(nd)))
    cols = broadcast_in_dim(np.arange(m, dtype=np.int32), shape + (m,), (nd,))
    return ew.convert(ew.eq(rows, cols), dtype)


def unpack(lu: Any) -> tuple[Any, Any]:
    """The unit lower ``L`` (m, k) and upper ``U`` (k, n) packed in ``lu`` (m, n)."""
    shape = aval(lu).shape
    m, n = shape[-2:]
    k = min(m, n)
    dt = aval(lu).dtype
    zero = (0,) * len(shape)
    low = ew.add(tril(slice_(lu, zero, shape[:-1] + (k,), None), -1), np.eye(m, k, dtype=dt))
    up = slice_(lu, zero, shape[:-2] + (k, n), None)
    return low, ew.sub(up, tril(up, -1))


def _stacked(c: np.ndarray, lead: tuple[int, ...]) -> Any:
    """The constant matrix ``c`` repeated over the batch axes ``lead`` (for ``mm``)."""
    return broadcast_in_dim(c, lead + c.shape, (len(lead), len(lead) + 1))


@lu_p.def_jvp
def _lu_jvp(primals: tuple, tangents: tuple) -> tuple:
    """JAX's rule: with L, U completed to square unit-triangular factors and X = P dA,
    M = L^-1 X U^-1, dLU = L tril(M, -1) + triu(M) U."""
    (a,), (ta,) = primals, tangents
    lu, pivots, perm = lu_p.bind(a)
    shape = aval(a).shape
    m, n = shape[-2:]
    k = min(m, n)
    dt = aval(a).dtype
    low, up = unpack(lu)
    lead = shape[:-2]
    low_sq = ew.add(mm(ew.sub(low, np.eye(m, k, dtype=dt)), _stacked(np.eye(k, m, dtype=dt), lead)),
                    np.eye(m, dtype=dt))
    up_sq = ew.add(mm(_stacked(np.eye(n, k, dtype=dt), lead), up), np.diag([0] * k + [1] * (n - k)).astype(dt))
    x = mm(permutation_matrix(perm, dt), ta)
    la = solve(low_sq, x)
    lau = mT(solve(mT(up_sq), mT(la)))
    strict = tril(lau, -1)
    d_lu = ew.add(mm(low_sq, strict), mm(ew.sub(lau, strict), up_sq))
    return (lu, pivots, perm), (d_lu, None, None)


lu_p.batch = _leading_batch(lu_p)


def lu(a: Any) -> tuple[Any, Any, Any]:
    return lu_p.bind(a)

