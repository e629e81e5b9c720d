"""JAX's ``jax.experimental`` names fungraph has: ``shard_map`` (also ``fungraph.shard_map``)
and ``multihost_utils``; ``fungraph.experimental.ode`` (``odeint``) is imported by name, as
``jax.experimental.ode`` is."""

from fungraph.experimental import multihost_utils
from fungraph.experimental.shard_map import shard_map

__all__ = ["multihost_utils", "shard_map"]
