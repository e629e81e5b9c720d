"""``lax.reduce`` and ``lax.reduce_window`` for :mod:`fungraph.lax`, composed of existing
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
from typing import Any, NamedTuple

import numpy as np

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph.core import ShapeError, Tracer
from fungraph.ir import aval_of
from fungraph.numpy._util import asarray, cast
from fungraph.primitives import shape as sh
from fungraph.primitives.indexing import take


def _monoids() -> dict[Any, str]:
    """Known computations, by identity, mapped to the name of their reduction."""
    from fungraph import _lax_ops as lo

    return {lo.add: "sum", fnp.add: "sum", lo.mul: "prod", fnp.multiply: "prod",
            lo.max: "max", fnp.maximum: "max", lo.min: "min", fnp.minimum: "min"}


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
    from fungraph import _lax_ops as lo

    reducer = {"sum": lo.reduce_sum, "prod": lo.reduce_prod, "max": lo.reduce_max, "min": lo.reduce_min}[kind]
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
    return [fnp.where(mask, x, y) for x, y in zip(on, off)]


def _fold(computation: Callable[[Any, Any], Any], tree: Any, leaves: list[Any], inits: list[Any],
          valid: np.ndarray | None) -> list[Any]:
    """Fold the last axis of each ``(M, K)`` leaf with ``computation``, pairwise, then combine
    with the init values; ``valid`` marks the elements that take part (None: all)."""
    m, k = aval_of(leaves[0]).shape
    start = [fnp.broadcast_to(v, (m,)) for v in inits]
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
    kind = _monoids().get(computation) if len(leaves) == 1 else None
    if kind is not None and all(shape[a] for a in axes):
        (x,), (init,) = leaves, inits
        out = _reduce_fast(kind, x, axes)
        if _is_identity(init, kind, aval_of(x).dtype):
            return [out]
        return [computation(fnp.broadcast_to(init, out_shape), out)]
    m = math.prod(out_shape)
    k = math.prod(shape[a] for a in axes)
    perm = kept + axes
    flat = [sh.reshape(sh.transpose(x, perm), (m, k)) for x in leaves]
    mask = None if valid is None else np.transpose(valid, perm).reshape(m, k)
    return [sh.reshape(y, out_shape) for y in _fold(computation, tree, flat, inits, mask)]


def reduce(operands: Any, init_values: Any, computation: Callable[[Any, Any], Any],
           dimensions: Sequence[int]) -> Any:
    """``jax.lax.reduce``: ``computation`` folded over ``dimensions`` of ``operands`` (an array
    or a pytree of same-shaped arrays), starting from ``init_values`` of the same structure.
    Like JAX on XLA, size-1 dimensions are dropped rather than reduced, so with no other
    dimensions the operands come back unchanged and the init values are unused."""
    from fungraph.primitives._rules import normalize_axis
    from fungraph.tree_util import tree_unflatten

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
    return tree_unflatten(tree, _reduce_leaves(leaves, inits, tree, computation, tuple(sorted(axes)), None))


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
    from fungraph.lax import padding_pairs

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
        return tree_unflatten(tree, [fnp.broadcast_to(v, out_shape) for v in inits])
    kind = _monoids().get(computation) if len(leaves) == 1 else None
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


# --- convolutions ---------------------------------------------------------------------------------


class ConvDimensionNumbers(NamedTuple):
    """Where the axes are: ``lhs_spec`` (batch, feature, spatial...), ``rhs_spec`` (output
    feature, input feature, spatial...), ``out_spec`` (batch, feature, spatial...)."""

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


#: ``dimension_numbers`` as ``conv_general_dilated`` takes them: None (NC.../OI.../NC...),
#: three layout strings such as ``("NHWC", "HWIO", "NHWC")``, or ``ConvDimensionNumbers``.
ConvGeneralDilatedDimensionNumbers = tuple[str, str, str] | ConvDimensionNumbers | None


def _specs(rank: int, dimension_numbers: Any) -> ConvDimensionNumbers:
    """``dimension_numbers`` as axis positions; spatial axes are ordered as in the kernel's string.
    Any triple of axis sequences is taken as positions (JAX's own ``ConvDimensionNumbers`` too)."""
    if dimension_numbers is None:
        same = tuple(range(rank))
        return ConvDimensionNumbers(same, same, same)
    if isinstance(dimension_numbers, (tuple, list)) and len(dimension_numbers) == 3 and not any(
            isinstance(s, str) for s in dimension_numbers):
        specs = dimension_numbers
        if any(sorted(s) != list(range(rank)) for s in specs):
            raise ShapeError(f"conv dimension_numbers {specs} must each permute the {rank} axes")
        return ConvDimensionNumbers(*(tuple(int(i) for i in s) for s in specs))
    if not (isinstance(dimension_numbers, (tuple, list)) and len(dimension_numbers) == 3
            and all(isinstance(s, str) for s in dimension_numbers)):
        raise TypeError(f"conv dimension_numbers must be None, three layout strings or ConvDimensionNumbers, got "
                        f"{dimension_numbers!r}")
    lhs, rhs, out = dimension_numbers
    spatial = [c for c in rhs if c not in "OI"]
    ok = (all(len(s) == rank and len(set(s)) == rank for s in (lhs, rhs, out)) and "O" in rhs and "I" in rhs
          and all("N" in s and "C" in s and set(s) - {"N", "C"} == set(spatial) for s in (lhs, out)))
    if not ok:
        raise ShapeError(f"conv dimension_numbers {dimension_numbers!r} must name batch N and feature C (O and I for "
                         f"the kernel) and the same spatial letters in each string, for operands of rank {rank}")
    return ConvDimensionNumbers((lhs.index("N"), lhs.index("C"), *(lhs.index(c) for c in spatial)),
                                (rhs.index("O"), rhs.index("I"), *(rhs.index(c) for c in spatial)),
                                (out.index("N"), out.index("C"), *(out.index(c) for c in spatial)))


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers: Any) -> ConvDimensionNumbers:
    """``dimension_numbers`` (None, strings or ``ConvDimensionNumbers``) as axis positions."""
    if len(lhs_shape) != len(rhs_shape):
        raise ShapeError(f"conv: input {tuple(lhs_shape)} and kernel {tuple(rhs_shape)} need the same rank")
    return _specs(len(lhs_shape), dimension_numbers)


