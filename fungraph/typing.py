"""``jax.typing``: the annotations JAX programs write for array-like arguments and dtypes."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from fungraph.array import Array


class SupportsDType(Protocol):
    @property
    def dtype(self) -> np.dtype: ...


#: Anything a fungraph function takes as an array: fungraph and numpy arrays, numpy scalars,
#: and Python scalars (``jax.typing.ArrayLike``).
ArrayLike = Array | np.ndarray | np.bool_ | np.number | bool | int | float | complex

#: Anything that names a dtype (``jax.typing.DTypeLike``).
DTypeLike = str | type[Any] | np.dtype | SupportsDType

__all__ = ["ArrayLike", "DTypeLike"]
