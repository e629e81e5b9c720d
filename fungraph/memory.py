"""``fungraph.memory``: the memory planner as a library.

``plan_memory`` gives every intermediate of a graph a byte offset in one arena (what ``jit``
does before it runs anything) and ``verify_plan`` checks such a plan; ``plan_offsets`` packs
plain ``(start, end, size)`` intervals, ``lower_bound_bytes`` is the liveness bound no packing
beats, and ``verify_offsets`` checks a packing. See docs/memory.md.
"""

from fungraph.interpreters.memory import ALIGNMENT, MemoryPlan, Placement, plan_memory, verify_plan
from fungraph.interpreters.offsets import STRATEGIES, OffsetPlan, lower_bound_bytes, plan_offsets, verify_offsets

__all__ = [
    "ALIGNMENT",
    "STRATEGIES",
    "MemoryPlan",
    "OffsetPlan",
    "Placement",
    "lower_bound_bytes",
    "plan_memory",
    "plan_offsets",
    "verify_offsets",
    "verify_plan",
]
