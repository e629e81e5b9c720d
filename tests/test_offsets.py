"""Tests for the interval (offset) memory planner in ``fungraph.interpreters.offsets``."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fungraph.interpreters.offsets import STRATEGIES, OffsetPlan, lower_bound_bytes, plan_offsets, verify_offsets

GREEDY = ("owl_blocks", "greedy_size", "greedy_breadth", "interference")


def training_step_trace(seed: int, layers: int = 60) -> list[tuple[int, int, int]]:
    """A compiler-like record of one training step of a chain of layers: each weight and its
    gradient live to the end, each activation from its layer's forward step to its backward
    step, and a few temporaries for one step around each."""
    rng = np.random.default_rng(seed)
    end = 2 * layers + 2
    out = []
    for i in range(layers):
        weight = int(rng.choice([4, 64, 1024, 4096, 16384])) * 4
        forward, backward = i + 1, end - 1 - i
        out += [(0, end, weight), (forward, backward + 1, int(rng.integers(1, 64)) * 1024)]
        for step in (forward, backward):
            out += [(step, step + 1, int(rng.integers(1, 256)) * 64) for _ in range(int(rng.integers(1, 4)))]
        out.append((backward, end, weight))
    return out


def tiled_instance(seed: int, n: int, steps: int = 64, height: int = 1 << 20) -> list[tuple[int, int, int]]:
    """minimalloc's kind of adversarial instance: the rectangle ``steps`` x ``height`` cut into
    ``n`` buffers by random guillotine cuts (the largest piece cut each time), so a perfect
    packing into ``height`` bytes exists while greedy placement by size misses it."""
    rng = np.random.default_rng(seed)
    pieces = [(0, steps, 0, height)]
    while len(pieces) < n:
        start, stop, lo, hi = pieces.pop(int(np.argmax([(e - s) * (h - b) for s, e, b, h in pieces])))
        if (rng.random() < 0.5 and stop - start > 1) or hi - lo < 2:
            cut = int(rng.integers(start + 1, stop))
            pieces += [(start, cut, lo, hi), (cut, stop, lo, hi)]
        else:
            cut = int(rng.integers(lo + 1, hi))
            pieces += [(start, stop, lo, cut), (start, stop, cut, hi)]
    return [(start, stop, hi - lo) for start, stop, lo, hi in pieces]


def brute_overlap(intervals, offsets) -> bool:
    """O(n^2) reference: do two time-overlapping buffers share bytes?"""
    for i, (s1, e1, z1) in enumerate(intervals):
        for j in range(i):
            s2, e2, z2 = intervals[j]
            live = z1 and z2 and s1 < e1 and s2 < e2
            if live and s1 < e2 and s2 < e1 and offsets[i] < offsets[j] + z2 and offsets[j] < offsets[i] + z1:
                return True
    return False


@st.composite
def interval_sets(draw):
    n = draw(st.integers(0, 60))
    out = []
    for _ in range(n):
        start = draw(st.integers(0, 40))
        end = start + draw(st.integers(0, 15))
        size = draw(st.one_of(st.integers(0, 64), st.sampled_from([1, 8, 100, 4096])))
        out.append((start, end, size))
    return out


# ----------------------------------------------------------------- properties


@settings(max_examples=60)
@given(intervals=interval_sets(), alignment=st.sampled_from([1, 4, 16]))
def test_every_strategy_is_valid(intervals, alignment):
    plans = {name: plan_offsets(intervals, name, alignment=alignment, time_budget_s=0.05) for name in STRATEGIES}
    bound = lower_bound_bytes(intervals, alignment=alignment)
    for name, plan in plans.items():
        assert isinstance(plan, OffsetPlan)
        assert len(plan.offsets) == len(intervals)
        verify_offsets(intervals, plan.offsets)
        assert not brute_overlap([(s, e, -(-z // alignment) * alignment) for s, e, z in intervals], plan.offsets)
        assert all(o % alignment == 0 and o >= 0 for o in plan.offsets)
        assert plan.arena_bytes % alignment == 0
        assert plan.lower_bound_bytes == bound
        assert plan.arena_bytes >= bound, name
        for (s, e, z), o in zip(intervals, plan.offsets):
            if z == 0 or e == s:
                assert o == 0
    for name in GREEDY:
        assert plans["auto"].arena_bytes <= plans[name].arena_bytes, name
    assert plans["search"].arena_bytes <= plans["greedy_size"].arena_bytes


@settings(max_examples=40)
@given(intervals=interval_sets())
def test_verify_agrees_with_brute_force(intervals):
    # stack every buffer at the same offset: conflicts exactly when two live buffers meet in time
    offsets = [0] * len(intervals)
    clash = brute_overlap(intervals, offsets)
    if clash:
        with pytest.raises(ValueError):
            verify_offsets(intervals, offsets)
    else:
        verify_offsets(intervals, offsets)


def first_fit_best(intervals) -> int:
    """Smallest arena over every placement order, each buffer at its lowest free offset."""
    best = None
    for order in itertools.permutations(range(len(intervals))):
        placed: list[tuple[int, int, int, int]] = []
        top = 0
        for i in order:
            s, e, z = intervals[i]
            busy = sorted((o, o + w) for ps, pe, o, w in placed if ps < e and s < pe)
            off = 0
            for lo, hi in busy:
                if lo >= off + z:
                    break
                off = max(off, hi)
            placed.append((s, e, off, z))
            top = max(top, off + z)
        best = top if best is None else min(best, top)
    return best or 0


@settings(max_examples=30)
@given(
    intervals=st.lists(
        st.tuples(st.integers(0, 6), st.integers(1, 4), st.integers(1, 9)).map(lambda t: (t[0], t[0] + t[1], t[2])),
        max_size=6,
    )
)
def test_search_reaches_small_optimum(intervals):
    plan = plan_offsets(intervals, "search", time_budget_s=5)
    verify_offsets(intervals, plan.offsets)
    assert plan.arena_bytes <= first_fit_best(intervals)


# -------------------------------------------------------------- hand examples


def test_lower_bound_hand_examples():
    assert lower_bound_bytes([]) == 0
    assert lower_bound_bytes([(0, 1, 5)]) == 5
    # end is exclusive: back-to-back buffers never coexist
    assert lower_bound_bytes([(0, 2, 10), (2, 4, 7)]) == 10
    assert lower_bound_bytes([(0, 3, 10), (2, 4, 7)]) == 17
    assert lower_bound_bytes([(0, 10, 1), (1, 3, 2), (2, 5, 4), (4, 6, 8), (5, 7, 16)]) == 25
    assert lower_bound_bytes([(0, 0, 100), (0, 5, 0), (1, 2, 3)]) == 3
    assert lower_bound_bytes([(0, 2, 3), (1, 3, 5)], alignment=4) == 12


def test_simple_plans_hit_the_bound():
    intervals = [(0, 2, 10), (2, 4, 7), (1, 3, 5)]
    for name in STRATEGIES:
        plan = plan_offsets(intervals, name, time_budget_s=0.1)
        verify_offsets(intervals, plan.offsets)
        assert plan.lower_bound_bytes == 15
    assert plan_offsets(intervals, "greedy_size").arena_bytes == 15
    assert plan_offsets(intervals, "auto").arena_bytes == 15


def test_owl_blocks_grows_and_lays_blocks_end_to_end():
    # b0 and b1 overlap -> two blocks; b2 reuses b1's block and grows it to 30
    plan = plan_offsets([(0, 4, 20), (0, 2, 10), (2, 4, 30)], "owl_blocks")
    assert plan.offsets == (0, 20, 20)
    assert plan.arena_bytes == 50


def test_verify_catches_conflict_and_names_both():
    intervals = [(0, 4, 8), (5, 6, 8), (3, 5, 4)]
    verify_offsets(intervals, [0, 0, 8])
    with pytest.raises(ValueError, match=r"intervals 0 \(0, 4, 8\) at offset 0 and 2 \(3, 5, 4\) at offset 6"):
        verify_offsets(intervals, [0, 0, 6])
    with pytest.raises(ValueError, match="offsets for"):
        verify_offsets(intervals, [0, 0])
    with pytest.raises(ValueError, match="not a non-negative integer"):
        verify_offsets(intervals, [0, 0, -8])


def test_verify_ignores_empty_buffers():
    verify_offsets([(0, 4, 8), (1, 2, 0), (2, 2, 8)], [0, 0, 0])


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ([(0, 1, 2), (0, 1, -1)], r"interval 1 \(0, 1, -1\) has a negative size"),
        ([(3, 1, 2)], r"interval 0 \(3, 1, 2\) ends before it starts"),
        ([(0, 1.5, 2)], r"interval 0 \(0, 1.5, 2\) has a non-integer field"),
        ([(0, 1, "2")], "non-integer"),
        ([(0, 1, True)], "non-integer"),
        ([(0, 1)], "not a \\(start, end, size\\) triple"),
        ([5], "not a \\(start, end, size\\) triple"),
    ],
)
def test_bad_input(bad, fragment):
    with pytest.raises(ValueError, match=fragment):
        plan_offsets(bad, "greedy_size")
    with pytest.raises(ValueError, match=fragment):
        verify_offsets(bad, [0] * len(bad))


def test_bad_options():
    with pytest.raises(ValueError, match="unknown strategy"):
        plan_offsets([(0, 1, 1)], "nope")
    with pytest.raises(ValueError, match="alignment"):
        plan_offsets([(0, 1, 1)], alignment=0)
    with pytest.raises(ValueError, match="time_budget_s"):
        plan_offsets([(0, 1, 1)], time_budget_s=-1)


def test_plan_is_frozen_and_reports_strategy():
    plan = plan_offsets([(0, 2, 4), (1, 3, 4)], "greedy_breadth")
    assert plan.strategy == "greedy_breadth"
    assert plan.seconds >= 0
    with pytest.raises(AttributeError):
        plan.arena_bytes = 1  # type: ignore[misc]
    assert plan_offsets([(0, 2, 4), (1, 3, 4)], "auto").strategy in STRATEGIES


# ------------------------------------------------- generated traces (no external data)


def test_training_step_trace_auto_within_half_percent():
    intervals = training_step_trace(0)
    plan = plan_offsets(intervals, "auto")
    verify_offsets(intervals, plan.offsets)
    assert plan.arena_bytes <= plan.lower_bound_bytes * 1.005
    assert plan.arena_bytes < plan_offsets(intervals, "greedy_size").arena_bytes
    assert plan.seconds < 10


def test_tiled_instance_search_beats_greedy():
    intervals = tiled_instance(3, 150)
    greedy = plan_offsets(intervals, "greedy_size")
    plan = plan_offsets(intervals, "search", time_budget_s=3)
    verify_offsets(intervals, plan.offsets)
    assert plan.lower_bound_bytes == 1 << 20
    assert greedy.arena_bytes > 1.2 * plan.lower_bound_bytes
    assert plan.arena_bytes < 1.10 * plan.lower_bound_bytes
