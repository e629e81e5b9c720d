"""The op-record table: one row per public function, driving value, gradient, staging
(and later jit, vmap and backend) tests. A row names the fungraph function, its numpy
reference, how to draw its argument shapes, dtypes and value domains, and its derivative
status."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fungraph import dtypes, lax, nn
from fungraph import numpy as fnp
from fungraph.testing.strategies import shapes

F = (dtypes.float32, dtypes.float64)
FI = F + (dtypes.int32, dtypes.int64)
ALL = FI + (dtypes.bool_,)
INTS = (dtypes.int32, dtypes.int64)

Domain = tuple[float, float] | Callable[[tuple[tuple[int, ...], ...]], tuple[float, float]]


@dataclass(frozen=True)
class OpRecord:
    """How to test one function: ``fun(*args)`` must match ``ref(*args)``.

    ``arg_dtypes[i]`` is None for "the drawn dtype" or a fixed dtype (e.g. int64 indices);
    ``differentiable`` False means its outputs are integer or piecewise constant.
    """

    name: str
    fun: Callable[..., Any]
    ref: Callable[..., Any]
    shapes: st.SearchStrategy
    dtypes: tuple[np.dtype, ...] = F
    domains: tuple[Domain, ...] = ()
    arg_dtypes: tuple[np.dtype | None, ...] = ()
    differentiable: bool = True
    grad_order: int = 2
    tol32: float = 2e-5
    tol64: float = 1e-11
    tags: tuple[str, ...] = field(default=())

    def domain(self, i: int, shps: tuple[tuple[int, ...], ...]) -> tuple[float, float]:
        d = self.domains[i] if i < len(self.domains) else (-3.0, 3.0)
        return d(shps) if callable(d) else d

    def arg_dtype(self, i: int, drawn: np.dtype) -> np.dtype:
        fixed = self.arg_dtypes[i] if i < len(self.arg_dtypes) else None
        return drawn if fixed is None else fixed


def _one(min_dims: int = 0, max_dims: int = 3) -> st.SearchStrategy:
    return st.tuples(shapes(min_dims=min_dims, max_dims=max_dims))


def _bcast(n: int = 2) -> st.SearchStrategy:
    return hnp.mutually_broadcastable_shapes(num_shapes=n, min_dims=0, max_dims=3, max_side=4).map(
        lambda r: r.input_shapes)


def _same(n: int, min_dims: int = 0) -> st.SearchStrategy:
    return shapes(min_dims=min_dims).map(lambda s: (s,) * n)


@st.composite
def _matmul_shapes(draw: Any) -> tuple:
    m, k, n = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    batch = draw(shapes(max_dims=2))
    lhs = draw(st.sampled_from([(k,), (m, k), batch + (m, k)]))
    rhs = draw(st.sampled_from([(k,), (k, n), batch[-1:] + (k, n)]))
    return lhs, rhs


@st.composite
def _dot_shapes(draw: Any) -> tuple:
    m, k, n = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return draw(st.sampled_from([((k,), (k,)), ((m, k), (k,)), ((m, k), (k, n)), ((k,), (k, n)),
                                 ((2, m, k), (3, k, n)), ((), (m, k))]))


@st.composite
def _take_shapes(draw: Any) -> tuple:
    x = draw(shapes(min_dims=1))
    return x, draw(shapes(max_dims=2))


@st.composite
def _update_shapes(draw: Any) -> tuple:
    x = draw(shapes(min_dims=1))
    return x, tuple(draw(st.integers(0, d)) for d in x), ()


def _dus_ref(x: np.ndarray, u: np.ndarray, i: Any) -> np.ndarray:
    """``lax.dynamic_update_slice`` along axis 0: a negative start counts from the end, then
    the start is clamped so the window fits."""
    out = x.copy()
    d, n = x.shape[0], u.shape[0]
    s = int(i) + d if int(i) < 0 else int(i)
    s = min(max(s, 0), d - n)
    out[(slice(s, s + n),) + tuple(slice(0, m) for m in u.shape[1:])] = u
    return out


def _at_set_ref(x: np.ndarray, v: np.ndarray, i: Any) -> np.ndarray:
    out = x.copy()
    out[int(i)] = v
    return out


@st.composite
def _take_along_shapes(draw: Any) -> tuple:
    x = draw(shapes(min_dims=1))
    idx = tuple(draw(st.integers(1, 4)) if i == len(x) - 1 else d for i, d in enumerate(x))
    return x, idx


@st.composite
def _pool_shapes(draw: Any) -> tuple:
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    return ((n, c, draw(st.integers(3, 6)), draw(st.integers(3, 6))),)


@st.composite
def _conv_shapes(draw: Any) -> tuple:
    n, c, o = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    h, w = draw(st.integers(3, 6)), draw(st.integers(3, 6))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    return (n, c, h, w), (o, c, kh, kw)


def _axis_size(i: int) -> Domain:
    return lambda shps: (-shps[0][-1] if shps[0] else 0, shps[0][-1] if shps[0] else 1)


def _flat_size(shps: tuple[tuple[int, ...], ...]) -> tuple[float, float]:
    n = int(np.prod(shps[0]))
    return (-n, n)


POS = (0.1, 3.0)
NONZERO_DIV = (0.5, 3.0)


def _unary(name: str, fun: Callable[..., Any], ref: Callable[..., Any], domain: Domain = (-3.0, 3.0),
           dts: tuple = FI, **kw: Any) -> OpRecord:
    return OpRecord(name, fun, ref, _one(), dts, (domain,), **kw)


def _binary(name: str, fun: Callable[..., Any], ref: Callable[..., Any], domains: tuple = (), dts: tuple = FI,
            **kw: Any) -> OpRecord:
    return OpRecord(name, fun, ref, _bcast(), dts, domains, **kw)


def _gelu_ref(x: np.ndarray, approximate: bool) -> np.ndarray:
    if approximate:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    erf = np.asarray(np.frompyfunc(math.erf, 1, 1)(x / math.sqrt(2))).astype(x.dtype)
    return (0.5 * x * (1 + erf)).astype(x.dtype)


def _lse_ref(x: np.ndarray, axis: Any) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    return (np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m).squeeze(axis=axis)


def _softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _pool_ref(x: np.ndarray, k: int, s: int, op: Callable[..., Any]) -> np.ndarray:
    n, c, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    out = np.empty((n, c, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = op(x[:, :, i * s:i * s + k, j * s:j * s + k], axis=(2, 3))
    return out


def _same_pads(n: int, k: int, s: int) -> tuple[int, int]:
    out = -(-n // s)
    total = max((out - 1) * s + k - n, 0)
    return total // 2, total - total // 2


def _same_pool_ref(x: np.ndarray, k: int, s: int, op: Callable[..., Any], fill: float) -> np.ndarray:
    ph, pw = _same_pads(x.shape[2], k, s), _same_pads(x.shape[3], k, s)
    padded = np.pad(x, ((0, 0), (0, 0), ph, pw), constant_values=fill)
    return _pool_ref(padded, k, s, op)


def _conv_same_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    ph, pw = (w.shape[2] - 1) // 2, (w.shape[3] - 1) // 2
    return _conv_ref(np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))), w, 1, 0)


def _conv_ref(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, o, max(oh, 0), max(ow, 0)), x.dtype)
    for i in range(max(oh, 0)):
        for j in range(max(ow, 0)):
            patch = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out


OP_RECORDS: tuple[OpRecord, ...] = (
    # unary elementwise
    _unary("sin", fnp.sin, np.sin),
    _unary("cos", fnp.cos, np.cos),
    _unary("tan", fnp.tan, np.tan, (-1.2, 1.2)),
    _unary("tanh", fnp.tanh, np.tanh),
    _unary("exp", fnp.exp, np.exp),
    _unary("log", fnp.log, np.log, POS),
    _unary("sqrt", fnp.sqrt, np.sqrt, POS),
    _unary("log1p", fnp.log1p, np.log1p, (-0.5, 3.0)),
    _unary("expm1", fnp.expm1, np.expm1),
    _unary("arctan", fnp.arctan, np.arctan),
    _unary("sinh", fnp.sinh, np.sinh),
    _unary("cosh", fnp.cosh, np.cosh),
    _unary("reciprocal", fnp.reciprocal, lambda x: 1.0 / x if x.dtype.kind == "f" else 1.0 / x, POS, dts=F),
    _unary("abs", fnp.abs, np.abs),
    _unary("negative", fnp.negative, np.negative),
    _unary("square", fnp.square, np.square),
    _unary("sign", fnp.sign, np.sign, differentiable=False),
    _unary("floor", fnp.floor, np.floor, dts=F, differentiable=False),
    _unary("logical_not", fnp.logical_not, np.logical_not, dts=ALL, differentiable=False),
    _unary("isfinite", fnp.isfinite, np.isfinite, dts=ALL, differentiable=False),
    # binary elementwise (broadcasting)
    _binary("add", fnp.add, np.add),
    _binary("subtract", fnp.subtract, np.subtract),
    _binary("multiply", fnp.multiply, np.multiply),
    _binary("divide", fnp.divide, np.divide, ((-3.0, 3.0), NONZERO_DIV)),
    _binary("power", fnp.power, np.power, (POS, (-2.0, 2.0)), dts=F),
    _binary("maximum", fnp.maximum, np.maximum),
    _binary("minimum", fnp.minimum, np.minimum),
    _binary("arctan2", fnp.arctan2, np.arctan2, ((-3.0, 3.0), NONZERO_DIV), dts=F),
    _binary("mod", fnp.mod, np.mod, ((-3.0, 3.0), NONZERO_DIV), dts=FI),
    _binary("floor_divide", fnp.floor_divide, np.floor_divide, ((-3.0, 3.0), NONZERO_DIV), differentiable=False),
    _binary("equal", fnp.equal, np.equal, dts=ALL, differentiable=False),
    _binary("not_equal", fnp.not_equal, np.not_equal, dts=ALL, differentiable=False),
    _binary("less", fnp.less, np.less, differentiable=False),
    _binary("less_equal", fnp.less_equal, np.less_equal, differentiable=False),
    _binary("greater", fnp.greater, np.greater, differentiable=False),
    _binary("greater_equal", fnp.greater_equal, np.greater_equal, differentiable=False),
    _binary("logical_and", fnp.logical_and, np.logical_and, dts=ALL, differentiable=False),
    _binary("logical_or", fnp.logical_or, np.logical_or, dts=ALL, differentiable=False),
    _binary("logical_xor", fnp.logical_xor, np.logical_xor, dts=ALL, differentiable=False),
    _binary("scalar_add", lambda x, y: x + 2.5, lambda x, y: x + 2.5, dts=F),
    _binary("scalar_rpow", lambda x, y: x ** 3, lambda x, y: x ** 3),
    OpRecord("where", lambda c, x, y: fnp.where(c > 0, x, y), lambda c, x, y: np.where(c > 0, x, y), _bcast(3), FI),
    _unary("clip", lambda x: fnp.clip(x, -1.0, 1.5), lambda x: np.clip(x, -1.0, 1.5), dts=F),
    # reductions
    OpRecord("sum", fnp.sum, np.sum, _one(), FI),
    OpRecord("sum_axis0", lambda x: fnp.sum(x, axis=0), lambda x: np.sum(x, axis=0), _one(1), FI),
    OpRecord("sum_keepdims", lambda x: fnp.sum(x, axis=-1, keepdims=True),
             lambda x: np.sum(x, axis=-1, keepdims=True), _one(1), FI),
    OpRecord("mean", lambda x: fnp.mean(x, axis=-1), lambda x: np.mean(x, axis=-1), _one(1), FI),
    OpRecord("max", lambda x: fnp.max(x, axis=0), lambda x: np.max(x, axis=0), _one(1), FI),
    OpRecord("min", fnp.min, np.min, _one(), FI),
    OpRecord("prod", lambda x: fnp.prod(x, axis=-1), lambda x: np.prod(x, axis=-1), _one(1), F,
             domains=((-2.0, 2.0),)),
    OpRecord("var", lambda x: fnp.var(x, axis=0), lambda x: np.var(x, axis=0), _one(1), F, tol32=1e-4),
    OpRecord("std", lambda x: fnp.std(x), lambda x: np.std(x), shapes(min_dims=1).filter(
        lambda s: int(np.prod(s)) > 1).map(lambda s: (s,)), F, tol32=1e-4),
    OpRecord("argmax", lambda x: fnp.argmax(x, axis=-1), lambda x: np.argmax(x, axis=-1), _one(1), FI,
             differentiable=False),
    OpRecord("argmin", fnp.argmin, np.argmin, _one(1), FI, differentiable=False),
    # shapes and indexing
    OpRecord("reshape", lambda x: fnp.reshape(x, (-1,)), lambda x: np.reshape(x, (-1,)), _one(), FI),
    OpRecord("transpose", fnp.transpose, np.transpose, _one(), FI),
    OpRecord("swapaxes", lambda x: fnp.swapaxes(x, 0, -1), lambda x: np.swapaxes(x, 0, -1), _one(1), FI),
    OpRecord("expand_dims", lambda x: fnp.expand_dims(x, 0), lambda x: np.expand_dims(x, 0), _one(), FI),
    OpRecord("squeeze", lambda x: fnp.squeeze(fnp.expand_dims(x, -1), -1), lambda x: x, _one(), FI),
    OpRecord("broadcast_to", lambda x: fnp.broadcast_to(x, (2,) + x.shape),
             lambda x: np.broadcast_to(x, (2,) + x.shape), _one(), FI),
    OpRecord("concatenate", lambda x, y: fnp.concatenate([x, y], axis=-1),
             lambda x, y: np.concatenate([x, y], axis=-1), _same(2, min_dims=1), FI),
    OpRecord("stack", lambda x, y: fnp.stack([x, y], axis=0), lambda x, y: np.stack([x, y], axis=0), _same(2), FI),
    OpRecord("getitem_basic", lambda x: x[..., ::-2, None], lambda x: x[..., ::-2, None], _one(1), FI),
    OpRecord("getitem_int", lambda x: x[-1, 1:], lambda x: x[-1, 1:], _one(2), FI),
    OpRecord("getitem_array", lambda x, i: x[i], lambda x, i: x[np.clip(i, -x.shape[0], x.shape[0] - 1)],
             _take_shapes(), FI, ((-3.0, 3.0), lambda s: (-s[0][0], s[0][0])), (None, dtypes.int64)),
    OpRecord("take", lambda x, i: fnp.take(x, i), lambda x, i: np.take(x, i), _take_shapes(), FI,
             ((-3.0, 3.0), _flat_size), (None, dtypes.int64)),
    OpRecord("dynamic_update_slice", lambda x, u, i: lax.dynamic_update_slice(x, u, (i,) + (0,) * (x.ndim - 1)),
             _dus_ref, _update_shapes(), FI, ((-3.0, 3.0), (-3.0, 3.0), lambda s: (-s[0][0] - 2, s[0][0] + 2)),
             (None, None, dtypes.int64)),
    OpRecord("at_set_traced", lambda x, v, i: fnp.at(x)[i].set(v), _at_set_ref,
             _one(1).map(lambda s: (s[0], s[0][1:], ())), FI,
             ((-3.0, 3.0), (-3.0, 3.0), lambda s: (-s[0][0], s[0][0])), (None, None, dtypes.int64)),
    OpRecord("take_along_axis", lambda x, i: fnp.take_along_axis(x, i, axis=-1),
             lambda x, i: np.take_along_axis(x, i, axis=-1), _take_along_shapes(), FI,
             ((-3.0, 3.0), lambda s: (0, s[0][-1])), (None, dtypes.int64)),
    # contractions
    OpRecord("dot", fnp.dot, np.dot, _dot_shapes(), FI, tol32=1e-4),
    OpRecord("matmul", fnp.matmul, np.matmul, _matmul_shapes(), FI, tol32=1e-4),
    OpRecord("outer", fnp.outer, np.outer, _one(1, 2).map(lambda s: (s[0], s[0][::-1])), FI),
    OpRecord("einsum", lambda a, b: fnp.einsum("ij,jk->ki", a, b), lambda a, b: np.einsum("ij,jk->ki", a, b),
             _matmul_shapes().filter(lambda s: len(s[0]) == 2 and len(s[1]) == 2), FI, tol32=1e-4),
    # nn
    _unary("relu", nn.relu, lambda x: np.maximum(x, 0), dts=F),
    _unary("sigmoid", nn.sigmoid, lambda x: 1 / (1 + np.exp(-x)), dts=F),
    _unary("gelu_tanh", nn.gelu, lambda x: _gelu_ref(x, True), dts=F, tol32=1e-4),
    _unary("gelu_erf", lambda x: nn.gelu(x, approximate=False), lambda x: _gelu_ref(x, False), dts=F, tol32=1e-4),
    OpRecord("softmax", nn.softmax, _softmax_ref, _one(1), F),
    OpRecord("log_softmax", nn.log_softmax, lambda x: np.log(_softmax_ref(x)), _one(1), F, tol32=1e-4),
    OpRecord("logsumexp", lambda x: nn.logsumexp(x, axis=-1), lambda x: _lse_ref(x, -1), _one(1), F, tol32=1e-4),
    OpRecord("max_pool", lambda x: nn.max_pool(x, (2, 2), (1, 1)), lambda x: _pool_ref(x, 2, 1, np.max),
             _pool_shapes(), F),
    OpRecord("avg_pool", lambda x: nn.avg_pool(x, (2, 2), (2, 2)), lambda x: _pool_ref(x, 2, 2, np.mean),
             _pool_shapes(), F, tol32=1e-4),
    OpRecord("max_pool_same", lambda x: nn.max_pool(x, (3, 3), (2, 2), "SAME"),
             lambda x: _same_pool_ref(x, 3, 2, np.max, -np.inf), _pool_shapes(), F),
    OpRecord("avg_pool_same", lambda x: nn.avg_pool(x, (2, 2), (1, 1), "SAME"),
             lambda x: _same_pool_ref(x, 2, 1, np.mean, 0.0), _pool_shapes(), F, tol32=1e-4),
    OpRecord("conv_same", lambda x, w: lax.conv(x, w, (1, 1), "SAME"), _conv_same_ref, _conv_shapes().filter(
        lambda s: s[1][2] % 2 == 1 and s[1][3] % 2 == 1), F, tol32=1e-4),
    OpRecord("conv_valid", lambda x, w: lax.conv(x, w, (1, 1), "VALID"), lambda x, w: _conv_ref(x, w, 1, 0),
             _conv_shapes(), F, tol32=1e-4),
    OpRecord("conv_strided_pad", lambda x, w: lax.conv(x, w, (2, 2), [(1, 1), (1, 1)]),
             lambda x, w: _conv_ref(x, w, 2, 1), _conv_shapes(), F, tol32=1e-4),
)
