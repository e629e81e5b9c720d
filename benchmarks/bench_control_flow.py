"""Loops under jit: time and engine allocations per iteration of a while_loop, the same loop
run as one native C function against the numpy engine and JAX at 10 / 1,000 / 100,000
elements, a scan with scanned inputs and outputs, a while whose cond reduces over the carry and
a fori_loop whose body takes a cond (numpy engine, native, JAX), a cond outside loops (numpy
engine, native, JAX), the same while loop on OpenCL
as one kernel against a launch per iteration, a loop that
writes one row of a large carry per iteration (``x.at[i].set``), and the gradient through a
10,000-iteration while_loop with and without checkpointing.

    python benchmarks/bench_control_flow.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import interleaved_times, median_time, peak_traced_bytes, table, try_jax  # noqa: E402

import fungraph as fg  # noqa: E402
import fungraph.numpy as fnp  # noqa: E402
from fungraph import lax  # noqa: E402
from fungraph.backends.cpu import ENGINE_STATS  # noqa: E402
from fungraph.primitives.while_loop import LOOP_STATS  # noqa: E402


def bench_loop(n: int, size: int, jax) -> list[list[str]]:
    f = fg.jit(lambda x: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, fnp.tanh(c[1]) * 0.5 + 0.1),
                                        (0, x))[1])
    x = np.linspace(-1, 1, size)
    f(x)
    a0, c0 = ENGINE_STATS["output_allocations"], LOOP_STATS["carry_copies"]
    t = median_time(lambda: f(x), repeat=5)
    calls = 6
    per_call_allocs = (ENGINE_STATS["output_allocations"] - a0) / calls
    copies = LOOP_STATS["carry_copies"] - c0
    py = lambda v: [v := np.tanh(v) * 0.5 + 0.1 for _ in range(n)][-1]  # noqa: E731
    t_np = median_time(lambda: py(x), repeat=5)
    rows = [["numpy python loop", f"{t_np / n * 1e6:.1f} us", "-", "-"],
            ["fungraph jit while_loop", f"{t / n * 1e6:.1f} us", f"{per_call_allocs:.0f} per call, 0 per iteration",
             str(copies)]]
    if jax is not None:
        jf = jax.jit(lambda x: jax.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, jax.numpy.tanh(c[1]) * 0.5
                                                                                  + 0.1), (0, x))[1])
        jax.block_until_ready(jf(x))
        tj = median_time(lambda: jax.block_until_ready(jf(x)), repeat=5)
        rows.append(["jax jit while_loop", f"{tj / n * 1e6:.1f} us", "-", "-"])
    return rows


def bench_row_updates(n: int, rows: int, cols: int, jax) -> list[list[str]]:
    """``fori_loop`` writing row ``i`` of a ``rows x cols`` float32 carry from row ``i - 1``:
    per iteration, the update is one ``dynamic_update_slice`` whose output the plan puts in the
    carry's own buffer, so an iteration touches one row, not the array."""
    def body(i, x):
        return x.at[i].set(x[i - 1] * 0.5 + 1.0)

    x = np.zeros((rows, cols), np.float32)
    want = None
    out = []
    for label, backend in (("fungraph jit, CPU", "cpu"), ("fungraph jit, OpenCL", "opencl")):
        try:
            f = fg.jit(lambda x: lax.fori_loop(0, n, body, x), backend=backend)
            got = np.asarray(f(x))
        except Exception as err:  # noqa: BLE001 - no OpenCL driver: report, keep the other rows
            out.append([label, f"unavailable ({type(err).__name__})", "-"])
            continue
        want = got if want is None else want
        np.testing.assert_array_equal(got, want)
        t = median_time(lambda f=f: np.asarray(f(x)), repeat=5)
        out.append([label, f"{t / n * 1e6:.1f} us", f"{x.nbytes / 2**20:.1f} MiB"])
    xs = x.copy()

    def numpy_loop():
        y = xs.copy()
        for i in range(n):
            y[i] = y[i - 1] * 0.5 + 1.0
        return y

    np.testing.assert_array_equal(numpy_loop(), want)
    out.append(["numpy python loop, in place", f"{median_time(numpy_loop, repeat=5) / n * 1e6:.1f} us", "-"])
    if jax is not None:
        jf = jax.jit(lambda x: jax.lax.fori_loop(0, n, lambda i, x: x.at[i].set(x[i - 1] * 0.5 + 1.0), x))
        jx = jax.numpy.asarray(x)
        np.testing.assert_allclose(np.asarray(jf(jx)), want)
        tj = median_time(lambda: jax.block_until_ready(jf(jx)), repeat=5)
        out.append(["jax jit fori_loop", f"{tj / n * 1e6:.1f} us", "-"])
    return out


