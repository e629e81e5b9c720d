"""Statistics of ``fungraph.numpy``: order statistics (quantiles, percentiles, medians, with and
without NaNs), NaN-aware reductions, averages, variances and correlations, and convolution."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Tracer, weak_array
from fungraph.numpy import _reductions as red
from fungraph.numpy._util import asarray, cast, namespace, nan_to, normalize_axes, promote, take_static
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh
from fungraph.primitives.indexing import take as take_prim
from fungraph.primitives.sorting import sort_p

# --- order statistics -----------------------------------------------------------------------------


def _any_nan(x: Any, axes: tuple[int, ...]) -> Any:
    return red.any(ew.ne_p.bind(x, x), axis=axes)


def quantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *, weights: Any = None) -> Any:
    """Quantiles by sorting: interpolated linearly (numpy's default method), the ``lower``,
    ``higher``, ``nearest`` (ties to the lower) neighbour or their ``midpoint``, or the first
    value whose cumulative (optionally ``weights``-weighted) count reaches ``q`` of the total
    (``inverted_cdf``), as JAX's; ``q`` is concrete."""
    if method not in _QUANTILE_METHODS:
        raise ValueError(f"quantile: method must be one of {', '.join(map(repr, _QUANTILE_METHODS))}, got {method!r}")
    if isinstance(q, Tracer):
        raise TypeError("quantile: q must be concrete")
    if weights is not None and method != "inverted_cdf":
        raise NotImplementedError(f"quantile: method {method!r} doesn't support weights; only 'inverted_cdf' does")
    (x,) = promote(a, to_inexact=True)
    if not isinstance(q, (int, float)):
        x = cast(x, dtypes.result_type(x, np.asarray(q, np.float64)))
    axes = normalize_axes(axis, x.ndim, "quantile")
    rest = [i for i in range(x.ndim) if i not in axes]
    n = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
    qs = np.asarray(q, np.float64)
    if (qs < 0).any() or (qs > 1).any():
        raise ValueError("Quantiles must be in the range [0, 1]")
    if method == "inverted_cdf":
        x, w = _quantile_weights(x, weights, axis, axes)
        flats = [sh.reshape(sh.transpose(v, rest + list(axes)), tuple(x.shape[i] for i in rest) + (n,)) for v in (x, w)]
        res = _inverted_cdf(flats[0], flats[1], qs)
        return _keep_quantile_dims(res, x.shape, axes, qs.shape, keepdims)
    moved = sh.transpose(x, rest + list(axes))
    flat = sh.reshape(moved, tuple(x.shape[i] for i in rest) + (n,))
    srt = sort_p.bind(flat, axis=len(rest))
    outs = []
    for qv in qs.reshape(-1):
        pos = qv * (n - 1)
        lo = int(np.floor(pos))
        hi = min(lo + 1, n - 1) if method == "linear" else int(np.ceil(pos))
        t = np.asarray(pos - lo, x.dtype)
        va, vb = take_static(srt, lo, len(rest)), take_static(srt, hi, len(rest))
        outs.append(_pick(method, va, vb, t))
    res = sh.concatenate([sh.reshape(o, (1,) + tuple(o.shape)) for o in outs], 0)
    res = sh.reshape(res, qs.shape + tuple(x.shape[i] for i in rest))
    nan = _any_nan(moved, tuple(range(len(rest), moved.ndim)))
    res = ew.select(nan, np.asarray(np.nan, x.dtype), res)
    return _keep_quantile_dims(res, x.shape, axes, qs.shape, keepdims)


def _keep_quantile_dims(res: Any, shape: tuple[int, ...], axes: tuple[int, ...], q_shape: tuple[int, ...],
                        keepdims: bool) -> Any:
    if not keepdims:
        return res
    return sh.reshape(res, q_shape + tuple(1 if i in axes else d for i, d in enumerate(shape)))


_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")


def _quantile_weights(x: Any, weights: Any, axis: Any, axes: tuple[int, ...]) -> tuple[Any, Any]:
    """``x`` and its weights (ones without any) in one inexact dtype and ``x``'s shape; weights of
    the reduced axes' shape are broadcast over the others, as JAX's."""
    if weights is None:
        return x, np.ones(x.shape, x.dtype)
    w = asarray(weights)
    if dtypes.is_complex(w.dtype):
        raise ValueError("quantile: weights cannot be complex")
    x, w = promote(x, w, to_inexact=True)
    if w.shape != x.shape:
        reduced = tuple(x.shape[i] for i in axes)
        if axis is None:
            raise ValueError(f"quantile: weights shape {w.shape} must match the shape {x.shape} of a when axis is None")
        if w.shape != reduced:
            raise ValueError(f"quantile: weights shape {w.shape} must match the reduction axes {reduced}")
        w = sh.broadcast_in_dim(w, x.shape, axes)
    return x, w


def _inverted_cdf(flat: Any, w: Any, qs: np.ndarray, skip_nans: bool = False) -> Any:
    """For each ``q``, the first sorted value of each row whose cumulative weight reaches ``q``
    times the row's total; NaN where the row has a negative or NaN weight, or a NaN (with
    ``skip_nans``: only NaNs, which then weigh nothing), as JAX's rule."""
    fnp = namespace()
    nan = fnp.isnan(flat)
    nan_row = fnp.any(nan, axis=-1, keepdims=True)
    filled = flat if skip_nans else fnp.where(nan_row, np.nan, flat)
    order = fnp.argsort(filled, axis=-1, stable=True)
    srt, sw = fnp.take_along_axis(filled, order, axis=-1), fnp.take_along_axis(w, order, axis=-1)
    bad = fnp.logical_or(sw < 0, fnp.isnan(sw))
    cum = fnp.cumsum(fnp.where(fnp.logical_or(bad, fnp.isnan(srt)), 0, sw), axis=-1)
    total = cum[..., -1:]
    valid = fnp.sum(~nan, axis=-1, keepdims=True, dtype=dtypes.default_int()) if skip_nans else flat.shape[-1]
    force_nan = fnp.logical_or(fnp.any(bad, axis=-1), (valid == 0)[..., 0] if skip_nans else nan_row[..., 0])
    outs = []
    for qv in qs.reshape(-1):
        target = fnp.multiply(np.asarray(qv, total.dtype), total)
        idx = fnp.sum(cum < target, axis=-1, keepdims=True, dtype=dtypes.default_int())
        idx = fnp.maximum(fnp.minimum(idx, valid - 1), 0)
        value = fnp.take_along_axis(srt, idx, axis=-1)[..., 0]
        outs.append(fnp.where(force_nan, np.nan, value))
    return fnp.reshape(fnp.stack(outs), qs.shape + flat.shape[:-1])


def _pick(method: str, va: Any, vb: Any, t: np.ndarray) -> Any:
    """The quantile between the sorted neighbours ``va`` and ``vb`` at fraction ``t`` past ``va``."""
    if method == "lower" or method == "nearest" and t <= 0.5:
        return va
    if method in ("higher", "nearest"):
        return vb
    if method == "midpoint":
        return ew.mul(ew.add(va, vb), np.asarray(0.5, t.dtype))
    diff = ew.sub(vb, va)
    return ew.select(np.asarray(t >= 0.5), ew.sub(vb, ew.mul(diff, np.asarray(1 - t, t.dtype))),
                     ew.add(va, ew.mul(diff, t)))


def percentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False, *, weights: Any = None) -> Any:
    """``quantile`` at ``q / 100``, computed as XLA compiles JAX's division: ``q * 0.01`` in
    ``q``'s float dtype (so ``percentile(x, 40., method="lower")`` in float32 is the element
    below ``quantile(x, 0.4, method="lower")``, as JAX's)."""
    if isinstance(q, Tracer):
        raise TypeError("percentile: q must be concrete")
    scalar = isinstance(q, (int, float))
    qa = np.asarray(q)
    dt = dtypes.default_float() if scalar else dtypes.float_dtype_for(dtypes.canonicalize(qa.dtype))
    scaled = np.asarray(qa, dt) * np.asarray(0.01, dt)
    return quantile(a, float(scaled) if scalar else scaled, axis, method=method, keepdims=keepdims, weights=weights)


