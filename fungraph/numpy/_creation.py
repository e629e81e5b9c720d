"""Array creation: from shapes and values (constant shapes only; a fill value may be traced) and
from existing data (buffers, iterables, DLPack, ``fromfunction``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph._key_array import KeyArray
from fungraph.array import HostArray, hosted, shared_view
from fungraph.core import Tracer, to_concrete_dtype_array
from fungraph.numpy._util import asarray, cast, is_weak, namespace
from fungraph.primitives import elementwise as ew
from fungraph.primitives.shape import broadcast_in_dim


def _shape(shape: Any) -> tuple[int, ...]:
    """``shape`` as a tuple of Python ints: an integer or a sequence of integers (as JAX, a
    float such as 2.7 or 2.0, or None, is a ``TypeError``, not truncated); no negative sizes."""
    if isinstance(shape, Tracer):
        raise TypeError(f"shapes must be concrete, got a traced value {shape.aval}")
    dims = (shape,) if isinstance(shape, (int, np.integer)) or not isinstance(shape, Iterable) else tuple(shape)
    out = []
    for d in dims:
        if not isinstance(d, (int, np.integer)):
            raise TypeError(f"shapes must be sequences of concrete integers, got {shape!r}")
        if d < 0:
            raise ValueError(f"negative dimensions are not allowed, got shape {shape!r}")
        out.append(int(d))
    return tuple(out)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Any:
    shape = _shape(shape)
    if dtype is None:
        dt = dtypes.canonicalize(np.asarray(fill_value).dtype) if is_weak(fill_value) else asarray(fill_value).dtype
    else:
        dt = dtypes.canonicalize(dtype, "full")
    v = cast(fill_value, dt)
    if not isinstance(v, Tracer):
        out = np.full(shape, v, dtype=dt)
    else:
        out = broadcast_in_dim(v, shape, tuple(range(len(shape) - v.ndim, len(shape))))
    return ew.weak(out) if dtype is None and dtypes.is_weak(fill_value) else out


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
    out = np.full(x.shape if shape is None else _shape(shape), value, dtype=dt)
    return _weak_like(out, a, dtype)


def _weak_like(out: Any, a: Any, dtype: Any) -> Any:
    """JAX's ``*_like(a)``: weakly typed when ``a`` is and no dtype is asked for."""
    return ew.weak(out) if dtype is None and dtypes.is_weak(a) else out


def zeros_like(a: Any, dtype: Any = None, shape: Any = None) -> Any:
    return _like(a, 0, dtype, shape, "zeros_like")


def ones_like(a: Any, dtype: Any = None, shape: Any = None) -> Any:
    return _like(a, 1, dtype, shape, "ones_like")


def full_like(a: Any, fill_value: Any, dtype: Any = None, shape: Any = None) -> Any:
    x = asarray(a)
    out = full(x.shape if shape is None else shape, fill_value, dtype if dtype is not None else x.dtype)
    return _weak_like(out, a, dtype)


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


def _weak_array(obj: Any) -> Any:
    """JAX's array of a Python scalar or of a weak array: weakly typed (it promotes as the scalar)."""
    if isinstance(obj, HostArray):
        return obj
    out = hosted(asarray(obj))
    out.weak_type = True
    return out


def array(obj: Any, dtype: Any = None, copy: bool = True) -> Any:
    if isinstance(obj, KeyArray):
        return _keys_as_is(obj, dtype, "array")
    if dtype is None and dtypes.is_weak(obj) and not isinstance(obj, Tracer):
        return _weak_array(obj)
    x = asarray(obj)
    if dtype is not None:
        x = cast(x, dtypes.canonicalize(dtype, "array"))
    if isinstance(x, np.ndarray) and copy:
        x = np.array(x, copy=True)
    return x


