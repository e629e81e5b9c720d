"""dot, matmul, einsum, outer and tensordot, all lowered to ``dot_general``."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError
from fungraph.numpy._util import asarray, promote
from fungraph.primitives import elementwise as ew
from fungraph.primitives import reductions as red
from fungraph.primitives import shape as sh
from fungraph.primitives.linalg import dot_general


def _pair(a: Any, b: Any) -> tuple[Any, Any]:
    x, y = promote(a, b)
    return asarray(x), asarray(y)


def dot(a: Any, b: Any) -> Any:
    x, y = _pair(a, b)
    if x.ndim == 0 or y.ndim == 0:
        return ew.mul(x, y)
    yc = 0 if y.ndim == 1 else y.ndim - 2
    if x.shape[-1] != y.shape[yc]:
        raise ShapeError(f"dot: shapes {x.shape} and {y.shape} not aligned: {x.shape[-1]} (dim {x.ndim - 1}) "
                         f"!= {y.shape[yc]} (dim {yc})")
    out = dot_general(x, y, (((x.ndim - 1,), (yc,)), ((), ())))
    return out


def matmul(a: Any, b: Any) -> Any:
    x, y = _pair(a, b)
    if x.ndim == 2 and y.ndim == 2 and x.shape[1] == y.shape[0]:
        return dot_general(x, y, (((1,), (0,)), ((), ())))
    if x.ndim == 0 or y.ndim == 0:
        raise ShapeError(f"matmul: input operand does not have enough dimensions (shapes {x.shape} and {y.shape})")
    x2 = sh.reshape(x, (1,) + x.shape) if x.ndim == 1 else x
    y2 = sh.reshape(y, y.shape + (1,)) if y.ndim == 1 else y
    if x2.shape[-1] != y2.shape[-2]:
        raise ShapeError(f"matmul: mismatch in the contracted dimension: {x.shape} @ {y.shape} "
                         f"({x2.shape[-1]} != {y2.shape[-2]})")
    try:
        batch = tuple(np.broadcast_shapes(x2.shape[:-2], y2.shape[:-2]))
    except ValueError:
        raise ShapeError(f"matmul: batch dimensions of {x.shape} and {y.shape} do not broadcast") from None
    x3 = sh.broadcast_to(x2, batch + x2.shape[-2:])
    y3 = sh.broadcast_to(y2, batch + y2.shape[-2:])
    nb = len(batch)
    out = dot_general(x3, y3, (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))))
    shape = batch + ((x.shape[-2],) if x.ndim > 1 else ()) + ((y.shape[-1],) if y.ndim > 1 else ())
    return sh.reshape(out, shape)


def vdot(a: Any, b: Any) -> Any:
    """``sum(conj(a) * b)`` over the flattened arrays (numpy conjugates the first argument)."""
    x, y = _pair(a, b)
    if dtypes.is_complex(x.dtype):
        x = ew.conj(x)
    return dot(sh.reshape(x, (x.size,)), sh.reshape(y, (y.size,)))


def outer(a: Any, b: Any) -> Any:
    x, y = _pair(a, b)
    return ew.mul(sh.reshape(x, (x.size, 1)), sh.reshape(y, (1, y.size)))


def inner(a: Any, b: Any) -> Any:
    x, y = _pair(a, b)
    if x.ndim == 0 or y.ndim == 0:
        return ew.mul(x, y)
    return dot_general(x, y, (((x.ndim - 1,), (y.ndim - 1,)), ((), ())))


def tensordot(a: Any, b: Any, axes: Any = 2) -> Any:
    x, y = _pair(a, b)
    if isinstance(axes, int):
        xa = tuple(range(x.ndim - axes, x.ndim))
        ya = tuple(range(axes))
    else:
        xa, ya = axes
        xa = (xa,) if isinstance(xa, int) else tuple(xa)
        ya = (ya,) if isinstance(ya, int) else tuple(ya)
    xa = tuple(a % x.ndim for a in xa)
    ya = tuple(a % y.ndim for a in ya)
    return dot_general(x, y, ((xa, ya), ((), ())))


def _parse_einsum(subscripts: str, n: int) -> tuple[list[str], str]:
    subscripts = subscripts.replace(" ", "")
    if "." in subscripts:
        raise NotImplementedError("einsum: ellipsis ('...') subscripts are not supported yet")
    if "->" in subscripts:
        lhs, out = subscripts.split("->")
    else:
        lhs = subscripts
        letters = lhs.replace(",", "")
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    ins = lhs.split(",")
    if len(ins) != n:
        raise ValueError(f"einsum: {len(ins)} operand subscripts for {n} operands")
    return ins, out


def _reduce_own(x: Any, spec: str, keep: set[str]) -> tuple[Any, str]:
    """Sum out indices that only this operand has and nobody needs later."""
    if len(set(spec)) != len(spec):
        raise NotImplementedError(f"einsum: repeated index within one operand ('{spec}') is not supported yet")
    axes = tuple(i for i, c in enumerate(spec) if c not in keep)
    return red.reduce_sum(x, axes), "".join(c for c in spec if c in keep)


def einsum(subscripts: str, *operands: Any) -> Any:
    ins, out = _parse_einsum(subscripts, len(operands))
    xs = [asarray(x) for x in promote(*operands)]
    for spec, x in zip(ins, xs):
        if len(spec) != x.ndim:
            raise ShapeError(f"einsum: subscripts '{spec}' do not match operand of shape {x.shape}")
    sizes: dict[str, int] = {}
    for spec, x in zip(ins, xs):
        for c, d in zip(spec, x.shape):
            if sizes.setdefault(c, d) != d:
                raise ShapeError(f"einsum: index '{c}' has sizes {sizes[c]} and {d}")
    acc, acc_spec = xs[0], ins[0]
    later = set(out).union(*ins[1:]) if len(ins) > 1 else set(out)
    acc, acc_spec = _reduce_own(acc, acc_spec, later)
    for k in range(1, len(xs)):
        rest = set(out).union(*ins[k + 1:])
        y, y_spec = _reduce_own(xs[k], ins[k], rest | set(acc_spec))
        acc, acc_spec = _contract(acc, acc_spec, y, y_spec, rest)
    missing = [c for c in out if c not in acc_spec]
    if missing:
        raise ValueError(f"einsum: output index '{missing[0]}' does not appear in any input")
    return sh.transpose(acc, tuple(acc_spec.index(c) for c in out))


def _contract(x: Any, xs: str, y: Any, ys: str, needed: set[str]) -> tuple[Any, str]:
    batch = [c for c in xs if c in ys and c in needed]
    contract = [c for c in xs if c in ys and c not in needed]
    dims = ((tuple(xs.index(c) for c in contract), tuple(ys.index(c) for c in contract)),
            (tuple(xs.index(c) for c in batch), tuple(ys.index(c) for c in batch)))
    out = dot_general(x, y, dims)
    spec = "".join(batch) + "".join(c for c in xs if c not in ys) + "".join(c for c in ys if c not in xs)
    return out, spec


