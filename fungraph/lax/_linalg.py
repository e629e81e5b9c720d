"""``jax.lax``'s products: ``Precision`` and the ``dot_general``/``dot``/``batch_matmul`` that take
it, with ``preferred_element_type``."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError
from fungraph.ir import aval_of
from fungraph.primitives import elementwise as ew
from fungraph.primitives.linalg import dot_general as dot_general_
from fungraph.primitives.operands import asarray, cast, promote


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


class DotAlgorithm(NamedTuple):
    """An explicit algorithm for a product (``jax.lax.DotAlgorithm``): the types the operands are
    rounded to and accumulated in. Accepted as ``precision``; fungraph's backends compute in the
    operands' dtype, so it has no effect, as :class:`Precision`."""

    lhs_precision_type: Any
    rhs_precision_type: Any
    accumulation_type: Any
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False


class DotAlgorithmPreset(enum.Enum):
    """The named product algorithms (``jax.lax.DotAlgorithmPreset``), accepted as ``precision``
    (also by name) and, like :class:`Precision`, without effect in fungraph."""

    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name


DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]], tuple[Sequence[int], Sequence[int]]]
PrecisionLike = Precision | DotAlgorithm | DotAlgorithmPreset | str | tuple[Any, Any] | None


def canonical_precision(precision: Any) -> Any:
    """``precision`` checked and normalised: None, one ``Precision``, a pair (lhs, rhs), or a
    dot algorithm (a :class:`DotAlgorithm`, a :class:`DotAlgorithmPreset` or a preset's name)."""
    if precision is None or isinstance(precision, (Precision, DotAlgorithm, DotAlgorithmPreset)):
        return precision
    try:
        if isinstance(precision, str):
            if precision in DotAlgorithmPreset.__members__:
                return DotAlgorithmPreset[precision]
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
    arrays = [asarray(x) for x in xs]
    if len(arrays) == 2:
        result = product_dtype(name, aval_of(arrays[0]).dtype, aval_of(arrays[1]).dtype)
        arrays = [cast(x, result) for x in arrays]
    else:
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


def _precision_rank(dt: np.dtype) -> tuple[bool, int, int, int, bool]:
    """How XLA orders dtypes by precision (``primitive_util::HigherPrecisionType``): complex first,
    then the float exponent range, the mantissa, the bit width, and signed above unsigned."""
    real = dtypes.real_for(dt) if dtypes.is_complex(dt) else dt
    floating = dtypes.is_float(real)
    info = dtypes.finfo(real) if floating else None
    bits = 1 if dtypes.is_bool(real) else np.dtype(real).itemsize * 8
    return (dtypes.is_complex(dt), int(info.maxexp) if floating else -1, int(info.nmant) if floating else -1, bits,
            not dtypes.is_unsigned(real))


def product_dtype(name: str, a: np.dtype, b: np.dtype) -> np.dtype:
    """The dtype of a product of ``a`` and ``b`` operands, as JAX's ``dot_general`` (XLA's rule, not
    numpy's promotion): the more precise of the two, so int32 x uint32 is int32 and float32 x int32 float32."""
    ra, rb = _precision_rank(a), _precision_rank(b)
    if ra == rb and a != b:
        raise TypeError(f"lax.{name} argument type error: {a}, {b}")
    return a if ra >= rb else b


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
    out = _finish(dot_general_(a, b, (contract, batch)), after)
    # JAX's rule: weak when both operands are, whatever ``preferred_element_type`` casts them to
    return ew.weak(out) if dtypes.is_weak(lhs) and dtypes.is_weak(rhs) else out


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
    return _finish(_vector_matrix_product(a, b), after)


def _vector_matrix_product(a: Any, b: Any) -> Any:
    """``a``'s last axis contracted with ``b``'s first (rank <= 2 operands); a scalar multiplies."""
    sa, sb = aval_of(a).shape, aval_of(b).shape
    if not sa or not sb:
        return ew.mul(a, b)
    if sa[-1] != sb[0]:
        raise ShapeError(f"lax.dot: shapes {sa} and {sb} not aligned: {sa[-1]} (dim {len(sa) - 1}) != {sb[0]} (dim 0)")
    return dot_general_(a, b, (((len(sa) - 1,), (0,)), ((), ())))


def batch_matmul(lhs: Any, rhs: Any, precision: PrecisionLike = None) -> Any:
    """Matrix products over matching leading (batch) axes."""
    canonical_precision(precision)
    (a, b), _ = preferred_operands("batch_matmul", (lhs, rhs), None)
    sa, sb = aval_of(a).shape, aval_of(b).shape
    if len(sa) < 2 or len(sa) != len(sb) or sa[:-2] != sb[:-2]:
        raise ShapeError(f"lax.batch_matmul: batch axes differ: {aval_of(a)} and {aval_of(b)}")
    if sa[-1] != sb[-2]:
        raise ShapeError(f"lax.batch_matmul: mismatch in the contracted dimension: {aval_of(a)} @ {aval_of(b)}")
    nb = len(sa) - 2
    return dot_general_(a, b, (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))))
