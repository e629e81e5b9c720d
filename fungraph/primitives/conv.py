"""2-D convolution, NCHW inputs and OIHW kernels, with strides, explicit padding and
dilation of either operand (dilations are what the transposes need, as in XLA)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fungraph import _blas, dtypes
from fungraph._caches import on_clear
from fungraph.core import ALIGNMENT, Primitive, ScratchLowering, ShapeError, register_lowering
from fungraph.ir import Eqn, ShapedArray
from fungraph.primitives._batching import batch_size, broadcast_batch, to_front
from fungraph.primitives._rules import aval, is_undefined, require_same_dtype
from fungraph.primitives.elementwise import add
from fungraph.primitives.indexing import take
from fungraph.primitives.linalg import dot_general
from fungraph.primitives.shape import pad, reshape, rev, slice_, transpose

Pairs = tuple[tuple[int, int], tuple[int, int]]


def _dilate_shape(d: int, k: int) -> int:
    return 0 if d == 0 else 1 + k * (d - 1)


def _conv_out(in_size: int, k: int, stride: int, pad: tuple[int, int], ld: int, rd: int) -> int:
    padded = _dilate_shape(in_size, ld) + pad[0] + pad[1]
    return max(0, (padded - _dilate_shape(k, rd)) // stride + 1)


def _conv_aval(lhs: ShapedArray, rhs: ShapedArray, *, window_strides: tuple[int, int], padding: Pairs,
               lhs_dilation: tuple[int, int], rhs_dilation: tuple[int, int]) -> ShapedArray:
    dtype = require_same_dtype("conv", lhs, rhs)
    if not dtypes.is_float(dtype) or lhs.ndim != 4 or rhs.ndim != 4 or lhs.shape[1] != rhs.shape[1]:
        raise ShapeError(f"conv: need float NCHW input and OIHW kernel with equal C=I, got {lhs} and {rhs}")
    spatial = tuple(
        _conv_out(lhs.shape[2 + i], rhs.shape[2 + i], window_strides[i], padding[i], lhs_dilation[i], rhs_dilation[i])
        for i in range(2)
    )
    return ShapedArray((lhs.shape[0], rhs.shape[0]) + spatial, dtype)


# --- execution: tap by tap, every temporary in two buffers the caller provides ------------


@dataclass(frozen=True)
class _AxisTap:
    """Kernel position ``k`` along one axis: the output positions ``dst`` it reaches inside
    the (dilated) input, and the input positions ``src`` it reads there; ``full`` when it
    reaches every output position (no padding or dilation zero falls under it)."""

    k: int
    dst: slice
    src: slice
    full: bool
    whole: bool  # src is the whole input axis, unstrided


@functools.lru_cache(maxsize=1024)
def _axis_taps(in_size: int, out_size: int, k: int, stride: int, lo: int, ld: int, rd: int) -> tuple[_AxisTap, ...]:
    """Output position ``o`` of kernel position ``i`` sits at ``p = o*stride + i*rd - lo`` of the
    dilated input, an input element when ``0 <= p <= (in_size-1)*ld`` and ``ld`` divides ``p``.
    Those ``o`` form an arithmetic progression (a range intersected with a congruence class),
    and so do their input indices ``p // ld``: two slices. Taps that reach no element are left out."""
    taps = []
    for i in range(k):
        hits = [(o, (o * stride + i * rd - lo) // ld) for o in range(out_size)
                if 0 <= o * stride + i * rd - lo <= (in_size - 1) * ld and (o * stride + i * rd - lo) % ld == 0]
        if not hits:
            continue
        (o0, s0), n = hits[0], len(hits)
        step_o = hits[1][0] - o0 if n > 1 else 1
        step_s = hits[1][1] - s0 if n > 1 else 1
        dst = slice(o0, o0 + step_o * (n - 1) + 1, step_o)
        src = slice(s0, s0 + step_s * (n - 1) + 1, step_s)
        taps.append(_AxisTap(i, dst, src, n == out_size, s0 == 0 and n == in_size and step_s == 1))
    return tuple(taps)


on_clear(_axis_taps.cache_clear)


@dataclass(frozen=True)
class _ConvSchedule:
    """What one convolution executes: its taps (pairs of axis taps) and the two scratch
    buffers it needs, as element counts: ``tap`` (one gathered input window, N*C*OH*OW;
    0 when every tap is a plain view of the input) and ``prod`` (one tap's product, the
    output's size; 0 for a single tap, which writes straight into the output)."""

    out_shape: tuple[int, int, int, int]
    taps: tuple[tuple[_AxisTap, _AxisTap], ...]
    tap: int
    prod: int


def _direct(rows: _AxisTap, cols: _AxisTap) -> bool:
    """A tap that is the input itself, rows cropped: reshaping it to (N, C, OH*OW) is a view."""
    return rows.full and cols.full and rows.src.step == 1 and cols.whole


def _schedule(lhs_shape: tuple[int, ...], rhs_shape: tuple[int, ...], *, window_strides: tuple[int, int],
              padding: Pairs, lhs_dilation: tuple[int, int], rhs_dilation: tuple[int, int]) -> _ConvSchedule:
    n, c, h, w = lhs_shape
    o, _, kh, kw = rhs_shape
    oh, ow = (_conv_out((h, w)[a], (kh, kw)[a], window_strides[a], padding[a], lhs_dilation[a], rhs_dilation[a])
              for a in range(2))
    taps: tuple[tuple[_AxisTap, _AxisTap], ...] = ()
    if 0 not in (n, c, o, oh, ow):
        rows = _axis_taps(h, oh, kh, window_strides[0], padding[0][0], lhs_dilation[0], rhs_dilation[0])
        cols = _axis_taps(w, ow, kw, window_strides[1], padding[1][0], lhs_dilation[1], rhs_dilation[1])
        taps = tuple((r, q) for r in rows for q in cols)
    tap = 0 if all(_direct(*t) for t in taps) else n * c * oh * ow
    prod = n * o * oh * ow if len(taps) > 1 else 0
    return _ConvSchedule((n, o, oh, ow), taps, tap, prod)


def _schedule_of(lhs_shape: tuple[int, ...], rhs_shape: tuple[int, ...], params: dict) -> _ConvSchedule:
    return _schedule(tuple(lhs_shape), tuple(rhs_shape), **params)


def _run_conv(out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray, sched: _ConvSchedule,
              tap_buf: np.ndarray | None, prod_buf: np.ndarray | None) -> np.ndarray:
    """``out = conv(lhs, rhs)`` tap by tap: for each kernel position, one (O, C) x (C, N*OH*OW)
    product accumulated into ``out``. A tap that is not a view of the input is gathered into
    ``tap_buf`` (zeros where it falls on padding or dilation); products after the first go
    to ``prod_buf`` and are added in place. Nothing else is allocated."""
    n, o, oh, ow = sched.out_shape
    if not sched.taps:
        out.fill(0)
        return out
    c = lhs.shape[1]
    flat_out = out.reshape(n, o, oh * ow)
    for index, (rows, cols) in enumerate(sched.taps):
        window = lhs[:, :, rows.src, cols.src]
        cols_mat = None
        if _direct(rows, cols):
            try:
                cols_mat = window.reshape(n, c, oh * ow, copy=False)
            except ValueError:  # an input view whose rows are not contiguous
                cols_mat = None
        if cols_mat is None:
            if tap_buf is None:
                cols_mat = window.reshape(n, c, oh * ow)  # copies: only a direct tap of a strided view
            else:
                gathered = tap_buf.reshape(n, c, oh, ow)
                if not (rows.full and cols.full):
                    tap_buf.fill(0)
                np.copyto(gathered[:, :, rows.dst, cols.dst], window)
                cols_mat = tap_buf.reshape(n, c, oh * ow)
        kernel = rhs[:, :, rows.k, cols.k]
        if index == 0:
            _blas.matmul(kernel, cols_mat, flat_out)
        else:
            _blas.matmul(kernel, cols_mat, prod_buf)
            np.add(flat_out, prod_buf, out=flat_out)
    return out


def _conv_impl(lhs: Any, rhs: Any, **params: Any) -> np.ndarray:
    """Eager convolution: the engine's algorithm with freshly allocated scratch."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    sched = _schedule_of(lhs.shape, rhs.shape, params)
    n, o, oh, ow = sched.out_shape
    tap_buf = np.empty((n, lhs.shape[1], oh * ow), lhs.dtype) if sched.tap else None
    prod_buf = np.empty((n, o, oh * ow), lhs.dtype) if sched.prod else None
    return _run_conv(np.empty(sched.out_shape, lhs.dtype), lhs, rhs, sched, tap_buf, prod_buf)


def _conv_lowering(out: np.ndarray, lhs: Any, rhs: Any, **params: Any) -> np.ndarray:
    """The CPU lowering when the plan reserved no scratch: temporaries are allocated."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    sched = _schedule_of(lhs.shape, rhs.shape, params)
    n, o, oh, ow = sched.out_shape
    tap_buf = np.empty((n, lhs.shape[1], oh * ow), lhs.dtype) if sched.tap else None
    prod_buf = np.empty((n, o, oh * ow), lhs.dtype) if sched.prod else None
    return _run_conv(out, lhs, rhs, sched, tap_buf, prod_buf)


def _aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGNMENT) * ALIGNMENT


