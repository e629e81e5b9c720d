"""Array creation: from shapes and values (constant shapes only; a fill value may be traced) and
from existing data (buffers, iterables, DLPack, ``fromfunction``)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph._key_array import KeyArray
from fungraph.array import HostArray, hosted, shared_view
from fungraph.core import Tracer, to_concrete_dtype_array
from fungraph.numpy._util import asarray, cast, is_weak, namespace
from fungraph.primitives import elementwise as ew
from fungraph.primitives.shape import broadcast_in_dim, broadcast_to, concatenate, reshape


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
    """JAX's ``arange``: ``start + step * i`` computed in the result dtype (float32 for narrower
    floats), not numpy's float64 values rounded, so float ranges agree with JAX's to the bit."""
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            raise TypeError(f"arange needs concrete bounds, got a traced value {v.aval}")
    given = [np.asarray(v) if isinstance(v, np.ndarray) else v for v in (start, stop, step) if v is not None]
    dt = dtypes.result_type(*given) if dtype is None else dtypes.canonicalize(dtype, "arange")
    if stop is None:
        start, stop = 0, start
    if dtypes.is_complex(dt) or any(np.iscomplexobj(v) for v in given):
        return np.arange(start, stop, 1 if step is None else step).astype(dt)
    work = dtypes.float32 if dtypes.is_float(dt) and np.dtype(dt).itemsize < 4 else dt
    size = max(0, int(np.ceil((stop - start) / (1 if step is None else step))))
    iota = np.arange(size, dtype=work)
    if step is not None:
        iota = dtypes.convert_values(step, work) * iota
    return dtypes.convert_values(dtypes.convert_values(start, work) + iota, dt)


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
    if dtype is None:
        return _weak_array(obj) if dtypes.is_weak(obj) and not isinstance(obj, Tracer) else asarray(obj)
    dt = dtypes.canonicalize(dtype, "asarray")
    if _holds_text(obj):
        obj = np.asarray(obj, dtype=dt)
    return cast(asarray(obj), dt)


def _holds_text(obj: Any) -> bool:
    """Whether ``obj`` is text (a string, bytes, a list of them, a numpy string array), which
    numpy parses as numbers of a requested dtype, as JAX's ``asarray(x, dtype)`` does."""
    if isinstance(obj, (str, bytes)):
        return True
    if isinstance(obj, np.ndarray):
        return obj.dtype.kind in "SU"
    return isinstance(obj, (list, tuple)) and any(_holds_text(e) for e in obj)


def _keys_as_is(keys: KeyArray, dtype: Any, name: str) -> KeyArray:
    """A key array is an array already (JAX's ``jnp.asarray(key)`` is ``key``); it has no other dtype."""
    if dtype is not None and dtype != keys.dtype:
        raise TypeError(f"{name}: a key array of dtype {keys.dtype} cannot be converted to dtype {dtype}; "
                        f"use random.key_data(keys) for its uint32 words")
    return keys


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False, dtype: Any = None,
             axis: int = 0, *, device: Any = None) -> Any:
    """JAX's ``linspace``, computed as XLA compiles JAX's formula: ``start * (1 - i * r) +
    i * (stop * r)`` with ``r = 1 / div`` in the inexact dtype (float32 with x64 off), ``stop``
    itself last with ``endpoint``; integer dtypes take the floor. ``start`` and ``stop`` may be
    arrays (the new axis at ``axis``) or traced values (under ``jit``, ``grad``, ``vmap``)."""
    del device
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    start, stop = asarray(start), asarray(stop)
    if dtype is None:
        dtype = dtypes.float_dtype_for(dtypes.result_type(start, stop))
    else:
        dtype = dtypes.canonicalize(dtype, "linspace")
    comp = dtypes.float_dtype_for(dtype)
    shape = np.broadcast_shapes(start.shape, stop.shape)
    start, stop = broadcast_to(cast(start, comp), shape), broadcast_to(cast(stop, comp), shape)
    axis = len(shape) + axis + 1 if axis < 0 else axis
    bounds = shape[:axis] + (1,) + shape[axis:]
    div = num - 1 if endpoint else num
    if num > 1:
        real = dtypes.real_for(comp)
        iota = np.arange(div, dtype=real).reshape(tuple(div if a == axis else 1 for a in range(len(bounds))))
        r = np.asarray(1, real) / np.asarray(div, real)
        first, last = reshape(start, bounds), reshape(stop, bounds)
        if not shape and comp in (dtypes.float32, dtypes.float64):
            out = _fused_ramp(first, last, iota, r)
        else:
            out = ew.add(ew.mul(first, cast(1 - iota * r, comp)), ew.mul(cast(iota, comp), ew.mul(last, cast(r, comp))))
        if endpoint:
            out = concatenate([out, reshape(stop, bounds)], axis)
        delta = ew.div(ew.sub(stop, start), np.asarray(div, comp))
    else:
        out = reshape(start, bounds) if num == 1 else np.zeros(shape[:axis] + (0,) + shape[axis:], comp)
        delta = ew.sub(stop, start) if num == 1 and not endpoint else np.full(shape, np.nan, comp)
    if dtypes.is_int(dtype) or dtypes.is_bool(dtype):
        out = ew.floor(out)
    out = ew.strong(ew.convert(out, dtype))
    return (out, ew.strong(delta)) if retstep else out


