"""How the CPU engine runs a matrix product on numpy's OpenBLAS: :func:`matmul`.

OpenBLAS splits a product statically between its threads and waits for the slowest, so when
the cores are taken by other processes a thread descheduled for a time slice stalls the whole
product: on a loaded 2-core machine a 256x1024x10 float32 product took 10-20 ms with two
threads and 0.1 ms with one, and the MLP step's products 4x longer in all. XLA's Eigen pool
lets the calling thread take the work of absent workers, so it does not pay this.

So a product below :data:`SMALL_PRODUCT` multiply-adds runs on one OpenBLAS thread. A large
one runs on as many threads as the process had cores lately (:class:`_Cores`): on a quiet
machine (every one of OpenBLAS's threads has a core) as one OpenBLAS call, which is fastest
there (the MLP step 16 ms against 17-18 ms in tiles, JAX 17 ms); on a contended one cut into
tiles of its output that the calling thread and a pool of worker threads take in turn, each a
single-threaded OpenBLAS call: a worker that gets no core takes no tile, and one that loses
its core mid-tile has that tile taken back (:class:`_Job`).
``FUNGRAPH_BLAS_THREADS`` (a number) instead runs every product as one OpenBLAS call on that
many of its threads. Where numpy uses another BLAS, products are plain ``np.matmul``.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

SMALL_PRODUCT = 1 << 24
"""Products with fewer multiply-adds (m*n*k) than this gain at most a millisecond or so from a
second thread, and lose far more when that thread waits for a core: one OpenBLAS call."""

QUIET_MARGIN = 0.25
"""Cores short of OpenBLAS's thread count that still count as a quiet machine, where one
OpenBLAS call on all its threads beats tiles (``/proc/stat``'s ticks make the measure noisy)."""

TILES_PER_THREAD = 4
"""Tiles per thread of a split product: enough that a thread that lost its core for a while
leaves a small share to the others, few enough that each tile is a full-speed BLAS call."""

TILE_ALIGN = 16
"""Tile edges fall on multiples of this many rows or columns (OpenBLAS's kernels' blocking)."""

MIN_TILE = 128
"""The narrowest tile: each tile packs the operand it does not cut again (about as costly as
ten multiply-adds an element), so a tile this wide spends under a tenth of its time on that."""

_BLAS_TYPES = frozenset("fdFD")

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
            "openblas_set_num_threads")


@functools.cache
def _openblas_library() -> ctypes.CDLL | None:
    """numpy's OpenBLAS, found among the libraries this process loaded (as threadpoolctl
    does); None when numpy uses another BLAS or the maps are unreadable."""
    import numpy  # noqa: F401  (numpy loads its BLAS)

    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line})
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if any(hasattr(lib, name) for name in _SETTERS):
            return lib
    return None


@functools.cache
def _openblas() -> tuple[Callable[[int], None], int] | None:
    """numpy's OpenBLAS thread setter and its thread count at first use; None when numpy uses
    another BLAS."""
    lib = _openblas_library()
    if lib is None:
        return None
    for name in _SETTERS:
        getter_name = name.replace("set_num", "get_num")
        if hasattr(lib, name) and hasattr(lib, getter_name):
            setter, getter = getattr(lib, name), getattr(lib, getter_name)
            setter.argtypes, setter.restype = [ctypes.c_int], None
            getter.argtypes, getter.restype = [], ctypes.c_int
            return setter, int(getter())
    return None


_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


@functools.cache
def _cblas_gemm(char: str) -> Callable[..., None] | None:
    """numpy's OpenBLAS's ``cblas_sgemm`` (``char`` ``"f"``) or ``cblas_dgemm`` (``"d"``),
    with its integer width (the ``64_`` builds take 64-bit sizes); None where absent."""
    lib = _openblas_library()
    if lib is None:
        return None
    letter = {"f": "s", "d": "d"}[char]
    for name, size in ((f"scipy_cblas_{letter}gemm64_", ctypes.c_int64), (f"cblas_{letter}gemm64_", ctypes.c_int64),
                       (f"cblas_{letter}gemm", ctypes.c_int)):
        if hasattr(lib, name):
            fn = getattr(lib, name)
            scalar, ptr = (ctypes.c_float if char == "f" else ctypes.c_double), ctypes.c_void_p
            fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, size, size, size, scalar, ptr, size, ptr, size,
                           scalar, ptr, size]
            fn.restype = None
            return fn
    return None


