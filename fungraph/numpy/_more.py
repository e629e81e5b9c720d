"""The ``ndarray`` type test and small helpers of ``fungraph.numpy``: array introspection,
constant creation and index arithmetic."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.array import Array
from fungraph.core import Tracer
from fungraph.numpy._util import asarray, cast
from fungraph.primitives import elementwise as ew
from fungraph.primitives.shape import reshape


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


# --- introspection ---------------------------------------------------------------------------------


def ndim(a: Any) -> int:
    return asarray(a).ndim


def shape(a: Any) -> tuple[int, ...]:
    return tuple(asarray(a).shape)


def size(a: Any, axis: int | None = None) -> int:
    x = asarray(a)
    return x.size if axis is None else x.shape[axis]


def isscalar(element: Any) -> bool:
    return np.isscalar(element)


def iscomplexobj(x: Any) -> bool:
    return dtypes.is_complex(x.dtype if hasattr(x, "dtype") else asarray(x).dtype)


def isrealobj(x: Any) -> bool:
    return not iscomplexobj(x)


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    args = [a if isinstance(a, (Tracer, bool, int, float, complex)) else
            (np.zeros((), dtypes.canonicalize(a)) if _is_dtype_like(a) else asarray(a)) for a in arrays_and_dtypes]
    return dtypes.result_type(*args)


def _is_dtype_like(a: Any) -> bool:
    if isinstance(a, (np.dtype, type, str)):
        try:
            np.dtype(a)
            return True
        except TypeError:
            return False
    return False


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    src = from_.dtype if hasattr(from_, "dtype") else from_
    return bool(np.can_cast(src, to, casting))


finfo = dtypes.finfo
iinfo = np.iinfo
dtype = np.dtype


# --- creation ----------------------------------------------------------------------------------------


def empty(shape: Any, dtype: Any = None) -> np.ndarray:
    from fungraph.numpy._creation import zeros

    return zeros(shape, dtype)


def empty_like(prototype: Any, dtype: Any = None, shape: Any = None) -> np.ndarray:
    from fungraph.numpy._creation import zeros_like

    return zeros_like(prototype, dtype, shape)


def copy(a: Any) -> Any:
    x = asarray(a)
    return np.array(x, copy=True) if isinstance(x, np.ndarray) else x


def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> np.ndarray:
    return np.tri(N, M, k, dtype=dtypes.canonicalize(dtype or np.float64))


def indices(dimensions: Any, dtype: Any = None, sparse: bool = False) -> Any:
    out = np.indices(tuple(dimensions), dtype=dtypes.canonicalize(dtype or np.int64), sparse=sparse)
    return out


def logspace(start: float, stop: float, num: int = 50, endpoint: bool = True, base: float = 10.0,
             dtype: Any = None, axis: int = 0) -> np.ndarray:
    out = np.logspace(start, stop, num, endpoint, base, axis=axis)
    return out.astype(dtypes.canonicalize(dtype or out.dtype))


def geomspace(start: float, stop: float, num: int = 50, endpoint: bool = True, dtype: Any = None,
              axis: int = 0) -> np.ndarray:
    out = np.geomspace(start, stop, num, endpoint, axis=axis)
    return out.astype(dtypes.canonicalize(dtype or out.dtype))


def diag_indices(n: int, ndim: int = 2) -> tuple[np.ndarray, ...]:
    return tuple(i.astype(np.int64) for i in np.diag_indices(n, ndim))


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple[np.ndarray, ...]:
    return tuple(i.astype(np.int64) for i in np.tril_indices(n, k, m))


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple[np.ndarray, ...]:
    return tuple(i.astype(np.int64) for i in np.triu_indices(n, k, m))


# --- index arithmetic ----------------------------------------------------------------------------------


def unravel_index(indices: Any, shape: Any, order: str = "C") -> tuple[Any, ...]:
    if order != "C":
        raise NotImplementedError("unravel_index: only C order is supported")
    idx = cast(asarray(indices), dtypes.int64)
    out = []
    for d in reversed(tuple(shape)):
        dd = np.asarray(d, np.int64)
        out.append(ew.mod_p.bind(idx, dd))
        idx = ew.floor_divide_p.bind(idx, dd)
    return tuple(reversed(out))


def ravel_multi_index(multi_index: Any, dims: Any, mode: str = "raise", order: str = "C") -> Any:
    if order != "C":
        raise NotImplementedError("ravel_multi_index: only C order is supported")
    flat = None
    for i, d in zip(multi_index, dims):
        i = cast(asarray(i), dtypes.int64)
        if mode == "clip":
            i = ew.min_p.bind(ew.max_p.bind(i, np.asarray(0, np.int64)), np.asarray(d - 1, np.int64))
        elif mode == "wrap":
            i = ew.mod_p.bind(i, np.asarray(d, np.int64))
        flat = i if flat is None else ew.add(ew.mul(flat, np.asarray(d, np.int64)), i)
    return flat


def ix_(*args: Any) -> tuple[Any, ...]:
    n = len(args)
    out = []
    for k, a in enumerate(args):
        x = asarray(a)
        shape = [1] * n
        shape[k] = x.shape[0]
        out.append(reshape(x, tuple(shape)))
    return tuple(out)



# --- numpy 2 aliases and small extras -------------------------------------------------------------


def isin(element: Any, test_elements: Any, assume_unique: bool = False, invert: bool = False) -> Any:
    """Whether each element occurs in ``test_elements`` (one comparison per pair)."""
    from fungraph.numpy._reductions import any as any_
    from fungraph.numpy._util import promote

    x, t = promote(element, test_elements)
    found = any_(ew.eq(reshape(x, tuple(x.shape) + (1,)), reshape(t, (t.size,))), axis=-1)
    return ew.not_p.bind(found) if invert else found


def matvec(x1: Any, x2: Any, /) -> Any:
    from fungraph.numpy._linalg import matmul

    v = asarray(x2)
    out = matmul(x1, reshape(v, tuple(v.shape) + (1,)))
    return reshape(out, tuple(out.shape[:-1]))


def vecmat(x1: Any, x2: Any, /) -> Any:
    from fungraph.numpy._linalg import matmul

    v = asarray(x1)
    out = matmul(reshape(v, tuple(v.shape[:-1]) + (1, v.shape[-1])), x2)
    return reshape(out, tuple(out.shape[:-2]) + (out.shape[-1],))


def diag_indices_from(arr: Any) -> tuple[np.ndarray, ...]:
    x = asarray(arr)
    return diag_indices(x.shape[0], x.ndim)


def broadcast_shapes(*shapes: Any) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*shapes))


def _window(fn: Any) -> Any:
    def window(M: int) -> np.ndarray:
        return fn(M).astype(np.float64)

    window.__name__ = fn.__name__
    return window


hamming = _window(np.hamming)
hanning = _window(np.hanning)
blackman = _window(np.blackman)
bartlett = _window(np.bartlett)
issubdtype = np.issubdtype
isdtype = np.isdtype
iterable = np.iterable