def _per_axis(name: str, values: Sequence[int] | None, n: int, what: str) -> tuple[int, ...]:
    if values is None:
        return (1,) * n
    out = tuple(int(v) for v in values)
    if len(out) != n or any(v < 1 for v in out):
        raise ShapeError(f"{what}: {name} {out} needs one positive entry per spatial axis ({n})")
    return out


def _geometries(x_shape: tuple[int, ...], kernel: Sequence[int], strides: Sequence[int],
                pads: Sequence[tuple[int, int]], lhs_dilation: Sequence[int],
                rhs_dilation: Sequence[int]) -> list[_Geometry]:
    """Window geometries of an (N, C, spatial...) operand: N and C untouched."""
    return [_Geometry(n, 1, 1, (0, 0), 1, 1) for n in x_shape[:2]] + [
        _Geometry(*g) for g in zip(x_shape[2:], kernel, strides, pads, lhs_dilation, rhs_dilation)]


def _patches(x: Any, geoms: list[_Geometry]) -> tuple[Any, tuple[int, ...]]:
    return _gather_windows(x, np.zeros((), aval_of(x).dtype), geoms)


def _conv_by_patches(x: Any, w: Any, geoms: list[_Geometry]) -> Any:
    """(N, C, spatial...) by (O, C, kernel...): the input's windows gathered, then one
    contraction over channels and window positions (any rank, any inexact dtype)."""
    from fungraph.primitives.linalg import dot_general

    patches, axes = _patches(x, geoms)
    o, c, *kernel = aval_of(w).shape
    kept = tuple(k for k in kernel if k > 1)
    w = sh.reshape(w, (o, c) + kept)
    out = dot_general(patches, w, (((1, *axes), tuple(range(1, 2 + len(kept)))), ((), ())))
    rank = len(aval_of(out).shape)
    return sh.transpose(out, (0, rank - 1) + tuple(range(1, rank - 1)))


