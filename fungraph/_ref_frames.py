"""Which mutable array references (``fungraph.Ref``) a function being staged touches.

Staging a function (``jit``, a loop body, a ``cond`` branch) opens a frame; every read or
write of a ``Ref`` made before the frame opened is recorded in it, with the value it held, so
the stager can put the references back as they were and either thread them through the staged
construct (lax's control flow) or refuse them with a clear error. Pure Python state, no
fungraph imports, so the IR stager can use it.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from typing import Any

_serials = itertools.count()
_local = threading.local()


def next_serial() -> int:
    """A new reference's creation number: a frame's outer references are those numbered below
    the number current when it opened."""
    return next(_serials)


class Frame:
    """One staging's record: the outer references it touched, with their values on entry."""

    __slots__ = ("adopted", "start", "touched")

    def __init__(self, start: int) -> None:
        self.start = start
        self.touched: dict[Any, Any] = {}
        self.adopted: dict[Any, Any] = {}

    def restore(self) -> None:
        """Put every touched or adopted outer reference back to its value on entry (the staged
        values must not outlive the staging)."""
        for ref, value in self.touched.items():
            ref._value = value
        for ref, (value, level) in self.adopted.items():
            ref._value, ref._level = value, level


def _frames() -> list[Frame]:
    frames = getattr(_local, "frames", None)
    if frames is None:
        frames = _local.frames = []
    return frames


def note_access(ref: Any) -> None:
    """Record an access to ``ref`` in every open frame it is outer to."""
    frames = getattr(_local, "frames", None)
    if frames:
        for frame in frames:
            if ref._serial < frame.start and ref not in frame.touched and ref not in frame.adopted:
                frame.touched[ref] = ref._value


def adopt(refs: list[Any], level: int) -> None:
    """The innermost frame threads ``refs`` itself (as a loop carry or branch operand): they
    are no longer its outer references, hold values of its trace (``level``), and get their
    entry values back when it closes."""
    frames = _frames()
    if frames:
        for ref in refs:
            frames[-1].adopted.setdefault(ref, (ref._value, ref._level))
            ref._level = level


def staged_outer(ref: Any) -> bool:
    """Whether an open frame will see ``ref`` as one of its outer references."""
    frames = getattr(_local, "frames", None)
    return bool(frames) and any(ref._serial < f.start and ref not in f.adopted for f in frames)


@contextlib.contextmanager
def frame() -> Iterator[Frame]:
    """Open a frame for one staging; the outer references are restored when it closes."""
    f = Frame(next_serial())
    frames = _frames()
    frames.append(f)
    try:
        yield f
    finally:
        frames.pop()
        f.restore()


class RefsTouched(NotImplementedError):
    """A staged function read or wrote references made outside it. lax's control flow catches
    this and threads the references through its loop or branches; anywhere else it is the
    user's error."""

    def __init__(self, refs: list[Any], where: str = "") -> None:
        self.refs = refs
        super().__init__(
            f"a fungraph.Ref created outside {where or 'a staged function'} was read or written inside it "
            f"({', '.join(repr(r) for r in refs[:3])}{', ...' if len(refs) > 3 else ''}). fungraph threads "
            "references through jit and lax.fori_loop, scan, while_loop, cond and switch, not through "
            "make_jaxpr, jit(...).trace/.lower, checkpoint or custom_jvp/custom_vjp: create the Ref inside the "
            "function, or pass its value in and return the new one")
