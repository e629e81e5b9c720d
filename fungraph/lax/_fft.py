"""``jax.lax.fft`` and ``FftType``: the discrete Fourier transforms over trailing axes, binding
the ``fft`` primitive (``fungraph.numpy.fft`` builds numpy's API on the same primitive)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from fungraph import dtypes
from fungraph.ir import aval_of
from fungraph.primitives import elementwise as ew
from fungraph.primitives.fft import fft as fft_prim
from fungraph.primitives.operands import asarray


class FftType(enum.IntEnum):
    """Which transform ``lax.fft`` computes (``jax.lax.FftType``)."""

    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


def _fft_type(fft_type: Any) -> FftType:
    if isinstance(fft_type, FftType):
        return fft_type
    if isinstance(fft_type, str):
        if fft_type.upper() in FftType.__members__ and fft_type in (fft_type.upper(), fft_type.lower()):
            return FftType[fft_type.upper()]
        raise ValueError(f"Unknown FFT type '{fft_type}'")
    raise TypeError(f"Unknown FFT type value '{fft_type}'")


def fft(x: Any, fft_type: FftType | str, fft_lengths: Sequence[int]) -> Any:
    """The ``fft_type`` transform (``"fft"``, ``"ifft"``, ``"rfft"``, ``"irfft"`` or an
    :class:`FftType`) of the last ``len(fft_lengths)`` axes of ``x``, numpy's normalisation:
    FFT and RFFT unscaled, IFFT and IRFFT divided by the number of points. Operands are converted
    as JAX does: to complex for FFT, IFFT and IRFFT, to floating for RFFT."""
    kind = _fft_type(fft_type)
    x = asarray(x)
    dt = aval_of(x).dtype
    if kind == FftType.RFFT:
        if dtypes.is_complex(dt):
            raise ValueError("only real valued inputs supported for rfft")
        x = ew.convert(x, dtypes.float_dtype_for(dt))
    else:
        x = ew.convert(x, dtypes.complex_for(dtypes.float_dtype_for(dt)))
    lengths = tuple(int(n) for n in fft_lengths)
    if not lengths:
        return x
    if len(lengths) > len(aval_of(x).shape):
        raise ValueError(f"FFT input shape {aval_of(x).shape} must have at least as many input dimensions as "
                         f"fft_lengths {lengths}.")
    return fft_prim(x, kind.name, lengths)
