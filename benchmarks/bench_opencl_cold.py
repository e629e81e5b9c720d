"""The cold first call of the MLP training step (784-1024-1024-10, batch 256, float32) on
OpenCL: each run is a new process with empty fungraph caches, timed from the first call to its
result; "cold" runs also get an empty ``POCL_CACHE_DIR`` (PoCL compiles everything), "PoCL
cache warm" runs reuse the previous run's. Reports medians of wall time, the process's CPU
seconds and its children's (PoCL's ``ld`` runs and the compile helpers,
``FUNGRAPH_OPENCL_BUILD_WORKERS``), where the time went (trace, optimise and lower; the
program's ``clBuildProgram``; the warm-up launches, which compile each kernel's work-group
function; the rest of the call), the kernel functions and programs compiled, and the load
average: on a loaded machine wall times swing with the load, CPU seconds much less.

``--priority`` runs each child in a session of its own whose autogroup has the scheduler's
highest weight (Linux; needs root or ``CAP_SYS_NICE``), so that on a machine shared with other
work the two cores look about as a quiet machine's would. ``--kernels`` adds one cold run
without helpers that times each warm-up launch (the compile of one work-group function).

    python benchmarks/bench_opencl_cold.py [--runs N] [--workers N] [--priority] [--kernels]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, os, sys, time
sys.path.insert(0, {bench!r})
import numpy as np
import fungraph as fg
from bench_jit import mlp_problem, sgd_step
from fungraph.backends.opencl import running
from fungraph.backends.opencl.program import ENGINE_STATS
launches = []
if {per_kernel!r}:
    plain_launch, plain_warm = running.Runner._launch, running.Runner.warm
    def timed_launch(self, op):
        t = time.perf_counter()
        plain_launch(self, op)
        self.dev.queue.finish()
        launches.append((op[1].function_name, op[4][0][1], time.perf_counter() - t))
    def timed_warm(self, jobs=None):
        running.Runner._launch = timed_launch
        try:
            return plain_warm(self, jobs)
        finally:
            running.Runner._launch = plain_launch
    running.Runner.warm = timed_warm
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
                  "warm": exe.warm_seconds, "lower": exe.compile_seconds - exe.build_seconds - exe.warm_seconds,
                  "rest": wall - exe.compile_seconds, "kernels": exe.kernel_count,
                  "functions": ENGINE_STATS.get("kernels_built", 0),
                  "programs": ENGINE_STATS.get("programs_built", 0),
                  "helpers": ENGINE_STATS.get("kernels_compiled_in_helpers", 0),
                  "shared": ENGINE_STATS.get("kernels_shared", 0), "load": os.getloadavg()[0],
                  "launches": launches}}))
"""


def _highest_weight() -> None:
    """In the child, before it runs: a session of its own, its autogroup at nice -20."""
    os.setsid()
    with open("/proc/self/autogroup", "w") as f:
        f.write("-20")


def run_child(pocl_cache: str, workers: str | None, priority: bool = False, per_kernel: bool = False) -> dict:
    env = dict(os.environ, POCL_CACHE_DIR=pocl_cache,
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("FUNGRAPH_OPENCL_CACHE_DIR", None)
    if workers is not None:
        env["FUNGRAPH_OPENCL_BUILD_WORKERS"] = workers
    code = CHILD.format(bench=str(ROOT / "benchmarks"), per_kernel=per_kernel)
    preexec: Callable[[], None] | None = _highest_weight if priority else None
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900,
                          preexec_fn=preexec)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", default=None, help="FUNGRAPH_OPENCL_BUILD_WORKERS for the children")
    parser.add_argument("--priority", action="store_true",
                        help="children at the scheduler's highest weight (their own autogroup at nice -20)")
    parser.add_argument("--kernels", action="store_true",
                        help="one more cold run without helpers, timing each kernel's first launch")
    args = parser.parse_args()
    rows: dict[str, list[dict]] = {"cold": [], "PoCL cache warm": []}
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="pocl-") as cache:
            rows["cold"].append(run_child(cache, args.workers, args.priority))
            rows["PoCL cache warm"].append(run_child(cache, args.workers, args.priority))
    print("MLP step 784-1024-1024-10, batch 256: first call in a new process (medians of "
          f"{args.runs} runs{', highest scheduler weight' if args.priority else ''})")
    print(f"{'':18}{'wall s':>8}{'cpu s':>8}{'children s':>12}{'lower s':>9}{'build s':>9}{'warm-up s':>11}"
          f"{'rest s':>8}{'functions':>11}{'helper kernels':>16}{'load':>7}")
    for name, runs in rows.items():
        def med(key: str, runs: list[dict] = runs) -> float:
            return statistics.median(r[key] for r in runs)
        print(f"{name:18}{med('wall'):8.2f}{med('cpu'):8.2f}{med('children'):12.2f}{med('lower'):9.2f}"
              f"{med('build'):9.2f}{med('warm'):11.2f}{med('rest'):8.2f}{med('functions'):11.0f}"
              f"{med('helpers'):16.0f}{med('load'):7.1f}")
    print("wall s of each run: " + "; ".join(f"{name} " + ", ".join(f"{r['wall']:.2f}" for r in runs)
                                            for name, runs in rows.items()))
    if args.kernels:
        with tempfile.TemporaryDirectory(prefix="pocl-") as cache:
            run = run_child(cache, "0", args.priority, per_kernel=True)
        print(f"\ncold, no helpers: build {run['build']:.2f} s, then each warm-up launch (work-group size; "
              f"a kernel function's first launch compiles it), load {run['load']:.1f}:")
        for name, local, seconds in run["launches"]:
            print(f"  {name:28}{str(tuple(local)):>14}{seconds * 1e3:9.1f} ms")
        print(f"  {'all':28}{'':>14}{sum(t for _, _, t in run['launches']) * 1e3:9.1f} ms")


if __name__ == "__main__":
    main()
