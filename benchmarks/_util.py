"""Shared helpers for the benchmark scripts: timing medians, peak memory, optional JAX."""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any


def median_time(fn: Callable[[], Any], repeat: int = 7, number: int = 1, warmup: int = 1) -> float:
    """Median seconds per call over ``repeat`` rounds of ``number`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return statistics.median(times)


def peak_traced_bytes(fn: Callable[[], Any]) -> int:
    """Peak bytes allocated through Python's allocators (numpy included) during one call."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def try_jax() -> Any:
    """The ``jax`` module with float64 enabled on CPU, or None when it is not installed."""
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_platforms", "cpu")
        return jax
    except Exception:
        return None


def table(rows: list[list[Any]], header: list[str]) -> str:
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
