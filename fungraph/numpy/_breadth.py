"""The rest of ``jax.numpy``'s names: floating-point decomposition (``frexp``, ``nextafter``,
``spacing``), ``piecewise``, polynomial fitting, division and roots, n-dimensional histograms,
functional ``place``/``put``, bit packing and counting, ``einsum_path``, dtype promotion, and
numpy's eager helpers (printing, files, buffers).

Traceable functions are compositions of the public ones, so jit, grad and vmap work as they
do for those. fungraph has no uint8: ``packbits``, ``unpackbits`` and ``bitwise_count`` return
int32 arrays (values 0..255, 0/1 and bit counts) where numpy and JAX return uint8."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.array import shared_view
from fungraph.core import ConcretizationError, Tracer, to_concrete_dtype_array
from fungraph.numpy._util import asarray, promote


def _fnp() -> Any:
    import fungraph.numpy as fnp

    return fnp


def _real_inexact(name: str, *xs: Any) -> list[Any]:
    out = promote(*xs, to_inexact=True)
    if dtypes.is_complex(out[0].dtype):
        raise TypeError(f"{name}: complex operands are not supported, got {out[0].dtype}")
    return [asarray(x) for x in out]


def _concrete_int(x: Any, what: str) -> int:
    if isinstance(x, Tracer):
        raise ConcretizationError(f"{what} must be a concrete integer, got a traced value {x.aval}")
    return int(x)


# --- floating-point decomposition ----------------------------------------------------------------


def _times_pow2(x: Any, k: Any) -> Any:
    """``x * 2**k`` exactly for integer ``k`` over the whole exponent range (two half-steps, so
    no power of two overflows on its own)."""
    fnp = _fnp()
    half = k // 2
    two = np.asarray(2, x.dtype)
    return x * fnp.power(two, half.astype(x.dtype)) * fnp.power(two, (k - half).astype(x.dtype))


def frexp(x: Any, /) -> tuple[Any, Any]:
    """``(mantissa, exponent)`` with ``x == mantissa * 2**exponent`` and ``0.5 <= |mantissa| < 1``;
    zeros, infinities and NaN give ``(x, 0)``. The exponent is int32, as in numpy and JAX; the
    mantissa's derivative is ``2**-exponent``."""
    from fungraph.lax import stop_gradient

    fnp = _fnp()
    (v,) = _real_inexact("frexp", x)
    regular = fnp.isfinite(v) & (v != 0)
    a = stop_gradient(fnp.where(regular, fnp.abs(v), 1))
    e = fnp.floor(fnp.log2(a)).astype(np.int32) + 1
    m = _times_pow2(a, -e)
    e = fnp.where(m >= 1, e + 1, fnp.where(m < 0.5, e - 1, e))
    mantissa = _times_pow2(v, stop_gradient(-e))
    return fnp.where(regular, mantissa, v), fnp.where(regular, e, 0).astype(np.int32)


def nextafter(x1: Any, x2: Any, /) -> Any:
    """The next floating-point value after ``x1`` towards ``x2`` (``x2`` itself when they are
    equal, NaN if either is): ``lax.nextafter`` (one step of the bit pattern) at the operands'
    common dtype. Piecewise constant: its derivatives are zero (JAX has none)."""
    from fungraph.lax import nextafter as lax_nextafter
    from fungraph.lax import stop_gradient

    fnp = _fnp()
    a, b = (stop_gradient(t) for t in fnp.broadcast_arrays(*_real_inexact("nextafter", x1, x2)))
    return lax_nextafter(a, b)


def spacing(x: Any, /) -> Any:
    """The distance from ``x`` to the next value of larger magnitude, signed like ``x``; as in
    numpy ``spacing(-0.0)`` is the smallest subnormal (JAX: its negative). NaN for infinities
    and NaN; zero derivatives, like ``nextafter``."""
    from fungraph.lax import stop_gradient

    fnp = _fnp()
    (v,) = _real_inexact("spacing", x)
    v = stop_gradient(v)
    finite = fnp.isfinite(v)
    safe = fnp.where(finite, v, 0)
    gap = nextafter(safe, fnp.where(safe < 0, -np.inf, np.inf).astype(v.dtype)) - safe
    return fnp.where(finite, gap, np.asarray(np.nan, v.dtype))


