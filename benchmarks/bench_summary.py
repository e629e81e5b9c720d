"""One table across engines: each workload's median time and peak traced memory for numpy
eager, fungraph eager, fungraph jit (CPU), fungraph jit (OpenCL) and JAX when installed; then
the rows of issue #35 for the native CPU engine: elementwise work on 1M elements (numpy
engine, native engine, JAX), a while_loop's time per iteration (native loop, JAX), and both
built for one thread against the usable cores (bench_native_threads.py).

    python benchmarks/bench_summary.py [--quick]

OpenCL times include copying the result back to the host; peak memory is tracemalloc's
(host allocations through Python; device memory is not counted). fungraph's CPU jit and JAX's
jit are timed in turns (same load for both; their ratio and the load average follow them).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import interleaved_times, median_time, peak_traced_bytes, table, try_jax  # noqa: E402
from bench_control_flow import native_loop_times, us  # noqa: E402
from bench_jit import _mlp_params, chain20, jax_sgd_step, numpy_step, sgd_step  # noqa: E402
from bench_native import bench_elementwise  # noqa: E402
from bench_native_threads import bench as bench_threads  # noqa: E402
from bench_native_threads import loop_rows  # noqa: E402

import fungraph as fg  # noqa: E402
import fungraph.numpy as fnp  # noqa: E402
from fungraph.backends.native import codegen, native_enabled  # noqa: E402


def _opencl_jit(f: Callable[..., Any]) -> Callable[..., Any] | None:
    try:
        jf = fg.jit(f, backend="opencl")
    except Exception:
        return None
    return lambda *a: fg.tree_map(np.asarray, jf(*a))


def workloads(quick: bool) -> list[tuple[str, Callable[..., Any], Callable[..., Any], tuple, Any]]:
    rng = np.random.default_rng(0)
    n = 1_000_000 if quick else 10_000_000
    x = rng.standard_normal(n).astype(np.float32)
    a, b = np.float32(0.99), np.float32(0.01)
    sizes, batch = ([784, 256, 256, 10], 64) if quick else ([784, 1024, 1024, 10], 256)
    params = _mlp_params(sizes)
    xb = rng.standard_normal((batch, 784)).astype(np.float32)
    yb = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    m = rng.standard_normal((512, 512) if quick else (1024, 1024)).astype(np.float32)
    return [
        (f"20-op multiply/add chain, {n:,} f32", chain20, chain20, (x, a, b), "chain"),
        (f"sum of {n:,} f32", lambda v: fnp.sum(v), lambda v: np.sum(v), (x,), "sum"),
        (f"matmul {m.shape[0]}x{m.shape[0]} f32", lambda p, q: p @ q, lambda p, q: p @ q, (m, m), "matmul"),
        (f"MLP {'-'.join(map(str, sizes))} SGD step, batch {batch}", sgd_step, numpy_step, (params, xb, yb), "mlp"),
    ]


def _jax_fn(jax: Any, key: str) -> Callable[..., Any] | None:
    if jax is None:
        return None
    import jax.numpy as jnp

    if key == "chain":
        f = jax.jit(chain20)
    elif key == "sum":
        f = jax.jit(jnp.sum)
    elif key == "matmul":
        f = jax.jit(lambda p, q: p @ q)
    else:
        f = jax.jit(jax_sgd_step(jax))
    return lambda *a: jax.block_until_ready(f(*a))


def native_elementwise_table(jax: Any, n: int, rounds: int) -> str:
    """``bench_native.py``'s elementwise rows at ``n`` elements, float32 and float64."""
    header = ["work", "numpy engine", "native", "speed-up", "regions", "max rel diff"]
    header += ["jax", "native / jax"] if jax is not None else []
    with fg.enable_x64():  # the float64 rows
        rows = bench_elementwise(n, jax, rounds=rounds)
    return table(rows, header)


def native_loop_table(jax: Any, sizes: tuple[int, ...], iterations: tuple[int, ...]) -> str:
    """Per iteration of a float64 ``while_loop`` (``tanh(x) * 0.5 + 0.1`` and a counter) at
    each carry size: numpy engine, native loop and JAX."""
    rows = []
    for size, n in zip(sizes, iterations):
        t = native_loop_times(jax, size, n)
        rows.append([f"{size:,}", us(t["while numpy"]), us(t["while native"])])
        rows[-1] += [us(t["jax while"]), f"{t['while native'] / t['jax while']:.2f}"] if jax is not None else []
    return table(rows, ["elements", "numpy engine", "native"] + (["jax", "native / jax"] if jax is not None else []))


