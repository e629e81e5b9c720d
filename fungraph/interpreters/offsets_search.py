"""Skyline branch-and-bound search for offset planning (used by ``offsets.plan_offsets``).

The search enumerates *canonical* plans: buffers are placed in non-decreasing offset
order, each resting on the highest buffer below it (or at 0).  Any plan can be pushed
down into that form without growing, so nothing is lost.  At each node ``o*`` is the
lowest offset a buffer can rest at; the leftmost such buffer (ties: one whose top is
flush with a neighbouring floor, then the restart's ranking) either goes there or is
excluded from ``o*``; when all are excluded the level rises to the next resting offset.
A node is pruned when some time column cannot hold what is still to be placed there:
for every threshold ``r``, the buffers that cannot rest below ``r`` must stack above it.
The outer loop bisects the capacity between the lower bound and the incumbent with
short, randomly re-ranked dives (restarts).  The idea follows MiniMalloc (Moffitt,
ASPLOS'23: canonical solutions plus spatial inference); the code here is independent.
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["skyline_search", "skyline_dfs"]

_BIG = np.int64(np.iinfo(np.int64).max // 4)
#: Use the per-column "lowest reachable buffer" bound when n * columns is at most this.
_MATRIX_CELLS = 600_000


def _columns(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Compress time to the columns between consecutive distinct event times."""
    times = np.unique(np.concatenate([starts, ends]))
    return np.searchsorted(times, starts), np.searchsorted(times, ends), len(times) - 1