# --- piecewise -------------------------------------------------------------------------------------


def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Any:
    """``funclist[k]`` (a function of ``x`` or a constant) where ``condlist[k]`` holds, the last
    true condition winning; an extra last function gives the value where none holds (else 0).
    The result has ``x``'s dtype. Each function is applied to the whole of ``x`` and its values
    selected, which agrees with numpy and JAX for elementwise functions."""
    fnp = _fnp()
    xa = asarray(x)
    if isinstance(condlist, (list, tuple)):
        conds = [asarray(c) for c in condlist]
    else:
        c = asarray(condlist)
        conds = [c] if c.ndim <= xa.ndim else [c[i] for i in range(c.shape[0])]
    n, nf = len(conds), len(funclist)
    if nf not in (n, n + 1):
        raise ValueError(f"piecewise: with {n} condition(s), either {n} or {n + 1} functions are expected; got {nf}")

    def value(f: Any) -> Any:
        out = f(xa, *args, **kw) if callable(f) else f
        return fnp.broadcast_to(fnp.asarray(out).astype(xa.dtype), xa.shape)

    out = value(funclist[n]) if nf == n + 1 else fnp.zeros(xa.shape, xa.dtype)
    for c, f in zip(conds, funclist):
        out = fnp.where(c.astype(bool), value(f), out)
    return out


# --- polynomials -----------------------------------------------------------------------------------


def _poly_1d(p: Any, name: str) -> Any:
    c = asarray(p)
    if c.ndim != 1:
        raise ValueError(f"{name}: polynomial coefficients must be 1-d, got shape {c.shape}")
    return c


