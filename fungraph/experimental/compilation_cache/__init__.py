"""``jax.experimental.compilation_cache``: see :mod:`.compilation_cache`."""
