"""jit on the OpenCL backend against numpy and the CPU engine.

    python benchmarks/bench_opencl.py [--quick]

Prints: a fused 10-op float32 chain on 10M elements (multiply/add only, and one with
transcendentals), square matmuls (512 to 2048), the sum of 10M floats, the MLP training step
784-1024-1024-10 at batch 256, compile times, and host<->device transfers per call of a
device-resident chain. OpenCL times include waiting for the queue to finish; "resident"
rows pass device arrays in and keep the result on the device, "from host" rows pass numpy
arrays in and read the result back. Rows compared against numpy are timed in turns with a
quiet pause before each (``_util.interleaved_times``): OpenBLAS's threads spin for ~0.1 s
after each call and would otherwise take a core from whatever is timed next.

Beside them, on the same run when installed: JAX's jit on the CPU (``block_until_ready``;
``FUNGRAPH_BENCH_JAX=cuda`` puts it on a CUDA GPU instead, beside an OpenCL GPU picked with
``FUNGRAPH_OPENCL_DEVICE``) and
tinygrad's ``TinyJit`` on its OpenCL device (``CL``, PoCL here) and its CPU device (it needs
``clang``), warmed, with inputs realized on the device and a device sync in every timed call.
A missing library or device skips its rows with the reason printed. Neither is a fungraph
dependency (``pip install jax tinygrad``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import JAX_PLATFORM, interleaved_samples, interleaved_times, median_time, ms, paired_ratio, table, try_jax  # noqa: E402
from bench_jit import jax_sgd_step, mlp_problem, muladd_chain, numpy_step, sgd_step  # noqa: E402
from bench_jit import numpy_muladd_out as numpy_muladd_out_n  # noqa: E402

import fungraph as fg  # noqa: E402
import fungraph.numpy as fnp  # noqa: E402
from fungraph.backends import opencl as ocl  # noqa: E402
from fungraph.backends.opencl.device import ALLOC_STATS  # noqa: E402
from fungraph.jit import clear_caches  # noqa: E402

SKIPPED: list[str] = []     # why rows are missing, printed under the next table
JAX_LABEL = f"jax jit ({JAX_PLATFORM.upper()})"
TINYGRAD_DEVICES = (("CL", "tinygrad TinyJit, CL (PoCL)"), ("CPU", "tinygrad TinyJit, CPU"))


def finish() -> None:
    ocl.get_device().queue.finish()


#: Independent 16-wide accumulators of the peak kernel: as many AVX2 registers as the 6x16
#: matmul kernel's, so neither spills and each FMA pipe always has a chain ready.
PEAK_CHAINS = 6


def fma_peak(iters: int = 1_000_000, repeat: int = 7) -> float:
    """The device's multiply-add rate in FLOP/s, best of ``repeat``: a kernel whose work-items
    only run ``PEAK_CHAINS`` independent float16 multiply-add chains in registers (contracted to
    FMA instructions; no memory traffic), eight one-item work-groups per compute unit on a CPU,
    2048 items per unit on a GPU. The roof every matmul row is measured against."""
    import pyopencl as cl

    dev = ocl.get_device()
    chains = range(PEAK_CHAINS)
    src = "\n".join([
        "__kernel void peak(__global float* out, const float a, const int iters) {",
        "  const float16 b = (float16)(a);",
        *[f"  float16 c{i} = (float16)(get_global_id(0) + {i});" for i in chains],
        "  for (int i = 0; i < iters; ++i) {",
        *[f"    c{i} = c{i} * b + b;" for i in chains],
        "  }",
        f"  const float16 s = {' + '.join(f'c{i}' for i in chains)};",
        "  out[get_global_id(0)] = s.s0 + s.sf;",
        "}"])
    kernel = cl.Program(dev.context, src).build().peak
    cpu = dev.info.is_cpu
    items = (8 if cpu else 2048) * dev.info.compute_units
    out = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, 4 * items)

    def run() -> None:
        kernel(dev.queue, (items,), (1,) if cpu else None, out, np.float32(0.999), np.int32(iters))
        dev.queue.finish()

    run()
    best = min(_seconds(run) for _ in range(repeat))
    return items * iters * PEAK_CHAINS * 16 * 2 / best


def _seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def try_tinygrad():
    """The ``tinygrad`` module, or None (the reason goes to ``SKIPPED``)."""
    try:
        import tinygrad
    except Exception as err:  # noqa: BLE001 - any import failure means no rows
        SKIPPED.append(f"tinygrad rows skipped: {type(err).__name__}: {err}")
        return None
    return tinygrad


def jax_rows(jax, label: str, fun, args, t_ref: float, reps: int, rate=None) -> list[list[str]]:
    """One row for ``jax.jit(fun)`` on ``JAX_PLATFORM``: median of ``reps`` calls, each waited for."""
    if jax is None:
        return []
    jf = jax.jit(fun)
    jargs = [jax.numpy.asarray(a) for a in args]
    jax.block_until_ready(jf(*jargs))
    t = median_time(lambda: jax.block_until_ready(jf(*jargs)), repeat=reps)
    return [_row(label, t, t_ref, rate)]


def tinygrad_runs(tg, fun, args, want, tol: float) -> list[tuple[str, object]]:
    """``(label, run)`` per tinygrad device: ``TinyJit(fun)`` with ``args`` realized on the
    device, warmed (TinyJit captures on its second call) and checked against ``want``; ``run``
    makes one call followed by the device's ``synchronize()``."""
    if tg is None:
        return []
    from tinygrad import Device, Tensor, TinyJit

    runs = []
    for dev, label in TINYGRAD_DEVICES:
        try:
            xs = [Tensor(np.ascontiguousarray(a), device=dev).realize() for a in args]
            jf = TinyJit(lambda *t: fun(*t).realize())
            for _ in range(3):
                out = jf(*xs)
            got = out.numpy()
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
            sync = Device[dev].synchronize

            def run(jf=jf, xs=xs, sync=sync):
                jf(*xs)
                sync()

            runs.append((label, run))
        except Exception as err:  # noqa: BLE001 - a device that does not work here skips its row
            SKIPPED.append(f"{label} skipped: {type(err).__name__}: {str(err).splitlines()[0][:120]}")
    return runs


