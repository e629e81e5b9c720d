"""More of ``jax.lax`` for :mod:`fungraph.lax`: ``Precision`` and the products that take it,
``select_n``, complex parts, bit operations (shifts, population count, leading zeros,
``nextafter`` and ``reduce_precision`` on the exact bit patterns), ``split``/``tile``/``stack``
and other shape helpers, exact ``approx_max_k``/``approx_min_k``, the special functions with
``jax.lax``'s derivative rules, and ``custom_root``/``custom_linear_solve`` with implicit
differentiation."""

from __future__ import annotations

import builtins
import enum
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph._lax_ops import _same_dtype
from fungraph.core import ShapeError
from fungraph.ir import aval_of
from fungraph.numpy._util import asarray, cast, promote
from fungraph.primitives import elementwise as ew
from fungraph.primitives import lax_extra as lx
from fungraph.primitives import special as sp

# --- precision and products ------------------------------------------------------------------


class Precision(enum.Enum):
    """``jax.lax.Precision``: how accurately an accelerator multiplies float32 matrices. Every
    fungraph backend computes in the operands' dtype, so it is accepted and has no effect.
    Constructible from JAX's names: ``Precision("highest")``, ``Precision("tensorfloat32")``."""

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value: object) -> Precision | None:
        return _PRECISION_NAMES.get(value) if isinstance(value, str) else None

    def __repr__(self) -> str:
        return f"Precision.{self.name}"

    def __str__(self) -> str:
        return self.name


_PRECISION_NAMES = {
    "default": Precision.DEFAULT, "fastest": Precision.DEFAULT, "bfloat16": Precision.DEFAULT,
    "high": Precision.HIGH, "bfloat16_3x": Precision.HIGH, "tensorfloat32": Precision.HIGH,
    "highest": Precision.HIGHEST, "float32": Precision.HIGHEST,
}

#: ``jax.lax.DotDimensionNumbers``: ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``.
DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]], tuple[Sequence[int], Sequence[int]]]
PrecisionLike = Precision | str | tuple[Any, Any] | None


def canonical_precision(precision: Any) -> Precision | tuple[Precision, Precision] | None:
    """``precision`` checked and normalised: None, one ``Precision`` or a pair (lhs, rhs)."""
    if precision is None or isinstance(precision, Precision):
        return precision
    try:
        if isinstance(precision, str):
            return Precision(precision)
        if isinstance(precision, (tuple, list)) and len(precision) == 2:
            lhs, rhs = (p if isinstance(p, Precision) else Precision(p) for p in precision)
            return lhs, rhs
    except ValueError:
        pass
    raise ValueError(f"precision must be None, a lax.Precision, one of the strings {sorted(_PRECISION_NAMES)}, or a "
                     f"pair of those; got {precision!r}")


def preferred_operands(name: str, xs: Sequence[Any], preferred_element_type: Any) -> tuple[list[Any], Any]:
    """The operands of a product at one dtype, and the dtype of the result: with
    ``preferred_element_type`` the operands are cast to it first (an integer result of
    inexact operands is cast after, as rounding first would change the sum)."""
    arrays = [asarray(x) for x in promote(*xs)]
    if preferred_element_type is None:
        return arrays, None
    want = dtypes.canonicalize(preferred_element_type)
    have = aval_of(arrays[0]).dtype
    if dtypes.is_inexact(have) and not dtypes.is_inexact(want):
        return arrays, want
    if dtypes.is_complex(have) and not dtypes.is_complex(want):
        raise TypeError(f"lax.{name}: preferred_element_type {want} would drop the imaginary part of {have} operands")
    return [cast(x, want) for x in arrays], None


def _finish(out: Any, after: Any) -> Any:
    return out if after is None else cast(out, after)


def _no_sharding(name: str, out_sharding: Any) -> None:
    if out_sharding is not None:
        raise NotImplementedError(f"lax.{name}: fungraph has no shardings; out_sharding must be None")


