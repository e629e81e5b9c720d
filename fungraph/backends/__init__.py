"""Execution engines for planned graphs, looked up by name.

A backend is a factory ``(graph, plan, donated) -> executable`` where ``executable.run(args)``
takes numpy arrays or that backend's ``fungraph.Array`` values and returns its outputs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

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
