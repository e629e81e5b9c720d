"""A graph lowered for the device: the storage *slots* its values live in, the *windows* that
slice a slot per loop iteration, and the tree of *steps* (kernel launches, host round-trips,
device-resident control flow) that :mod:`~fungraph.backends.opencl.lowering` builds,
:mod:`~fungraph.backends.opencl.planning` places, :mod:`~fungraph.backends.opencl.building`
instantiates and :mod:`~fungraph.backends.opencl.running` runs; and the engine's counters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fungraph.backends.opencl.codegen import Access
from fungraph.backends.opencl.kernels.spec import KernelSpec
from fungraph.ir import Eqn, Graph, Literal, ShapedArray

ENGINE_STATS = {"executables": 0, "kernels_built": 0, "build_seconds": 0.0, "output_allocations": 0,
                "donated_outputs": 0, "loop_iterations": 0, "programs_reused": 0, "copies_skipped": 0,
                "programs_built": 0, "programs_loaded": 0, "binaries_stored": 0, "launches": 0,
                "kernels_compiled_in_helpers": 0, "kernels_shared": 0}


@dataclass(frozen=True)
class StepLowering:
    """The OpenCL lowering of a primitive that runs as kernels or steps of its own (a product,
    a convolution, a scatter, control flow): ``lower(lowering, eqn)`` adds them to the
    program being built (a :class:`~fungraph.backends.opencl.lowering.Lowering`)."""

    lower: Callable[[Any, Eqn], object]


def step_lowering(eqn: Eqn) -> StepLowering | None:
    """``eqn``'s primitive's own-steps lowering, or None (a fused or host equation)."""
    lowering = eqn.primitive.lowerings.get("opencl")
    rule = lowering.rule if lowering is not None else None
    return rule if isinstance(rule, StepLowering) else None


@dataclass
class Slot:
    kind: str                      # input, const, arena, scratch, output, window
    aval: ShapedArray
    index: int = -1                # input or output position
    first: int = 0                 # first clock tick that touches it
    last: int = 0                  # last clock tick that touches it
    byte_offset: int = 0
    parent: int = -1               # window: the slot it slices


@dataclass
class Window:
    """Slot ``slot`` is ``parent`` at element offset ``base + i * stride`` in iteration ``i``."""

    slot: int
    parent: int
    base: int
    stride: int


@dataclass
class Step:
    kind: str                      # kernels, host, cond, while, scan
    eqns: list[Eqn] = field(default_factory=list)
    specs: list[KernelSpec] = field(default_factory=list)
    host_inputs: list[Access | Literal] = field(default_factory=list)
    host_outputs: list[int] = field(default_factory=list)
    blocks: list[list[Step]] = field(default_factory=list)   # cond: branches; while: cond, body, odd tail; scan: body
    index: Access | None = None    # cond: the branch index (None: chosen at compile time); while: the predicate
    swap: dict[int, int] = field(default_factory=dict)       # carry slots exchanged on odd iterations
    windows: list[Window] = field(default_factory=list)
    length: int = 0
    reverse: bool = False
    speculative: bool = False      # while: masked iterations enqueued in batches per readback


def walk(steps: list[Step]) -> Any:
    """``steps`` and the steps nested in their blocks, depth first."""
    for st in steps:
        yield st
        for block in st.blocks:
            yield from walk(block)


def kernel_specs(steps: list[Step]) -> Any:
    """Every kernel of ``steps``, nested blocks included, in program order."""
    for st in walk(steps):
        if st.kind == "kernels":
            yield from st.specs


def slots_used(st: Step) -> set[int]:
    """Every slot ``st`` (or a step nested in it) reads or writes."""
    used: set[int] = set()
    for x in walk([st]):
        for spec in x.specs:
            used.update(k for k, _ in spec.slots)
        used.update(a.slot for a in x.host_inputs if isinstance(a, Access))
        used.update(x.host_outputs)
        if x.index is not None:
            used.add(x.index.slot)
        used.update(k for w in x.windows for k in (w.slot, w.parent))
    return used


def graph_avals(graph: Graph) -> list[ShapedArray]:
    """Every value type of ``graph`` and of the sub-graphs its equations carry."""
    avals = [v.aval for v in graph.invars + graph.constvars]
    for e in graph.eqns:
        avals.extend(o.aval for o in e.outputs)
        for g in e.subgraphs:
            avals.extend(graph_avals(g))
    return avals