def polyfit(x: Any, y: Any, deg: int, rcond: float | None = None, full: bool = False, w: Any = None,
            cov: bool | str = False) -> Any:
    """The least-squares polynomial of degree ``deg`` through ``(x, y)`` (``y`` may hold one
    data set per column), coefficients highest power first, solved with ``linalg.lstsq`` on the
    column-scaled Vandermonde matrix. ``w`` weights the residuals; ``full`` also returns
    (residuals, rank, singular values, rcond); ``cov`` the coefficients' covariance (scaled by
    the residual variance unless ``cov="unscaled"``)."""
    fnp = _fnp()
    deg = _concrete_int(deg, "polyfit: deg")
    if deg < 0:
        raise ValueError("polyfit: expected deg >= 0")
    xs, ys = _real_inexact("polyfit", x, y)
    if xs.ndim != 1:
        raise TypeError("polyfit: expected a 1-d vector for x")
    if xs.shape[0] == 0:
        raise TypeError("polyfit: expected a non-empty vector for x")
    if ys.ndim not in (1, 2):
        raise TypeError("polyfit: expected a 1-d or 2-d array for y")
    if ys.shape[0] != xs.shape[0]:
        raise TypeError("polyfit: expected x and y to have the same length")
    order = deg + 1
    n = xs.shape[0]
    if rcond is None:
        rcond = n * float(np.finfo(xs.dtype).eps)
    lhs = fnp.vander(xs, order)
    rhs = ys
    if w is not None:
        (wt,) = promote(w, to_inexact=True)
        wt = asarray(wt)
        if wt.ndim != 1 or wt.shape[0] != n:
            raise TypeError("polyfit: expected a 1-d w of the same length as x")
        lhs = lhs * wt[:, None]
        rhs = rhs * (wt if ys.ndim == 1 else wt[:, None])
    scale = fnp.sqrt(fnp.sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    c, resids, rank, s = fnp.linalg.lstsq(lhs, rhs, rcond)
    c = c / (scale if ys.ndim == 1 else scale[:, None])
    if full:
        return c, resids, rank, s, rcond
    if not cov:
        return c
    base = fnp.linalg.inv(lhs.T @ lhs) / fnp.outer(scale, scale)
    if isinstance(cov, str) and cov == "unscaled":
        fac = fnp.ones(1, base.dtype)
    else:
        if n <= order:
            raise ValueError("polyfit: the number of data points must exceed order to scale the covariance matrix")
        fac = resids / (n - order)
    return c, (base * fac if ys.ndim == 1 else base[:, :, None] * fac)


def polydiv(u: Any, v: Any, *, trim_leading_zeros: bool = False) -> tuple[Any, Any]:
    """(quotient, remainder) of polynomial long division. The remainder keeps ``u``'s length
    (its leading entries are zeros), as in JAX; ``trim_leading_zeros=True`` drops them (entries
    below ``sqrt(eps)``, as JAX) but keeps at least one, as numpy does (JAX may return an empty
    remainder); that needs a concrete remainder."""
    fnp = _fnp()
    a, b = promote(_poly_1d(u, "polydiv"), _poly_1d(v, "polydiv"), to_inexact=True)
    a, b = asarray(a), asarray(b)
    m, n = a.shape[0] - 1, b.shape[0] - 1
    inv_lead = 1 / b[0]
    quotient = []
    for k in range(m - n + 1):
        d = inv_lead * a[k]
        quotient.append(d)
        a = fnp.at(a)[k:k + n + 1].add(-d * b)
    q = fnp.stack(quotient) if quotient else fnp.zeros(1, a.dtype)
    if trim_leading_zeros:
        if isinstance(a, Tracer):
            raise ConcretizationError("polydiv: trim_leading_zeros=True needs a concrete remainder (not under jit)")
        r = np.asarray(a)
        keep = np.flatnonzero(np.abs(r) >= np.sqrt(np.finfo(r.dtype).eps))
        a = r[min(keep[0], r.size - 1) if keep.size else r.size - 1:]
    return q, a


def poly(seq_of_zeros: Any) -> Any:
    """The monic polynomial with the given roots (highest power first), or the characteristic
    polynomial of a square matrix (from its eigenvalues). As in JAX the result stays complex
    for complex roots and for a matrix (numpy returns a real array when roots pair up)."""
    fnp = _fnp()
    z = asarray(seq_of_zeros)
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] != 0:
        z = fnp.linalg.eigvals(z)
    elif z.ndim == 0:
        z = fnp.reshape(z, (1,))
    elif z.ndim != 1:
        raise ValueError("poly: input must be 1-d or a non-empty square 2-d array")
    (z,) = promote(z, to_inexact=True) if not dtypes.is_inexact(z.dtype) else (z,)
    out = fnp.ones(1, z.dtype)
    for k in range(z.shape[0]):
        out = fnp.convolve(out, fnp.stack([fnp.ones((), z.dtype), -z[k]]))
    return out


def _companion_roots(p: Any) -> Any:
    fnp = _fnp()
    cdt = dtypes.complex_for(p.dtype)
    if p.shape[0] < 2:
        return np.zeros(0, cdt)
    k = p.shape[0] - 1
    first = fnp.reshape(-p[1:] / p[0], (1, k))
    below = fnp.eye(k - 1, k, dtype=p.dtype)
    return fnp.linalg.eigvals(fnp.concatenate([first, below], axis=0)).astype(cdt)


