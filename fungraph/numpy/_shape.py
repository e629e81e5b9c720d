"""Shape manipulation in ``fungraph.numpy`` (reshape, transpose, broadcasting, joining), and the
``ndarray`` type test with ``ndim``/``shape``/``size``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph._key_array import KeyArray
from fungraph.array import Array
from fungraph.core import ShapeError, Tracer
from fungraph.numpy._util import asarray, normalize_axes, promote
from fungraph.primitives import shape as sh
from fungraph.primitives._rules import broadcast_shape_tuples
from fungraph.primitives.operands import weak_asarray


def _resolve_shape(shape: Any, size: int, src: Any) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    unknown = [i for i, d in enumerate(shape) if d == -1]
    if len(unknown) > 1:
        raise ShapeError(f"reshape: can only specify one unknown dimension, got {shape}")
    if unknown:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or size % known:
            raise ShapeError(f"reshape: cannot reshape {src} into shape {shape}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    return shape


def reshape(a: Any, newshape: Any = None, *, shape: Any = None) -> Any:
    target = shape if shape is not None else newshape
    if target is None:
        raise TypeError("reshape needs a shape")
    if isinstance(a, KeyArray):
        return a.reshape(tuple(target) if isinstance(target, (tuple, list)) else (target,))
    x = asarray(a)
    return sh.reshape(x, _resolve_shape(target, x.size, x.aval if hasattr(x, "aval") else x.shape))


def ravel(a: Any) -> Any:
    x = asarray(a)
    return sh.reshape(x, (x.size,))


def transpose(a: Any, axes: Sequence[int] | None = None) -> Any:
    x = asarray(a)
    perm = tuple(range(x.ndim))[::-1] if axes is None else normalize_axes(tuple(axes), x.ndim, "transpose")
    if len(perm) != x.ndim:
        raise ShapeError(f"transpose: axes {axes} do not match an array of rank {x.ndim}")
    return sh.transpose(x, perm)


def swapaxes(a: Any, axis1: int, axis2: int) -> Any:
    x = asarray(a)
    (a1,) = normalize_axes(axis1, x.ndim, "swapaxes")
    (a2,) = normalize_axes(axis2, x.ndim, "swapaxes")
    perm = list(range(x.ndim))
    perm[a1], perm[a2] = perm[a2], perm[a1]
    return sh.transpose(x, perm)


def moveaxis(a: Any, source: int, destination: int) -> Any:
    x = asarray(a)
    (src,) = normalize_axes(source, x.ndim, "moveaxis")
    (dst,) = normalize_axes(destination, x.ndim, "moveaxis")
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    return sh.transpose(x, perm)


def expand_dims(a: Any, axis: Any) -> Any:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if isinstance(a, KeyArray):
        norm = normalize_axes(axes, a.ndim + len(axes), "expand_dims")
        return KeyArray(expand_dims(a.words, norm), a.dtype)
    x = asarray(a)
    out_ndim = x.ndim + len(axes)
    norm = normalize_axes(axes, out_ndim, "expand_dims")
    shape = iter(x.shape)
    return sh.reshape(x, tuple(1 if i in norm else next(shape) for i in range(out_ndim)))


def squeeze(a: Any, axis: Any = None) -> Any:
    x = asarray(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = normalize_axes(axis, x.ndim, "squeeze")
        for ax in axes:
            if x.shape[ax] != 1:
                raise ShapeError(f"squeeze: cannot select an axis to squeeze out which has size not equal to one "
                                 f"(axis {ax} of shape {x.shape})")
    return sh.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def broadcast_to(a: Any, shape: Any) -> Any:
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if isinstance(a, KeyArray):
        if broadcast_shape_tuples(a.shape, shape) != shape:
            raise ShapeError(f"broadcast_to: cannot broadcast a key array of shape {a.shape} to {shape}")
        return KeyArray(broadcast_to(a.words, (*shape, *a.dtype.key_shape)), a.dtype)
    x = weak_asarray(a)
    if broadcast_shape_tuples(x.shape, shape) != shape:
        raise ShapeError(f"broadcast_to: cannot broadcast an array of shape {x.shape} to {shape}")
    return sh.broadcast_to(x, shape)


def broadcast_arrays(*args: Any) -> list[Any]:
    xs = [asarray(a) for a in args]
    shape = broadcast_shape_tuples(*(x.shape for x in xs))
    if shape is None:
        raise ValueError(f"broadcast_arrays: shapes {[x.shape for x in xs]} cannot be broadcast together")
    return [sh.broadcast_to(x, shape) for x in xs]


def _with_dtype(arrays: Sequence[Any], dtype: Any, name: str) -> list[Any]:
    """The operands at their promoted dtype, or all converted to ``dtype`` when one is given."""
    if dtype is None:
        return [asarray(x) for x in promote(*arrays)]
    want = dtypes.canonicalize(dtype, name, depth=3)
    return [astype(x, want) for x in arrays]


def concatenate(arrays: Sequence[Any], axis: int | None = 0, dtype: Any = None) -> Any:
    if len(arrays) == 0:
        raise ValueError("need at least one array to concatenate")
    if any(isinstance(x, KeyArray) for x in arrays):
        return _concatenate_keys(arrays, axis)
    xs = _with_dtype(arrays, dtype, "concatenate")
    if axis is None:
        xs = [sh.reshape(x, (x.size,)) for x in xs]
        axis = 0
    if any(x.ndim == 0 for x in xs):
        raise ShapeError("zero-dimensional arrays cannot be concatenated")
    if len({x.ndim for x in xs}) != 1:
        raise ShapeError(f"concatenate: all inputs must have the same rank, got shapes {[x.shape for x in xs]}")
    (ax,) = normalize_axes(axis, xs[0].ndim, "concatenate")
    return sh.concatenate(xs, ax)


def stack(arrays: Sequence[Any], axis: int = 0, out: None = None, dtype: Any = None) -> Any:
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.stack is not supported.")
    if len(arrays) == 0:
        raise ValueError("need at least one array to stack")
    if any(isinstance(x, KeyArray) for x in arrays):
        keys = _keys_of_one_dtype(arrays, "stack")
        if len({k.shape for k in keys}) != 1:
            raise ShapeError(f"stack: all input arrays must have the same shape, got {[k.shape for k in keys]}")
        (ax,) = normalize_axes(axis, keys[0].ndim + 1, "stack")
        return KeyArray(sh.concatenate([expand_dims(k.words, ax) for k in keys], ax), keys[0].dtype)
    xs = _with_dtype(arrays, dtype, "stack")
    shapes = {x.shape for x in xs}
    if len(shapes) != 1:
        raise ShapeError(f"stack: all input arrays must have the same shape, got {[x.shape for x in xs]}")
    return concatenate([expand_dims(x, axis) for x in xs], axis=axis)


def astype(x: Any, dtype: Any) -> Any:
    from fungraph.primitives.elementwise import convert

    return convert(asarray(x), dtypes.canonicalize(dtype, "astype"))


# --- array type and shape -------------------------------------------------------------------------


class _NdarrayMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, (np.ndarray, Tracer, Array))

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, (np.ndarray, Tracer, Array))


class ndarray(metaclass=_NdarrayMeta):  # noqa: N801
    """For ``isinstance(x, fungraph.numpy.ndarray)``: true of numpy arrays, traced values and
    device arrays alike (as ``jax.Array`` is). Not constructible: use ``fungraph.numpy.array``."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("fungraph.numpy.ndarray is for isinstance checks; create arrays with fungraph.numpy.array")