def dot_general(lhs: Any, rhs: Any, dimension_numbers: DotDimensionNumbers, precision: PrecisionLike = None,
                preferred_element_type: Any = None, *, out_sharding: Any = None) -> Any:
    """Contract ``lhs`` and ``rhs`` over ``((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``;
    the result has the batch axes, then ``lhs``'s free axes, then ``rhs``'s. ``precision`` is
    accepted and ignored (see :class:`Precision`)."""
    from fungraph.primitives.linalg import dot_general as dot_general_

    canonical_precision(precision)
    _no_sharding("dot_general", out_sharding)
    (a, b), after = preferred_operands("dot_general", (lhs, rhs), preferred_element_type)
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError):
        raise TypeError(f"lax.dot_general: dimension_numbers must be ((lhs_contracting, rhs_contracting), "
                        f"(lhs_batch, rhs_batch)), got {dimension_numbers!r}") from None
    contract = (tuple(int(i) for i in lc), tuple(int(i) for i in rc))
    batch = (tuple(int(i) for i in lb), tuple(int(i) for i in rb))
    return _finish(dot_general_(a, b, (contract, batch)), after)


def dot(lhs: Any, rhs: Any, *, dimension_numbers: DotDimensionNumbers | None = None, precision: PrecisionLike = None,
        preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """Vector/matrix products of rank <= 2 operands, or ``dot_general`` when
    ``dimension_numbers`` are given. Mixed dtypes promote, as in JAX."""
    if dimension_numbers is not None:
        return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type, out_sharding=out_sharding)
    canonical_precision(precision)
    _no_sharding("dot", out_sharding)
    (a, b), after = preferred_operands("dot", (lhs, rhs), preferred_element_type)
    if len(aval_of(a).shape) > 2 or len(aval_of(b).shape) > 2:
        raise ShapeError(f"lax.dot takes operands of rank <= 2, got {aval_of(a)} and {aval_of(b)}; "
                         "use lax.dot_general")
    return _finish(fnp.dot(a, b), after)


def batch_matmul(lhs: Any, rhs: Any, precision: PrecisionLike = None) -> Any:
    """Matrix products over matching leading (batch) axes."""
    canonical_precision(precision)
    a, b = _same_dtype("batch_matmul", lhs, rhs)
    sa, sb = aval_of(a).shape, aval_of(b).shape
    if len(sa) < 2 or len(sa) != len(sb) or sa[:-2] != sb[:-2]:
        raise ShapeError(f"lax.batch_matmul: batch axes differ: {aval_of(a)} and {aval_of(b)}")
    return fnp.matmul(a, b)


# --- selection and complex parts -----------------------------------------------------------------


def select_n(which: Any, *cases: Any) -> Any:
    """``cases[which]`` elementwise: ``which`` a bool (two cases) or an integer array of the
    cases' shape, or a scalar; indices past either end take the nearest case."""
    if not cases:
        raise ValueError("lax.select_n needs at least one case")
    w = asarray(which)
    xs = _same_dtype("select_n", *cases)
    wa, shapes = aval_of(w), {aval_of(x).shape for x in xs}
    if len(shapes) != 1 or wa.shape not in ((), *shapes):
        raise ShapeError(f"lax.select_n: which {wa} and cases {[str(aval_of(x)) for x in xs]} must share one shape "
                         "(which may be a scalar)")
    if wa.dtype == dtypes.bool_:
        if len(xs) > 2:
            raise TypeError(f"lax.select_n: a bool which selects between at most 2 cases, got {len(xs)}")
        return xs[0] if len(xs) == 1 else fnp.where(w, xs[1], xs[0])
    if not dtypes.is_int(wa.dtype):
        raise TypeError(f"lax.select_n: which must be bool or integer, got {wa}")
    out = xs[0]
    for k in range(1, len(xs)):
        out = fnp.where(w >= k, xs[k], out)
    return out


def _floats(name: str, *xs: Any) -> list[Any]:
    """Operands of one float dtype, as ``jax.lax``'s special functions require."""
    out = _same_dtype(name, *xs)
    if not dtypes.is_float(aval_of(out[0]).dtype):
        raise TypeError(f"lax.{name} needs float operands, got {', '.join(str(aval_of(x)) for x in out)}")
    return out


def complex(x: Any, y: Any) -> Any:  # noqa: A001 - lax's name
    """``x + i y`` for float ``x`` and ``y`` of one dtype (complex64 from float32)."""
    return ew.complex_(*_floats("complex", x, y))