def roots(p: Any, *, strip_zeros: bool = True) -> Any:
    """The roots of the polynomial ``p`` (highest power first) as the eigenvalues of its
    companion matrix, always complex as in JAX. ``strip_zeros=True`` drops leading zero
    coefficients, which needs a concrete ``p``; with ``strip_zeros=False`` (required under jit,
    as in JAX) each leading zero instead gives a NaN root, listed last."""
    fnp = _fnp()
    (c,) = promote(fnp.atleast_1d(asarray(p)), to_inexact=True)
    c = asarray(c)
    if c.ndim != 1:
        raise ValueError("roots: input must be a rank-1 array")
    n = c.shape[0]
    if n < 2:
        return np.zeros(0, dtypes.complex_for(c.dtype))
    nz = c != 0
    lead = fnp.where(fnp.any(nz), fnp.argmax(nz), n)
    if strip_zeros:
        if isinstance(lead, Tracer):
            raise ConcretizationError("roots: strip_zeros=True needs concrete coefficients; under jit pass "
                                      "strip_zeros=False (each leading zero then gives a NaN root)")
        return _companion_roots(c[int(lead):])
    safe = fnp.where(lead == n, fnp.ones_like(c), c)
    shifted = fnp.take(safe, (np.arange(n) + lead) % n)
    found = _companion_roots(shifted)
    found = fnp.take(found, fnp.argsort(found == 0, stable=True), mode="clip")
    cnan = np.asarray(complex(np.nan, np.nan), found.dtype)
    return fnp.where(np.arange(n - 1) < n - 1 - lead, found, cnan)


def trim_zeros(filt: Any, trim: str = "fb", axis: int | Sequence[int] | None = None) -> np.ndarray:
    """``filt`` with its leading (``'f'``) and/or trailing (``'b'``) zeros removed along each axis
    in ``axis`` (all by default; a slice along an axis is kept if any of it is nonzero). Eager
    only, as in JAX: the result's shape depends on the values."""
    if isinstance(filt, Tracer):
        raise ConcretizationError("trim_zeros needs a concrete array: its result's shape depends on the values")
    x = to_concrete_dtype_array(filt)
    trim = trim.lower()
    axes = range(x.ndim) if axis is None else [axis] if np.ndim(axis) == 0 else list(axis)
    axes = {int(a) % builtins.max(x.ndim, 1) for a in axes}
    index = []
    for ax in range(x.ndim):
        if ax not in axes:
            index.append(slice(None))
            continue
        hit = np.flatnonzero(np.any(x != 0, axis=tuple(i for i in range(x.ndim) if i != ax)))
        if hit.size == 0:
            index.append(slice(0, 0))
            continue
        start = int(hit[0]) if "f" in trim else None
        stop = int(hit[-1]) + 1 if "b" in trim else None
        index.append(slice(start, stop))
    return x[tuple(index)]


# --- histograms -------------------------------------------------------------------------------------


def histogramdd(sample: Any, bins: Any = 10, range: Any = None, weights: Any = None,  # noqa: A002
                density: bool | None = None) -> tuple[Any, list[Any]]:
    """(counts, edges per dimension) of ``N`` points in ``D`` dimensions (an ``(N, D)`` array, or
    a sequence of ``D`` coordinate arrays). Bins are closed on the left, the last also on the
    right; points outside are not counted. Counts are int64 without weights (as JAX; numpy
    gives float64) and the weights' dtype with them; ``density`` divides by the total and the
    bin volumes."""
    fnp = _fnp()
    if isinstance(sample, (list, tuple)):
        pts = fnp.stack([fnp.ravel(asarray(s)) for s in sample], axis=1)
    else:
        pts = asarray(sample)
        pts = fnp.reshape(pts, (pts.shape[0], 1)) if pts.ndim == 1 else pts
    if pts.ndim != 2:
        raise ValueError(f"histogramdd: sample must be (N, D), got shape {pts.shape}")
    n, d = pts.shape
    try:
        per_dim = list(bins)
    except TypeError:
        per_dim = [bins] * d
    if len(per_dim) != d:
        raise ValueError("histogramdd: the dimension of bins must be equal to the dimension of the sample x")
    ranges = [None] * d if range is None else list(range)
    if len(ranges) != d:
        raise ValueError("histogramdd: range argument must have one entry per dimension")
    edges, flat, inside, nbins = [], fnp.zeros(n, np.int64), fnp.ones(n, bool), []
    for k in builtins.range(d):
        col = pts[:, k]
        e = fnp.histogram_bin_edges(col, per_dim[k], ranges[k])
        nb = e.shape[0] - 1
        which = fnp.searchsorted(e, col, side="right") - 1
        which = fnp.where(col == e[-1], nb - 1, which)
        inside = inside & (which >= 0) & (which < nb)
        flat = flat * nb + which
        edges.append(e)
        nbins.append(nb)
    total = int(np.prod(nbins))
    w = None if weights is None else fnp.ravel(asarray(weights))
    counts = fnp.bincount(fnp.where(inside, flat, total), w, length=total + 1)[:total]
    counts = fnp.reshape(counts, tuple(nbins))
    if density:
        volume = fnp.ones((), counts.dtype if dtypes.is_inexact(counts.dtype) else np.float64)
        for k, e in enumerate(edges):
            shape = [1] * d
            shape[k] = nbins[k]
            volume = volume * fnp.reshape(fnp.diff(e), tuple(shape))
        counts = counts / fnp.sum(counts) / volume
    return counts, edges


