"""Bounded caches that :func:`fungraph.clear_caches` empties.

Every process-wide cache (compiled graphs, transformed sub-graphs, interned signatures,
backend programs) is an :class:`LRUCache` holding at most ``fungraph_cache_size`` entries
(``fungraph.config``), or registers how to empty itself with :func:`on_clear`, so that one
call frees what every layer has memoised, as ``jax.clear_caches`` does.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

from fungraph._config import CACHE_LIMITS

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_CLEARERS: list[Callable[[], None]] = []


def on_clear(clear: Callable[[], None]) -> Callable[[], None]:
    """Have :func:`clear_all` call ``clear`` (a module-level cache's emptying function)."""
    _CLEARERS.append(clear)
    return clear


def clear_all() -> None:
    """Empty every registered cache."""
    for clear in _CLEARERS:
        clear()


class LRUCache(Generic[K, V]):
    """A mapping that keeps its ``fungraph_cache_size`` most recently used entries; safe to
    share between threads. ``shared=True`` registers it with :func:`clear_all`."""

    __slots__ = ("name", "_data", "_lock")

    def __init__(self, name: str, shared: bool = True) -> None:
        self.name = name
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        if shared:
            on_clear(self.clear)

    def get(self, key: K, default: V | None = None) -> V | None:
        with self._lock:
            value = self._data.get(key, _MISSING)
            if value is _MISSING:
                return default
            self._data.move_to_end(key)
            return value  # type: ignore[return-value]

    def __setitem__(self, key: K, value: V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > CACHE_LIMITS.size:
                self._data.popitem(last=False)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._data))

    def values(self) -> list[V]:
        with self._lock:
            return list(self._data.values())

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __repr__(self) -> str:
        return f"LRUCache({self.name!r}, {len(self._data)} of {CACHE_LIMITS.size})"


_MISSING = object()
