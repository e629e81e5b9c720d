"""Typed PRNG key arrays (JAX's ``jax.random.key``): an array of keys of dtype ``key<fry>``
whose shape is the shape of the batch of keys, each key holding two uint32 words.

A :class:`KeyArray` wraps its uint32 words, an array of shape ``shape + (2,)`` (concrete, or a
tracer under a transformation), and is a pytree node with those words as its one leaf. So the
graphs, primitives, passes and backends only ever see uint32 arrays, and keys go through ``jit``
(as arguments and results), ``vmap``, ``grad``, ``scan``/``fori_loop`` carries and ``cond``
unchanged, as any pytree does. Shape manipulation (indexing, ``reshape``, ``jnp.stack``) acts on
the leading axes of the words; arithmetic is refused as JAX refuses it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.array import IMMUTABLE_MESSAGE, Array
from fungraph.sharding import Device
from fungraph.tree_util import register_pytree_node


class KeyArray(Array):
    """An array of PRNG keys: ``shape`` keys of ``dtype`` (``key<fry>``) over their uint32 words;
    a ``fungraph.Array``, as JAX's key arrays are ``jax.Array``s."""

    __slots__ = ("_words", "dtype")
    __array_priority__ = 100
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, words: Any, dtype: dtypes.KeyDType = dtypes.THREEFRY_KEY) -> None:
        self._words = words
        self.dtype = dtype

    @property
    def words(self) -> Any:
        """The uint32 words, of shape ``shape + (2,)`` (``random.key_data``)."""
        return self._words

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._words.shape[:-1])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def weak_type(self) -> bool:
        return False

    @property
    def device(self) -> Device:
        return self._words.device

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object (a key array of shape ())")
        return self.shape[0]

    def __iter__(self) -> Iterator[KeyArray]:
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, idx: Any) -> KeyArray:
        """The keys at ``idx``, which indexes the key axes only (an ``...`` stops before the words)."""
        entries = idx if isinstance(idx, tuple) else (idx,)
        return KeyArray(self._words[(*entries, slice(None))], self.dtype)

    def __setitem__(self, idx: Any, value: Any) -> None:
        raise TypeError(IMMUTABLE_MESSAGE.format(kind=type(self).__name__, aval=f"{self.dtype}{list(self.shape)}"))

    def reshape(self, *shape: Any, order: str = "C") -> KeyArray:
        dims = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return KeyArray(self._words.reshape((*dims, self._words.shape[-1])), self.dtype)

    def ravel(self) -> KeyArray:
        return self.reshape(-1)

    flatten = ravel

    def squeeze(self, axis: Any = None) -> KeyArray:
        if axis is None:
            axis = tuple(i for i, d in enumerate(self.shape) if d == 1)
        axes = axis if isinstance(axis, tuple) else (axis,)
        return KeyArray(self._words.squeeze(tuple(a % max(self.ndim, 1) for a in axes)), self.dtype)

    def transpose(self, *axes: Any) -> KeyArray:
        order = tuple(axes[0]) if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        order = order or tuple(reversed(range(self.ndim)))
        return KeyArray(self._words.transpose((*(a % self.ndim for a in order), self.ndim)), self.dtype)

    @property
    def T(self) -> KeyArray:  # noqa: N802  (numpy's name)
        return self.transpose()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError("JAX array with PRNGKey dtype cannot be converted to a NumPy array. Use "
                        "random.key_data(arr) if you wish to extract the underlying integer array.")

    def astype(self, dtype: Any) -> Any:
        raise TypeError(f"a key array of dtype {self.dtype} cannot be cast to {dtype}; use random.key_data(keys) "
                        f"for its uint32 words")

    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        return self._compare(other, "equal").all(axis=-1)

    def __ne__(self, other: object) -> Any:  # type: ignore[override]
        return self._compare(other, "not_equal").any(axis=-1)

    def _compare(self, other: object, name: str) -> Any:
        if not isinstance(other, KeyArray) or other.dtype != self.dtype:
            raise TypeError(f"{name} does not accept dtypes {self.dtype}, {_dtype_name(other)}.")
        return self._words == other._words if name == "equal" else self._words != other._words

    def __repr__(self) -> str:
        words = self._words
        if isinstance(words, np.ndarray):
            return f"Array({self.shape}, dtype={self.dtype}) overlaying:\n{np.asarray(words)}"
        dims = ",".join(str(d) for d in self.shape)
        return f"{type(words).__name__}<{self.dtype}[{dims}]>"

    __str__ = __repr__


