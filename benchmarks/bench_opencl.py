"""jit on the OpenCL backend against numpy and the CPU engine.

    python benchmarks/bench_opencl.py [--quick]

Prints: a fused 10-op float32 chain on 10M elements (multiply/add only, and one with
transcendentals), a 1024x1024 matmul, the sum of 10M floats, the MLP training step
784-1024-1024-10 at batch 256, compile times, and host<->device transfers per call of a
device-resident chain. OpenCL times include waiting for the queue to finish; "resident"
rows pass device arrays in and keep the result on the device, "from host" rows pass numpy
arrays in and read the result back.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import median_time, table  # noqa: E402
from bench_jit import mlp_problem, muladd_chain, numpy_step, sgd_step  # noqa: E402
from bench_jit import numpy_muladd_out as numpy_muladd_out_n  # noqa: E402

import fungraph as fg  # noqa: E402
import fungraph.numpy as fnp  # noqa: E402
from fungraph.backends import opencl as ocl  # noqa: E402
from fungraph.jit import clear_caches  # noqa: E402


def finish() -> None:
    ocl.get_device().queue.finish()


def timed_ocl(f, *args, repeat: int = 5) -> float:
    def run():
        f(*args)
        finish()

    return median_time(run, repeat=repeat)


def resident(*xs):
    """Device copies of ``xs`` (through an identity jit), so timings exclude uploads."""
    up = fg.jit(lambda *a: a, backend="opencl")
    out = up(*xs)
    finish()
    return out


def chain_muladd(x, a, b):
    return muladd_chain(x, a, b, 5)


def chain_transcendental(x, a, b):
    y = fnp.tanh(x * a + b)
    y = fnp.exp(y * b - a)
    y = fnp.sqrt(y * y + b)
    y = fnp.sin(y) * a + b
    return y * y


def numpy_muladd_out(x, a, b, out):
    return numpy_muladd_out_n(x, a, b, out, 5)


def numpy_transcendental_out(x, a, b, out):
    np.multiply(x, a, out=out)
    np.add(out, b, out=out)
    np.tanh(out, out=out)
    np.multiply(out, b, out=out)
    np.subtract(out, a, out=out)
    np.exp(out, out=out)
    np.multiply(out, out, out=out)
    np.add(out, b, out=out)
    np.sqrt(out, out=out)
    np.sin(out, out=out)
    np.multiply(out, a, out=out)
    np.add(out, b, out=out)
    np.multiply(out, out, out=out)
    return out


def bench_chain(n: int, fun, numpy_out, reps: int) -> list[list[str]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    a, b = np.float32(0.99), np.float32(0.01)
    out = np.empty_like(x)
    cpu = fg.jit(fun)
    gpu = fg.jit(fun, backend="opencl")
    t_c0 = time.perf_counter()
    gpu(x, a, b)
    finish()
    t_compile = time.perf_counter() - t_c0
    cpu(x, a, b)
    with np.errstate(all="ignore"):
        want = fun(x, a, b)
        np.testing.assert_allclose(np.asarray(gpu(x, a, b)), want, rtol=2e-5, atol=1e-5)
        xr, ar, br = resident(x, a, b)
        t_np = median_time(lambda: fun(x, a, b), repeat=reps)
        t_out = median_time(lambda: numpy_out(x, a, b, out), repeat=reps)
        t_cpu = median_time(lambda: cpu(x, a, b), repeat=reps)
        t_res = timed_ocl(gpu, xr, ar, br, repeat=reps)
        t_host = median_time(lambda: np.asarray(gpu(x, a, b)), repeat=reps)
    exe = gpu.lower(x, a, b).compiled.executable
    rows_native = []
    if "sin(" in exe.source:
        os.environ["FUNGRAPH_OPENCL_NATIVE_MATH"] = "1"
        clear_caches()
        fast = fg.jit(fun, backend="opencl")
        with np.errstate(all="ignore"):
            got = np.asarray(fast(x, a, b))
            t_nat = timed_ocl(fast, xr, ar, br, repeat=reps)
        del os.environ["FUNGRAPH_OPENCL_NATIVE_MATH"]
        clear_caches()
        err = float(np.max(np.abs(got - want) / (1 + np.abs(want))))
        rows_native = [[f"jit opencl, resident, native_sin/cos/exp/log (max err {err:.1e})", f"{t_nat * 1e3:.1f} ms",
                        f"{t_np / t_nat:.2f}"]]
    return [["numpy eager", f"{t_np * 1e3:.1f} ms", "1.00"],
            ["numpy out=", f"{t_out * 1e3:.1f} ms", f"{t_np / t_out:.2f}"],
            ["fungraph jit cpu", f"{t_cpu * 1e3:.1f} ms", f"{t_np / t_cpu:.2f}"],
            [f"jit opencl, resident ({exe.kernel_count} kernel)", f"{t_res * 1e3:.1f} ms", f"{t_np / t_res:.2f}"],
            ["jit opencl, from host + read back", f"{t_host * 1e3:.1f} ms", f"{t_np / t_host:.2f}"],
            ["jit opencl first call (compile)", f"{t_compile * 1e3:.0f} ms", ""]] + rows_native


def bench_matmul(sizes: tuple[int, ...], reps: int) -> list[list[str]]:
    """numpy and OpenCL timed alternately (best of ``reps`` rounds each), so both see the same
    load on a shared machine."""
    rows = []
    for n in sizes:
        rng = np.random.default_rng(0)
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        mm = fg.jit(lambda a, b: a @ b, backend="opencl")
        np.testing.assert_allclose(np.asarray(mm(a, b)), a @ b, rtol=1e-3, atol=1e-3)
        ar, br = resident(a, b)
        t_np, t_cl = [], []
        for _ in range(reps):
            t_np.append(median_time(lambda: a @ b, repeat=1))
            t_cl.append(timed_ocl(mm, ar, br, repeat=1))
        flops = 2 * n ** 3
        best_np, best_cl = min(t_np), min(t_cl)
        rows += [[f"{n}x{n} numpy (BLAS)", f"{best_np * 1e3:.1f} ms", f"{flops / best_np / 1e9:.0f} GFLOP/s", "1.00"],
                 [f"{n}x{n} jit opencl, resident", f"{best_cl * 1e3:.1f} ms", f"{flops / best_cl / 1e9:.0f} GFLOP/s",
                  f"{best_np / best_cl:.2f}"]]
    return rows


def bench_loops(reps: int) -> list[list[str]]:
    """Per-iteration cost of device-resident loops (256 float32 carry) and what they transfer."""
    def while_fn(x, n):
        return fg.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 0.5 + 1.0), (0, x))[1]

    def scan_fn(x):
        return fg.lax.fori_loop(0, 1000, lambda i, c: c * 0.5 + 1.0, x)

    x = np.ones(256, np.float32)
    rows = []
    for label, fun, args in (("while_loop, 1000 iterations", while_fn, (x, np.int64(1000))),
                             ("fori_loop (scan), 1000 iterations", scan_fn, (x,))):
        cpu = fg.jit(fun)
        gpu = fg.jit(fun, backend="opencl")
        dev_args = resident(*args)
        gpu(*dev_args)
        finish()
        ocl.reset_transfer_stats()
        gpu(*dev_args)
        finish()
        st = dict(ocl.TRANSFER_STATS)
        t_cpu = median_time(lambda: cpu(*args), repeat=reps)
        t_gpu = timed_ocl(gpu, *dev_args, repeat=reps)
        rows.append([label, f"{t_cpu * 1e3:.1f} us", f"{t_gpu * 1e3:.1f} us", str(st["scalar_reads"]),
                     str(st["to_device"] + st["to_host"])])
    return rows


def bench_sum(n: int, reps: int) -> list[list[str]]:
    x = np.random.default_rng(0).random(n).astype(np.float32)
    s = fg.jit(fnp.sum, backend="opencl")
    np.testing.assert_allclose(np.asarray(s(x)), np.sum(x, dtype=np.float64), rtol=1e-5)
    (xr,) = resident(x)
    t_np = median_time(lambda: np.sum(x), repeat=reps)
    t_cl = timed_ocl(s, xr, repeat=reps)
    return [["numpy.sum", f"{t_np * 1e3:.2f} ms", "1.00"],
            ["jit opencl, resident", f"{t_cl * 1e3:.2f} ms", f"{t_np / t_cl:.2f}"]]


def bench_mlp(reps: int) -> list[list[str]]:
    params, x, y = mlp_problem()
    cpu = fg.jit(sgd_step)
    gpu = fg.jit(sgd_step, backend="opencl")
    t0 = time.perf_counter()
    p_gpu, _ = gpu(params, x, y)
    finish()
    t_compile = time.perf_counter() - t0
    p_np, _ = numpy_step(params, x, y)
    np.testing.assert_allclose(np.asarray(p_gpu[0]["w"]), p_np[0]["w"], rtol=1e-3, atol=1e-4)
    state = {"cpu": [dict(p) for p in params], "np": [dict(p) for p in params], "gpu": p_gpu}
    xr, yr = resident(x, y)

    def run_cpu():
        state["cpu"], _ = cpu(state["cpu"], x, y)

    def run_np():
        state["np"], _ = numpy_step(state["np"], x, y)

    def run_gpu():
        state["gpu"], loss = gpu(state["gpu"], xr, yr)
        finish()

    run_cpu()
    t_np = median_time(run_np, repeat=reps)
    t_cpu = median_time(run_cpu, repeat=reps)
    t_gpu = median_time(run_gpu, repeat=reps)
    exe = gpu.lower(state["gpu"], xr, yr).compiled.executable
    return [["numpy hand-written fwd/bwd", f"{t_np * 1e3:.1f} ms", "1.00"],
            ["fungraph jit cpu", f"{t_cpu * 1e3:.1f} ms", f"{t_np / t_cpu:.2f}"],
            [f"jit opencl, params resident ({exe.kernel_count} kernels)", f"{t_gpu * 1e3:.1f} ms",
             f"{t_np / t_gpu:.2f}"],
            ["jit opencl first call (compile)", f"{t_compile * 1e3:.0f} ms", ""],
            ["opencl arena / jit plan arena", f"{exe.arena_bytes / 2**20:.1f} MiB",
             f"{exe.plan.arena_bytes / 2**20:.1f} MiB"]]


def bench_transfers() -> list[list[str]]:
    f = fg.jit(lambda x: fnp.tanh(x) * 2.0, backend="opencl")
    g = fg.jit(lambda x: fnp.sum(x * x), backend="opencl")
    x = np.ones(1 << 16, np.float32)
    g(f(x))
    rows = []
    for label, call in (("f(x) from numpy", lambda: f(x)),
                        ("g(f(y)) with y on the device", lambda: g(f(y))),
                        ("np.asarray(g(f(y)))", lambda: np.asarray(g(f(y))))):
        y = f(x)
        finish()
        ocl.reset_transfer_stats()
        call()
        finish()
        st = ocl.TRANSFER_STATS
        rows.append([label, str(st["to_device"]), str(st["to_host"])])
    return rows


SECTIONS = ("chain", "matmul", "sum", "mlp", "loops", "transfers")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=SECTIONS, action="append", help="run only these sections")
    args = ap.parse_args()
    only = set(args.only or SECTIONS)
    reps = 3 if args.quick else 7
    dev = ocl.get_device().info
    print(f"device: {dev.name} ({dev.platform}); fp64: {dev.fp64}; max work-group {dev.max_work_group_size}; "
          f"local memory {dev.local_mem_size // 1024} KiB\n")
    n = 10_000_000
    if "chain" in only:
        print(f"fused 10-op multiply/add chain, float32, {n:,} elements")
        print(table(bench_chain(n, chain_muladd, numpy_muladd_out, reps), ["", "time", "speed-up vs eager"]))
        print(f"\nfused chain with tanh/exp/sqrt/sin (13 ops), float32, {n:,} elements")
        print(table(bench_chain(n, chain_transcendental, numpy_transcendental_out, reps),
                    ["", "time", "speed-up vs eager"]))
    if "matmul" in only:
        print("\nmatmul float32 (numpy and OpenCL timed alternately, best of each)")
        print(table(bench_matmul((1024, 1000), reps), ["", "time", "rate", "vs numpy"]))
    if "sum" in only:
        print(f"\nsum of {n:,} float32")
        print(table(bench_sum(n, reps), ["", "time", "speed-up"]))
    if "mlp" in only:
        print("\nMLP training step 784-1024-1024-10, batch 256, float32")
        print(table(bench_mlp(3 if args.quick else 5), ["", "time", "speed-up vs numpy"]))
    if "loops" in only:
        print("\nloops on the device, per iteration (256-element float32 carry)")
        print(table(bench_loops(reps), ["", "jit cpu", "jit opencl", "scalar reads", "array copies"]))
    if "transfers" in only:
        print("\nhost<->device transfers per call")
        print(table(bench_transfers(), ["", "to device", "to host"]))


if __name__ == "__main__":
    main()