def _operand_layout(x: np.ndarray) -> tuple[int, int] | None:
    """(transpose flag, leading dimension) of a 2-d operand that is a row-major matrix or the
    transposed view of one, as cblas reads it; None for any other layout."""
    item = x.itemsize
    rows, cols = x.shape
    s0, s1 = x.strides
    if s1 == item and s0 % item == 0 and s0 // item >= max(cols, 1):
        return _NO_TRANS, s0 // item
    if s0 == item and s1 % item == 0 and s1 // item >= max(rows, 1):
        return _TRANS, s1 // item
    return None


def gemm_update(c: np.ndarray, a: np.ndarray, b: np.ndarray, alpha: float) -> bool:
    """``c += alpha * (a @ b)`` in place as one BLAS call (beta 1): a weight update
    ``w - lr * (x.T @ g)`` without the product's own buffer and the pass that subtracts it.
    False, with ``c`` untouched, where that call cannot be made: another BLAS, a dtype other
    than float32/float64, an operand that is not a row-major matrix or its transpose, ``c``
    not C-contiguous or overlapping an operand. The product runs on one OpenBLAS call on the
    threads :func:`matmul` would give it, never in tiles."""
    char = c.dtype.char
    if char not in "fd" or a.dtype != c.dtype or b.dtype != c.dtype or c.ndim != 2 or a.ndim != 2 or b.ndim != 2:
        return False
    m, k = a.shape
    if b.shape != (k, c.shape[1]) or c.shape[0] != m or min(m, k, c.shape[1]) == 0:
        return False
    gemm, blas = _cblas_gemm(char), _openblas()
    la, lb = _operand_layout(a), _operand_layout(b)
    if gemm is None or blas is None or la is None or lb is None or not c.flags.c_contiguous \
            or not c.flags.writeable or np.may_share_memory(c, a) or np.may_share_memory(c, b):
        return False
    n = c.shape[1]
    fixed = _fixed_threads()
    threads = threads_for(m * n * k, blas[1], fixed)
    if threads > 1 and fixed is None and CORES.available() < blas[1] - QUIET_MARGIN:
        threads = 1
    with_blas_threads(threads, lambda: gemm(_ROW_MAJOR, la[0], lb[0], m, n, k, alpha, a.ctypes.data, la[1],
                                            b.ctypes.data, lb[1], 1.0, c.ctypes.data, n))
    return True


def _fixed_threads() -> int | None:
    raw = os.environ.get("FUNGRAPH_BLAS_THREADS", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"FUNGRAPH_BLAS_THREADS={raw!r}: expected a positive whole number of threads")
    return int(raw)


class _Overlapped:
    """How many products the CPU engine runs on its overlap thread now
    (``backends/cpu_overlap.py``): while one runs, every product runs on one thread, since the
    two products already keep two cores busy."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0

    def add(self, n: int) -> None:
        with self.lock:
            self.count += n


OVERLAPPED = _Overlapped()


def may_overlap() -> bool:
    """Whether two products may run at a time, each on one thread: with numpy's OpenBLAS on
    several threads (another BLAS picks its own threads), unless ``FUNGRAPH_BLAS_THREADS``
    asks for several threads per product."""
    blas = _openblas()
    fixed = _fixed_threads()
    return blas is not None and blas[1] > 1 and (fixed is None or fixed == 1)


def threads_for(multiply_adds: int, default: int, fixed: int | None | bool = False) -> int:
    """The threads a product of ``multiply_adds`` (m*n*k) runs on when OpenBLAS has ``default``:
    ``FUNGRAPH_BLAS_THREADS`` when set (``fixed``, when the caller has read it already), else
    one below :data:`SMALL_PRODUCT` or while the engine overlaps two products
    (:data:`OVERLAPPED`), else as many of ``default`` as there were cores for this process
    lately (:data:`CORES`): the caller and that many less one pool workers sharing its tiles."""
    if fixed is False:
        fixed = _fixed_threads()
    if fixed is not None:
        return fixed
    if default <= 1 or multiply_adds < SMALL_PRODUCT or OVERLAPPED.count:
        return 1
    return max(1, round(min(default, CORES.available())))


class _Cores:
    """The cores this process could have used over the last :attr:`window` seconds: the
    machine's idle time plus this process's own CPU time, per second of wall time (Linux's
    ``/proc/stat``; elsewhere, unknown, taken as unlimited).

    A second thread speeds a product up only when it gets a core of its own. On a machine whose
    cores other processes keep busy, the scheduler shares them between processes (per session,
    with autogroup), so a second thread only slices this process's share finer and adds the
    tiles' overhead: at load 13 on 2 cores, the MLP step took 165 ms with its products shared
    between two threads and 136 ms on one (JAX 140 ms). Counting the process's own time keeps a
    quiet machine's products on both cores while they keep both busy."""

    window = 0.1

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last: tuple[float, float, float] | None = None
        self.cores = float("inf")
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def _sample(self) -> tuple[float, float, float] | None:
        """(wall seconds, idle core-seconds of the machine, CPU seconds of this process)."""
        try:
            with open("/proc/stat", "rb") as f:
                fields = f.readline().split()
        except OSError:
            return None
        if len(fields) < 6 or fields[0] != b"cpu":
            return None
        own = os.times()
        return time.monotonic(), (int(fields[4]) + int(fields[5])) / self.tick, own.user + own.system

    def available(self) -> float:
        with self.lock:
            now = time.monotonic()
            if self.last is not None and now - self.last[0] < self.window:
                return self.cores
            sample = self._sample()
            if sample is None:
                return self.cores
            if self.last is not None:
                wall = sample[0] - self.last[0]
                self.cores = (sample[1] - self.last[1] + sample[2] - self.last[2]) / wall
            self.last = sample
            return self.cores


