"""``fungraph.test_util``: JAX's location of ``check_grads``, ``check_jvp`` and ``check_vjp``,
with JAX's signatures, over the checkers of :mod:`fungraph.testing` (one implementation)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fungraph.testing.grads import check_grads as _check_grads
from fungraph.testing.grads import check_jvp, check_vjp

__all__ = ["check_grads", "check_jvp", "check_vjp"]


def check_grads(f: Callable[..., Any], args: Sequence[Any], order: int, modes: Sequence[str] = ("fwd", "rev"),
                atol: float | None = None, rtol: float | None = None, eps: float | None = None) -> None:
    """Check ``f``'s derivatives at ``args`` up to ``order`` against finite differences: ``jvp``
    directly (forward mode), ``vjp`` by the dot-product test with a numerical ``J t`` (reverse
    mode), as JAX's; raises ``AssertionError`` on a mismatch."""
    if isinstance(modes, str):
        modes = (modes,)
    unknown = set(modes) - {"fwd", "rev"}
    if unknown:
        raise ValueError(f"check_grads: modes must be 'fwd' and/or 'rev', got {sorted(unknown)}")
    _check_grads(f, tuple(args), order=order, modes=tuple(modes), eps=eps, atol=atol, rtol=rtol,
                 rev_vs_numerical=True)
