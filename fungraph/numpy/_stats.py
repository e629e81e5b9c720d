"""Cumulative functions, sorting, order statistics and NaN-aware reductions of
``fungraph.numpy``: the ``cumsum``, ``sort`` and ``argsort`` primitives plus compositions."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Tracer
from fungraph.numpy import _reductions as red
from fungraph.numpy._elementwise import less, less_equal
from fungraph.numpy._shape import moveaxis
from fungraph.numpy._util import asarray, cast, normalize_axes, promote
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh
from fungraph.primitives.cumulative import associative_scan, cumsum_p
from fungraph.primitives.indexing import take as take_prim
from fungraph.primitives.sorting import argsort_p, sort_p


def _flat_or_axis(a: Any, axis: int | None, name: str) -> tuple[Any, int]:
    x = asarray(a)
    if axis is None:
        return sh.reshape(x, (x.size,)), 0
    (ax,) = normalize_axes(axis, x.ndim, name)
    return x, ax


def _acc_dtype(x: Any, dtype: Any) -> np.dtype:
    if dtype is not None:
        return dtypes.canonicalize(dtype)
    return dtypes.int64 if x.dtype in (dtypes.bool_, dtypes.int32) else x.dtype


# --- cumulative ---------------------------------------------------------------------------------


def cumsum(a: Any, axis: int | None = None, dtype: Any = None) -> Any:
    x, ax = _flat_or_axis(a, axis, "cumsum")
    x = cast(x, _acc_dtype(x, dtype))
    return cumsum_p.bind(x, axis=ax, reverse=False) if x.size else x


def cumprod(a: Any, axis: int | None = None, dtype: Any = None) -> Any:
    x, ax = _flat_or_axis(a, axis, "cumprod")
    x = cast(x, _acc_dtype(x, dtype))
    return associative_scan(ew.mul, x, ax, 1)


def cumulative_sum(x: Any, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
    a = asarray(x)
    if axis is None and a.ndim > 1:
        raise ValueError("cumulative_sum: axis must be given for arrays of more than one dimension")
    out = cumsum(a, 0 if axis is None else axis, dtype)
    return _with_initial(out, 0 if axis is None else axis, 0) if include_initial else out


def cumulative_prod(x: Any, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
    a = asarray(x)
    if axis is None and a.ndim > 1:
        raise ValueError("cumulative_prod: axis must be given for arrays of more than one dimension")
    out = cumprod(a, 0 if axis is None else axis, dtype)
    return _with_initial(out, 0 if axis is None else axis, 1) if include_initial else out


def _with_initial(out: Any, axis: int, value: int) -> Any:
    (ax,) = normalize_axes(axis, out.ndim, "cumulative")
    cfg = [(0, 0, 0)] * out.ndim
    cfg[ax] = (1, 0, 0)
    return sh.pad(out, np.asarray(value, out.dtype), cfg)


def _nan_to(x: Any, value: float) -> Any:
    if not dtypes.is_inexact(x.dtype):
        return x
    return ew.select(ew.ne_p.bind(x, x), np.asarray(value, x.dtype), x)


def nancumsum(a: Any, axis: int | None = None, dtype: Any = None) -> Any:
    return cumsum(_nan_to(asarray(a), 0), axis, dtype)


def nancumprod(a: Any, axis: int | None = None, dtype: Any = None) -> Any:
    return cumprod(_nan_to(asarray(a), 1), axis, dtype)


# --- sorting --------------------------------------------------------------------------------------


def _check_order(order: Any, name: str) -> None:
    if order is not None:
        raise NotImplementedError(f"{name}: structured arrays (order=) are not supported")


def sort(a: Any, axis: int | None = -1, kind: Any = None, order: Any = None, *, stable: Any = True,
         descending: bool = False) -> Any:
    """``a`` sorted along ``axis`` (NaNs last; ``descending``: the ascending order reversed, as JAX)."""
    _check_order(order, "sort")
    x, ax = _flat_or_axis(a, axis, "sort")
    if not x.ndim:
        return x
    out = sort_p.bind(x, axis=ax)
    return sh.rev(out, (ax,)) if descending else out


def argsort(a: Any, axis: int | None = -1, kind: Any = None, order: Any = None, *, stable: Any = True,
            descending: bool = False) -> Any:
    """Indices that sort ``a`` along ``axis``, stably: equal entries keep their order, also when
    ``descending`` (then from the last entry's view: the reversed array's ascending order, reversed)."""
    _check_order(order, "argsort")
    x, ax = _flat_or_axis(a, axis, "argsort")
    if x.ndim == 0:
        return np.zeros((), np.int64)
    if not descending:
        return argsort_p.bind(x, axis=ax)
    last = np.asarray(x.shape[ax] - 1, np.int64)
    return ew.sub(last, sh.rev(argsort_p.bind(sh.rev(x, (ax,)), axis=ax), (ax,)))


def partition(a: Any, kth: Any, axis: int | None = -1, kind: str = "introselect", order: Any = None) -> Any:
    """A full sort, which is one valid partition for every ``kth``."""
    return sort(a, axis)


def argpartition(a: Any, kth: Any, axis: int | None = -1, kind: str = "introselect", order: Any = None) -> Any:
    return argsort(a, axis)


def _take_static(x: Any, i: int, axis: int) -> Any:
    lo = [0] * x.ndim
    hi = list(x.shape)
    lo[axis], hi[axis] = i, i + 1
    return sh.reshape(sh.slice_(x, lo, hi, None), x.shape[:axis] + x.shape[axis + 1:])


def _any_nan(x: Any, axes: tuple[int, ...]) -> Any:
    return red.any(ew.ne_p.bind(x, x), axis=axes)


def quantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False) -> Any:
    """Quantiles by sorting and interpolating linearly (numpy's default method); ``q`` is concrete."""
    if method != "linear":
        raise NotImplementedError(f"quantile: method {method!r} is not supported (only 'linear')")
    if isinstance(q, Tracer):
        raise TypeError("quantile: q must be concrete")
    (x,) = promote(a, to_inexact=True)
    if not isinstance(q, (int, float)):
        x = cast(x, dtypes.result_type(x, np.asarray(q, np.float64)))
    axes = normalize_axes(axis, x.ndim, "quantile")
    rest = [i for i in range(x.ndim) if i not in axes]
    moved = sh.transpose(x, rest + list(axes))
    n = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
    flat = sh.reshape(moved, tuple(x.shape[i] for i in rest) + (n,))
    srt = sort_p.bind(flat, axis=len(rest))
    qs = np.asarray(q, np.float64)
    if (qs < 0).any() or (qs > 1).any():
        raise ValueError("Quantiles must be in the range [0, 1]")
    outs = []
    for qv in qs.reshape(-1):
        pos = qv * (n - 1)
        lo = int(np.floor(pos))
        hi = min(lo + 1, n - 1)
        t = np.asarray(pos - lo, x.dtype)
        va, vb = _take_static(srt, lo, len(rest)), _take_static(srt, hi, len(rest))
        diff = ew.sub(vb, va)
        lerp = ew.select(np.asarray(t >= 0.5), ew.sub(vb, ew.mul(diff, np.asarray(1 - t, x.dtype))),
                         ew.add(va, ew.mul(diff, t)))
        outs.append(lerp)
    res = sh.concatenate([sh.reshape(o, (1,) + tuple(o.shape)) for o in outs], 0)
    res = sh.reshape(res, qs.shape + tuple(x.shape[i] for i in rest))
    nan = _any_nan(moved, tuple(range(len(rest), moved.ndim)))
    res = ew.select(nan, np.asarray(np.nan, x.dtype), res)
    if keepdims:
        kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        res = sh.reshape(res, qs.shape + kept)
    return res


def percentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False) -> Any:
    scaled = q / 100 if isinstance(q, (int, float)) else np.asarray(q, np.float64) / 100
    return quantile(a, scaled, axis, method=method, keepdims=keepdims)


