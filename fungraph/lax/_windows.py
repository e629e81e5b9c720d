"""``lax.reduce`` and ``lax.reduce_window`` (and the padding of every windowed operation), composed of existing
primitives so that every transformation and backend handles them.

A window reduction pads the operand (``pad`` with interior holes for base dilation), gathers
each axis's windows into a new axis (a strided ``slice``, a ``slice`` and ``reshape`` for
non-overlapping windows, else one ``take`` with an ``(out, window)`` index table), then
reduces the window axes like ``lax.reduce``.

The computation decides the reduction. ``lax.add``/``mul``/``max``/``min`` and numpy's
``add``/``multiply``/``maximum``/``minimum`` become one ``reduce_sum``/``reduce_prod``/
``reduce_max``/``reduce_min`` over the window axes, with padding filled by the operation's
identity; ``init_value`` is combined once afterwards unless it is that identity. Any other
callable (and every variadic reduction) is folded pairwise: ``ceil(log2 K)`` rounds, each one
call of the callable (``vmap``-ed, so it sees scalars as in JAX) on half the remaining
elements, then one call with ``init_value``. That is O(log K) staged calls and O(M*K) work
for M outputs of K-element windows, with slices and concatenations between the rounds;
padded positions and base-dilation holes are skipped by selects with constant masks, as
XLA skips them. The order of combination is unspecified, as in XLA."""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError, Tracer
from fungraph.ir import aval_of
from fungraph.lax import _elementwise as lax_ew
from fungraph.lax import _linalg as lax_linalg
from fungraph.lax import _reductions as lax_red
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh
from fungraph.primitives.indexing import take
from fungraph.primitives.operands import asarray
from fungraph.primitives.reductions import MONOIDS, register_monoid


def padding_pairs(padding: Any, in_shape: Sequence[int], window: Sequence[int],
                  strides: Sequence[int], dilation: Sequence[int] | None = None) -> tuple[tuple[int, int], ...]:
    """"SAME"/"SAME_LOWER"/"VALID" or explicit (lo, hi) pairs, as explicit pairs (JAX's SAME
    split: the odd element goes high, or low for SAME_LOWER)."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return tuple((0, 0) for _ in in_shape)
        if mode in ("SAME", "SAME_LOWER"):
            dil = dilation or (1,) * len(window)
            pairs = []
            for n, k, s, d in zip(in_shape, window, strides, dil):
                out = -(-n // s)
                total = builtins.max((out - 1) * s + (k - 1) * d + 1 - n, 0)
                small, large = total // 2, total - total // 2
                pairs.append((small, large) if mode == "SAME" else (large, small))
            return tuple(pairs)
        raise ValueError(f"padding must be 'SAME', 'SAME_LOWER', 'VALID' or (lo, hi) pairs, got {padding!r}")
    pairs = tuple((int(lo), int(hi)) for lo, hi in padding)
    if len(pairs) != len(in_shape):
        raise ShapeError(f"padding {padding} needs one (lo, hi) pair per spatial axis ({len(in_shape)})")
    return pairs


for _fn, _kind in ((lax_ew.add, "sum"), (lax_ew.mul, "prod"), (lax_ew.max, "max"), (lax_ew.min, "min")):
    register_monoid(_fn, _kind)


def _identity(kind: str, dtype: np.dtype) -> np.ndarray:
    """The value that leaves ``kind``'s reduction unchanged, in ``dtype``."""
    if kind in ("sum", "prod"):
        return np.asarray(kind == "prod", dtype)
    low = kind == "max"
    if dtype == dtypes.bool_:
        return np.asarray(not low, dtype)
    if dtypes.is_int(dtype):
        info = np.iinfo(dtype)
        return np.asarray(info.min if low else info.max, dtype)
    return np.asarray(-np.inf if low else np.inf, dtype)


def _reduce_fast(kind: str, x: Any, axes: tuple[int, ...]) -> Any:
    reducer = {"sum": lax_red.reduce_sum, "prod": lax_red.reduce_prod, "max": lax_red.reduce_max,
               "min": lax_red.reduce_min}[kind]
    return reducer(x, axes)


def _flat_pair(operands: Any, init_values: Any, name: str) -> tuple[list[Any], list[Any], Any]:
    """Operand leaves and their scalar init values, cast to each operand's dtype."""
    from fungraph.tree_util import tree_flatten

    leaves, tree = tree_flatten(operands)
    init_leaves, init_tree = tree_flatten(init_values)
    if init_tree != tree:
        raise TypeError(f"lax.{name}: operands and init_values must have the same structure, got {tree} "
                        f"and {init_tree}")
    if not leaves:
        raise ValueError(f"lax.{name} needs at least one operand")
    leaves = [asarray(x) for x in leaves]
    shapes = {aval_of(x).shape for x in leaves}
    if len(shapes) > 1:
        raise ShapeError(f"lax.{name}: operands must share one shape, got {[str(aval_of(x)) for x in leaves]}")
    return leaves, [_init_like(v, aval_of(x).dtype, name) for v, x in zip(init_leaves, leaves)], tree


