"""Compiling a new program's kernels in parallel, in helper processes, on PoCL.

PoCL builds a program at ``clBuildProgram`` but compiles each kernel's work-group function at
its first launch (once per work-group size), under a process-wide lock: one process compiles
one kernel at a time, so the cold first call of a training step spent seconds compiling its
kernels on one core. Processes do not share that lock, and they share PoCL's kernel cache
(``POCL_CACHE_DIR``, by default ``~/.cache/pocl``): after the executable has built its
program, helper processes (:mod:`~fungraph.backends.opencl.compile_worker`, kept for the
life of the process) build the same source, which PoCL takes from its cache, and launch a share
of the kernels with the executable's own launch shapes on a zeroed buffer; their work-group
functions land in the cache. Meanwhile the executable's warm-up launches compile its own share,
then it waits for the helpers and launches the rest, which PoCL loads from the cache.

Used only where it can help: a PoCL CPU device with its kernel cache on, a program compiled
now (not taken from a cache; a build of under :data:`CACHED_BUILD_CPU` seconds of CPU came
from PoCL's cache, whose kernels are compiled already), and an estimated compile time of at
least :data:`MIN_WORK` seconds. ``FUNGRAPH_OPENCL_BUILD_WORKERS`` sets the number of helpers
(default: one per available core but one, at most :data:`MAX_WORKERS`; ``0``: none). A helper
that fails, or does not answer within its time, is dropped and the executable compiles what is
left itself: the kernels and their results never depend on the helpers.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fungraph.backends.opencl.kernels.spec import KernelSpec
from fungraph.backends.opencl.program import ENGINE_STATS, Slot

WORKERS_ENV = "FUNGRAPH_OPENCL_BUILD_WORKERS"
MAX_WORKERS = 8
#: A program whose kernels are estimated to compile in less than this (seconds of one core)
#: is compiled by the executable alone: a helper's job costs it ~0.1-0.2 s.
MIN_WORK = 0.5
#: ``clBuildProgram`` of a program PoCL had cached took ~0.05 s of CPU for the MLP step's 26
#: kernels, one compiled from source 0.8 s (0.2 s more for each later program in the process).
CACHED_BUILD_CPU = 0.12
#: Estimated seconds before a helper starts compiling: starting one (Python, numpy, pyopencl
#: and a context) and, for every job, building the program from PoCL's cache.
SPAWN_SECONDS = 0.45
JOB_SECONDS = 0.15
#: A helper that has not answered after this many times its share's estimate (and at least
#: ``MIN_TIMEOUT`` seconds) is stopped.
TIMEOUT_FACTOR = 30.0
MIN_TIMEOUT = 60.0
_SCRIPT = Path(__file__).with_name("compile_worker.py")


def compile_seconds(spec: KernelSpec) -> float:
    """A rough estimate of PoCL's compile time for one work-group function of ``spec`` (one
    core): ~30 ms per kernel plus ~50 us per character of source (the MLP step's kernels,
    0.02-0.09 s for elementwise and reduction kernels, 0.1-0.5 s for products)."""
    return 0.03 + 5e-5 * len(spec.source)


def _specializations(spec: KernelSpec) -> list[tuple]:
    """The launches of ``spec`` that PoCL compiles separately: one per work-group size and
    whether the global offset is zero (the grid's size only matters past a limit, so each
    is kept with its own size)."""
    seen: dict[tuple, tuple] = {}
    for gsize, lsize, offset in spec.launches:
        if all(d > 0 for d in gsize):
            seen.setdefault((lsize, bool(offset) and any(offset)), (gsize, lsize, offset))
    return list(seen.values())


def worker_count() -> int:
    """How many helper processes to use: ``FUNGRAPH_OPENCL_BUILD_WORKERS``, else one per
    available core but one."""
    value = os.environ.get(WORKERS_ENV, "").strip()
    if value:
        try:
            return max(0, min(int(value), MAX_WORKERS))
        except ValueError:
            raise ValueError(f"{WORKERS_ENV}={value!r} is not a number of processes") from None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(0, min(cores - 1, MAX_WORKERS))


def pocl_cache_on(info: Any) -> bool:
    """Whether helpers can hand kernels over: a PoCL CPU device whose kernel cache is on."""
    return (os.name == "posix" and info.is_cpu and "portable computing language" in info.platform.lower()
            and os.environ.get("POCL_KERNEL_CACHE", "1").strip() != "0")


class Worker:
    """One helper process (:mod:`~fungraph.backends.opencl.compile_worker`) and its pipes."""

    def __init__(self, platform: str, device: str) -> None:
        self.key = (platform, device)
        self.proc = subprocess.Popen(
            [sys.executable, str(_SCRIPT), json.dumps({"platform": platform, "device": device})],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.fresh = True

    def send(self, job: dict) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):
            return False
        return True

    def reply(self, deadline: float) -> dict | None:
        """The job's answer, or None when the helper died or ``deadline`` (``time.monotonic``) passed."""
        out = self.proc.stdout
        assert out is not None
        ready, _, _ = select.select([out], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return None
        line = out.readline()
        try:
            return json.loads(line) if line else None
        except json.JSONDecodeError:
            return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


_POOL: list[Worker] = []


def _workers(n: int, info: Any) -> list[Worker]:
    """``n`` live helpers for ``info``'s device, started now where the pool has fewer."""
    key = (info.platform, info.name)
    for w in list(_POOL):
        if w.proc.poll() is not None or w.key != key:
            _drop(w)
    while len(_POOL) < n:
        try:
            _POOL.append(Worker(*key))
        except OSError:
            break
    return _POOL[:n]


def _drop(worker: Worker) -> None:
    worker.stop()
    if worker in _POOL:
        _POOL.remove(worker)


def close_pool() -> None:
    """Stop the helper processes (they start again when a program needs them)."""
    for w in list(_POOL):
        if w.proc.stdin is not None:
            w.proc.stdin.close()
    for w in list(_POOL):
        try:
            w.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            w.stop()
    _POOL.clear()


atexit.register(close_pool)


@dataclass
class Jobs:
    """Kernels handed to helpers: ``mine`` are the names the executable compiles itself
    (before :meth:`wait`), ``sent`` each helper's job and estimate."""

    mine: frozenset[str]
    sent: list[tuple[Worker, int, float]]

    def wait(self) -> None:
        """Wait for every helper's answer; a helper that failed or ran out of time is
        dropped (its kernels then compile at their first launch here)."""
        for worker, count, estimate in self.sent:
            deadline = time.monotonic() + max(MIN_TIMEOUT, TIMEOUT_FACTOR * estimate)
            answer = worker.reply(deadline)
            if answer is not None and answer.get("ok"):
                ENGINE_STATS["kernels_compiled_in_helpers"] += count
            else:
                _drop(worker)


def share(dev: Any, built: Any, specs: Sequence[KernelSpec], slots: Sequence[Slot]) -> Jobs | None:
    """Hand a share of the compilation of ``specs``, the kernels of the program ``built``
    (:class:`~fungraph.backends.opencl.building.Built`) over ``slots``, to helper processes
    (see the module docstring), or None where they would not help."""
    if not specs or built.cpu_seconds < CACHED_BUILD_CPU or not pocl_cache_on(dev.info):
        return None
    n = worker_count()
    kernels: dict[str, tuple[int, list[tuple], float]] = {}
    for spec in specs:
        launches = _specializations(spec)
        if launches and spec.name not in kernels:
            kernels[spec.name] = (len(spec.slots), launches, compile_seconds(spec) * len(launches))
    total = sum(cost for _, _, cost in kernels.values())
    if n == 0 or total < MIN_WORK:
        return None
    workers = _workers(n, dev.info)
    if not workers:
        return None
    load = [0.0] + [SPAWN_SECONDS if w.fresh else JOB_SECONDS for w in workers]
    bins: list[list[str]] = [[] for _ in load]
    for name in sorted(kernels, key=lambda k: -kernels[k][2]):
        i = min(range(len(load)), key=load.__getitem__)
        bins[i].append(name)
        load[i] += kernels[name][2]
    nbytes = max([s.aval.nbytes for s in slots], default=1) + 64
    sent = []
    for worker, names, estimate in zip(workers, bins[1:], load[1:]):
        worker.fresh = False
        if not names:
            continue
        job = {"source": built.source, "options": list(built.options), "bytes": nbytes,
               "kernels": [[k, kernels[k][0], kernels[k][1]] for k in names]}
        if worker.send(job):
            sent.append((worker, len(names), estimate))
        else:
            _drop(worker)
    return Jobs(frozenset(bins[0]), sent)
