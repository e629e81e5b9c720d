"""The native CPU engine (fused regions compiled to C) against the numpy engine and JAX.

    python benchmarks/bench_native.py [--quick]

Prints, for 1M-element float32 and float64 arrays, the median time of each elementwise row of
issue #35 (``tanh(x)*2+1``, ``exp(x)*2+1``, ``log1p(abs(x))*2+1``, GELU in its tanh form) on
the numpy engine, the native engine and JAX, timed in turns in one run; then softmax and layer
norm over (1000, 1000), whose reductions run inside their native region (against the native
engine with the reductions left to numpy, as before they could join a region); then
scatter-adds (an embedding gradient, ``segment_sum``, a BCOO matrix times a dense one) on the
numpy engine (``np.add.at``) and the native one, beside numpy's own ``np.add.at`` and JAX; then
the time to build a graph's regions with a cold and a warm disk cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import interleaved_times, ms, table, try_jax  # noqa: E402

import fungraph as fg  # noqa: E402
import fungraph.nn as fnn  # noqa: E402
import fungraph.numpy as fnp  # noqa: E402
import fungraph.ops as fops  # noqa: E402
from fungraph.backends import backend_factory  # noqa: E402
from fungraph.backends.native import native_enabled  # noqa: E402
from fungraph.experimental import sparse  # noqa: E402
from fungraph.jit import clear_caches  # noqa: E402


def _rows(xp: Any, nn: Any) -> dict[str, Callable[[Any], Any]]:
    return {
        "tanh(x)*2+1": lambda x: xp.tanh(x) * 2 + 1,
        "exp(x)*2+1": lambda x: xp.exp(x) * 2 + 1,
        "log1p(abs(x))*2+1": lambda x: xp.log1p(xp.abs(x)) * 2 + 1,
        "gelu (tanh form)": lambda x: nn.gelu(x, approximate=True),
    }


def executable(fun: Callable[..., Any], x: np.ndarray, native: bool, *more: np.ndarray) -> Any:
    """The CPU executable of ``jit(fun)`` at ``x, *more`` built with the native engine on or
    off (kept by the caller: switching the engine empties jit's caches)."""
    fg.config.update("fungraph_native_cpu", native)
    return fg.jit(fun).lower(x, *more).compiled.executable


def bench_elementwise(n: int, jax: Any, rounds: int) -> list[list[str]]:
    rng = np.random.default_rng(0)
    rows = []
    jrows = _rows(jax.numpy, jax.nn) if jax is not None else {}
    for dtype in (np.float32, np.float64):
        x = rng.standard_normal(n).astype(dtype)
        for name, fun in _rows(fnp, fnn).items():
            numpy_exe = executable(fun, x, False)
            native_exe = executable(fun, x, True)
            want = numpy_exe.run([x])[0]
            got = native_exe.run([x])[0]
            err = float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1)))
            fns = {"numpy": lambda e=numpy_exe: e.run([x]), "native": lambda e=native_exe: e.run([x])}
            if jax is not None:
                jf = jax.jit(jrows[name])
                xj = jax.numpy.asarray(x)
                jf(xj).block_until_ready()
                fns["jax"] = lambda jf=jf, xj=xj: jf(xj).block_until_ready()
            t = interleaved_times(fns, rounds=rounds, number=3)
            row = [f"{name} {np.dtype(dtype).name}", ms(t["numpy"]), ms(t["native"]),
                   f"{t['numpy'] / t['native']:.2f}x", f"{len(native_exe.native)}", f"{err:.1e}"]
            if jax is not None:
                row += [ms(t["jax"]), f"{t['native'] / t['jax']:.2f}"]
            rows.append(row)
    fg.config.update("fungraph_native_cpu", True)
    return rows


def softmax(xp: Any, x: Any) -> Any:
    e = xp.exp(x - xp.max(x, axis=-1, keepdims=True))
    return e / xp.sum(e, axis=-1, keepdims=True)


def layer_norm(xp: Any, x: Any) -> Any:
    mean = xp.mean(x, axis=-1, keepdims=True)
    return (x - mean) / xp.sqrt(xp.var(x, axis=-1, keepdims=True) + 1e-5)


REDUCTION_ROWS = {"softmax": softmax, "layer norm": layer_norm}


def reductions_apart() -> Any:
    """The CPU engine's regions without reductions (what they were before reductions could
    join them): restore with ``backend_factory("cpu").fusion = <the result>``."""
    factory = backend_factory("cpu")
    old = factory.fusion
    factory.fusion = dataclasses.replace(old, reduces=lambda e: False)
    clear_caches()
    return old


