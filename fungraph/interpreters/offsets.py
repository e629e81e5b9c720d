"""Offset (interval) memory planning for buffers with known lifetimes.

A buffer is a ``(start, end, size)`` triple: ``size`` bytes live during steps
``start .. end - 1``.  A plan gives every buffer a byte offset inside one arena so that
buffers live at the same step never share bytes.  The arena can never be smaller than
the largest total size live at one step (``lower_bound_bytes``); the strategies here
trade planning time for how close they get to that bound.

Strategies (see ``STRATEGIES``):

* ``owl_blocks`` -- Owl's online best-fit reuse of whole blocks (baseline).
* ``greedy_size`` -- greedy by size with best-fit offsets (TFLite / Pisarchyk & Lee).
* ``greedy_breadth`` -- greedy by the breadth of each buffer's busiest step.
* ``interference`` -- libnnc-style: largest first, ties by live interference degree.
* ``search`` -- skyline branch-and-bound with restarts (``offsets_search``).
* ``auto`` -- the cheap greedies, then ``search`` when they are > 0.5% above the bound.
"""

from __future__ import annotations

import bisect
import heapq
import numbers
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .offsets_search import skyline_search

__all__ = ["STRATEGIES", "OffsetPlan", "lower_bound_bytes", "plan_offsets", "verify_offsets"]

STRATEGIES: tuple[str, ...] = (
    "owl_blocks",
    "greedy_size",
    "greedy_breadth",
    "interference",
    "search",
    "auto",
)

#: ``auto`` runs ``search`` only when the best greedy plan exceeds the bound by more.
AUTO_SEARCH_TRIGGER = 0.005
#: ``auto`` stops searching once a plan is within this fraction of the bound.
AUTO_GOOD_ENOUGH = 0.001
#: Interval count above which the default budgets switch to the "large trace" values.
LARGE_N = 2000
#: Default search budgets (seconds): ``search`` alone, and ``auto``'s whole call.
SEARCH_BUDGET_S = 30.0
SEARCH_BUDGET_LARGE_S = 2.0
AUTO_BUDGET_S = 30.0
AUTO_BUDGET_LARGE_S = 1.5


@dataclass(frozen=True)
class OffsetPlan:
    """Result of planning: one offset per interval (input order) plus arena statistics."""

    offsets: tuple[int, ...]
    arena_bytes: int
    lower_bound_bytes: int
    strategy: str
    seconds: float

    @property
    def overhead(self) -> float:
        """Fraction by which the arena exceeds the lower bound (0.0 when equal)."""
        if self.lower_bound_bytes == 0:
            return 0.0
        return self.arena_bytes / self.lower_bound_bytes - 1.0


# --------------------------------------------------------------------------- input