def native_threads_tables(jax: Any, n: int, sizes: tuple[int, ...], iterations: tuple[int, ...],
                          rounds: int) -> str:
    """``bench_native_threads.py``'s rows: the elementwise rows at ``n`` elements and the
    while_loop per iteration at each of ``sizes``, built for one thread and for the usable
    cores, and JAX."""
    threads = codegen.usable_cores()
    tail = ["jax"] if jax is not None else []
    with fg.enable_x64():
        work = table(bench_threads(n, threads, jax, rounds), ["work (ms, median / best)", "1 thread",
                                                              f"{threads} threads", *tail])
        loops = table(loop_rows(sizes, iterations, threads, jax, rounds),
                      ["while_loop per iteration (us, median / best)", "1 thread", f"{threads} threads", *tail])
    return f"{work}\n{loops}"


def native_tables(jax: Any, quick: bool) -> str:
    """The native engine's rows of issue #35, or why there are none."""
    if not native_enabled():
        return "native engine: no C compiler found (or FUNGRAPH_NATIVE_CPU=0), no rows"
    n = 1 << 20
    iterations = (2000, 500, 20) if quick else (20000, 4000, 100)
    return "\n".join([
        f"== native engine: elementwise on {n:,} elements (median, engines timed in turns)",
        native_elementwise_table(jax, n, rounds=3 if quick else 7),
        "\n== native engine: while_loop per iteration, float64 (median of 5)",
        native_loop_table(jax, (10, 1000, 100_000), iterations),
        f"\n== native engine: one thread against {codegen.usable_cores()} (engines timed in turns, load average "
        f"{os.getloadavg()[0]:.1f})",
        native_threads_tables(jax, n, (10, 1000, 100_000), iterations, rounds=3 if quick else 9),
    ])


def _jit_and_jax(engines: dict[str, Callable[..., Any] | None], fargs: tuple, rounds: int) -> dict[str, float]:
    """Median seconds of fungraph's CPU jit and JAX's jit timed in turns
    (:func:`interleaved_samples`), so both see the same load; empty without JAX or on an error
    (the caller then times and reports each engine alone)."""
    pair = {name: engines[name] for name in ("fungraph jit cpu", "jax jit")}
    if any(f is None for f in pair.values()):
        return {}
    try:
        return interleaved_times({name: (lambda f=f: f(*fargs)) for name, f in pair.items()}, rounds=rounds)
    except Exception:
        return {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    jax = try_jax()
    rows = []
    for label, fun, ref, fargs, key in workloads(args.quick):
        engines: list[tuple[str, Callable[..., Any] | None]] = [
            ("numpy eager", ref),
            ("fungraph eager", fun),
            ("fungraph jit cpu", fg.jit(fun)),
            ("fungraph jit opencl", _opencl_jit(fun)),
            ("jax jit", _jax_fn(jax, key)),
        ]
        paired = _jit_and_jax(dict(engines), fargs, rounds=3 if args.quick else 5)
        base = None
        for name, f in engines:
            if f is None:
                rows.append([label, name, "n/a", "", ""])
                label = ""
                continue
            try:
                reps = 2 if name == "fungraph eager" and key == "mlp" else 5
                t = paired[name] if name in paired else median_time(lambda f=f: f(*fargs), repeat=reps)
                peak = peak_traced_bytes(lambda f=f: f(*fargs))
            except Exception as err:  # report, don't hide, a failing engine
                rows.append([label, name, f"error: {type(err).__name__}", "", ""])
                label = ""
                continue
            base = t if base is None else base
            rows.append([label, name, f"{t * 1e3:.2f} ms", f"{peak / 2**20:.1f} MiB", f"{base / t:.2f}x"])
            label = ""
        if len(paired) == 2:
            rows.append(["", "fungraph jit cpu / jax jit", f"{paired['fungraph jit cpu'] / paired['jax jit']:.2f}",
                         "(timed in turns)", f"load {os.getloadavg()[0]:.1f}"])
    print(table(rows, ["workload", "engine", "median", "peak traced memory", "speed vs numpy"]))
    print()
    print(native_tables(jax, args.quick))


if __name__ == "__main__":
    main()
