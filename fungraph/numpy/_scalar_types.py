"""``fungraph.numpy.float32`` and its siblings as in ``jax.numpy``: each is a dtype (``np.dtype``
reads its ``dtype`` attribute, so ``zeros(3, float32)`` and ``x.dtype == float32`` work) and,
called, is ``asarray(x, dtype)``: a strongly typed ``fungraph.Array`` of that dtype made from a
value, concrete or traced (``float32(x)`` casts, ``float32("1.5")`` parses), 64-bit requests
truncated with JAX's warning when x64 is off."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.array import hosted_copy_if_shared
from fungraph.numpy._creation import asarray_


class _ScalarMeta(type):
    """The type of each scalar type: calling the class casts, comparing compares dtypes."""

    dtype: np.dtype

    def __call__(cls, x: Any) -> Any:
        return hosted_copy_if_shared(asarray_(x, dtype=cls.dtype), [x])

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


dtypes.TRANSPARENT_CODE.add(_ScalarMeta.__call__.__code__)


def _scalar_type(name: str, dtype: np.dtype) -> _ScalarMeta:
    return _ScalarMeta(name, (), {"dtype": dtype, "__module__": "fungraph.numpy",
                                  "__doc__": f"The {dtype} dtype; ``{name}(x)`` is ``asarray(x, {name})``."})


bool_ = _scalar_type("bool_", dtypes.bool_)
int8 = _scalar_type("int8", dtypes.int8)
int16 = _scalar_type("int16", dtypes.int16)
int32 = _scalar_type("int32", dtypes.int32)
int64 = _scalar_type("int64", dtypes.int64)
uint8 = _scalar_type("uint8", dtypes.uint8)
uint16 = _scalar_type("uint16", dtypes.uint16)
uint32 = _scalar_type("uint32", dtypes.uint32)
uint64 = _scalar_type("uint64", dtypes.uint64)
bfloat16 = _scalar_type("bfloat16", dtypes.bfloat16)
float16 = _scalar_type("float16", dtypes.float16)
float32 = _scalar_type("float32", dtypes.float32)
float64 = _scalar_type("float64", dtypes.float64)
complex64 = _scalar_type("complex64", dtypes.complex64)
complex128 = _scalar_type("complex128", dtypes.complex128)
float8_e3m4 = _scalar_type("float8_e3m4", dtypes.FLOAT8["float8_e3m4"])
float8_e4m3 = _scalar_type("float8_e4m3", dtypes.FLOAT8["float8_e4m3"])
float8_e4m3b11fnuz = _scalar_type("float8_e4m3b11fnuz", dtypes.FLOAT8["float8_e4m3b11fnuz"])
float8_e4m3fn = _scalar_type("float8_e4m3fn", dtypes.FLOAT8["float8_e4m3fn"])
float8_e4m3fnuz = _scalar_type("float8_e4m3fnuz", dtypes.FLOAT8["float8_e4m3fnuz"])
float8_e5m2 = _scalar_type("float8_e5m2", dtypes.FLOAT8["float8_e5m2"])
float8_e5m2fnuz = _scalar_type("float8_e5m2fnuz", dtypes.FLOAT8["float8_e5m2fnuz"])
float8_e8m0fnu = _scalar_type("float8_e8m0fnu", dtypes.FLOAT8["float8_e8m0fnu"])

double = float64
single = float32
cdouble = complex128
csingle = complex64
complex_ = complex128
float_ = float64
int_ = int64
uint = uint64
half = float16

generic = np.generic
number = np.number
inexact = np.inexact
floating = np.floating
complexfloating = np.complexfloating
integer = np.integer
signedinteger = np.signedinteger
unsignedinteger = np.unsignedinteger
character = np.character
flexible = np.flexible

_UNSUPPORTED = frozenset({
    "int1", "int2", "int4", "uint1", "uint2", "uint4", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn",
    "object_",
})


def unsupported_dtype_error(name: str) -> AttributeError | None:
    """The error for ``fungraph.numpy.<name>`` when ``name`` is a ``jax.numpy`` dtype fungraph
    lacks (None for any other name), so a port learns why rather than meeting a bare miss."""
    if name not in _UNSUPPORTED:
        return None
    supported = ", ".join(str(d) for d in dtypes.SUPPORTED)
    return AttributeError(f"fungraph.numpy has no {name!r}: fungraph does not support the {name} dtype "
                          f"(sub-byte integers, 4- and 6-bit floats and objects). Its dtypes are {supported}.")
