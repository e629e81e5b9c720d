"""``fungraph.memory``: the planner's public module, as docs/memory.md shows it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import memory

DOC = Path(__file__).resolve().parents[1] / "docs" / "memory.md"


def test_memory_module_exports_the_planner_and_its_verifiers() -> None:
    from fungraph.interpreters import memory as graph_planner
    from fungraph.interpreters import offsets

    assert fg.memory is memory
    assert memory.plan_memory is graph_planner.plan_memory and memory.verify_plan is graph_planner.verify_plan
    assert memory.plan_offsets is offsets.plan_offsets and memory.verify_offsets is offsets.verify_offsets
    assert sorted(memory.__all__) == sorted(n for n in dir(memory) if not n.startswith("_"))


def test_the_docs_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    blocks = [b for b in blocks if "from fungraph import memory" in b]
    assert len(blocks) == 1
    exec(compile(blocks[0], str(DOC), "exec"), {})


def test_plans_from_the_module_verify_and_a_broken_one_is_rejected() -> None:
    graph = fg.make_graph(lambda x: fnp.exp(fnp.sin(x) + fnp.cos(x)) * 3.0)(np.ones((32, 32)))
    plan = memory.plan_memory(graph, strategy="auto")
    memory.verify_plan(graph, plan)
    buffers = [v for v, p in plan.placements.items() if p.kind == "buffer"]
    assert len(buffers) >= 2
    overlapping = dict(plan.placements)
    for v in buffers:
        overlapping[v] = dataclasses.replace(overlapping[v], offset=0, start=0, end=len(graph.eqns))
    with pytest.raises(ValueError, match="overlap in memory"):
        memory.verify_plan(graph, dataclasses.replace(plan, placements=overlapping))
    intervals = [(0, 3, 64), (1, 2, 32), (2, 5, 64), (4, 6, 16)]
    for strategy in memory.STRATEGIES:
        packed = memory.plan_offsets(intervals, strategy, time_budget_s=0.1)
        memory.verify_offsets(intervals, packed.offsets)
        assert packed.arena_bytes >= memory.lower_bound_bytes(intervals)
    with pytest.raises(ValueError, match="overlap in memory"):
        memory.verify_offsets(intervals, [0, 0, 0, 0])
