"""The memory planner on whole models: ResNet-50, InceptionV3, MobileNetV2, an MNIST CNN step.

    python benchmarks/bench_memory_models.py [--quick] [--svg PATH]

For each model (``benchmarks/models.py``; ``--quick``: the reduced configurations) prints:

1. the graph and its plan: equations staged and after optimisation, the sum of all
   intermediates (what a run without reuse allocates), the largest scratch block (a conv's
   gathered taps and product), the arena, the liveness lower bound (scratch included) and
   the pinned bytes (inputs, weights, outputs), in MB (10^6 bytes);
2. first-call compile time per phase: trace, optimise, plan, prepare (seconds);
3. evaluation: eager (the function called on numpy arrays, op by op) against jit (medians of
   7 calls each, timed alternately), and peak memory measured with ``tracemalloc``: eager, a
   jit call with its arena already allocated (steady state), and a fresh executable (arena
   allocation + one call);
4. the arena and the liveness bound under each execution order ``jit`` tries (the traced
   order, Owl's post-order DFS, memory-aware greedy list scheduling; ``jit`` keeps the best);
5. the arena over the lower bound when the jitted graph's intervals are re-planned with
   each interval strategy (``plan_memory(graph, strategy=s)``, with the CPU engine's
   scratch rule, as ``jit`` plans), with the planning time.

``--svg PATH`` writes the memory timeline of the MNIST CNN training step's plan.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import peak_traced_bytes, table  # noqa: E402
from models import MODELS, ModelSpec  # noqa: E402

import fungraph as fg  # noqa: E402
from fungraph.backends.cpu import CpuExecutable, scratch_bytes  # noqa: E402
from fungraph.interpreters.memory import MemoryPlan, plan_memory, verify_plan  # noqa: E402
from fungraph.jit import clear_caches  # noqa: E402
from fungraph.stages import Lowered  # noqa: E402

MB = 1e6
STRATEGIES = ("owl_blocks", "greedy_size", "greedy_breadth", "interference", "search", "auto")
#: Owl's published eager -> graph peak memory for the same models (MB, batch 1).
OWL = {"resnet50": (1309.9, 397.07), "inception_v3": (625.76, 230.10)}


def _copy(args: tuple) -> tuple:
    """Fresh numpy copies of every leaf (donated inputs are overwritten by a jit call)."""
    return fg.tree_map(np.array, args)


def _config(spec: ModelSpec, quick: bool) -> str:
    cfg = spec.reduced if quick else spec.full
    return ",".join(f"{k}={v}" for k, v in cfg.items())


def _bytes(n: float) -> str:
    return f"{n / MB:.2f}"


def _no_reuse_bytes(plan: MemoryPlan) -> int:
    """Bytes that need storage of their own without reuse: every value produced in the arena
    (buffers and in-place results; views excluded) and every scratch block."""
    own = sum(p.size for p in plan.placements.values() if p.kind in ("buffer", "inplace"))
    return own + sum(p.size for p in plan.scratch.values())


def _interleaved_medians(a: Callable[[], object], b: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median seconds of ``a`` and of ``b``, timed alternately so that both see the same load
    (this machine's 2 cores are shared: numpy's threaded BLAS slows down a lot under load)."""
    a()
    b()
    ta, tb = [], []
    for _ in range(repeat):
        for fn, out in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return statistics.median(ta), statistics.median(tb)


def _n_buffers(plan: MemoryPlan) -> int:
    return sum(p.kind == "buffer" for p in plan.placements.values())


