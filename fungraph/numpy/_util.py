"""Argument handling of the numpy API (weak scalars, conversion and promotion live in
``primitives.operands``, shared with ``lax``), and the small helpers of the functions composed
of the public ones."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph._config import RANK_PROMOTION
from fungraph.core import ShapeError, Tracer
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


def promote_args(name: str, *args: Any, to_inexact: bool = False, to_numeric: bool = False) -> list[Any]:
    """The operands of the ufunc ``name`` promoted to one dtype (:func:`promote`), after
    ``jax_numpy_rank_promotion``'s check of their ranks, as JAX's ``promote_args``."""
    if RANK_PROMOTION.mode != "allow":
        _check_ranks(name, [np.shape(a) if not isinstance(a, Tracer) else a.shape for a in args])
    return promote(*args, to_inexact=to_inexact, to_numeric=to_numeric)


def _check_ranks(name: str, shapes: list[tuple[int, ...]]) -> None:
    """"warn" or "raise" where operands of different non-zero ranks would broadcast."""
    if len({len(s) for s in shapes if s}) < 2:
        return
    listed = " ".join(str(tuple(s)) for s in shapes)
    more = "For more information, see https://docs.jax.dev/en/latest/rank_promotion_warning.html."
    if RANK_PROMOTION.mode == "raise":
        raise ShapeError(f"Operands could not be broadcast together for {name} on shapes {listed} and with the "
                         f"config option jax_numpy_rank_promotion='raise'. {more}")
    warnings.warn(f"Following NumPy automatic rank promotion for {name} on shapes {listed}. Set the "
                  f"jax_numpy_rank_promotion config option to 'allow' to disable this warning; {more.lower()}",
                  stacklevel=3)


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
    a, b = promote_args(name, x1, x2)
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
