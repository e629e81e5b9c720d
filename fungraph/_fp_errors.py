"""numpy's floating-point error state while fungraph computes: quiet, as JAX computes a NaN or an
infinity without a warning. ``quiet()`` sets it and returns a token for ``restore``: a write of
numpy's error-state context variable (``STATE.set(QUIET)``, which the CPU engine's run inlines),
about a fifth of ``np.errstate``'s enter and exit, so engines set it once per run and the eager
operations once per operation."""

from __future__ import annotations

from typing import Any

import numpy as np


class _Errstate:
    """numpy 1.x, which keeps no context variable: ``np.errstate``'s own enter and exit."""

    def set(self, _quiet: Any) -> Any:
        state = np.errstate(all="ignore")
        state.__enter__()
        return state

    def reset(self, state: Any) -> None:
        state.__exit__(None, None, None)


try:
    from numpy._core._ufunc_config import _extobj_contextvar
except ImportError:  # pragma: no cover - numpy 1.x
    STATE: Any = _Errstate()
    QUIET: Any = None
else:
    #: numpy's per-context floating-point error state (what ``np.errstate`` sets).
    STATE = _extobj_contextvar
    with np.errstate(all="ignore"):
        #: The state with every floating-point error ignored.
        QUIET = STATE.get()


def quiet() -> Any:
    """Silence numpy's floating-point warnings until ``restore`` of the returned token."""
    return STATE.set(QUIET)


def restore(token: Any) -> None:
    """numpy's floating-point error state as it was before ``quiet`` gave ``token``."""
    STATE.reset(token)