def histogram2d(x: Any, y: Any, bins: Any = 10, range: Any = None, weights: Any = None,  # noqa: A002
                density: bool | None = None) -> tuple[Any, Any, Any]:
    """(counts, x edges, y edges) of the points ``(x[i], y[i])``: ``histogramdd`` in two
    dimensions. ``bins`` is a count, a pair of counts or edge arrays, or one edge array for
    both axes."""
    try:
        nb = len(bins)
    except TypeError:
        nb = 1
    if nb not in (1, 2):
        bins = [bins, bins]
    counts, edges = histogramdd([x, y], bins, range, weights, density)
    return counts, edges[0], edges[1]


# --- functional updates -------------------------------------------------------------------------------


def _inplace_refused(name: str, inplace: bool) -> None:
    if inplace:
        raise ValueError(f"{name}: fungraph's arrays are immutable, so the update cannot be made in place; "
                         f"pass inplace=False to get the updated array back (as JAX requires)")


def place(arr: Any, mask: Any, vals: Any, *, inplace: bool = True) -> Any:
    """``arr`` with the entries where ``mask`` holds replaced by ``vals`` in order, repeated as
    often as needed (numpy's ``place``, returned rather than written: ``inplace=False`` is
    required, as in JAX). ``mask`` may be traced."""
    _inplace_refused("place", inplace)
    fnp = _fnp()
    x = asarray(arr)
    m = fnp.ravel(asarray(mask)).astype(bool)
    if m.shape[0] != x.size:
        raise ValueError(f"place: mask of {m.shape[0]} entries for an array of {x.size}")
    v = fnp.ravel(fnp.asarray(vals)).astype(x.dtype)
    if v.shape[0] == 0:
        if isinstance(m, Tracer) or np.any(m):
            raise ValueError("place: cannot insert from an empty array")
        return x
    pick = (fnp.cumsum(m.astype(np.int64)) - 1) % v.shape[0]
    return fnp.reshape(fnp.where(m, fnp.take(v, pick, mode="clip"), fnp.ravel(x)), x.shape)


def put(a: Any, ind: Any, v: Any, mode: str | None = None, *, inplace: bool = True) -> Any:
    """``a`` with its flattened entries at ``ind`` set to ``v`` (repeated to ``ind``'s length; a
    position named twice takes the later value), returned: ``inplace=False`` is required, as in
    JAX. ``mode``: None or ``"fill"`` drops indices outside ``[-n, n)`` (JAX's default),
    ``"clip"`` clips them, ``"wrap"`` wraps them, ``"raise"`` (numpy's default) raises for a
    concrete one. ``ind`` may be traced."""
    _inplace_refused("put", inplace)
    if mode not in (None, "fill", "clip", "wrap", "raise"):
        raise ValueError(f"put: mode must be None, 'fill', 'clip', 'wrap' or 'raise', got {mode!r}")
    fnp = _fnp()
    x0 = asarray(a)
    x = fnp.ravel(x0)
    idx = fnp.ravel(asarray(ind))
    if not (dtypes.is_int(idx.dtype) or idx.shape[0] == 0):
        raise TypeError(f"put: indices must be integers, got {idx.dtype}")
    idx = idx.astype(np.int64)
    n = x.shape[0]
    vals = fnp.ravel(fnp.asarray(v)).astype(x.dtype)
    if idx.shape[0] == 0:
        return x0
    if vals.shape[0] == 0:
        raise ValueError("put: cannot put an empty array of values")
    vals = fnp.take(vals, np.arange(idx.shape[0]) % vals.shape[0])
    if mode == "clip":
        idx = fnp.clip(idx, 0, n - 1)
    elif mode == "wrap":
        idx = idx % n
    elif mode == "raise":
        if isinstance(idx, Tracer):
            raise ConcretizationError("put: mode='raise' needs concrete indices; use mode='fill', 'clip' or 'wrap'")
        bad = (idx < -n) | (idx >= n)
        if np.any(bad):
            raise IndexError(f"put: index {int(idx[np.argmax(bad)])} is out of bounds for size {n}")
    return fnp.reshape(fnp.put_along_axis(x, idx, vals, axis=0, inplace=False), x0.shape)


