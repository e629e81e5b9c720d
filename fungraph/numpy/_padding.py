"""``fungraph.numpy.pad``, every mode of JAX's: constant, edge, reflect, symmetric, wrap (gathers
with index vectors numpy computes), ``reflect_type="odd"`` (JAX's reflected blocks),
``linear_ramp`` (a ``linspace`` from ``end_values`` to the edge), the statistics
``maximum``/``minimum``/``mean``/``median`` (over ``stat_length`` entries at each edge),
``empty`` and a callable. Each is built from differentiable operations, so the padded array
differentiates as JAX's does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Tracer
from fungraph.numpy import _reductions as red
from fungraph.numpy._creation import linspace
from fungraph.numpy._functional import apply_along_axis
from fungraph.numpy._math import round as round_
from fungraph.numpy._stats import median
from fungraph.numpy._util import asarray, promote
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh
from fungraph.primitives.indexing import take as take_prim

_STATISTICS: dict[str, Callable[..., Any]] = {"maximum": red.max, "minimum": red.min, "mean": red.mean,
                                              "median": median}

#: The keyword arguments each mode takes, as JAX's ``pad`` checks them.
_MODE_OPTIONS: dict[str, tuple[str, ...]] = {
    "constant": ("constant_values",), "edge": (), "wrap": (), "empty": (),
    "reflect": ("reflect_type",), "symmetric": ("reflect_type",), "linear_ramp": ("end_values",),
    "maximum": ("stat_length",), "minimum": ("stat_length",), "mean": ("stat_length",), "median": ("stat_length",),
}


def _pairs(values: Any, ndim: int, name: str) -> list[tuple[Any, Any]]:
    """A (before, after) pair per axis from numpy's shorthands: ``n``, ``(n,)``, ``(before, after)``
    or one pair per axis."""
    arr = np.asarray(values)
    try:
        arr = np.broadcast_to(arr, (ndim, 2))
    except ValueError:
        raise ValueError(f"pad: {name} with ndim={ndim} has unsupported shape {arr.shape}; valid shapes are "
                         f"({ndim}, 2), (1, 2), (2,), (1,), or ()") from None
    return [(lo.item(), hi.item()) for lo, hi in arr]


def _pad_widths(pad_width: Any, ndim: int) -> list[tuple[int, int]]:
    widths = _pairs(pad_width, ndim, "pad_width")
    if not all(isinstance(w, int) for pair in widths for w in pair):
        raise TypeError("pad: `pad_width` must be of integral type")
    if any(w < 0 for pair in widths for w in pair):
        raise ValueError("pad: index can't contain negative values")
    return widths


def pad(array: Any, pad_width: Any, mode: str | Callable[..., Any] = "constant", **kwargs: Any) -> Any:
    """``array`` padded by ``pad_width`` entries before and after each axis, as JAX's ``pad``
    (its modes, their keyword arguments and its errors for the wrong ones)."""
    x = asarray(array)
    widths = _pad_widths(pad_width, x.ndim)
    if callable(mode):
        return _pad_with_function(x, widths, mode, kwargs)
    if mode not in _MODE_OPTIONS:
        raise NotImplementedError(f"pad: unimplemented padding mode {mode!r}")
    unknown = set(kwargs) - set(_MODE_OPTIONS[mode])
    if unknown:
        raise ValueError(f"pad: unsupported keyword arguments for mode {mode!r}: {sorted(unknown)}")
    if x.ndim == 0:
        return x
    if mode == "constant":
        return _pad_constant(x, widths, kwargs.get("constant_values", 0))
    if mode in ("reflect", "symmetric"):
        reflect_type = kwargs.get("reflect_type", "even")
        if reflect_type not in ("even", "odd"):
            raise ValueError(f"pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}")
        if reflect_type == "odd":
            return _pad_reflect_odd(x, widths, mode)
    if mode in ("edge", "reflect", "symmetric", "wrap"):
        return _pad_by_gather(x, widths, mode)
    if mode == "linear_ramp":
        return _pad_linear_ramp(x, widths, _pairs(kwargs.get("end_values", 0), x.ndim, "end_values"))
    if mode == "empty":
        return _pad_constant(x, widths, 0)
    stat_length = kwargs.get("stat_length")
    lengths = None if stat_length is None else _pairs(stat_length, x.ndim, "stat_length")
    return _pad_statistic(x, widths, lengths, _STATISTICS[mode])


def _pad_constant(x: Any, widths: list[tuple[int, int]], constant_values: Any) -> Any:
    if isinstance(constant_values, Tracer):
        (x, v) = promote(x, constant_values)
        return sh.pad(x, v, [(lo, hi, 0) for lo, hi in widths])
    values = np.broadcast_to(np.asarray(constant_values), (x.ndim, 2))
    if np.all(values == values.flat[0]):
        (x, v) = promote(x, values.flat[0].item())
        return sh.pad(x, v, [(lo, hi, 0) for lo, hi in widths])
    for ax, (lo, hi) in enumerate(widths):
        cfg = [(0, 0, 0)] * x.ndim
        cfg[ax] = (lo, 0, 0)
        (x, v) = promote(x, values[ax][0].item())
        x = sh.pad(x, v, cfg)
        cfg[ax] = (0, hi, 0)
        (x, v) = promote(x, values[ax][1].item())
        x = sh.pad(x, v, cfg)
    return x


def _pad_by_gather(x: Any, widths: list[tuple[int, int]], mode: str) -> Any:
    for ax, (lo, hi) in enumerate(widths):
        if lo or hi:
            if x.shape[ax] == 0:
                raise ValueError(f"pad: cannot apply {mode!r} padding to empty axis {ax}")
            idx = np.pad(np.arange(x.shape[ax], dtype=np.int64), (lo, hi), mode=mode)
            x = take_prim(x, idx, ax)
    return x


def _pad_reflect_odd(x: Any, widths: list[tuple[int, int]], mode: str) -> Any:
    """numpy's odd reflection, as JAX builds it: each reflected block is ``2 * edge - block``, and
    a wide pad reflects again about the new edge."""
    for ax, (lo, hi) in enumerate(widths):
        n = x.shape[ax]
        if n == 0:
            if lo or hi:
                raise ValueError(f"pad: cannot apply {mode!r} padding to empty axis {ax}")
            continue
        offset = 1 if mode == "reflect" and n > 1 else 0
        for before, padding in ((True, lo), (False, hi)):
            edge = _edge(x, ax, 0, 1) if before else _edge(x, ax, x.shape[ax] - 1, x.shape[ax])
            while padding > 0:
                size = x.shape[ax]
                width = min(padding, n - offset)
                padding -= width
                if before:
                    start, stop = offset, offset + width
                else:
                    start = size - width - offset
                    stop = size if mode == "symmetric" or n == 1 else size - 1
                block = ew.sub(ew.add(edge, edge), sh.rev(_edge(x, ax, start, stop), (ax,)))
                if n > 1:
                    end = block.shape[ax]
                    edge = _edge(block, ax, 0, 1) if before else _edge(block, ax, end - 1, end)
                x = sh.concatenate([block, x] if before else [x, block], ax)
    return x


def _edge(x: Any, axis: int, start: int, stop: int) -> Any:
    lo, hi = [0] * x.ndim, list(x.shape)
    lo[axis], hi[axis] = start, stop
    return sh.slice_(x, lo, hi, None)


def _like(out: Any, x: Any) -> Any:
    """``out`` in ``x``'s dtype, weak where ``x`` is (as JAX converts the padding)."""
    out = ew.convert(out, x.dtype)
    return ew.weak(out) if dtypes.is_weak(x) else ew.strong(out)