def _complex_only(name: str, x: Any) -> Any:
    x = asarray(x)
    if not dtypes.is_complex(aval_of(x).dtype):
        raise TypeError(f"lax.{name} needs a complex operand, got {aval_of(x)}")
    return x


def real(x: Any) -> Any:
    return ew.real(_complex_only("real", x))


def imag(x: Any) -> Any:
    return ew.imag(_complex_only("imag", x))


def conj(x: Any) -> Any:
    """The complex conjugate; a float operand becomes complex first, as in JAX."""
    x = asarray(x)
    dt = aval_of(x).dtype
    if not dtypes.is_inexact(dt):
        raise TypeError(f"lax.conj needs a float or complex operand, got {aval_of(x)}")
    return ew.conj(x if dtypes.is_complex(dt) else cast(x, dtypes.complex_for(dt)))


def reciprocal(x: Any) -> Any:
    """``1 / x`` for an inexact ``x``."""
    (x,) = _same_dtype("reciprocal", x)
    if not dtypes.is_inexact(aval_of(x).dtype):
        raise TypeError(f"lax.reciprocal needs an inexact operand, got {aval_of(x)}")
    return ew.div(np.asarray(1, aval_of(x).dtype), x)


# --- bits -------------------------------------------------------------------------------------------


def _ints(name: str, *xs: Any) -> list[Any]:
    out = _same_dtype(name, *xs)
    if not dtypes.is_int(aval_of(out[0]).dtype):
        raise TypeError(f"lax.{name} needs integer operands, got {', '.join(str(aval_of(x)) for x in out)}")
    return out


def _bits(x: Any) -> int:
    return np.dtype(aval_of(x).dtype).itemsize * 8


def _const(value: int, like: Any) -> np.ndarray:
    return np.asarray(value, aval_of(like).dtype)


def shift_left(x: Any, y: Any) -> Any:
    """``x << y``, wrapping; 0 for shifts outside ``[0, bits)``."""
    a, s = _ints("shift_left", x, y)
    return cast(fnp.left_shift(a, s), aval_of(a).dtype)


def shift_right_arithmetic(x: Any, y: Any) -> Any:
    """``x >> y`` filling with the sign bit; shifts outside ``[0, bits)`` give 0 or -1."""
    a, s = _ints("shift_right_arithmetic", x, y)
    return cast(fnp.right_shift(a, s), aval_of(a).dtype)


def shift_right_logical(x: Any, y: Any) -> Any:
    """``x >> y`` filling with zeros (``x`` read as unsigned); 0 for shifts outside ``[0, bits)``.
    The arithmetic shift of a negative ``x`` is masked to its low ``bits - y`` bits, the mask
    being the largest positive value shifted by ``y - 1`` (no overflow)."""
    a, s = _ints("shift_right_logical", x, y)
    bits = _bits(a)
    top = _const(np.iinfo(aval_of(a).dtype).max, a)
    ok = (s >= 0) & (s < bits)
    s_in = fnp.where(ok, s, 1)
    shifted = cast(fnp.right_shift(a, s_in), aval_of(a).dtype)
    mask = cast(fnp.right_shift(top, s_in - 1), aval_of(a).dtype)
    moved = fnp.where(a < 0, fnp.bitwise_and(shifted, mask), shifted)
    return fnp.where(ok, fnp.where(s == 0, a, moved), _const(0, a))


