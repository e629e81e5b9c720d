"""jit on the CPU engine against numpy (and JAX when installed).

    python benchmarks/bench_jit.py [--quick]

Prints: dispatch overhead, the 20-op elementwise chain on 10M float32, the MLP training step,
first-call compile of a 10,000-equation chain and of its gradient (per-phase times), the
structural cache, the verifier, and incremental evaluation.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import interleaved_samples, median_time, paired_ratio, peak_traced_bytes, table, try_jax  # noqa: E402

import fungraph as fg  # noqa: E402
import fungraph.numpy as fnp  # noqa: E402
from fungraph.backends import backend_factory  # noqa: E402
from fungraph.backends.native import BUILD_STATS  # noqa: E402
from fungraph.backends.native.toolchain import CACHE_ENV  # noqa: E402
from fungraph.jit import clear_caches, compile_graph  # noqa: E402
from fungraph.testing.models import mlp_params as _mlp_params  # noqa: E402
from fungraph.testing.models import sgd_step  # noqa: E402


def bench_dispatch(jax) -> list[list[str]]:
    x = np.arange(10, dtype=np.float32)
    f = fg.jit(lambda x: x * 2 + 1)
    f(x)
    t_fg = median_time(lambda: f(x), repeat=9, number=2000)
    t_np = median_time(lambda: x * 2 + 1, repeat=9, number=2000)
    rows = [["numpy eager (2 ops)", f"{t_np * 1e6:.2f} us", "1.00"],
            ["fungraph jit (cache hit)", f"{t_fg * 1e6:.2f} us", f"{t_fg / t_np:.2f}"]]
    if jax is not None:
        jf = jax.jit(lambda x: x * 2 + 1)
        xj = jax.numpy.asarray(x)
        jf(xj).block_until_ready()
        t_j = median_time(lambda: jf(xj).block_until_ready(), repeat=9, number=2000)
        rows.append(["jax jit (cache hit)", f"{t_j * 1e6:.2f} us", f"{t_j / t_np:.2f}"])
        rows.append(["fungraph / jax", "", f"{t_fg / t_j:.2f}"])
    return rows


def muladd_chain(x, a, b, pairs=10):
    """``2 * pairs`` alternating multiplies and adds (any numpy-like ``x``)."""
    for i in range(pairs):
        x = x * a + b if i % 2 == 0 else x * b + a
    return x


def numpy_muladd_out(x, a, b, out, pairs=10):
    """``muladd_chain`` in numpy with one preallocated output (``out=``)."""
    np.multiply(x, a, out=out)
    np.add(out, b, out=out)
    for i in range(1, pairs):
        np.multiply(out, b if i % 2 else a, out=out)
        np.add(out, a if i % 2 else b, out=out)
    return out


def chain20(x, a, b):
    return muladd_chain(x, a, b, 10)


def bench_chain(n: int, jax) -> list[list[str]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    a, b = np.float32(0.99), np.float32(0.01)
    out = np.empty_like(x)

    def numpy_out():
        return numpy_muladd_out(x, a, b, out, 10)

    f = fg.jit(chain20)
    f(x, a, b)
    t_alloc = median_time(lambda: chain20(x, a, b), repeat=5)
    t_out = median_time(numpy_out, repeat=5)
    t_fg = median_time(lambda: f(x, a, b), repeat=5)
    np.testing.assert_allclose(f(x, a, b), chain20(x, a, b), rtol=1e-5, atol=1e-6)
    factory = backend_factory("cpu")
    saved, factory.fusion = factory.fusion, None
    clear_caches()
    f_plain = fg.jit(chain20)
    f_plain(x, a, b)
    t_plain = median_time(lambda: f_plain(x, a, b), repeat=5)
    factory.fusion = saved
    clear_caches()
    rows = [["numpy allocating", f"{t_alloc * 1e3:.1f} ms", "1.00"],
            ["numpy out=", f"{t_out * 1e3:.1f} ms", f"{t_alloc / t_out:.2f}x faster"],
            ["fungraph jit cpu", f"{t_fg * 1e3:.1f} ms", f"{t_alloc / t_fg:.2f}x faster"],
            ["fungraph jit cpu without fusion regions", f"{t_plain * 1e3:.1f} ms", f"{t_alloc / t_plain:.2f}x faster"]]
    if jax is not None:
        jf = jax.jit(chain20)
        xj = jax.numpy.asarray(x)
        jf(xj, a, b).block_until_ready()
        t_j = median_time(lambda: jf(xj, a, b).block_until_ready(), repeat=5)
        rows.append(["jax jit", f"{t_j * 1e3:.1f} ms", f"{t_alloc / t_j:.2f}x faster"])
    return rows


def numpy_step(params, x, y):
    acts, pres = [x], []
    for layer in params[:-1]:
        pres.append(acts[-1] @ layer["w"] + layer["b"])
        acts.append(np.maximum(pres[-1], 0))
    logits = acts[-1] @ params[-1]["w"] + params[-1]["b"]
    m = logits.max(-1, keepdims=True)
    e = np.exp(logits - m)
    s = e.sum(-1, keepdims=True)
    loss = -np.mean(np.sum(y * (logits - m - np.log(s)), -1))
    g = (e / s - y) / x.shape[0]
    new = [None] * len(params)
    for i in range(len(params) - 1, -1, -1):
        gw, gb = acts[i].T @ g, g.sum(0)
        if i:
            g = (g @ params[i]["w"].T) * (pres[i - 1] > 0)
        new[i] = {"w": params[i]["w"] - np.float32(0.01) * gw, "b": params[i]["b"] - np.float32(0.01) * gb}
    return new, loss


def jax_sgd_step(jax):
    """The same SGD step as ``sgd_step``, written for JAX (for side-by-side timings)."""
    import jax.numpy as jnp

    def jloss(params, x, y):
        h = x
        for layer in params[:-1]:
            h = jax.nn.relu(h @ layer["w"] + layer["b"])
        logits = h @ params[-1]["w"] + params[-1]["b"]
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits), axis=-1))

    def step(params, x, y):
        loss, grads = jax.value_and_grad(jloss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss

    return step


def mlp_problem(sizes=(784, 1024, 1024, 10), batch=256, seed=1):
    """The MLP benchmark's parameters and one batch of inputs and one-hot labels."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)]
    return _mlp_params(list(sizes)), x, y