def conv_scratch_bytes(eqn: Eqn) -> int:
    """The scratch a planned conv needs on the CPU: its tap buffer and its product buffer
    (``_ConvSchedule``), each 64-byte aligned; 0 for a single unstrided, unpadded tap."""
    lhs, rhs = (a.aval for a in eqn.inputs)
    sched = _schedule_of(lhs.shape, rhs.shape, dict(eqn.params))
    item = lhs.dtype.itemsize
    return (_aligned(sched.tap * item) if sched.tap else 0) + sched.prod * item


def conv_scratch_lowering(eqn: Eqn, block: np.ndarray) -> Callable[..., np.ndarray]:
    """The CPU lowering of a conv whose plan reserved ``block`` (``conv_scratch_bytes``):
    the schedule is fixed here, and a call writes only into ``out`` and the block."""
    lhs, rhs = (a.aval for a in eqn.inputs)
    sched = _schedule_of(lhs.shape, rhs.shape, dict(eqn.params))
    n, o, oh, ow = sched.out_shape
    dtype = np.dtype(lhs.dtype)
    offset = 0
    tap_buf = prod_buf = None
    if sched.tap:
        tap_buf = block[:sched.tap * dtype.itemsize].view(dtype).reshape(n, lhs.shape[1], oh * ow)
        offset = _aligned(sched.tap * dtype.itemsize)
    if sched.prod:
        prod_buf = block[offset:offset + sched.prod * dtype.itemsize].view(dtype).reshape(n, o, oh * ow)

    def run(out: np.ndarray, x: Any, w: Any, **_: Any) -> np.ndarray:
        return _run_conv(out, x, w, sched, tap_buf, prod_buf)

    return run


