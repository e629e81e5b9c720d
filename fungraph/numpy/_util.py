"""Argument handling of the numpy API (weak scalars, conversion and promotion live in
``primitives.operands``, shared with ``lax``), and the small helpers of the functions composed
of the public ones."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Tracer
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh
from fungraph.primitives.operands import (  # noqa: F401 - for the numpy modules
    asarray,
    aval,
    cast,
    is_weak,
    normalize_axes,
    promote,
    take_static,
)

# --- helpers of the functions composed of the public ones -----------------------------------------


def namespace() -> Any:
    import fungraph.numpy as fnp

    return fnp


def is_concrete(x: Any) -> bool:
    return not isinstance(x, Tracer)


def int_array(x: Any, name: str) -> Any:
    a = asarray(x)
    if not (dtypes.is_int(a.dtype) or a.dtype == dtypes.bool_):
        raise TypeError(f"{name}: needs integer operands, got {a.dtype}")
    return a


def int_pair(x1: Any, x2: Any, name: str) -> tuple[Any, Any]:
    """Both integer operands broadcast to their promoted dtype (a Python int is weak, NEP 50:
    ``int32_array >> 1`` stays int32)."""
    int_array(x1, name), int_array(x2, name)
    a, b = promote(x1, x2)
    return tuple(namespace().broadcast_arrays(asarray(a), asarray(b)))


def real_inexact(name: str, *xs: Any) -> list[Any]:
    out = promote(*xs, to_inexact=True)
    if dtypes.is_complex(out[0].dtype):
        raise TypeError(f"{name}: complex operands are not supported, got {out[0].dtype}")
    return [asarray(x) for x in out]


def flat_or_axis(a: Any, axis: int | None, name: str) -> tuple[Any, int]:
    x = asarray(a)
    if axis is None:
        return sh.reshape(x, (x.size,)), 0
    (ax,) = normalize_axes(axis, x.ndim, name)
    return x, ax


def nan_to(x: Any, value: float) -> Any:
    if not dtypes.is_inexact(x.dtype):
        return x
    return ew.select(ew.ne_p.bind(x, x), np.asarray(value, x.dtype), x)