def _init_like(init: Any, dtype: np.dtype, name: str) -> Any:
    """``init`` as a scalar of ``dtype``: concrete values are cast (rounded to a float dtype,
    exactly to an integer or bool one), traced ones must already match."""
    if isinstance(init, Tracer):
        if aval_of(init).shape != () or aval_of(init).dtype != dtype:
            raise TypeError(f"lax.{name}: init value {aval_of(init)} must be a scalar of the operand's dtype {dtype}")
        return init
    value = np.asarray(init)
    if value.shape != ():
        raise TypeError(f"lax.{name}: init values must be scalars, got shape {value.shape}")
    with np.errstate(invalid="ignore", over="ignore"):
        cast = value.astype(dtype)
    kinds = "biuf" + ("c" if dtypes.is_complex(dtype) else "")
    rounds = dtypes.is_inexact(dtype) and value.dtype.kind in kinds
    if not rounds and not np.array_equal(cast, value, equal_nan=dtypes.is_inexact(value.dtype)):
        raise TypeError(f"lax.{name}: init value {value!r} does not fit the operand's dtype {dtype}")
    return cast


def _is_identity(init: Any, kind: str, dtype: np.dtype) -> bool:
    return not isinstance(init, Tracer) and bool(np.asarray(init) == _identity(kind, dtype))


def _apply(computation: Callable[[Any, Any], Any], tree: Any, a: list[Any], b: list[Any]) -> list[Any]:
    """``computation`` on matching elements of ``a`` and ``b`` (leaves of one shape), called
    on scalars through ``vmap``; its result must keep the operands' structure and dtypes."""
    from fungraph.api import vmap
    from fungraph.tree_util import tree_flatten, tree_unflatten

    shape = aval_of(a[0]).shape
    n = math.prod(shape)
    if n == 0:
        return a
    flat_a = tree_unflatten(tree, [sh.reshape(x, (n,)) for x in a])
    flat_b = tree_unflatten(tree, [sh.reshape(x, (n,)) for x in b])
    out, out_tree = tree_flatten(vmap(computation)(flat_a, flat_b))
    want = [aval_of(x).dtype for x in a]
    got = [aval_of(asarray(y)) for y in out]
    if out_tree != tree or [g.dtype for g in got] != want or any(g.shape != (n,) for g in got):
        raise TypeError(f"reduction computation must return scalars of the operands' structure {tree} and dtypes "
                        f"{[str(d) for d in want]}, got {out_tree} with {[str(g.dtype) for g in got]}")
    return [sh.reshape(asarray(y), shape) for y in out]


def _select(mask: np.ndarray, on: list[Any], off: list[Any]) -> list[Any]:
    if mask.all():
        return on
    return [ew.select(mask, x, y) for x, y in zip(on, off)]


def _fold(computation: Callable[[Any, Any], Any], tree: Any, leaves: list[Any], inits: list[Any],
          valid: np.ndarray | None) -> list[Any]:
    """Fold the last axis of each ``(M, K)`` leaf with ``computation``, pairwise, then combine
    with the init values; ``valid`` marks the elements that take part (None: all)."""
    m, k = aval_of(leaves[0]).shape
    start = [sh.broadcast_to(asarray(v), (m,)) for v in inits]
    if k == 0:
        return start
    mask = np.ones((m, k), bool) if valid is None else valid
    while k > 1:
        h = k // 2
        a = [sh.slice_(x, (0, 0), (m, h), None) for x in leaves]
        b = [sh.slice_(x, (0, h), (m, 2 * h), None) for x in leaves]
        odd = [sh.slice_(x, (0, 2 * h), (m, k), None) for x in leaves] if k % 2 else []
        ma, mb = mask[:, :h], mask[:, h:2 * h]
        leaves = _select(ma & mb, _apply(computation, tree, a, b), _select(ma, a, b))
        if odd:
            leaves = [sh.concatenate([c, r], 1) for c, r in zip(leaves, odd)]
        mask = np.concatenate([ma | mb, mask[:, 2 * h:]], axis=1)
        k = h + k % 2
    last = [sh.reshape(x, (m,)) for x in leaves]
    return _select(mask[:, 0], _apply(computation, tree, start, last), start)


