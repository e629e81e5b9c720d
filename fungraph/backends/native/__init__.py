"""The native CPU engine: the CPU engine's fused elementwise regions generated as C
(:mod:`.codegen`), built with the system C compiler into a disk cache and loaded with ctypes
(:mod:`.toolchain`), and bound as the regions' lowerings (:mod:`.regions`). Without a compiler,
or with ``fungraph.config.update("fungraph_native_cpu", False)``, the numpy engine runs every
region. See docs/native.md."""

from fungraph.backends.native.regions import native_enabled, native_regions, runs_natively
from fungraph.backends.native.toolchain import BUILD_STATS, NativeBuildWarning, cache_dir, find_compiler

__all__ = ["BUILD_STATS", "NativeBuildWarning", "cache_dir", "find_compiler", "native_enabled", "native_regions",
           "runs_natively"]
