"""``jax.ref``: mutable array references (fungraph._refs; docs/differences_from_jax.md)."""

from fungraph._refs import AbstractRef, Ref, addupdate, empty_ref, free_ref, freeze, get, new_ref, set, swap

__all__ = ["AbstractRef", "Ref", "addupdate", "empty_ref", "free_ref", "freeze", "get", "new_ref", "set", "swap"]