def _conv_core(x: Any, w: Any, strides: tuple[int, ...], pads: tuple[tuple[int, int], ...],
               lhs_dilation: tuple[int, ...], rhs_dilation: tuple[int, ...]) -> Any:
    """Ungrouped convolution of canonical (N, C, spatial...) and (O, I, spatial...) operands:
    the ``conv`` primitive for one or two real spatial axes, window patches otherwise."""
    from fungraph.primitives import conv as _conv

    xs, ws = aval_of(x).shape, aval_of(w).shape
    geoms = _geometries(xs, ws[2:], strides, pads, lhs_dilation, rhs_dilation)
    out_shape = (xs[0], ws[0]) + tuple(g.out for g in geoms[2:])
    if 0 in out_shape or 0 in xs[1:2]:
        return fnp.zeros(out_shape, aval_of(x).dtype)
    nsp = len(strides)
    if nsp not in (1, 2) or not dtypes.is_float(aval_of(x).dtype):
        return _conv_by_patches(x, w, geoms)
    if nsp == 2:
        return _conv.conv(x, w, strides, pads, lhs_dilation, rhs_dilation)
    out = _conv.conv(sh.reshape(x, xs + (1,)), sh.reshape(w, ws + (1,)), strides + (1,), pads + ((0, 0),),
                     lhs_dilation + (1,), rhs_dilation + (1,))
    return sh.reshape(out, out_shape)


