"""Building the device program: one OpenCL program holding every kernel of the lowered steps
(kernels differing only in constants share a function, :mod:`~fungraph.backends.opencl.sharing`;
built once, or taken from the cache of programs with the same source), the arena and the
constant buffers, and the kernel instances of every step with their arguments, a loop body
instantiated once per carry binding.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph._caches import on_clear
from fungraph.backends.opencl import binaries
from fungraph.backends.opencl.codegen import Access, preamble
from fungraph.backends.opencl.device import Device, upload
from fungraph.backends.opencl.kernels.spec import KernelSpec
from fungraph.backends.opencl.program import ENGINE_STATS, Slot, Step
from fungraph.backends.opencl.sharing import Function, share_functions
from fungraph.ir import Literal

#: Built programs by (context, source, options), most recently used last: an executable whose kernels
#: are identical to an earlier one's (the same graph jitted again by another function) takes its
#: program instead of building it; ``clear_caches`` empties it, and the binaries cached on disk
#: (:mod:`~fungraph.backends.opencl.binaries`) serve a new process.
PROGRAM_CACHE_SIZE = 64
_PROGRAMS: dict[tuple[int, str, tuple[str, ...]], Any] = {}
on_clear(_PROGRAMS.clear)


@dataclass(frozen=True)
class Built:
    """A built program: its ``source``, the ``program`` (None when there are no kernels), the
    ``seconds`` spent getting it (``cpu_seconds`` of this process's CPU), its disk-cache ``key``,
    its build ``options``, the kernel ``functions`` each spec launches
    (:mod:`~fungraph.backends.opencl.sharing`), and ``origin``: ``"source"`` (compiled now, or taken from the driver's
    own cache), ``"memory"`` (an earlier executable's) or ``"disk"`` (a binary an earlier process
    stored, see :mod:`~fungraph.backends.opencl.binaries`)."""

    source: str
    program: Any
    seconds: float
    key: str
    origin: str
    cpu_seconds: float = 0.0
    options: tuple[str, ...] = ()
    functions: dict[str, Function] = field(default_factory=dict)


def build_options(dev: Device) -> list[str]:
    return ["-w"] + (["-cl-fp32-correctly-rounded-divide-sqrt"] if dev.info.correctly_rounded_sqrt else [])


def build_program(dev: Device, specs: Sequence[KernelSpec]) -> Built:
    """The program holding the kernels ``specs``: an earlier executable's with the same source,
    else a binary cached on disk, else compiled from source."""
    used = {dtypes.check(dt) for spec in specs for _, dt in spec.slots}
    sources, functions = share_functions(specs)
    source = preamble(used) + "\n" + "\n".join(sources)
    t0, c0 = time.perf_counter(), time.process_time()
    options = build_options(dev)
    program, key, origin = None, "", "none"
    if specs:
        mem_key = (id(dev.context), source, tuple(options))
        key = binaries.binary_key(dev, source, options)
        program, origin = _PROGRAMS.pop(mem_key, None), "memory"
        if program is None:
            program, origin = binaries.load(dev, key, options), "disk"
        if program is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program, origin = dev.cl.Program(dev.context, source).build(options=options), "source"
        ENGINE_STATS[_STAT[origin]] += 1
        if origin == "source":
            ENGINE_STATS["kernels_built"] += len(sources)
        ENGINE_STATS["kernels_shared"] += len(specs) - len(sources)
        _PROGRAMS[mem_key] = program
        while len(_PROGRAMS) > PROGRAM_CACHE_SIZE:
            _PROGRAMS.pop(next(iter(_PROGRAMS)))
    seconds = time.perf_counter() - t0
    ENGINE_STATS["build_seconds"] += seconds
    return Built(source, program, seconds, key, origin, time.process_time() - c0, tuple(options), functions)


_STAT = {"source": "programs_built", "memory": "programs_reused", "disk": "programs_loaded"}
_ARG_DTYPES = {"int": np.int32, "long": np.int64}


class Bindings:
    """The kernel instances of ``steps`` in ``program`` as executable ops, and the slot tables
    they read their buffers from: ``buf``/``off`` (a buffer and an element offset per slot;
    arena and constant slots filled now, call and window slots by the runner), ``staging``
    (an upload buffer per input position), ``call_args`` (the kernels whose arguments change
    per call) and ``windowed`` (those whose arguments change per loop iteration)."""

    def __init__(self, dev: Device, built: Built, slots: Sequence[Slot], steps: list[Step],
                 const_host: dict[int, np.ndarray], arena_bytes: int) -> None:
        self.dev = dev
        self.program = built.program
        self.functions = built.functions
        self.slots = slots
        self.arena = dev.alloc(arena_bytes)
        self.buf: list[Any] = [None] * len(slots)
        self.off: list[int] = [0] * len(slots)
        self.staging: dict[int, Any] = {}
        for k, s in enumerate(slots):
            if s.kind in ("arena", "scratch"):
                self.buf[k] = self.arena
                self.off[k] = s.byte_offset // s.aval.dtype.itemsize
            elif s.kind == "const":
                self.buf[k] = upload(dev, const_host[k])
            elif s.kind == "input":
                self.staging[s.index] = dev.alloc(s.aval.nbytes)
        self.input_slots = [k for k, s in enumerate(slots) if s.kind == "input"]
        self.output_slots = [k for k, s in enumerate(slots) if s.kind == "output"]
        self.window_slots = [k for k, s in enumerate(slots) if s.kind == "window"]
        self.call_args: list[tuple[Any, list[Any], tuple[tuple[int, int], ...], bool]] = []
        self.instances: list[tuple] = []
        #: the instances the warm-up leaves out (``KernelSpec.warm``), by identity
        self.unwarmed: set[int] = set()
        self.ops = self._ops(steps, {})
        self.windowed = [(op[2], op[3]) for op in self.instances if op[3]]

    def _ops(self, steps: list[Step], remap: dict[int, int]) -> list[tuple]:
        """Executable ops for ``steps`` with carry slots bound through ``remap`` (a loop body
        is instantiated twice: even iterations read carries A and write B, odd ones the
        reverse, so no carry is ever copied)."""
        ops: list[tuple] = []
        for st in steps:
            if st.kind == "kernels":
                for spec in st.specs:
                    op = self._instance(spec, remap)
                    if op is not None:
                        ops.append(op if spec.unless_same is None else ("unless_same", *spec.unless_same, op))
            elif st.kind == "host":
                ins = [a if isinstance(a, Literal) else replace(a, slot=remap.get(a.slot, a.slot))
                       for a in st.host_inputs]
                ops.append(("host", st.eqns[0], ins, [remap.get(s, s) for s in st.host_outputs]))
            elif st.kind == "cond":
                idx = None if st.index is None else _scalar_ref(st.index, remap)
                ops.append(("cond", idx, [self._ops(b, remap) for b in st.blocks]))
            elif st.kind == "while" and st.speculative:
                odd = _swapped(remap, st.swap)
                masked, _, tail = st.blocks
                ops.append(("batched_while", _scalar_ref(st.index, remap),
                            (self._ops(masked, remap), self._ops(masked, odd)), self._ops(tail, remap)))
            elif st.kind == "while":
                odd = _swapped(remap, st.swap)
                cond, body, tail = st.blocks
                ops.append(("while", _scalar_ref(st.index, remap), (self._ops(cond, remap), self._ops(cond, odd)),
                            (self._ops(body, remap), self._ops(body, odd)), self._ops(tail, remap)))
            else:
                odd = _swapped(remap, st.swap)
                wins = tuple((w.slot, remap.get(w.parent, w.parent), w.base, w.stride) for w in st.windows)
                ops.append(("scan", st.length, st.reverse, wins,
                            (self._ops(st.blocks[0], remap), self._ops(st.blocks[0], odd))))
        return ops

    def _instance(self, spec: KernelSpec, remap: dict[int, int]) -> tuple | None:
        """One kernel object for ``spec`` and its argument list (a buffer and an element
        offset per slot): arena and constant slots bound now, call slots on each call,
        window slots on each launch. Arguments go through ``set_args`` with declared scalar
        types, which costs ~1 us a kernel where ``set_arg`` of an ``int64`` costs ~15 us."""
        launches = tuple(lc for lc in spec.launches if all(d > 0 for d in lc[0]))
        if not launches:
            return None
        function = self.functions.get(spec.name, Function(spec.name))
        kernel = self.dev.cl.Kernel(self.program, function.name)
        kernel.set_scalar_arg_dtypes([None, np.int64] * len(spec.slots) + [_ARG_DTYPES[t] for t, _ in function.args])
        argv: list[Any] = [None, 0] * len(spec.slots) + [v for _, v in function.args]
        per_call, per_iteration = [], []
        for a, (s, _) in enumerate(spec.slots):
            s = remap.get(s, s)
            kind = self.slots[s].kind
            if kind in ("input", "output"):
                per_call.append((2 * a, s))
            elif kind == "window":
                per_iteration.append((2 * a, s))
            else:
                argv[2 * a], argv[2 * a + 1] = self.buf[s], self.off[s]
        if per_call:
            self.call_args.append((kernel, argv, tuple(per_call), bool(per_iteration)))
        elif not per_iteration:
            kernel.set_args(*argv)
        op = ("kernel", kernel, argv, tuple(per_iteration), launches)
        self.instances.append(op)
        if not spec.warm:
            self.unwarmed.add(id(op))
        return op


def _scalar_ref(a: Access, remap: dict[int, int]) -> tuple[int, int, np.dtype]:
    return remap.get(a.slot, a.slot), a.offset, a.aval.dtype


def _swapped(remap: dict[int, int], swap: dict[int, int]) -> dict[int, int]:
    """The binding of an odd iteration: this loop's carries swapped, then the enclosing binding."""
    out = dict(remap)
    for a, b in swap.items():
        out[a] = remap.get(b, b)
    return out