def tinygrad_rows(tg, fun, args, want, tol: float, t_ref: float, reps: int, rate=None) -> list[list[str]]:
    """A row per tinygrad device (:func:`tinygrad_runs`): the median of ``reps`` calls."""
    return [_row(label, median_time(run, repeat=reps), t_ref, rate)
            for label, run in tinygrad_runs(tg, fun, args, want, tol)]


def _row(label: str, t: float, t_ref: float, rate) -> list[str]:
    unit = ms(t)
    if rate is None:
        return [label, unit, f"{t_ref / t:.2f}"]
    return [label, unit, f"{rate / t / 1e9:.0f} GFLOP/s", f"{t_ref / t:.2f}"]


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


def transcendental(xp, x, a, b):
    """The transcendental chain in the array namespace ``xp`` (fungraph.numpy or jax.numpy)."""
    y = xp.tanh(x * a + b)
    y = xp.exp(y * b - a)
    y = xp.sqrt(y * y + b)
    y = xp.sin(y) * a + b
    return y * y


def chain_transcendental(x, a, b):
    return transcendental(fnp, x, a, b)


def tinygrad_transcendental(x, a: float, b: float):
    """``chain_transcendental`` with tinygrad's ``Tensor`` methods."""
    y = (x * a + b).tanh()
    y = (y * b - a).exp()
    y = (y * y + b).sqrt()
    y = y.sin() * a + b
    return y * y


def jax_transcendental(x, a, b):
    import jax.numpy as jnp

    return transcendental(jnp, x, a, b)


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


