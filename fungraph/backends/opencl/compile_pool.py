"""Compiling a new program's kernels in parallel, in helper processes, on PoCL.

PoCL builds a program at ``clBuildProgram`` but compiles each kernel's work-group function at
its first launch (once per work-group size), under a process-wide lock: one process compiles
one kernel at a time, so the cold first call of a training step spent seconds compiling its
kernels on one core. Processes do not share that lock, and they share PoCL's kernel cache
(``POCL_CACHE_DIR``, by default ``~/.cache/pocl``): helper processes
(:mod:`~fungraph.backends.opencl.compile_worker`, kept for the life of the process; started
while the executable builds its program when PoCL's cache is empty, else once the build shows
the program was new) build the same source once it is built, which PoCL takes from its cache,
and launch the later kernels in program order, each once per launch shape PoCL compiles apart
(:func:`probe`: one work-group where that compiles the same) over zeroed buffers; their
work-group functions land in the cache. Meanwhile the executable's warm-up launches, in program
order, compile the first kernels, and each helper's kernels are launched once it is done, from
the cache.

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
import re
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fungraph.backends.opencl.kernels.spec import KernelSpec
from fungraph.backends.opencl.program import ENGINE_STATS, Slot
from fungraph.backends.opencl.sharing import Function

WORKERS_ENV = "FUNGRAPH_OPENCL_BUILD_WORKERS"
MAX_WORKERS = 8
#: A program whose kernels are estimated to compile in less than this (seconds of one core)
#: is compiled by the executable alone: a helper's job costs it ~0.1-0.2 s.
MIN_WORK = 0.5
#: ``clBuildProgram`` of a program PoCL had cached took ~0.05 s of CPU for the MLP step's 26
#: kernels, one compiled from source 0.8 s (0.2 s more for each later program in the process).
CACHED_BUILD_CPU = 0.12
#: Estimated seconds before a helper starts compiling: starting one (Python, numpy, pyopencl
#: and a context; less the time since it was started) and, for every job, building the
#: program from PoCL's cache.
SPAWN_SECONDS = 0.6
JOB_SECONDS = 0.15
#: A helper that has not answered after this many times its share's estimate (and at least
#: ``MIN_TIMEOUT`` seconds) is stopped.
TIMEOUT_FACTOR = 30.0
MIN_TIMEOUT = 60.0
_SCRIPT = Path(__file__).with_name("compile_worker.py")
_FUNCTION = re.compile(r"__kernel\s+void\s+(\w+)\s*\((?:.|\n)*?\n}\n")


def compile_seconds(source_chars: int) -> float:
    """A rough estimate of PoCL's compile time for one work-group function of a kernel of
    ``source_chars`` characters (one core): ~30 ms plus ~50 us per character (the MLP step's
    kernels, 0.02-0.09 s for elementwise and reduction kernels, 0.1-0.5 s for products)."""
    return 0.03 + 5e-5 * source_chars


#: PoCL compiles a kernel separately for grids whose widest dimension reaches this (its CPU
#: devices' ``grid_width_specialization_limit``, ``USHRT_MAX``) and for smaller ones.
SMALL_GRID = 65535


def _specializations(spec: KernelSpec) -> list[tuple]:
    """The launches of ``spec`` that PoCL compiles separately: one per work-group size, kind of
    global offset and side of :data:`SMALL_GRID` (the first of each)."""
    seen: dict[tuple, tuple] = {}
    for gsize, lsize, offset in spec.launches:
        if all(d > 0 for d in gsize):
            key = (lsize, bool(offset) and any(offset), max(gsize) >= SMALL_GRID)
            seen.setdefault(key, (gsize, lsize, offset))
    return list(seen.values())


def probe(launch: tuple) -> tuple:
    """The smallest launch PoCL compiles as it does ``launch``: one work-group per dimension at
    the same offset, except that a dimension of :data:`SMALL_GRID` or more keeps the fewest
    groups that reach it. Its work-items are some of ``launch``'s, so it touches only what
    ``launch`` does. A launch that leaves the work-group size to the driver stays whole."""
    gsize, lsize, offset = launch
    if lsize is None:
        return launch
    grid = tuple(lo if g < SMALL_GRID else min(g, -(-SMALL_GRID // lo) * lo) for g, lo in zip(gsize, lsize))
    return grid, lsize, offset


@dataclass
class _Kernel:
    """A kernel function to compile: its slots' sizes in bytes, its integer arguments' C
    types, and its launches (probes), each with the arguments of the spec that makes it."""

    slot_bytes: list[int]
    types: list[str]
    runs: dict[tuple, tuple[list[int], tuple]]
    source_chars: int

    @property
    def cost(self) -> float:
        return compile_seconds(self.source_chars) * len(self.runs)


def _kernels(specs: Sequence[KernelSpec], functions: dict[str, Function], lengths: dict[str, int],
             slots: Sequence[Slot]) -> dict[str, _Kernel]:
    """Every function of ``specs`` (``functions``: by spec name; ``lengths``: of their
    sources) in program order, with one probe launch per specialization."""
    out: dict[str, _Kernel] = {}
    for spec in specs:
        if not spec.warm:           # a loop kernel: its trip count would come from zeroed inputs
            continue
        fn = functions.get(spec.name, Function(spec.name))
        k = out.setdefault(fn.name, _Kernel([slots[s].aval.nbytes for s, _ in spec.slots], [t for t, _ in fn.args],
                                            {}, lengths.get(fn.name, len(spec.source))))
        for launch in _specializations(spec):
            key = (launch[1], bool(launch[2]) and any(launch[2]), max(launch[0]) >= SMALL_GRID)
            k.runs.setdefault(key, ([v for _, v in fn.args], probe(launch)))
    return {name: k for name, k in out.items() if k.runs}


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
    """One helper process (:mod:`~fungraph.backends.opencl.compile_worker`) and its pipes.
    Jobs carry a number that their answer repeats, so an answer left unread (a warm-up that
    raised) is never taken for a later job's."""

    def __init__(self, platform: str, device: str) -> None:
        self.key = (platform, device)
        # -P: the script's folder (this package) stays off sys.path. Unpinned: PoCL's pinned
        # workers (device.POCL_DEFAULTS) would put the helper's compiling thread on the core
        # where the executable's compiles.
        self.proc = subprocess.Popen(
            [sys.executable, "-P", str(_SCRIPT), json.dumps({"platform": platform, "device": device})],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=dict(os.environ, POCL_AFFINITY="0"))
        self.started = time.monotonic()
        self.jobs = 0
        self._unread = b""

    def send(self, job: dict) -> int | None:
        """Send ``job``; its number, or None when the helper is gone."""
        self.jobs += 1
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({**job, "id": self.jobs}).encode() + b"\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):
            return None
        return self.jobs

    def reply(self, job: int, deadline: float) -> dict | None:
        """Job ``job``'s answer, or None when the helper died, answered nonsense or
        ``deadline`` (``time.monotonic``) passed."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            line, sep, rest = self._unread.partition(b"\n")
            if sep:
                self._unread = rest
                try:
                    answer = json.loads(line)
                except ValueError:
                    return None
                if not isinstance(answer, dict):
                    return None
                if answer.get("id") == job:
                    return answer
                continue
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(fd, 1 << 16) if ready else b""
            if not chunk:
                return None
            self._unread += chunk

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
        try:
            if w.proc.stdin is not None:
                w.proc.stdin.close()
        except OSError:
            pass
    for w in list(_POOL):
        try:
            w.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            w.stop()
    _POOL.clear()


atexit.register(close_pool)


@dataclass
class Jobs:
    """Kernel functions handed to helpers: ``owner`` names the helper (an index into ``sent``,
    each helper's job: the worker, the job's number, its kernel count and estimate) of each
    function it compiles."""

    owner: dict[str, int]
    sent: list[tuple[Worker, int, int, float]]
    answered: set[int] = field(default_factory=set)

    def ready(self, name: str) -> None:
        """Before the first launch of kernel function ``name`` here: wait for the helper that
        compiles it, once. A helper that failed or ran out of time is dropped, and its
        kernels compile at their first launch here."""
        i = self.owner.get(name)
        if i is None or i in self.answered:
            return
        self.answered.add(i)
        worker, job, count, estimate = self.sent[i]
        answer = worker.reply(job, time.monotonic() + max(MIN_TIMEOUT, TIMEOUT_FACTOR * estimate))
        if answer is not None and answer.get("ok"):
            ENGINE_STATS["kernels_compiled_in_helpers"] += count
        else:
            _drop(worker)


def _chunks(costs: list[float], lags: list[float]) -> list[int]:
    """Cut ``costs`` (in program order) into ``len(lags) + 1`` runs that finish together: the
    executable takes the first, helper ``i`` the next after a start-up of ``lags[i]``; the
    index where each run ends."""
    total = sum(costs)
    finish = (total + sum(lags)) / (len(lags) + 1)
    ends, done, target = [], 0.0, finish
    for j, c in enumerate(costs):
        if len(ends) < len(lags) and done + c / 2 > target:
            ends.append(j)
            target += finish - lags[len(ends) - 1]
        done += c
    return ends + [len(costs)] * (len(lags) + 1 - len(ends))


def pocl_cache_empty() -> bool:
    """Whether PoCL's kernel cache folder (``POCL_CACHE_DIR``, else ``~/.cache/pocl/kcache``)
    holds no program (programs are folders; PoCL leaves a temporary file there when it starts):
    then no program can come from it."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    root = os.environ.get("POCL_CACHE_DIR") or os.path.join(base, "pocl", "kcache")
    try:
        with os.scandir(root) as entries:
            return not any(e.is_dir() for e in entries)
    except OSError:
        return True