def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False, keepdims: bool = False) -> Any:
    return quantile(a, 0.5, axis, keepdims=keepdims)


# --- NaN-aware reductions --------------------------------------------------------------------------


def nansum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Any:
    return red.sum(_nan_to(asarray(a), 0), axis=axis, dtype=dtype, out=out, keepdims=keepdims, initial=initial,
                   where=where)


def nanprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            initial: Any = None, where: Any = None) -> Any:
    return red.prod(_nan_to(asarray(a), 1), axis=axis, dtype=dtype, out=out, keepdims=keepdims, initial=initial,
                    where=where)


def _valid(x: Any, where: Any) -> Any:
    """The elements a NaN-ignoring reduction takes: not NaN, and in ``where`` if given."""
    valid = ew.eq(x, x)
    return valid if where is None else ew.and_p.bind(valid, red.where_mask(x, where, "nan-reduction"))


def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, *,
            where: Any = None) -> Any:
    (x,) = promote(a, to_inexact=True)
    return red.mean(x, axis=axis, dtype=dtype, out=out, keepdims=keepdims, where=_valid(x, where))


def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False, *,
           where: Any = None, correction: Any = None) -> Any:
    (x,) = promote(a, to_inexact=True)
    return red.var(x, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, where=_valid(x, where),
                   correction=correction)


