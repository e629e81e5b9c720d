"""``from jax.experimental.shard_map import shard_map``, as JAX 0.10 still allows."""

from fungraph.primitives.shard_map import shard_map

__all__ = ["shard_map"]
