"""``jax.experimental.compilation_cache.compilation_cache``: ``set_cache_dir(path)`` sets
``jax_compilation_cache_dir`` as JAX's does. fungraph's persistent builds (native code, OpenCL
binaries) have their own folders (docs/native.md, docs/backends.md), so the option is recorded,
as ``config.update`` records it."""

from __future__ import annotations

import os

from fungraph._config import config

__all__ = ["reset_cache", "set_cache_dir"]


def set_cache_dir(path: os.PathLike | str) -> None:
    config.update("jax_compilation_cache_dir", os.fspath(path))


def reset_cache() -> None:
    """Forget the cache folder (``jax_compilation_cache_dir`` back to None)."""
    config.update("jax_compilation_cache_dir", None)