# --- bits -----------------------------------------------------------------------------------------------


def _bit_axis(x: Any, axis: int | None) -> tuple[Any, int]:
    fnp = _fnp()
    if axis is None:
        return fnp.ravel(x), 0
    return x, int(axis) % builtins.max(x.ndim, 1)


def _bitorder(bitorder: str, name: str) -> np.ndarray:
    if bitorder not in ("big", "little"):
        raise ValueError(f"{name}: bitorder must be 'big' or 'little', got {bitorder!r}")
    shifts = np.arange(8)
    return shifts[::-1].copy() if bitorder == "big" else shifts


def packbits(a: Any, axis: int | None = None, bitorder: str = "big") -> Any:
    """Each run of 8 truth values along ``axis`` (the flattened array by default; the last run
    padded with zeros) packed into one byte, as int32 values 0..255 (numpy and JAX: uint8)."""
    fnp = _fnp()
    x = asarray(a)
    if not (dtypes.is_int(x.dtype) or x.dtype == dtypes.bool_):
        raise TypeError(f"packbits: expected an integer or boolean array, got {x.dtype}")
    weights = (2 ** _bitorder(bitorder, "packbits")).astype(np.int32)
    x, ax = _bit_axis(x, axis)
    bits = fnp.moveaxis((x != 0).astype(np.int32), ax, -1)
    k = bits.shape[-1]
    pad = -k % 8
    bits = fnp.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, pad)])
    bits = fnp.reshape(bits, bits.shape[:-1] + ((k + pad) // 8, 8))
    return fnp.moveaxis(fnp.sum(bits * weights, axis=-1).astype(np.int32), -1, ax)


def unpackbits(a: Any, axis: int | None = None, count: int | None = None, bitorder: str = "big") -> Any:
    """The 8 bits of each byte along ``axis`` (the flattened array by default), as int32 0/1
    values (numpy and JAX: uint8). Integer input is read as bytes: its low 8 bits. ``count``
    keeps that many bits (padding with zeros), or drops ``-count`` from the end."""
    fnp = _fnp()
    x = asarray(a)
    if not dtypes.is_int(x.dtype):
        raise TypeError(f"unpackbits: expected an integer array of byte values, got {x.dtype}")
    powers = (2 ** _bitorder(bitorder, "unpackbits")).astype(x.dtype)
    x, ax = _bit_axis(x, axis)
    xm = fnp.moveaxis(x, ax, -1)
    bits = ((xm[..., None] // powers) % 2).astype(np.int32)
    bits = fnp.reshape(bits, bits.shape[:-2] + (bits.shape[-2] * 8,))
    if count is not None:
        total = bits.shape[-1]
        keep = count if count >= 0 else builtins.max(total + count, 0)
        bits = bits[..., :keep] if keep <= total else fnp.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, keep - total)])
    return fnp.moveaxis(bits, -1, ax)


def bitwise_count(x: Any, /) -> Any:
    """The number of 1 bits in ``|x|`` (the two's-complement bits, so the most negative value
    counts 1), as int32 (numpy and JAX: uint8)."""
    from fungraph.lax import population_count

    fnp = _fnp()
    v = asarray(x)
    if v.dtype == dtypes.bool_:
        return v.astype(np.int32)
    if not dtypes.is_int(v.dtype):
        raise TypeError(f"bitwise_count: expected an integer array, got {v.dtype}")
    return population_count(fnp.abs(v)).astype(np.int32)


# --- einsum_path ----------------------------------------------------------------------------------------


def einsum_path(subscripts: str, /, *operands: Any, optimize: Any = "auto") -> tuple[list[Any], str]:
    """numpy's ``(path, report)`` for the contraction order fungraph's ``einsum`` takes: the
    greedy order of ``einsum(optimize="auto")`` (``optimize=False``: all operands at once, as
    numpy reports it; an explicit ``['einsum_path', ...]`` is used as given). Only the
    operands' shapes are read; numpy writes the report for that path."""
    from fungraph.numpy._linalg import _greedy_pair, _parse_einsum

    shapes = [tuple(np.shape(o)) if not isinstance(o, Tracer) else tuple(o.shape) for o in operands]
    if isinstance(optimize, (list, tuple)):
        path = list(optimize)
    elif optimize is False or len(shapes) < 3:
        path = ["einsum_path", tuple(range(len(shapes)))]
    else:
        ins, out = _parse_einsum(subscripts, [len(s) for s in shapes])
        sizes: dict[str, int] = {}
        for spec, s in zip(ins, shapes):
            for c, dim in zip(spec, s):
                sizes[c] = builtins.max(sizes.get(c, 1), dim)
        specs = [set(spec) for spec in ins]
        path = ["einsum_path"]
        while len(specs) > 1:
            names = ["".join(sorted(s)) for s in specs]
            i, j = _greedy_pair(names, out, sizes)
            rest = set(out).union(*(s for k, s in enumerate(specs) if k not in (i, j)))
            merged = (specs[i] | specs[j]) & rest
            specs = [s for k, s in enumerate(specs) if k not in (i, j)] + [merged]
            path.append((i, j))
    dummies = [np.broadcast_to(np.zeros((), np.float64), s) for s in shapes]
    return np.einsum_path(subscripts, *dummies, optimize=path)


# --- dtypes and constructors ----------------------------------------------------------------------------


def promote_types(a: Any, b: Any) -> np.dtype:
    """The dtype fungraph's arithmetic gives operands of dtypes ``a`` and ``b``: numpy 2's rule
    (``int32`` with ``float32`` is float64; JAX's lattice says float32), narrowed dtypes first
    widened to supported ones."""
    return dtypes.canonical(np.promote_types(dtypes.canonical(a), dtypes.canonical(b)))


def fromfunction(function: Callable[..., Any], shape: Any, *, dtype: Any = float, **kwargs: Any) -> Any:
    """``function`` evaluated at every index of ``shape``: as in JAX it is mapped (``vmap``) over
    the indices, so it sees one index per argument (of ``dtype``), and may return a pytree."""
    from fungraph.api import vmap
    from fungraph.tree_util import tree_map

    fnp = _fnp()
    shape = tuple(int(s) for s in (shape if isinstance(shape, (list, tuple)) else (shape,)))
    grids = [fnp.ravel(g) for g in fnp.indices(shape, dtype=dtypes.canonical(dtype))]
    if int(np.prod(shape)) == 0:
        return function(*[fnp.reshape(g, shape) for g in grids], **kwargs)
    flat = vmap(lambda *ix: function(*ix, **kwargs))(*grids)
    return tree_map(lambda leaf: fnp.reshape(leaf, shape + tuple(leaf.shape[1:])), flat)


def apply_over_axes(func: Callable[[Any, int], Any], a: Any, axes: Any) -> Any:
    """``func(a, axis)`` applied for each axis in turn, each result kept at ``a``'s rank (a
    reduced axis is put back with length 1)."""
    fnp = _fnp()
    out = asarray(a)
    for ax in ([axes] if np.ndim(axes) == 0 else list(axes)):
        ax = int(ax) % builtins.max(out.ndim, 1)
        res = asarray(func(out, ax))
        if res.ndim != out.ndim:
            res = fnp.expand_dims(res, ax)
        if res.ndim != out.ndim:
            raise ValueError("apply_over_axes: function is not returning an array of the correct shape")
        out = res
    return out


def mask_indices(n: int, mask_func: Callable[[Any, int], Any], k: int = 0, *,
                 size: int | None = None) -> tuple[Any, Any]:
    """The (row, column) indices of the nonzero entries of ``mask_func(ones((n, n)), k)``, e.g.
    ``mask_indices(n, triu)``; ``size`` pads or cuts them to a fixed length, as in JAX."""
    fnp = _fnp()
    return fnp.nonzero(fnp.asarray(mask_func(fnp.ones((n, n), np.int64), k)) != 0, size=size)


# --- numpy's eager helpers --------------------------------------------------------------------------------


def array_repr(arr: Any, max_line_width: int | None = None, precision: int | None = None,
               suppress_small: bool | None = None) -> str:
    return np.array_repr(np.asarray(arr), max_line_width, precision, suppress_small)


def array_str(a: Any, max_line_width: int | None = None, precision: int | None = None,
              suppress_small: bool | None = None) -> str:
    return np.array_str(np.asarray(a), max_line_width, precision, suppress_small)


def _canonical_result(out: Any) -> Any:
    return to_concrete_dtype_array(out).copy() if isinstance(out, np.ndarray) else out


def load(file: Any, *args: Any, **kwargs: Any) -> Any:
    """``numpy.load``, with an array result brought to a supported dtype (an ``.npz`` archive
    comes back as numpy's lazy mapping)."""
    return _canonical_result(np.load(file, *args, **kwargs))


def frombuffer(buffer: Any, dtype: Any = float, count: int = -1, offset: int = 0) -> np.ndarray:
    """``numpy.frombuffer`` read in ``dtype`` (narrow ones are allowed), returned as a copy in a
    supported dtype (uint8 bytes become int32)."""
    return _canonical_result(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string: str, dtype: Any = float, count: int = -1, *, sep: str) -> np.ndarray:
    """``numpy.fromstring`` of text (``sep`` is required, as numpy's binary mode is gone), in a
    supported dtype."""
    return _canonical_result(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def fromfile(*args: Any, **kwargs: Any) -> np.ndarray:
    """``numpy.fromfile``, in a supported dtype (eager; JAX refuses it)."""
    return _canonical_result(np.fromfile(*args, **kwargs))


def fromiter(*args: Any, **kwargs: Any) -> np.ndarray:
    """``numpy.fromiter``, in a supported dtype (eager; JAX refuses it)."""
    return _canonical_result(np.fromiter(*args, **kwargs))


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Any:
    """An array from any object that exports DLPack (a numpy or CPU torch/JAX array, a device
    array's host copy), as ``jnp.from_dlpack``: it shares the producer's memory unless
    ``copy=True`` or its dtype is not one fungraph supports (then converted, which
    ``copy=False`` refuses); ``device`` puts it on a backend, as ``device_put`` does."""
    from fungraph.api import device_put

    shared = np.from_dlpack(x) if copy is None else np.from_dlpack(x, copy=copy)
    dt = dtypes.canonical(shared.dtype)
    if dt != shared.dtype and copy is False:
        raise ValueError(f"from_dlpack(copy=False): {shared.dtype.name}[{','.join(map(str, shared.shape))}] is not "
                         f"a fungraph dtype and would need converting to {dt.name}, a copy")
    if dt == shared.dtype and device in (None, "cpu") and copy is not True:
        return shared_view(shared)
    return device_put(shared, device)


save = np.save
savez = np.savez
printoptions = np.printoptions
get_printoptions = np.get_printoptions
set_printoptions = np.set_printoptions