def population_count(x: Any) -> Any:
    """The number of set bits (of the two's complement pattern): pairs, nibbles, then bytes
    summed in place; the sign bit is counted apart so every shift is of a non-negative value."""
    (a,) = _ints("population_count", x)
    bits = _bits(a)
    top = _const(np.iinfo(aval_of(a).dtype).max, a)
    v = fnp.bitwise_and(a, top)

    def pattern(byte: int) -> np.ndarray:
        return _const(int.from_bytes(bytes([byte]) * (bits // 8), "little") & int(top), a)

    v = v - fnp.bitwise_and(v // 2, pattern(0x55))
    v = fnp.bitwise_and(v, pattern(0x33)) + fnp.bitwise_and(v // 4, pattern(0x33))
    v = fnp.bitwise_and(v + v // 16, pattern(0x0F))
    shift = 8
    while shift < bits:
        v = v + v // _const(2 ** shift, a)
        shift *= 2
    return fnp.bitwise_and(v, _const(0xFF, a)) + cast(a < 0, aval_of(a).dtype)


def clz(x: Any) -> Any:
    """The number of leading zero bits: 0 for negative values, ``bits - bit_length`` otherwise
    (the bit length found by halving the range, as a binary search)."""
    (a,) = _ints("clz", x)
    bits = _bits(a)
    v = fnp.maximum(a, _const(0, a))
    length = fnp.zeros_like(a)
    step = bits // 2
    while step:
        high = v >= _const(2 ** step, a)
        v = fnp.where(high, v // _const(2 ** step, a), v)
        length = length + fnp.where(high, _const(step, a), _const(0, a))
        step //= 2
    length = length + cast(v > 0, aval_of(a).dtype)
    return fnp.where(a < 0, _const(0, a), _const(bits, a) - length)


_INT_OF = {dtypes.float32: dtypes.int32, dtypes.float64: dtypes.int64}


def bitcast_convert_type(operand: Any, new_dtype: Any) -> Any:
    """The bits of ``operand`` read as ``new_dtype``; a narrower type adds a last axis, a wider
    one consumes it (``jax.lax.bitcast_convert_type``)."""
    return lx.bitcast_convert_type(asarray(operand), dtypes.canonicalize(new_dtype))


def nextafter(x1: Any, x2: Any) -> Any:
    """The float after ``x1`` in the direction of ``x2``: one step of the bit pattern (sign and
    magnitude, so stepping the integer up moves away from zero); ``x2`` where they are equal,
    nan where either is, the smallest subnormal of ``x2``'s sign after a zero."""
    a, b = _floats("nextafter", x1, x2)
    dt = aval_of(a).dtype
    bits = bitcast_convert_type(a, _INT_OF[dt])
    one = np.asarray(1, _INT_OF[dt])
    away = (b > a) == (a > 0)
    stepped = bitcast_convert_type(fnp.where(away, bits + one, bits - one), dt)
    tiny = bitcast_convert_type(one, dt)
    from_zero = fnp.where(b > 0, tiny, -tiny)
    out = fnp.where(a == 0, from_zero, stepped)
    out = fnp.where(a == b, b, out)
    return fnp.where(fnp.isnan(a) | fnp.isnan(b), np.asarray(np.nan, dt), out)


def reduce_precision(operand: Any, exponent_bits: int, mantissa_bits: int) -> Any:
    """``operand`` rounded to a float with ``exponent_bits`` and ``mantissa_bits``, as XLA does
    it on the bit pattern: the mantissa rounded to nearest even at its new width, then values
    past the new exponent range replaced by a signed infinity (above) or a signed zero (at or
    below the smallest normal); nan stays nan (even with no mantissa bits left, as in JAX)."""
    (x,) = _floats("reduce_precision", operand)
    dt = aval_of(x).dtype
    it = _INT_OF[dt]
    info = np.finfo(dt)
    src_m, src_e = int(info.nmant), int(info.nexp)
    e_bits, m_bits = int(exponent_bits), int(mantissa_bits)
    if e_bits < 1 or m_bits < 0:
        raise ValueError(f"lax.reduce_precision: exponent_bits >= 1 and mantissa_bits >= 0 needed, got {e_bits}, "
                         f"{m_bits}")
    v = bitcast_convert_type(x, it)
    if m_bits < src_m:
        drop = src_m - m_bits
        last = np.asarray(1 << drop, it)
        odd = fnp.bitwise_and(v, last) // last
        v = fnp.bitwise_and(v + odd + np.asarray((1 << (drop - 1)) - 1, it), ~np.asarray((1 << drop) - 1, it))
    if e_bits < src_e:
        exp_mask = np.asarray(((1 << src_e) - 1) << src_m, it)
        bias, new_bias = (1 << (src_e - 1)) - 1, (1 << (e_bits - 1)) - 1
        exponent = fnp.bitwise_and(v, exp_mask)
        sign = fnp.where(v < 0, np.asarray(np.iinfo(it).min, it), np.asarray(0, it))
        over = exponent > np.asarray((bias + new_bias) << src_m, it)
        under = exponent <= np.asarray((bias - new_bias) << src_m, it)
        v = fnp.where(over, fnp.bitwise_or(sign, exp_mask), fnp.where(under, sign, v))
    return fnp.where(fnp.isnan(x), x, bitcast_convert_type(v, dt))


def reduce_xor(operand: Any, axes: Sequence[int]) -> Any:
    """The bitwise xor of ``operand`` (bool or integer) over ``axes``: each axis folded in
    halves, ``ceil(log2 n)`` whole-array xors."""
    x = asarray(operand)
    a = aval_of(x)
    if dtypes.is_inexact(a.dtype):
        raise TypeError(f"lax.reduce_xor needs a bool or integer operand, got {a}")
    for axis in sorted({int(ax) % builtins.max(len(a.shape), 1) for ax in axes}, reverse=True):
        n = aval_of(x).shape[axis]
        if n == 0:
            x = fnp.zeros(aval_of(x).shape[:axis] + aval_of(x).shape[axis + 1:], a.dtype)
            continue
        lead = (builtins.slice(None),) * axis
        while n > 1:
            half = n // 2
            folded = fnp.bitwise_xor(x[lead + (builtins.slice(0, half),)], x[lead + (builtins.slice(half, 2 * half),)])
            x = fnp.concatenate([folded, x[lead + (builtins.slice(2 * half, n),)]], axis=axis) if n % 2 else folded
            n = half + n % 2
        x = fnp.squeeze(x, axis=axis)
    return x


# --- shapes -----------------------------------------------------------------------------------------


def split(operand: Any, sizes: Sequence[int], axis: int = 0) -> list[Any]:
    """``operand`` cut along ``axis`` into consecutive pieces of ``sizes`` (summing to its size)."""
    x = asarray(operand)
    shape = aval_of(x).shape
    axis = int(axis) % builtins.max(len(shape), 1)
    sizes = [int(s) for s in sizes]
    if any(s < 0 for s in sizes) or sum(sizes) != shape[axis]:
        raise ShapeError(f"lax.split: sizes {sizes} must be >= 0 and sum to axis {axis} of {aval_of(x)}")
    cuts = np.cumsum([0] + sizes)
    index = [builtins.slice(None)] * len(shape)
    out = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        index[axis] = builtins.slice(int(lo), int(hi))
        out.append(x[tuple(index)])
    return out


def tile(operand: Any, reps: Sequence[int]) -> Any:
    """``operand`` repeated ``reps[i]`` times along axis ``i`` (one entry per axis)."""
    x = asarray(operand)
    reps = tuple(int(r) for r in reps)
    if len(reps) != len(aval_of(x).shape) or any(r < 0 for r in reps):
        raise TypeError(f"lax.tile: reps {reps} needs one non-negative entry per axis of {aval_of(x)}")
    return fnp.tile(x, reps)


def broadcast_to_rank(x: Any, rank: int) -> Any:
    """``x`` with leading unit axes up to ``rank`` (unchanged when it has as many already)."""
    x = asarray(x)
    nd = len(aval_of(x).shape)
    return x if nd >= rank else fnp.reshape(x, (1,) * (int(rank) - nd) + aval_of(x).shape)


def sort_key_val(keys: Any, values: Any, dimension: int = -1, is_stable: bool = True) -> tuple[Any, Any]:
    """``keys`` sorted along ``dimension`` and ``values`` in the same order."""
    from fungraph._lax_ops import sort

    return sort((keys, values), dimension, is_stable, 1)


def index_take(src: Any, idxs: Sequence[Any], axes: Sequence[int]) -> Any:
    """``src[idxs[0], idxs[1], ...]`` with index ``k`` on axis ``axes[k]`` (wrapped modulo its
    size); the indexed axes become one leading axis and the others follow in order."""
    x = asarray(src)
    shape = aval_of(x).shape
    axes = [int(a) % len(shape) for a in axes]
    idx = [asarray(i) for i in idxs]
    if len(idx) != len(axes) or len({aval_of(i).shape for i in idx}) > 1 or any(
            not dtypes.is_int(aval_of(i).dtype) or len(aval_of(i).shape) != 1 for i in idx):
        raise ShapeError(f"lax.index_take: one integer vector of one length per axis {axes} needed, got "
                         f"{[str(aval_of(i)) for i in idx]}")
    rest = [a for a in range(len(shape)) if a not in axes]
    moved = fnp.transpose(x, axes + rest)
    wrapped = tuple(fnp.mod(i, shape[a]) for i, a in zip(idx, axes))
    return moved[wrapped]


def optimization_barrier(operand: Any) -> Any:
    """``operand`` (any pytree) unchanged, behind one ``optimization_barrier`` equation: CSE
    never merges a computation on its outputs with the same computation on its inputs (the
    barrier is removed after CSE; fungraph's other passes do not move work across values)."""
    from fungraph.primitives.barrier import optimization_barrier as barrier
    from fungraph.tree_util import tree_flatten, tree_unflatten

    leaves, tree = tree_flatten(operand)
    return tree_unflatten(tree, barrier([asarray(x) for x in leaves]))


def stack(operands: Sequence[Any], axis: int = 0) -> Any:
    """The operands (one shape, one dtype) joined along a new ``axis``."""
    return fnp.stack(_same_dtype("stack", *operands), axis=axis)


def unstack(x: Any, axis: int = 0) -> tuple[Any, ...]:
    """``x``'s slices along ``axis``, that axis removed."""
    x = asarray(x)
    return tuple(fnp.moveaxis(x, axis, 0)[k] for k in range(aval_of(x).shape[axis]))


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape numpy broadcasting gives ``shapes``."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*(tuple(s) for s in shapes)))
    except ValueError:
        raise ValueError(f"lax.broadcast_shapes: incompatible shapes {[tuple(s) for s in shapes]}") from None


def empty(shape: Sequence[int], dtype: Any, *, out_sharding: Any = None) -> Any:
    """An array of ``shape`` whose values must not be read (zeros here)."""
    _no_sharding("empty", out_sharding)
    return fnp.zeros(tuple(int(d) for d in shape), dtypes.canonicalize(dtype))


def _approx_k(name: str, operand: Any, k: int, reduction_dimension: int, largest: bool) -> tuple[Any, Any]:
    from fungraph._lax_ops import top_k

    (x,) = _floats(name, operand)
    axis = int(reduction_dimension) % builtins.max(len(aval_of(x).shape), 1)
    moved = fnp.moveaxis(x, axis, -1)
    values, idx = top_k(moved if largest else fnp.negative(moved), k)
    values = values if largest else fnp.negative(values)
    return fnp.moveaxis(values, -1, axis), fnp.moveaxis(idx, -1, axis)


def approx_max_k(operand: Any, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True) -> tuple[Any, Any]:
    """The ``k`` largest values along ``reduction_dimension`` and their int32 indices, found
    exactly (recall 1, so the recall target and size override are met and unused)."""
    return _approx_k("approx_max_k", operand, k, reduction_dimension, True)


def approx_min_k(operand: Any, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True) -> tuple[Any, Any]:
    """The ``k`` smallest values along ``reduction_dimension`` and their int32 indices, exactly."""
    return _approx_k("approx_min_k", operand, k, reduction_dimension, False)


# --- special functions ------------------------------------------------------------------------------


def zeta(x: Any, q: Any) -> Any:
    """The Hurwitz zeta function sum_k (q + k)^-x; differentiable in ``q``."""
    return lx.zeta_p.bind(*_floats("zeta", x, q))


def polygamma(m: Any, x: Any) -> Any:
    """The m-th derivative of digamma; differentiable in ``x``."""
    return sp.polygamma_p.bind(*_floats("polygamma", m, x))


def igamma_grad_a(a: Any, x: Any) -> Any:
    """dP(a, x)/da, P the regularised lower incomplete gamma function."""
    return lx.igamma_grad_a_p.bind(*_floats("igamma_grad_a", a, x))


def _igamma_rule(upper: bool) -> Callable[..., Any]:
    """``igamma`` (or ``igammac``) with JAX's derivatives: in ``x`` the density, in ``a`` by
    ``igamma_grad_a``."""
    from fungraph.custom_derivatives import custom_jvp

    prim = sp.igammac_p if upper else sp.igamma_p

    @custom_jvp
    def fun(a: Any, x: Any) -> Any:
        return prim.bind(a, x)

    @fun.defjvp
    def _(primals: tuple, tangents: tuple) -> tuple:
        a, x = primals
        ta, tx = tangents
        da = lx.igamma_grad_a_p.bind(a, x)
        dx = sp._igamma_dx(a, x, None)
        t = ta * da + tx * dx
        return prim.bind(a, x), -t if upper else t

    return fun


_igamma = _igamma_rule(False)
_igammac = _igamma_rule(True)


def igamma(a: Any, x: Any) -> Any:
    """The regularised lower incomplete gamma function P(a, x), differentiable in both."""
    return _igamma(*_floats("igamma", a, x))


def igammac(a: Any, x: Any) -> Any:
    """The regularised upper incomplete gamma function Q(a, x) = 1 - P(a, x), differentiable in both."""
    return _igammac(*_floats("igammac", a, x))


def betainc(a: Any, b: Any, x: Any) -> Any:
    """The regularised incomplete beta function I_x(a, b); differentiable in ``x``."""
    return sp.betainc_p.bind(*_floats("betainc", a, b, x))


def bessel_i0e(x: Any) -> Any:
    """exp(-|x|) I0(x)."""
    return sp.bessel_i0e_p.bind(*_floats("bessel_i0e", x))


def bessel_i1e(x: Any) -> Any:
    """exp(-|x|) I1(x)."""
    return sp.bessel_i1e_p.bind(*_floats("bessel_i1e", x))


# --- custom_linear_solve and custom_root ----------------------------------------------------------


def _stage(fun: Callable[..., Any], example: Any, what: str) -> tuple[Any, list[Any], Any, Any]:
    """``fun`` staged at ``example``'s structure: its graph, closure, input tree and output tree."""
    from fungraph.lax import _leaves, _single, _stage_fn

    _, tree, avals = _leaves(example)
    graph, closure, out_tree = _stage_fn(lambda v: fun(v), _single(tree), avals, what)
    return graph, closure, tree, out_tree


def custom_linear_solve(matvec: Callable[[Any], Any], b: Any, solve: Callable[[Callable[[Any], Any], Any], Any],
                        transpose_solve: Callable[[Callable[[Any], Any], Any], Any] | None = None,
                        symmetric: bool = False, has_aux: bool = False) -> Any:
    """``solve(matvec, b)``, differentiated implicitly as ``jax.lax.custom_linear_solve``: the
    solution is linear in ``b`` (its transpose is ``transpose_solve(vecmat, ct)``, or ``solve``
    again when ``symmetric``), and the tangent of what ``matvec`` closes over enters as
    ``-A^-1 (dA x)``; nothing is differentiated through ``solve`` itself. With ``has_aux``
    both solves return ``(solution, aux)`` and the aux outputs carry no derivative."""
    from fungraph.api import vjp
    from fungraph.tree_util import tree_flatten, tree_map, tree_unflatten

    b_leaves, b_tree = tree_flatten(b)
    b_leaves = [asarray(v) for v in b_leaves]
    b = tree_unflatten(b_tree, b_leaves)
    m_graph, m_consts, _, m_out = _stage(matvec, b, "custom_linear_solve matvec")
    if m_out != b_tree or m_graph.out_avals != tuple(aval_of(v) for v in b_leaves):
        raise TypeError(f"custom_linear_solve: matvec must map b's structure and types to themselves; b is {b_tree} "
                        f"{[str(aval_of(v)) for v in b_leaves]}, matvec returns {m_out} "
                        f"{[str(a) for a in m_graph.out_avals]}")

    def solved(rhs: Any) -> Any:
        out = solve(matvec, rhs)
        return out if has_aux else (out, ())

    s_graph, s_consts, _, s_out = _stage(solved, b, "custom_linear_solve solve")
    if s_out.node_type not in (tuple, list) or len(s_out.children) != 2:
        raise TypeError(f"custom_linear_solve with has_aux=True: solve must return (solution, aux), got {s_out}")
    x_tree = s_out.children[0]
    n_x = len(b_leaves)
    if x_tree != b_tree or s_graph.out_avals[:n_x] != tuple(aval_of(v) for v in b_leaves):
        raise TypeError(f"custom_linear_solve: solve must return a solution shaped like b ({b_tree}), got {x_tree} "
                        f"{[str(a) for a in s_graph.out_avals[:n_x]]}")
    t_graph, t_consts = None, []
    t_solve = solve if transpose_solve is None and symmetric else transpose_solve
    if t_solve is not None:
        def vecmat(ct: Any) -> Any:
            _, pullback = vjp(matvec, tree_map(fnp.zeros_like, b))
            (out,) = pullback(ct)
            return out

        def transposed(ct: Any) -> Any:
            out = t_solve(matvec if symmetric else vecmat, ct)
            return out[0] if has_aux else out

        t_graph, t_consts, _, _ = _stage(transposed, b, "custom_linear_solve transpose_solve")
    outs = lx.linear_solve_p.bind(*m_consts, *s_consts, *t_consts, *b_leaves, matvec=m_graph, solve=s_graph,
                                  transpose_solve=t_graph, counts=(len(m_consts), len(s_consts), len(t_consts)),
                                  num_aux=len(s_graph.outvars) - n_x)
    x = tree_unflatten(b_tree, outs[:n_x])
    if not has_aux:
        return x
    return x, tree_unflatten(s_out.children[1], list(outs[n_x:]))


def custom_root(f: Callable[[Any], Any], initial_guess: Any, solve: Callable[[Callable[[Any], Any], Any], Any],
                tangent_solve: Callable[[Callable[[Any], Any], Any], Any], has_aux: bool = False) -> Any:
    """``solve(f, initial_guess)``, a root of ``f``, differentiated implicitly as
    ``jax.lax.custom_root``: from ``f(x*, theta) = 0``, ``dx* = -J_x^-1 (J_theta . dtheta)``, the
    linear system solved by ``tangent_solve(J_x, rhs)`` (in both directions). ``theta`` is
    whatever ``f`` closes over; ``initial_guess`` and any aux output carry no derivative."""
    from fungraph.api import jvp
    from fungraph.custom_derivatives import custom_jvp
    from fungraph.interpreters.eval import eval_graph
    from fungraph.interpreters.jvp import jvp_flat
    from fungraph.primitives.callback import stop_gradient
    from fungraph.tree_util import tree_flatten, tree_map, tree_unflatten

    guess = tree_map(asarray, initial_guess)
    f_graph, f_consts, x_tree, f_out = _stage(f, guess, "custom_root f")
    if f_out != x_tree:
        raise TypeError(f"custom_root: f must map the guess's structure {x_tree} to itself, got {f_out}")

    def f_at(x: Any, consts: Sequence[Any]) -> Any:
        return tree_unflatten(f_out, eval_graph(f_graph, *tree_flatten(x)[0], *consts))

    def run(consts: Sequence[Any], x0: Any) -> Any:
        out = solve(lambda x: f_at(x, consts), tree_map(stop_gradient, x0))
        return out if has_aux else (out, ())

    @custom_jvp
    def root(consts: tuple, x0: Any) -> Any:
        return run(consts, x0)

    @root.defjvp
    def _(primals: tuple, tangents: tuple) -> tuple:
        consts, x0 = primals
        t_consts = [t if dtypes.is_inexact(aval_of(c).dtype) else None for c, t in zip(consts, tangents[0])]
        sol, aux = run(consts, x0)
        _, rhs = jvp_flat(lambda *c: tree_flatten(f_at(sol, c))[0], consts, t_consts)
        rhs = tree_unflatten(f_out, rhs)
        step = custom_linear_solve(lambda v: jvp(lambda x: f_at(x, consts), (sol,), (v,))[1], rhs,
                                   tangent_solve, lambda g, y: tangent_solve(g, y))
        return (sol, aux), (tree_map(lambda v: -v, step), tree_map(fnp.zeros_like, aux))

    sol, aux = root(tuple(f_consts), guess)
    return (sol, tree_map(stop_gradient, aux)) if has_aux else sol