def bench_chain(n: int, fun, numpy_out, reps: int, jax=None, tg=None, jax_fun=None,
                tg_fun=None) -> list[list[str]]:
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

        def run_res():
            gpu(xr, ar, br)
            finish()

        t = interleaved_times({"np": lambda: fun(x, a, b), "out": lambda: numpy_out(x, a, b, out),
                               "cpu": lambda: cpu(x, a, b), "res": run_res,
                               "host": lambda: np.asarray(gpu(x, a, b))}, rounds=reps)
        t_np, t_out, t_cpu, t_res, t_host = (t[k] for k in ("np", "out", "cpu", "res", "host"))
    exe = gpu.lower(x, a, b).compiled.executable
    rows_native = []
    if any(e.primitive.name in ("sin", "cos", "exp") for e in exe.ordered.eqns):
        os.environ["FUNGRAPH_OPENCL_NATIVE_MATH"] = "1"
        clear_caches()
        fast = fg.jit(fun, backend="opencl")
        with np.errstate(all="ignore"):
            got = np.asarray(fast(x, a, b))
            t_nat = timed_ocl(fast, xr, ar, br, repeat=reps)
        del os.environ["FUNGRAPH_OPENCL_NATIVE_MATH"]
        clear_caches()
        err = float(np.max(np.abs(got - want) / (1 + np.abs(want))))
        rows_native = [[f"jit opencl, resident, native_sin/cos/exp (max err {err:.1e})", ms(t_nat),
                        f"{t_np / t_nat:.2f}"]]
    with np.errstate(all="ignore"):
        others = jax_rows(jax, JAX_LABEL, jax_fun or fun, (x, a, b), t_np, reps)
        tg_chain = tg_fun or fun
        runs = tinygrad_runs(tg, lambda t: tg_chain(t, float(a), float(b)), (x,), want, 1e-4)
        if runs:   # tinygrad in turns with our resident call, both back to back within a turn
            both = interleaved_times({"ours": run_res, **dict(runs)}, rounds=reps, number=5)
            others += [_row(f"{label}", both[label], t_np, None) for label, _ in runs]
            others.append(_row("jit opencl, resident, in turns with tinygrad", both["ours"], t_np, None))
    return [["numpy eager", ms(t_np), "1.00"],
            ["numpy out=", ms(t_out), f"{t_np / t_out:.2f}"],
            ["fungraph jit cpu", ms(t_cpu), f"{t_np / t_cpu:.2f}"],
            [f"jit opencl, resident ({exe.kernel_count} kernel)", ms(t_res), f"{t_np / t_res:.2f}"],
            ["jit opencl, from host + read back", ms(t_host), f"{t_np / t_host:.2f}"],
            ["jit opencl first call (compile)", f"{t_compile * 1e3:.0f} ms", ""]] + rows_native + others


