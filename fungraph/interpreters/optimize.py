"""The pass manager: runs the optimiser passes in order and records what each changed."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fungraph.interpreters.cse import cse, strip_barriers
from fungraph.interpreters.dce import dce
from fungraph.interpreters.fold import fold_constants
from fungraph.interpreters.fuse import fuse_adagrad, fuse_fma
from fungraph.interpreters.inline import inline_calls
from fungraph.interpreters.regions import FusionCapability, fuse_regions
from fungraph.interpreters.simplify import simplify
from fungraph.ir import Graph

Pass = Callable[[Graph], Graph]

DEFAULT_PASSES: tuple[tuple[str, Pass], ...] = (
    ("inline", inline_calls),
    ("dce", dce),
    ("fold", fold_constants),
    ("simplify", simplify),
    ("cse", cse),
    ("strip_barriers", strip_barriers),
    ("fuse_adagrad", fuse_adagrad),
    ("fuse_fma", fuse_fma),
    ("dce_final", dce),
)


def intermediate_bytes(g: Graph) -> int:
    """Bytes of every equation output (the memory an unplanned execution allocates)."""
    return sum(o.aval.nbytes for e in g.eqns for o in e.outputs)


@dataclass(frozen=True)
class PassStat:
    name: str
    eqns_before: int
    eqns_after: int
    bytes_before: int
    bytes_after: int
    seconds: float


def optimize(graph: Graph, passes: Sequence[tuple[str, Pass]] = DEFAULT_PASSES,
             verify: bool = False) -> tuple[Graph, tuple[PassStat, ...]]:
    """Run ``passes`` in order; with ``verify`` check the IR after each (the tests do)."""
    stats = []
    for name, p in passes:
        t0 = time.perf_counter()
        before_n, before_b = len(graph.eqns), intermediate_bytes(graph)
        graph = p(graph)
        if verify:
            graph.verify()
        stats.append(PassStat(name, before_n, len(graph.eqns), before_b, intermediate_bytes(graph),
                              time.perf_counter() - t0))
    return graph, tuple(stats)


def format_stats(stats: Sequence[PassStat]) -> str:
    lines = [f"{'pass':<14}{'eqns':>14}{'intermediate bytes':>26}{'ms':>9}"]
    for s in stats:
        lines.append(f"{s.name:<14}{s.eqns_before:>6} -> {s.eqns_after:<6}{s.bytes_before:>12} -> "
                     f"{s.bytes_after:<10}{s.seconds * 1e3:>9.2f}")
    return "\n".join(lines)


def backend_passes(factory: Any) -> tuple[tuple[str, Pass], ...]:
    """The default passes, then fusion regions for a backend that runs them as units and has
    the pass manager choose them (its :class:`~fungraph.interpreters.regions.FusionCapability`,
    ``factory.fusion``, says ``planned_by="pipeline"``). A backend that computes a product's
    elementwise consumers with it (``product_epilogues``) keeps a scalar scale of a product
    where it is rather than on the smaller factor, which would cost a kernel of its own."""
    passes = DEFAULT_PASSES
    capability: FusionCapability | None = getattr(factory, "fusion", None)
    if capability is None:
        return passes
    if capability.product_epilogues:
        passes = tuple((name, functools.partial(simplify, scale_factors=False) if p is simplify else p)
                       for name, p in passes)
    if capability.planned_by != "pipeline":
        return passes
    return passes + (("fuse_regions", functools.partial(fuse_regions, capability=capability)),)
