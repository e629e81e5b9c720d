"""More of numpy's API as JAX's ``jax.numpy`` offers it: counting and histograms, NaN-ignoring
quantiles, ordering helpers, functional index updates (``inplace=False``), integer bit
operations and polynomial arithmetic. Everything is a composition of the public functions, so
jit, grad and vmap work as they do for those; results whose size depends on the data take
``size=`` (or ``length=``) under a trace, as in JAX."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Tracer
from fungraph.numpy._util import asarray, normalize_axes, promote


def _fnp() -> Any:
    import fungraph.numpy as fnp

    return fnp


def _concrete(x: Any) -> bool:
    return not isinstance(x, Tracer)


def _int_array(x: Any, name: str) -> Any:
    a = asarray(x)
    if not (dtypes.is_int(a.dtype) or a.dtype == dtypes.bool_):
        raise TypeError(f"{name}: needs integer operands, got {a.dtype}")
    return a


# --- counting and histograms -------------------------------------------------------------------


def bincount(x: Any, weights: Any = None, minlength: int = 0, *, length: int | None = None) -> Any:
    """Counts (or summed ``weights``) of each non-negative integer in the 1-d ``x``. Under a trace
    the result's length must be given as ``length`` (values at or past it are dropped, as in
    JAX); on concrete input it is ``max(x) + 1`` or ``minlength``, whichever is larger. Summed
    weights keep their dtype, as in JAX (numpy widens them to float64)."""
    fnp = _fnp()
    xs = _int_array(x, "bincount")
    if xs.ndim != 1:
        raise ValueError(f"bincount: x must be 1-d, got shape {xs.shape}")
    if length is None:
        if not _concrete(xs):
            raise TypeError("bincount: the result's length depends on the values of a traced x; pass length= "
                            "(a bound on the values; larger ones are dropped)")
        xv = np.asarray(xs)
        if xv.size and xv.min() < 0:
            raise ValueError("bincount: x must be non-negative")
        length = max(int(xv.max()) + 1 if xv.size else 0, int(minlength))
    w = fnp.ones(xs.shape, np.int64) if weights is None else asarray(weights)
    if weights is not None and tuple(w.shape) != tuple(xs.shape):
        raise ValueError(f"bincount: weights shape {w.shape} differs from x's {xs.shape}")
    dt = dtypes.int64 if weights is None or w.dtype == dtypes.bool_ else w.dtype
    idx = fnp.where((xs >= 0) & (xs < length), xs, length)
    return fnp.at(fnp.zeros(int(length) + 1, dt))[idx].add(w.astype(dt))[:int(length)]


def histogram_bin_edges(a: Any, bins: Any = 10, range: Any = None, weights: Any = None) -> Any:  # noqa: A002
    """``bins + 1`` equal-width edges over ``range`` (default: the data's min and max), or the
    given edges; string rules such as ``'auto'`` are not supported."""
    fnp = _fnp()
    if isinstance(bins, str):
        raise NotImplementedError(f"histogram_bin_edges: bins={bins!r} is not supported; pass a count or edges")
    if np.ndim(bins) == 1:
        return asarray(bins)
    x = asarray(a)
    x = x.astype(np.promote_types(x.dtype, np.float64)) if not dtypes.is_float(x.dtype) else x
    lo, hi = (fnp.min(x), fnp.max(x)) if range is None else (fnp.asarray(range[0], x.dtype),
                                                             fnp.asarray(range[1], x.dtype))
    if range is not None and _concrete(lo) and _concrete(hi) and float(lo) > float(hi):
        raise ValueError("histogram: max must be larger than min in range parameter")
    same = lo == hi
    lo, hi = fnp.where(same, lo - 0.5, lo), fnp.where(same, hi + 0.5, hi)
    n = int(bins)
    steps = np.arange(n + 1, dtype=x.dtype)
    edges = lo + (hi - lo) / n * steps
    return fnp.where(steps == n, hi, edges)


def histogram(a: Any, bins: Any = 10, range: Any = None, density: Any = None,  # noqa: A002
              weights: Any = None) -> tuple[Any, Any]:
    """(counts, edges) of the flattened ``a`` as numpy computes them: bins closed on the left,
    the last one on both sides, values outside the edges not counted."""
    fnp = _fnp()
    x = fnp.ravel(asarray(a))
    edges = histogram_bin_edges(x, bins, range)
    nb = edges.shape[0] - 1
    which = fnp.searchsorted(edges, x, side="right") - 1
    which = fnp.where(x == edges[-1], nb - 1, which)
    inside = (which >= 0) & (which < nb)
    w = fnp.ones(x.shape, np.int64) if weights is None else fnp.ravel(asarray(weights))
    counts = bincount(fnp.where(inside, which, nb), w, length=nb + 1)[:nb]
    if density:
        counts = counts / fnp.sum(counts) / fnp.diff(edges)
    return counts, edges


# --- NaN-ignoring quantiles ----------------------------------------------------------------------


def nanquantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False) -> Any:
    """``quantile`` of the non-NaN entries of each slice (NaN where a slice has none): NaNs sort
    last, so the quantile of the first ``count`` sorted entries is read by a gather."""
    fnp = _fnp()
    if method != "linear":
        raise NotImplementedError(f"nanquantile: method {method!r} is not supported (only 'linear')")
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
    flat = fnp.reshape(fnp.transpose(x, rest + list(axes)), tuple(x.shape[i] for i in rest) + (-1,))
    srt = fnp.sort(flat, axis=-1)
    count = fnp.sum(~fnp.isnan(flat), axis=-1, keepdims=True)
    last = fnp.maximum(count - 1, 0)
    outs = []
    for qv in qs.reshape(-1):
        pos = float(qv) * last.astype(x.dtype)
        lo = fnp.floor(pos).astype(np.int64)
        hi = fnp.minimum(lo + 1, last)
        t = pos - lo.astype(x.dtype)
        va, vb = fnp.take_along_axis(srt, lo, -1, mode="clip"), fnp.take_along_axis(srt, hi, -1, mode="clip")
        val = fnp.where(t >= 0.5, vb - (vb - va) * (1 - t), va + (vb - va) * t)
        outs.append(fnp.where(count > 0, val, np.nan)[..., 0])
    res = fnp.reshape(fnp.stack(outs), qs.shape + tuple(x.shape[i] for i in rest))
    if keepdims:
        res = fnp.reshape(res, qs.shape + tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
    return res


def nanpercentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False) -> Any:
    return nanquantile(a, np.asarray(q, np.float64) / 100, axis, method=method, keepdims=keepdims)


def nanmedian(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False, keepdims: bool = False) -> Any:
    return nanquantile(a, 0.5, axis, keepdims=keepdims)


# --- ordering and reshaping helpers ----------------------------------------------------------------


def lexsort(keys: Any, axis: int = -1) -> Any:
    """Indices that sort by the last key, ties broken by the one before it, and so on (stable)."""
    fnp = _fnp()
    ks = [asarray(k) for k in keys] if isinstance(keys, (tuple, list)) else list(fnp.unstack(asarray(keys)))
    if not ks:
        raise TypeError("lexsort: need at least one key")
    order = fnp.argsort(ks[0], axis=axis, stable=True)
    for k in ks[1:]:
        step = fnp.argsort(fnp.take_along_axis(k, order, axis, mode="clip"), axis=axis, stable=True)
        order = fnp.take_along_axis(order, step, axis, mode="clip")
    return order


def unstack(x: Any, /, *, axis: int = 0) -> tuple[Any, ...]:
    """The slices of ``x`` along ``axis``, as a tuple."""
    fnp = _fnp()
    a = asarray(x)
    if a.ndim == 0:
        raise ValueError("unstack: x must have at least one dimension")
    return tuple(fnp.moveaxis(a, axis, 0)[i] for i in range(a.shape[axis]))


def tril_indices_from(arr: Any, k: int = 0) -> tuple[np.ndarray, ...]:
    shape = np.shape(arr)
    if len(shape) != 2:
        raise ValueError(f"tril_indices_from: input array must be 2-d, got shape {shape}")
    return _fnp().tril_indices(shape[0], k, shape[1])


def triu_indices_from(arr: Any, k: int = 0) -> tuple[np.ndarray, ...]:
    shape = np.shape(arr)
    if len(shape) != 2:
        raise ValueError(f"triu_indices_from: input array must be 2-d, got shape {shape}")
    return _fnp().triu_indices(shape[0], k, shape[1])


def block(arrays: Any) -> Any:
    """Assemble an array from nested lists of blocks: the innermost lists join along the last
    axis, the next level along the one before it, and so on."""
    fnp = _fnp()

    def depth(x: Any) -> int:
        return 1 + depth(x[0]) if isinstance(x, list) and x else 0

    levels = depth(arrays)
    if isinstance(arrays, tuple):
        raise TypeError("block: arrays must be nested lists (tuples are not accepted, as in numpy)")

    def build(x: Any, level: int) -> Any:
        if not isinstance(x, list):
            return asarray(x)
        if not x:
            raise ValueError("block: lists cannot be empty")
        parts = [build(p, level + 1) for p in x]
        ndim = max(levels, *(p.ndim for p in parts))
        parts = [fnp.reshape(p, (1,) * (ndim - p.ndim) + tuple(p.shape)) for p in parts]
        return fnp.concatenate(parts, axis=level - levels)

    return build(arrays, 0)


def sort_complex(a: Any) -> Any:
    """``a`` sorted by real part, then imaginary part, as a complex array (complex64 for
    float32 input, as in JAX; numpy always gives complex128)."""
    x = asarray(a)
    return _fnp().sort(x if dtypes.is_complex(x.dtype) else x.astype(np.promote_types(x.dtype, np.complex64)))


# --- selections and functional index updates ----------------------------------------------------------


def compress(condition: Any, a: Any, axis: int | None = None, *, size: int | None = None,
             fill_value: Any = 0, out: Any = None) -> Any:
    """The slices of ``a`` along ``axis`` (the flattened ``a`` when None) where the 1-d
    ``condition`` holds; a traced condition needs ``size`` (padded with ``fill_value``)."""
    fnp = _fnp()
    if out is not None:
        raise NotImplementedError("compress: out= is not supported")
    x = asarray(a)
    if axis is None:
        x, axis = fnp.ravel(x), 0
    cond = fnp.ravel(asarray(condition)).astype(bool)
    n = x.shape[axis]
    if cond.shape[0] > n:
        raise IndexError(f"compress: condition has {cond.shape[0]} entries for an axis of length {n}")
    if size is None and _concrete(cond):
        return fnp.take(x, np.nonzero(np.asarray(cond))[0], axis=axis)
    if size is None:
        raise TypeError("compress: the result's size depends on a traced condition; pass size=")
    cond = fnp.pad(cond, (0, n - cond.shape[0]))
    (idx,) = fnp.nonzero(cond, size=size, fill_value=n)
    taken = fnp.take(x, fnp.minimum(idx, n - 1), axis=axis, mode="clip")
    shape = [1] * x.ndim
    shape[axis % x.ndim] = size
    return fnp.where(fnp.reshape(idx < n, shape), taken, fnp.asarray(fill_value, x.dtype))


def extract(condition: Any, arr: Any, *, size: int | None = None, fill_value: Any = 0) -> Any:
    """The entries of the flattened ``arr`` where the flattened ``condition`` holds."""
    return compress(_fnp().ravel(asarray(condition)), arr, None, size=size, fill_value=fill_value)


def choose(a: Any, choices: Any, out: Any = None, mode: str = "raise") -> Any:
    """``choices[a[i]][i]`` for every ``i`` (all broadcast together); ``mode`` 'wrap' or 'clip'
    maps indices out of range, 'raise' refuses them on concrete input and clips traced ones."""
    fnp = _fnp()
    if out is not None:
        raise NotImplementedError("choose: out= is not supported")
    idx = _int_array(a, "choose")
    cs = [asarray(c) for c in choices]
    n = len(cs)
    if mode == "raise":
        if _concrete(idx) and np.size(idx) and (np.min(idx) < 0 or np.max(idx) >= n):
            raise ValueError(f"choose: invalid entry in choice array (indices must lie in [0, {n}))")
        idx = fnp.clip(idx, 0, n - 1)
    elif mode == "wrap":
        idx = idx % n
    elif mode == "clip":
        idx = fnp.clip(idx, 0, n - 1)
    else:
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    stacked = fnp.stack(fnp.broadcast_arrays(*cs, idx)[:-1])
    idx = fnp.broadcast_to(idx, stacked.shape[1:])
    return fnp.take_along_axis(stacked, idx[None], 0, mode="clip")[0]


def _inplace_refused(name: str, inplace: bool) -> None:
    if inplace:
        raise ValueError(f"{name}: fungraph's arrays are immutable, so the update cannot be made in place; "
                         f"pass inplace=False to get the updated array back (as JAX requires)")


def fill_diagonal(a: Any, val: Any, wrap: bool = False, *, inplace: bool = True) -> Any:
    """``a`` with ``val`` written along its main diagonal (repeated cyclically); every axis of
    an array of rank > 2 must have the same length. ``wrap`` restarts a tall matrix's diagonal
    after each ``n + 1`` rows, as numpy does."""
    _inplace_refused("fill_diagonal", inplace)
    fnp = _fnp()
    x = asarray(a)
    if x.ndim < 2:
        raise ValueError("fill_diagonal: array must be at least 2-d")
    if x.ndim > 2 and len(set(x.shape)) != 1:
        raise ValueError(f"fill_diagonal: all dimensions of input must be of equal length, got {x.shape}")
    if x.ndim == 2:
        rows, cols = x.shape
        step = cols + 1
        end = rows * cols if wrap else min(rows, cols) * cols
        flat_idx = np.arange(0, end, step)
    else:
        flat_idx = np.arange(x.shape[0]) * sum(int(np.prod(x.shape[i + 1:])) for i in range(x.ndim))
    v = fnp.ravel(fnp.asarray(val, x.dtype))
    if v.shape[0] == 0:
        return x
    vals = fnp.take(v, np.arange(flat_idx.size) % v.shape[0])
    return fnp.reshape(fnp.at(fnp.ravel(x))[flat_idx].set(vals), x.shape)


def put_along_axis(arr: Any, indices: Any, values: Any, axis: int | None, inplace: bool = True, *,
                   mode: Any = None) -> Any:
    """``arr`` with ``values`` written where ``take_along_axis(arr, indices, axis)`` reads; a
    position named twice takes the later write, as numpy's loop does. Indices may be traced:
    each slice compares its ``K`` indices with its ``N`` positions (O(K N) work)."""
    _inplace_refused("put_along_axis", inplace)
    fnp = _fnp()
    x = asarray(arr)
    idx = _int_array(indices, "put_along_axis")
    if axis is None:
        x, axis, idx = fnp.ravel(x), 0, fnp.ravel(idx)
    if idx.ndim != x.ndim:
        raise ValueError(f"put_along_axis: indices of rank {idx.ndim} for an array of rank {x.ndim}")
    ax = axis % x.ndim
    n = x.shape[ax]
    xm, im = fnp.moveaxis(x, ax, -1), fnp.moveaxis(idx, ax, -1)
    im = fnp.broadcast_to(im, xm.shape[:-1] + im.shape[-1:])
    vm = fnp.broadcast_to(fnp.moveaxis(fnp.broadcast_to(fnp.asarray(values, x.dtype), idx.shape), ax, -1), im.shape)
    im = fnp.where(im < 0, im + n, im)
    k = im.shape[-1]
    hits = im[..., :, None] == np.arange(n)
    last = fnp.max(fnp.where(hits, np.arange(k)[:, None], -1), axis=-2)
    new = fnp.take_along_axis(vm, fnp.maximum(last, 0), -1, mode="clip")
    return fnp.moveaxis(fnp.where(last >= 0, new, xm), -1, ax)


# --- integers ------------------------------------------------------------------------------------


def _int_pair(x1: Any, x2: Any, name: str) -> tuple[Any, Any]:
    """Both integer operands broadcast to their promoted dtype (a Python int is weak, NEP 50:
    ``int32_array >> 1`` stays int32)."""
    _int_array(x1, name), _int_array(x2, name)
    a, b = promote(x1, x2)
    return tuple(_fnp().broadcast_arrays(asarray(a), asarray(b)))


def gcd(x1: Any, x2: Any) -> Any:
    """The greatest common divisor, non-negative (Euclid's algorithm as a while_loop over the
    whole array, at most ~90 steps for int64)."""
    from fungraph import lax

    fnp = _fnp()
    a, b = _int_pair(x1, x2, "gcd")
    a, b = fnp.abs(a), fnp.abs(b)

    def step(c: tuple) -> tuple:
        p, q = c
        nz = q != 0
        return fnp.where(nz, q, p), fnp.where(nz, p % fnp.where(nz, q, 1), 0)

    return lax.while_loop(lambda c: fnp.any(c[1] != 0), step, (a, b))[0]


def lcm(x1: Any, x2: Any) -> Any:
    """The least common multiple, non-negative; 0 when either operand is 0."""
    fnp = _fnp()
    a, b = _int_pair(x1, x2, "lcm")
    g = gcd(a, b)
    return fnp.where(g == 0, 0, fnp.abs(a // fnp.where(g == 0, 1, g) * b))


def left_shift(x1: Any, x2: Any) -> Any:
    """``x1 << x2`` for integers (as multiplication by 2**x2 in the operands' type: the bits
    shifted out are lost, as in C); shifts of the type's width or more give 0."""
    fnp = _fnp()
    a, b = _int_pair(x1, x2, "left_shift")
    bits = np.dtype(a.dtype).itemsize * 8
    ok = (b >= 0) & (b < bits)
    return fnp.where(ok, a * _pow2(fnp.where(ok, b, 0), a.dtype), 0)


def right_shift(x1: Any, x2: Any) -> Any:
    """``x1 >> x2`` for integers (fungraph's are signed): arithmetic, i.e. floor division by
    2**x2; shifts past the type's width give 0, or -1 for negative values."""
    fnp = _fnp()
    a, b = _int_pair(x1, x2, "right_shift")
    ok = (b >= 0) & (b < np.dtype(a.dtype).itemsize * 8 - 1)
    return fnp.where(ok, a // _pow2(fnp.where(ok, b, 0), a.dtype), fnp.where(a < 0, -1, 0).astype(a.dtype))


def _pow2(n: Any, dtype: Any) -> Any:
    """2**n in ``dtype`` for 0 <= n < its width, by squaring (exact, no float round trip)."""
    fnp = _fnp()
    out = fnp.ones(np.shape(n), dtype)
    base = fnp.full(np.shape(n), 2, dtype)
    bits = np.dtype(dtype).itemsize * 8
    for k in range(bits.bit_length()):
        out = fnp.where((n // (1 << k)) % 2 == 1, out * base, out)
        base = base * base
    return out


# --- signal and polynomials ------------------------------------------------------------------------


def i0(x: Any) -> Any:
    """The modified Bessel function of the first kind, order 0 (``scipy.special.i0``)."""
    from fungraph.scipy.special import i0 as _i0

    return _i0(x)


def kaiser(M: int, beta: float) -> Any:
    """The Kaiser window of ``M`` points."""
    fnp = _fnp()
    if M < 1:
        return fnp.zeros((0,), np.float64)
    if M == 1:
        return fnp.ones((1,), np.float64)
    n = np.arange(M, dtype=np.float64)
    alpha = (M - 1) / 2.0
    b = fnp.asarray(beta, np.float64)
    return i0(b * fnp.sqrt(1 - ((n - alpha) / alpha) ** 2)) / i0(b)


def unwrap(p: Any, discont: Any = None, axis: int = -1, *, period: float = 2 * np.pi) -> Any:
    """``p`` with jumps larger than ``max(discont, period/2)`` between neighbours along ``axis``
    replaced by their ``period``-complement."""
    fnp = _fnp()
    x = asarray(p)
    x = x.astype(np.promote_types(x.dtype, np.float64)) if not dtypes.is_float(x.dtype) else x
    half = period / 2
    disc = half if discont is None else discont
    dd = fnp.diff(x, axis=axis)
    ddmod = (dd + half) % period - half
    ddmod = fnp.where((ddmod == -half) & (dd > 0), half, ddmod)
    correction = fnp.where(fnp.abs(dd) < disc, 0, ddmod - dd)
    zero = fnp.zeros_like(fnp.take(x, np.array([0]), axis=axis))
    return x + fnp.concatenate([zero, fnp.cumsum(correction, axis=axis)], axis=axis)


def _poly(p: Any, name: str) -> Any:
    c = asarray(p)
    if c.ndim != 1:
        raise ValueError(f"{name}: polynomial coefficients must be 1-d, got shape {c.shape}")
    return c


def polyadd(a1: Any, a2: Any) -> Any:
    """The sum of two polynomials (coefficients highest power first)."""
    fnp = _fnp()
    a, b = _poly(a1, "polyadd"), _poly(a2, "polyadd")
    n = max(a.shape[0], b.shape[0])
    return fnp.pad(a, (n - a.shape[0], 0)) + fnp.pad(b, (n - b.shape[0], 0))


def polysub(a1: Any, a2: Any) -> Any:
    return polyadd(a1, -_poly(a2, "polysub"))


def polymul(a1: Any, a2: Any) -> Any:
    """The product of two polynomials: the full convolution of their coefficients."""
    return _fnp().convolve(_poly(a1, "polymul"), _poly(a2, "polymul"))


def polyder(p: Any, m: int = 1) -> Any:
    """The ``m``-th derivative of a polynomial (empty once ``m`` exceeds its degree)."""
    c = _poly(p, "polyder")
    if m < 0:
        raise ValueError("polyder: order of derivative must be non-negative")
    c = c.astype(np.promote_types(c.dtype, np.int64)) if c.dtype == dtypes.bool_ else c
    for _ in range(m):
        n = c.shape[0] - 1
        c = c[:-1] * np.arange(n, 0, -1).astype(c.dtype) if n > 0 else c[:0]
    return c


def polyint(p: Any, m: int = 1, k: Any = None) -> Any:
    """The ``m``-th antiderivative of a polynomial, with integration constants ``k`` (one per
    integration, the first integration's first; zeros by default)."""
    fnp = _fnp()
    c = _poly(p, "polyint")
    if m < 0:
        raise ValueError("polyint: order of integral must be non-negative")
    c = c.astype(np.promote_types(c.dtype, np.float64)) if not dtypes.is_inexact(c.dtype) else c
    ks = np.zeros(m) if k is None else np.broadcast_to(np.asarray(k, np.float64) if _concrete(k) else k, (m,))
    for j in range(m):
        n = c.shape[0]
        c = fnp.concatenate([c / np.arange(n, 0, -1).astype(c.dtype), fnp.reshape(fnp.asarray(ks[j], c.dtype), (1,))])
    return c


def asanyarray(a: Any, dtype: Any = None, order: Any = None) -> Any:
    return _fnp().asarray(a, dtype=dtype)


def ascontiguousarray(a: Any, dtype: Any = None) -> Any:
    """Every fungraph array is contiguous as far as a program can tell: this is ``asarray``."""
    return _fnp().asarray(a, dtype=dtype)



# --- unique values -------------------------------------------------------------------------------


def _runs(flat: Any, equal_nan: bool) -> tuple[Any, Any, Any]:
    """(stable sorting permutation, sorted values, mask of the first entry of each run of equal
    sorted values); NaNs form one run when ``equal_nan``."""
    fnp = _fnp()
    perm = fnp.argsort(flat)
    srt = flat[perm]
    same = srt[1:] == srt[:-1]
    if equal_nan and dtypes.is_inexact(flat.dtype):
        same = same | (fnp.isnan(srt[1:]) & fnp.isnan(srt[:-1]))
    return perm, srt, fnp.concatenate([np.ones(1, bool), ~same])


def _select(srt: Any, keep: Any, size: int, fill_value: Any) -> tuple[Any, Any, Any]:
    """The first ``size`` entries (or rows) of ``srt`` where ``keep`` holds, padded with ``fill_value``
    (default, as in JAX: the first entry kept, 0 when none is), with their positions (clamped)
    and which are real."""
    fnp = _fnp()
    n = srt.shape[0]
    (pos,) = fnp.nonzero(keep, size=size, fill_value=n)
    valid, at = pos < n, fnp.minimum(pos, n - 1)
    picked = srt[at]
    if fill_value is None:
        fill = fnp.where(valid[0], picked[0], 0) if size else srt[0]
    else:
        fill = fnp.asarray(fill_value, srt.dtype)
    return fnp.where(fnp.reshape(valid, valid.shape + (1,) * (srt.ndim - 1)), picked, fill), at, valid


def unique(ar: Any, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: int | None = None, *, equal_nan: bool = True, size: int | None = None,
           fill_value: Any = None, sorted: bool = True) -> Any:  # noqa: A002  (numpy's keyword)
    """The sorted unique values of the flattened ``ar`` (and, as asked, the index of each one's
    first occurrence, the inverse map with ``ar``'s shape, and the counts). Under a trace the
    number of values must be given as ``size``, as in JAX: the result is cut or padded to it,
    values with ``fill_value`` (default: the smallest value), indices with the smallest
    value's index, counts with 0. Eagerly ``size`` defaults to the number of unique values.
    With ``axis`` (of an array of two or more dimensions), the unique slices along it, as
    numpy: sorted lexicographically, a slice holding a NaN never equal to another, the
    inverse map one-dimensional."""
    fnp = _fnp()
    x = asarray(ar)
    if axis is not None and x.ndim != 1:
        return _unique_slices(x, axis, (return_index, return_inverse, return_counts), size, fill_value)
    if axis is not None:
        normalize_axes(axis, 1, "unique")                               # 1-d: the flat path, as numpy
    flat = fnp.ravel(x)
    n = flat.shape[0]
    if size is None:
        if not _concrete(flat):
            raise TypeError("unique: the number of unique values depends on a traced array; pass size= "
                            "(the result is cut or padded to it)")
        size = len(np.unique(np.asarray(flat), equal_nan=equal_nan)) if n else 0
    want = (return_index, return_inverse, return_counts)
    if n == 0:
        return _unique_outputs(None, None, None, size, fill_value, want, lambda _: fnp.zeros((size,), x.dtype),
                               x.shape)
    perm, srt, first = _runs(flat, equal_nan)
    return _unique_outputs(srt, perm, first, size, fill_value, want, lambda v: v, x.shape)


def _unique_outputs(srt: Any, perm: Any, first: Any, size: int, fill_value: Any, want: tuple[bool, bool, bool],
                    values_of: Any, inverse_shape: tuple[int, ...]) -> Any:
    """:func:`unique`'s results from the sorted entries (or rows) ``srt``, the sorting
    permutation ``perm`` and the mask ``first`` of each run's first entry (``srt`` None: no
    entries): ``values_of`` the selected values, then as ``want`` asks the index of each
    one's first occurrence, the inverse map (of ``inverse_shape``) and the counts."""
    fnp = _fnp()
    return_index, return_inverse, return_counts = want
    if srt is None:
        zeros = fnp.zeros((size,), np.int64)
        out = [values_of(None)] + [zeros] * return_index + [fnp.zeros(inverse_shape, np.int64)] * return_inverse \
            + [zeros] * return_counts
        return out[0] if len(out) == 1 else tuple(out)
    values, at, valid = _select(srt, first, size, fill_value)
    out = [values_of(values)]
    if return_index:
        out.append(fnp.where(valid, fnp.take(perm, at, mode="clip"), perm[0]))
    group = fnp.cumsum(first.astype(np.int64)) - 1
    if return_inverse:
        out.append(fnp.reshape(group[fnp.argsort(perm)], inverse_shape))
    if return_counts:
        out.append(bincount(group, length=size))
    return out[0] if len(out) == 1 else tuple(out)


def _unique_slices(x: Any, axis: int, want: tuple[bool, bool, bool], size: int | None, fill_value: Any) -> Any:
    """:func:`unique` along ``axis``: the slices as rows, sorted by :func:`lexsort` (first
    element first), a run of equal rows kept once."""
    fnp = _fnp()
    if x.ndim == 0:
        raise ValueError(f"unique: axis {axis} is out of bounds for a 0-d array")
    (ax,) = normalize_axes(axis, x.ndim, "unique")
    moved = fnp.moveaxis(x, ax, 0)
    n = moved.shape[0]
    rows = fnp.reshape(moved, (n, int(np.prod(moved.shape[1:], dtype=np.int64))))
    if size is None:
        if not _concrete(x):
            raise TypeError("unique: the number of unique slices depends on a traced array; pass size= "
                            "(the result is cut or padded to it)")
        size = np.unique(np.asarray(x), axis=ax).shape[ax]
    def values_of(values: Any) -> Any:
        values = fnp.zeros((size,) + moved.shape[1:], x.dtype) if values is None else values
        return fnp.moveaxis(fnp.reshape(values, (size,) + moved.shape[1:]), 0, ax)

    if n == 0:
        return _unique_outputs(None, None, None, size, fill_value, want, values_of, (0,))
    cols = rows.shape[1]
    perm = lexsort([rows[:, j] for j in reversed(range(cols))]) if cols else fnp.arange(n)
    srt = rows[perm]
    first = fnp.concatenate([np.ones(1, bool), ~fnp.all(srt[1:] == srt[:-1], axis=1)])
    return _unique_outputs(srt, perm, first, size, fill_value, want, values_of, (n,))


def unique_values(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The array API's ``unique_values``: NaNs count as distinct values, as in numpy."""
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


def unique_counts(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    from collections import namedtuple

    values, counts = unique(x, return_counts=True, equal_nan=False, size=size, fill_value=fill_value)
    return namedtuple("UniqueCountsResult", ["values", "counts"])(values, counts)


def unique_inverse(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    from collections import namedtuple

    values, inverse = unique(x, return_inverse=True, equal_nan=False, size=size, fill_value=fill_value)
    return namedtuple("UniqueInverseResult", ["values", "inverse_indices"])(values, inverse)


def unique_all(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    from collections import namedtuple

    values, index, inverse, counts = unique(x, True, True, True, equal_nan=False, size=size, fill_value=fill_value)
    return namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])(
        values, index, inverse, counts)


def union1d(ar1: Any, ar2: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique values found in either array (``size`` as in :func:`unique`)."""
    fnp = _fnp()
    return unique(fnp.concatenate([fnp.ravel(asarray(ar1)), fnp.ravel(asarray(ar2))]), size=size,
                  fill_value=fill_value)


def _set_operands(ar1: Any, ar2: Any) -> tuple[Any, Any]:
    """Both operands flattened, in their common dtype."""
    fnp = _fnp()
    a, b = fnp.ravel(asarray(ar1)), fnp.ravel(asarray(ar2))
    dt = dtypes.result_type(a, b)
    return a.astype(dt), b.astype(dt)


def _set_size(name: str, size: int | None, arrays: tuple[Any, ...], concrete_result: Any) -> int:
    if size is not None:
        return int(size)
    if not all(_concrete(a) for a in arrays):
        raise TypeError(f"{name}: the result's size depends on traced arrays; pass size= (the result is cut or "
                        f"padded to it)")
    return len(concrete_result(*[np.asarray(a) for a in arrays]))


def intersect1d(ar1: Any, ar2: Any, assume_unique: bool = False, return_indices: bool = False, *,
                size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique values found in both arrays (and, with ``return_indices``, the index of
    each one's first occurrence in each array); ``size``/``fill_value`` as in :func:`unique`."""
    fnp = _fnp()
    a, b = _set_operands(ar1, ar2)
    size = _set_size("intersect1d", size, (a, b), np.intersect1d)
    if a.shape[0] == 0 or size == 0:
        empty = fnp.zeros((size,), a.dtype)
        return (empty, fnp.zeros((size,), np.int64), fnp.zeros((size,), np.int64)) if return_indices else empty
    perm, srt, first = _runs(a, equal_nan=False)
    values, at, valid = _select(srt, first & fnp.isin(srt, b), size, fill_value)
    if not return_indices:
        return values
    i1 = fnp.where(valid, perm[at], 0)
    i2 = fnp.where(valid, fnp.argmax(values[:, None] == b[None, :], axis=1), 0)
    return values, i1, i2


def setdiff1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
              fill_value: Any = None) -> Any:
    """The sorted unique values of ``ar1`` that are not in ``ar2``; ``size`` as in :func:`unique`
    but padded with 0 unless ``fill_value`` says otherwise (JAX's choice for this function)."""
    fnp = _fnp()
    a, b = _set_operands(ar1, ar2)
    size = _set_size("setdiff1d", size, (a, b), np.setdiff1d)
    if a.shape[0] == 0 or size == 0:
        return fnp.zeros((size,), a.dtype)
    _, srt, first = _runs(a, equal_nan=False)
    return _select(srt, first & ~fnp.isin(srt, b), size, 0 if fill_value is None else fill_value)[0]


def setxor1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
             fill_value: Any = None) -> Any:
    """The sorted unique values found in exactly one of the arrays; ``size`` as in :func:`unique`."""
    fnp = _fnp()
    a, b = _set_operands(ar1, ar2)
    size = _set_size("setxor1d", size, (a, b), np.setxor1d)
    both = fnp.concatenate([a, b])
    if both.shape[0] == 0 or size == 0:
        return fnp.zeros((size,), both.dtype)
    _, srt, first = _runs(both, equal_nan=False)
    return _select(srt, first & (fnp.isin(srt, a) != fnp.isin(srt, b)), size, fill_value)[0]
