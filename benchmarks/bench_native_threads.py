"""The native engine's large regions and loops on one thread against the usable cores, and JAX.

    python benchmarks/bench_native_threads.py [--quick] [--threads N]

Prints, for 1M-element float32 and float64 arrays and each elementwise row of issue #35
(bench_native.py), the median and the best time per call of the native engine built with
``FUNGRAPH_NATIVE_THREADS=1`` and with N threads (default: the usable cores) and of JAX, timed
in turns in one process, with the load average before and after: on a machine whose cores are
busy the best times show what a free core gives, the medians what the load leaves. Then the
same for a float64 ``while_loop`` of ``x = tanh(x) * 0.5 + 0.1`` with a counter, per
iteration, at 10, 1,000 and 100,000 elements (a body's element pass is split from 32,768).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import interleaved_samples, table, try_jax  # noqa: E402
from bench_native import _rows  # noqa: E402

import fungraph as fg  # noqa: E402
import fungraph.nn as fnn  # noqa: E402
import fungraph.numpy as fnp  # noqa: E402
from fungraph import lax  # noqa: E402
from fungraph.backends.native import codegen, native_enabled  # noqa: E402


def _executable(fun: Any, x: np.ndarray, threads: int) -> Any:
    """``jit(fun)``'s CPU executable at ``x`` with its regions split across ``threads``."""
    before = os.environ.get(codegen.THREADS_ENV)
    os.environ[codegen.THREADS_ENV] = str(threads)
    try:
        return fg.jit(fun).lower(x).compiled.executable
    finally:
        if before is None:
            del os.environ[codegen.THREADS_ENV]
        else:
            os.environ[codegen.THREADS_ENV] = before


def _cell(ts: list[float]) -> str:
    return f"{statistics.median(ts) * 1e3:.3f} / {min(ts) * 1e3:.3f}"


def bench(n: int, threads: int, jax: Any, rounds: int) -> list[list[str]]:
    rows = []
    jrows = _rows(jax.numpy, jax.nn) if jax is not None else {}
    for dtype in (np.float32, np.float64):
        x = np.random.default_rng(0).standard_normal(n).astype(dtype)
        for name, fun in _rows(fnp, fnn).items():
            one, many = _executable(fun, x, 1), _executable(fun, x, threads)
            fns = {"one": lambda e=one: e.run([x]), "many": lambda e=many: e.run([x])}
            if jax is not None:
                jf, xj = jax.jit(jrows[name]), jax.numpy.asarray(x)
                jf(xj).block_until_ready()
                fns["jax"] = lambda jf=jf, xj=xj: jf(xj).block_until_ready()
            t = interleaved_samples(fns, rounds=rounds, number=3)
            rows.append([f"{name} {np.dtype(dtype).name}", *(_cell(ts) for ts in t.values())])
    return rows


def _counted_loop(xp: Any, lax_: Any, n: int) -> Any:
    return lambda x: lax_.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, xp.tanh(c[1]) * 0.5 + 0.1), (0, x))[1]


def loop_rows(sizes: tuple[int, ...], iterations: tuple[int, ...], threads: int, jax: Any,
              rounds: int) -> list[list[str]]:
    """Per iteration of the float64 counted ``while_loop`` at each size: the native loop built
    for one thread and for ``threads``, and JAX's, timed in turns (us, median / best)."""
    rows = []
    for size, n in zip(sizes, iterations):
        x = np.linspace(-1, 1, size)
        one, many = _executable(_counted_loop(fnp, lax, n), x, 1), _executable(_counted_loop(fnp, lax, n), x, threads)
        fns = {"one": lambda e=one: e.run([x]), "many": lambda e=many: e.run([x])}
        if jax is not None:
            jf, xj = jax.jit(_counted_loop(jax.numpy, jax.lax, n)), jax.numpy.asarray(x)
            jf(xj).block_until_ready()
            fns["jax"] = lambda jf=jf, xj=xj: jf(xj).block_until_ready()
        t = interleaved_samples(fns, rounds=rounds, number=1)
        rows.append([f"{size:,}", *(f"{statistics.median(ts) / n * 1e6:.3g} / {min(ts) / n * 1e6:.3g}"
                                    for ts in t.values())])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=codegen.usable_cores())
    args = parser.parse_args()
    fg.config.update("jax_enable_x64", True)
    if not native_enabled():
        print("no C compiler found (or FUNGRAPH_NATIVE_CPU=0): nothing to compare")
        return
    jax = try_jax()
    print(f"load average {os.getloadavg()[0]:.1f}; {codegen.usable_cores()} usable cores")
    header = ["work (ms, median / best)", "1 thread", f"{args.threads} threads"] + (["jax"] if jax else [])
    print(table(bench(1 << 20, args.threads, jax, rounds=3 if args.quick else 15), header))
    header = ["while_loop per iteration (us, median / best)", "1 thread", f"{args.threads} threads"]
    iterations = (2000, 500, 20) if args.quick else (20000, 4000, 100)
    print(table(loop_rows((10, 1000, 100_000), iterations, args.threads, jax, rounds=3 if args.quick else 15),
                header + (["jax"] if jax else [])))
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
