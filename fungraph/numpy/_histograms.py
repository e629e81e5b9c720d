"""Histograms of ``fungraph.numpy`` (numpy's reference: statistics, histograms): ``bincount``,
``histogram`` and its bin edges, ``histogram2d``, ``histogramdd`` and ``digitize``. Compositions
of the public functions, so jit, grad and vmap work as they do for those; results whose size
depends on the data take ``length=`` under a trace, as in JAX."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Tracer
from fungraph.numpy._sorting import searchsorted
from fungraph.numpy._util import asarray, int_array, is_concrete, namespace
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh


def bincount(x: Any, weights: Any = None, minlength: int = 0, *, length: int | None = None) -> Any:
    """Counts (or summed ``weights``) of each non-negative integer in the 1-d ``x``. Under a trace
    the result's length must be given as ``length`` (values at or past it are dropped, as in
    JAX); on concrete input it is ``max(x) + 1`` or ``minlength``, whichever is larger. Summed
    weights keep their dtype, as in JAX (numpy widens them to float64)."""
    fnp = namespace()
    xs = int_array(x, "bincount")
    if xs.ndim != 1:
        raise ValueError(f"bincount: x must be 1-d, got shape {xs.shape}")
    if length is None:
        if not is_concrete(xs):
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
    fnp = namespace()
    if isinstance(bins, str):
        raise NotImplementedError(f"histogram_bin_edges: bins={bins!r} is not supported; pass a count or edges")
    if np.ndim(bins) == 1:
        return asarray(bins)
    x = asarray(a)
    x = x.astype(np.promote_types(x.dtype, np.float64)) if not dtypes.is_float(x.dtype) else x
    lo, hi = (fnp.min(x), fnp.max(x)) if range is None else (fnp.asarray(range[0], x.dtype),
                                                             fnp.asarray(range[1], x.dtype))
    if range is not None and is_concrete(lo) and is_concrete(hi) and float(lo) > float(hi):
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
    the last one on both sides, values outside the edges not counted. Counts have the inexact
    dtype of ``a`` (promoted with ``weights``), as JAX's."""
    fnp = namespace()
    x = asarray(a)
    if weights is not None and tuple(np.shape(weights)) != tuple(x.shape):
        raise ValueError(f"histogram: weights should have the same shape as a, got {np.shape(weights)} and {x.shape}")
    dt = dtypes.float_dtype_for(x.dtype if weights is None else dtypes.result_type(x, weights))
    x = fnp.ravel(x.astype(dt))
    edges = histogram_bin_edges(x, bins, range)
    nb = edges.shape[0] - 1
    which = fnp.searchsorted(edges, x, side="right") - 1
    which = fnp.where(x == edges[-1], nb - 1, which)
    inside = (which >= 0) & (which < nb)
    w = fnp.ones(x.shape, dt) if weights is None else fnp.ravel(asarray(weights)).astype(dt)
    counts = bincount(fnp.where(inside, which, nb), w, length=nb + 1)[:nb]
    if density:
        counts = counts / fnp.diff(edges) / fnp.sum(counts)
    return counts, edges


def histogramdd(sample: Any, bins: Any = 10, range: Any = None, weights: Any = None,  # noqa: A002
                density: bool | None = None) -> tuple[Any, list[Any]]:
    """(counts, edges per dimension) of ``N`` points in ``D`` dimensions (an ``(N, D)`` array, or
    a sequence of ``D`` coordinate arrays). Bins are closed on the left, the last also on the
    right; points outside are not counted. Counts are int64 without weights (as JAX; numpy
    gives float64) and the weights' dtype with them; ``density`` divides by the total and the
    bin volumes."""
    fnp = namespace()
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


def digitize(x: Any, bins: Any, right: bool = False) -> Any:
    b = asarray(bins)
    increasing = True
    if not isinstance(b, Tracer) and b.size > 1:
        increasing = bool(b[-1] >= b[0])
    if increasing:
        return searchsorted(b, x, side="left" if right else "right")
    n = b.shape[0]
    found = searchsorted(sh.rev(b, (0,)), x, side="right" if right else "left")
    return ew.sub(np.asarray(n, found.dtype), found)
