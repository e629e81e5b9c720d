"""The OpenCL executable's program as data: slots (where each value lives in the arena), windows
(a loop's per-iteration slices) and steps (kernel launches, host round-trips and control flow).
The engine builds and runs them; ``control`` lowers cond, while and scan into steps."""

from __future__ import annotations

from dataclasses import dataclass, field

from fungraph.backends.opencl.codegen import Access
from fungraph.backends.opencl.kernels import KernelSpec
from fungraph.ir import Eqn, Literal, ShapedArray


@dataclass
class Slot:
    """Where one value lives: an input, constant or output buffer, or a place in the arena."""

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
    """One entry of the program: a batch of kernels, a host round-trip, or a control-flow
    step whose ``blocks`` hold the steps of its branches or loop body."""

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
