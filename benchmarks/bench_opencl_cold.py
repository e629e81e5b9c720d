"""The cold first call of the MLP training step (784-1024-1024-10, batch 256, float32) on
OpenCL: each run is a new process with empty fungraph caches, timed from the first call to its
result; "cold" runs also get an empty ``POCL_CACHE_DIR`` (PoCL compiles everything), "PoCL
cache warm" runs reuse the previous run's. Reports medians of wall time, the process's CPU
seconds and its children's (PoCL's ``ld`` runs and the compile helpers,
``FUNGRAPH_OPENCL_BUILD_WORKERS``), the build and warm-up split, and the load average: on a
loaded machine wall times swing with the load, CPU seconds much less.

    python benchmarks/bench_opencl_cold.py [--runs N] [--workers N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, os, sys, time
sys.path.insert(0, {bench!r})
import numpy as np
import fungraph as fg
from bench_jit import mlp_problem, sgd_step
from fungraph.backends.opencl.program import ENGINE_STATS
params, x, y = mlp_problem()
f = fg.jit(sgd_step, backend="opencl")
c0, t0, k0 = time.process_time(), time.perf_counter(), os.times()
p, loss = f(params, x, y)
np.asarray(loss)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
try:
    from fungraph.backends.opencl.compile_pool import close_pool
    close_pool()   # reaps the helpers, so that their CPU time is counted below
except ImportError:
    pass
k1 = os.times()
children = k1.children_user + k1.children_system - k0.children_user - k0.children_system
exe = f.lower(params, x, y).compiled.executable
print(json.dumps({{"wall": wall, "cpu": cpu, "children": children, "build": exe.build_seconds,
                  "warm": exe.warm_seconds,
                  "kernels": exe.kernel_count, "helpers": ENGINE_STATS.get("kernels_compiled_in_helpers", 0),
                  "shared": ENGINE_STATS.get("kernels_shared", 0), "load": os.getloadavg()[0]}}))
"""


def run_child(pocl_cache: str, workers: str | None) -> dict:
    env = dict(os.environ, POCL_CACHE_DIR=pocl_cache,
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("FUNGRAPH_OPENCL_CACHE_DIR", None)
    if workers is not None:
        env["FUNGRAPH_OPENCL_BUILD_WORKERS"] = workers
    code = CHILD.format(bench=str(ROOT / "benchmarks"))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", default=None, help="FUNGRAPH_OPENCL_BUILD_WORKERS for the children")
    args = parser.parse_args()
    rows: dict[str, list[dict]] = {"cold": [], "PoCL cache warm": []}
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="pocl-") as cache:
            rows["cold"].append(run_child(cache, args.workers))
            rows["PoCL cache warm"].append(run_child(cache, args.workers))
    print("MLP step 784-1024-1024-10, batch 256: first call in a new process (medians of "
          f"{args.runs} runs)")
    print(f"{'':18}{'wall s':>8}{'cpu s':>8}{'children s':>12}{'build s':>9}{'warm-up s':>11}"
          f"{'helper kernels':>16}{'load':>7}")
    for name, runs in rows.items():
        def med(key: str, runs: list[dict] = runs) -> float:
            return statistics.median(r[key] for r in runs)
        print(f"{name:18}{med('wall'):8.2f}{med('cpu'):8.2f}{med('children'):12.2f}{med('build'):9.2f}"
              f"{med('warm'):11.2f}"
              f"{med('helpers'):16.0f}{med('load'):7.1f}")


if __name__ == "__main__":
    main()