def _grouped(x: Any, w: Any, groups: int, by_batch: bool, core: Callable[[Any, Any], Any]) -> Any:
    """``core`` once per group, vmapped: feature groups split the input channels and the
    kernel's outputs; batch groups split the batch (group-major) and the kernel's outputs.
    The groups' outputs are joined along the feature axis."""
    from fungraph.api import vmap

    xs, ws = aval_of(x).shape, aval_of(w).shape
    if by_batch:
        xg = sh.reshape(x, (groups, xs[0] // groups) + xs[1:])
    else:
        xg = sh.transpose(sh.reshape(x, (xs[0], groups, xs[1] // groups) + xs[2:]),
                          (1, 0) + tuple(range(2, len(xs) + 1)))
    wg = sh.reshape(w, (groups, ws[0] // groups) + ws[1:])
    out = vmap(core)(xg, wg)                                    # G, N', O/G, spatial...
    os = aval_of(out).shape
    out = sh.transpose(out, (1, 0) + tuple(range(2, len(os))))
    return sh.reshape(out, (os[1], os[0] * os[2]) + os[3:])


def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                         lhs_dilation: Sequence[int] | None = None, rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: ConvGeneralDilatedDimensionNumbers = None, feature_group_count: int = 1,
                         batch_group_count: int = 1, precision: Any = None, preferred_element_type: Any = None,
                         out_sharding: Any = None) -> Any:
    """``jax.lax.conv_general_dilated``: an N-d convolution (cross-correlation) of ``lhs`` with
    the kernel ``rhs``, any rank and layout, strides, "SAME"/"SAME_LOWER"/"VALID" or (lo, hi)
    padding, input and kernel dilation, and feature or batch groups. ``precision`` is accepted
    and ignored; integer operands are computed in float64 (exact below 2**53) and cast back."""
    from fungraph._lax_more import _finish, _no_sharding, canonical_precision, preferred_operands
    from fungraph.lax import padding_pairs

    canonical_precision(precision)
    _no_sharding("conv_general_dilated", out_sharding)
    (x, w), after = preferred_operands("conv_general_dilated", (lhs, rhs), preferred_element_type)
    dtype = aval_of(x).dtype
    if not dtypes.is_inexact(dtype):
        x, w = cast(x, dtypes.float64), cast(w, dtypes.float64)
    rank = len(aval_of(x).shape)
    if rank != len(aval_of(w).shape) or rank < 2:
        raise ShapeError(f"lax.conv_general_dilated: input {aval_of(x)} and kernel {aval_of(w)} need one rank >= 2")
    dn = _specs(rank, dimension_numbers)
    x, w = sh.transpose(x, dn.lhs_spec), sh.transpose(w, dn.rhs_spec)
    xs, ws = aval_of(x).shape, aval_of(w).shape
    what = "lax.conv_general_dilated"
    nsp = rank - 2
    strides = _per_axis("window_strides", window_strides, nsp, what)
    ld = _per_axis("lhs_dilation", lhs_dilation, nsp, what)
    rd = _per_axis("rhs_dilation", rhs_dilation, nsp, what)
    dilated = tuple((n - 1) * d + 1 if n else 0 for n, d in zip(xs[2:], ld))
    pads = padding_pairs(padding, dilated, ws[2:], strides, rd)
    fg, bg = int(feature_group_count), int(batch_group_count)
    n, c, o, i = xs[0], xs[1], ws[0], ws[1]
    if fg < 1 or bg < 1 or (fg > 1 and bg > 1) or c != i * fg or o % (fg * bg) or n % bg:
        raise ShapeError(f"{what}: input (N={n}, C={c}) and kernel (O={o}, I={i}) in canonical layout do not fit "
                         f"feature_group_count={fg}, batch_group_count={bg} (C = I * groups, groups dividing O, "
                         f"batch groups dividing N)")

    def core(a: Any, b: Any) -> Any:
        return _conv_core(a, b, strides, pads, ld, rd)

    groups = builtins.max(fg, bg)
    out = core(x, w) if groups == 1 else _grouped(x, w, groups, bg > 1, core)
    out = sh.transpose(out, tuple(int(k) for k in np.argsort(dn.out_spec)))
    if not dtypes.is_inexact(dtype):
        out = cast(fnp.round(out), dtype)
    return _finish(out, after)


def conv_with_general_padding(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                              lhs_dilation: Sequence[int] | None, rhs_dilation: Sequence[int] | None,
                              precision: Any = None, preferred_element_type: Any = None) -> Any:
    """``conv_general_dilated`` in the NC.../OI... layout."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                precision=precision, preferred_element_type=preferred_element_type)


def conv(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any, precision: Any = None,
         preferred_element_type: Any = None) -> Any:
    """``jax.lax.conv``: NC... input, OI... kernel, strides and "SAME"/"VALID"/explicit padding."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


_TRANSPOSE_LAYOUTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                      5: ("NHWDC", "HWDIO", "NHWDC")}


def _transpose_pads(padding: Any, kernel: Sequence[int], strides: Sequence[int],
                    consistent: bool) -> list[tuple[int, int]]:
    """The padding of the input-dilated convolution that ``conv_transpose`` runs, for an
    effective kernel extent ``k`` and stride ``s``: "VALID" gives ``n*s + max(k - s, 0)``
    outputs from ``n`` inputs and "SAME" gives ``n*s`` (low side ``k - 1``, or half the total
    when the stride is below the kernel); explicit pairs are used as they are, or, with
    ``consistent``, as the forward convolution's padding ``p`` (giving ``k - 1 - p``)."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode not in ("SAME", "VALID"):
            raise ValueError(f"lax.conv_transpose: padding must be 'SAME', 'VALID' or (lo, hi) pairs, got {padding!r}")
        pads = []
        for k, s in zip(kernel, strides):
            if mode == "VALID":
                pads.append((k - 1, s - 1 + builtins.max(k - s, 0)))
            else:
                total = k + s - 2
                lo = k - 1 if s > k - 1 else -(-total // 2)
                pads.append((lo, total - lo))
        return pads
    pairs = [(int(lo), int(hi)) for lo, hi in padding]
    if len(pairs) != len(kernel):
        raise ShapeError(f"lax.conv_transpose: padding {padding!r} needs one (lo, hi) pair per spatial axis")
    if consistent:
        return [(k - 1 - lo, k - 1 - hi) for (lo, hi), k in zip(pairs, kernel)]
    return pairs


def conv_transpose(lhs: Any, rhs: Any, strides: Sequence[int], padding: Any,
                   rhs_dilation: Sequence[int] | None = None,
                   dimension_numbers: ConvGeneralDilatedDimensionNumbers = None, transpose_kernel: bool = False,
                   precision: Any = None, preferred_element_type: Any = None,
                   use_consistent_padding: bool = False) -> Any:
    """``jax.lax.conv_transpose``: the fractionally strided convolution (input dilated by
    ``strides``), TensorFlow's layouts by default (``NHWC``, ``HWIO``). ``transpose_kernel``
    flips the kernel's spatial axes and swaps its feature axes, giving the gradient of the
    forward convolution as Keras's ``Conv2DTranspose`` does."""
    x, w = asarray(lhs), asarray(rhs)
    rank = len(aval_of(x).shape)
    if dimension_numbers is None:
        if rank not in _TRANSPOSE_LAYOUTS:
            raise ShapeError(f"lax.conv_transpose: no default layout for rank {rank}; pass dimension_numbers")
        dimension_numbers = _TRANSPOSE_LAYOUTS[rank]
    dn = conv_dimension_numbers(aval_of(x).shape, aval_of(w).shape, dimension_numbers)
    nsp = rank - 2
    strides = _per_axis("strides", strides, nsp, "lax.conv_transpose")
    rd = _per_axis("rhs_dilation", rhs_dilation, nsp, "lax.conv_transpose")
    kernel = [aval_of(w).shape[a] for a in dn.rhs_spec[2:]]
    effective = [(k - 1) * d + 1 for k, d in zip(kernel, rd)]
    pads = _transpose_pads(padding, effective, strides, use_consistent_padding)
    if transpose_kernel:
        w = fnp.flip(w, axis=dn.rhs_spec[2:]) if nsp else w
        w = fnp.swapaxes(w, dn.rhs_spec[0], dn.rhs_spec[1])
    return conv_general_dilated(x, w, (1,) * nsp, pads, strides, rd, dn, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_patches(lhs: Any, filter_shape: Sequence[int], window_strides: Sequence[int], padding: Any,
                                 lhs_dilation: Sequence[int] | None = None, rhs_dilation: Sequence[int] | None = None,
                                 dimension_numbers: ConvGeneralDilatedDimensionNumbers = None, precision: Any = None,
                                 preferred_element_type: Any = None) -> Any:
    """The patches ``conv_general_dilated`` would see: each output position's window of
    ``filter_shape`` (in the kernel layout's spatial order) flattened into the feature axis,
    channel-major (``C * prod(filter_shape)`` features). Gathered, so exact for any dtype."""
    from fungraph._lax_more import canonical_precision
    from fungraph.lax import padding_pairs

    canonical_precision(precision)
    x = asarray(lhs)
    if preferred_element_type is not None:
        x = cast(x, dtypes.canonicalize(preferred_element_type))
    rank = len(aval_of(x).shape)
    dn = _specs(rank, dimension_numbers)
    x = sh.transpose(x, dn.lhs_spec)
    xs = aval_of(x).shape
    what = "lax.conv_general_dilated_patches"
    nsp = rank - 2
    kernel = tuple(int(k) for k in filter_shape)
    if len(kernel) != nsp or any(k < 1 for k in kernel):
        raise ShapeError(f"{what}: filter_shape {kernel} needs one positive size per spatial axis of {aval_of(x)}")
    strides = _per_axis("window_strides", window_strides, nsp, what)
    ld = _per_axis("lhs_dilation", lhs_dilation, nsp, what)
    rd = _per_axis("rhs_dilation", rhs_dilation, nsp, what)
    dilated = tuple((n - 1) * d + 1 if n else 0 for n, d in zip(xs[2:], ld))
    pads = padding_pairs(padding, dilated, kernel, strides, rd)
    geoms = _geometries(xs, kernel, strides, pads, ld, rd)
    outs = tuple(g.out for g in geoms[2:])
    features = xs[1] * math.prod(kernel)
    if 0 in outs or 0 in xs:
        canonical = fnp.zeros((xs[0], features) + outs, aval_of(x).dtype)
    else:
        patches, axes = _patches(x, geoms)
        rest = tuple(a for a in range(2, len(aval_of(patches).shape)) if a not in axes)
        canonical = sh.reshape(sh.transpose(patches, (0, 1) + axes + rest), (xs[0], features) + outs)
    return sh.transpose(canonical, tuple(int(k) for k in np.argsort(dn.out_spec)))