def _fused_ramp(first: Any, last: Any, iota: np.ndarray, r: np.ndarray) -> Any:
    """``first * (1 - i * r) + i * (last * r)`` as XLA's CPU code computes it for scalar bounds:
    LLVM contracts the sum into ``fma(i, last * r, first * (1 - i * r))``. Short ramps (under 1408
    bytes) are unrolled with constant ``i``, where lane 1 of ramps of up to 33 entries folds
    ``1 * (last * r)`` and contracts the other product instead; longer ones run a loop over blocks
    of 128 bytes that also contracts ``1 - i * r``, and the remainder is unrolled. Concrete bounds
    are computed with numpy (``linspace`` is mostly called with numbers)."""
    traced = isinstance(first, Tracer) or isinstance(last, Tracer)
    if not traced:
        first, last = np.asarray(first), np.asarray(last)
    select = ew.select if traced else np.where
    div, width = iota.size, r.itemsize
    one_minus = 1 - iota * r
    if div * width >= 1408:
        looped = (div // (128 // width)) * (128 // width)
        one_minus = np.where(iota < looped, _fma(-iota, r, np.ones_like(iota), np.where), one_minus)
    step = last * r
    out = _fma(iota, step, first * one_minus, select)
    if div * width < 1408 and div <= 33:
        out = select(iota == 1, _fma(first, one_minus, step, select), out)
    return out


def _fma(a: Any, b: Any, c: Any, select: Callable[..., Any]) -> Any:
    """``a * b + c`` rounded once (operands of one float dtype, numpy arrays or traced values): a
    Dekker product and a two-sum, exact up to rare double roundings, in the operands' own dtype
    (the 32-bit mode keeps no wider one)."""
    prod = a * b
    a_hi, a_lo = _dekker_split(a)
    b_hi, b_lo = _dekker_split(b)
    prod_err = (((a_hi * b_hi - prod) + a_hi * b_lo) + a_lo * b_hi) + a_lo * b_lo
    total = prod + c
    back = total - prod
    sum_err = (prod - (total - back)) + (c - back)
    fused = total + (sum_err + prod_err)
    return select((fused - fused) == 0, fused, total)


def _dekker_split(x: Any) -> tuple[Any, Any]:
    """``x`` as a high part of half its mantissa bits and the exact remainder."""
    dt = np.dtype(x.dtype)
    t = x * np.asarray(2.0 ** ((np.finfo(dt).nmant + 2) // 2) + 1, dt)
    hi = t - (t - x)
    return hi, x - hi


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
    """Ones on and below the ``k``-th diagonal: float32 unless ``dtype`` is given, in both modes, as JAX's."""
    return np.tri(N, M, k, dtype=dtypes.canonicalize(dtype or np.float32))


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