conv_p = Primitive("conv", impl=_conv_impl, abstract_eval=_conv_aval, arity=2, weak_from=None)
register_lowering(conv_p, "cpu", _conv_lowering, scratch=ScratchLowering(conv_scratch_bytes, conv_scratch_lowering))


@conv_p.def_jvp
def _conv_jvp(primals: tuple, tangents: tuple, **params: Any) -> tuple:
    lhs, rhs = primals
    tl, tr = tangents
    terms = []
    if tl is not None:
        terms.append(conv_p.bind(tl, rhs, **params))
    if tr is not None:
        terms.append(conv_p.bind(lhs, tr, **params))
    return conv_p.bind(lhs, rhs, **params), terms[0] if len(terms) == 1 else add(*terms)


@conv_p.def_transpose
def _conv_transpose(ct: Any, lhs: Any, rhs: Any, *, window_strides: tuple[int, int], padding: Pairs,
                    lhs_dilation: tuple[int, int], rhs_dilation: tuple[int, int]) -> tuple:
    if is_undefined(lhs) and is_undefined(rhs):
        raise TypeError("conv is not linear in both operands at once")
    ls, rs, cs = aval(lhs).shape, aval(rhs).shape, aval(ct).shape
    if is_undefined(lhs):
        pads = []
        for i in range(2):
            ld = _dilate_shape(ls[2 + i], lhs_dilation[i])
            rd = _dilate_shape(rs[2 + i], rhs_dilation[i])
            od = _dilate_shape(cs[2 + i], window_strides[i])
            before = rd - padding[i][0] - 1
            after = ld + rd - 1 - od - before
            pads.append((before, after))
        kernel = transpose(rev(rhs, (2, 3)), (1, 0, 2, 3))
        out = conv(ct, kernel, lhs_dilation, tuple(pads), window_strides, rhs_dilation)
        return out, None
    pads = []
    for i in range(2):
        ld = _dilate_shape(ls[2 + i], lhs_dilation[i])
        rd = _dilate_shape(rs[2 + i], rhs_dilation[i])
        od = _dilate_shape(cs[2 + i], window_strides[i])
        lo = padding[i][0]
        pads.append((lo, od - ld + rd - lo - 1))
    out = conv(transpose(lhs, (1, 0, 2, 3)), transpose(ct, (1, 0, 2, 3)), rhs_dilation, tuple(pads),
               lhs_dilation, window_strides)
    return None, transpose(out, (1, 0, 2, 3))


