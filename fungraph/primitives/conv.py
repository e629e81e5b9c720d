"""2-D convolution, NCHW inputs and OIHW kernels, with strides, explicit padding and
dilation of either operand (dilations are what the transposes need, as in XLA)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Primitive, ShapeError
from fungraph.ir import ShapedArray
from fungraph.primitives._rules import aval, is_undefined, require_same_dtype
from fungraph.primitives.shape import rev, transpose

Pairs = tuple[tuple[int, int], tuple[int, int]]


def _dilate_shape(d: int, k: int) -> int:
    return 0 if d == 0 else 1 + k * (d - 1)


def _conv_out(in_size: int, k: int, stride: int, pad: tuple[int, int], ld: int, rd: int) -> int:
    padded = _dilate_shape(in_size, ld) + pad[0] + pad[1]
    return max(0, (padded - _dilate_shape(k, rd)) // stride + 1)


def _conv_lowering(out: np.ndarray, lhs: Any, rhs: Any, **params: Any) -> np.ndarray:
    return _conv_impl(lhs, rhs, out=out, **params)


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


def _dilate(x: np.ndarray, dil: tuple[int, int], axes: tuple[int, int]) -> np.ndarray:
    if dil == (1, 1):
        return x
    shape = list(x.shape)
    for d, a in zip(dil, axes):
        shape[a] = _dilate_shape(shape[a], d)
    out = np.zeros(shape, x.dtype)
    idx = [slice(None)] * x.ndim
    for d, a in zip(dil, axes):
        idx[a] = slice(None, None, d)
    out[tuple(idx)] = x
    return out


def _conv_impl(lhs: Any, rhs: Any, *, window_strides: tuple[int, int], padding: Pairs,
               lhs_dilation: tuple[int, int], rhs_dilation: tuple[int, int],
               out: np.ndarray | None = None) -> np.ndarray:
    """Tap by tap: for each kernel position, one (O, C) x (C, N*OH*OW) product accumulated into
    the output, so the largest temporary is one strided slice of the input (1/(KH*KW) of an
    im2col matrix); a 1x1 unstrided convolution needs no copy at all."""
    lhs = _dilate(np.asarray(lhs), lhs_dilation, (2, 3))
    rhs = _dilate(np.asarray(rhs), rhs_dilation, (2, 3))
    if any(p != (0, 0) for p in padding):
        lhs = np.pad(lhs, ((0, 0), (0, 0)) + tuple((max(lo, 0), max(hi, 0)) for lo, hi in padding))
        (t, b), (left, right) = ((max(-lo, 0), max(-hi, 0)) for lo, hi in padding)
        lhs = lhs[:, :, t:lhs.shape[2] - b, left:lhs.shape[3] - right]
    n, c = lhs.shape[:2]
    o, _, kh, kw = rhs.shape
    sh, sw = window_strides
    oh = max(0, (lhs.shape[2] - kh) // sh + 1)
    ow = max(0, (lhs.shape[3] - kw) // sw + 1)
    if out is None:
        out = np.empty((n, o, oh, ow), lhs.dtype)
    if 0 in (oh, ow, n, o) or c == 0 or kh == 0 or kw == 0:
        out[...] = 0
        return out
    flat_out = out.reshape(n, o, oh * ow)
    tmp = None
    for i in range(kh):
        for j in range(kw):
            tap = lhs[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw].reshape(n, c, oh * ow)
            w = rhs[:, :, i, j]
            if tmp is None:
                np.matmul(w, tap, out=flat_out)
                tmp = np.empty_like(flat_out) if kh * kw > 1 else None
            else:
                np.matmul(w, tap, out=tmp)
                flat_out += tmp
    return out


conv_p = Primitive("conv", impl=_conv_impl, abstract_eval=_conv_aval, arity=2, lowerings={"cpu": _conv_lowering})


@conv_p.def_jvp
def _conv_jvp(primals: tuple, tangents: tuple, **params: Any) -> tuple:
    from fungraph.primitives.elementwise import add

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
    from fungraph.primitives.indexing import take
    from fungraph.primitives.linalg import dot_general
    from fungraph.primitives.shape import pad, reshape, slice_

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
    from fungraph.primitives._batching import batch_size, broadcast_batch, to_front
    from fungraph.primitives.shape import reshape

    lhs, rhs = args
    dl, dr = dims
    if dr is None:
        x = to_front(lhs, dl)
        b, n = aval(x).shape[:2]
        out = conv_p.bind(reshape(x, (b * n,) + aval(x).shape[2:]), rhs, **params)
        return reshape(out, (b, n) + aval(out).shape[1:]), 0
    size = batch_size(args, dims)
    return _patches_conv(broadcast_batch(lhs, dl, size), broadcast_batch(rhs, dr, size), **params), 0
