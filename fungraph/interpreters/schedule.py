"""Execution orders for memory planning. Any topological order of a graph's equations is a
valid program; the order decides which values are live together. Three candidates:

- ``given``: the traced order;
- ``dfs``: post-order depth-first from the outputs, as Owl's engine evaluates its graph;
- ``greedy``: memory-aware list scheduling: among ready equations, run the one that frees the
  most bytes net of what it allocates.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Sequence

from fungraph.ir import Eqn, Graph, Var


def _consumers(graph: Graph) -> dict[Var, list[int]]:
    users: dict[Var, list[int]] = defaultdict(list)
    for i, e in enumerate(graph.eqns):
        for a in {a for a in e.inputs if isinstance(a, Var)}:
            users[a].append(i)
    return users


def _reorder(graph: Graph, order: list[int]) -> Graph:
    return Graph(graph.invars, graph.constvars, graph.consts, tuple(graph.eqns[i] for i in order), graph.outvars)


def given_order(graph: Graph) -> Graph:
    return graph


def dfs_order(graph: Graph) -> Graph:
    """Post-order DFS from the outputs (iterative; effectful equations are kept, in order)."""
    producer = {o: i for i, e in enumerate(graph.eqns) for o in e.outputs}
    seen: set[int] = set()
    order: list[int] = []
    roots = [producer[a] for a in graph.outvars if isinstance(a, Var) and a in producer]
    roots += [i for i, e in enumerate(graph.eqns) if e.effectful]
    for root in roots:
        stack = [(root, False)]
        while stack:
            i, expanded = stack.pop()
            if expanded:
                if i not in seen:
                    seen.add(i)
                    order.append(i)
                continue
            if i in seen:
                continue
            stack.append((i, True))
            for a in reversed(graph.eqns[i].inputs):
                j = producer.get(a) if isinstance(a, Var) else None
                if j is not None and j not in seen:
                    stack.append((j, False))
    if len(order) != len(graph.eqns):
        order += [i for i in range(len(graph.eqns)) if i not in seen]
        order = _stable_topological(graph, order)
    return _reorder(graph, order)


def _stable_topological(graph: Graph, preferred: list[int], after: dict[int, set[int]] | None = None) -> list[int]:
    """A topological order as close to ``preferred`` as the data dependencies and ``after``
    (equation -> equations that must run before it) allow; shorter than the graph if
    ``after`` makes a cycle."""
    rank = {i: k for k, i in enumerate(preferred)}
    producer = {o: i for i, e in enumerate(graph.eqns) for o in e.outputs}
    deps = [{producer[a] for a in e.inputs if isinstance(a, Var) and a in producer} for e in graph.eqns]
    for i, before in (after or {}).items():
        deps[i] |= before
    users = defaultdict(list)
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    pending = [len(d) for d in deps]
    ready = [(rank[i], i) for i in range(len(graph.eqns)) if pending[i] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, i = heapq.heappop(ready)
        out.append(i)
        for u in users[i]:
            pending[u] -= 1
            if pending[u] == 0:
                heapq.heappush(ready, (rank[u], u))
    return out


def greedy_order(graph: Graph) -> Graph:
    """List scheduling that prefers equations freeing the most memory."""
    producer = {o: i for i, e in enumerate(graph.eqns) for o in e.outputs}
    users = _consumers(graph)
    outputs = {a for a in graph.outvars if isinstance(a, Var)}
    deps = [{producer[a] for a in e.inputs if isinstance(a, Var) and a in producer} for e in graph.eqns]
    remaining_uses = {v: len(us) for v, us in users.items()}
    pending = [len(d) for d in deps]
    dependents = defaultdict(list)
    for i, d in enumerate(deps):
        for j in d:
            dependents[j].append(i)

    def gain(e: Eqn) -> int:
        freed = sum(a.aval.nbytes for a in {a for a in e.inputs if isinstance(a, Var)}
                    if a in producer and a not in outputs and remaining_uses.get(a, 0) == 1)
        return freed - sum(o.aval.nbytes for o in e.outputs)

    ready = {i for i in range(len(graph.eqns)) if pending[i] == 0}
    order = []
    while ready:
        i = max(ready, key=lambda k: (gain(graph.eqns[k]), -k))
        ready.remove(i)
        order.append(i)
        for a in {a for a in graph.eqns[i].inputs if isinstance(a, Var)}:
            if a in remaining_uses:
                remaining_uses[a] -= 1
        for u in dependents[i]:
            pending[u] -= 1
            if pending[u] == 0:
                ready.add(u)
    return _reorder(graph, order)


def updates_last(graph: Graph, donated: Sequence[bool]) -> Graph:
    """``graph`` with each equation that may write a graph output into a donated input's buffer
    (``w - lr * g`` taking over ``w``) moved after every other reader of that input, so the memory
    plan can update the input in place instead of allocating the output: a traced training step
    computes a weight's update before the backward pass has read the weight. ``graph`` itself
    where nothing moves or the constraints make a cycle."""
    from fungraph.interpreters.memory import inplace_inputs

    donated_vars = {v for v, d in zip(graph.invars, donated) if d}
    outputs = {a for a in graph.outvars if isinstance(a, Var)}
    readers = _consumers(graph)
    after: dict[int, set[int]] = defaultdict(set)
    for i, e in enumerate(graph.eqns):
        for j, o in enumerate(e.outputs):
            if o not in outputs:
                continue
            for k in inplace_inputs(e, j):
                a = e.inputs[k] if k < len(e.inputs) else None
                if isinstance(a, Var) and a in donated_vars and a.aval == o.aval:
                    after[i] |= {r for r in readers[a] if r != i}
                    break
    if not any(after.values()):
        return graph
    effects = [i for i, e in enumerate(graph.eqns) if e.effectful]
    for previous, i in zip(effects, effects[1:]):
        after[i].add(previous)
    order = _stable_topological(graph, list(range(len(graph.eqns))), after)
    return _reorder(graph, order) if len(order) == len(graph.eqns) else graph


SCHEDULES: dict[str, Callable[[Graph], Graph]] = {"given": given_order, "dfs": dfs_order, "greedy": greedy_order}
