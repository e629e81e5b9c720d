"""Two matrix products at a time on the CPU engine: a large product whose operands are ready
some steps before it runs is started then on a second thread, while the calling thread runs
the steps in between (another large product among them).

Why: the products of a training step are nine tenths of its time and each is one OpenBLAS
call. Splitting one product between two threads (``fungraph._blas``'s tiles) packs its
shared operand once per tile and costs 8-17% more CPU time; two independent products, each
whole on its own thread, cost nothing extra. In the MLP step the weight gradient of the last
hidden layer is independent of the gradient flowing to the layer below and of that layer's
weight gradient, so it runs beside them (XLA's CPU runtime likewise runs independent
operations at once).

:func:`overlap_starts` picks the products and the step each starts at, for
``plan_memory(early_starts=...)``: the plan then keeps the product's output buffer to itself
from that step (``MemoryPlan.early``), and the product's operands stay live until its own step
as they always did, so nothing the calling thread runs meanwhile touches the product's memory.
:class:`Overlap` runs one: a task the overlap thread takes if it is free, and that the caller
takes back at the product's own step if the thread has not begun it (on a machine whose cores
are busy, the caller never waits for a thread that got no core to start).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import _blas
from fungraph.ir import Eqn, Graph, Var

#: Products with fewer multiply-adds run where they stand: a handover costs tens of
#: microseconds, and below this OpenBLAS runs a product on one thread anyway.
MIN_OVERLAP_PRODUCT = _blas.SMALL_PRODUCT

MIN_CORES = 0.9
"""The engine starts products early only while the process had at least this share of a core
over the last 0.1 s (``_blas.CORES``: the machine's idle time plus its own CPU time). Less
means other processes hold both cores: a second thread then only slices the process's share
finer (at load 12-16 on 2 cores the overlap saved nothing), and running in order lets the
started product's weight update fold into it (``cpu_updates``)."""

#: products started early, and those the caller took back because the thread had not begun them
OVERLAP_STATS = {"overlapped": 0, "taken_back": 0}


def product_size(e: Eqn) -> int:
    """Multiply-adds of a ``dot_general`` on floating-point operands (0 for anything else)."""
    if e.primitive.name != "dot_general" or np.dtype(e.outputs[0].aval.dtype).char not in "fdFD":
        return 0
    (lc, _), _ = e.params["dimension_numbers"]
    lhs = e.inputs[0].aval
    return int(np.prod(e.outputs[0].aval.shape, dtype=np.int64)) * int(np.prod([lhs.shape[d] for d in lc],
                                                                            dtype=np.int64))


def overlap_starts(graph: Graph) -> dict[int, int]:
    """``{equation: step}``: each large product that can start at an earlier step, with
    another large product among the steps in between to run beside, and that step. At most
    one runs early at a time: a product's window ends where it stands, and the next begins
    after it."""
    producer = {o: i for i, e in enumerate(graph.eqns) for o in e.outputs}
    large = [i for i, e in enumerate(graph.eqns) if product_size(e) >= MIN_OVERLAP_PRODUCT]
    starts: dict[int, int] = {}
    free_from = 0
    for j in large:
        ready = max((producer.get(a, -1) + 1 for a in graph.eqns[j].inputs if isinstance(a, Var)), default=0)
        start = max(ready, free_from)
        if any(start <= k < j for k in large):
            starts[j] = start
            free_from = j + 1
    return starts


def worth_overlapping() -> bool:
    """Whether to start products early on this call: two products may run at once
    (:func:`fungraph._blas.may_overlap`) and the process has had :data:`MIN_CORES` lately."""
    return _blas.may_overlap() and _blas.CORES.available() >= MIN_CORES


# --- the overlap thread ------------------------------------------------------------------------

_FREE, _RUNNING, _DONE = range(3)


class Overlap:
    """One product started early: ``run()`` on the overlap thread or, if that has not begun it
    by then, on the caller at :meth:`join`, which returns the product's result."""

    __slots__ = ("args", "cond", "error", "fn", "kwargs", "result", "state")

    def __init__(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.state = _FREE
        self.result: Any = None
        self.error: BaseException | None = None
        self.cond = threading.Condition(threading.Lock())
        _blas.OVERLAPPED.add(1)

    def _claim(self) -> bool:
        with self.cond:
            if self.state != _FREE:
                return False
            self.state = _RUNNING
            return True

    def _run(self) -> None:
        try:
            self.result = self.fn(*self.args, **self.kwargs)
        except BaseException as err:  # noqa: BLE001 - re-raised on the caller at join
            self.error = err
        finally:
            _blas.OVERLAPPED.add(-1)
            with self.cond:
                self.state = _DONE
                self.cond.notify_all()

    def run_if_free(self) -> None:
        """The overlap thread's part: the product, unless the caller took it back."""
        if self._claim():
            self._run()

    def join(self) -> Any:
        """The product's result, computed here if no thread has begun it; the thread's error
        raised here if it failed."""
        if self._claim():
            OVERLAP_STATS["taken_back"] += 1
            self._run()
        else:
            with self.cond:
                while self.state != _DONE:
                    self.cond.wait()
        self.args = self.kwargs = None  # type: ignore[assignment]
        if self.error is not None:
            raise self.error
        return self.result


class _Thread:
    """The overlap thread of this process (started on first use, and again in a forked child,
    which has none of its parent's threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pid = -1
        self.tasks: queue.SimpleQueue[Overlap] = queue.SimpleQueue()

    def submit(self, task: Overlap) -> None:
        with self.lock:
            if self.pid != os.getpid():
                self.pid = os.getpid()
                self.tasks = queue.SimpleQueue()
                threading.Thread(target=self._serve, args=(self.tasks,), name="fungraph-overlap",
                                 daemon=True).start()
            self.tasks.put(task)

    @staticmethod
    def _serve(tasks: queue.SimpleQueue[Overlap]) -> None:
        while True:
            tasks.get().run_if_free()


_THREAD = _Thread()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_THREAD.__init__)


def start(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Overlap:
    """``fn(*args, **kwargs)`` begun on the overlap thread; :meth:`Overlap.join` gives its result."""
    OVERLAP_STATS["overlapped"] += 1
    task = Overlap(fn, args, kwargs)
    _THREAD.submit(task)
    return task