def bench_grad(n: int) -> list[list[str]]:
    def loss(x, policy):
        body = lambda c: (c[0] + 1, fnp.sin(c[1]) * 0.5 + x)
        return fnp.sum(lax.while_loop(lambda c: c[0] < n, body, (0, x), checkpoint=policy)[1])

    x = np.linspace(0.1, 0.5, 256)
    rows = []
    ref = None
    for policy in ("all", "sqrt", "every:100"):
        g = fg.jit(fg.grad(lambda x, p=policy: loss(x, p)))
        g(x)
        t0 = time.perf_counter()
        out = g(x)
        t = time.perf_counter() - t0
        peak = peak_traced_bytes(lambda: g(x))
        ref = out if ref is None else ref
        rows.append([policy, f"{t:.2f} s", f"{peak / 2**20:.2f} MiB", str(LOOP_STATS["last_tape_peak"]),
                     f"{float(np.max(np.abs(out - ref))):.1e}"])
    return rows


def _per_iteration(fn, x: np.ndarray, n: int) -> float:
    fn(x)
    return median_time(lambda: fn(x), repeat=5) / n


def native_loop_times(jax, size: int, n: int) -> dict[str, float]:
    """Seconds per iteration of ``x = tanh(x) * 0.5 + 0.1`` over ``size`` float64 elements:
    the while_loop (a counter carry) and the fori_loop on the numpy engine and as a native
    loop, and JAX's (NaN without JAX); engines timed one after another in one run."""
    x = np.linspace(-1, 1, size)
    times = {}
    x64 = fg.config.jax_enable_x64
    fg.config.update("jax_enable_x64", True)  # float64 carries, as JAX's
    for native, engine in ((False, "numpy"), (True, "native")):
        fg.config.update("fungraph_native_cpu", native)
        w = fg.jit(lambda x: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, fnp.tanh(c[1]) * 0.5 + 0.1),
                                            (0, x))[1])
        f = fg.jit(lambda x: lax.fori_loop(0, n, lambda i, v: fnp.tanh(v) * 0.5 + 0.1, x))
        times[f"while {engine}"], times[f"fori {engine}"] = _per_iteration(w, x, n), _per_iteration(f, x, n)
    fg.config.update("fungraph_native_cpu", True)
    fg.config.update("jax_enable_x64", x64)
    times["jax while"] = times["jax fori"] = float("nan")
    if jax is not None:
        jnp = jax.numpy
        jw = jax.jit(lambda x: jax.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, jnp.tanh(c[1]) * 0.5
                                                                                  + 0.1), (0, x))[1])
        jf = jax.jit(lambda x: jax.lax.fori_loop(0, n, lambda i, v: jnp.tanh(v) * 0.5 + 0.1, x))
        times["jax while"] = _per_iteration(lambda v: jax.block_until_ready(jw(v)), x, n)
        times["jax fori"] = _per_iteration(lambda v: jax.block_until_ready(jf(v)), x, n)
    return times


def us(t: float) -> str:
    return f"{t * 1e6:.3g} us"


def bench_native_loops(jax, sizes: tuple[int, ...], iterations: tuple[int, ...]) -> list[list[str]]:
    """Rows of :func:`native_loop_times` per carry size: while and fori loops on both engines,
    JAX's fori_loop, and native fori over JAX fori."""
    rows = []
    for size, n in zip(sizes, iterations):
        t = native_loop_times(jax, size, n)
        rows.append([f"{size:,}", *(us(t[k]) for k in ("while numpy", "while native", "fori numpy", "fori native",
                                                         "jax fori")), f"{t['fori native'] / t['jax fori']:.2f}"])
    return rows


def _loops(xp: Any, lax_: Any, steps: int) -> dict[str, Callable[..., Any]]:
    """The loops of issue #35 beyond the elementwise while: a scan emitting every carry, a
    while whose cond reduces over the carry, a fori_loop whose body takes a cond."""
    def recurrence(c: Any, xs: Any, a: Any) -> Any:
        return lax_.scan(lambda c, x: (xp.tanh(c * a + x), c), c, xs)

    def shrink(x: Any) -> Any:
        return lax_.while_loop(lambda v: xp.max(xp.abs(v)) > 1e-3, lambda v: v * 0.99, x)

    def parity(x: Any) -> Any:
        return lax_.fori_loop(0, steps, lambda i, v: lax_.cond(i % 2 == 0, lambda v: xp.tanh(v) * 0.5 + 0.1,
                                                               lambda v: v * 0.9, v), x)

    return {"scan c = tanh(c*a + x_t), ys": recurrence, "while max(|x|) > tol: x *= 0.99": shrink,
            "fori with cond(i % 2 == 0, ...)": parity}


