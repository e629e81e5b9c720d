"""Reductions of ``fungraph.numpy`` with numpy's axis/keepdims/dtype conventions."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError
from fungraph.numpy._util import asarray, cast, normalize_axes
from fungraph.primitives import elementwise as ew
from fungraph.primitives import reductions as red
from fungraph.primitives.shape import reshape


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
        out = prim.bind(x, axes=tuple(sorted(axes))) if axes else x
        return _keep(out, x, axes, keepdims)

    f.__name__ = name
    return f


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


def all(a: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    x = cast(asarray(a), dtypes.bool_)
    return min(x, axis=axis, keepdims=keepdims) if x.size else _keep(np.asarray(True), x, (), False)


def any(a: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    x = cast(asarray(a), dtypes.bool_)
    return max(x, axis=axis, keepdims=keepdims) if x.size else _keep(np.asarray(False), x, (), False)
