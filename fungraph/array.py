"""``fungraph.Array``: the base class of device-resident arrays returned by a backend.

Passing an Array to a function jitted for the same backend costs no transfer; numpy sees it
through ``__array__`` (one copy to the host, on demand).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph.ir import HasAval, ShapedArray


class Array(HasAval):
    """A device array: ``shape``, ``dtype``, ``aval``, ``numpy()`` and ``np.asarray(x)``."""

    backend: str = "?"

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    def numpy(self) -> np.ndarray:
        raise NotImplementedError

    def block_until_ready(self) -> Array:
        """Wait until the value is computed (JAX's method); returns the array itself."""
        return self

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    def __repr__(self) -> str:
        return f"fungraph.Array({self.numpy()!r}, backend={self.backend!r})"