def loop_kind_times(jax: Any, size: int, steps: int, rounds: int) -> list[list[str]]:
    """Per iteration over ``size`` float64 elements, each loop of :func:`_loops` on the numpy
    engine (a Python loop, as every one of them was before it ran natively), the native engine
    and JAX, timed in turns in one run (median)."""
    rng = np.random.default_rng(0)
    c, a, xs = rng.standard_normal(size), rng.uniform(0.5, 1.0, size), rng.standard_normal((steps, size)) * 0.1
    x = np.linspace(-1, 1, size)
    args = {"scan c = tanh(c*a + x_t), ys": (c, xs, a)}
    # 0.99 ** 688 < 1e-3: the while runs 688 iterations
    counts = {"while max(|x|) > tol: x *= 0.99": 688}
    rows = []
    x64 = fg.config.jax_enable_x64
    fg.config.update("jax_enable_x64", True)
    for name, loop in _loops(fnp, lax, steps).items():
        fargs = args.get(name, (x,))
        fns = {}
        for native, engine in ((False, "numpy"), (True, "native")):
            fg.config.update("fungraph_native_cpu", native)
            exe = fg.jit(loop).lower(*fargs).compiled.executable
            fns[engine] = lambda e=exe: e.run(list(fargs))
        fg.config.update("fungraph_native_cpu", True)
        if jax is not None:
            jf = jax.jit(_loops(jax.numpy, jax.lax, steps)[name])
            jargs = [jax.numpy.asarray(v) for v in fargs]
            jax.block_until_ready(jf(*jargs))
            fns["jax"] = lambda jf=jf, jargs=jargs: jax.block_until_ready(jf(*jargs))
        n = counts.get(name, steps)
        t = interleaved_times(fns, rounds=rounds, number=1)
        row = [name, us(t["numpy"] / n), us(t["native"] / n)]
        row += [us(t["jax"] / n), f"{t['native'] / t['jax']:.2f}"] if jax is not None else []
        rows.append(row)
    fg.config.update("jax_enable_x64", x64)

def opencl_loop_times(size: int, n: int, x64: bool) -> dict[str, float]:
    """Seconds per iteration of the while loop ``x = tanh(x) * 0.5 + 0.1`` on OpenCL over
    ``size`` elements (float64 with ``x64``, else float32): compiled as one kernel and with a
    launch per iteration (``FUNGRAPH_OPENCL_LOOP_KERNELS=0``), timed alternately in one run;
    ``loop kernel`` says whether the first was one (float64 ``tanh`` over many elements keeps
    its launches, ``kernels/loops.py``)."""
    import os

    from fungraph.jit import clear_caches

    f = lambda x: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, fnp.tanh(c[1]) * 0.5 + 0.1), (0, x))[1]  # noqa: E731
    saved = os.environ.get("FUNGRAPH_OPENCL_LOOP_KERNELS")
    runs = {}
    one = False
    with fg.enable_x64(x64):
        x = fg.jit(lambda a: a, backend="opencl")(np.linspace(-1, 1, size))
        for label, flag in (("one kernel", "1"), ("a launch per iteration", "0")):
            os.environ["FUNGRAPH_OPENCL_LOOP_KERNELS"] = flag
            clear_caches()
            exe = fg.jit(f, backend="opencl").lower(x).compiled.executable
            one = "[loop" in exe.describe() if flag == "1" else one
            runs[label] = lambda exe=exe: np.asarray(exe.run([x])[0])
            runs[label]()
    if saved is None:
        os.environ.pop("FUNGRAPH_OPENCL_LOOP_KERNELS", None)
    else:
        os.environ["FUNGRAPH_OPENCL_LOOP_KERNELS"] = saved
    clear_caches()
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(3):
        for label, run in runs.items():
            times[label].append(median_time(run, repeat=3) / n)
    return {**{k: float(np.median(v)) for k, v in times.items()}, "loop kernel": float(one)}


def bench_opencl_loops(sizes: tuple[int, ...], iterations: tuple[int, ...]) -> list[list[str]]:
    """Rows of :func:`opencl_loop_times` per dtype and carry size, with the load average."""
    import os

    rows = []
    for x64 in (False, True):
        for size, n in zip(sizes, iterations):
            try:
                t = opencl_loop_times(size, n, x64)
            except Exception as err:  # noqa: BLE001 - no OpenCL driver: report, keep the other rows
                return [["OpenCL", f"unavailable ({type(err).__name__})", "-", "-", "-"]]
            kept = "" if t["loop kernel"] else " (kept a launch per iteration)"
            rows.append([f"{'float64' if x64 else 'float32'} {size:,}", us(t["one kernel"]) + kept,
                         us(t["a launch per iteration"]), f"{t['a launch per iteration'] / t['one kernel']:.1f}x",
                         f"{os.getloadavg()[0]:.1f}"])
    return rows


