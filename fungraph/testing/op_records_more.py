"""Op records for the wider numpy API (elementwise extras, array manipulation, cumulative and
sorting functions, statistics, ``numpy.linalg`` and the real ``numpy.fft`` helpers); same
format as :data:`fungraph.testing.op_records.OP_RECORDS`.

Tags: ``no_grad`` rows are only value-tested (their derivative is defined piecewise by NaN
masks); ``grad1`` rows check first derivatives only (second order is slow or ill-conditioned).
Matrix rows build well-conditioned operands inside ``fun`` (a shifted identity, spread-out
diagonals), so finite differences are trustworthy and eigen/singular values are distinct."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fungraph import numpy as fnp
from fungraph.testing.op_records import ALL, FI, INTS, F, OpRecord
from fungraph.testing.strategies import shapes

POS = (0.1, 3.0)
UNIT = (-0.9, 0.9)
SMALL = (-1.0, 1.0)
NONZERO = (0.3, 3.0)


def _one(min_dims: int = 0, max_dims: int = 3, min_side: int = 1) -> st.SearchStrategy:
    return st.tuples(shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side))


def _bcast(n: int = 2) -> st.SearchStrategy:
    return hnp.mutually_broadcastable_shapes(num_shapes=n, min_dims=0, max_dims=3, max_side=4).map(
        lambda r: r.input_shapes)


def _same(n: int, min_dims: int = 0, max_dims: int = 3) -> st.SearchStrategy:
    return shapes(min_dims=min_dims, max_dims=max_dims).map(lambda s: (s,) * n)


@st.composite
def _square(draw: Any, max_batch: int = 1, min_n: int = 1) -> tuple:
    n = draw(st.integers(min_n, 4))
    batch = draw(shapes(max_dims=max_batch, max_side=3))
    return (batch + (n, n),)


@st.composite
def _rect(draw: Any, tall: bool = False) -> tuple:
    m, n = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    if tall and m < n:
        m, n = n, m
    batch = draw(shapes(max_dims=1, max_side=3))
    return (batch + (m, n),)


@st.composite
def _solve_shapes(draw: Any) -> tuple:
    n, k = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    batch = draw(shapes(max_dims=1, max_side=3))
    return batch + (n, n), batch + (n, k)


@st.composite
def _vec_and_matrix(draw: Any) -> tuple:
    n = draw(st.integers(1, 4))
    return (n, n), (n,)


def _f_unary(name: str, fun: Callable[..., Any], ref: Callable[..., Any], domain: Any = (-3.0, 3.0),
             dts: tuple = FI, **kw: Any) -> OpRecord:
    return OpRecord(name, fun, ref, _one(), dts, (domain,), **kw)


def _f_binary(name: str, fun: Callable[..., Any], ref: Callable[..., Any], domains: tuple = (),
              dts: tuple = FI, **kw: Any) -> OpRecord:
    return OpRecord(name, fun, ref, _bcast(), dts, domains, **kw)


# --- helpers for matrix rows: well-conditioned operands, deterministic signs ---------------------


def _shift(a: Any, xp: Any, scale: float = 3.0) -> Any:
    n = a.shape[-1]
    return a + scale * xp.eye(n, dtype=a.dtype)


def _spread(a: Any, xp: Any) -> Any:
    """``a`` plus a rectangular diagonal 4, 8, 12, ...: singular/eigen values far apart."""
    m, n = a.shape[-2:]
    d = np.zeros((m, n), a.dtype)
    k = min(m, n)
    d[np.arange(k), np.arange(k)] = 4.0 * np.arange(1, k + 1)
    return a + d


def _sym(a: Any, xp: Any) -> Any:
    return _spread((a + xp.swapaxes(a, -1, -2)) / 2, xp)


def _spd(a: Any, xp: Any) -> Any:
    n = a.shape[-1]
    return xp.matmul(a, xp.swapaxes(a, -1, -2)) + n * xp.eye(n, dtype=a.dtype)


def _flat_cat(xp: Any, lead: int, *xs: Any) -> Any:
    """Concatenate outputs flattened past their first ``lead`` axes."""
    parts = [xp.reshape(x, x.shape[:lead] + (-1,)) for x in xs]
    return xp.concatenate(parts, axis=-1)


def _sign_fix(v: Any, xp: Any) -> Any:
    """Columns of v flipped so that their first-row entries are non-negative."""
    s = xp.sign(v[..., :1, :])
    return v * xp.where(s == 0, 1.0, s)


def _eigh_both(a: Any, xp: Any) -> Any:
    w, v = xp.linalg.eigh(_sym(a, xp))
    return _flat_cat(xp, a.ndim - 2, w, _sign_fix(v, xp))


def _svd_all(a: Any, xp: Any) -> Any:
    u, s, vt = xp.linalg.svd(_spread(a, xp), full_matrices=False)
    sg = xp.sign(u[..., :1, :])
    sg = xp.where(sg == 0, 1.0, sg)
    return _flat_cat(xp, a.ndim - 2, u * sg, s, vt * xp.swapaxes(sg, -1, -2))


def _qr_both(a: Any, xp: Any) -> Any:
    q, r = xp.linalg.qr(_spread(a, xp))
    return _flat_cat(xp, a.ndim - 2, q, r)


def _slogdet(a: Any, xp: Any) -> Any:
    sign, logdet = xp.linalg.slogdet(_shift(a, xp))
    return sign * logdet


def _split_mix(x: Any, xp: Any) -> Any:
    parts = xp.array_split(x, 3, axis=-1)
    return xp.concatenate([p * (i + 1) for i, p in enumerate(parts)], axis=-1)


def _meshgrid(x: Any, y: Any, xp: Any) -> Any:
    a, b = xp.meshgrid(x, y)
    return a * 2 + b


def _both(f: Callable[..., Any]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(fungraph version, numpy version) of a function written against a namespace ``xp``."""
    return (lambda *a: f(*a, fnp), lambda *a: f(*a, np))