def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False, *,
           where: Any = None, correction: Any = None) -> Any:
    return ew.sqrt_p.bind(nanvar(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, where=where,
                                 correction=correction))


def _nan_extremum(reducer: Any, fill: float) -> Any:
    def f(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, initial: Any = None,
          where: Any = None) -> Any:
        x = asarray(a)
        if not dtypes.is_float(x.dtype) or initial is not None or where is not None:
            return reducer(_nan_to(x, fill) if dtypes.is_float(x.dtype) else x, axis=axis, out=out,
                           keepdims=keepdims, initial=initial, where=where)
        out = reducer(_nan_to(x, fill), axis=axis, keepdims=keepdims)
        all_nan = red.all(ew.ne_p.bind(x, x), axis=axis, keepdims=keepdims)
        return ew.select(all_nan, np.asarray(np.nan, x.dtype), out)

    return f


nanmax = _nan_extremum(red.max, -np.inf)
nanmin = _nan_extremum(red.min, np.inf)


def nanargmax(a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
    x = asarray(a)
    return red.argmax(_nan_to(x, -np.inf), axis=axis, keepdims=keepdims)


def nanargmin(a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
    x = asarray(a)
    return red.argmin(_nan_to(x, np.inf), axis=axis, keepdims=keepdims)


# --- other statistics ------------------------------------------------------------------------------


def ptp(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    x = asarray(a)
    return ew.sub(red.max(x, axis=axis, keepdims=keepdims), red.min(x, axis=axis, keepdims=keepdims))


def count_nonzero(a: Any, axis: Any = None, *, keepdims: bool = False) -> Any:
    x = asarray(a)
    nz = ew.ne_p.bind(x, np.asarray(0, x.dtype))
    return red.sum(ew.convert(nz, dtypes.int64), axis=axis, keepdims=keepdims)


def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False, *,
            keepdims: bool = False) -> Any:
    if weights is None:
        avg = red.mean(a, axis=axis, keepdims=keepdims)
        if not returned:
            return avg
        x = asarray(a)
        axes = normalize_axes(axis, x.ndim, "average")
        n = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
        return avg, np.full(np.shape(avg), n, avg.dtype)
    x, w = promote(a, weights, to_inexact=True)
    if w.shape != x.shape:
        if axis is None or w.ndim != 1:
            raise TypeError("average: 1D weights expected when shapes of a and weights differ")
        (ax,) = normalize_axes(axis, x.ndim, "average")
        w = sh.broadcast_in_dim(w, x.shape, (ax,))
    total = red.sum(w, axis=axis, keepdims=keepdims)
    avg = ew.div(red.sum(ew.mul(x, w), axis=axis, keepdims=keepdims), total)
    return (avg, sh.broadcast_to(total, avg.shape)) if returned else avg


def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: int | None = None) -> Any:
    from fungraph.numpy._linalg import matmul
    from fungraph.numpy._manip import atleast_2d

    x = asarray(m) if y is None else promote(m, y)[0]
    wide = dtypes.complex128 if dtypes.is_complex(x.dtype) else dtypes.float64
    x = atleast_2d(cast(asarray(m), wide))
    if not rowvar and x.shape[0] != 1:
        x = sh.transpose(x, (1, 0))
    if y is not None:
        yy = atleast_2d(cast(asarray(y), wide))
        if not rowvar and yy.shape[0] != 1:
            yy = sh.transpose(yy, (1, 0))
        x = sh.concatenate([x, yy], 0)
    n = x.shape[1]
    ddof = (0 if bias else 1) if ddof is None else ddof
    centered = ew.sub(x, red.mean(x, axis=1, keepdims=True))
    right = ew.conj(centered) if dtypes.is_complex(wide) else centered
    c = ew.div(matmul(centered, sh.transpose(right, (1, 0))), np.asarray(n - ddof, x.dtype))
    return sh.reshape(c, ()) if c.shape == (1, 1) else c


def corrcoef(x: Any, y: Any = None, rowvar: bool = True) -> Any:
    from fungraph.numpy._manip import diag

    c = cov(x, y, rowvar)
    if c.ndim == 0:
        return ew.div(c, c)
    complex_c = dtypes.is_complex(c.dtype)
    d = diag(c)
    d = ew.sqrt_p.bind(ew.real(d) if complex_c else d)
    if complex_c:
        d = cast(d, c.dtype)
    c = ew.div(ew.div(c, sh.reshape(d, (d.shape[0], 1))), sh.reshape(d, (1, d.shape[0])))
    if complex_c:                                                        # numpy clips each part
        return ew.complex_(_clip_unit(ew.real(c)), _clip_unit(ew.imag(c)))
    return _clip_unit(c)


def _clip_unit(c: Any) -> Any:
    one = np.asarray(1, c.dtype)
    return ew.max_p.bind(ew.min_p.bind(c, one), ew.neg(one))


# --- searching and interpolation ----------------------------------------------------------------------


def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None) -> Any:
    """Insertion points into the sorted 1-d ``a``: how many entries lie below (or at) each ``v``."""
    x, vals = promote(a, v)
    if sorter is not None:
        x = take_prim(x, asarray(sorter), 0)
    if x.ndim != 1:
        raise ValueError("searchsorted: a must be 1-d")
    vv = sh.reshape(vals, vals.shape + (1,))
    below = (less if side == "left" else less_equal)(x, vv)
    return red.sum(ew.convert(below, dtypes.int64), axis=-1)


