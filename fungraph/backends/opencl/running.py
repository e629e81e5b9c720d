"""Running the built program: binding a call's inputs and outputs into the slot tables,
enqueueing its kernels back to back, and the interpreters of its steps: host round-trips,
``cond`` (one scalar read back), ``while`` (the predicate read back per iteration, or batches
of masked iterations per readback) and ``scan`` (windows moved per iteration, nothing read
back). The only waits are those scalar reads and the caller reading a result.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph.backends.opencl import control
from fungraph.backends.opencl.building import Bindings
from fungraph.backends.opencl.compile_pool import Jobs
from fungraph.backends.opencl.device import TRANSFER_STATS, Device, OpenCLArray, download, read_scalar, upload
from fungraph.backends.opencl.program import ENGINE_STATS, Slot
from fungraph.ir import Literal


class Runner:
    """Runs the ops of ``bindings`` (over ``slots``): outputs written into the donated inputs
    that ``donation`` (output slot -> input position) names, returned in ``output_plan``'s
    order (output position -> slot). Not thread safe: the executable lets one call in at a
    time."""

    def __init__(self, dev: Device, slots: Sequence[Slot], bindings: Bindings, donation: dict[int, int],
                 output_plan: Sequence[int]) -> None:
        self.dev = dev
        self.slots = slots
        self.donation = donation
        self.output_plan = output_plan
        self.buf, self.off, self.staging = bindings.buf, bindings.off, bindings.staging
        self.input_slots, self.output_slots = bindings.input_slots, bindings.output_slots
        self.window_slots = bindings.window_slots
        self.call_args, self.instances, self.windowed = bindings.call_args, bindings.instances, bindings.windowed
        self.ops = bindings.ops
        self.unwarmed = bindings.unwarmed

    def warm(self, jobs: Jobs | None = None) -> float:
        """Launch every kernel instance once (inputs: staging buffers, outputs: one dummy
        buffer, windows at iteration 0) so PoCL compiles its work-group functions now rather
        than on the first call, in program order (a kernel may read what an earlier one wrote);
        loop kernels, whose trip count comes from their inputs, are left out. With ``jobs``
        (kernels helper processes compile meanwhile, :mod:`~fungraph.backends.opencl.compile_pool`),
        a kernel a helper compiles is launched once that helper is done, from PoCL's cache."""
        nbytes = max([self.slots[s].aval.nbytes for s in self.output_slots], default=1)
        dummy = self.dev.alloc(nbytes)
        for s in self.input_slots:
            self.buf[s] = self.staging[self.slots[s].index]
            self.off[s] = 0
        for s in self.output_slots:
            self.buf[s] = dummy
            self.off[s] = 0
        for s in self.window_slots:
            parent = self.slots[s].parent
            self.buf[s] = self.buf[parent]
            self.off[s] = self.off[parent]
        self._bind_call_args()
        t0 = time.perf_counter()
        for op in self.instances:
            if id(op) in self.unwarmed:
                continue
            if jobs is not None:
                jobs.ready(op[1].function_name)
            self._launch(op)
        self.dev.queue.finish()
        seconds = time.perf_counter() - t0
        self._release()
        return seconds

    def _bind_call_args(self) -> None:
        buf, off = self.buf, self.off
        for kernel, argv, per_call, windowed in self.call_args:
            for a, s in per_call:
                argv[a], argv[a + 1] = buf[s], off[s]
            if not windowed:
                kernel.set_args(*argv)

    def _launch(self, op: tuple) -> None:
        _, kernel, argv, per_iteration, launches = op
        if per_iteration:
            buf, off = self.buf, self.off
            for a, s in per_iteration:
                argv[a], argv[a + 1] = buf[s], off[s]
            kernel.set_args(*argv)
        q = self.dev.queue
        enqueue = self.dev.cl.enqueue_nd_range_kernel
        for gsize, lsize, goff in launches:
            enqueue(q, kernel, gsize, lsize, global_work_offset=goff)
        ENGINE_STATS["launches"] += len(launches)

    def call(self, args: Sequence[Any], into: Sequence[Any] | None = None) -> list[OpenCLArray]:
        """Bind the inputs (device arrays as they are, host arrays through their staging
        buffers) and the outputs (pooled buffers, the arrays ``into``, or the buffers of donated
        device arrays, which are then deleted), enqueue every op and return the outputs."""
        dev = self.dev
        for s in self.input_slots:
            i = self.slots[s].index
            x = args[i]
            if isinstance(x, OpenCLArray):
                self.buf[s] = x.live_buffer()
                self.off[s] = x.offset
            else:
                host = np.asarray(x)
                if host.dtype != self.slots[s].aval.dtype:
                    host = host.astype(self.slots[s].aval.dtype)
                self.buf[s] = upload(dev, host, self.staging[i])
                self.off[s] = 0
        taken = self._takeover(args) if self.donation and into is None else {}
        pooled = dict.fromkeys(self.output_slots, into is None)
        for s in self.output_slots:
            j = self.slots[s].index
            if into is not None:
                self.buf[s] = into[j].buffer
                self.off[s] = into[j].offset
            elif s in taken:
                self.buf[s], self.off[s], pooled[s] = taken[s].donate()
            else:
                self.buf[s] = dev.take(self.slots[s].aval.nbytes)
                self.off[s] = 0
        if into is None:
            ENGINE_STATS["output_allocations"] += len(self.output_slots) - len(taken)
            ENGINE_STATS["donated_outputs"] += len(taken)
        self._bind_call_args()
        self._exec(self.ops)
        dev.queue.flush()
        arrays = {s: OpenCLArray(self.buf[s], self.slots[s].aval, self.off[s], pooled[s]) for s in self.output_slots}
        outs = [arrays[s] for s in self.output_plan]
        self._release()
        return list(into) if into is not None else outs

    def _release(self) -> None:
        """Drop this executable's references to the call's buffers (the kernels keep theirs)."""
        for s in self.input_slots + self.output_slots + self.window_slots:
            self.buf[s] = None
        for _, argv, per_call, _ in self.call_args:
            for a, _ in per_call:
                argv[a] = None
        for argv, per_iteration in self.windowed:
            for a, _ in per_iteration:
                argv[a] = None

    def _exec(self, ops: list[tuple]) -> None:
        for op in ops:
            tag = op[0]
            if tag == "kernel":
                self._launch(op)
            elif tag == "host":
                self._run_host(op)
            elif tag == "unless_same":
                _, dst, src, kernel_op = op
                if self.buf[dst] is not self.buf[src] or self.off[dst] != self.off[src]:
                    self._launch(kernel_op)
                else:
                    ENGINE_STATS["copies_skipped"] += 1
            elif tag == "cond":
                _, idx, branches = op
                k = 0 if idx is None else int(np.clip(self._scalar(idx), 0, len(branches) - 1))
                self._exec(branches[k])
            elif tag == "while":
                self._run_while(op)
            elif tag == "batched_while":
                self._run_batched_while(op)
            else:
                self._run_scan(op)

    def _run_while(self, op: tuple) -> None:
        """Only the predicate is read back, once per evaluation; even iterations read carries
        A and write B, odd ones the reverse; an odd trip count ends with one copy B -> A."""
        _, pred, conds, bodies, tail = op
        k = 0
        while True:
            self._exec(conds[k & 1])
            if not self._scalar(pred):
                break
            self._exec(bodies[k & 1])
            k += 1
        if k & 1:
            self._exec(tail)
        ENGINE_STATS["loop_iterations"] += k

    def _run_batched_while(self, op: tuple) -> None:
        """Masked iterations (the identity once the predicate is false) enqueued 1, 2, 4, ...
        at a time (at most ``SPECULATE_MAX``) per predicate readback; batches stop growing
        when an iteration takes longer than ``SPECULATE_BUDGET_S``, so a heavy body wastes
        little work. The carry ends in A after an even number of iterations, else B."""
        _, pred, steps, tail = op
        k = 0
        batch = 1
        while True:
            t0 = time.perf_counter()
            for _ in range(batch):
                self._exec(steps[k & 1])
                k += 1
            if not self._scalar(pred):
                break
            fast = (time.perf_counter() - t0) / batch < control.SPECULATE_BUDGET_S
            batch = min(2 * batch, control.SPECULATE_MAX) if fast else 1
        if k & 1:
            self._exec(tail)
        ENGINE_STATS["loop_iterations"] += k

    def _run_scan(self, op: tuple) -> None:
        """A static trip count: nothing is read back; windows move over ``xs`` and ``ys``."""
        _, length, reverse, windows, bodies = op
        buf, off = self.buf, self.off
        for k in range(length):
            i = length - 1 - k if reverse else k
            for w, parent, base, stride in windows:
                buf[w] = buf[parent]
                off[w] = off[parent] + base + i * stride
            self._exec(bodies[k & 1])
        ENGINE_STATS["loop_iterations"] += length

    def _scalar(self, ref: tuple[int, int, np.dtype]) -> Any:
        s, offset, dtype = ref
        return read_scalar(self.dev, self.buf[s], dtype, self.off[s] + offset)

    def _run_host(self, op: tuple) -> None:
        """Copy the inputs to the host, run the primitive's numpy impl, copy the results back."""
        _, e, host_inputs, host_outputs = op
        ins = []
        for a, v in zip(host_inputs, e.inputs):
            if isinstance(a, Literal):
                ins.append(a.array)
            else:
                x = download(self.dev, self.buf[a.slot], a.aval, self.off[a.slot] + a.offset, a.strides)
                ins.append(x.reshape(v.aval.shape))
        res = e.primitive.impl(*ins, **e.params.kwargs())
        outs = res if e.primitive.multiple_results else [res]
        for s, r in zip(host_outputs, outs):
            slot = self.slots[s]
            arr = np.asarray(r, dtype=slot.aval.dtype).reshape(slot.aval.shape)
            upload(self.dev, arr, self.buf[s], self.off[s] * slot.aval.dtype.itemsize)
        TRANSFER_STATS["host_round_trips"] += 1

    def _takeover(self, args: Sequence[Any]) -> dict[int, OpenCLArray]:
        """The donated device arrays whose buffers this call's outputs take over: none whose
        buffer is also passed as another argument."""
        ptrs = [y.buffer.int_ptr for y in args if isinstance(y, OpenCLArray) and y.buffer is not None]
        taken: dict[int, OpenCLArray] = {}
        for s, i in self.donation.items():
            x = args[i]
            if isinstance(x, OpenCLArray) and x.buffer is not None and ptrs.count(x.buffer.int_ptr) == 1:
                taken[s] = x
        return taken
