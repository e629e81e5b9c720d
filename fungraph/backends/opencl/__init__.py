"""The OpenCL backend: ``fungraph.jit(f, backend="opencl")``.

``device`` picks the device and moves data (``OpenCLArray``, ``TRANSFER_STATS``); ``codegen``
emits C for a fused region from the ``"opencl"`` lowerings of its primitives, which
``expressions`` registers (``lowering`` and ``control`` register the primitives with kernels
or steps of their own); ``fusion`` says what a kernel can fuse (the compiler's
``regions.fuse_regions`` chooses the regions); ``kernels`` writes kernel sources, one module per family; ``engine``'s
executable runs ``lowering`` (slots and steps), ``planning`` (donation, arena), ``building``
(one program per executable) and ``running`` (calls, loops, branches).
See docs/backends.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from fungraph import dtypes
from fungraph.backends import register_backend
from fungraph.backends.opencl import expressions  # noqa: F401 - registers the expression lowerings
from fungraph.backends.opencl.codegen import CTYPES
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
from fungraph.backends.opencl.fusion import OPENCL_FUSION
from fungraph.backends.opencl.program import graph_avals
from fungraph.interpreters.memory import MemoryPlan
from fungraph.ir import Graph

__all__ = ["ENGINE_STATS", "TRANSFER_STATS", "DonatedArrayError", "OpenCLArray", "OpenCLExecutable",
           "OpenCLUnavailable", "available", "get_device", "reset_transfer_stats"]


def _factory(graph: Graph, plan: MemoryPlan, donated: Sequence[bool] = ()) -> OpenCLExecutable:
    return OpenCLExecutable(graph, plan, donated)


def _declines(graph: Graph) -> str | None:
    """Why ``graph`` runs on the CPU engine instead (None: this engine runs it): a narrow
    dtype its kernels have no C type for. Complex values are refused with an error instead
    (:meth:`Device.check_dtype`), as before."""
    narrow = sorted({a.dtype.name for a in graph_avals(graph)
                     if a.dtype not in CTYPES and not dtypes.is_complex(a.dtype)})
    if not narrow:
        return None
    return (f"the OpenCL kernels have no {', '.join(narrow)} type (they compute "
            f"{', '.join(d.name for d in CTYPES)})")


_factory.declines = _declines  # type: ignore[attr-defined]
_factory.fusion = OPENCL_FUSION  # type: ignore[attr-defined]
register_backend("opencl", _factory)