def _repeat(edge: Any, n: int, axis: int) -> Any:
    shape = tuple(n if a == axis else d for a, d in enumerate(edge.shape))
    return sh.broadcast_in_dim(sh.reshape(edge, tuple(d for a, d in enumerate(edge.shape) if a != axis)), shape,
                               tuple(a for a in range(edge.ndim) if a != axis))


def _pad_linear_ramp(x: Any, widths: list[tuple[int, int]], end_values: list[tuple[Any, Any]]) -> Any:
    """JAX's ramps: ``linspace(end_value, edge, width, endpoint=False)`` in ``x``'s dtype on each side."""
    for ax, ((lo, hi), (end_lo, end_hi)) in enumerate(zip(widths, end_values)):
        n = x.shape[ax]
        squeeze = tuple(d for a, d in enumerate(x.shape) if a != ax)
        first = sh.reshape(_edge(x, ax, 0, 1), squeeze)
        last = sh.reshape(_edge(x, ax, n - 1, n), squeeze)
        before = _like(linspace(end_lo, first, lo, endpoint=False, dtype=x.dtype, axis=ax), x)
        after = sh.rev(_like(linspace(end_hi, last, hi, endpoint=False, dtype=x.dtype, axis=ax), x), (ax,))
        x = sh.concatenate([before, x, after], ax)
    return x


def _pad_statistic(x: Any, widths: list[tuple[int, int]], lengths: list[tuple[int, int]] | None,
                   statistic: Callable[..., Any]) -> Any:
    """Each side filled with ``statistic`` of the ``lengths`` entries at that edge (all entries when
    None), rounded for integer arrays, as JAX's."""
    for ax, (lo, hi) in enumerate(widths):
        n = x.shape[ax]
        if lengths is None:
            stat_lo = stat_hi = statistic(x, axis=ax, keepdims=True)
        else:
            len_lo, len_hi = (int(v) for v in lengths[ax])
            if len_lo == 0 or len_hi == 0:
                raise ValueError("pad: stat_length of 0 yields no value for padding")
            stat_lo = statistic(_edge(x, ax, 0, min(len_lo, n)), axis=ax, keepdims=True)
            stat_hi = statistic(_edge(x, ax, n - min(len_hi, n), n), axis=ax, keepdims=True)
        if dtypes.is_int(x.dtype):
            stat_lo, stat_hi = round_(stat_lo), round_(stat_hi)
        before, after = _repeat(_like(stat_lo, x), lo, ax), _repeat(_like(stat_hi, x), hi, ax)
        x = sh.concatenate([before, x, after], ax)
    return x


def _pad_with_function(x: Any, widths: list[tuple[int, int]], func: Callable[..., Any], options: dict) -> Any:
    """numpy's callable mode, as JAX's: ``func(row, (before, after), axis, options)`` returns each
    1-d slice of the zero-padded array along each axis in turn."""
    padded = _pad_constant(x, widths, 0)
    for ax in range(padded.ndim):
        padded = apply_along_axis(func, ax, padded, widths[ax], ax, options)
    return padded