def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False, keepdims: bool = False) -> Any:
    return quantile(a, 0.5, axis, keepdims=keepdims)


# --- NaN-aware reductions --------------------------------------------------------------------------


def nansum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Any:
    return red.sum(nan_to(asarray(a), 0), axis=axis, dtype=dtype, out=out, keepdims=keepdims, initial=initial,
                   where=where)


def nanprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            initial: Any = None, where: Any = None) -> Any:
    return red.prod(nan_to(asarray(a), 1), axis=axis, dtype=dtype, out=out, keepdims=keepdims, initial=initial,
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
           where: Any = None, mean: Any = None, correction: Any = None) -> Any:
    (x,) = promote(a, to_inexact=True)
    return red.var(x, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, where=_valid(x, where),
                   mean=mean, correction=correction)


def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False, *,
           where: Any = None, mean: Any = None, correction: Any = None) -> Any:
    return ew.sqrt_p.bind(nanvar(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, where=where,
                                 mean=mean, correction=correction))


def _nan_extremum(reducer: Any, fill: float) -> Any:
    def f(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, initial: Any = None,
          where: Any = None) -> Any:
        x = asarray(a)
        if not dtypes.is_float(x.dtype) or initial is not None or where is not None:
            return reducer(nan_to(x, fill) if dtypes.is_float(x.dtype) else x, axis=axis, out=out,
                           keepdims=keepdims, initial=initial, where=where)
        out = reducer(nan_to(x, fill), axis=axis, keepdims=keepdims)
        all_nan = red.all(ew.ne_p.bind(x, x), axis=axis, keepdims=keepdims)
        return ew.select(all_nan, np.asarray(np.nan, x.dtype), out)

    return f