def bench_reductions(shape: tuple[int, int], jax: Any, rounds: int) -> list[list[str]]:
    """Softmax and layer norm on the numpy engine, the native engine with the reductions
    outside its regions, the native engine with them inside (one region), and JAX."""
    rng = np.random.default_rng(1)
    rows = []
    for dtype in (np.float32, np.float64):
        x = rng.standard_normal(shape).astype(dtype)
        for name, row in REDUCTION_ROWS.items():
            fun = functools.partial(row, fnp)
            numpy_exe = executable(fun, x, False)
            old = reductions_apart()
            try:
                apart_exe = executable(fun, x, True)
            finally:
                backend_factory("cpu").fusion = old
                clear_caches()
            native_exe = executable(fun, x, True)
            want = numpy_exe.run([x])[0]
            err = float(np.max(np.abs(native_exe.run([x])[0] - want) / np.maximum(np.abs(want), 1)))
            fns = {"numpy": lambda e=numpy_exe: e.run([x]), "apart": lambda e=apart_exe: e.run([x]),
                   "native": lambda e=native_exe: e.run([x])}
            if jax is not None:
                jf = jax.jit(functools.partial(row, jax.numpy))
                xj = jax.numpy.asarray(x)
                jf(xj).block_until_ready()
                fns["jax"] = lambda jf=jf, xj=xj: jf(xj).block_until_ready()
            t = interleaved_times(fns, rounds=rounds, number=3)
            out = [f"{name} {np.dtype(dtype).name}", ms(t["numpy"]), ms(t["apart"]), ms(t["native"]),
                   f"{len(native_exe.native)}", f"{err:.1e}"]
            if jax is not None:
                out += [ms(t["jax"]), f"{t['native'] / t['jax']:.2f}"]
            rows.append(out)
    fg.config.update("fungraph_native_cpu", True)
    return rows