def _top_cond(xp: Any, lax_: Any) -> Callable[..., Any]:
    return lambda p, x: lax_.cond(p > 0, lambda v: xp.tanh(v) * 0.5 + 0.1, lambda v: v * 2.0 - 1.0, x)


def cond_times(jax: Any, sizes: tuple[int, ...], rounds: int) -> list[list[str]]:
    """Per call of a jitted function holding one ``cond`` (its branches elementwise) over
    float64 of each size: the executable on the numpy engine and on the native engine (one C
    function for the cond from ``conds.MIN_BYTES``, 512 KiB; branch executables below), and
    JAX's jitted call, timed in turns (median)."""
    rows = []
    x64 = fg.config.jax_enable_x64
    fg.config.update("jax_enable_x64", True)
    for size in sizes:
        x, p = np.linspace(-1, 1, size), np.float64(1.0)
        fns = {}
        for native, engine in ((False, "numpy"), (True, "native")):
            fg.config.update("fungraph_native_cpu", native)
            exe = fg.jit(_top_cond(fnp, lax)).lower(p, x).compiled.executable
            fns[engine] = lambda e=exe, x=x, p=p: e.run([p, x])
        fg.config.update("fungraph_native_cpu", True)
        if jax is not None:
            jf, jx, jp = jax.jit(_top_cond(jax.numpy, jax.lax)), jax.numpy.asarray(x), jax.numpy.asarray(p)
            jax.block_until_ready(jf(jp, jx))
            fns["jax"] = lambda jf=jf, jx=jx, jp=jp: jax.block_until_ready(jf(jp, jx))
        number = max(1, 2000 // max(1, size // 500))
        t = interleaved_times(fns, rounds=rounds, number=number)
        row = [f"{size:,}", us(t["numpy"]), us(t["native"])]
        row += [us(t["jax"]), f"{t['native'] / t['jax']:.2f}"] if jax is not None else []
        rows.append(row)
    fg.config.update("jax_enable_x64", x64)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    jax = try_jax()
    n = 200 if args.quick else 1000
    print(f"== while_loop of {n} iterations, carry of 1,000 float64 (tanh(x) * 0.5 + 0.1)")
    print(table(bench_loop(n, 1000, jax), ["what", "per iteration", "engine allocations", "carry copies"]))
    print("\n== native loops: per iteration of tanh(x) * 0.5 + 0.1, float64 (numpy engine / native / JAX)")
    iterations = (2000, 500, 20) if args.quick else (20000, 4000, 100)
    print(table(bench_native_loops(jax, (10, 1000, 100_000), iterations),
                ["elements", "while numpy", "while native", "fori numpy", "fori native", "jax fori", "native/jax"]))
    steps = 200 if args.quick else 1000
    print(f"\n== native loops of other kinds: per iteration over 1,000 float64 elements ({steps} steps; medians, "
          "engines timed in turns)")
    print(table(loop_kind_times(jax, 1000, steps, rounds=3 if args.quick else 5),
                ["loop", "numpy engine", "native", "jax", "native/jax"][:5 if jax is not None else 3]))
    print("\n== jit(cond(p > 0, tanh(x) * 0.5 + 0.1, x * 2 - 1)) per call, float64 (medians, engines timed in turns)")
    print(table(cond_times(jax, (10, 1000, 1_000_000), rounds=3 if args.quick else 7),
                ["elements", "numpy engine", "native", "jax", "native/jax"][:5 if jax is not None else 3]))
    print("\n== OpenCL while_loop: per iteration of tanh(x) * 0.5 + 0.1, one kernel vs a launch per iteration")
    iterations = (2000, 500, 20) if args.quick else (20000, 2000, 100)
    print(table(bench_opencl_loops((10, 1000, 100_000), iterations),
                ["dtype, elements", "one kernel", "launch per iteration", "speed-up", "load"]))
    k = 100 if args.quick else 500
    print(f"\n== fori_loop of {k} iterations writing row i of a 1000 x 1000 float32 carry (x.at[i].set)")
    print(table(bench_row_updates(k, 1000, 1000, jax), ["what", "per iteration", "carry"]))
    m = 1000 if args.quick else 10_000
    print(f"\n== gradient through a {m:,}-iteration while_loop (data-dependent trip count), 256 float64 lanes")
    print(table(bench_grad(m), ["checkpoint policy", "time", "peak traced memory", "stored tape entries",
                                "max |diff| vs all"]))


if __name__ == "__main__":
    main()
