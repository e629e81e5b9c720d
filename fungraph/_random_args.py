"""Argument checks shared by ``fungraph.random``'s samplers: shapes, dtypes, axes, parameter
domains and broadcasting, each error naming the sampler (``random.NAME: ...``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import _threefry, dtypes
from fungraph import numpy as fnp
from fungraph._key_array import KeyArray
from fungraph.core import ShapeError, Tracer
from fungraph.numpy._util import asarray, aval


def _key_array(keys: Any, name: str) -> Any:
    """The words of a batch of keys, typed or raw (an integer array of shape (..., 2))."""
    if isinstance(keys, KeyArray):
        return keys.words
    keys = asarray(keys)
    a = aval(keys)
    if a.dtype.kind not in "iu" or a.shape[-1:] != (2,):
        raise TypeError(f"random.{name}: keys are integer arrays of shape (..., 2), got {a}")
    return keys


def _plain_args(name: str, key: Any, shape: Any, dtype: Any) -> tuple[Any, tuple[int, ...], np.dtype]:
    return _threefry.check_key(key, name), _shape(shape, name), _float_dtype(dtype, name)


def _param_args(name: str, key: Any, dtype: Any, **params: Any) -> tuple[Any, np.dtype, list[Any]]:
    """The checked key, the float dtype and the parameters converted to it."""
    dt = _float_dtype(dtype, name)
    return _threefry.check_key(key, name), dt, [fnp.asarray(v, dtype=dt) for v in params.values()]


def _broadcast(name: str, **shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes.values()))
    except ValueError:
        named = ", ".join(f"{k} {s}" for k, s in shapes.items())
        raise ShapeError(f"random.{name}: shapes ({named}) do not broadcast together") from None


def _sample_shape(name: str, shape: Any, **params: Any) -> tuple[int, ...]:
    """``shape``, which the parameters must broadcast to, or their broadcast shape when None."""
    if shape is None:
        return _broadcast(name, **{k: aval(v).shape for k, v in params.items()})
    shape = _shape(shape, name)
    _check_param_shapes(name, shape, **params)
    return shape


def _check_range(name: str, arg: str, value: Any, low: float = -np.inf, high: float = np.inf,
                 low_open: bool = False) -> None:
    """Refuse a concrete parameter outside its domain, naming it (nan passes, as a missing value).
    Traced values are not checked: out of domain they give nan or meaningless draws, as in JAX."""
    if isinstance(value, Tracer):
        return
    v = np.asarray(value)
    if v.dtype.kind not in "biuf":
        return
    bad = (v <= low if low_open else v < low) | (v > high)
    if np.any(bad):
        left = "(" if low_open else "["
        domain = f"in {left}{low:g}, {high:g}]" if np.isfinite(high) else f"{'>' if low_open else '>='} {low:g}"
        raise ValueError(f"random.{name}: {arg} must be {domain}, got {v[bad].ravel()[0].item()!r}"
                         + (f" (in an array of shape {v.shape})" if v.ndim else ""))


def _shape(shape: Any, name: str, prefix: str = "random.") -> tuple[int, ...]:
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"{prefix}{name}: shape must be a sequence of ints, got {shape!r}") from None
    if any(isinstance(d, Tracer) for d in dims):
        raise TypeError(f"{prefix}{name}: shape must be concrete, got a traced dimension in {shape!r}")
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise ValueError(f"{prefix}{name}: shape must hold non-negative ints, got {shape!r}")
    return tuple(int(d) for d in dims)


def _float_dtype(dtype: Any, name: str) -> np.dtype:
    dt = dtypes.canonicalize(dtype)
    if not dtypes.is_float(dt):
        raise TypeError(f"random.{name}: dtype must be float32 or float64, got {dt}")
    return dt


def _axis(axis: int, ndim: int, name: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"random.{name}: axis {axis} is out of bounds for an array of {ndim} dimensions")
    return axis % ndim


def _check_param_shapes(name: str, shape: tuple[int, ...], **params: Any) -> None:
    """Parameters must broadcast to ``shape`` exactly (JAX's rule for sampler parameters)."""
    shapes = {k: aval(v).shape for k, v in params.items()}
    if not _broadcasts_to(shape, *shapes.values()):
        named = ", ".join(f"{k} {s}" for k, s in shapes.items())
        raise ShapeError(f"random.{name}: parameter shapes ({named}) must broadcast to the shape argument {shape}")


def _broadcasts_to(shape: tuple[int, ...], *others: tuple[int, ...]) -> bool:
    try:
        return np.broadcast_shapes(shape, *others) == shape
    except ValueError:
        return False


def _as_int64(v: Any, name: str, what: str) -> Any:
    v = asarray(v)
    kind = aval(v).dtype.kind
    if kind not in "iub":
        if kind != "f":
            raise TypeError(f"random.{name}: {what} must be an integer, got {aval(v).dtype}")
        v = fnp.trunc(v)
    return fnp.asarray(v, dtype=np.int64)
