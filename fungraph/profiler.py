"""``jax.profiler``: traces of a program's named regions and compilations.

``trace(log_dir)`` (or ``start_trace``/``stop_trace``) records, while it runs, every
``TraceAnnotation``/``StepTraceAnnotation`` block and ``annotate_function`` call and every
compilation of a jitted graph, with their threads and times, and writes them in the Chrome
trace-event format (read by Perfetto, ``chrome://tracing`` and TensorBoard's trace viewer) to
``log_dir/plugins/profile/<run>/<host>.trace.json.gz``, and, with ``create_perfetto_trace``, to
``perfetto_trace.json.gz`` beside it. JAX's traces also hold XLA's device activity; ours have no
per-kernel events, and the device memory profiles (pprof) are not written
(``docs/differences_from_jax.md``)."""

from __future__ import annotations

import functools
import gzip
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fungraph.ir import Graph
from fungraph.jit import COMPILE_LISTENERS

__all__ = ["ProfileOptions", "StepTraceAnnotation", "TraceAnnotation", "annotate_function", "start_trace",
           "stop_trace", "trace"]


@dataclass
class ProfileOptions:
    """JAX's profiler options; kept for programs that pass them (fungraph traces host activity
    only, so the tracer levels select nothing)."""

    host_tracer_level: int = 2
    python_tracer_level: int = 0
    device_tracer_level: int = 1
    start_timestamp_ns: int = 0
    duration_ms: int = 0
    advanced_configuration: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Session:
    log_dir: str
    perfetto: bool
    start_ns: int
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, name: str, start_ns: int, end_ns: int, args: dict[str, Any]) -> None:
        event = {"name": name, "ph": "X", "pid": os.getpid(), "tid": threading.get_ident(),
                 "ts": (start_ns - self.start_ns) / 1e3, "dur": (end_ns - start_ns) / 1e3,
                 "args": {k: str(v) for k, v in args.items()}}
        with self.lock:
            self.events.append(event)


_ACTIVE: list[_Session] = []
_ACTIVE_LOCK = threading.Lock()


def _on_compile(graph: Graph, backend: str, seconds: dict[str, float]) -> None:
    if _ACTIVE:
        end = time.perf_counter_ns()
        start = end - int(sum(seconds.values()) * 1e9)
        _ACTIVE[0].add(f"compile ({backend})", start, end,
                       {"equations": len(graph.eqns), **{k: f"{v * 1e3:.3f} ms" for k, v in seconds.items()}})


def start_trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False, create_perfetto_trace: bool = False,
                profiler_options: ProfileOptions | None = None) -> None:
    """Start recording annotations and compilations; :func:`stop_trace` writes them to ``log_dir``."""
    if create_perfetto_link:
        raise ValueError("create_perfetto_link=True serves the trace to a browser, which fungraph does not do; "
                         "use create_perfetto_trace=True and open the file in ui.perfetto.dev")
    with _ACTIVE_LOCK:
        if _ACTIVE:
            raise RuntimeError(f"a profiler trace is already running (to {_ACTIVE[0].log_dir}); stop_trace() first")
        _ACTIVE.append(_Session(os.fspath(log_dir), create_perfetto_trace, time.perf_counter_ns()))
        COMPILE_LISTENERS.append(_on_compile)


def stop_trace() -> None:
    """Stop the running trace and write it (see the module's docstring for where)."""
    with _ACTIVE_LOCK:
        if not _ACTIVE:
            raise RuntimeError("no profiler trace is running: start_trace(log_dir) first")
        session = _ACTIVE.pop()
        COMPILE_LISTENERS.remove(_on_compile)
    run = time.strftime("%Y_%m_%d_%H_%M_%S")
    folder = os.path.join(session.log_dir, "plugins", "profile", run)
    os.makedirs(folder, exist_ok=True)
    document = json.dumps({"displayTimeUnit": "ns", "traceEvents": session.events}).encode()
    names = [f"{socket.gethostname()}.trace.json.gz"] + (["perfetto_trace.json.gz"] if session.perfetto else [])
    for name in names:
        with gzip.open(os.path.join(folder, name), "wb") as out:
            out.write(document)


@contextmanager
def trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False, create_perfetto_trace: bool = False,
          profiler_options: ProfileOptions | None = None) -> Iterator[None]:
    """Record a trace of the block (``with jax.profiler.trace("/tmp/trace"):``)."""
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


class TraceAnnotation:
    """A named region of the trace: a context manager (``with TraceAnnotation("step"):``); its
    keyword arguments are the event's arguments. Costs one check when no trace runs."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        self.name = name
        self.kwargs = kwargs
        self._start: list[int] = []

    def __enter__(self) -> TraceAnnotation:
        self._start.append(time.perf_counter_ns())
        return self

    def __exit__(self, *exc: object) -> None:
        start = self._start.pop()
        if _ACTIVE:
            _ACTIVE[0].add(self.name, start, time.perf_counter_ns(), self.kwargs)


class StepTraceAnnotation(TraceAnnotation):
    """A training step's region, as JAX's (``StepTraceAnnotation("train", step_num=i)``)."""


def annotate_function(func: Callable[..., Any] | None = None, name: str | None = None,
                      **decorator_kwargs: Any) -> Any:
    """``func`` with each call recorded as a region named ``name`` (the function's qualified
    name by default); usable as ``@annotate_function`` or ``@annotate_function(name=...)``."""
    if func is None:
        return functools.partial(annotate_function, name=name, **decorator_kwargs)
    label = name or getattr(func, "__qualname__", repr(func))

    @functools.wraps(func)
    def annotated(*args: Any, **kwargs: Any) -> Any:
        with TraceAnnotation(label, **decorator_kwargs):
            return func(*args, **kwargs)

    return annotated
