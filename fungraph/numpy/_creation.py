"""Array creation. Constant shapes only; a fill value may be traced."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Tracer
from fungraph.numpy._util import asarray, cast, is_weak
from fungraph.primitives.shape import broadcast_in_dim


def _shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, Tracer):
        raise TypeError(f"shapes must be concrete, got a traced value {shape.aval}")
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Any:
    shape = _shape(shape)
    if dtype is None:
        dt = dtypes.canonicalize(np.asarray(fill_value).dtype) if is_weak(fill_value) else asarray(fill_value).dtype
    else:
        dt = dtypes.canonicalize(dtype, "full")
    v = cast(fill_value, dt)
    if not isinstance(v, Tracer):
        return np.full(shape, v, dtype=dt)
    return broadcast_in_dim(v, shape, tuple(range(len(shape) - v.ndim, len(shape))))


def zeros(shape: Any, dtype: Any = None) -> Any:
    return np.zeros(_shape(shape), dtype=_requested(dtype, "zeros"))


def ones(shape: Any, dtype: Any = None) -> Any:
    return np.ones(_shape(shape), dtype=_requested(dtype, "ones"))


def _requested(dtype: Any, name: str) -> np.dtype:
    """A user's ``dtype=`` argument in the current mode (None: the default float)."""
    return dtypes.default_float() if dtype is None else dtypes.canonicalize(dtype, name, depth=3)


def _like(a: Any, value: Any, dtype: Any, shape: Any, name: str) -> Any:
    x = asarray(a)
    dt = dtypes.canonicalize(dtype, name) if dtype is not None else x.dtype
    return np.full(x.shape if shape is None else _shape(shape), value, dtype=dt)


def zeros_like(a: Any, dtype: Any = None, shape: Any = None) -> Any:
    return _like(a, 0, dtype, shape, "zeros_like")


def ones_like(a: Any, dtype: Any = None, shape: Any = None) -> Any:
    return _like(a, 1, dtype, shape, "ones_like")


def full_like(a: Any, fill_value: Any, dtype: Any = None, shape: Any = None) -> Any:
    x = asarray(a)
    return full(x.shape if shape is None else shape, fill_value, dtype if dtype is not None else x.dtype)


def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None) -> np.ndarray:
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            raise TypeError(f"arange needs concrete bounds, got a traced value {v.aval}")
    out = np.arange(start) if stop is None else np.arange(start, stop, 1 if step is None else step)
    return out.astype(dtypes.canonicalize(out.dtype) if dtype is None else dtypes.canonicalize(dtype, "arange"))


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> np.ndarray:
    return np.eye(N, M, k, dtype=_requested(dtype, "eye"))


def identity(n: int, dtype: Any = None) -> np.ndarray:
    return eye(n, dtype=dtype)


def array(obj: Any, dtype: Any = None, copy: bool = True) -> Any:
    x = asarray(obj)
    if dtype is not None:
        x = cast(x, dtypes.canonicalize(dtype, "array"))
    if isinstance(x, np.ndarray) and copy:
        x = np.array(x, copy=True)
    return x


def asarray_(obj: Any, dtype: Any = None) -> Any:
    x = asarray(obj)
    return cast(x, dtypes.canonicalize(dtype, "asarray")) if dtype is not None else x


def linspace(start: float, stop: float, num: int = 50, endpoint: bool = True, dtype: Any = None) -> np.ndarray:
    out = np.linspace(start, stop, num, endpoint=endpoint)
    return out.astype(_requested(dtype, "linspace") if dtype is not None else dtypes.canonicalize(out.dtype))
