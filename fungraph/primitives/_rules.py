"""Small helpers shared by the rule tables: undefined primals, broadcasting, aval checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError
from fungraph.ir import ShapedArray, aval_of


@dataclass(frozen=True)
class UndefinedPrimal:
    """A linear input whose cotangent a transpose rule must produce."""

    aval: ShapedArray


def is_undefined(x: Any) -> bool:
    return isinstance(x, UndefinedPrimal)


def aval(x: Any) -> ShapedArray:
    return x.aval if isinstance(x, UndefinedPrimal) else aval_of(x)


def lit(value: Any, dtype: np.dtype) -> np.ndarray:
    """A scalar constant of ``dtype`` (inlined as a literal when staged)."""
    return np.asarray(value, dtype=dtype)


def zeros(a: ShapedArray) -> Any:
    from fungraph.primitives.shape import broadcast_in_dim

    return broadcast_in_dim(lit(0, a.dtype), a.shape, ())


def instantiate(t: Any, primal_aval: ShapedArray) -> Any:
    return zeros(primal_aval) if t is None else t


def broadcast_shapes(name: str, *avals: ShapedArray) -> tuple[int, ...]:
    """numpy broadcasting of the operands' shapes, or an error naming all of them."""
    first = avals[0].shape
    if all(a.shape == first for a in avals):
        return first
    out = broadcast_shape_tuples(*(a.shape for a in avals))
    if out is None:
        raise ShapeError(f"{name}: incompatible shapes for broadcasting: {', '.join(str(a) for a in avals)}")
    return out


def broadcast_shape_tuples(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """numpy's broadcast of ``shapes``, or None where they are incompatible; of any rank
    (``np.broadcast_shapes`` stops at 32 dimensions)."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(rank):
        sizes = {s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def require_same_dtype(name: str, *avals: ShapedArray) -> np.dtype:
    dts = {a.dtype for a in avals}
    if len(dts) != 1:
        raise ShapeError(f"{name}: operands must have equal dtypes, got {', '.join(str(a) for a in avals)}")
    return avals[0].dtype


def require_float(name: str, a: ShapedArray) -> None:
    if not dtypes.is_float(a.dtype):
        raise ShapeError(f"{name} requires a floating-point operand, got {a}")


def normalize_axis(axis: int, ndim: int, name: str) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise ShapeError(f"{name}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % max(ndim, 1)


def unbroadcast(ct: Any, target: ShapedArray) -> Any:
    """Sum a cotangent of a broadcast result back down to ``target``'s shape."""
    from fungraph.primitives.reductions import reduce_sum
    from fungraph.primitives.shape import reshape

    shape = aval_of(ct).shape
    if shape == target.shape:
        return ct
    lead = len(shape) - len(target.shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, d in enumerate(target.shape) if d == 1 and shape[i + lead] != 1
    )
    out = reduce_sum(ct, axes) if axes else ct
    return reshape(out, target.shape) if aval_of(out).shape != target.shape else out


def linear_jvp(prim: Any, primals: tuple, tangents: tuple, **params: Any) -> tuple:
    """The JVP of a primitive linear in all its inputs: itself, applied to the tangents."""
    out = prim.bind(*primals, **params)
    ts = [instantiate(t, aval(p)) for p, t in zip(primals, tangents)]
    return out, prim.bind(*ts, **params)