def bench_mlp(quick: bool, jax) -> list[list[str]]:
    """The jitted step (donated parameters) beside hand-written numpy, eager fungraph and JAX's
    jitted step: numpy, jit and JAX timed in turns (:func:`interleaved_samples`), medians,
    with the load average of the run."""
    params, x, y = mlp_problem()
    step = fg.jit(sgd_step, donate_argnums=0)
    state = {"p": [dict(p) for p in params]}

    def run_jit():
        state["p"], _ = step(state["p"], x, y)

    run_jit()
    nps = {"p": [dict(p) for p in params]}

    def run_np():
        nps["p"], _ = numpy_step(nps["p"], x, y)

    # correctness: one step from the same start agrees
    p1, l1 = numpy_step(params, x, y)
    p2, l2 = fg.jit(sgd_step)(params, x, y)
    np.testing.assert_allclose(p2[0]["w"], p1[0]["w"], rtol=1e-4, atol=1e-5)
    fns = {"numpy": run_np, "jit": run_jit}
    if jax is not None:
        import jax.numpy as jnp

        jstep = jax.jit(jax_sgd_step(jax), donate_argnums=0)
        jp = {"p": jax.tree_util.tree_map(jnp.asarray, params)}

        def run_jax():
            jp["p"], loss = jstep(jp["p"], x, y)
            loss.block_until_ready()

        run_jax()
        fns["jax"] = run_jax
    load = os.getloadavg()[0]
    samples = interleaved_samples(fns, rounds=3 if quick else 7, number=3)
    load = (load + os.getloadavg()[0]) / 2
    t = {name: statistics.median(ts) for name, ts in samples.items()}
    t_np, t_jit = t["numpy"], t["jit"]
    t_eager = median_time(lambda: sgd_step(params, x, y), repeat=2 if quick else 3)
    peak_eager = peak_traced_bytes(lambda: sgd_step(params, x, y))
    peak_jit = peak_traced_bytes(run_jit)
    plan = step.lower(state["p"], x, y).plan
    rows = [["numpy hand-written fwd/bwd", f"{t_np * 1e3:.1f} ms", "1.00", "-"],
            ["fungraph eager", f"{t_eager * 1e3:.1f} ms", f"{t_np / t_eager:.2f}", f"{peak_eager / 2**20:.1f} MiB"],
            ["fungraph jit cpu (donated)", f"{t_jit * 1e3:.1f} ms", f"{t_np / t_jit:.2f}",
             f"{peak_jit / 2**20:.1f} MiB"]]
    if jax is not None:
        ratio, lo, hi = paired_ratio(samples["jit"], samples["jax"])
        rows.append(["jax jit (donated)", f"{t['jax'] * 1e3:.1f} ms", f"{t_np / t['jax']:.2f}", "-"])
        rows.append(["fungraph jit / jax (per round; 90% interval)", f"{ratio:.2f}", f"{lo:.2f}-{hi:.2f}",
                     f"load {load:.1f}"])
    mib = 2**20
    rows.append(["plan of the jit step", f"arena {plan.arena_bytes / mib:.1f} MiB",
                 f"bound {plan.lower_bound_bytes / mib:.1f} MiB", f"unplanned {plan.unplanned_bytes / mib:.1f} MiB"])
    return rows


