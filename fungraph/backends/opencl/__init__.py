"""The OpenCL backend: ``fungraph.jit(f, backend="opencl")``.

``device`` picks the device and moves data (``OpenCLArray``, ``TRANSFER_STATS``); ``codegen``
turns equations into C expressions; ``fusion`` chooses fused regions (``fusion_search``
searches over them); ``kernels`` writes kernel sources, one module per family; ``engine``'s
executable runs ``lowering`` (slots and steps), ``planning`` (donation, arena), ``building``
(one program per executable) and ``running`` (calls, loops, branches).
See docs/backends.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from fungraph.backends import register_backend
from fungraph.backends.opencl.device import (
    TRANSFER_STATS,
    DonatedArrayError,
    OpenCLArray,
    OpenCLUnavailable,
    available,
    get_device,
    reset_transfer_stats,
)
from fungraph.backends.opencl.engine import ENGINE_STATS, OpenCLExecutable
from fungraph.interpreters.memory import MemoryPlan
from fungraph.ir import Graph

__all__ = ["ENGINE_STATS", "TRANSFER_STATS", "DonatedArrayError", "OpenCLArray", "OpenCLExecutable",
           "OpenCLUnavailable", "available", "get_device", "reset_transfer_stats"]


def _factory(graph: Graph, plan: MemoryPlan, donated: Sequence[bool] = ()) -> OpenCLExecutable:
    return OpenCLExecutable(graph, plan, donated)


# the fusion plan puts ``k * (a @ b)`` in the kernel that consumes the product (an epilogue
# on CPUs, an elementwise region elsewhere), so scaling the smaller factor would add a kernel
_factory.scales_in_consumers = True  # type: ignore[attr-defined]
register_backend("opencl", _factory)