def _dtype_name(x: Any) -> str:
    if isinstance(x, KeyArray):
        return str(x.dtype)
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, int):
        return str(dtypes.default_int())
    if isinstance(x, float):
        return str(dtypes.default_float())
    if isinstance(x, complex):
        return str(dtypes.default_complex())
    return str(getattr(x, "dtype", type(x).__name__))


_ARITH = "integer, floating, complexfloating"
_BITS = "integer, bool"
_ORDER = "integer, floating, bool"

#: numpy's name, lax's name, the dtypes lax accepts, the operator and its reflection: JAX's
#: errors name the numpy function for a key with a number and the lax primitive for two keys
_BINARY = (("add", "add", _ARITH, "__add__", "__radd__"), ("subtract", "sub", _ARITH, "__sub__", "__rsub__"),
           ("multiply", "mul", _ARITH, "__mul__", "__rmul__"), ("true_divide", "div", _ARITH, "__truediv__",
           "__rtruediv__"), ("floor_divide", "div", _ARITH, "__floordiv__", "__rfloordiv__"),
           ("remainder", "rem", _ARITH, "__mod__", "__rmod__"), ("power", "pow", _ARITH, "__pow__", "__rpow__"),
           ("matmul", "dot_general", _ARITH, "__matmul__", "__rmatmul__"),
           ("bitwise_and", "and", _BITS, "__and__", "__rand__"), ("bitwise_or", "or", _BITS, "__or__", "__ror__"),
           ("bitwise_xor", "xor", _BITS, "__xor__", "__rxor__"),
           ("left_shift", "shift_left", _BITS, "__lshift__", "__rlshift__"),
           ("right_shift", "shift_right_arithmetic", _BITS, "__rshift__", "__rrshift__"),
           ("less", "lt", _ORDER, "__lt__", None), ("less_equal", "le", _ORDER, "__le__", None),
           ("greater", "gt", _ORDER, "__gt__", None), ("greater_equal", "ge", _ORDER, "__ge__", None))
_UNARY = (("neg", _ARITH, "__neg__"), ("pos", _ARITH, "__pos__"),
          ("abs", "floating, complexfloating, signedinteger", "__abs__"), ("not", _BITS, "__invert__"))


def _refuse_binary(name: str, prim: str, accepted: str, reflected: bool) -> Any:
    """An operator raising JAX's TypeError for key arrays (``add does not accept dtypes key<fry>, int32.``)."""

    def refused(self: KeyArray, other: Any) -> Any:
        if isinstance(other, KeyArray):
            raise TypeError(f"{prim} does not accept dtype {self.dtype} at position 0. Accepted dtypes at "
                            f"position 0 are subtypes of {accepted}.")
        names = (_dtype_name(other), str(self.dtype)) if reflected else (str(self.dtype), _dtype_name(other))
        raise TypeError(f"{name} does not accept dtypes {names[0]}, {names[1]}.")

    return refused


def _refuse_unary(prim: str, accepted: str) -> Any:
    def refused(self: KeyArray) -> Any:
        raise TypeError(f"{prim} does not accept dtype {self.dtype}. Accepted dtypes are subtypes of {accepted}.")

    return refused


for _name, _prim, _accepted, _method, _reflected in _BINARY:
    setattr(KeyArray, _method, _refuse_binary(_name, _prim, _accepted, False))
    if _reflected:
        setattr(KeyArray, _reflected, _refuse_binary(_name, _prim, _accepted, True))
for _prim, _accepted, _method in _UNARY:
    setattr(KeyArray, _method, _refuse_unary(_prim, _accepted))


register_pytree_node(KeyArray, lambda k: ((k.words,), k.dtype), lambda dtype, words: KeyArray(words[0], dtype))
