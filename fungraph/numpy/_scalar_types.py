"""``fungraph.numpy.float32`` and its siblings as in ``jax.numpy``: each is a dtype (``np.dtype``
reads its ``dtype`` attribute, so ``zeros(3, float32)`` and ``x.dtype == float32`` work) and,
called, makes an array of that dtype from a value, concrete or traced (``float32(x)`` casts)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes


class _ScalarMeta(type):
    """The type of each scalar type: calling the class casts, comparing compares dtypes."""

    dtype: np.dtype

    def __call__(cls, x: Any = 0) -> Any:
        from fungraph.numpy._creation import asarray_

        return asarray_(x, dtype=cls.dtype)

    def __eq__(cls, other: Any) -> bool:
        try:
            return cls.dtype == np.dtype(other)
        except TypeError:
            return False

    def __ne__(cls, other: Any) -> bool:
        return not cls == other

    def __hash__(cls) -> int:
        return hash(cls.dtype)

    def __repr__(cls) -> str:
        return f"fungraph.numpy.{cls.__name__}"

    def __instancecheck__(cls, x: Any) -> bool:
        return isinstance(x, cls.dtype.type)


def _scalar_type(name: str, dtype: np.dtype) -> _ScalarMeta:
    return _ScalarMeta(name, (), {"dtype": dtype, "__module__": "fungraph.numpy",
                                  "__doc__": f"The {dtype} dtype; ``{name}(x)`` is ``asarray(x, {name})``."})


bool_ = _scalar_type("bool_", dtypes.bool_)
int32 = _scalar_type("int32", dtypes.int32)
int64 = _scalar_type("int64", dtypes.int64)
float32 = _scalar_type("float32", dtypes.float32)
float64 = _scalar_type("float64", dtypes.float64)
complex64 = _scalar_type("complex64", dtypes.complex64)
complex128 = _scalar_type("complex128", dtypes.complex128)

generic = np.generic
number = np.number
inexact = np.inexact
floating = np.floating
complexfloating = np.complexfloating
integer = np.integer
signedinteger = np.signedinteger
unsignedinteger = np.unsignedinteger