CORES = _Cores()


# --- OpenBLAS's thread count while products run ---------------------------------------------


class _Count:
    """The thread count set on OpenBLAS for products in progress, held by a depth counter so
    that concurrent products (several threads running executables) set it once and the last
    one out restores OpenBLAS's own count for the rest of the program."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.count = 0

    def enter(self, setter: Callable[[int], None], wanted: int) -> None:
        with self.lock:
            if self.depth == 0 or self.count != wanted:
                setter(wanted)
                self.count = wanted
            self.depth += 1

    def leave(self, setter: Callable[[int], None], default: int) -> None:
        with self.lock:
            self.depth -= 1
            if self.depth == 0 and self.count != default:
                setter(default)
                self.count = default


_COUNT = _Count()


def with_blas_threads(threads: int, run: Callable[[], Any]) -> Any:
    """``run()`` with OpenBLAS on ``threads`` threads, its own count restored afterwards."""
    blas = _openblas()
    if blas is None:
        return run()
    setter, default = blas
    _COUNT.enter(setter, threads)
    try:
        return run()
    finally:
        _COUNT.leave(setter, default)


# --- the pool that shares a product's tiles --------------------------------------------------

_FREE, _WORKER, _CLAIMED, _DONE = range(4)

#: products split into tiles, tiles a worker delivered, tiles the caller took back from a late worker
BLAS_STATS = {"split_products": 0, "worker_tiles": 0, "reclaimed_tiles": 0}


class _Job:
    """The tiles of one product (``a[i] @ b[i]`` into ``out[i]``), taken in turn.

    The caller writes its tiles straight into ``out``; a worker writes into its own scratch and
    copies into ``out`` under the job's lock, unless the caller has claimed that tile meanwhile.
    The caller, out of free tiles, waits for the workers' tiles about as long as one of its own
    took, then computes any still running itself: a worker that lost its core mid-tile costs
    the product at most that wait, never the length of the descheduling, and its late result
    only reaches its scratch."""

    __slots__ = ("a", "b", "cond", "left", "out", "state")

    def __init__(self, a: list[np.ndarray], b: list[np.ndarray], out: list[np.ndarray]) -> None:
        self.a, self.b, self.out = a, b, out
        self.state = [_FREE] * len(out)
        self.left = len(out)
        self.cond = threading.Condition(threading.Lock())

    def _take(self, mark: int) -> int | None:
        with self.cond:
            for i, s in enumerate(self.state):
                if s == _FREE:
                    self.state[i] = mark
                    return i
        return None

    def _finish(self, i: int) -> None:
        self.state[i] = _DONE
        self.left -= 1
        if self.left == 0:
            self.cond.notify_all()

    def run_caller(self) -> None:
        """The caller's part: free tiles, then the workers' late ones; returns when all are in ``out``."""
        took = 0.0
        while (i := self._take(_CLAIMED)) is not None:
            t0 = time.perf_counter()
            np.matmul(self.a[i], self.b[i], out=self.out[i])
            took = time.perf_counter() - t0
            with self.cond:
                self._finish(i)
        with self.cond:
            if self.left:
                self.cond.wait(took if took > 0 else None)
            late = [i for i, s in enumerate(self.state) if s == _WORKER]
            for i in late:
                self.state[i] = _CLAIMED
            BLAS_STATS["reclaimed_tiles"] += len(late)
        for i in late:
            np.matmul(self.a[i], self.b[i], out=self.out[i])
        with self.cond:
            for i in late:
                self._finish(i)

    def run_worker(self, scratch: _Scratch) -> None:
        """A worker's part: free tiles into its scratch, each delivered into ``out``."""
        while (i := self._take(_WORKER)) is not None:
            part = scratch.view(self.out[i])
            np.matmul(self.a[i], self.b[i], out=part)
            self.deliver(i, part)

    def deliver(self, i: int, part: np.ndarray) -> bool:
        """Copy a worker's tile ``i`` into ``out`` unless the caller has claimed it since;
        whether it was copied."""
        with self.cond:
            if self.state[i] != _WORKER:
                return False
            np.copyto(self.out[i], part)
            self._finish(i)
            BLAS_STATS["worker_tiles"] += 1
            return True


