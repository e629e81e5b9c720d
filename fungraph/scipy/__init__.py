"""``fungraph.scipy``: the parts of SciPy that numerical code ported from numpy reaches for
(``special``, ``stats``, ``signal``, ``integrate``, ``linalg``, ``optimize``, ``sparse.linalg``, ``fft``,
``ndimage``, ``interpolate``, ``spatial.transform``, ``cluster.vq``), differentiable and batchable like
``jax.scipy``. Submodules are imported on first use so ``import fungraph`` stays cheap."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["cluster", "fft", "integrate", "interpolate", "linalg", "ndimage", "optimize", "signal", "sparse",
           "spatial", "special", "stats"]


def __getattr__(name: str) -> ModuleType:
    if name in __all__:
        return importlib.import_module(f"fungraph.scipy.{name}")
    raise AttributeError(f"module 'fungraph.scipy' has no attribute {name!r}")
