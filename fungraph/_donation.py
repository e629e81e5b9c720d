"""Which donated arguments a jit call may update in place: bare host results that only the
caller's name holds (counted with ``sys.getrefcount`` against what a call's own machinery adds),
and which inputs share their memory with others."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph.array import HostArray
from fungraph.tree_util import tree_flatten


class _ReferenceProbe:
    """Called as a :class:`Jitted` is, it counts the references a call's machinery (the caller's
    stack, the ``*args`` tuple, the ``**kwargs`` dict) adds to an argument: of the first
    positional one, else of the keyword argument ``x``."""

    def __call__(self, *args: Any, **kwargs: Any) -> int:
        if args:
            return sys.getrefcount(args[0])
        return _keyword_references(kwargs)["x"]


def _keyword_references(kwargs: dict[str, Any]) -> dict[str, int]:
    return {name: sys.getrefcount(kwargs[name]) for name in kwargs}


def _caller_references() -> tuple[int, int, int] | None:
    """What ``sys.getrefcount`` reads in ``Jitted.__call__`` of an argument one name of the
    caller's holds and nothing else: passed positionally alone, positionally beside a keyword
    argument, and by keyword; None where counts are not exact (not CPython), which leaves bare
    arguments to be copied."""
    if sys.implementation.name != "cpython":
        return None
    held = object()
    other = object()
    return _ReferenceProbe()(held), _ReferenceProbe()(held, x=other), _ReferenceProbe()(x=held)


_COUNTS = _caller_references()
CALLER_REFERENCES = None if _COUNTS is None else _COUNTS[0]
MIXED_REFERENCES = None if _COUNTS is None else _COUNTS[1]
KEYWORD_REFERENCES = None if _COUNTS is None else _COUNTS[2]


def held_positions(args: tuple, references: int | None) -> frozenset[int]:
    """The positions of the bare host results among ``args`` that only the caller's name holds
    (``sys.getrefcount`` reads no more than ``references``)."""
    if references is None:
        return frozenset()
    return frozenset(j for j in range(len(args))
                     if args[j].__class__ is HostArray and sys.getrefcount(args[j]) <= references)


def held_keywords(kwargs: dict[str, Any]) -> frozenset[str]:
    """The names of the bare host results among the keyword arguments ``kwargs`` (of a
    ``Jitted.__call__``) that only the caller's name holds."""
    if KEYWORD_REFERENCES is None:
        return frozenset()
    counts = _keyword_references(kwargs)
    return frozenset(name for name, value in kwargs.items()
                     if value.__class__ is HostArray and counts[name] <= KEYWORD_REFERENCES)


def bare_donations(args: tuple, donate_argnums: tuple[int, ...], static_argnums: tuple[int, ...],
                    held: frozenset[int] | None = None) -> frozenset[int]:
    """The leaf indices of donated positional arguments that are bare host results held by no
    more than one name of the caller's (counted here, before the call adds references of its
    own, or given as the positions ``held``), which :func:`take_donated` may then update in
    place as it does a pytree's leaves."""
    if CALLER_REFERENCES is None or not any(a.__class__ is HostArray for a in args):
        return frozenset()  # no bare result to count (spares flattening every pytree argument)
    found = []
    leaf = 0
    for j in range(len(args)):
        if j in static_argnums:
            continue
        if args[j].__class__ is not HostArray:
            leaf += len(tree_flatten(args[j])[0])
            continue
        once = j in held if held is not None else sys.getrefcount(args[j]) <= CALLER_REFERENCES
        if j in donate_argnums and once:
            found.append(leaf)
        leaf += 1
    return frozenset(found)


def memory_owner(a: np.ndarray) -> np.ndarray | None:
    """The array that owns ``a``'s memory; None when numpy owns none of it (a buffer from
    elsewhere, which views numpy cannot trace back may share)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a if a.base is None else None


def owner_counts(arrays: Sequence[Any]) -> dict[int, int] | None:
    """How many of ``arrays`` lie in each owner's memory (by the owner's id), so that a
    donated input alone in its owner's memory skips the pairwise overlap test (48 of them for
    a three-layer MLP's step); None when some array's owner is unknown."""
    counts: dict[int, int] = {}
    for a in arrays:
        if isinstance(a, np.ndarray):
            owner = memory_owner(a)
            if owner is None:
                return None
            counts[id(owner)] = counts.get(id(owner), 0) + 1
    return counts