def chain_fn(x, w, b, n):
    for _ in range(n):
        x = fnp.tanh(x @ w + b)
    return fnp.sum(x)


def bench_compile(quick: bool, jax) -> list[list[str]]:
    """First calls of the chain and its gradient, each in an empty native build cache (a fresh
    ``FUNGRAPH_NATIVE_CACHE``, so a region would be compiled, not loaded), with JAX's first call
    of the same function in the same run."""
    with tempfile.TemporaryDirectory() as folder:
        saved = os.environ.get(CACHE_ENV)
        os.environ[CACHE_ENV] = folder
        try:
            return _compile_rows(quick, jax)
        finally:
            if saved is None:
                del os.environ[CACHE_ENV]
            else:
                os.environ[CACHE_ENV] = saved


def _compile_rows(quick: bool, jax) -> list[list[str]]:
    n = 1000 if quick else 3334
    x = np.full((8, 8), 0.1, np.float32)
    w = (np.eye(8) * 0.5).astype(np.float32)
    b = np.zeros(8, np.float32)
    rows = []
    for label, fun in (("chain", lambda x, w, b: chain_fn(x, w, b, n)),
                       ("grad of chain", fg.grad(lambda x, w, b: chain_fn(x, w, b, n), argnums=1))):
        clear_caches()
        builds = BUILD_STATS["compiles"]
        t0 = time.perf_counter()
        g = fg.make_graph(fun)(x, w, b)
        t1 = time.perf_counter()
        c = compile_graph(g)
        t2 = time.perf_counter()
        c.executable.run([x, w, b])
        t3 = time.perf_counter()
        neq = len(g.eqns)
        total = t3 - t0
        per = lambda t: f"{t / neq * 1e6:.1f}"  # noqa: E731
        row = [label, str(neq), f"{t1 - t0:.2f}", f"{c.seconds['optimise']:.2f}", f"{c.seconds['plan']:.2f}",
               f"{t3 - t2 + c.seconds['prepare']:.2f}", f"{total:.2f}",
               f"{per(t1 - t0)}/{per(c.seconds['optimise'])}/{per(c.seconds['plan'])}",
               str(BUILD_STATS["compiles"] - builds)]
        if jax is not None:
            jf = jax.jit(lambda x, w, b: _jax_chain(jax, x, w, b, n)) if label == "chain" else jax.jit(
                jax.grad(lambda x, w, b: _jax_chain(jax, x, w, b, n), argnums=1))
            t0 = time.perf_counter()
            jax.block_until_ready(jf(x, w, b))
            tj = time.perf_counter() - t0
            row += [f"{tj:.2f}", f"{tj / total:.1f}x"]
        rows.append(row)
        t0 = time.perf_counter()
        g2 = fg.make_graph(fun)(x, w, b)
        hit = compile_graph(g2)
        t_hit = time.perf_counter() - t0
        t_key = t_hit - 0
        assert hit is c
        rows.append(["  re-created closure: trace + cache hit", "", f"{t_hit:.2f}", "", "", "", f"{t_hit:.2f}",
                     f"optimise+plan / hit = {(c.seconds['optimise'] + c.seconds['plan']) / max(t_key, 1e-9):.1f}x"]
                    + [""] * (len(row) - 8))
    return rows


def _jax_chain(jax, x, w, b, n):
    for _ in range(n):
        x = jax.numpy.tanh(x @ w + b)
    return jax.numpy.sum(x)


