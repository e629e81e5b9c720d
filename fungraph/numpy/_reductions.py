"""Reductions of ``fungraph.numpy`` with numpy's axis/keepdims/dtype conventions."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError
from fungraph.numpy._indexing import take_along_axis
from fungraph.numpy._util import asarray, cast, normalize_axes
from fungraph.primitives import elementwise as ew
from fungraph.primitives import reductions as red
from fungraph.primitives.shape import reshape, transpose


def _keep(out: Any, x: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
    if not keepdims:
        return out
    return reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))


def _accumulating_dtype(dtype: np.dtype) -> np.dtype:
    """numpy sums and multiplies bools and narrow ints in the platform integer (int64)."""
    return dtypes.int64 if dtype in (dtypes.bool_, dtypes.int32) else dtype


def sum(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    x = asarray(a)
    x = cast(x, dtypes.canonical(dtype) if dtype is not None else _accumulating_dtype(x.dtype))
    axes = normalize_axes(axis, x.ndim, "sum")
    return _keep(red.reduce_sum(x, axes), x, axes, keepdims)


def prod(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    x = asarray(a)
    x = cast(x, dtypes.canonical(dtype) if dtype is not None else _accumulating_dtype(x.dtype))
    axes = normalize_axes(axis, x.ndim, "prod")
    return _keep(red.reduce_prod(x, axes), x, axes, keepdims)


def _extremum(prim: Any, name: str) -> Any:
    def f(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
        x = asarray(a)
        axes = normalize_axes(axis, x.ndim, name)
        if not axes:
            out = x
        elif dtypes.is_complex(x.dtype):
            out = _complex_extremum(x, tuple(sorted(axes)), red.argmax_p if name == "max" else red.argmin_p, name)
        else:
            out = prim.bind(x, axes=tuple(sorted(axes)))
        return _keep(out, x, axes, keepdims)

    f.__name__ = name
    return f


def _complex_extremum(x: Any, axes: tuple[int, ...], arg: Any, name: str) -> Any:
    """The element ``arg`` (argmax/argmin: numpy's lexicographic order, the first NaN winning)
    picks along ``axes``, gathered so its derivative reaches that element alone."""
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    size = _count(x, axes)
    if size == 0:
        raise ShapeError(f"{name}: zero-size reduction over axes {axes} of {x.dtype}{list(x.shape)} has no identity")
    rows = reshape(transpose(x, kept + axes), tuple(x.shape[i] for i in kept) + (size,))
    pick = reshape(arg.bind(rows, axis=len(kept), index_dtype=dtypes.int64), rows.shape[:-1] + (1,))
    return reshape(take_along_axis(rows, pick, axis=len(kept)), rows.shape[:-1])


max = _extremum(red.reduce_max_p, "max")  # noqa: A001
min = _extremum(red.reduce_min_p, "min")  # noqa: A001
amax = max
amin = min


def _count(x: Any, axes: tuple[int, ...]) -> int:
    return int(np.prod([x.shape[a] for a in axes], dtype=np.int64))


def mean(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    x = asarray(a)
    out_dtype = dtypes.canonical(dtype) if dtype is not None else (
        x.dtype if dtypes.is_inexact(x.dtype) else dtypes.float64)
    x = cast(x, out_dtype)
    axes = normalize_axes(axis, x.ndim, "mean")
    total = red.reduce_sum(x, axes)
    n = _count(x, axes)
    out = ew.div(total, np.asarray(n if n else np.nan, out_dtype))
    return _keep(out, x, axes, keepdims)


def abs_squared(x: Any) -> Any:
    """``|x|**2``, real for complex ``x`` (what var and std average)."""
    if not dtypes.is_complex(x.dtype):
        return ew.mul(x, x)
    re, im = ew.real_p.bind(x), ew.imag_p.bind(x)
    return ew.add(ew.mul(re, re), ew.mul(im, im))


def var(a: Any, axis: Any = None, dtype: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
    x = asarray(a)
    in_dtype = dtypes.canonical(dtype) if dtype is not None else (
        x.dtype if dtypes.is_inexact(x.dtype) else dtypes.float64)
    x = cast(x, in_dtype)
    axes = normalize_axes(axis, x.ndim, "var")
    centered = ew.sub(x, mean(x, axis=axes, keepdims=True))
    ss = red.reduce_sum(abs_squared(centered), axes)
    n = _count(x, axes) - ddof
    out = ew.div(ss, np.asarray(n if n > 0 else np.nan, dtypes.real_for(in_dtype)))
    return _keep(out, x, axes, keepdims)


def std(a: Any, axis: Any = None, dtype: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
    return ew.sqrt_p.bind(var(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims))


def _arg(prim: Any, name: str) -> Any:
    def f(a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
        x = asarray(a)
        if axis is None:
            flat = reshape(x, (x.size,))
            out = prim.bind(flat, axis=0, index_dtype=dtypes.int64)
            return reshape(out, (1,) * x.ndim) if keepdims else out
        (ax,) = normalize_axes(axis, x.ndim, name)
        if x.shape[ax] == 0:
            raise ShapeError(f"{name}: attempt to get {name} of an empty sequence")
        out = prim.bind(x, axis=ax, index_dtype=dtypes.int64)
        return _keep(out, x, (ax,), keepdims)

    f.__name__ = name
    return f


argmax = _arg(red.argmax_p, "argmax")
argmin = _arg(red.argmin_p, "argmin")


def _logical(a: Any, axis: Any, keepdims: bool, name: str, empty: bool) -> Any:
    """``all`` (``empty`` True, a minimum) or ``any`` (False, a maximum) of ``a`` as bools; over an
    axis of length 0, ``empty`` for every remaining element, as numpy."""
    x = cast(asarray(a), dtypes.bool_)
    axes = normalize_axes(axis, x.ndim, name)
    if 0 in [x.shape[i] for i in axes]:
        kept = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return _keep(np.full(kept, empty), x, axes, keepdims)
    return (min if empty else max)(x, axis=axes, keepdims=keepdims)


def all(a: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    return _logical(a, axis, keepdims, "all", True)


def any(a: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    return _logical(a, axis, keepdims, "any", False)