def bench_matmul(sizes: tuple[int, ...], reps: int, jax=None, tg=None, peak: float | None = None) -> list[list[str]]:
    """numpy, OpenCL and JAX timed in turns (:func:`interleaved_samples`: medians, a quiet
    pause before each turn so OpenBLAS's spinning threads are idle); tinygrad (1024 only)
    after. "won" counts the rounds whose median beat numpy's in the same round; "paired" is
    the median of the per-round speed-ups over numpy with its 90% bootstrap interval
    (:func:`paired_ratio`). ``peak``: the FMA rate (FLOP/s) each row's rate is a share of."""
    rows = []

    def row(label: str, t: float, t_ref: float, flops: int) -> list[str]:
        cells = _row(label, t, t_ref, flops)
        return cells[:3] + [f"{flops / t / peak:.0%}" if peak else ""] + cells[3:]

    for n in sizes:
        rng = np.random.default_rng(0)
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        mm = fg.jit(lambda a, b: a @ b, backend="opencl")
        np.testing.assert_allclose(np.asarray(mm(a, b)), a @ b, rtol=1e-3, atol=1e-3)
        ar, br = resident(a, b)
        c = np.empty_like(a)

        def run_cl(mm=mm, ar=ar, br=br):
            mm(ar, br)
            finish()

        fns = {"numpy": lambda a=a, b=b, c=c: np.matmul(a, b, out=c), "opencl": run_cl}
        if jax is not None:
            jf = jax.jit(lambda a, b: a @ b)
            ja, jb = jax.numpy.asarray(a), jax.numpy.asarray(b)
            fns["jax"] = lambda jf=jf, ja=ja, jb=jb: jax.block_until_ready(jf(ja, jb))
        number = 3
        samples = interleaved_samples(fns, rounds=reps, number=number)
        t = {name: statistics.median(ts) for name, ts in samples.items()}
        per_round = {name: [statistics.median(ts[i:i + number]) for i in range(0, len(ts), number)]
                     for name, ts in samples.items()}

        def won(name: str) -> list[str]:
            wins = sum(x < y for x, y in zip(per_round[name], per_round["numpy"]))
            mid, lo, hi = paired_ratio(per_round["numpy"], per_round[name])
            return [f"{wins}/{len(per_round[name])}", f"{mid:.2f} [{lo:.2f}, {hi:.2f}]"]

        flops = 2 * n ** 3
        rows += [row(f"{n}x{n} numpy (BLAS)", t["numpy"], t["numpy"], flops) + ["", ""],
                 row(f"{n}x{n} jit opencl, resident", t["opencl"], t["numpy"], flops) + won("opencl")]
        if jax is not None:
            rows.append(row(f"{n}x{n} {JAX_LABEL}", t["jax"], t["numpy"], flops) + won("jax"))
        if n == 1024:
            for r in tinygrad_rows(tg, lambda a, b: a @ b, (a, b), a @ b, 1e-3, t["numpy"], reps, flops):
                share = f"{float(r[2].split()[0]) * 1e9 / peak:.0%}" if peak and r[2].endswith("GFLOP/s") else ""
                rows.append([f"{n}x{n} {r[0]}"] + r[1:3] + [share] + r[3:] + ["", ""])
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


def bench_sum(n: int, reps: int, jax=None, tg=None) -> list[list[str]]:
    x = np.random.default_rng(0).random(n).astype(np.float32)
    s = fg.jit(fnp.sum, backend="opencl")
    np.testing.assert_allclose(np.asarray(s(x)), np.sum(x, dtype=np.float64), rtol=1e-5)
    (xr,) = resident(x)

    def run_cl():
        s(xr)
        finish()

    t = interleaved_times({"np": lambda: np.sum(x), "cl": run_cl}, rounds=reps)
    t_np, t_cl = t["np"], t["cl"]
    rows = [["numpy.sum", ms(t_np), "1.00"],
            ["jit opencl, resident", ms(t_cl), f"{t_np / t_cl:.2f}"]]
    rows += jax_rows(jax, JAX_LABEL, lambda x: x.sum(), (x,), t_np, reps)
    return rows + tinygrad_rows(tg, lambda t: t.sum(), (x,), np.sum(x, dtype=np.float64), 1e-5, t_np, reps)


