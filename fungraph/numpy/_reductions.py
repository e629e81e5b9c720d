"""Reductions of ``fungraph.numpy`` with numpy's axis/keepdims/dtype conventions, and the
cumulative sums and products (the ``cumsum`` primitive; ``cumprod`` the one ``associative_scan``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError
from fungraph.numpy._elementwise import maximum, minimum
from fungraph.numpy._elementwise import where as _select
from fungraph.numpy._shape import broadcast_to
from fungraph.numpy._util import asarray, cast, flat_or_axis, nan_to, normalize_axes
from fungraph.primitives import elementwise as ew
from fungraph.primitives import reductions as red
from fungraph.primitives import shape as sh
from fungraph.primitives.cumulative import associative_scan, cumsum_p
from fungraph.primitives.shape import reshape


def _keep(out: Any, x: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
    """A reduction's result, strongly typed as JAX's (a reduction over no axes returns a weak operand as it is)."""
    out = ew.strong(out)
    if not keepdims:
        return out
    return reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))


def _check_out(out: Any, name: str) -> None:
    if out is not None:
        raise NotImplementedError(f"{name}: out= is not supported (arrays are immutable; use the returned value)")


def where_mask(x: Any, where: Any, name: str) -> Any:
    """``where`` broadcast to ``x``'s shape as bools (numpy's ``where=`` of a reduction)."""
    m = cast(asarray(where), dtypes.bool_)
    try:
        return broadcast_to(m, x.shape)
    except ShapeError as err:
        raise ShapeError(f"{name}: where= of shape {m.shape} does not broadcast to the operand's {x.shape}") from err


def _masked(x: Any, where: Any, fill: Any, name: str) -> Any:
    """``x`` with the elements ``where`` leaves out replaced by ``fill`` (the reduction's identity)."""
    return x if where is None else _select(where_mask(x, where, name), x, cast(asarray(fill), x.dtype))


def _with_initial(out: Any, initial: Any, combine: Any, x: Any) -> Any:
    return out if initial is None else combine(out, cast(asarray(initial), x.dtype))


def accumulating_dtype(dtype: np.dtype, promote_integers: bool = True) -> np.dtype:
    """JAX sums and multiplies bools and narrower integers in the mode's default integer
    (unsigned ones in the default unsigned); ``promote_integers=False`` keeps an integer dtype
    (bools still count in the default integer)."""
    if dtype == dtypes.bool_:
        return dtypes.default_int()
    if promote_integers and dtypes.is_int(dtype):
        wide = dtypes.default_uint() if dtypes.is_unsigned(dtype) else dtypes.default_int()
        return wide if dtype.itemsize < wide.itemsize else dtype
    return dtype


def sum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,  # noqa: A001
        initial: Any = None, where: Any = None, promote_integers: bool = True) -> Any:
    """numpy's ``sum``: ``where`` leaves elements out, ``initial`` is added."""
    _check_out(out, "sum")
    x = asarray(a)
    x = cast(x, dtypes.canonicalize(dtype) if dtype is not None else accumulating_dtype(x.dtype, promote_integers))
    axes = normalize_axes(axis, x.ndim, "sum")
    total = red.reduce_sum(_masked(x, where, 0, "sum"), axes)
    return _keep(_with_initial(total, initial, ew.add, x), x, axes, keepdims)


def prod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
         initial: Any = None, where: Any = None, promote_integers: bool = True) -> Any:
    """numpy's ``prod``: ``where`` leaves elements out, ``initial`` multiplies in."""
    _check_out(out, "prod")
    x = asarray(a)
    x = cast(x, dtypes.canonicalize(dtype) if dtype is not None else accumulating_dtype(x.dtype, promote_integers))
    axes = normalize_axes(axis, x.ndim, "prod")
    product = red.reduce_prod(_masked(x, where, 1, "prod"), axes)
    return _keep(_with_initial(product, initial, ew.mul, x), x, axes, keepdims)


def _extremum(prim: Any, name: str) -> Any:
    def f(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, initial: Any = None,
          where: Any = None) -> Any:
        _check_out(out, name)
        x = asarray(a)
        axes = normalize_axes(axis, x.ndim, name)
        if where is not None or initial is not None:
            return _initial_extremum(x, axes, keepdims, initial, where, name)
        if not axes:
            out = x
        elif dtypes.is_complex(x.dtype):
            out = red.complex_extremum(x, tuple(sorted(axes)), name == "max", name)
        else:
            out = prim.bind(x, axes=tuple(sorted(axes)))
        return _keep(out, x, axes, keepdims)

    f.__name__ = name
    return f


