"""Helpers for batching rules: move, add or drop the batch axis of an operand.

A batch dimension ``None`` means the operand is the same for every example.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fungraph.ir import ShapedArray
from fungraph.primitives._rules import aval


def to_front(x: Any, bdim: int | None) -> Any:
    """``x`` with its batch axis first (unchanged when it has none)."""
    # the shape family's own rules use these helpers (one knot in primitives/, docs/architecture.md)
    from fungraph.primitives.shape import transpose

    if bdim is None or bdim == 0:
        return x
    nd = aval(x).ndim
    perm = (bdim,) + tuple(i for i in range(nd) if i != bdim)
    return transpose(x, perm)


def broadcast_batch(x: Any, bdim: int | None, size: int) -> Any:
    """``x`` with its batch axis first, materialising one for an unbatched operand."""
    # the shape family's own rules use these helpers (one knot in primitives/, docs/architecture.md)
    from fungraph.primitives.shape import broadcast_in_dim

    if bdim is not None:
        return to_front(x, bdim)
    shape = aval(x).shape
    return broadcast_in_dim(x, (size,) + shape, tuple(range(1, len(shape) + 1)))


def example_aval(x: Any, bdim: int | None) -> ShapedArray:
    """The type of one example of ``x``: its aval without the batch axis."""
    a = aval(x)
    if bdim is None:
        return a
    return ShapedArray(a.shape[:bdim] + a.shape[bdim + 1:], a.dtype)


def batch_size(args: Sequence[Any], dims: Sequence[int | None]) -> int:
    for x, d in zip(args, dims):
        if d is not None:
            return aval(x).shape[d]
    raise ValueError("no batched operand")


def per_example(args: Sequence[Any], dims: Sequence[int | None],
                callback: Any) -> tuple[list[Any], int, Any]:
    """For a host callback under ``vmap``: the operands with their batch axis first (made
    where missing), the batch size, and a host function calling ``callback`` once per
    example, in order, that returns the results as a list."""
    size = batch_size(args, dims)
    stacked = [broadcast_batch(a, d, size) for a, d in zip(args, dims)]

    def each(*xs: Any) -> list[Any]:
        return [callback(*[x[i] for x in xs]) for i in range(size)]

    return stacked, size, each


def elementwise_batch(prim: Any) -> Any:
    """Batch a numpy-broadcasting primitive: batch axes first, unbatched operands right-aligned."""

    def rule(args: Sequence[Any], dims: Sequence[int | None], **params: Any) -> tuple[Any, Any]:
        # the shape family's own rules use these helpers (one knot in primitives/, docs/architecture.md)
        from fungraph.primitives.shape import reshape

        rank = max(aval(x).ndim - (d is not None) for x, d in zip(args, dims))
        moved = []
        for x, d in zip(args, dims):
            if d is None:
                moved.append(x)
                continue
            xf = to_front(x, d)
            shape = aval(xf).shape
            moved.append(reshape(xf, shape[:1] + (1,) * (rank - len(shape) + 1) + shape[1:]))
        out = prim.bind(*moved, **params)
        return (out, [0] * len(out)) if prim.multiple_results else (out, 0)

    return rule


def unary_params_batch(prim: Any, shift: Sequence[str] = ()) -> Any:
    """Batch a one-operand primitive whose axis parameters must skip the new leading axis."""

    def rule(args: Sequence[Any], dims: Sequence[int | None], **params: Any) -> tuple[Any, Any]:
        (x,), (d,) = args, dims
        xf = to_front(x, d)
        new = dict(params)
        for name in shift:
            v = params[name]
            new[name] = tuple(a + 1 for a in v) if isinstance(v, tuple) else v + 1
        return prim.bind(xf, **new), 0

    return rule
