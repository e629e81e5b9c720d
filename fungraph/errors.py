"""``jax.errors``: the exception types JAX programs catch, as fungraph raises them."""

from fungraph.core import (
    ConcretizationError,
    TracerArrayConversionError,
    TracerBoolConversionError,
    TracerIntegerConversionError,
    UnexpectedTracerError,
)
from fungraph.dtypes import TypePromotionError

ConcretizationTypeError = ConcretizationError

__all__ = [
    "ConcretizationTypeError",
    "TracerArrayConversionError",
    "TracerBoolConversionError",
    "TracerIntegerConversionError",
    "TypePromotionError",
    "UnexpectedTracerError",
]
