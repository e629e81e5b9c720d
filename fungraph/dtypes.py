"""The dtypes fungraph supports (bool, int32, int64, float32, float64, complex64, complex128)
and numpy-2 (NEP 50) promotion between them."""

from __future__ import annotations

from typing import Any

import numpy as np

bool_ = np.dtype(np.bool_)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
complex64 = np.dtype(np.complex64)
complex128 = np.dtype(np.complex128)

SUPPORTED: tuple[np.dtype, ...] = (bool_, int32, int64, float32, float64, complex64, complex128)

SHORT_NAMES: dict[np.dtype, str] = {
    bool_: "bool",
    int32: "i32",
    int64: "i64",
    float32: "f32",
    float64: "f64",
    complex64: "c64",
    complex128: "c128",
}
FROM_SHORT: dict[str, np.dtype] = {v: k for k, v in SHORT_NAMES.items()}

# Narrow numpy dtypes are widened to the nearest supported one; anything else is refused.
_WIDEN: dict[np.dtype, np.dtype] = {
    np.dtype(np.int8): int32,
    np.dtype(np.int16): int32,
    np.dtype(np.uint8): int32,
    np.dtype(np.uint16): int32,
    np.dtype(np.uint32): int64,
    np.dtype(np.float16): float32,
}


def canonical(dtype: Any) -> np.dtype:
    """Map a dtype-like to one of the supported dtypes, or raise a TypeError naming it. A
    non-native byte order (big-endian ``>f8`` on x86) maps to the native type of that kind."""
    d = np.dtype(dtype)
    if d.byteorder not in "=|":
        d = d.newbyteorder("=")
    if d in SHORT_NAMES:
        return d
    if d in _WIDEN:
        return _WIDEN[d]
    raise TypeError(
        f"fungraph does not support dtype {d}; supported dtypes are "
        + ", ".join(str(s) for s in SUPPORTED)
    )


def parse_dtype(name: str) -> np.dtype:
    """Accept a short name (``f32``) or a numpy name (``float32``)."""
    if name in FROM_SHORT:
        return FROM_SHORT[name]
    return canonical(name)


def is_float(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "f"


def is_complex(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "c"


def is_inexact(dtype: np.dtype) -> bool:
    """Float or complex: the dtypes that carry tangents."""
    return np.dtype(dtype).kind in "fc"


def complex_for(dtype: np.dtype) -> np.dtype:
    """The complex dtype with ``dtype``'s precision (float32 -> complex64, else complex128)."""
    return complex64 if np.dtype(dtype) in (float32, complex64) else complex128


def real_for(dtype: np.dtype) -> np.dtype:
    """The real dtype of a complex dtype's parts (complex64 -> float32); others unchanged."""
    d = np.dtype(dtype)
    return {complex64: float32, complex128: float64}.get(d, d)


def is_int(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind in "iu"


def is_bool(dtype: np.dtype) -> bool:
    return dtype == bool_


def result_type(*args: Any) -> np.dtype:
    """Promote like numpy 2: Python scalars are weak and never widen an array's dtype."""
    first = getattr(args[0], "dtype", None) if args else None
    if first is not None and first in SHORT_NAMES and all(
            getattr(a, "dtype", None) is not None and a.dtype == first for a in args):  # dtype(None) is f64
        return first
    keys: list[Any] = []
    for a in args:
        if isinstance(a, (bool, int, float, complex)) and not isinstance(a, np.generic):
            keys.append(a)
        else:
            keys.append(a.dtype if hasattr(a, "dtype") else np.asarray(a).dtype)
    if all(isinstance(k, (bool, int, float, complex)) for k in keys):
        return canonical(np.result_type(*[np.asarray(k).dtype for k in keys]))
    try:
        return canonical(np.result_type(*keys))
    except OverflowError as err:
        raise TypeError(f"cannot promote {keys}: {err}") from None


def float_dtype_for(dtype: np.dtype) -> np.dtype:
    """The inexact dtype numpy gives transcendental functions of ``dtype`` (int -> float64;
    float and complex dtypes are kept)."""
    return dtype if is_inexact(dtype) else float64


def default_float() -> np.dtype:
    """The default floating dtype of the current mode: float64, as JAX's with ``jax_enable_x64``
    (the one mode fungraph has)."""
    return float64