def _reduce_leaves(leaves: list[Any], inits: list[Any], tree: Any, computation: Callable[[Any, Any], Any],
                   axes: tuple[int, ...], valid: np.ndarray | None) -> list[Any]:
    """Reduce ``axes`` of every leaf: by a reduction primitive for a known computation on one
    operand, else by the pairwise fold (``valid`` has the leaves' shape)."""
    shape = aval_of(leaves[0]).shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    out_shape = tuple(shape[i] for i in kept)
    kind = MONOIDS.get(computation) if len(leaves) == 1 else None
    if kind is not None and all(shape[a] for a in axes):
        (x,), (init,) = leaves, inits
        out = _reduce_fast(kind, x, axes)
        if _is_identity(init, kind, aval_of(x).dtype):
            return [out]
        return [computation(sh.broadcast_to(asarray(init), out_shape), out)]
    m = math.prod(out_shape)
    k = math.prod(shape[a] for a in axes)
    perm = kept + axes
    flat = [sh.reshape(sh.transpose(x, perm), (m, k)) for x in leaves]
    mask = None if valid is None else np.transpose(valid, perm).reshape(m, k)
    return [sh.reshape(y, out_shape) for y in _fold(computation, tree, flat, inits, mask)]


def reduce(operands: Any, init_values: Any, computation: Callable[[Any, Any], Any],
           dimensions: Sequence[int], out_sharding: Any = None) -> Any:
    """``jax.lax.reduce``: ``computation`` folded over ``dimensions`` of ``operands`` (an array
    or a pytree of same-shaped arrays), starting from ``init_values`` of the same structure.
    Like JAX on XLA, size-1 dimensions are dropped rather than reduced, so with no other
    dimensions the operands come back unchanged and the init values are unused."""
    from fungraph.primitives._rules import normalize_axis
    from fungraph.tree_util import tree_flatten, tree_unflatten

    lax_linalg._no_sharding("reduce", out_sharding)
    leaves, inits, tree = _flat_pair(operands, init_values, "reduce")
    rank = len(aval_of(leaves[0]).shape)
    axes = tuple(normalize_axis(int(d), rank, "lax.reduce") for d in dimensions)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"lax.reduce: repeated dimension in {tuple(dimensions)} for {aval_of(leaves[0])}")
    shape = aval_of(leaves[0]).shape
    units = {a for a in axes if shape[a] == 1}
    if units:
        squeezed = tuple(d for i, d in enumerate(shape) if i not in units)
        leaves = [sh.reshape(x, squeezed) for x in leaves]
        axes = tuple(a - sum(u < a for u in units) for a in axes if a not in units)
    if not axes:
        return tree_unflatten(tree, leaves)
    outs = _reduce_leaves(leaves, inits, tree, computation, tuple(sorted(axes)), None)
    # JAX's rule: an output is weakly typed when its operand and its init value both are
    pairs = zip(tree_flatten(operands)[0], tree_flatten(init_values)[0])
    weak = [dtypes.is_weak(x) and dtypes.is_weak(i) for x, i in pairs]
    return tree_unflatten(tree, [o if w else ew.strong(o) for o, w in zip(outs, weak)])


