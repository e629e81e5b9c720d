"""What every kernel generator returns (:class:`KernelSpec`), the parameter list it builds
(:class:`Params`) and the launch grids they share (:func:`exact_launches`).

Launches use exact grids (PoCL vectorises a work-group loop only without a bounds guard): the
bulk of ``n`` work-items in work-groups of 256/128/64 and the remainder as one small
work-group at a global offset, unless a smaller size divides ``n``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from fungraph import dtypes
from fungraph.backends.opencl.codegen import ctype
from fungraph.backends.opencl.device import DeviceInfo

Launch = tuple[tuple[int, ...], tuple[int, ...] | None, tuple[int, ...] | None]   # global, local, offset


@dataclass
class KernelSpec:
    name: str
    source: str
    slots: list[tuple[int, np.dtype]]
    launches: list[Launch]
    eqns: list[int] = field(default_factory=list)
    kind: str = "elementwise"
    note: str = ""
    #: elementwise kernels: the slots work-item ``gid`` only loads at element ``gid``, and the
    #: slots it only stores at element ``gid`` (after all its loads) and never loads
    own_loads: frozenset[int] = frozenset()
    own_stores: frozenset[int] = frozenset()
    #: one-dimensional copies: the body after ``gid`` is declared (:func:`merge_copies` runs
    #: several such bodies side by side in one launch)
    per_item: tuple[str, ...] = ()
    #: a copy ``(dst, src)`` between call slots, skipped when a call binds both to one buffer
    #: (an output taking over the donated input it copies)
    unless_same: tuple[int, int] | None = None
    #: whether the warm-up may launch it on dummy data (a loop kernel's trip count is read
    #: from its inputs, and a dummy one may not end)
    warm: bool = True


class Params:
    """Collects the slots a kernel reads or writes, in first-use order."""

    def __init__(self) -> None:
        self.slots: list[tuple[int, np.dtype]] = []

    def __call__(self, slot: int, dtype: np.dtype) -> tuple[str, str]:
        if all(s != slot for s, _ in self.slots):
            self.slots.append((slot, dtypes.check(dtype)))
        return f"p{slot}", f"o{slot}"

    def signature(self) -> str:
        return ", ".join(f"__global {ctype(dt)}* restrict_not p{s}, long o{s}".replace(" restrict_not", "")
                         for s, dt in self.slots)


#: Work below this many elements stays in one work-group where it can: waking a second PoCL
#: worker thread costs more than it saves (a 132-element loop body went from 26 to 450 us
#: per iteration when its launches were split over both cores).
SPREAD_MIN_WORK = 1 << 15


#: A launch of several work-groups, at most this many, takes a smaller work-group size that
#: divides it rather than a tail launch (a single group stays one, see above): PoCL compiles a
#: kernel once per work-group size and kind of global offset (a tail costs 40-180 ms more at the
#: first call; the MLP step's two panel copies of 5,440 work-items had been groups of 256 and
#: a tail of 64), and a tail launch costs more than a few more groups.
ONE_LAUNCH_GROUPS = 256


def exact_launches(n: int, info: DeviceInfo, work: int | None = None) -> list[Launch]:
    """A bulk launch with a work-group size of 256, 128 or 64 dividing it, plus a tail; one
    launch when one of these sizes divides ``n`` into 2 to ``ONE_LAUNCH_GROUPS`` groups. On a
    CPU, when the launch does at least ``SPREAD_MIN_WORK`` elements of work (``work``,
    default ``n``), the largest size that still gives every compute unit two work-groups is
    preferred (one work-group runs on one core)."""
    if n == 0:
        return []
    cap = min(256, info.max_work_group_size)
    heavy = (n if work is None else work) >= SPREAD_MIN_WORK
    spread = 2 * info.compute_units if info.is_cpu and heavy else 1
    sizes = [lo for lo in (256, 128, 64) if lo <= cap]
    if spread > 1:
        fits = [lo for lo in sizes if n >= lo * spread] or [lo for lo in sizes[::-1] if n >= lo]
    else:
        fits = [lo for lo in sizes if n >= lo]
    if not fits:
        return [((n,), (n,) if n <= cap else None, None)]
    local = fits[0]
    if n // local >= 2:     # several groups already: smaller ones rather than a tail
        local = next((lo for lo in fits if n % lo == 0 and n // lo <= ONE_LAUNCH_GROUPS), local)
    bulk = n - n % local
    out: list[Launch] = [((bulk,), (local,), None)]
    if n - bulk:
        out.append(((n - bulk,), (n - bulk,), (bulk,)))
    return out


def kernel_source(name: str, params: Params, body: Sequence[str]) -> str:
    return f"__kernel void {name}({params.signature()}) {{\n" + "\n".join(body) + "\n}\n"


def prod(shape: Sequence[int]) -> int:
    return int(math.prod(shape))


def divisor(n: int, cap: int) -> int:
    """The largest power of two <= ``cap`` dividing ``n``."""
    d = 1
    while d * 2 <= cap and n % (d * 2) == 0:
        d *= 2
    return d