def digitize(x: Any, bins: Any, right: bool = False) -> Any:
    b = asarray(bins)
    increasing = True
    if not isinstance(b, Tracer) and b.size > 1:
        increasing = bool(b[-1] >= b[0])
    if increasing:
        return searchsorted(b, x, side="left" if right else "right")
    n = b.shape[0]
    return ew.sub(np.asarray(n, dtypes.int64), searchsorted(sh.rev(b, (0,)), x, side="right" if right else "left"))


def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None) -> Any:
    """Piecewise-linear interpolation on increasing ``xp`` (differentiable in x, xp and fp)."""
    if period is not None:
        raise NotImplementedError("interp: period is not supported")
    xs, xps, fps = promote(x, xp, fp, to_inexact=True)
    n = xps.shape[0]
    if n == 1:
        return sh.broadcast_to(fps, xs.shape)
    i = searchsorted(xps, xs, side="right")
    i = ew.min_p.bind(ew.max_p.bind(ew.sub(i, np.asarray(1, np.int64)), np.asarray(0, np.int64)),
                      np.asarray(n - 2, np.int64))
    j = ew.add(i, np.asarray(1, np.int64))
    x0, x1 = take_prim(xps, i, 0), take_prim(xps, j, 0)
    f0, f1 = take_prim(fps, i, 0), take_prim(fps, j, 0)
    t = ew.div(ew.sub(xs, x0), ew.sub(x1, x0))
    out = ew.add(f0, ew.mul(t, ew.sub(f1, f0)))
    first, last = _take_static(fps, 0, 0), _take_static(fps, n - 1, 0)
    lo = first if left is None else np.asarray(left, xs.dtype)
    hi = last if right is None else np.asarray(right, xs.dtype)
    out = ew.select(ew.eq(xs, _take_static(xps, n - 1, 0)), sh.broadcast_to(last, xs.shape), out)
    out = ew.select(ew.lt(xs, _take_static(xps, 0, 0)), sh.broadcast_to(asarray(lo), xs.shape), out)
    return ew.select(ew.gt(xs, _take_static(xps, n - 1, 0)), sh.broadcast_to(asarray(hi), xs.shape), out)


