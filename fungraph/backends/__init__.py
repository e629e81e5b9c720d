"""Execution engines for planned graphs, looked up by name.

A backend is a factory ``(graph, plan, donated) -> executable`` where ``executable.run(args)``
takes numpy arrays or that backend's ``fungraph.Array`` values and returns its outputs.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from fungraph._config import register_platforms

_FACTORIES: dict[str, Callable[..., Any]] = {}
_MODULES = {"cpu": "fungraph.backends.cpu", "opencl": "fungraph.backends.opencl"}


def register_backend(name: str, factory: Callable[..., Any]) -> None:
    _FACTORIES[name] = factory


def backend_factory(name: str) -> Callable[..., Any]:
    """The executable factory of backend ``name``, importing its module on first use."""
    if name not in _FACTORIES:
        if name not in _MODULES:
            raise ValueError(f"unknown backend {name!r}; available: {', '.join(sorted(_MODULES))}")
        importlib.import_module(_MODULES[name])
    if name not in _FACTORIES:
        raise RuntimeError(f"backend {name!r} is not available: {_MODULES[name]} did not register it")
    return _FACTORIES[name]


def known_backends() -> tuple[str, ...]:
    return tuple(sorted(_MODULES))


register_platforms(known_backends())


_COMPILER: dict[str, Callable[..., Any]] = {}


def register_compiler(compile_graph: Callable[..., Any]) -> None:
    """``jit`` registers its driver here when imported: ``compile_graph(graph, backend, donated)``
    optimises, plans and builds (cached) an executable of ``backend``."""
    _COMPILER["compile_graph"] = compile_graph


def compile_subgraph(graph: Any, backend: str, donated: Any = ()) -> Any:
    """A sub-graph (a branch, a loop's condition or body) compiled as ``jit`` compiles a whole
    graph: engines lie below ``jit`` in the layers and reach its driver through this registry."""
    if "compile_graph" not in _COMPILER:
        raise RuntimeError("no graph compiler is registered: import fungraph (fungraph.jit registers it)")
    return _COMPILER["compile_graph"](graph, backend, donated)


_TURNS = threading.RLock()
_BUSY: set[int] = set()


@contextmanager
def taking_turns(executable: object, reentered: str) -> Iterator[None]:
    """Run the body while no other thread runs a stateful executable (one whose calls share
    buffers or kept values: OpenCL's arena and kernel arguments, incremental jit's kept
    intermediates). One re-entrant lock for all of them, so host callbacks may call other
    jitted functions on their own thread, and two threads whose callbacks call each other's
    functions cannot deadlock; re-entering ``executable`` itself from its own callback raises
    ``RuntimeError(reentered)`` instead of corrupting its state. Calls share one interpreter
    lock and, on OpenCL, one in-order queue, so turns cost little concurrency."""
    with _TURNS:
        key = id(executable)
        if key in _BUSY:
            raise RuntimeError(reentered)
        _BUSY.add(key)
        try:
            yield
        finally:
            _BUSY.discard(key)