def _scatter_rows(rng: np.random.Generator, quick: bool) -> list[tuple[str, Callable[..., Any], Callable[..., Any],
                                                                      Callable[..., Any], tuple[np.ndarray, ...]]]:
    """(label, fungraph function, numpy ``np.add.at`` reference, JAX function, arguments) per row."""
    vocab, d, tokens = (10_000, 64, 8_192) if not quick else (2_000, 64, 2_048)
    tok = rng.integers(0, vocab, tokens).astype(np.int32)
    g = rng.standard_normal((tokens, d)).astype(np.float32)
    table = rng.standard_normal((vocab, d)).astype(np.float32)
    n_data, n_seg = (1_000_000, 1_000) if not quick else (100_000, 1_000)
    ids = rng.integers(0, n_seg, n_data).astype(np.int32)
    data = rng.standard_normal(n_data).astype(np.float32)
    rows2 = rng.standard_normal((n_data // 16, 16)).astype(np.float32)
    n, nse, k = (4_096, 200_000, 32) if not quick else (1_024, 20_000, 32)
    bidx = np.stack([rng.integers(0, n, nse), rng.integers(0, n, nse)], 1).astype(np.int32)
    bdata = rng.standard_normal(nse).astype(np.float32)
    dense = rng.standard_normal((n, k)).astype(np.float32)

    def np_at(shape: tuple[int, ...], idx: np.ndarray, upd: np.ndarray) -> np.ndarray:
        out = np.zeros(shape, upd.dtype)
        np.add.at(out, idx, upd)
        return out

    def jax_bcoo(jax: Any) -> Callable[..., Any]:
        from jax.experimental import sparse as jsparse

        return lambda v, i, x: jsparse.BCOO((v, i), shape=(n, n)) @ x

    return [
        (f"embedding gradient: {tokens:,} x {d} rows into {vocab:,}",
         lambda g, t: fnp.zeros((vocab, d), np.float32).at[t].add(g),
         lambda g, t: np_at((vocab, d), t, g),
         lambda jax: lambda g, t: jax.numpy.zeros((vocab, d), np.float32).at[t].add(g), (g, tok)),
        (f"gather gradient: grad of sum(table[tokens] * g), {tokens:,} x {d}",
         fg.grad(lambda table, g, t: fnp.sum(table[t] * g)),
         lambda table, g, t: np_at((vocab, d), t, g),
         lambda jax: jax.grad(lambda table, g, t: jax.numpy.sum(table[t] * g)), (table, g, tok)),
        (f"segment_sum: {n_data:,} values into {n_seg:,}",
         lambda v, i: fops.segment_sum(v, i, n_seg),
         lambda v, i: np_at((n_seg,), i, v),
         lambda jax: lambda v, i: jax.ops.segment_sum(v, i, n_seg), (data, ids)),
        (f"segment_sum: {n_data // 16:,} x 16 rows into {n_seg:,}",
         lambda v, i: fops.segment_sum(v, i, n_seg),
         lambda v, i: np_at((n_seg, 16), i, v),
         lambda jax: lambda v, i: jax.ops.segment_sum(v, i, n_seg), (rows2, ids[:n_data // 16])),
        (f"BCOO ({n:,} x {n:,}, {nse:,} entries) @ ({n:,} x {k})",
         lambda v, i, x: sparse.BCOO((v, i), shape=(n, n)) @ x,
         lambda v, i, x: np_at((n, k), i[:, 0], v[:, None] * x[i[:, 1]]),
         jax_bcoo, (bdata, bidx, dense)),
    ]


def bench_scatter(jax: Any, rounds: int, quick: bool) -> list[list[str]]:
    """Scatter-adds on the numpy engine (``np.add.at``), the native engine, numpy's own
    ``np.add.at`` and JAX, timed in turns; the largest difference from numpy relative to the
    largest value."""
    rng = np.random.default_rng(2)
    rows = []
    for label, fun, reference, jax_fun, args in _scatter_rows(rng, quick):
        numpy_exe = executable(fun, *args[:1], False, *args[1:])
        native_exe = executable(fun, *args[:1], True, *args[1:])
        want = reference(*args)
        got = native_exe.run(list(args))[0]
        err = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))
        fns = {"np.add.at": lambda: reference(*args), "numpy": lambda e=numpy_exe: e.run(list(args)),
               "native": lambda e=native_exe: e.run(list(args))}
        if jax is not None:
            jf = jax.jit(jax_fun(jax))
            jargs = [jax.numpy.asarray(a) for a in args]
            jf(*jargs).block_until_ready()
            fns["jax"] = lambda jf=jf, jargs=jargs: jf(*jargs).block_until_ready()
        t = interleaved_times(fns, rounds=rounds, number=3)
        row = [label, ms(t["np.add.at"]), ms(t["numpy"]), ms(t["native"]), f"{t['numpy'] / t['native']:.1f}x",
               f"{err:.1e}"]
        if jax is not None:
            row += [ms(t["jax"]), f"{t['native'] / t['jax']:.2f}"]
        rows.append(row)
    fg.config.update("fungraph_native_cpu", True)
    return rows


FIRST_CALL = """
import time, numpy as np, fungraph as fg, fungraph.numpy as fnp
from fungraph.backends.native import BUILD_STATS
x = np.linspace(-2, 2, {n}, dtype=np.float32)
t0 = time.perf_counter()
fg.jit(lambda x: fnp.tanh(x * 1.25) * 3.0 - fnp.exp(-x * x) * 0.5)(x)
print(time.perf_counter() - t0, BUILD_STATS["compiles"], BUILD_STATS["disk_hits"])
"""


def bench_build(n: int) -> list[list[str]]:
    """First call of a fresh graph (trace, optimise, plan, build, run) in a new process with an
    empty build cache, then in a second process that finds the object on disk."""
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "FUNGRAPH_NATIVE_CACHE": folder,
               "PYTHONPATH": os.pathsep.join([str(Path(fg.__file__).resolve().parents[1]),
                                              os.environ.get("PYTHONPATH", "")])}
        for label in ("first process: cold cache", "second process: warm disk cache"):
            out = subprocess.run([sys.executable, "-c", FIRST_CALL.format(n=n)], env=env, capture_output=True,
                                 text=True, check=True).stdout.split()
            rows.append([label, ms(float(out[0])), f"{out[1]} compile(s), {out[2]} disk hit(s)"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    fg.config.update("jax_enable_x64", True)
    jax = try_jax()
    print(f"jax: {jax.__version__ if jax else 'not installed'}; native engine available: {native_enabled()}\n")
    if not native_enabled():
        print("no C compiler found (or FUNGRAPH_NATIVE_CPU=0): nothing to compare")
        return
    n = 1 << 20
    print(f"== elementwise rows of issue #35 on {n:,} elements (median, timed in turns)")
    header = ["work", "numpy engine", "native", "speed-up", "regions", "max rel diff"]
    header += ["jax", "native / jax"] if jax is not None else []
    print(table(bench_elementwise(n, jax, rounds=3 if args.quick else 7), header))
    print("\n== reductions inside native regions, (1000, 1000) (median, timed in turns)")
    header = ["work", "numpy engine", "native, reductions apart", "native", "regions", "max rel diff"]
    header += ["jax", "native / jax"] if jax is not None else []
    print(table(bench_reductions((1000, 1000), jax, rounds=3 if args.quick else 7), header))
    print("\n== scatter-add / segment_sum / BCOO matvec, float32 (median, timed in turns)")
    header = ["work", "numpy np.add.at", "numpy engine", "native", "speed-up", "max diff / max"]
    header += ["jax", "native / jax"] if jax is not None else []
    print(table(bench_scatter(jax, rounds=3 if args.quick else 7, quick=args.quick), header))
    print("\n== first call of a fresh 1M-element region graph")
    print(table(bench_build(n), ["build", "first call", "what happened"]))


if __name__ == "__main__":
    main()