def trapezoid(y: Any, x: Any = None, dx: float = 1.0, axis: int = -1) -> Any:
    (yy,) = promote(y, to_inexact=True)
    (ax,) = normalize_axes(axis, yy.ndim, "trapezoid")
    yy = moveaxis(yy, ax, -1)
    n = yy.shape[-1]
    lo, hi = yy[..., :n - 1], yy[..., 1:]
    if x is None:
        widths = np.asarray(dx, yy.dtype)
    else:
        from fungraph.numpy._manip import diff

        xx = asarray(x)
        widths = diff(xx) if xx.ndim == 1 else moveaxis(diff(xx, axis=ax), ax, -1)
        widths = cast(widths, yy.dtype)
    return red.sum(ew.mul(widths, ew.div(ew.add(lo, hi), np.asarray(2, yy.dtype))), axis=-1)


# --- polynomials and convolution ------------------------------------------------------------------------


def polyval(p: Any, x: Any) -> Any:
    cs, xs = promote(p, x)
    out = None
    for k in range(cs.shape[0]):
        c = _take_static(cs, k, 0)
        out = c if out is None else ew.add(ew.mul(out, xs), c)
    return sh.broadcast_to(out, np.broadcast_shapes(np.shape(out), xs.shape)) if out is not None else xs


def vander(x: Any, N: int | None = None, increasing: bool = False) -> Any:
    xs = asarray(x)
    xs = cast(xs, dtypes.result_type(xs, np.zeros((), np.int64)))
    n = xs.shape[0] if N is None else int(N)
    powers = range(n) if increasing else range(n - 1, -1, -1)
    cols = [ew.integer_pow(xs, k) for k in powers]
    return sh.concatenate([sh.reshape(c, (xs.shape[0], 1)) for c in cols], 1) if cols else np.zeros((xs.shape[0], 0))


def convolve(a: Any, v: Any, mode: str = "full") -> Any:
    """1-d discrete convolution: a gather of shifted windows of the zero-padded input, then a dot."""
    from fungraph.numpy._linalg import dot

    x, w = (asarray(t) for t in promote(a, v))
    if x.ndim != 1 or w.ndim != 1:
        raise ValueError("convolve: object too deep for desired array (1-d inputs only)")
    if x.shape[0] == 0 or w.shape[0] == 0:
        raise ValueError("convolve: inputs cannot be empty")
    if w.shape[0] > x.shape[0]:
        x, w = w, x
    n, m = x.shape[0], w.shape[0]
    padded = sh.pad(x, np.asarray(0, x.dtype), [(m - 1, m - 1, 0)])
    length = n + m - 1
    idx = np.arange(length)[:, None] + (m - 1) - np.arange(m)[None, :]
    full = dot(take_prim(padded, idx.astype(np.int64), 0), w)
    if mode == "full":
        return full
    if mode == "same":
        start = (m - 1) // 2
        return sh.slice_(full, (start,), (start + n,), None)
    if mode == "valid":
        return sh.slice_(full, (m - 1,), (n,), None)
    raise ValueError(f"convolve: mode {mode!r} not understood")


def correlate(a: Any, v: Any, mode: str = "valid") -> Any:
    """Cross-correlation; numpy swaps the operands (and reverses the result) when ``v`` is longer."""
    x, w = (asarray(t) for t in promote(a, v))
    if x.ndim == 1 and w.ndim == 1 and w.shape[0] > x.shape[0]:
        return sh.rev(convolve(w, sh.rev(x, (0,)), mode), (0,))
    return convolve(x, sh.rev(w, (0,)), mode)