def bench_scatter(reps: int, jax=None) -> list[list[str]]:
    """The embedding gradient ``zeros(vocab, d).at[tokens].add(g)`` with the tokens passed in,
    so the OpenCL engine only sees them on the device (and sorts them there)."""
    rows = []
    for vocab, d, tokens in ((10_000, 64, 2_048), (50_000, 64, 8_192), (100_000, 1, 100_000)):
        rng = np.random.default_rng(0)
        tok = rng.integers(0, vocab, tokens).astype(np.int32)
        g = rng.standard_normal((tokens, d)).astype(np.float32)

        def scatter(g, tok, vocab=vocab, d=d):
            return fnp.at(fnp.zeros((vocab, d), np.float32))[tok].add(g)

        def numpy_scatter(g=g, tok=tok, vocab=vocab, d=d):
            out = np.zeros((vocab, d), np.float32)
            np.add.at(out, tok, g)
            return out

        cpu, gpu = fg.jit(scatter), fg.jit(scatter, backend="opencl")
        np.testing.assert_allclose(np.asarray(gpu(g, tok)), numpy_scatter(), rtol=1e-5, atol=1e-5)
        gr, tr = resident(g, tok)

        def run_cl(gpu=gpu, gr=gr, tr=tr):
            gpu(gr, tr)
            finish()

        t = interleaved_times({"np": numpy_scatter, "cpu": lambda cpu=cpu, g=g, tok=tok: cpu(g, tok),
                               "cl": run_cl}, rounds=reps)
        label = f"{vocab:,} x {d} rows, {tokens:,} indices"
        rows += [[f"{label}: numpy.add.at", ms(t["np"]), "1.00"],
                 [f"{label}: jit cpu", ms(t["cpu"]), f"{t['np'] / t['cpu']:.2f}"],
                 [f"{label}: jit opencl, resident", ms(t["cl"]), f"{t['np'] / t['cl']:.2f}"]]
        if jax is not None:
            def jax_scatter(g, tok, vocab=vocab, d=d):
                return jax.numpy.zeros((vocab, d), np.float32).at[tok].add(g)

            rows += jax_rows(jax, f"{label}: {JAX_LABEL}", jax_scatter, (g, tok), t["np"], reps)
    return rows


def bench_mlp(reps: int, jax=None) -> list[list[str]]:
    params, x, y = mlp_problem()
    cpu = fg.jit(sgd_step)
    gpu = fg.jit(sgd_step, backend="opencl")
    donating = fg.jit(sgd_step, backend="opencl", donate_argnums=0)
    t0 = time.perf_counter()
    p_gpu, _ = gpu(params, x, y)
    finish()
    t_compile = time.perf_counter() - t0
    p_np, _ = numpy_step(params, x, y)
    np.testing.assert_allclose(np.asarray(p_gpu[0]["w"]), p_np[0]["w"], rtol=1e-3, atol=1e-4)
    state = {"cpu": [dict(p) for p in params], "np": [dict(p) for p in params], "gpu": p_gpu,
             "donated": donating(params, x, y)[0]}
    xr, yr = resident(x, y)

    def run_cpu():
        state["cpu"], _ = cpu(state["cpu"], x, y)

    def run_np():
        state["np"], _ = numpy_step(state["np"], x, y)

    def run_gpu():
        state["gpu"], loss = gpu(state["gpu"], xr, yr)
        finish()

    def run_donated():
        state["donated"], loss = donating(state["donated"], xr, yr)
        finish()

    fns = {"np": run_np, "cpu": run_cpu, "gpu": run_gpu}
    if jax is not None:
        jstep = jax.jit(jax_sgd_step(jax), donate_argnums=0)
        jstate = {"p": jax.tree_util.tree_map(jax.numpy.asarray, params)}
        jx, jy = jax.numpy.asarray(x), jax.numpy.asarray(y)

        def run_jax():
            jstate["p"], loss = jstep(jstate["p"], jx, jy)
            jax.block_until_ready(loss)
            jax.block_until_ready(jstate["p"])

        fns["jax"] = run_jax
    run_donated()
    created = ALLOC_STATS["buffers_created"]
    for _ in range(3):
        run_donated()
    created = ALLOC_STATS["buffers_created"] - created
    fns["donated"] = run_donated
    samples = interleaved_samples(fns, rounds=reps)
    t = {name: statistics.median(ts) for name, ts in samples.items()}
    best = {name: ms(min(ts)) for name, ts in samples.items()}
    exe = gpu.lower(state["gpu"], xr, yr).compiled.executable
    n_don = len(donating.lower(state["donated"], xr, yr).compiled.executable.donation)
    t_np = t["np"]
    labels = {"np": "numpy hand-written fwd/bwd", "cpu": "fungraph jit cpu",
              "gpu": f"jit opencl, params resident ({exe.kernel_count} kernels)",
              "donated": f"jit opencl, params donated ({n_don} outputs in place, {created} buffers created in 3 calls)",
              "jax": f"{JAX_LABEL}, params donated"}
    rows = [[label, ms(t[name]), best[name], f"{t_np / t[name]:.2f}"]
            for name, label in labels.items() if name in t]
    return rows + [
            ["jit opencl first call (compile)", f"{t_compile * 1e3:.0f} ms", "", ""],
            ["opencl arena / jit plan arena", f"{exe.arena_bytes / 2**20:.1f} MiB",
             f"{exe.plan.arena_bytes / 2**20:.1f} MiB", ""]]


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


