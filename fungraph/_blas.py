"""How many threads numpy's OpenBLAS may use for one matrix product of the CPU engine.

OpenBLAS splits a product statically between its threads and waits for the slowest, so when
the cores are taken by other processes a thread descheduled for a time slice stalls the whole
product: on a loaded 2-core machine a 256x1024x10 float32 product took 10-20 ms with two
threads and 0.1 ms with one, and the MLP step's products 4x longer in all. XLA's Eigen pool
lets the calling thread take the work of absent workers, so it does not pay this. The CPU
engine therefore runs small products on one thread; larger ones keep OpenBLAS's count.
``FUNGRAPH_BLAS_THREADS`` (a number) fixes the count instead.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable
from typing import Any

SMALL_PRODUCT = 1 << 24
"""Products with fewer multiply-adds (m*n*k) than this gain at most a millisecond or so from a
second thread, and lose far more when that thread waits for a core."""

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
            "openblas_set_num_threads")


@functools.cache
def _openblas() -> tuple[Callable[[int], None], int] | None:
    """numpy's OpenBLAS thread setter and its thread count at first use, found among the
    libraries this process loaded (as threadpoolctl does); None when numpy uses another BLAS
    or the maps are unreadable."""
    import numpy  # noqa: F401  (numpy loads its BLAS)

    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line})
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _SETTERS:
            getter_name = name.replace("set_num", "get_num")
            if hasattr(lib, name) and hasattr(lib, getter_name):
                setter, getter = getattr(lib, name), getattr(lib, getter_name)
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                return setter, int(getter())
    return None


def _fixed_threads() -> int | None:
    raw = os.environ.get("FUNGRAPH_BLAS_THREADS", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"FUNGRAPH_BLAS_THREADS={raw!r}: expected a positive whole number of threads")
    return int(raw)


def threads_for(multiply_adds: int, default: int) -> int:
    """The thread count for a product of ``multiply_adds`` (m*n*k) when OpenBLAS would use ``default``."""
    fixed = _fixed_threads()
    if fixed is not None:
        return fixed
    if default <= 1 or multiply_adds < SMALL_PRODUCT:
        return 1
    return default


def with_blas_threads(multiply_adds: int, run: Callable[[], Any]) -> Any:
    """``run()`` (one BLAS call) with the thread count ``threads_for`` picks, restored afterwards."""
    blas = _openblas()
    if blas is None:
        return run()
    setter, default = blas
    wanted = threads_for(multiply_adds, default)
    if wanted == default:
        return run()
    setter(wanted)
    try:
        return run()
    finally:
        setter(default)
