"""``jax.errors``: the exception types JAX programs catch, as fungraph raises them."""

from fungraph.core import (
    ConcretizationError,
    JAXIndexError,
    JaxRuntimeError,
    JAXTypeError,
    KeyReuseError,
    NonConcreteBooleanIndexError,
    TracerArrayConversionError,
    TracerBoolConversionError,
    TracerIntegerConversionError,
    UnexpectedTracerError,
)
from fungraph.dtypes import TypePromotionError

ConcretizationTypeError = ConcretizationError

__all__ = [
    "ConcretizationTypeError",
    "JAXIndexError",
    "JAXTypeError",
    "JaxRuntimeError",
    "KeyReuseError",
    "NonConcreteBooleanIndexError",
    "TracerArrayConversionError",
    "TracerBoolConversionError",
    "TracerIntegerConversionError",
    "TypePromotionError",
    "UnexpectedTracerError",
]