def _twins(cs: np.ndarray, ce: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """For each buffer, the previous identical buffer (same lifetime and size) or -1.

    Identical buffers are interchangeable, so the search only lets one be placed after
    its twin, which removes mirrored branches.
    """
    prev = np.full(len(sizes), -1, dtype=np.int64)
    last: dict[tuple[int, int, int], int] = {}
    for i, key in enumerate(zip(cs.tolist(), ce.tolist(), sizes.tolist(), strict=True)):
        if key in last:
            prev[i] = last[key]
        last[key] = i
    return prev


def skyline_dfs(
    cs: np.ndarray,
    ce: np.ndarray,
    sizes: np.ndarray,
    n_cols: int,
    capacity: int,
    rank: np.ndarray,
    *,
    node_limit: int,
    deadline: float,
    twins: np.ndarray | None = None,
) -> tuple[np.ndarray | None, bool]:
    """Depth-first search for a canonical plan whose arena fits in ``capacity`` bytes.

    ``cs``/``ce`` are column ranges, ``rank`` orders ties (lower tried first).  Returns
    ``(offsets, exhausted)``: offsets of a plan if one was found, and whether the whole
    tree was explored (so ``None`` then proves no plan fits ``capacity``).
    """
    n = len(sizes)
    if twins is None:
        twins = np.full(n, -1, dtype=np.int64)
    floor = np.zeros(n_cols, dtype=np.int64)
    edge = np.full(n_cols + 2, capacity, dtype=np.int64)  # floor padded with walls
    edge[1:-1] = 0
    remaining = np.zeros(n_cols + 1, dtype=np.int64)
    np.add.at(remaining, cs, sizes)
    np.add.at(remaining, ce, -sizes)
    remaining = np.cumsum(remaining)[:n_cols]
    eff = np.zeros(n, dtype=np.int64)  # highest top under each buffer's lifetime
    placed = np.zeros(n, dtype=bool)
    excluded_at = np.full(n, -1, dtype=np.int64)
    offsets = np.zeros(n, dtype=np.int64)
    weight = None
    # a column matters for the bound only if no other column is live for a superset of
    # its buffers: some buffer must start there and some buffer must end right after it
    peaks = np.intersect1d(cs, ce - 1)
    if n * len(peaks) <= _MATRIX_CELLS:
        weight = ((cs[:, None] <= peaks) & (peaks < ce[:, None])) * sizes[:, None]
    has_twin = twins >= 0
    twin_idx = np.where(has_twin, twins, 0)
    level = 0
    n_placed = 0
    trail: list[tuple] = []
    choices: list[tuple[int, int, int]] = []
    nodes = 0
    while True:
        nodes += 1
        if nodes > node_limit or (nodes & 63 == 0 and time.perf_counter() > deadline):
            return None, False
        if n_placed == n:
            return offsets, False
        ok = False
        # buffers resting at or above the level may go next; the others need new support
        free = ~placed & (eff >= level)
        if free.any():
            o_star = int(eff[free].min())
            blocked = excluded_at == eff
            step = int(sizes[~placed].min())
            reach = np.where(free & ~blocked, eff, np.maximum(eff, level) + step)
            if weight is not None:
                # release-date bound: buffers reaching r or higher stack above r in a column
                left = np.flatnonzero(~placed)
                order = left[np.argsort(-reach[left], kind="stable")]
                stack = np.cumsum(weight[order], axis=0).max(axis=1)
                need = int((reach[order] + stack).max())
            else:
                low = int(reach[~placed].min())
                need = int(np.where(remaining > 0, np.maximum(floor, low) + remaining, 0).max())
            ok = need <= capacity
        if ok:
            cand = free & (eff == o_star) & ~blocked
            cand &= ~has_twin | placed[twin_idx]
            if cand.any():
                ids = np.flatnonzero(cand)
                first = ids[cs[ids] == cs[ids].min()]
                if len(first) > 1:
                    tops = o_star + sizes[first]
                    snug = (tops == edge[cs[first]]).astype(np.int64)
                    snug += tops == edge[ce[first] + 1]
                    c = int(first[np.argmin(rank[first] - snug * n)])
                else:
                    c = int(first[0])
                top = o_star + int(sizes[c])
                if top > capacity:  # cannot sit here: only the "higher" branch remains
                    trail.append(("x", c, int(excluded_at[c])))
                    excluded_at[c] = o_star
                    continue
                choices.append((len(trail), c, o_star))
                a, b = cs[c], ce[c]
                hit = np.flatnonzero((cs < b) & (ce > a))
                trail.append(("p", c, floor[a:b].copy(), hit, eff[hit].copy(), level))
                floor[a:b] = top
                edge[a + 1 : b + 1] = top
                eff[hit] = np.maximum(eff[hit], top)
                remaining[a:b] -= sizes[c]
                placed[c] = True
                offsets[c] = o_star
                level = o_star
                n_placed += 1
                continue
            higher = eff[~placed & (eff > o_star)]
            if len(higher):
                trail.append(("l", level))
                level = int(higher.min())
                continue
        # dead end: undo to the latest choice and take its "goes higher" branch
        if not choices:
            return None, True
        mark, c, o_star = choices.pop()
        while len(trail) > mark:
            rec = trail.pop()
            if rec[0] == "p":
                _, j, old_floor, hit, old_eff, level = rec
                a, b = cs[j], ce[j]
                floor[a:b] = old_floor
                edge[a + 1 : b + 1] = old_floor
                eff[hit] = old_eff
                remaining[a:b] += sizes[j]
                placed[j] = False
                n_placed -= 1
            elif rec[0] == "x":
                excluded_at[rec[1]] = rec[2]
            else:
                level = rec[1]
        trail.append(("x", c, int(excluded_at[c])))
        excluded_at[c] = o_star


def _ranks(cs: np.ndarray, ce: np.ndarray, sizes: np.ndarray, attempt: int, rng: np.random.Generator) -> np.ndarray:
    """Tie-break ranks for one restart: a base heuristic, with noise after the first rounds."""
    width = (ce - cs).astype(np.float64)
    size = sizes.astype(np.float64)
    keys = [size * width, size, width]  # area, size, lifetime: larger first
    key = keys[attempt % len(keys)].copy()
    if attempt >= len(keys):
        key *= rng.uniform(0.7, 1.3, size=len(key))
    order = np.argsort(-key, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank


def skyline_search(
    starts: np.ndarray,
    ends: np.ndarray,
    sizes: np.ndarray,
    *,
    initial: np.ndarray,
    lower_bound: int,
    good_enough: int,
    deadline: float,
    seed: int = 0,
) -> np.ndarray:
    """Improve ``initial`` offsets by bisecting the arena capacity with limited DFS runs.

    Stops at the deadline, once the arena is at most ``good_enough`` (or the lower
    bound), or when a DFS proves that no smaller arena exists.  Always returns a valid
    plan: the incumbent is only replaced by strictly smaller complete plans.
    """
    best = np.asarray(initial, dtype=np.int64).copy()
    n = len(sizes)
    if n == 0:
        return best
    best_arena = int((best + sizes).max())
    stop_at = max(int(lower_bound), int(good_enough))
    cs, ce, n_cols = _columns(starts, ends)
    twins = _twins(cs, ce, sizes)
    rng = np.random.default_rng(seed)
    proven = int(lower_bound)  # no plan is smaller than this
    soft = proven  # capacities below this failed with the current effort
    close = max(1, int(lower_bound) // 2000)
    node_limit = 2 * n + 300
    tries = 4
    attempt = 0
    while best_arena > stop_at and best_arena > proven and time.perf_counter() < deadline:
        if best_arena - soft <= close:
            soft, tries = proven, 2 * tries  # bracket collapsed: retry lower, harder
        capacity = soft + (best_arena - 1 - soft) // 2
        outcome = "failed"
        for _ in range(tries):
            rank = _ranks(cs, ce, sizes, attempt, rng)
            attempt += 1
            found, exhausted = skyline_dfs(
                cs, ce, sizes, n_cols, capacity, rank,
                node_limit=node_limit, deadline=deadline, twins=twins,
            )  # fmt: skip
            if found is not None:
                best, best_arena, outcome = found, int((found + sizes).max()), "found"
                break
            if exhausted:
                proven, outcome = capacity + 1, "proven"
                break
            if time.perf_counter() > deadline:
                break
        if outcome != "found":
            soft = max(soft, capacity + 1)
    return best
