"""JAX's ``jax.experimental`` names fungraph has: ``shard_map`` (also ``fungraph.shard_map``),
``io_callback``, ``multihost_utils``, ``mesh_utils`` and
``compilation_cache``; ``fungraph.experimental.ode`` (``odeint``) is imported by name, as
``jax.experimental.ode`` is."""

from fungraph.api import io_callback
from fungraph.experimental import compilation_cache, mesh_utils, multihost_utils
from fungraph.experimental.shard_map import shard_map

__all__ = ["compilation_cache", "io_callback", "mesh_utils", "multihost_utils", "shard_map"]