def asarray_(obj: Any, dtype: Any = None) -> Any:
    if isinstance(obj, KeyArray):
        return _keys_as_is(obj, dtype, "asarray")
    if dtype is None and dtypes.is_weak(obj) and not isinstance(obj, Tracer):
        return _weak_array(obj)
    x = asarray(obj)
    return cast(x, dtypes.canonicalize(dtype, "asarray")) if dtype is not None else x


def _keys_as_is(keys: KeyArray, dtype: Any, name: str) -> KeyArray:
    """A key array is an array already (JAX's ``jnp.asarray(key)`` is ``key``); it has no other dtype."""
    if dtype is not None and dtype != keys.dtype:
        raise TypeError(f"{name}: a key array of dtype {keys.dtype} cannot be converted to dtype {dtype}; "
                        f"use random.key_data(keys) for its uint32 words")
    return keys


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False, dtype: Any = None,
             axis: int = 0, *, device: Any = None) -> Any:
    """``num`` evenly spaced values from ``start`` to ``stop`` (arrays broadcast together, the
    samples along a new ``axis``), computed as JAX's: ``start * (1 - t) + stop * t`` in the
    inexact dtype, so the end points are exact and ``grad`` flows to ``start`` and ``stop``;
    ``retstep`` also returns the spacing (nan for a single sample with ``endpoint``)."""
    del device
    fnp = namespace()
    num = int(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    lo, hi = asarray(start), asarray(stop)
    want = dtypes.float_dtype_for(dtypes.result_type(start, stop)) if dtype is None else _requested(dtype, "linspace")
    work = dtypes.float_dtype_for(want)
    lo, hi = cast(lo, work), cast(hi, work)
    bounds = list(np.broadcast_shapes(lo.shape, hi.shape))
    lo, hi = fnp.broadcast_to(lo, bounds), fnp.broadcast_to(hi, bounds)
    axis = len(bounds) + axis + 1 if axis < 0 else axis
    with_axis = bounds[:axis] + [1] + bounds[axis:]
    div = num - 1 if endpoint else num
    if num > 1:
        delta = ew.div(ew.sub(hi, lo), np.asarray(div, work))
        real = dtypes.real_for(work)
        ticks = [1] * len(with_axis)
        ticks[axis] = div
        t = cast(np.asarray((np.arange(div, dtype=real) / np.asarray(div, real)).reshape(ticks)), work)
        out = ew.add(ew.mul(fnp.reshape(lo, with_axis), ew.sub(np.asarray(1, work), t)),
                     ew.mul(fnp.reshape(hi, with_axis), t))
        if endpoint:
            out = fnp.concatenate([out, fnp.reshape(hi, with_axis)], axis=axis)
    elif num == 1:
        delta = fnp.full((), np.nan, work) if endpoint else ew.sub(hi, lo)
        out = fnp.reshape(lo, with_axis)
    else:
        delta = fnp.full((), np.nan, work)
        out = fnp.zeros(bounds[:axis] + [0] + bounds[axis:], want)
    if dtypes.is_int(want) and not dtypes.is_int(out.dtype):
        out = fnp.floor(out)
    result = cast(out, want)
    return (result, delta) if retstep else result


# --- from shapes and values -----------------------------------------------------------------------


def empty(shape: Any, dtype: Any = None) -> np.ndarray:

    return zeros(shape, dtype)


def empty_like(prototype: Any, dtype: Any = None, shape: Any = None) -> np.ndarray:

    return zeros_like(prototype, dtype, shape)


def copy(a: Any) -> Any:
    x = asarray(a)
    out = np.array(x, copy=True) if isinstance(x, np.ndarray) else x
    return _weak_like(out, a, None)


def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> np.ndarray:
    return np.tri(N, M, k, dtype=dtypes.canonicalize(dtype or np.float64))


def logspace(start: float, stop: float, num: int = 50, endpoint: bool = True, base: float = 10.0,
             dtype: Any = None, axis: int = 0) -> np.ndarray:
    out = np.logspace(start, stop, num, endpoint, base, axis=axis)
    return out.astype(dtypes.canonicalize(dtype or out.dtype))


def geomspace(start: float, stop: float, num: int = 50, endpoint: bool = True, dtype: Any = None,
              axis: int = 0) -> np.ndarray:
    out = np.geomspace(start, stop, num, endpoint, axis=axis)
    return out.astype(dtypes.canonicalize(dtype or out.dtype))


def asanyarray(a: Any, dtype: Any = None, order: Any = None) -> Any:
    return namespace().asarray(a, dtype=dtype)


def ascontiguousarray(a: Any, dtype: Any = None) -> Any:
    """Every fungraph array is contiguous as far as a program can tell: this is ``asarray``."""
    return namespace().asarray(a, dtype=dtype)


# --- from existing data ---------------------------------------------------------------------------


def fromfunction(function: Callable[..., Any], shape: Any, *, dtype: Any = float, **kwargs: Any) -> Any:
    """``function`` evaluated at every index of ``shape``: as in JAX it is mapped (``vmap``) over
    the indices, so it sees one index per argument (of ``dtype``), and may return a pytree."""
    from fungraph.api import vmap
    from fungraph.tree_util import tree_map

    fnp = namespace()
    shape = tuple(int(s) for s in (shape if isinstance(shape, (list, tuple)) else (shape,)))
    grids = [fnp.ravel(g) for g in fnp.indices(shape, dtype=dtypes.canonicalize(dtype))]
    if int(np.prod(shape)) == 0:
        return function(*[fnp.reshape(g, shape) for g in grids], **kwargs)
    flat = vmap(lambda *ix: function(*ix, **kwargs))(*grids)
    return tree_map(lambda leaf: fnp.reshape(leaf, shape + tuple(leaf.shape[1:])), flat)


def _canonical_result(out: Any) -> Any:
    return to_concrete_dtype_array(out).copy() if isinstance(out, np.ndarray) else out


def frombuffer(buffer: Any, dtype: Any = float, count: int = -1, offset: int = 0) -> np.ndarray:
    """``numpy.frombuffer`` read in ``dtype`` (narrow ones are allowed), returned as a copy in a
    supported dtype (uint8 bytes become int32)."""
    return _canonical_result(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string: str, dtype: Any = float, count: int = -1, *, sep: str) -> np.ndarray:
    """``numpy.fromstring`` of text (``sep`` is required, as numpy's binary mode is gone), in a
    supported dtype."""
    return _canonical_result(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def fromfile(*args: Any, **kwargs: Any) -> np.ndarray:
    """``numpy.fromfile``, in a supported dtype (eager; JAX refuses it)."""
    return _canonical_result(np.fromfile(*args, **kwargs))


def fromiter(*args: Any, **kwargs: Any) -> np.ndarray:
    """``numpy.fromiter``, in a supported dtype (eager; JAX refuses it)."""
    return _canonical_result(np.fromiter(*args, **kwargs))


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Any:
    """An array from any object that exports DLPack (a numpy or CPU torch/JAX array, a device
    array's host copy), as ``jnp.from_dlpack``: it shares the producer's memory unless
    ``copy=True`` or its dtype is not one fungraph supports (then converted, which
    ``copy=False`` refuses); ``device`` puts it on a backend, as ``device_put`` does."""
    from fungraph.api import device_put

    shared = np.from_dlpack(x) if copy is None else np.from_dlpack(x, copy=copy)
    dt = dtypes.canonicalize(shared.dtype)
    if dt != shared.dtype and copy is False:
        raise ValueError(f"from_dlpack(copy=False): {shared.dtype.name}[{','.join(map(str, shared.shape))}] is not "
                         f"a fungraph dtype and would need converting to {dt.name}, a copy")
    if dt == shared.dtype and device in (None, "cpu") and copy is not True:
        return shared_view(shared)
    return device_put(shared, device)