def _initial_extremum(x: Any, axes: tuple[int, ...], keepdims: bool, initial: Any, where: Any, name: str) -> Any:
    """``max``/``min`` with ``initial`` (the result for an empty or fully masked-out reduction)
    and ``where``, which, as in numpy, needs ``initial``: a max has no identity to fill with."""
    if initial is None:
        raise ValueError(f"{name}: where= needs initial= (the {name} of no elements is undefined), as in numpy")
    if dtypes.is_complex(x.dtype):
        raise TypeError(f"{name}: initial= and where= take real operands, not {x.dtype.name}")
    fill = cast(asarray(initial), x.dtype)
    combine = maximum if name == "max" else minimum
    if 0 in [x.shape[i] for i in axes]:
        return _keep(broadcast_to(fill, tuple(d for i, d in enumerate(x.shape) if i not in axes)), x, axes, keepdims)
    best = (max if name == "max" else min)(_masked(x, where, fill, name), axis=axes, keepdims=keepdims)
    return combine(best, fill)


max = _extremum(red.reduce_max_p, "max")  # noqa: A001
min = _extremum(red.reduce_min_p, "min")  # noqa: A001
amax = max
amin = min


def _count(x: Any, axes: tuple[int, ...]) -> int:
    return int(np.prod([x.shape[a] for a in axes], dtype=np.int64))


def _where_count(x: Any, axes: tuple[int, ...], where: Any, dtype: np.dtype, ddof: int, name: str) -> Any:
    """How many elements each reduction over ``axes`` takes, less ``ddof``, as ``dtype`` (NaN at
    or below zero, so the mean of nothing is NaN as in numpy): a constant without ``where``."""
    if where is None:
        n = _count(x, axes) - ddof
        return np.asarray(n if n > 0 else np.nan, dtype)
    real = dtypes.real_for(dtype)
    n = ew.sub(red.reduce_sum(cast(where_mask(x, where, name), real), axes), np.asarray(ddof, real))
    return cast(_select(ew.gt(n, np.asarray(0, real)), n, np.asarray(np.nan, real)), dtype)


def mean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, *,
         where: Any = None) -> Any:
    """numpy's ``mean``; ``where`` leaves elements out of both the sum and the count."""
    _check_out(out, "mean")
    x = asarray(a)
    out_dtype = dtypes.canonicalize(dtype) if dtype is not None else (
        dtypes.float_dtype_for(x.dtype))
    x = cast(x, out_dtype)
    axes = normalize_axes(axis, x.ndim, "mean")
    total = red.reduce_sum(_masked(x, where, 0, "mean"), axes)
    result = ew.div(total, _where_count(x, axes, where, out_dtype, 0, "mean"))
    return _keep(result, x, axes, keepdims)


_average = mean  # var's own ``mean`` parameter shadows the function


def abs_squared(x: Any) -> Any:
    """``|x|**2``, real for complex ``x`` (what var and std average)."""
    if not dtypes.is_complex(x.dtype):
        return ew.mul(x, x)
    re, im = ew.real_p.bind(x), ew.imag_p.bind(x)
    return ew.add(ew.mul(re, re), ew.mul(im, im))


def _ddof(ddof: int, correction: Any, name: str) -> int:
    """``correction`` (the array API's name, which JAX takes too) for ``ddof``."""
    if correction is None:
        return ddof
    if ddof:
        raise ValueError(f"{name}: ddof={ddof} and correction={correction} both given; they are one argument")
    return correction


def var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False, *,
        where: Any = None, mean: Any = None, correction: Any = None) -> Any:
    """numpy's ``var``; ``where`` leaves elements out of the mean, the squares and the count (and
    their gradients: a left-out NaN gives no ``0 * NaN``); a given ``mean`` (shaped as with
    ``keepdims=True``) is used instead of computing it, as JAX's."""
    _check_out(out, "var")
    ddof = _ddof(ddof, correction, "var")
    x = asarray(a)
    in_dtype = dtypes.canonicalize(dtype) if dtype is not None else (
        dtypes.float_dtype_for(x.dtype))
    x = cast(x, in_dtype)
    axes = normalize_axes(axis, x.ndim, "var")
    center = _average(x, axis=axes, keepdims=True, where=where) if mean is None else cast(asarray(mean), in_dtype)
    centered = _masked(ew.sub(x, center), where, 0, "var")
    ss = red.reduce_sum(abs_squared(centered), axes)
    result = ew.div(ss, _where_count(x, axes, where, dtypes.real_for(in_dtype), ddof, "var"))
    return _keep(result, x, axes, keepdims)