def _as_int(value: object) -> int | None:
    """Return ``value`` as an int if it is an integer (not bool), else None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    return int(value)


def _validate(intervals: Sequence[Sequence[int]]) -> list[tuple[int, int, int]]:
    """Check every triple and return them as plain ints; raise ValueError naming the culprit."""
    out: list[tuple[int, int, int]] = []
    for i, triple in enumerate(intervals):
        try:
            items = tuple(triple)
        except TypeError:
            raise ValueError(f"interval {i} {triple!r} is not a (start, end, size) triple") from None
        if len(items) != 3:
            raise ValueError(f"interval {i} {triple!r} is not a (start, end, size) triple")
        vals = [_as_int(v) for v in items]
        if any(v is None for v in vals):
            raise ValueError(f"interval {i} {triple!r} has a non-integer field")
        start, end, size = vals  # type: ignore[misc]
        if size < 0:
            raise ValueError(f"interval {i} {triple!r} has a negative size")
        if end < start:
            raise ValueError(f"interval {i} {triple!r} ends before it starts")
        out.append((start, end, size))
    return out


@dataclass(frozen=True)
class _Problem:
    """Validated, aligned, numpy form of the live (non-empty) intervals."""

    n_total: int
    idx: np.ndarray  # positions of live intervals in the input
    starts: np.ndarray
    ends: np.ndarray
    sizes: np.ndarray
    lower_bound: int


def _prepare(intervals: Sequence[Sequence[int]], alignment: int) -> _Problem:
    """Validate, round sizes up to ``alignment`` and drop intervals that are never live."""
    if _as_int(alignment) is None or alignment < 1:
        raise ValueError(f"alignment must be a positive integer, got {alignment!r}")
    triples = _validate(intervals)
    arr = np.array(triples, dtype=np.int64).reshape(-1, 3)
    sizes = -(-arr[:, 2] // alignment) * alignment
    keep = (sizes > 0) & (arr[:, 1] > arr[:, 0])
    idx = np.flatnonzero(keep)
    starts, ends, sizes = arr[idx, 0], arr[idx, 1], sizes[idx]
    return _Problem(len(triples), idx, starts, ends, sizes, _max_live(starts, ends, sizes))


def _max_live(starts: np.ndarray, ends: np.ndarray, sizes: np.ndarray) -> int:
    """Largest total size live at one step, by an event sweep (ends before starts)."""
    if len(sizes) == 0:
        return 0
    times = np.concatenate([starts, ends])
    deltas = np.concatenate([sizes, -sizes])
    order = np.lexsort((deltas, times))  # at equal times the frees (negative) come first
    return int(max(0, np.cumsum(deltas[order]).max()))


def lower_bound_bytes(intervals: Sequence[Sequence[int]], *, alignment: int = 1) -> int:
    """Largest total (aligned) size live at any one step: no plan can use less."""
    return _prepare(intervals, alignment).lower_bound


# ------------------------------------------------------------------ verification


def verify_offsets(intervals: Sequence[Sequence[int]], offsets: Sequence[int]) -> None:
    """Raise ValueError naming two intervals that are live together and share bytes.

    Sweeps intervals by start time, keeping the live ones ordered by offset, so each new
    interval is checked only against its two neighbours in memory: O(n log n) plus list
    insertion cost.
    """
    triples = _validate(intervals)
    if len(offsets) != len(triples):
        raise ValueError(f"{len(offsets)} offsets for {len(triples)} intervals")
    offs: list[int] = []
    for i, o in enumerate(offsets):
        v = _as_int(o)
        if v is None or v < 0:
            raise ValueError(f"offset {i} ({o!r}) is not a non-negative integer")
        offs.append(v)
    order = sorted((i for i, (s, e, z) in enumerate(triples) if z > 0 and e > s), key=lambda i: triples[i][0])
    expiry: list[tuple[int, int]] = []  # (end, index) heap of live intervals
    live_offsets: list[tuple[int, int]] = []  # sorted (offset, index) of live intervals

    def clash(a: int, b: int) -> ValueError:
        return ValueError(
            f"intervals {a} {triples[a]} at offset {offs[a]} and {b} {triples[b]} at offset "
            f"{offs[b]} are live at the same time and overlap in memory"
        )

    for i in order:
        start, _, size = triples[i]
        while expiry and expiry[0][0] <= start:
            _, j = heapq.heappop(expiry)
            del live_offsets[bisect.bisect_left(live_offsets, (offs[j], j))]
        key = (offs[i], i)
        pos = bisect.bisect_left(live_offsets, key)
        if pos > 0:
            j = live_offsets[pos - 1][1]
            if offs[j] + triples[j][2] > offs[i]:
                raise clash(j, i)
        if pos < len(live_offsets):
            j = live_offsets[pos][1]
            if offs[i] + size > offs[j]:
                raise clash(i, j)
        live_offsets.insert(pos, key)
        heapq.heappush(expiry, (triples[i][1], i))


# ------------------------------------------------------------- greedy placement


def place_best_fit(starts: np.ndarray, ends: np.ndarray, sizes: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Place buffers in ``order``, each in the smallest free gap among time-overlapping placed ones.

    When no gap between placed buffers fits, the buffer goes just above the highest of them.
    Each step is a vectorised scan over the placed buffers, O(n) numpy work per buffer.
    """
    n = len(sizes)
    offsets = np.zeros(n, dtype=np.int64)
    p_start = np.empty(n, dtype=np.int64)
    p_end = np.empty(n, dtype=np.int64)
    p_off = np.empty(n, dtype=np.int64)
    p_top = np.empty(n, dtype=np.int64)
    k = 0
    for i in order.tolist():
        s, e, z = starts[i], ends[i], sizes[i]
        hit = np.flatnonzero((p_start[:k] < e) & (p_end[:k] > s))
        off = 0
        if len(hit):
            o = p_off[hit]
            srt = np.argsort(o, kind="stable")
            o = o[srt]
            tops = np.maximum.accumulate(p_top[hit][srt])
            gap_lo = np.empty_like(o)
            gap_lo[0] = 0
            gap_lo[1:] = tops[:-1]
            gap = o - gap_lo
            fits = np.flatnonzero(gap >= z)
            if len(fits):
                off = int(gap_lo[fits[np.argmin(gap[fits])]])
            else:
                off = int(tops[-1])
        offsets[i] = off
        p_start[k], p_end[k], p_off[k], p_top[k] = s, e, off, off + z
        k += 1
    return offsets


