"""Shared helpers for the benchmark scripts: timing medians, peak memory, optional JAX."""

from __future__ import annotations

import os
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any


def ms(t: float) -> str:
    """Seconds as milliseconds with about three significant digits, so sub-millisecond GPU
    times do not round to 0.1 ms."""
    ms_ = t * 1e3
    return f"{ms_:.1f} ms" if ms_ >= 10 else f"{ms_:.2f} ms" if ms_ >= 1 else f"{ms_:.3f} ms"


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


#: OpenBLAS's worker threads busy-wait for about 0.1 s after each call (measured here: a whole
#: core for 0.1 s, idle after 0.2 s), so anything timed just after numpy's BLAS runs on one
#: core of two. :func:`interleaved_times` pauses this long before each function's turn.
QUIET_S = 0.25


def interleaved_times(fns: dict[str, Callable[[], Any]], rounds: int = 5, number: int = 3) -> dict[str, float]:
    """Median seconds per call of each function (:func:`interleaved_samples`)."""
    return {name: statistics.median(ts) for name, ts in interleaved_samples(fns, rounds, number).items()}


def interleaved_samples(fns: dict[str, Callable[[], Any]], rounds: int = 5,
                        number: int = 3) -> dict[str, list[float]]:
    """Seconds per call of each function, timed in turns so all see the same load on a shared
    machine: each round gives every function a quiet pause (:data:`QUIET_S`), one untimed call
    (waking its threads), then ``number`` timed calls."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            time.sleep(QUIET_S)
            fn()
            for _ in range(number):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    return times


def paired_ratio(ref: list[float], other: list[float], level: float = 0.9, resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float, float]:
    """Median over rounds of ``ref[i] / other[i]`` (how many times faster ``other`` ran than
    ``ref`` in the same round) and a bootstrap ``level`` interval for it: a ratio whose
    interval holds 1 is a tie on this machine, whatever its median says."""
    import numpy as np

    r = np.asarray(ref) / np.asarray(other)
    rng = np.random.default_rng(seed)
    boot = np.median(r[rng.integers(0, len(r), size=(resamples, len(r)))], axis=1)
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return float(np.median(r)), float(lo), float(hi)


def peak_traced_bytes(fn: Callable[[], Any]) -> int:
    """Peak bytes allocated through Python's allocators (numpy included) during one call."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


JAX_PLATFORM = os.environ.get("FUNGRAPH_BENCH_JAX", "cpu")
"""The platform JAX rows run on: ``cpu`` unless ``FUNGRAPH_BENCH_JAX`` names another (``cuda`` on
a machine with a CUDA JAX, to set the OpenCL rows beside JAX on the same GPU)."""


def try_jax() -> Any:
    """The ``jax`` module with float64 enabled on ``JAX_PLATFORM``, or None when it is not
    installed. Off the CPU, float32 products run at full precision (not TF32), as ours do."""
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_platforms", JAX_PLATFORM)
        if JAX_PLATFORM != "cpu":
            jax.config.update("jax_default_matmul_precision", "highest")
        return jax
    except Exception:
        return None


def table(rows: list[list[Any]], header: list[str]) -> str:
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