def std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False, *,
        where: Any = None, mean: Any = None, correction: Any = None) -> Any:
    """numpy's ``std``: the square root of :func:`var`."""
    return ew.sqrt_p.bind(var(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, where=where,
                              mean=mean, correction=correction))


def _arg(prim: Any, name: str) -> Any:
    def f(a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
        x = asarray(a)
        if axis is None:
            flat = reshape(x, (x.size,))
            out = prim.bind(flat, axis=0, index_dtype=dtypes.default_int())
            return reshape(out, (1,) * x.ndim) if keepdims else out
        (ax,) = normalize_axes(axis, x.ndim, name)
        if x.shape[ax] == 0:
            raise ShapeError(f"{name}: attempt to get {name} of an empty sequence")
        out = prim.bind(x, axis=ax, index_dtype=dtypes.default_int())
        return _keep(out, x, (ax,), keepdims)

    f.__name__ = name
    return f


argmax = _arg(red.argmax_p, "argmax")
argmin = _arg(red.argmin_p, "argmin")


def _logical(a: Any, axis: Any, keepdims: bool, name: str, empty: bool, where: Any = None) -> Any:
    """``all`` (``empty`` True, a minimum) or ``any`` (False, a maximum) of ``a`` as bools; over an
    axis of length 0, ``empty`` for every remaining element, as numpy."""
    x = _masked(cast(asarray(a), dtypes.bool_), where, empty, name)
    axes = normalize_axes(axis, x.ndim, name)
    if 0 in [x.shape[i] for i in axes]:
        kept = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return _keep(np.full(kept, empty), x, axes, keepdims)
    return (min if empty else max)(x, axis=axes, keepdims=keepdims)


def all(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, *, where: Any = None) -> Any:  # noqa: A001
    _check_out(out, "all")
    return _logical(a, axis, keepdims, "all", True, where)


def any(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, *, where: Any = None) -> Any:  # noqa: A001
    _check_out(out, "any")
    return _logical(a, axis, keepdims, "any", False, where)


# --- cumulative sums and products -----------------------------------------------------------------


def _acc_dtype(x: Any, dtype: Any) -> np.dtype:
    if dtype is not None:
        return dtypes.canonicalize(dtype)
    return dtypes.default_int() if x.dtype == dtypes.bool_ else x.dtype


def cumsum(a: Any, axis: int | None = None, dtype: Any = None) -> Any:
    x, ax = flat_or_axis(a, axis, "cumsum")
    x = ew.strong(cast(x, _acc_dtype(x, dtype)))  # strongly typed, as JAX's numpy converts it
    return cumsum_p.bind(x, axis=ax, reverse=False) if x.size else x


def cumprod(a: Any, axis: int | None = None, dtype: Any = None) -> Any:
    x, ax = flat_or_axis(a, axis, "cumprod")
    x = ew.strong(cast(x, _acc_dtype(x, dtype)))
    return associative_scan(ew.mul, x, axis=ax)


def _cumulative(scan: Any, identity: int, name: str, x: Any, axis: int | None, dtype: Any,
                include_initial: bool) -> Any:
    """numpy 2's ``cumulative_sum``/``cumulative_prod``: ``scan`` along ``axis`` (needed past
    one dimension), optionally after the ``identity``."""
    a = asarray(x)
    if axis is None and a.ndim > 1:
        raise ValueError(f"{name}: axis must be given for arrays of more than one dimension")
    ax = 0 if axis is None else axis
    out = scan(a, ax, dtype)
    return _prepend_initial(out, ax, identity) if include_initial else out


def cumulative_sum(x: Any, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
    """The array API's cumulative sum: as :func:`sum`, narrower integers add up in the mode's
    default integer (``cumsum`` keeps them, as JAX's)."""
    x = asarray(x)
    if dtype is None:
        dtype = accumulating_dtype(x.dtype)
    return _cumulative(cumsum, 0, "cumulative_sum", x, axis, dtype, include_initial)


def cumulative_prod(x: Any, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
    return _cumulative(cumprod, 1, "cumulative_prod", x, axis, dtype, include_initial)


def _prepend_initial(out: Any, axis: int, value: int) -> Any:
    (ax,) = normalize_axes(axis, out.ndim, "cumulative")
    cfg = [(0, 0, 0)] * out.ndim
    cfg[ax] = (1, 0, 0)
    return sh.pad(out, np.asarray(value, out.dtype), cfg)


def nancumsum(a: Any, axis: int | None = None, dtype: Any = None) -> Any:
    return cumsum(nan_to(asarray(a), 0), axis, dtype)


def nancumprod(a: Any, axis: int | None = None, dtype: Any = None) -> Any:
    return cumprod(nan_to(asarray(a), 1), axis, dtype)