class Result:
    """Everything measured for one model."""

    def __init__(self, spec: ModelSpec, quick: bool) -> None:
        self.spec = spec
        self.quick = quick
        self.fn, self.args = spec.build(0, reduced=quick)
        clear_caches()
        self.jitted = fg.jit(self.fn, donate_argnums=spec.donate_argnums)
        t0 = time.perf_counter()
        self.lowered: Lowered = self.jitted.lower(*self.args)
        self.lower_seconds = time.perf_counter() - t0
        verify_plan(self.lowered.graph, self.lowered.plan, self.lowered.compiled.executable.donated)

    # -- compile ----------------------------------------------------------------------
    def compile_row(self) -> list[str]:
        sec = self.lowered.compiled.seconds
        trace = self.lower_seconds - sum(sec.values())
        return [self.spec.name, f"{trace:.3f}", f"{sec['optimise']:.3f}", f"{sec['plan']:.3f}",
                f"{sec['prepare']:.3f}", f"{self.lower_seconds:.3f}"]

    def plan_row(self) -> list[str]:
        low = self.lowered
        plan = low.plan
        own = _no_reuse_bytes(plan)
        return [self.spec.name, _config(self.spec, self.quick), str(len(low.staged.eqns)), str(len(low.graph.eqns)),
                str(_n_buffers(plan)), _bytes(plan.unplanned_bytes), _bytes(own), _bytes(plan.scratch_bytes),
                _bytes(plan.arena_bytes),
                _bytes(plan.lower_bound_bytes), f"{plan.arena_bytes / plan.unplanned_bytes:.3f}",
                f"{own / plan.arena_bytes:.1f}x", _bytes(plan.pinned_bytes),
                f"{(own + plan.pinned_bytes) / (plan.arena_bytes + plan.pinned_bytes):.2f}x"]

    # -- evaluation -------------------------------------------------------------------
    def eval_row(self) -> list[str]:
        fn, args, jitted = self.fn, self.args, self.jitted
        eager_out = fn(*args)
        jit_out = jitted(*_copy(args))
        for a, b in zip(fg.tree_leaves(eager_out), fg.tree_leaves(jit_out)):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
        state = {"args": _copy(args)}

        def run_jit() -> None:
            out = jitted(*state["args"])
            if self.spec.donate_argnums:  # a training step: feed the new params back in
                state["args"] = (out[0], *state["args"][1:])

        t_eager, t_jit = _interleaved_medians(lambda: fn(*args), run_jit, repeat=7)
        peak_eager = peak_traced_bytes(lambda: fn(*args))
        peak_call = peak_traced_bytes(run_jit)
        low = self.lowered
        donated = self.jitted._donated_mask(args, len(fg.tree_leaves(args)))
        leaves = fg.tree_leaves(_copy(args))
        peak_fresh = peak_traced_bytes(lambda: CpuExecutable(low.graph, low.plan, donated).run(leaves))
        owl = OWL.get(self.spec.name)
        owl_cell = f"{owl[0] / owl[1]:.2f}x" if owl else "-"
        return [self.spec.name, f"{t_eager * 1e3:.1f}", f"{t_jit * 1e3:.1f}",
                f"{t_eager / t_jit:.2f}", _bytes(peak_eager), _bytes(peak_call), _bytes(peak_fresh),
                f"{peak_eager / peak_call:.2f}x", f"{peak_eager / peak_fresh:.2f}x", owl_cell]

    # -- execution order ------------------------------------------------------------
    def schedule_row(self) -> list[str]:
        from fungraph.interpreters.optimize import optimize
        from fungraph.interpreters.schedule import SCHEDULES

        graph = optimize(self.lowered.staged)[0]
        donated = self.jitted._donated_mask(self.args, len(fg.tree_leaves(self.args)))
        cells = []
        for order in SCHEDULES.values():
            plan = plan_memory(order(graph), donated, scratch_bytes=scratch_bytes)
            cells += [_bytes(plan.arena_bytes), _bytes(plan.lower_bound_bytes)]
        chosen = self.lowered.plan.arena_bytes
        return [self.spec.name, *cells, _bytes(chosen)]

    # -- strategies -------------------------------------------------------------------
    def strategy_row(self) -> list[str]:
        graph = self.lowered.graph
        donated = self.jitted._donated_mask(self.args, len(fg.tree_leaves(self.args)))
        cells = []
        winner = ""
        for s in STRATEGIES:
            plan = plan_memory(graph, donated, strategy=s, scratch_bytes=scratch_bytes)
            verify_plan(graph, plan, donated)
            over = 100.0 * (plan.arena_bytes / plan.lower_bound_bytes - 1) if plan.lower_bound_bytes else 0.0
            cells.append(f"+{over:.2f}% ({plan.planning_seconds:.2f}s)")
            if s == "auto":
                winner = plan.strategy
        plan = self.lowered.plan
        return [self.spec.name, str(_n_buffers(plan)), _bytes(plan.lower_bound_bytes), *cells, winner]


def write_svg(path: Path, quick: bool) -> None:
    from fungraph import viz

    spec = next(s for s in MODELS if s.name == "mnist_cnn_step")
    fn, args = spec.build(0, reduced=quick)
    low = fg.jit(fn, donate_argnums=spec.donate_argnums).lower(*args)
    batch = args[1].shape[0]
    title = f"memory plan of the MNIST CNN SGD step (batch {batch}, float32)"
    path.write_text(viz.memory_timeline_svg(low.plan, low.graph, title=title))
    print(f"\nwrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="reduced resolutions and widths")
    parser.add_argument("--svg", type=Path, default=None, help="write the MNIST step's memory timeline here")
    args = parser.parse_args()
    t_start = time.perf_counter()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)\n")
    results = []
    for spec in MODELS:
        results.append(Result(spec, args.quick))
    print("== graph and memory plan (MB = 10^6 B)")
    print("   unplanned = every equation output, views included, and every scratch block (MemoryPlan.unplanned_bytes);")
    print("   no-reuse = values with storage of their own (views excluded) and scratch blocks; scratch = the largest")
    print("   scratch block; bound = liveness lower bound, scratch included; pinned = inputs, weights, outputs")
    print(table([r.plan_row() for r in results],
                ["model", "config", "eqns staged", "eqns opt", "buffers", "unplanned MB", "no-reuse MB", "scratch MB",
                 "arena MB",
                 "bound MB", "arena/unplanned", "no-reuse/arena", "pinned MB", "(no-reuse+pinned)/(arena+pinned)"]))
    print("\n== first call: trace + optimise + plan + prepare (seconds)")
    print(table([r.compile_row() for r in results], ["model", "trace", "optimise", "plan", "prepare", "total"]))
    print("\n== evaluation (ms) and tracemalloc peak (MB): eager op by op vs jit")
    print("   jit call = steady state, arena allocated beforehand; jit fresh = arena allocation + one call")
    print(table([r.eval_row() for r in results],
                ["model", "eager ms", "jit ms", "speedup", "eager peak", "jit call peak", "jit fresh peak",
                 "eager/call", "eager/fresh", "Owl eager/graph"]))
    from fungraph.interpreters.schedule import SCHEDULES

    print("\n== execution order: arena / bound (MB, greedy_size) under each order of the optimised graph")
    print(table([r.schedule_row() for r in results],
                ["model", *[f"{n} {c}" for n in SCHEDULES for c in ("arena", "bound")], "jit arena"]))
    print("\n== interval strategies re-planning each optimised graph: arena over the liveness bound (plan time)")
    print(table([r.strategy_row() for r in results],
                ["model", "buffers", "bound MB", *STRATEGIES, "auto winner"]))
    if args.svg is not None:
        write_svg(args.svg, args.quick)
    print(f"\ntotal {time.perf_counter() - t_start:.1f} s; load average at the end: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