def _rec(name: str, f: Callable[..., Any], shps: st.SearchStrategy, dts: tuple = F, **kw: Any) -> OpRecord:
    fun, ref = _both(f)
    return OpRecord(name, fun, ref, shps, dts, **kw)


def _parts(z: Any, xp: Any) -> Any:
    """A complex result as its real and imaginary parts stacked (real rows test it whole)."""
    return xp.stack([xp.real(z), xp.imag(z)])


def _inf_nan(x: Any, xp: Any) -> Any:
    return xp.where(x > 2, xp.inf, xp.where(x < -2, xp.nan, x))


def _nan_in(x: Any, xp: Any) -> Any:
    return xp.where(x > 1.5, xp.nan, x)


def _nan_rows(x: Any, xp: Any) -> Any:
    """NaNs injected everywhere but the first entry of each row, so no slice is all-NaN."""
    return xp.concatenate([x[..., :1], _nan_in(x[..., 1:], xp)], axis=-1)


MORE_RECORDS: tuple[OpRecord, ...] = (
    # --- elementwise --------------------------------------------------------------------------------
    _f_unary("arcsin", fnp.arcsin, np.arcsin, UNIT),
    _f_unary("arccos", fnp.arccos, np.arccos, UNIT),
    _f_unary("arcsinh", fnp.arcsinh, np.arcsinh),
    _f_unary("arccosh", fnp.arccosh, np.arccosh, (1.1, 4.0)),
    _f_unary("arctanh", fnp.arctanh, np.arctanh, UNIT),
    _f_unary("exp2", fnp.exp2, np.exp2),
    _f_unary("log2", fnp.log2, np.log2, POS),
    _f_unary("log10", fnp.log10, np.log10, POS),
    _f_unary("sinc", fnp.sinc, np.sinc, dts=F),
    _f_unary("cbrt", fnp.cbrt, np.cbrt, (0.2, 3.0)),
    _f_unary("cbrt_negative", lambda x: fnp.cbrt(-x), lambda x: np.cbrt(-x), (0.2, 3.0)),
    _f_unary("deg2rad", fnp.deg2rad, np.deg2rad),
    _f_unary("rad2deg", fnp.rad2deg, np.rad2deg),
    _f_unary("fabs", fnp.fabs, np.fabs, dts=F),
    _f_unary("positive", fnp.positive, np.positive),
    _f_unary("ceil", fnp.ceil, np.ceil, dts=F, differentiable=False),
    _f_unary("trunc", fnp.trunc, np.trunc, dts=F, differentiable=False),
    _f_unary("rint", fnp.rint, np.rint, dts=F, differentiable=False),
    _f_unary("round", fnp.round, np.round, dts=FI, differentiable=False),
    _f_unary("round_decimals", lambda x: fnp.round(x, 1), lambda x: np.round(x, 1), dts=F, differentiable=False),
    _f_unary("round_negative_decimals", lambda x: fnp.round(x * 30, -1), lambda x: np.round(x * 30, -1),
             dts=FI, differentiable=False),
    _f_unary("round_halves", lambda x: fnp.round(fnp.floor(x * 4) / 2), lambda x: np.round(np.floor(x * 4) / 2),
             dts=F, differentiable=False),
    _f_unary("signbit", fnp.signbit, np.signbit, dts=FI, differentiable=False),
    _f_unary("nan_to_num", lambda x: fnp.nan_to_num(fnp.log(x)), lambda x: np.nan_to_num(np.log(x)), (-1.0, 2.0),
             dts=F, tags=("no_grad",)),
    _f_unary("nan_to_num_values", lambda x: fnp.nan_to_num(_nan_in(x, fnp), nan=-7.0),
             lambda x: np.nan_to_num(_nan_in(x, np), nan=-7.0), dts=F),
    _f_unary("isneginf", lambda x: fnp.isneginf(fnp.log(x)), lambda x: np.isneginf(np.log(x)), (-1.0, 2.0),
             dts=F, differentiable=False),
    _f_binary("logaddexp", fnp.logaddexp, np.logaddexp),
    _f_binary("logaddexp2", fnp.logaddexp2, np.logaddexp2),
    _f_binary("hypot", fnp.hypot, np.hypot, (NONZERO, (-3.0, 3.0))),
    _f_binary("fmax", fnp.fmax, np.fmax),
    _f_binary("fmin", fnp.fmin, np.fmin),
    _f_binary("fmax_nan", lambda x, y: fnp.fmax(_nan_in(x, fnp), _nan_in(-y, fnp)),
              lambda x, y: np.fmax(_nan_in(x, np), _nan_in(-y, np)), dts=F, tags=("no_grad",)),
    _f_binary("fmin_nan", lambda x, y: fnp.fmin(_nan_in(x, fnp), _nan_in(-y, fnp)),
              lambda x, y: np.fmin(_nan_in(x, np), _nan_in(-y, np)), dts=F, tags=("no_grad",)),
    _f_binary("fmod", fnp.fmod, np.fmod, ((-3.0, 3.0), (0.5, 3.0)), tol32=1e-4),
    _f_binary("fmod_negative_divisor", lambda x, y: fnp.fmod(x, -y), lambda x, y: np.fmod(x, -y),
              ((-3.0, 3.0), (0.5, 3.0)), tol32=1e-4),
    _f_binary("copysign", fnp.copysign, np.copysign, (NONZERO, (-3.0, 3.0)), dts=F),
    _f_binary("heaviside", lambda x, y: fnp.heaviside(fnp.round(x), y), lambda x, y: np.heaviside(np.round(x), y),
              dts=F, tags=("no_grad",)),
    _f_binary("float_power", fnp.float_power, np.float_power, (POS, (-2.0, 2.0)), dts=F),
    _f_binary("ldexp", lambda x, y: fnp.ldexp(x, fnp.round(y).astype(np.int64)),
              lambda x, y: np.ldexp(x, np.round(y).astype(np.int64)), dts=F),
    _f_binary("isclose", lambda x, y: fnp.isclose(x, fnp.round(y * 4) / 4, atol=0.2),
              lambda x, y: np.isclose(x, np.round(y * 4) / 4, atol=0.2), dts=F, differentiable=False),
    _f_binary("allclose", lambda x, y: fnp.allclose(x, x + y * 1e-9), lambda x, y: np.allclose(x, x + y * 1e-9),
              dts=F, differentiable=False),
    OpRecord("array_equal", lambda x, y: fnp.array_equal(x, fnp.round(y)), lambda x, y: np.array_equal(
        x, np.round(y)), _same(2), F, differentiable=False),
    # --- flips, rolls, tiling, padding -------------------------------------------------------------
    OpRecord("flip", fnp.flip, np.flip, _one(), FI),
    OpRecord("flip_axis", lambda x: fnp.flip(x, -1), lambda x: np.flip(x, -1), _one(1), FI),
    OpRecord("fliplr", fnp.fliplr, np.fliplr, _one(2), FI),
    OpRecord("flipud", fnp.flipud, np.flipud, _one(1), FI),
    OpRecord("rot90", fnp.rot90, np.rot90, _one(2), FI),
    OpRecord("rot90_k3", lambda x: fnp.rot90(x, 3, (0, -1)), lambda x: np.rot90(x, 3, (0, -1)), _one(2), FI),
    OpRecord("rot90_k2", lambda x: fnp.rot90(x, 2), lambda x: np.rot90(x, 2), _one(2), FI),
    OpRecord("roll", lambda x: fnp.roll(x, 2, -1), lambda x: np.roll(x, 2, -1), _one(1), FI),
    OpRecord("roll_flat", lambda x: fnp.roll(x, -3), lambda x: np.roll(x, -3), _one(), FI),
    OpRecord("roll_axes", lambda x: fnp.roll(x, (1, -1), (0, 1)), lambda x: np.roll(x, (1, -1), (0, 1)),
             _one(2), FI),
    OpRecord("rollaxis", lambda x: fnp.rollaxis(x, -1), lambda x: np.rollaxis(x, -1), _one(1), FI),
    OpRecord("tile", lambda x: fnp.tile(x, (2, 1)), lambda x: np.tile(x, (2, 1)), _one(), FI),
    OpRecord("repeat", lambda x: fnp.repeat(x, 2, axis=0), lambda x: np.repeat(x, 2, axis=0), _one(1), FI),
    OpRecord("repeat_flat", lambda x: fnp.repeat(x, 3), lambda x: np.repeat(x, 3), _one(), FI),
    OpRecord("repeat_counts", lambda x: fnp.repeat(x, [2] + [0, 1, 3][:x.shape[-1] - 1], axis=-1),
             lambda x: np.repeat(x, [2] + [0, 1, 3][:x.shape[-1] - 1], axis=-1), _one(1), FI),
    OpRecord("pad", lambda x: fnp.pad(x, 1), lambda x: np.pad(x, 1), _one(), FI),
    OpRecord("pad_values", lambda x: fnp.pad(x, [(1, 2)] + [(0, 1)] * (x.ndim - 1), constant_values=((5, 6),)),
             lambda x: np.pad(x, [(1, 2)] + [(0, 1)] * (x.ndim - 1), constant_values=((5, 6),)), _one(1), FI),
    OpRecord("pad_edge", lambda x: fnp.pad(x, 2, mode="edge"), lambda x: np.pad(x, 2, mode="edge"), _one(1), FI),
    OpRecord("pad_reflect", lambda x: fnp.pad(x, (1, 2), mode="reflect"),
             lambda x: np.pad(x, (1, 2), mode="reflect"), _one(1), FI),
    OpRecord("pad_symmetric", lambda x: fnp.pad(x, (2, 1), mode="symmetric"),
             lambda x: np.pad(x, (2, 1), mode="symmetric"), _one(1), FI),
    OpRecord("pad_wrap", lambda x: fnp.pad(x, 1, mode="wrap"), lambda x: np.pad(x, 1, mode="wrap"), _one(1), FI),
    # --- dimensions, stacking, splitting -----------------------------------------------------------
    OpRecord("atleast_1d", fnp.atleast_1d, np.atleast_1d, _one(0, 2), FI),
    OpRecord("atleast_2d", fnp.atleast_2d, np.atleast_2d, _one(0, 3), FI),
    OpRecord("atleast_3d", fnp.atleast_3d, np.atleast_3d, _one(0, 3), FI),
    OpRecord("hstack", lambda x, y: fnp.hstack([x, y]), lambda x, y: np.hstack([x, y]), _same(2), FI),
    OpRecord("vstack", lambda x, y: fnp.vstack((x, y)), lambda x, y: np.vstack((x, y)), _same(2), FI),
    OpRecord("dstack", lambda x, y: fnp.dstack([x, y]), lambda x, y: np.dstack([x, y]), _same(2), FI),
    OpRecord("column_stack", lambda x, y: fnp.column_stack([x, y]), lambda x, y: np.column_stack([x, y]),
             _same(2, 1, 2), FI),
    OpRecord("row_stack", lambda x, y: fnp.row_stack([x, y]), lambda x, y: np.vstack([x, y]), _same(2), FI),
    _rec("array_split", _split_mix, _one(1), FI),
    OpRecord("split", lambda x: fnp.split(fnp.concatenate([x, x], -1), 2, axis=-1)[1],
             lambda x: np.split(np.concatenate([x, x], -1), 2, axis=-1)[1], _one(1), FI),
    OpRecord("split_indices", lambda x: fnp.split(x, [1, 3], axis=0)[2] * 2 + 0 * fnp.sum(fnp.split(x, [1])[0]),
             lambda x: np.split(x, [1, 3], axis=0)[2] * 2 + 0 * np.sum(np.split(x, [1])[0]), _one(1), FI),
    OpRecord("hsplit", lambda x: fnp.hsplit(fnp.concatenate([x, 2 * x], 1), 2)[1],
             lambda x: np.hsplit(np.concatenate([x, 2 * x], 1), 2)[1], _one(2), FI),
    OpRecord("vsplit", lambda x: fnp.vsplit(fnp.concatenate([x, 2 * x]), 2)[1],
             lambda x: np.vsplit(np.concatenate([x, 2 * x]), 2)[1], _one(2), FI),
    OpRecord("dsplit", lambda x: fnp.dsplit(x, [1])[1], lambda x: np.dsplit(x, [1])[1], _one(3), FI),
    OpRecord("append", lambda x, y: fnp.append(x, y), lambda x, y: np.append(x, y), _bcast(), FI),
    OpRecord("append_axis", lambda x, y: fnp.append(x, y, axis=0), lambda x, y: np.append(x, y, axis=0),
             _same(2, 1), FI),
    OpRecord("delete", lambda x: fnp.delete(x, [0], axis=-1), lambda x: np.delete(x, [0], axis=-1), _one(1), FI),
    OpRecord("insert", lambda x: fnp.insert(x, 1, 7.0), lambda x: np.insert(x, 1, 7.0), _one(), F),
    OpRecord("resize", lambda x: fnp.resize(x, (3, 5)), lambda x: np.resize(x, (3, 5)), _one(), FI),
    _rec("meshgrid", _meshgrid, _one(1, 1).map(lambda s: (s[0], (3,))), FI),
    # --- diagonals, triangles, products -------------------------------------------------------------
    OpRecord("trace", fnp.trace, np.trace, _one(2), FI),
    OpRecord("trace_offset", lambda x: fnp.trace(x, 1, 0, -1), lambda x: np.trace(x, 1, 0, -1), _one(2), FI),
    OpRecord("diagonal", lambda x: fnp.diagonal(x, -1, -1, 0), lambda x: np.diagonal(x, -1, -1, 0), _one(2), FI),
    OpRecord("diag_vector", lambda x: fnp.diag(x, 1), lambda x: np.diag(x, 1), _one(1, 1), FI),
    OpRecord("diag_vector_below", lambda x: fnp.diag(x, -2), lambda x: np.diag(x, -2), _one(1, 1), FI),
    OpRecord("diag_matrix", lambda x: fnp.diag(x), lambda x: np.diag(x), _one(2, 2), FI),
    OpRecord("diagflat", fnp.diagflat, np.diagflat, _one(), FI),
    OpRecord("tril", lambda x: fnp.tril(x, -1), lambda x: np.tril(x, -1), _one(2), FI),
    OpRecord("triu", fnp.triu, np.triu, _one(1), FI),
    OpRecord("kron", fnp.kron, np.kron, st.tuples(shapes(max_dims=2, max_side=3), shapes(max_dims=2, max_side=3)), FI),
    OpRecord("cross", fnp.cross, np.cross, _bcast().map(lambda s: tuple(t + (3,) for t in s)), FI),
    OpRecord("cross_2d", fnp.cross, lambda a, b: a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0],
             _bcast().map(lambda s: tuple(t + (2,) for t in s)), FI),
    OpRecord("select", lambda x, y: fnp.select([x > 1, y < 0], [x, y * 2], -1.0),
             lambda x, y: np.select([x > 1, y < 0], [x, y * 2], -1.0), _bcast(), F),
    OpRecord("diff", fnp.diff, np.diff, _one(1), FI),
    OpRecord("diff_n2", lambda x: fnp.diff(x, 2, axis=0, prepend=0.5), lambda x: np.diff(x, 2, axis=0, prepend=0.5),
             _one(1), F),
    OpRecord("ediff1d", lambda x: fnp.ediff1d(x, to_begin=[1.0]), lambda x: np.ediff1d(x, to_begin=[1.0]), _one(),
             F),
    OpRecord("gradient", lambda x: fnp.gradient(x, 0.5, axis=-1), lambda x: np.gradient(x, 0.5, axis=-1),
             _one(1, min_side=2), F),
    OpRecord("gradient_edge2", lambda x: fnp.gradient(x, axis=0, edge_order=2),
             lambda x: np.gradient(x, axis=0, edge_order=2), _one(1, min_side=3), F),
    # --- cumulative, sorting, statistics -------------------------------------------------------------
    OpRecord("cumsum", lambda x: fnp.cumsum(x, axis=-1), lambda x: np.cumsum(x, axis=-1), _one(1), ALL),
    OpRecord("cumsum_flat", fnp.cumsum, np.cumsum, _one(), FI),
    OpRecord("cumprod", lambda x: fnp.cumprod(x, 0), lambda x: np.cumprod(x, 0), _one(1), FI, ((-2.0, 2.0),),
             tol32=1e-4),
    OpRecord("cumulative_sum", lambda x: fnp.cumulative_sum(x, axis=0, include_initial=True),
             lambda x: np.cumulative_sum(x, axis=0, include_initial=True), _one(1), FI),
    OpRecord("nancumsum", lambda x: fnp.nancumsum(_nan_in(x, fnp), axis=-1),
             lambda x: np.nancumsum(_nan_in(x, np), axis=-1), _one(1), F, tags=("no_grad",)),
    OpRecord("sort", fnp.sort, np.sort, _one(1), FI),
    OpRecord("sort_axis0", lambda x: fnp.sort(x, axis=0), lambda x: np.sort(x, axis=0), _one(1), FI),
    OpRecord("sort_flat", lambda x: fnp.sort(x, axis=None), lambda x: np.sort(x, axis=None), _one(), FI),
    OpRecord("argsort", fnp.argsort, lambda x: np.argsort(x, kind="stable"), _one(1), FI, differentiable=False),
    OpRecord("partition", lambda x: fnp.partition(x, 0), lambda x: np.sort(np.partition(x, 0)), _one(1), FI),
    OpRecord("median", lambda x: fnp.median(x, axis=-1), lambda x: np.median(x, axis=-1), _one(1), FI),
    OpRecord("median_all", fnp.median, np.median, _one(), F),
    OpRecord("quantile", lambda x: fnp.quantile(x, [0.1, 0.5, 0.75], axis=0),
             lambda x: np.quantile(x, [0.1, 0.5, 0.75], axis=0), _one(1), F),
    OpRecord("percentile", lambda x: fnp.percentile(x, 30.0, axis=-1, keepdims=True),
             lambda x: np.percentile(x, 30.0, axis=-1, keepdims=True), _one(1), FI),
    OpRecord("nansum", lambda x: fnp.nansum(_nan_in(x, fnp), axis=0), lambda x: np.nansum(_nan_in(x, np), axis=0),
             _one(1), F),
    OpRecord("nanmean", lambda x: fnp.nanmean(_nan_in(x, fnp)), lambda x: np.nanmean(_nan_in(x, np)),
             _one(), F, domains=((-3.0, 1.0),)),
    OpRecord("nanmax", lambda x: fnp.nanmax(_nan_rows(x, fnp), axis=-1), lambda x: np.nanmax(_nan_rows(x, np), axis=-1),
             _one(1), F, domains=((-3.0, 1.7),)),
    OpRecord("nanmin", lambda x: fnp.nanmin(_nan_rows(x, fnp), axis=-1), lambda x: np.nanmin(_nan_rows(x, np), axis=-1),
             _one(1), F, domains=((-3.0, 1.7),)),
    OpRecord("nanvar", lambda x: fnp.nanvar(_nan_in(x, fnp), axis=0), lambda x: np.nanvar(_nan_in(x, np), axis=0),
             _one(1), F, domains=((-3.0, 1.6),), tol32=1e-4),
    OpRecord("nanargmax", lambda x: fnp.nanargmax(_nan_rows(x, fnp), axis=-1),
             lambda x: np.nanargmax(_nan_rows(x, np), axis=-1), _one(1), F, domains=((-3.0, 1.6),),
             differentiable=False),
    OpRecord("ptp", lambda x: fnp.ptp(x, axis=-1), lambda x: np.ptp(x, axis=-1), _one(1), FI),
    OpRecord("count_nonzero", lambda x: fnp.count_nonzero(x, axis=0), lambda x: np.count_nonzero(x, axis=0),
             _one(1), ALL, differentiable=False),
    OpRecord("average", lambda x, w: fnp.average(x, axis=-1, weights=w), lambda x, w: np.average(x, axis=-1, weights=w),
             _same(2, 1), F, ((-3.0, 3.0), (0.5, 2.0))),
    OpRecord("cov", fnp.cov, np.cov, _one(2, 2, min_side=2), F, tol32=1e-4),
    OpRecord("corrcoef", lambda x: fnp.corrcoef(x, rowvar=False), lambda x: np.corrcoef(x, rowvar=False),
             st.tuples(st.tuples(st.integers(3, 5), st.integers(1, 3))), F, tol32=1e-4, tags=("grad1",)),
    OpRecord("searchsorted", lambda a, v: fnp.searchsorted(fnp.sort(a), v),
             lambda a, v: np.searchsorted(np.sort(a), v), st.tuples(_one(1, 1).map(lambda s: s[0]), shapes(max_dims=2)),
             FI, differentiable=False),
    OpRecord("searchsorted_right", lambda a, v: fnp.searchsorted(fnp.sort(a), v, side="right"),
             lambda a, v: np.searchsorted(np.sort(a), v, side="right"),
             st.tuples(_one(1, 1).map(lambda s: s[0]), shapes(max_dims=2)), FI, differentiable=False),
    OpRecord("digitize", lambda x: fnp.digitize(x, np.array([-1.0, 0.0, 2.0])),
             lambda x: np.digitize(x, np.array([-1.0, 0.0, 2.0])), _one(), F, differentiable=False),
    OpRecord("interp", lambda x, fp: fnp.interp(x, np.array([-2.0, -0.5, 0.0, 1.0, 2.5])[:fp.shape[0]], fp),
             lambda x, fp: np.interp(x, np.array([-2.0, -0.5, 0.0, 1.0, 2.5])[:fp.shape[0]], fp),
             st.tuples(shapes(max_dims=2), st.integers(2, 5).map(lambda n: (n,))), F),
    OpRecord("trapezoid", lambda y: fnp.trapezoid(y, dx=0.5), lambda y: np.trapezoid(y, dx=0.5), _one(1), F),
    OpRecord("polyval", fnp.polyval, np.polyval, st.tuples(_one(1, 1).map(lambda s: s[0]), shapes()), F,
             tol32=1e-4),
    OpRecord("vander", lambda x: fnp.vander(x, 4), lambda x: np.vander(x, 4), _one(1, 1), FI, tol32=1e-4),
    OpRecord("convolve", fnp.convolve, np.convolve, st.tuples(_one(1, 1).map(lambda s: s[0]),
                                                              _one(1, 1).map(lambda s: s[0])), F, tol32=1e-4),
    OpRecord("convolve_same", lambda a, v: fnp.convolve(a, v, "same"), lambda a, v: np.convolve(a, v, "same"),
             st.tuples(_one(1, 1).map(lambda s: s[0]), _one(1, 1).map(lambda s: s[0])), F, tol32=1e-4),
    OpRecord("correlate", fnp.correlate, np.correlate, st.tuples(_one(1, 1).map(lambda s: s[0]),
                                                                 _one(1, 1).map(lambda s: s[0])), F, tol32=1e-4),
    OpRecord("correlate_same", lambda a, v: fnp.correlate(a, v, "same"), lambda a, v: np.correlate(a, v, "same"),
             st.tuples(_one(1, 1).map(lambda s: s[0]), _one(1, 1).map(lambda s: s[0])), F, tol32=1e-4),
    OpRecord("isin", lambda x: fnp.isin(fnp.round(x), [0.0, 2.0]), lambda x: np.isin(np.round(x), [0.0, 2.0]),
             _one(), F, differentiable=False),
    _rec("matvec", lambda a, b, xp: xp.matvec(a, b), _vec_and_matrix(), FI, tol32=1e-4),
    _rec("vecmat", lambda a, b, xp: xp.vecmat(b, a), _vec_and_matrix(), FI, tol32=1e-4),
    OpRecord("fftshift", fnp.fft.fftshift, np.fft.fftshift, _one(1), FI),
    OpRecord("ifftshift", lambda x: fnp.fft.ifftshift(x, axes=-1), lambda x: np.fft.ifftshift(x, axes=-1), _one(1), FI),
    # --- numpy.linalg ------------------------------------------------------------------------------------
    _rec("inv", lambda a, xp: xp.linalg.inv(_shift(a, xp)), _square(), domains=(SMALL,), tol32=1e-4),
    _rec("solve", lambda a, b, xp: xp.linalg.solve(_shift(a, xp), b), _solve_shapes(), domains=(SMALL,), tol32=1e-4),
    _rec("solve_vector", lambda a, b, xp: xp.linalg.solve(_shift(a, xp), b), _vec_and_matrix(), domains=(SMALL,),
         tol32=1e-4),
    _rec("det", lambda a, xp: xp.linalg.det(_shift(a, xp)), _square(), domains=(SMALL,), tol32=1e-4),
    _rec("slogdet", _slogdet, _square(), domains=(SMALL,), tol32=1e-4),
    _rec("cholesky", lambda a, xp: xp.linalg.cholesky(_spd(a, xp)), _square(), domains=(SMALL,), tol32=1e-4),
    _rec("cholesky_upper", lambda a, xp: xp.linalg.cholesky(_spd(a, xp), upper=True), _square(0), domains=(SMALL,),
         tol32=1e-4),
    _rec("eigh", _eigh_both, _square(), domains=(SMALL,), tol32=1e-4),
    _rec("eigvalsh", lambda a, xp: xp.linalg.eigvalsh(_sym(a, xp)), _square(), domains=(SMALL,), tol32=1e-4),
    _rec("eigh_lower", lambda a, xp: xp.linalg.eigvalsh(_spread(a, xp)), _square(0), domains=(SMALL,), tol32=1e-4),
    _rec("svd", _svd_all, _rect(), domains=(SMALL,), tol32=1e-4),
    _rec("svdvals", lambda a, xp: xp.linalg.svd(_spread(a, xp), compute_uv=False), _rect(), domains=(SMALL,),
         tol32=1e-4),
    _rec("qr", _qr_both, _rect(tall=True), domains=(SMALL,), tol32=1e-4),
    _rec("pinv", lambda a, xp: xp.linalg.pinv(_spread(a, xp)), _rect(), domains=(SMALL,), tol32=1e-4),
    _rec("lstsq", lambda a, b, xp: xp.linalg.lstsq(_spread(a, xp), b)[0],
         _rect(tall=True).map(lambda s: (s[0][-2:], s[0][-2:-1])), domains=(SMALL,), tol32=1e-4),
    _rec("norm", lambda x, xp: xp.linalg.norm(x), _one(), domains=(NONZERO,)),
    _rec("norm_vector_ords", lambda x, xp: xp.stack([xp.linalg.norm(x, o, axis=-1) for o in (1, 3, np.inf, -np.inf)]),
         _one(1), domains=(NONZERO,), tol32=1e-4),
    _rec("norm_matrix_ords", lambda x, xp: xp.stack([xp.linalg.norm(x, o) for o in ("fro", 1, -1, np.inf, -np.inf)]),
         _one(2, 2), domains=(NONZERO,), tol32=1e-4),
    _rec("norm_spectral", lambda x, xp: xp.stack([xp.linalg.norm(_spread(x, xp), o, axis=(-2, -1))
                                                  for o in (2, -2, "nuc")]), _rect(), domains=(SMALL,), tol32=1e-4),
    _rec("vector_norm", lambda x, xp: xp.linalg.vector_norm(x, axis=0, keepdims=True), _one(1), domains=(NONZERO,)),
    _rec("matrix_norm", lambda x, xp: xp.linalg.matrix_norm(x, ord=1), _square(), domains=(NONZERO,)),
    _rec("matrix_power", lambda a, xp: xp.linalg.matrix_power(a, 3), _square(), FI, domains=(SMALL,), tol32=1e-4),
    _rec("matrix_power_negative", lambda a, xp: xp.linalg.matrix_power(_shift(a, xp), -2), _square(),
         domains=(SMALL,), tol32=1e-4),
    _rec("matrix_rank", lambda a, xp: xp.linalg.matrix_rank(a), _rect(), differentiable=False),
    _rec("cond", lambda a, xp: xp.linalg.cond(_spread(a, xp)), _rect(), domains=(SMALL,), tol32=1e-4),
    _rec("multi_dot", lambda a, b, xp: xp.linalg.multi_dot([a, b, a]), _square(0).map(lambda s: (s[0], s[0])), FI,
         tol32=1e-4),
    _rec("vecdot", lambda a, b, xp: xp.linalg.vecdot(a, b), _bcast().map(lambda s: tuple(t + (3,) for t in s)), FI,
         tol32=1e-4),
    _rec("matrix_transpose", lambda a, xp: xp.linalg.matrix_transpose(a), _one(2), FI),
    _rec("fft", lambda x, xp: _parts(xp.fft.fft(x), xp), _one(1), tol32=1e-4),
    _rec("ifft", lambda x, xp: _parts(xp.fft.ifft(x, n=5, norm="ortho"), xp), _one(1), tol32=1e-4),
    _rec("fft2", lambda x, xp: _parts(xp.fft.fft2(x), xp), _one(2), tol32=1e-4),
    _rec("ifft2", lambda x, xp: _parts(xp.fft.ifft2(x, norm="forward"), xp), _one(2), tol32=1e-4),
    _rec("fftn", lambda x, xp: _parts(xp.fft.fftn(x), xp), _one(1), tol32=1e-4),
    _rec("ifftn", lambda x, xp: _parts(xp.fft.ifftn(x, axes=(0,)), xp), _one(1), tol32=1e-4),
    _rec("rfft", lambda x, xp: _parts(xp.fft.rfft(x), xp), _one(1), tol32=1e-4),
    _rec("irfft", lambda x, xp: xp.fft.irfft(x), _one(1, min_side=2), tol32=1e-4),
    _rec("rfft2", lambda x, xp: _parts(xp.fft.rfft2(x, norm="ortho"), xp), _one(2), tol32=1e-4),
    _rec("irfft2", lambda x, xp: xp.fft.irfft2(x), _one(2, min_side=2), tol32=1e-4),
    _rec("rfftn", lambda x, xp: _parts(xp.fft.rfftn(x), xp), _one(1), tol32=1e-4),
    _rec("irfftn", lambda x, xp: xp.fft.irfftn(x, s=(4,), axes=(-1,)), _one(1), tol32=1e-4),
    _rec("eigvals", lambda a, xp: _parts(xp.linalg.eigvals(_spread(a, xp)), xp), _square(), domains=(SMALL,),
         tol32=1e-4),
    _rec("real_imag_conj", lambda x, xp: xp.stack([xp.real(x), xp.imag(x), xp.conj(x)]), _one()),
    # the rest of the namespace: one row each
    _rec("all", lambda x, xp: xp.all(x > -1, axis=-1), _one(1), FI, differentiable=False),
    _rec("any", lambda x, xp: xp.any(x > 1, axis=0), _one(1), FI, differentiable=False),
    _rec("argpartition", lambda x, xp: xp.take_along_axis(x, xp.argpartition(x, 0, axis=-1)[..., :1], axis=-1)
         == xp.min(x, axis=-1, keepdims=True), _one(1), F, differentiable=False),  # ties pick any index
    _rec("array_equiv", lambda x, y, xp: xp.array_equiv(x, y), _bcast(), FI, differentiable=False),
    _rec("astype", lambda x, xp: xp.astype(x, xp.float64), _one(), F),
    *(_rec(name, lambda x, y, xp, name=name: getattr(xp, name)(x, y), _same(2), INTS, differentiable=False)
      for name in ("bitwise_and", "bitwise_or", "bitwise_xor")),
    *(_rec(name, lambda x, xp, name=name: getattr(xp, name)(x), _one(), INTS, differentiable=False)
      for name in ("bitwise_not", "bitwise_invert", "invert")),
    _rec("broadcast_arrays", lambda x, y, xp: xp.stack(xp.broadcast_arrays(x, y)), _bcast(), FI),
    _rec("copy", lambda x, xp: xp.copy(x), _one(), FI),
    _rec("cumulative_prod", lambda x, xp: xp.cumulative_prod(x, axis=-1, include_initial=True), _one(1, 2),
         domains=(SMALL,), tol32=1e-4),
    _rec("divmod", lambda x, y, xp: xp.stack(xp.divmod(x, y)), _same(2), F, domains=((-3.0, 3.0), NONZERO),
         tags=("no_grad",)),
    _rec("inner", lambda a, b, xp: xp.inner(a, b), _same(2, 1), FI, tol32=1e-4),
    *(_rec(name, lambda x, xp, name=name: getattr(xp, name)(x), _one(), FI, differentiable=False)
      for name in ("iscomplex", "isreal")),
    *(_rec(name, lambda x, xp, name=name: getattr(xp, name)(_inf_nan(x, xp)), _one(), F, differentiable=False)
      for name in ("isinf", "isnan", "isposinf")),
    _rec("modf", lambda x, xp: xp.stack(xp.modf(x)), _one(), F, tags=("no_grad",)),
    _rec("moveaxis", lambda x, xp: xp.moveaxis(x, 0, -1), _one(1), FI),
    _rec("nanargmin", lambda x, xp: xp.nanargmin(_nan_rows(x, xp), axis=-1), _one(1), F, differentiable=False),
    _rec("nancumprod", lambda x, xp: xp.nancumprod(_nan_in(x, xp), axis=-1), _one(1), F, domains=(SMALL,),
         tags=("no_grad",), tol32=1e-4),
    _rec("nanprod", lambda x, xp: xp.nanprod(_nan_in(x, xp), axis=0), _one(1), F, domains=(SMALL,),
         tags=("no_grad",), tol32=1e-4),
    _rec("nanstd", lambda x, xp: xp.nanstd(_nan_rows(x, xp), axis=-1), _one(1, min_side=2), F,
         tags=("no_grad",), tol32=1e-4),
    _rec("ravel", lambda x, xp: xp.ravel(x), _one(), FI),
    _rec("ravel_multi_index", lambda i, j, xp: xp.ravel_multi_index((i % 3, j % 4), (3, 4)), _same(2), INTS,
         differentiable=False),
    _rec("unravel_index", lambda i, xp: xp.stack(xp.unravel_index(i % 12, (3, 4))), _one(), INTS,
         differentiable=False),
    _rec("tensordot", lambda a, b, xp: xp.tensordot(a, b, axes=1), _rect().map(lambda s: (s[0][-2:], s[0][-1:] * 2)),
         FI, tol32=1e-4),
    _rec("vdot", lambda a, b, xp: xp.vdot(a, b), _same(2), FI, tol32=1e-4),
    _rec("tensorsolve", lambda a, b, xp: xp.linalg.tensorsolve(_shift(a.reshape(4, 4), xp).reshape(4, 2, 2), b),
         st.just(((16,), (4,))), domains=(SMALL,), tol32=1e-4),
    _rec("tensorinv", lambda a, xp: xp.linalg.tensorinv(_shift(a.reshape(4, 4), xp).reshape(4, 2, 2), ind=1),
         st.just(((16,),)), domains=(SMALL,), tol32=1e-4),
)
