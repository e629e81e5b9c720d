"""JAX's ``jax.experimental`` names fungraph has: ``shard_map`` (also ``fungraph.shard_map``)."""

from fungraph.experimental.shard_map import shard_map

__all__ = ["shard_map"]
