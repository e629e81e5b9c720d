"""Benchmark the interval memory planners on the recorded lifetime traces.

Usage: ``python benchmarks/bench_memory_intervals.py [--quick] [--data DIR]``

For every ``*.csv`` under the data folder (``id,lower,upper,size``; ``upper`` exclusive)
prints the interval count, the lower bound (largest total size live at one step) and,
for each strategy, the arena as percent over that bound with its planning time.  Greedy
strategies report the median of 3 runs; ``search`` runs once with a budget of 30 s on
the adversarial ``minimalloc_*`` files and 5 s elsewhere (``--quick``: 5 s and 1 s);
``auto`` runs once with its defaults (``--quick``: capped at the search budget).
Every plan is checked with ``verify_offsets``.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fungraph.interpreters.offsets import OffsetPlan, plan_offsets, verify_offsets  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "bench-data" / "memory"
GREEDY = ("owl_blocks", "greedy_size", "greedy_breadth", "interference")


def load(path: Path) -> list[tuple[int, int, int]]:
    """Read ``id,lower,upper,size`` rows as ``(start, end, size)`` triples."""
    with path.open() as fh:
        return [(int(r["lower"]), int(r["upper"]), int(r["size"])) for r in csv.DictReader(fh)]


def run(intervals: list[tuple[int, int, int]], strategy: str, repeats: int, budget: float | None) -> OffsetPlan:
    """Plan ``repeats`` times, verify, and return the plan carrying the median time."""
    plans = [plan_offsets(intervals, strategy, time_budget_s=budget) for _ in range(repeats)]
    verify_offsets(intervals, plans[0].offsets)
    median = statistics.median(p.seconds for p in plans)
    best = min(plans, key=lambda p: p.arena_bytes)
    return OffsetPlan(best.offsets, best.arena_bytes, best.lower_bound_bytes, best.strategy, median)


def cell(plan: OffsetPlan) -> str:
    """Format one result as ``+pct% (seconds)``."""
    pct = 100.0 * (plan.arena_bytes / plan.lower_bound_bytes - 1) if plan.lower_bound_bytes else 0.0
    return f"+{pct:.2f}% ({plan.seconds:.2f}s)"


def main(argv: list[str] | None = None) -> int:
    """Run every strategy on every CSV and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short search budgets")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of *.csv traces")
    args = parser.parse_args(argv)
    files = sorted(args.data.glob("*.csv"))
    if not files:
        print(f"no CSV files under {args.data}", file=sys.stderr)
        return 1
    columns = [*GREEDY, "search", "auto"]
    print("| file | n | lower bound | " + " | ".join(columns) + " | auto winner |")
    print("|---" * (len(columns) + 4) + "|")
    for path in files:
        intervals = load(path)
        adversarial = path.name.startswith("minimalloc")
        budget = (5.0 if adversarial else 1.0) if args.quick else (30.0 if adversarial else 5.0)
        plans = {name: run(intervals, name, 3, None) for name in GREEDY}
        plans["search"] = run(intervals, "search", 1, budget)
        plans["auto"] = run(intervals, "auto", 1, budget if args.quick else None)
        bound = plans["auto"].lower_bound_bytes
        cells = " | ".join(cell(plans[name]) for name in columns)
        print(f"| {path.stem} | {len(intervals)} | {bound:,} | {cells} | {plans['auto'].strategy} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
