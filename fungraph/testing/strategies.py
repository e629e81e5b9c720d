"""Hypothesis strategies: shapes, arrays, and random well-typed programs (graphs)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from fungraph import dtypes
from fungraph.ir import Graph


def shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 1, max_side: int = 4) -> st.SearchStrategy:
    """Array shapes with ``min_dims..max_dims`` axes of ``min_side..max_side`` each."""
    return st.lists(st.integers(min_side, max_side), min_size=min_dims, max_size=max_dims).map(tuple)


def random_array(rng: np.random.Generator, shape: Sequence[int], dtype: Any,
                 low: float = -3.0, high: float = 3.0) -> np.ndarray:
    """A seeded array in ``[low, high)``: uniform floats, integers, or fair booleans; complex
    arrays have both parts in ``[low, high)``."""
    dtype = dtypes.canonicalize(dtype)
    if dtypes.is_complex(dtype):
        parts = rng.uniform(low, high, size=(2, *shape))
        return (parts[0] + 1j * parts[1]).astype(dtype)
    if dtype == dtypes.bool_:
        return rng.random(shape) < 0.5
    if dtypes.is_int(dtype):
        return rng.integers(int(np.ceil(low)), int(np.ceil(high)), size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


def arrays(dtype: Any, shape: Sequence[int] | st.SearchStrategy | None = None,
           low: float = -3.0, high: float = 3.0) -> st.SearchStrategy:
    """Arrays of ``dtype`` with values in ``[low, high)`` (hypothesis picks edge values too);
    complex arrays have both parts in ``[low, high)``."""
    from hypothesis.extra import numpy as hnp

    dtype = dtypes.canonicalize(dtype)
    shape_st = shapes() if shape is None else (shape if isinstance(shape, st.SearchStrategy) else st.just(tuple(shape)))
    if dtype == dtypes.bool_:
        elements = st.booleans()
    elif dtypes.is_int(dtype):
        elements = st.integers(int(np.ceil(low)), int(np.ceil(high)) - 1)
    else:
        width = 32 if dtypes.real_for(dtype) == dtypes.float32 else 64
        if width == 32:
            low, high = _inside_f32(low, 1), _inside_f32(high, -1)
        elements = st.floats(low, high, allow_nan=False, allow_infinity=False, width=width, exclude_max=True)
        if dtypes.is_complex(dtype):
            elements = st.builds(complex, elements, elements)
    return hnp.arrays(dtype, shape_st, elements=elements)


def _inside_f32(x: float, direction: int) -> float:
    """The float32 nearest ``x`` that is not outside the interval (hypothesis needs exact bounds)."""
    f = np.float32(x)
    if (direction > 0 and float(f) < x) or (direction < 0 and float(f) > x):
        f = np.nextafter(f, np.float32(direction * np.inf))
    return float(f)


@dataclass(frozen=True)
class Program:
    """A random program: the Python function, its staged graph and arguments to run it on."""

    fun: Callable[..., Any]
    graph: Graph
    args: tuple[np.ndarray, ...]
    description: str

    def __repr__(self) -> str:
        return f"Program({self.description})"


_UNARY = ("sin", "cos", "tanh", "neg", "abs", "square", "logistic", "exp_small")
_BINARY = ("add", "sub", "mul", "max", "min", "where_gt", "div_safe")
_OTHER = ("sum_keep", "mean_keep", "max_keep", "transpose", "matmul", "reshape_flat", "slice_rev", "broadcast")
#: Steps holding sub-graphs (``cond``, ``fori_loop``, a ``while_loop`` with a data-dependent trip
#: count, ``scan``) and index maps beyond slices (gather, concatenate, pad, cumulative sum); each
#: returns its first operand's shape, or the broadcast of both (``cond``). Predicates compare
#: maxima, which every backend computes exactly, far from rounding's reach. ``fori_update``
#: writes row ``i + 1`` of its carry from row ``i`` (``x.at[i + 1].set``, in place on the CPU;
#: the last write falls outside the carry and is dropped). ``index_traced`` reads and adds to
#: the slice at a traced scalar index along an axis (``a.at[:, i].add(tanh(a[:, i]))``, with
#: ``i`` 0 or the last index by a predicate), so gathers and scatters by a computed index,
#: and their gradients, stay covered.
_CONTROL = ("cond", "fori", "while", "scan", "cumsum", "take_perm", "concat_slice", "pad_slice", "fori_update",
            "index_traced")


def _apply(op: str, xs: list[Any], rng_vals: dict[str, Any]) -> Any:
    from fungraph import nn
    from fungraph import numpy as fnp

    a = xs[0]
    if op == "sin":
        return fnp.sin(a)
    if op == "cos":
        return fnp.cos(a)
    if op == "tanh":
        return fnp.tanh(a)
    if op == "neg":
        return -a
    if op == "abs":
        return fnp.abs(a)
    if op == "square":
        return a * a
    if op == "logistic":
        return nn.sigmoid(a)
    if op == "exp_small":
        return fnp.exp(fnp.tanh(a))
    b = xs[1] if len(xs) > 1 else None
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "max":
        return fnp.maximum(a, b)
    if op == "min":
        return fnp.minimum(a, b)
    if op == "where_gt":
        return fnp.where(a > b, a, b * 0.5)
    if op == "div_safe":
        return a / (1.0 + b * b)
    axis = rng_vals.get("axis", 0)
    if op == "sum_keep":
        return fnp.sum(a, axis=axis, keepdims=True)
    if op == "mean_keep":
        return fnp.mean(a, axis=axis, keepdims=True)
    if op == "max_keep":
        return fnp.max(a, axis=axis, keepdims=True)
    if op == "transpose":
        return a.T
    if op == "matmul":
        return a @ fnp.swapaxes(b, -1, -2)
    if op == "reshape_flat":
        return fnp.reshape(fnp.reshape(a, (-1,)), a.shape)
    if op == "slice_rev":
        return a[..., ::-1]
    if op == "broadcast":
        return fnp.broadcast_to(a, (2,) + a.shape)[0]
    return _apply_control(op, a, b, rng_vals)


def _apply_control(op: str, a: Any, b: Any, extra: dict[str, Any]) -> Any:
    from fungraph import lax
    from fungraph import numpy as fnp

    if op == "cond":
        return lax.cond(fnp.max(a) > 0.5, lambda u, v: fnp.tanh(u) + v, lambda u, v: u * v - 1.0, a, b)
    if op == "fori":
        return lax.fori_loop(0, 3, lambda i, c: fnp.tanh(c * 0.5 + fnp.sum(b) * 0.1) + i.astype(c.dtype) * 0.25, a)
    if op == "while":
        def body(c: Any) -> Any:
            return c[0] + 1, c[1] * 0.5 + fnp.sin(c[1]) * 0.25

        return lax.while_loop(lambda c: (c[0] < 4) & (fnp.max(fnp.abs(c[1])) > 0.3), body, (0, a))[1]
    if op == "scan":
        def step(c: Any, x: Any) -> Any:
            return c * 0.5 + x, fnp.sin(c) + x
        return lax.scan(step, fnp.zeros_like(a[0]), a, reverse=extra.get("reverse", False))[1]
    if op == "fori_update":
        return lax.fori_loop(0, a.shape[0], lambda i, c: c.at[i + 1].set(fnp.tanh(c[i]) * 0.5 + c[i + 1] * 0.25), a)
    axis = extra.get("axis", 0)
    if op == "cumsum":
        return fnp.cumsum(a, axis=axis)
    if op == "take_perm":
        return fnp.take(a, np.asarray(extra["perm"]), axis=axis)
    if op == "concat_slice":
        joined = fnp.concatenate([a, a * 2.0], axis=axis)
        return joined[(slice(None),) * axis + (slice(1, a.shape[axis] + 1),)]
    if op == "pad_slice":
        return fnp.pad(a, 1)[tuple(slice(1, -1) for _ in a.shape)] * 0.5
    if op == "index_traced":
        i = (fnp.max(a) > 0.5).astype(np.int32) * (a.shape[axis] - 1)
        at = (slice(None),) * axis + (i,)
        return fnp.asarray(a).at[at].add(fnp.tanh(a[at]))
    raise ValueError(op)


@st.composite
def programs(draw: Any, max_eqns: int = 10, dtype_choices: Sequence[Any] = (dtypes.float32, dtypes.float64),
             control_flow: bool = True, control_ops: Sequence[str] = _CONTROL) -> Program:
    """A random well-typed program over elementwise, reduction, shape and matmul operations,
    and (``control_flow``) ``cond``, loops, ``scan`` and gathers (``control_ops``, a subset of
    ``_CONTROL``: a test may narrow them to the steps it is about).

    Values keep one rank (the base shape's) so that any two can be combined by broadcasting.
    """
    from fungraph.api import make_graph

    dtype = draw(st.sampled_from(list(dtype_choices)))
    base = draw(shapes(min_dims=1, max_dims=3, max_side=4))
    n_in = draw(st.integers(1, 3))
    in_shapes = [tuple(d if draw(st.booleans()) else 1 for d in base) if i else base for i in range(n_in)]
    seed = draw(st.integers(0, 2**31 - 1))
    n_ops = draw(st.integers(1, max_eqns))
    steps: list[tuple[str, tuple[int, ...], dict[str, Any]]] = []
    value_shapes = list(in_shapes)
    for _ in range(n_ops):
        kind = draw(st.sampled_from(("unary", "binary", "other", "control") if control_flow
                                    else ("unary", "binary", "other")))
        i = draw(st.integers(0, len(value_shapes) - 1))
        si = value_shapes[i]
        if kind == "unary":
            op = draw(st.sampled_from(_UNARY))
            steps.append((op, (i,), {}))
            value_shapes.append(si)
            continue
        j = draw(st.integers(0, len(value_shapes) - 1))
        sj = value_shapes[j]
        if kind == "binary":
            op = draw(st.sampled_from(_BINARY))
            steps.append((op, (i, j), {}))
            value_shapes.append(tuple(np.broadcast_shapes(si, sj)))
            continue
        if kind == "control":
            op = draw(st.sampled_from(list(control_ops)))
            extra: dict[str, Any] = {"axis": draw(st.integers(0, len(si) - 1))}
            if op == "take_perm":
                extra["perm"] = tuple(draw(st.permutations(range(si[extra["axis"]]))))
            if op == "scan":
                extra["reverse"] = draw(st.booleans())
            steps.append((op, (i, j), extra))
            value_shapes.append(tuple(np.broadcast_shapes(si, sj)) if op == "cond" else si)
            continue
        op = draw(st.sampled_from(_OTHER))
        if op in ("sum_keep", "mean_keep", "max_keep"):
            axis = draw(st.integers(0, len(si) - 1))
            steps.append((op, (i,), {"axis": axis}))
            value_shapes.append(tuple(1 if k == axis else d for k, d in enumerate(si)))
        elif op == "transpose" and len(set(si)) == 1:
            steps.append((op, (i,), {}))
            value_shapes.append(si[::-1])
        elif op == "matmul" and si == sj and len(si) >= 2 and si[-1] == si[-2]:
            steps.append((op, (i, j), {}))
            value_shapes.append(si)
        elif op in ("reshape_flat", "slice_rev", "broadcast"):
            steps.append((op, (i,), {}))
            value_shapes.append(si)
        else:
            steps.append(("tanh", (i,), {}))
            value_shapes.append(si)
    n_out = draw(st.integers(1, min(3, len(steps))))
    outs = tuple(range(len(value_shapes) - n_out, len(value_shapes)))

    def fun(*xs: Any) -> tuple[Any, ...]:
        vals = list(xs)
        for op, idx, extra in steps:
            vals.append(_apply(op, [vals[k] for k in idx], extra))
        return tuple(vals[k] for k in outs)

    rng = np.random.default_rng(seed)
    args = tuple(random_array(rng, s, dtype) for s in in_shapes)
    graph = make_graph(fun)(*args)
    desc = f"{dtypes.SHORT_NAMES[dtype]} inputs {in_shapes}; " + "; ".join(f"{op}{idx}" for op, idx, _ in steps)
    return Program(fun, graph, args, desc)