def _order_by_size(p: _Problem) -> np.ndarray:
    """Size descending, then longer lifetime, then earlier start (TFLite greedy-by-size)."""
    return np.lexsort((p.starts, -(p.ends - p.starts), -p.sizes))


def _busiest_breadth(p: _Problem) -> np.ndarray:
    """For each buffer, the total live size at the busiest step of its lifetime."""
    times = np.unique(np.concatenate([p.starts, p.ends]))
    cs = np.searchsorted(times, p.starts)
    ce = np.searchsorted(times, p.ends)
    delta = np.zeros(len(times) + 1, dtype=np.int64)
    np.add.at(delta, cs, p.sizes)
    np.add.at(delta, ce, -p.sizes)
    live = np.cumsum(delta)[: max(len(times) - 1, 1)]
    # sparse table for range-maximum queries over [cs, ce)
    table = [live]
    width = 1
    while 2 * width <= len(live):
        prev = table[-1]
        table.append(np.maximum(prev[:-width], prev[width:]))
        width *= 2
    length = ce - cs
    level = np.floor(np.log2(length)).astype(np.int64)
    out = np.empty(len(cs), dtype=np.int64)
    for lv in np.unique(level).tolist():
        m = level == lv
        row = table[lv]
        out[m] = np.maximum(row[cs[m]], row[ce[m] - (1 << lv)])
    return out


def _order_by_breadth(p: _Problem) -> np.ndarray:
    """Busiest-step breadth descending, then size, then lifetime (greedy by breadth)."""
    return np.lexsort((p.starts, -(p.ends - p.starts), -p.sizes, -_busiest_breadth(p)))


def _order_by_interference(p: _Problem) -> np.ndarray:
    """libnnc-like order: largest size first, ties by most interference with unassigned buffers.

    The interference degree is dynamic: assigning a buffer lowers the degree of the
    unassigned buffers it overlaps, which changes later tie-breaks among equal sizes.
    """
    n = len(p.sizes)
    s_sorted, e_sorted = np.sort(p.starts), np.sort(p.ends)
    degree = np.searchsorted(s_sorted, p.ends, "left") - np.searchsorted(e_sorted, p.starts, "right") - 1
    unassigned = np.ones(n, dtype=bool)
    by_size = np.lexsort((np.arange(n), -p.sizes))
    order = np.empty(n, dtype=np.int64)
    pos = 0
    # process one group of equal sizes at a time; degrees only matter within a group
    bounds = np.flatnonzero(np.diff(p.sizes[by_size])) + 1
    for group in np.split(by_size, bounds):
        if len(group) == 1:
            i = int(group[0])
            order[pos] = i
            pos += 1
            unassigned[i] = False
            degree[(p.starts < p.ends[i]) & (p.ends > p.starts[i]) & unassigned] -= 1
            continue
        left = group.copy()
        while len(left):
            i = int(left[np.argmax(degree[left])])
            order[pos] = i
            pos += 1
            unassigned[i] = False
            degree[(p.starts < p.ends[i]) & (p.ends > p.starts[i]) & unassigned] -= 1
            left = left[left != i]
    return order


def _owl_blocks(p: _Problem) -> np.ndarray:
    """Owl's engine: reuse whole blocks online, best fit among free blocks, growing if needed.

    Time is walked in start order; a block holds one live tenant at a time.  Blocks are
    laid end to end, so a buffer's offset is the sum of the sizes of the blocks before it.
    """
    n = len(p.sizes)
    block_of = np.zeros(n, dtype=np.int64)
    block_size: list[int] = []
    free: list[tuple[int, int]] = []  # sorted (capacity, block id)
    busy: list[tuple[int, int]] = []  # heap (end, block id)
    starts, ends, sizes = p.starts.tolist(), p.ends.tolist(), p.sizes.tolist()
    for i in sorted(range(n), key=lambda j: (starts[j], j)):
        while busy and busy[0][0] <= starts[i]:
            _, b = heapq.heappop(busy)
            bisect.insort(free, (block_size[b], b))
        if free:
            pos = bisect.bisect_left(free, (sizes[i], -1))
            if pos == len(free):
                pos -= 1  # none fits: grow the largest free block
            b = free.pop(pos)[1]
            block_size[b] = max(block_size[b], sizes[i])
        else:
            b = len(block_size)
            block_size.append(sizes[i])
        block_of[i] = b
        heapq.heappush(busy, (ends[i], b))
    base = np.concatenate([[0], np.cumsum(block_size, dtype=np.int64)])
    return base[block_of]