def bench_structural_cache() -> list[list[str]]:
    x = np.full((8, 8), 0.1, np.float32)
    w = (np.eye(8) * 0.5).astype(np.float32)
    b = np.zeros(8, np.float32)
    # cleared before tracing: clear_caches empties the signature intern table, so a graph traced
    # before it never matches one traced after
    clear_caches()
    g = fg.make_graph(lambda x, w, b: chain_fn(x, w, b, 3334))(x, w, b)
    t0 = time.perf_counter()
    compile_graph(g)
    full = time.perf_counter() - t0
    g2 = fg.make_graph(lambda x, w, b: chain_fn(x, w, b, 3334))(x, w, b)
    t0 = time.perf_counter()
    compile_graph(g2)
    hit = time.perf_counter() - t0
    return [["optimise + plan + prepare (10,003 eqns)", f"{full * 1e3:.1f} ms"],
            ["cache hit on a freshly traced equal graph (hash + compare)", f"{hit * 1e3:.2f} ms"],
            ["ratio", f"{full / hit:.0f}x"]]


def bench_verify(quick: bool) -> list[list[str]]:
    """``Graph.verify`` on chains of 1,000 and 10,000 equations (linear: error texts are made
    only when a check fails)."""
    x = np.full((8, 8), 0.1, np.float32)
    w = (np.eye(8) * 0.5).astype(np.float32)
    b = np.zeros(8, np.float32)
    rows = []
    for n in (333, 3334) if quick else (333, 3334, 33334):
        g = fg.make_graph(lambda x, w, b, n=n: chain_fn(x, w, b, n))(x, w, b)
        t = median_time(g.verify, repeat=3)
        rows.append([f"{len(g.eqns):,} eqns", f"{t * 1e3:.1f} ms", f"{t / len(g.eqns) * 1e6:.1f} us"])
    return rows


def bench_incremental() -> list[list[str]]:
    rng = np.random.default_rng(0)
    big = [rng.standard_normal((200, 200)) for _ in range(8)]
    small = rng.standard_normal(200)

    def f(*args):
        *mats, v = args
        acc = 0.0
        for m in mats:
            acc = acc + fnp.sum(fnp.tanh(m @ m))
        return acc + fnp.sum(fnp.sin(v))

    inc = fg.jit(f, incremental=True)
    full = fg.jit(f)
    inc(*big, small)
    full(*big, small)
    state = {"v": small}

    def step_inc():
        state["v"] = state["v"] + 1.0
        return inc(*big, state["v"])

    t_full = median_time(lambda: full(*big, small + 1.0), repeat=5)
    t_inc = median_time(step_inc, repeat=5)
    exe = inc.last_incremental()
    return [["jit, full recompute", f"{t_full * 1e3:.2f} ms", f"{len(exe.graph.eqns)} eqns"],
            ["jit(incremental=True), one small input changed", f"{t_inc * 1e3:.2f} ms",
             f"{exe.recomputed} eqns recomputed"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    jax = try_jax()
    print(f"jax: {jax.__version__ if jax else 'not installed'}\n")
    print("== dispatch of a cached jit(lambda x: x * 2 + 1) on 10 float32")
    print(table(bench_dispatch(jax), ["what", "per call", "ratio to numpy"]))
    n = 1_000_000 if args.quick else 10_000_000
    print(f"\n== 20-op multiply/add chain on {n:,} float32")
    print(table(bench_chain(n, jax), ["what", "median", "vs numpy allocating"]))
    print("\n== MLP 784-1024-1024-10 training step, batch 256, float32, SGD")
    print(table(bench_mlp(args.quick, jax), ["what", "median", "speed vs numpy", "peak traced memory"]))
    print("\n== first call: trace + optimise + plan + native build + run, empty native build cache (seconds; "
          "per-eqn us: trace/optimise/plan)")
    header = ["function", "eqns", "trace", "optimise", "plan", "prepare+run", "total", "us/eqn", "native builds"]
    jax_cols = ["jax first call", "jax / fungraph"] if jax else []
    print(table(bench_compile(args.quick, jax), header + jax_cols))
    if not args.quick:
        print("\n== structural cache")
        print(table(bench_structural_cache(), ["what", "time"]))
    print("\n== Graph.verify")
    print(table(bench_verify(args.quick), ["graph", "median", "per eqn"]))
    print("\n== incremental evaluation")
    print(table(bench_incremental(), ["what", "median", "work"]))


if __name__ == "__main__":
    main()