def _ints(name: str, values: Sequence[int] | None, rank: int, default: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """``values`` (or ``default`` on every axis) checked to be one positive integer per axis."""
    if values is None:
        return (default,) * rank
    out = tuple(int(v) for v in values)
    if len(out) != rank:
        raise ShapeError(f"lax.reduce_window: {name} {out} needs one entry per axis of the operand shape {shape}")
    if any(v < 1 for v in out):
        raise ShapeError(f"lax.reduce_window: {name} must be positive, got {out} for operand shape {shape}")
    return out


def _pads(padding: Any, shape: tuple[int, ...], window: tuple[int, ...], strides: tuple[int, ...],
          window_dilation: tuple[int, ...]) -> tuple[tuple[int, int], ...]:

    if isinstance(padding, str):
        return padding_pairs(padding, shape, window, strides, window_dilation)
    pairs = tuple(tuple(p) for p in padding)
    if len(pairs) != len(shape) or any(len(p) != 2 for p in pairs):
        raise ShapeError(f"lax.reduce_window: padding {padding!r} needs one (lo, hi) pair per axis of the operand "
                         f"shape {shape}")
    return tuple((int(lo), int(hi)) for lo, hi in pairs)


class _Geometry:
    """Where each axis's windows fall: ``out`` windows of ``window`` elements every ``stride``,
    element ``k`` at ``k * dilation``, in the padded, base-dilated axis."""

    def __init__(self, n: int, window: int, stride: int, pad: tuple[int, int], base: int, dilation: int) -> None:
        self.n, self.window, self.stride, self.base, self.dilation = n, window, stride, base, dilation
        self.lo, self.hi = pad
        extent = (n - 1) * base + 1 + self.lo + self.hi if n else self.lo + self.hi
        span = (window - 1) * dilation + 1
        self.out = (extent - span) // stride + 1 if extent >= span else 0

    def positions(self) -> np.ndarray:
        """``(out, window)`` positions in the padded, base-dilated axis, low padding at 0."""
        return np.arange(self.out)[:, None] * self.stride + np.arange(self.window)[None, :] * self.dilation

    def valid(self) -> np.ndarray:
        """Which positions hold operand elements (not padding, not base-dilation holes)."""
        at = self.positions() - self.lo
        return (at >= 0) & (at <= (self.n - 1) * self.base) & (at % self.base == 0)


def _gather_windows(x: Any, fill: Any, geoms: list[_Geometry]) -> tuple[Any, tuple[int, ...]]:
    """``x`` padded with ``fill`` and its windows gathered: each axis becomes ``(out, window)``
    (just ``out`` for one-element windows); returns the array and its window axes."""
    config = [(builtins.max(g.lo, 0), builtins.max(g.hi, 0), g.base - 1) for g in geoms]
    if any(any(c) for c in config):
        x = sh.pad(x, fill, config)
    window_axes = []
    pos = 0
    for g in geoms:
        shape = aval_of(x).shape
        off = builtins.max(-g.lo, 0)
        if g.window == 1 or (g.dilation == 1 and g.stride == g.window):
            step = 1 if g.window > 1 else g.stride
            stop = off + (g.out * g.window if g.window > 1 else (g.out - 1) * g.stride + 1)
            start = [0] * len(shape)
            limit = list(shape)
            strides = [1] * len(shape)
            start[pos], limit[pos], strides[pos] = off, stop, step
            x = sh.slice_(x, start, limit, strides)
            if g.window > 1:
                x = sh.reshape(x, shape[:pos] + (g.out, g.window) + shape[pos + 1:])
        else:
            x = take(x, (g.positions() + off).astype(np.int64), pos)
        if g.window > 1:
            window_axes.append(pos + 1)
            pos += 1
        pos += 1
    return x, tuple(window_axes)


def reduce_window(operand: Any, init_value: Any, computation: Callable[[Any, Any], Any],
                  window_dimensions: Sequence[int], window_strides: Sequence[int] | None = None,
                  padding: Any = "VALID", base_dilation: Sequence[int] | None = None,
                  window_dilation: Sequence[int] | None = None) -> Any:
    """``jax.lax.reduce_window``: ``computation`` over every window of ``operand`` (an array or
    a pytree of same-shaped arrays), any rank; ``padding`` is "VALID", "SAME", "SAME_LOWER" or
    (lo, hi) pairs (negative ones crop). Padding and base-dilation holes do not take part;
    ``init_value`` is combined once per window."""
    from fungraph.tree_util import tree_unflatten

    leaves, inits, tree = _flat_pair(operand, init_value, "reduce_window")
    shape = aval_of(leaves[0]).shape
    rank = len(shape)
    window = _ints("window_dimensions", window_dimensions, rank, 1, shape)
    strides = _ints("window_strides", window_strides, rank, 1, shape)
    base = _ints("base_dilation", base_dilation, rank, 1, shape)
    dilation = _ints("window_dilation", window_dilation, rank, 1, shape)
    pads = _pads(padding, shape, window, strides, dilation)
    geoms = [_Geometry(*g) for g in zip(shape, window, strides, pads, base, dilation)]
    out_shape = tuple(g.out for g in geoms)
    if 0 in out_shape:
        return tree_unflatten(tree, [sh.broadcast_to(asarray(v), out_shape) for v in inits])
    kind = MONOIDS.get(computation) if len(leaves) == 1 else None
    fills = inits if kind is None else [_identity(kind, aval_of(leaves[0]).dtype)]
    gathered = [_gather_windows(x, f, geoms) for x, f in zip(leaves, fills)]
    axes = gathered[0][1]
    valid = None
    if kind is None and any(not g.valid().all() for g in geoms):
        valid = np.ones((), bool)
        for g in geoms:
            axis_valid = g.valid() if g.window > 1 else g.valid()[:, 0]
            valid = np.multiply.outer(valid, axis_valid)
    outs = _reduce_leaves([x for x, _ in gathered], inits, tree, computation, axes, valid)
    return tree_unflatten(tree, outs)
