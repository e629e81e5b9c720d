"""Reductions over a tuple of axes (the axes disappear; ``keepdims`` is a reshape in the API)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import NOT_DIFFERENTIABLE, Primitive, ShapeError, register_lowering
from fungraph.ir import ShapedArray
from fungraph.primitives._batching import unary_params_batch
from fungraph.primitives._rules import aval, lit, normalize_axis
from fungraph.primitives.elementwise import add, convert, div, eq, mul
from fungraph.primitives.indexing import take
from fungraph.primitives.shape import broadcast_in_dim, pad, reshape, slice_, transpose

MONOIDS: dict[Callable[[Any, Any], Any], str] = {}
"""Binary functions known to be a reduction's operation ("sum", "prod", "max", "min"), registered
by the API that defines them (lax's ``add``, numpy's ``add`` ufunc, ...): ``lax.reduce`` and
``reduce_window`` then bind the reduction primitive instead of folding pairwise."""


def register_monoid(fn: Callable[[Any, Any], Any], kind: str) -> None:
    MONOIDS[fn] = kind


def _reduce_aval(name: str, x: ShapedArray, axes: tuple[int, ...]) -> ShapedArray:
    for a in axes:
        if not 0 <= a < x.ndim:
            raise ShapeError(f"{name}: axis {a} is out of bounds for {x}")
    if len(set(axes)) != len(axes):
        raise ShapeError(f"{name}: repeated axis in {axes}")
    return ShapedArray(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)


def _reduction(name: str, impl: Callable[..., Any], numeric: bool = False, ordered: bool = False) -> Primitive:
    def abstract_eval(x: ShapedArray, *, axes: tuple[int, ...]) -> ShapedArray:
        if numeric and x.dtype == dtypes.bool_:
            raise ShapeError(f"{name} is not defined for bool, got {x}")
        if ordered and dtypes.is_complex(x.dtype):
            raise ShapeError(f"{name} is not defined for complex dtype {x.dtype} (complex numbers are "
                             f"not ordered), got {x}")
        if name in ("reduce_max", "reduce_min") and x.size == 0 and any(x.shape[a] == 0 for a in axes):
            raise ShapeError(f"{name}: zero-size reduction over axes {axes} of {x} has no identity")
        return _reduce_aval(name, x, axes)

    return Primitive(name, impl=lambda x, *, axes: impl(x, axis=axes), abstract_eval=abstract_eval, arity=1,
                     weak_from=None)


def _sum_impl(x: Any, axis: tuple[int, ...]) -> np.ndarray:
    x = np.asarray(x)
    return np.sum(x, axis=axis, dtype=x.dtype)


def _prod_impl(x: Any, axis: tuple[int, ...]) -> np.ndarray:
    x = np.asarray(x)
    return np.prod(x, axis=axis, dtype=x.dtype)


reduce_sum_p = _reduction("reduce_sum", _sum_impl)
reduce_max_p = _reduction("reduce_max", np.max, ordered=True)
reduce_min_p = _reduction("reduce_min", np.min, ordered=True)
reduce_prod_p = _reduction("reduce_prod", _prod_impl, numeric=True)


def _kept_dims(x: ShapedArray, axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(i for i in range(x.ndim) if i not in axes)


def _expand(y: Any, x: ShapedArray, axes: tuple[int, ...]) -> Any:
    return broadcast_in_dim(y, x.shape, _kept_dims(x, axes))


@reduce_sum_p.def_jvp
def _sum_jvp(primals: tuple, tangents: tuple, *, axes: tuple[int, ...]) -> tuple:
    return reduce_sum(primals[0], axes), reduce_sum(tangents[0], axes)


reduce_sum_p.transpose = lambda ct, x, *, axes: (_expand(ct, aval(x), axes),)


def _extremum_jvp(prim: Primitive) -> Callable[..., tuple]:
    """The tangent at the arg-extremum; ties share it equally (JAX's convention)."""

    def jvp(primals: tuple, tangents: tuple, *, axes: tuple[int, ...]) -> tuple:
        (x,), (t,) = primals, tangents
        y = prim.bind(x, axes=axes)
        mask = convert(eq(x, _expand(y, aval(x), axes)), aval(x).dtype)
        return y, div(reduce_sum(mul(t, mask), axes), reduce_sum(mask, axes))

    return jvp


reduce_max_p.jvp = _extremum_jvp(reduce_max_p)
reduce_min_p.jvp = _extremum_jvp(reduce_min_p)


@reduce_prod_p.def_jvp
def _prod_jvp(primals: tuple, tangents: tuple, *, axes: tuple[int, ...]) -> tuple:
    """d prod = sum_i t_i prod_{j != i} x_j, computed from exclusive products so zeros are exact."""
    (x,), (t,) = primals, tangents
    y = reduce_prod(x, axes)
    others = _prod_of_others(x, axes)
    return y, reduce_sum(mul(t, others), axes)


def _prod_of_others(x: Any, axes: tuple[int, ...]) -> Any:
    """For each element, the product of the other elements of its reduction group."""

    xa = aval(x)
    kept = _kept_dims(xa, axes)
    perm = kept + axes
    n = int(np.prod([xa.shape[a] for a in axes], dtype=np.int64))
    flat = reshape(transpose(x, perm), tuple(xa.shape[k] for k in kept) + (n,))
    lead = len(kept)
    one = lit(1, xa.dtype)
    # exclusive prefix and suffix products by doubling (log n steps of shifted multiplies)
    def scan(v: Any, reverse: bool) -> Any:
        shift = 1
        while shift < n:
            cfg = [(0, 0, 0)] * lead
            if reverse:
                shifted = pad(slice_(v, (0,) * lead + (shift,), aval(v).shape, None), one, cfg + [(0, shift, 0)])
            else:
                shifted = pad(slice_(v, (0,) * (lead + 1), aval(v).shape[:-1] + (n - shift,), None), one,
                              cfg + [(shift, 0, 0)])
            v = mul(v, shifted)
            shift *= 2
        return v

    def exclusive(reverse: bool) -> Any:
        cfg = [(0, 0, 0)] * lead
        if n <= 1:                                                          # no others (or no elements)
            return broadcast_in_dim(one, aval(flat).shape, ())
        if reverse:
            shifted = pad(slice_(flat, (0,) * lead + (1,), aval(flat).shape, None), one, cfg + [(0, 1, 0)])
        else:
            shifted = pad(slice_(flat, (0,) * (lead + 1), aval(flat).shape[:-1] + (n - 1,), None), one,
                          cfg + [(1, 0, 0)])
        return scan(shifted, reverse)

    others = mul(exclusive(False), exclusive(True))
    unflat = reshape(others, tuple(xa.shape[p] for p in perm))
    return transpose(unflat, tuple(np.argsort(perm)))


def reduce_sum(x: Any, axes: tuple[int, ...]) -> Any:
    return reduce_sum_p.bind(x, axes=tuple(sorted(int(a) for a in axes))) if axes else x


def reduce_prod(x: Any, axes: tuple[int, ...]) -> Any:
    return reduce_prod_p.bind(x, axes=tuple(sorted(int(a) for a in axes))) if axes else x


def _arg_aval(name: str, x: ShapedArray, axis: int, index_dtype: np.dtype) -> ShapedArray:
    if x.shape[axis] == 0 if 0 <= axis < x.ndim else False:
        raise ShapeError(f"{name}: attempt to get {name} of an empty sequence ({x}, axis {axis})")
    normalize_axis(axis, x.ndim, name)
    return ShapedArray(tuple(d for i, d in enumerate(x.shape) if i != axis), index_dtype)


for _p in (reduce_sum_p, reduce_max_p, reduce_min_p, reduce_prod_p):
    _p.batch = unary_params_batch(_p, ("axes",))


argmax_p = Primitive(
    "argmax", impl=lambda x, *, axis, index_dtype: np.argmax(x, axis=axis).astype(index_dtype),
    abstract_eval=lambda x, *, axis, index_dtype: _arg_aval("argmax", x, axis, index_dtype), arity=1,
    jvp=NOT_DIFFERENTIABLE)
argmin_p = Primitive(
    "argmin", impl=lambda x, *, axis, index_dtype: np.argmin(x, axis=axis).astype(index_dtype),
    abstract_eval=lambda x, *, axis, index_dtype: _arg_aval("argmin", x, axis, index_dtype), arity=1,
    jvp=NOT_DIFFERENTIABLE)
argmax_p.batch = unary_params_batch(argmax_p, ("axis",))
argmin_p.batch = unary_params_batch(argmin_p, ("axis",))


def complex_extremum(x: Any, axes: tuple[int, ...], largest: bool, name: str) -> Any:
    """The complex element ``argmax`` (``largest``) or ``argmin`` picks over ``axes`` (numpy's
    lexicographic order, the first NaN winning), gathered so its derivative reaches that element
    alone: numpy's ``max``/``min`` and lax's ``reduce_max``/``reduce_min`` of complex operands."""
    xa = aval(x)
    kept = tuple(i for i in range(xa.ndim) if i not in axes)
    lead = tuple(xa.shape[i] for i in kept)
    size = int(np.prod([xa.shape[a] for a in axes], dtype=np.int64))
    if size == 0:
        raise ShapeError(f"{name}: zero-size reduction over axes {axes} of {xa.dtype}{list(xa.shape)} has no identity")
    rows = reshape(transpose(x, kept + axes), lead + (size,))
    index = dtypes.default_int()
    pick = (argmax_p if largest else argmin_p).bind(rows, axis=len(kept), index_dtype=index)
    n = int(np.prod(lead, dtype=np.int64))
    flat = add(reshape(pick, (n,)), np.arange(n, dtype=index) * np.asarray(size, index))
    return reshape(take(reshape(rows, (n * size,)), flat, 0), lead)


def _reduce_lowering(reducer: Callable[..., Any]) -> Callable[..., Any]:
    """The CPU lowering: numpy's reduction into the planned ``out``."""
    def run(out: np.ndarray, x: Any, *, axes: tuple[int, ...]) -> np.ndarray:
        return reducer(x, axis=axes, out=out)

    return run


register_lowering(reduce_sum_p, "cpu", _reduce_lowering(np.sum))
register_lowering(reduce_max_p, "cpu", _reduce_lowering(np.max))
register_lowering(reduce_min_p, "cpu", _reduce_lowering(np.min))
register_lowering(reduce_prod_p, "cpu", _reduce_lowering(np.prod))
