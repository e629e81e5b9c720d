"""``jax.lax``'s convolutions: ``conv_general_dilated`` with dimension numbers, dilations, groups
and ``Precision``, ``conv_transpose`` and ``conv_general_dilated_patches``, on the ``conv``
primitive or on gathered patches and one ``dot_general``."""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError
from fungraph.ir import aval_of
from fungraph.lax._elementwise import _same_dtype
from fungraph.lax._linalg import _finish, _no_sharding, canonical_precision, dot_general, preferred_operands
from fungraph.lax._windows import _gather_windows, _Geometry, padding_pairs
from fungraph.primitives import shape as sh
from fungraph.primitives.elementwise import round_half_even
from fungraph.primitives.operands import asarray, cast


class ConvDimensionNumbers(NamedTuple):
    """Where the axes are: ``lhs_spec`` (batch, feature, spatial...), ``rhs_spec`` (output
    feature, input feature, spatial...), ``out_spec`` (batch, feature, spatial...)."""

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


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
        return np.zeros(out_shape, aval_of(x).dtype)
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

    canonical_precision(precision)
    _no_sharding("conv_general_dilated", out_sharding)
    _same_dtype("conv_general_dilated", lhs, rhs)
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
        out = cast(round_half_even(out), dtype)
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
        w = sh.rev(w, dn.rhs_spec[2:]) if nsp else w
        swap = list(range(rank))
        swap[dn.rhs_spec[0]], swap[dn.rhs_spec[1]] = dn.rhs_spec[1], dn.rhs_spec[0]
        w = sh.transpose(w, swap)
    return conv_general_dilated(x, w, (1,) * nsp, pads, strides, rd, dn, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_patches(lhs: Any, filter_shape: Sequence[int], window_strides: Sequence[int], padding: Any,
                                 lhs_dilation: Sequence[int] | None = None, rhs_dilation: Sequence[int] | None = None,
                                 dimension_numbers: ConvGeneralDilatedDimensionNumbers = None, precision: Any = None,
                                 preferred_element_type: Any = None) -> Any:
    """The patches ``conv_general_dilated`` would see: each output position's window of
    ``filter_shape`` (in the kernel layout's spatial order) flattened into the feature axis,
    channel-major (``C * prod(filter_shape)`` features). Gathered, so exact for any dtype."""

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
        canonical = np.zeros((xs[0], features) + outs, aval_of(x).dtype)
    else:
        patches, axes = _patches(x, geoms)
        rest = tuple(a for a in range(2, len(aval_of(patches).shape)) if a not in axes)
        canonical = sh.reshape(sh.transpose(patches, (0, 1) + axes + rest), (xs[0], features) + outs)
    return sh.transpose(canonical, tuple(int(k) for k in np.argsort(dn.out_spec)))


def conv_general_permutations(dimension_numbers: tuple[str, str, str]) -> tuple[tuple[int, ...], ...]:
    """The axis permutations that bring three layout strings to (batch, feature, spatial...) with
    the spatial axes in the kernel string's order (``jax.lax.conv_general_permutations``)."""
    pairs = (("N", "C"), ("O", "I"), ("N", "C"))
    if not (isinstance(dimension_numbers, (tuple, list)) and len(dimension_numbers) == 3):
        raise TypeError(f"conv_general_permutations: needs three layout strings, got {dimension_numbers!r}")
    for i, (a, b) in enumerate(pairs):
        spec = dimension_numbers[i]
        if not (isinstance(spec, str) and spec.count(a) == spec.count(b) == 1):
            raise TypeError(f"convolution dimension_numbers[{i}] must contain the characters '{a}' and '{b}' exactly "
                            f"once, got {spec}.")
        if len(spec) != len(set(spec)):
            raise TypeError(f"convolution dimension_numbers[{i}] cannot have duplicate characters, got {spec}.")
    lhs, rhs, out = dimension_numbers
    if not set(lhs) - {"N", "C"} == set(rhs) - {"O", "I"} == set(out) - {"N", "C"}:
        raise TypeError(f"convolution dimension_numbers elements must each have the same set of spatial characters, "
                        f"got {tuple(dimension_numbers)}.")
    spatial = [c for c in rhs if c not in "OI"]
    return tuple((spec.index(a), spec.index(b), *(spec.index(c) for c in spatial))
                 for spec, (a, b) in zip(dimension_numbers, pairs))


def conv_general_dilated_local(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                               filter_shape: Sequence[int], lhs_dilation: Sequence[int] | None = None,
                               rhs_dilation: Sequence[int] | None = None,
                               dimension_numbers: ConvGeneralDilatedDimensionNumbers = None,
                               precision: Any = None) -> Any:
    """An unshared (locally connected) convolution: each output position has its own kernel,
    ``rhs`` laid out as ``(C * prod(filter_shape), out_features, *out_spatial)`` in the kernel
    layout's positions (``jax.lax.conv_general_dilated_local``). Patches, then one batched product."""
    x = asarray(lhs)
    patches = conv_general_dilated_patches(x, filter_shape, window_strides, padding, lhs_dilation, rhs_dilation,
                                           dimension_numbers)
    lhs_spec, rhs_spec, out_spec = conv_dimension_numbers(aval_of(x).shape, (1, 1) + tuple(filter_shape),
                                                          dimension_numbers)
    order = sorted(range(len(out_spec) - 2), key=lambda k: out_spec[2 + k])
    dn = (((out_spec[1],), (rhs_spec[1],)),
          (tuple(out_spec[2 + k] for k in order), tuple(rhs_spec[2 + k] for k in order)))
    out = dot_general(patches, rhs, dn, precision=precision)
    # dot_general's result: batch (spatial, in out's order), then batch N, then rhs's out features
    rank = len(out_spec)
    placed = sorted(out_spec[2:]) + [out_spec[0], out_spec[1]]
    perm = [placed.index(axis) for axis in range(rank)]
    return sh.transpose(out, tuple(perm))