def ndim(a: Any) -> int:
    return _shaped(a).ndim


def shape(a: Any) -> tuple[int, ...]:
    return tuple(_shaped(a).shape)


def size(a: Any, axis: int | None = None) -> int:
    x = _shaped(a)
    return x.size if axis is None else x.shape[axis]


def _shaped(a: Any) -> Any:
    """``a`` as something with a shape: a key array as it is (its words are not its shape), else an array."""
    return a if isinstance(a, KeyArray) else asarray(a)


def broadcast_shapes(*shapes: Any) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*shapes))


def _keys_of_one_dtype(arrays: Sequence[Any], name: str) -> list[KeyArray]:
    """Typed key arrays to join: all of them keys of one dtype, as JAX requires."""
    kinds = {str(x.dtype) if isinstance(x, KeyArray) else str(getattr(asarray(x), "dtype", "?")) for x in arrays}
    if not all(isinstance(x, KeyArray) for x in arrays) or len(kinds) != 1:
        raise TypeError(f"{name}: key arrays join only key arrays of the same key dtype, got dtypes {sorted(kinds)}")
    return list(arrays)


def _concatenate_keys(arrays: Sequence[Any], axis: int | None) -> KeyArray:
    keys = _keys_of_one_dtype(arrays, "concatenate")
    if axis is None:
        keys = [k.ravel() for k in keys]
        axis = 0
    if any(k.ndim == 0 for k in keys):
        raise ShapeError("zero-dimensional arrays cannot be concatenated")
    if len({k.ndim for k in keys}) != 1:
        raise ShapeError(f"concatenate: all inputs must have the same rank, got shapes {[k.shape for k in keys]}")
    (ax,) = normalize_axes(axis, keys[0].ndim, "concatenate")
    return KeyArray(sh.concatenate([asarray(k.words) for k in keys], ax), keys[0].dtype)