def _greedy(order_fn: Callable[[_Problem], np.ndarray]) -> Callable[[_Problem], np.ndarray]:
    """Wrap an ordering into a strategy that places buffers by best fit in that order."""

    def run(p: _Problem) -> np.ndarray:
        return place_best_fit(p.starts, p.ends, p.sizes, order_fn(p))

    return run


_GREEDY: dict[str, Callable[[_Problem], np.ndarray]] = {
    "greedy_size": _greedy(_order_by_size),
    "greedy_breadth": _greedy(_order_by_breadth),
    "interference": _greedy(_order_by_interference),
    "owl_blocks": _owl_blocks,
}


# ---------------------------------------------------------------------- planner


def _arena(p: _Problem, offsets: np.ndarray) -> int:
    """Highest byte used by the live buffers under ``offsets``."""
    return int((offsets + p.sizes).max()) if len(offsets) else 0


def _search(p: _Problem, budget_s: float, seed: int, good_enough: int, initial: np.ndarray) -> np.ndarray:
    """Run the skyline search, starting from ``initial`` as the incumbent."""
    return skyline_search(
        p.starts,
        p.ends,
        p.sizes,
        initial=initial,
        lower_bound=p.lower_bound,
        good_enough=good_enough,
        deadline=time.perf_counter() + budget_s,
        seed=seed,
    )


def plan_offsets(
    intervals: Sequence[Sequence[int]],
    strategy: str = "auto",
    *,
    alignment: int = 1,
    time_budget_s: float | None = None,
    seed: int = 0,
) -> OffsetPlan:
    """Give each ``(start, end, size)`` interval a byte offset; no live pair shares bytes.

    ``end`` is exclusive.  Sizes are rounded up to ``alignment`` (so offsets are multiples
    of it); zero-size or never-live intervals get offset 0 and are ignored.

    ``search`` starts from the better of ``greedy_size``/``greedy_breadth`` and searches
    for ``time_budget_s`` (default 30 s; 2 s above 2,000 intervals), stopping early at
    the lower bound or when it proves the incumbent optimal.  ``auto`` runs the four
    cheap strategies and, if the best is more than 0.5% above the bound, searches until
    the whole call has used ``time_budget_s`` (default 30 s; 1.5 s above 2,000
    intervals) or a plan within 0.1% of the bound is found.  ``seed`` fixes the
    restarts' randomness; results can still vary with machine speed near the deadline.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; expected one of {STRATEGIES}")
    if time_budget_s is not None and not time_budget_s >= 0:
        raise ValueError(f"time_budget_s must be >= 0, got {time_budget_s!r}")
    t0 = time.perf_counter()
    p = _prepare(intervals, alignment)
    n = len(p.sizes)
    large = n > LARGE_N
    winner = strategy
    if n == 0:
        live = np.zeros(0, dtype=np.int64)
    elif strategy in _GREEDY:
        live = _GREEDY[strategy](p)
    elif strategy == "search":
        budget = time_budget_s
        if budget is None:
            budget = SEARCH_BUDGET_LARGE_S if large else SEARCH_BUDGET_S
        start = min((_GREEDY[name](p) for name in ("greedy_size", "greedy_breadth")), key=lambda o: _arena(p, o))
        live = _search(p, budget, seed, p.lower_bound, start)
    else:  # auto
        best_name, live = "", np.zeros(0, dtype=np.int64)
        for name in ("greedy_breadth", "greedy_size", "interference", "owl_blocks"):
            cand = _GREEDY[name](p)
            if not best_name or _arena(p, cand) < _arena(p, live):
                best_name, live = name, cand
            if _arena(p, live) <= p.lower_bound:
                break
        winner = best_name
        if _arena(p, live) > p.lower_bound * (1 + AUTO_SEARCH_TRIGGER):
            total = time_budget_s
            if total is None:
                total = AUTO_BUDGET_LARGE_S if large else AUTO_BUDGET_S
            left = total - (time.perf_counter() - t0)
            if left > 0:
                good = int(p.lower_bound * (1 + AUTO_GOOD_ENOUGH))
                found = _search(p, left, seed, good, live)
                if _arena(p, found) < _arena(p, live):
                    winner, live = "search", found
    offsets = np.zeros(p.n_total, dtype=np.int64)
    offsets[p.idx] = live
    return OffsetPlan(
        offsets=tuple(offsets.tolist()),
        arena_bytes=_arena(p, live),
        lower_bound_bytes=p.lower_bound,
        strategy=winner,
        seconds=time.perf_counter() - t0,
    )