class _Scratch:
    """A worker's growing byte buffer."""

    def __init__(self) -> None:
        self.block = np.empty(0, np.uint8)

    def view(self, like: np.ndarray) -> np.ndarray:
        if self.block.nbytes < like.nbytes:
            self.block = np.empty(like.nbytes, np.uint8)
        return self.block[:like.nbytes].view(like.dtype).reshape(like.shape)


class _Pool:
    """Daemon worker threads that each run the jobs put on one shared queue."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        for k in range(workers):
            threading.Thread(target=self._serve, name=f"fungraph-blas-{k}", daemon=True).start()

    def _serve(self) -> None:
        scratch = _Scratch()
        while True:
            self.jobs.get().run_worker(scratch)


_POOLS: dict[int, _Pool] = {}
_POOLS_LOCK = threading.Lock()


def _pool(workers: int) -> _Pool:
    with _POOLS_LOCK:
        if workers not in _POOLS:
            _POOLS[workers] = _Pool(workers)
        return _POOLS[workers]


def _after_fork_in_child() -> None:
    """A forked child has none of its parent's threads (it starts its own pools on first use),
    and a lock another thread held at the fork would stay held: both start afresh."""
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()
    _COUNT.__init__()
    CORES.__init__()
    OVERLAPPED.__init__()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _run_shared(job: _Job, workers: int) -> None:
    """Run ``job`` on the calling thread and ``workers`` pool threads, returning when all its
    tiles are in ``out``."""
    pool = _pool(workers)
    BLAS_STATS["split_products"] += 1
    for _ in range(workers):
        pool.jobs.put(job)
    job.run_caller()


# --- products ---------------------------------------------------------------------------------


def _edges(extent: int, tiles: int) -> list[int]:
    """Cut points of ``range(extent)`` into at most ``tiles`` parts on multiples of :data:`TILE_ALIGN`."""
    step = -(-extent // max(tiles, 1))
    step = -(-step // TILE_ALIGN) * TILE_ALIGN
    return list(range(0, extent, step)) + [extent]


def _tiles(a: np.ndarray, b: np.ndarray, out: np.ndarray, count: int) -> _Job | None:
    """``out = a @ b`` as about ``count`` products into tiles of ``out``: bands of rows when
    ``out`` has more rows than columns (each tile then packs all of ``b`` again, the smaller
    operand), else bands of columns; None when ``out`` cannot be cut into BLAS-ready tiles or
    overlaps an operand."""
    m, n = out.shape[-2:]
    if out.strides[-1] != out.itemsize or np.may_share_memory(out, a) or np.may_share_memory(out, b):
        return None  # one call: numpy copies an operand that overlaps out, which tiles would not
    extent = max(m, n)
    edges = _edges(extent, min(count, extent // MIN_TILE))
    if len(edges) < 3:
        return None
    spans = [slice(i, j) for i, j in zip(edges, edges[1:])]
    if m >= n:
        return _Job([a[..., s, :] for s in spans], [b] * len(spans), [out[..., s, :] for s in spans])
    return _Job([a] * len(spans), [b[..., :, s] for s in spans], [out[..., :, s] for s in spans])


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.matmul(a, b, out=out)`` (2-d or stacked operands, broadcast as ``np.matmul`` does),
    run under the thread policy of this module's docstring."""
    blas = _openblas()
    if blas is None or a.ndim < 2 or b.ndim < 2:
        return np.matmul(a, b, out=out)
    if a.ndim == 2 and b.ndim == 2:
        multiply_adds = a.shape[0] * a.shape[1] * b.shape[1]
    else:
        multiply_adds = math.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])) * a.shape[-2] * a.shape[-1] \
            * b.shape[-1]
    fixed = _fixed_threads()
    threads = threads_for(multiply_adds, blas[1], fixed)
    if fixed is not None or threads == 1 or CORES.available() >= blas[1] - QUIET_MARGIN \
            or np.result_type(a, b).char not in _BLAS_TYPES:
        return with_blas_threads(threads, lambda: np.matmul(a, b, out=out))
    if out is None:
        out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]),
                       np.result_type(a, b))
    job = _tiles(a, b, out, TILES_PER_THREAD * threads)
    if job is None:
        return with_blas_threads(threads, lambda: np.matmul(a, b, out=out))
    with_blas_threads(1, lambda: _run_shared(job, threads - 1))
    return out