nanmax = _nan_extremum(red.max, -np.inf)
nanmin = _nan_extremum(red.min, np.inf)


def nanargmax(a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
    x = asarray(a)
    return red.argmax(nan_to(x, -np.inf), axis=axis, keepdims=keepdims)


def nanargmin(a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
    x = asarray(a)
    return red.argmin(nan_to(x, np.inf), axis=axis, keepdims=keepdims)


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


def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: int | None = None,
        fweights: Any = None, aweights: Any = None, dtype: Any = None) -> Any:
    """The covariance of the rows (``rowvar``) or columns of ``m`` (and ``y``), as JAX's: with
    integer frequency weights ``fweights`` and observation weights ``aweights`` (their absolute
    values, as JAX takes them), computed in ``dtype`` when given."""
    from fungraph.numpy._linalg import matmul
    from fungraph.numpy._manip import atleast_2d

    if dtype is not None and not dtypes.is_inexact(np.dtype(dtype)):
        raise ValueError(f"cov: dtype must be a subclass of float or complex; got dtype={dtype}")
    x = asarray(m) if y is None else promote(m, y)[0]
    wide = dtypes.float_dtype_for(x.dtype)
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
    w, aw = _cov_weights(fweights, aweights, n)
    if dtype is not None:
        x = cast(x, dtypes.canonicalize(dtype, "astype"))
        w = None if w is None else cast(w, x.dtype)
    if w is not None:
        return _weighted_cov(x, w, aw, ddof)
    centered = ew.sub(x, red.mean(x, axis=1, keepdims=True))
    right = ew.conj(centered) if dtypes.is_complex(x.dtype) else centered
    c = ew.div(matmul(centered, sh.transpose(right, (1, 0))), np.asarray(n - ddof, x.dtype))
    return sh.reshape(c, ()) if c.shape == (1, 1) else c


def _cov_weights(fweights: Any, aweights: Any, n: int) -> tuple[Any, Any]:
    """The product of ``|fweights|`` and ``|aweights|`` (None without either), and ``|aweights|``."""
    fnp = namespace()
    w = aw = None
    for name, given in (("fweights", fweights), ("aweights", aweights)):
        if given is None:
            continue
        v = asarray(given)
        if v.ndim > 1:
            raise RuntimeError(f"cov: cannot handle multidimensional {name} (shape {v.shape})")
        if v.shape[0] != n:
            raise RuntimeError(f"cov: incompatible numbers of samples ({n}) and {name} ({v.shape[0]})")
        if name == "fweights" and not dtypes.is_int(v.dtype):
            raise TypeError(f"cov: fweights must be integer, got {v.dtype}")
        v = fnp.abs(v)
        if name == "aweights":
            aw = v
        w = v if w is None else fnp.multiply(w, v)
    return w, aw


def _weighted_cov(x: Any, w: Any, aw: Any, ddof: int) -> Any:
    """JAX's weighted covariance: deviations from the weighted mean, normalised by the sum of the
    weights less ``ddof`` times the ``aweights``-weighted mean weight."""
    fnp = namespace()
    avg, w_sum = average(x, axis=1, weights=w, returned=True)
    w_sum = w_sum[0]
    if ddof == 0:
        f = w_sum
    elif aw is None:
        f = w_sum - ddof
    else:
        f = w_sum - ddof * fnp.sum(w * aw) / w_sum
    centered = x - avg[:, None]
    c = fnp.true_divide(fnp.dot(centered, fnp.conj(centered * w[None, :]).T), f)
    return fnp.squeeze(c)


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


# --- convolution and correlation ------------------------------------------------------------------------


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
    zero = np.asarray(0, x.dtype)
    padded = sh.pad(x, weak_array(zero) if dtypes.is_weak(x) else zero, [(m - 1, m - 1, 0)])
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


# --- NaN-ignoring quantiles -----------------------------------------------------------------------


def nanquantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False, *, weights: Any = None) -> Any:
    """``quantile`` of the non-NaN entries of each slice (NaN where a slice has none), by any of
    ``quantile``'s methods (``weights`` with ``inverted_cdf``): NaNs sort last, so the quantile
    of the first ``count`` sorted entries is read by a gather."""
    fnp = namespace()
    if method not in _QUANTILE_METHODS:
        raise ValueError(f"nanquantile: method must be one of {', '.join(map(repr, _QUANTILE_METHODS))}, "
                         f"got {method!r}")
    if weights is not None and method != "inverted_cdf":
        raise NotImplementedError(f"nanquantile: method {method!r} doesn't support weights; only 'inverted_cdf' does")
    if isinstance(q, Tracer):
        raise TypeError("nanquantile: q must be concrete")
    qs = np.asarray(q, np.float64)
    if (qs < 0).any() or (qs > 1).any():
        raise ValueError("Quantiles must be in the range [0, 1]")
    x = asarray(a)
    if not dtypes.is_inexact(x.dtype) or not isinstance(q, (int, float)):
        x = x.astype(np.promote_types(x.dtype, np.float64))
    axes = normalize_axes(axis, x.ndim, "nanquantile")
    rest = [i for i in range(x.ndim) if i not in axes]
    if method == "inverted_cdf":
        x, w = _quantile_weights(x, weights, axis, axes)
        flats = [fnp.reshape(fnp.transpose(v, rest + list(axes)), tuple(x.shape[i] for i in rest) + (-1,))
                 for v in (x, w)]
        res = _inverted_cdf(flats[0], flats[1], qs, skip_nans=True)
        return _keep_quantile_dims(res, x.shape, axes, qs.shape, keepdims)
    flat = fnp.reshape(fnp.transpose(x, rest + list(axes)), tuple(x.shape[i] for i in rest) + (-1,))
    srt = fnp.sort(flat, axis=-1)
    count = fnp.sum(~fnp.isnan(flat), axis=-1, keepdims=True)
    last = fnp.maximum(count - 1, 0)
    outs = []
    for qv in qs.reshape(-1):
        pos = float(qv) * last.astype(x.dtype)
        lo = fnp.floor(pos).astype(np.int64)
        t = pos - lo.astype(x.dtype)
        va = fnp.take_along_axis(srt, lo, -1, mode="clip")
        if method == "linear":
            vb = fnp.take_along_axis(srt, fnp.minimum(lo + 1, last), -1, mode="clip")
            val = fnp.where(t >= 0.5, vb - (vb - va) * (1 - t), va + (vb - va) * t)
        else:
            vb = fnp.take_along_axis(srt, fnp.ceil(pos).astype(np.int64), -1, mode="clip")
            val = {"lower": va, "higher": vb, "nearest": fnp.where(t <= 0.5, va, vb),
                   "midpoint": (va + vb) * np.asarray(0.5, x.dtype)}[method]
        outs.append(fnp.where(count > 0, val, np.nan)[..., 0])
    res = fnp.reshape(fnp.stack(outs), qs.shape + tuple(x.shape[i] for i in rest))
    return _keep_quantile_dims(res, x.shape, axes, qs.shape, keepdims)


def nanpercentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False, *, weights: Any = None) -> Any:
    return nanquantile(a, np.asarray(q, np.float64) / 100, axis, method=method, keepdims=keepdims, weights=weights)


def nanmedian(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False, keepdims: bool = False) -> Any:
    return nanquantile(a, 0.5, axis, keepdims=keepdims)
