"""Leak checks: memory held after dropping jitted functions and after many signatures.

    python benchmarks/bench_leaks.py [--quick] [--opencl]

Prints, for each probe, the growth of the process's resident memory (RSS, from /proc) and of
Python's traced memory (tracemalloc) over the probe: 300 dropped ``jit(lambda v, arr=arr:
v + arr)`` closures over 1 MiB arrays (issue #36's probe; JAX: +57 MiB RSS, flat), and 1,000
signatures of one jitted function followed by ``clear_caches()``. Both should stay flat.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import table  # noqa: E402

import fungraph as fg  # noqa: E402
import fungraph.numpy as fnp  # noqa: E402


def rss_bytes() -> int:
    """The resident set size of this process (Linux), 0 where /proc is missing."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def growth(probe: Callable[[], None]) -> tuple[int, int]:
    """(RSS growth, traced-memory growth) in bytes over ``probe()`` and a collection."""
    gc.collect()
    rss0 = rss_bytes()
    tracemalloc.start()
    try:
        traced0 = tracemalloc.get_traced_memory()[0]
        probe()
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - traced0
    finally:
        tracemalloc.stop()
    return rss_bytes() - rss0, traced


def dropped_functions(count: int, backend: str) -> Callable[[], None]:
    v = np.zeros(1 << 17, np.float64)

    def probe() -> None:
        for i in range(count):
            arr = np.full(1 << 17, float(i))
            fg.jit(lambda v, arr=arr: v + arr, backend=backend)(v)

    return probe


def many_signatures(count: int, backend: str) -> Callable[[], None]:
    f = fg.jit(lambda x: fnp.sum(fnp.tanh(x) * 2.0), backend=backend)

    def probe() -> None:
        for n in range(1, count + 1):
            f(np.full(n, 0.5, np.float32))
        fg.clear_caches()

    return probe


def mib(n: int) -> str:
    return f"{n / 2**20:+.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--opencl", action="store_true", help="also probe the OpenCL backend")
    args = parser.parse_args()
    backends = ["cpu"] + (["opencl"] if args.opencl else [])
    dropped, signatures = (100, 200) if args.quick else (300, 1000)
    for backend in backends:
        dropped_functions(5, backend)()          # imports, first compiles
        many_signatures(5, backend)()
    rows = []
    for backend in backends:
        for name, probe in ((f"{dropped} dropped closures over 1 MiB", dropped_functions(dropped, backend)),
                            (f"{signatures} signatures, then clear_caches()", many_signatures(signatures, backend))):
            rss, traced = growth(probe)
            rows.append([backend, name, mib(rss), mib(traced)])
    print(table(rows, ["backend", "probe", "RSS growth", "traced growth"]))


if __name__ == "__main__":
    main()
