"""JAX's ``jax.extend``: the pieces of the IR a program that writes its own primitives or
interpreters reaches (``fungraph.extend.core``)."""

from fungraph.extend import core as core  # noqa: PLC0414

__all__ = ["core"]