def start(dev: Any, specs: Sequence[KernelSpec]) -> None:
    """Before building the program of ``specs``: start the helpers it will use when PoCL's
    cache is empty (a first run, a fresh container), so that they are ready when it is built.
    Otherwise PoCL may have the program, and helpers start only once its build shows it had
    not (an idle helper's start had cost a warm first call 0.2 s of CPU and, on this loaded
    machine, ~0.6 s)."""
    if (specs and pocl_cache_on(dev.info) and sum(compile_seconds(len(s.source)) for s in specs) >= MIN_WORK
            and pocl_cache_empty()):
        n = worker_count()
        if n:
            _workers(n, dev.info)


def share(dev: Any, built: Any, specs: Sequence[KernelSpec], slots: Sequence[Slot]) -> Jobs | None:
    """Hand a share of the compilation of ``specs``, the kernels of the program ``built``
    (:class:`~fungraph.backends.opencl.building.Built`) over ``slots``, to helper processes
    (see the module docstring), or None where they would not help."""
    if not specs or built.cpu_seconds < CACHED_BUILD_CPU or not pocl_cache_on(dev.info):
        return None
    n = worker_count()
    lengths = {m.group(1): len(m.group(0)) for m in _FUNCTION.finditer(built.source)}
    kernels = _kernels(specs, built.functions, lengths, slots)
    total = sum(k.cost for k in kernels.values())
    if n == 0 or total < MIN_WORK:
        return None
    workers = _workers(n, dev.info)
    if not workers:
        return None
    names = list(kernels)
    now = time.monotonic()
    lags = [max(JOB_SECONDS, SPAWN_SECONDS - (now - w.started)) for w in workers]
    ends = _chunks([kernels[k].cost for k in names], lags)
    owner: dict[str, int] = {}
    sent: list[tuple[Worker, int, int, float]] = []
    for worker, start, end in zip(workers, ends, ends[1:]):
        if start == end:
            continue
        job = {"source": built.source, "options": list(built.options),
               "kernels": [{"name": k, "slot_bytes": kernels[k].slot_bytes, "types": kernels[k].types,
                            "runs": list(kernels[k].runs.values())} for k in names[start:end]]}
        number = worker.send(job)
        if number is None:
            _drop(worker)
            continue
        owner.update(dict.fromkeys(names[start:end], len(sent)))
        sent.append((worker, number, end - start, sum(kernels[k].cost for k in names[start:end])))
    return Jobs(owner, sent) if sent else None