def conv(lhs: Any, rhs: Any, window_strides: tuple[int, int], padding: Any,
         lhs_dilation: tuple[int, int] = (1, 1), rhs_dilation: tuple[int, int] = (1, 1)) -> Any:
    return conv_p.bind(lhs, rhs, window_strides=tuple(int(s) for s in window_strides),
                       padding=tuple((int(a), int(b)) for a, b in padding),
                       lhs_dilation=tuple(int(d) for d in lhs_dilation),
                       rhs_dilation=tuple(int(d) for d in rhs_dilation))


def _patches_conv(lhs: Any, rhs: Any, window_strides: tuple[int, int], padding: Pairs,
                  lhs_dilation: tuple[int, int], rhs_dilation: tuple[int, int]) -> Any:
    """conv of a batch of inputs (B, N, C, H, W) with a batch of kernels (B, O, C, KH, KW),
    as one gather of input windows and one batched contraction."""

    b, n, c, h, w = aval(lhs).shape
    o, kh, kw = aval(rhs).shape[1], aval(rhs).shape[3], aval(rhs).shape[4]
    config = [(0, 0, 0)] * 3 + [(max(lo, 0), max(hi, 0), d - 1) for (lo, hi), d in zip(padding, lhs_dilation)]
    x = pad(lhs, np.asarray(0, aval(lhs).dtype), config)
    hp, wp = aval(x).shape[3:]
    crop_lo = [max(-lo, 0) for lo, _ in padding]
    crop_hi = [max(-hi, 0) for _, hi in padding]
    x = slice_(x, (0, 0, 0, crop_lo[0], crop_lo[1]), (b, n, c, hp - crop_hi[0], wp - crop_hi[1]), None)
    hp, wp = aval(x).shape[3:]
    oh = (hp - _dilate_shape(kh, rhs_dilation[0])) // window_strides[0] + 1
    ow = (wp - _dilate_shape(kw, rhs_dilation[1])) // window_strides[1] + 1
    rows = (np.arange(oh) * window_strides[0])[:, None, None, None] \
        + (np.arange(kh) * rhs_dilation[0])[None, None, :, None]
    cols = (np.arange(ow) * window_strides[1])[None, :, None, None] \
        + (np.arange(kw) * rhs_dilation[1])[None, None, None, :]
    idx = (rows * wp + cols).reshape(oh, ow, kh * kw).astype(np.int64)
    patches = take(reshape(x, (b, n, c, hp * wp)), idx, 3)                     # B N C OH OW K
    kernel = reshape(rhs, (b, o, c, kh * kw))                                 # B O C K
    out = dot_general(patches, kernel, (((2, 5), (2, 3)), ((0,), (0,))))      # B N OH OW O
    return transpose(out, (0, 1, 4, 2, 3))


@conv_p.def_batch
def _conv_batch(args: Any, dims: Any, **params: Any) -> tuple[Any, int]:
    lhs, rhs = args
    dl, dr = dims
    if dr is None:
        x = to_front(lhs, dl)
        b, n = aval(x).shape[:2]
        out = conv_p.bind(reshape(x, (b * n,) + aval(x).shape[2:]), rhs, **params)
        return reshape(out, (b, n) + aval(out).shape[1:]), 0
    size = batch_size(args, dims)
    return _patches_conv(broadcast_batch(lhs, dl, size), broadcast_batch(rhs, dr, size), **params), 0