SECTIONS = ("chain", "matmul", "sum", "scatter", "mlp", "loops", "transfers")
#: Rounds of the matmul section: a few per cent separate the engines there, and this machine's
#: round-to-round noise is larger, so 7 rounds could not tell a tie from a win.
MATMUL_ROUNDS = 21


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=SECTIONS, action="append", help="run only these sections")
    args = ap.parse_args()
    only = set(args.only or SECTIONS)
    reps = 3 if args.quick else 7
    dev = ocl.get_device().info
    jax = try_jax()
    if jax is None:
        SKIPPED.append("jax rows skipped: jax is not installed")
    tg = try_tinygrad()
    print(f"device: {dev.name} ({dev.platform}); fp64: {dev.fp64}; max work-group {dev.max_work_group_size}; "
          f"local memory {dev.local_mem_size // 1024} KiB")
    print(f"jax: {jax.__version__ if jax else 'not installed'}; tinygrad: {_version(tg)}\n")
    n = 10_000_000
    if "chain" in only:
        print(f"fused 10-op multiply/add chain, float32, {n:,} elements")
        print(table(bench_chain(n, chain_muladd, numpy_muladd_out, reps, jax, tg), ["", "time", "speed-up vs eager"]))
        _print_skipped()
        print(f"\nfused chain with tanh/exp/sqrt/sin (13 ops), float32, {n:,} elements")
        print(table(bench_chain(n, chain_transcendental, numpy_transcendental_out, reps, jax, tg, jax_transcendental,
                                tinygrad_transcendental), ["", "time", "speed-up vs eager"]))
        _print_skipped()
    if "matmul" in only:
        peak = fma_peak()
        print("\nmatmul float32 (numpy, OpenCL, JAX timed in turns after quiet pauses, medians; tinygrad after); "
              f"\"of peak\": of the device's FMA rate, {peak / 1e9:.0f} GFLOP/s (fma_peak)")
        print(table(bench_matmul((1024, 1000, 512, 2048), 7 if args.quick else MATMUL_ROUNDS, jax, tg, peak),
                    ["", "time", "rate", "of peak", "vs numpy", "won", "paired (90% CI)"]))
        _print_skipped()
    if "sum" in only:
        print(f"\nsum of {n:,} float32")
        print(table(bench_sum(n, reps, jax, tg), ["", "time", "speed-up"]))
        _print_skipped()
    if "scatter" in only:
        print("\nscatter-add (an embedding gradient), float32, indices passed in")
        print(table(bench_scatter(reps, jax), ["", "time", "speed-up vs numpy"]))
    if "mlp" in only:
        print("\nMLP training step 784-1024-1024-10, batch 256, float32")
        print(table(bench_mlp(3 if args.quick else 15, jax), ["", "median", "best", "speed-up vs numpy"]))
    if "loops" in only:
        print("\nloops on the device, per iteration (256-element float32 carry)")
        print(table(bench_loops(reps), ["", "jit cpu", "jit opencl", "scalar reads", "array copies"]))
    if "transfers" in only:
        print("\nhost<->device transfers per call")
        print(table(bench_transfers(), ["", "to device", "to host"]))


def _version(mod) -> str:
    if mod is None:
        return "not installed"
    from importlib.metadata import version

    return version("tinygrad")


def _print_skipped() -> None:
    for line in dict.fromkeys(SKIPPED):
        print(f"  ({line})")
    SKIPPED.clear()


if __name__ == "__main__":
    main()
