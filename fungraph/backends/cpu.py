"""The CPU engine: runs a planned graph with numpy, writing each result into its planned
arena view (``out=``), so a steady-state call allocates only its outputs.

Each equation runs through its primitive's ``"cpu"`` lowering (``core.register_lowering``):
``rule(out, *inputs, **params)`` writes into ``out`` and returns it (views, with ``out is
None``, return a view), and a lowering with a scratch rule is bound to its planned block of
the arena. The numpy rules sit beside their primitives; those that need this engine (control
flow, fusion regions) are registered at the end of this module. A primitive without a rule
runs its ``impl`` and copies the result (``fallback_eqns`` counts them).
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from fungraph import _fp_errors as fp
from fungraph.array import HostArray, unhosted
from fungraph.backends import compile_subgraph, cpu_overlap, register_backend
from fungraph.backends.cpu_regions import CHUNK_BYTES, fusion_scratch_bytes, lower_fusion
from fungraph.backends.cpu_updates import folded_update, skipped, update_folds
from fungraph.backends.native.conds import native_conds
from fungraph.backends.native.conds import runs_natively as cond_runs_natively
from fungraph.backends.native.loops import loop_lowering
from fungraph.backends.native.regions import native_regions, reduces_natively, runs_natively
from fungraph.backends.native.scatter import native_scatters
from fungraph.core import Primitive, ScratchLowering, get_primitive, register_lowering
from fungraph.interpreters.memory import MemoryPlan
from fungraph.interpreters.regions import FusionCapability, fusion_p
from fungraph.ir import Graph, Literal, Var
from fungraph.primitives.graph_utils import LOOP_STATS

#: A CPU lowering: ``rule(out, *inputs, **params) -> out`` (``out`` a list for primitives with
#: several results).
Lowering = Callable[..., Any]

ENGINE_STATS = {"output_allocations": 0}


#: Large output buffers are kept and handed out again once the caller has dropped every
#: reference to them (``sys.getrefcount`` sees only ours): what freeing and re-allocating
#: would give, minus the page faults of fresh memory (~3.5 ms per 40 MB here).
RECYCLE_BYTES = 1 << 20


def _unreferenced_count() -> int | None:
    """``sys.getrefcount`` of a pooled buffer that nobody else holds, read the way
    ``_buffer`` reads it (the pool's reference, a local, the argument); None where counts are
    not exact (not CPython), which turns recycling off."""
    if sys.implementation.name != "cpython":
        return None
    pool = {0: np.empty(1)}
    old = pool[0]
    alone = sys.getrefcount(old)
    view = old[:]
    held = sys.getrefcount(old)
    del view
    return alone if held == alone + 1 else None


_UNREFERENCED = _unreferenced_count()


#: Programs with more equations than this stay interpreted on every call: generating the source
#: of a long one costs more than many calls save.
MAX_GENERATED_STEPS = 2000

#: Spare buffer sets an executable keeps once concurrent calls have made them (see
#: ``CpuExecutable``); a set beyond these is dropped after its call.
MAX_IDLE_BUFFER_SETS = 8


class _Buffers:
    """What one call needs to itself: the arena, the program bound to views of it (scratch
    lowerings and control-flow sub-executables hold blocks of it), the environment of values,
    and the large outputs kept for recycling."""

    __slots__ = ("arena", "early_program", "env", "program", "recycled", "run_step", "step")

    def __init__(self, arena: np.ndarray, env: list[Any], program: list[tuple],
                 early_program: list[tuple] | None = None) -> None:
        self.arena = arena
        self.env = env
        #: the equations in order, every foldable update folded (``cpu_updates``)
        self.program = program
        #: the same with the products of ``plan.early`` left unfolded, to be started early
        #: (``cpu_overlap``); None when the plan starts none
        self.early_program = early_program
        self.recycled: dict[int, np.ndarray] = {}
        #: the generated step for :meth:`CpuExecutable.held` (False: the program allocates, so
        #: it cannot take one), built on the first held call
        self.step: Callable[[Sequence[Any], Sequence[Any]], list[Any]] | bool | None = None
        #: the generated program for :meth:`CpuExecutable.run` without ``into`` (returns the
        #: outputs' values), built on the second such call (False after the first, which is
        #: interpreted: a graph run once never pays for generating and compiling its source)
        self.run_step: Callable[[Sequence[Any]], list[Any]] | bool | None = None


def _held_steps(program: list[tuple]) -> list[tuple] | bool:
    """``program`` with each output buffer resolved as far as it can be before the call: a
    fixed array (arena view), None (a view the lowering makes), ``j >= 0`` for ``into[j]`` or
    ``-1 - s`` for the donated input in slot ``s``; False when a step allocates (a value
    outside the plan), which :meth:`CpuExecutable.held` leaves to :meth:`CpuExecutable.run`."""
    return _resolved_steps(program, lambda a: False if a[0] < 0 else a[0])


def _resolved_steps(program: list[tuple], allocated: Callable[[tuple], Any]) -> list[tuple] | bool:
    """``program``'s steps with each output buffer's spec: its fixed array or view (None),
    ``-1 - s`` for the donated input in slot ``s``, else ``allocated(alloc)``; False as soon as
    that is False."""
    steps = []
    for fn, ins, outs, fixed, alloc, params, multi in program:
        spec: list[Any] = []
        for f, a in zip(fixed, alloc):
            if a is None:
                spec.append(f)
            elif a[0] == "donated":
                spec.append(-1 - a[1])
            else:
                got = allocated(a)
                if got is False:
                    return False
                spec.append(got)
        steps.append((fn, ins, outs, tuple(spec), params, multi))
    return steps


def _fold(program: list[tuple], u: int, fold: Any, bound: tuple[int, int, int]) -> None:
    """Rewrite ``program`` so that step ``u`` runs its update with the product folded in and
    the product's (and scale's) own steps run nothing (``cpu_updates``)."""
    _, _, outs, fixed, alloc, _, multi = program[u]
    for i in (fold.product, fold.scale):
        if i is not None:
            program[i] = (skipped, (), *program[i][2:])
    program[u] = (folded_update(fold.alpha, fold.transposed), bound, outs, fixed, alloc, {}, multi)


def _not_donated(alloc: Any) -> bool:
    return alloc is None or alloc[0] != "donated"


def _results(values: Sequence[Any], copies: Sequence[bool]) -> list[HostArray]:
    """The outputs' ``values`` as read-only results (``hosted``, inlined: the cached dispatch
    pays this per output); those marked in ``copies`` (inputs, constants, repeated outputs)
    copied first, so that no result aliases an input, the arena or another result."""
    results = []
    for value, copy in zip(values, copies):
        if copy or type(value) is not np.ndarray:
            value = np.array(value)
        value.setflags(False)  # write=False, as ``hosted`` sets it
        results.append(value.view(HostArray))
    return results


class CpuExecutable:
    """A planned graph bound to one arena; ``run(args)`` returns fresh output arrays.

    Thread safety: a call writes its intermediates into the arena and its values into an
    environment list, so two calls at once must not share them. They form a buffer set
    (``_Buffers``), and the executable keeps its idle sets in a list: ``run`` pops one and
    appends it back when done (each a single atomic list operation under the GIL). The
    uncontended call finds the planned set and pays only that pop and append. A call that
    finds the list empty (another thread is running this executable, or a host callback
    re-enters it) binds a fresh set, as costly as preparing the executable once (a new arena,
    the program bound to it); the set joins the list after the call, so steady concurrent use
    pays it once per extra concurrent caller (``MAX_IDLE_BUFFER_SETS`` bound the list).
    Per-thread sets would not cover re-entry on one thread, and would die with short-lived
    threads. Outputs are fresh arrays per call either way; ``ENGINE_STATS`` counts are not
    atomic.
    """

    def __init__(self, graph: Graph, plan: MemoryPlan, donated: Sequence[bool] = (),
                 arena: np.ndarray | None = None) -> None:
        """``arena``: run inside this byte block (a parent's scratch block) instead of a new
        one; a concurrent call still gets a fresh arena of its own."""
        self.graph = graph
        self.plan = plan
        self.donated = tuple(donated) + (False,) * (len(graph.invars) - len(donated))
        self.arena = _aligned_bytes(plan.arena_bytes) if arena is None else arena[:plan.arena_bytes]
        #: the regions and conds run as native code, by equation index (one shared object each per
        #: graph), and the scatter-adds (one shared object per process)
        self.native = native_regions(graph) | native_conds(graph) | native_scatters(graph)
        self._idle = [self._bind(self.arena, first=True)]

    def _bind(self, arena: np.ndarray, first: bool = False) -> _Buffers:
        """The program bound to ``arena``. Slot numbers depend only on the graph, so every set
        shares the slot layout and counts, which the ``first`` bind records on ``self``."""
        graph, plan = self.graph, self.plan
        fallback_eqns = 0
        allocations_per_call = 0
        slot: dict[Var, int] = {}
        env: list[Any] = []

        def new_slot(value: Any = None) -> int:
            env.append(value)
            return len(env) - 1

        input_slots = [new_slot() for _ in graph.invars]
        slot.update(zip(graph.invars, input_slots))
        for v, c in zip(graph.constvars, graph.consts):
            slot[v] = new_slot(c)
        outputs = {a for a in graph.outvars if isinstance(a, Var)}

        def operand(a: Any) -> int:
            return new_slot(a.array) if isinstance(a, Literal) else slot[a]

        program: list[tuple[Callable[..., Any], tuple[int, ...], tuple[int, ...], Any, Any, dict, bool]] = []
        out_index: dict[Var, int] = {}
        for j, a in enumerate(graph.outvars):
            if isinstance(a, Var) and a in outputs and _produced(graph, a):
                out_index.setdefault(a, j)
        for index, e in enumerate(graph.eqns):
            rule = e.primitive.lowerings.get("cpu")
            if index in self.native:
                fn, specific = self.native[index], True
            elif index in plan.scratch and rule is not None and rule.scratch is not None:
                block = arena[plan.scratch[index].offset:plan.scratch[index].offset + plan.scratch[index].size]
                fn, specific = rule.scratch.lower(e, block), True
            else:
                fn, specific = lowering_for(e.primitive)
            if not specific:
                fallback_eqns += 1
            ins = tuple(operand(a) for a in e.inputs)
            outs = []
            fixed = []
            alloc = []
            for o in e.outputs:
                p = plan.placements[o]
                outs.append(new_slot())
                slot[o] = outs[-1]
                if p.kind == "inplace" and p.offset < 0:
                    fixed.append(None)
                    alloc.append(("donated", slot[_root(plan, o)]))
                elif o in out_index:
                    fixed.append(None)
                    alloc.append((out_index[o], o.aval.shape, o.aval.dtype))
                    allocations_per_call += 1
                elif p.kind == "pinned":
                    fixed.append(None)
                    alloc.append((-1, o.aval.shape, o.aval.dtype))
                    allocations_per_call += 1
                elif p.kind == "view":
                    fixed.append(None)
                    alloc.append(None)
                else:
                    fixed.append(_arena_view(arena, p.offset, o))
                    alloc.append(None)
            program.append((fn, ins, tuple(outs), tuple(fixed), tuple(alloc), dict(e.params),
                            e.primitive.multiple_results))
        folds = update_folds(graph, plan, self.donated)
        early_program = list(program)
        for u, fold in folds.items():
            bound = (slot[fold.weight], operand(fold.lhs), operand(fold.rhs))
            _fold(program, u, fold, bound)
            if fold.product not in plan.early:
                _fold(early_program, u, fold, bound)
        output_slots = [operand(a) if isinstance(a, Literal) else slot[a] for a in graph.outvars]
        if first:
            #: weight updates run as one BLAS call with their product (``cpu_updates``)
            self.folded_updates = len(folds)
            self.fallback_eqns = fallback_eqns
            self.allocations_per_call = allocations_per_call
            self.input_slots = input_slots
            self.output_slots = output_slots
            self.outputs_to_copy = [not (isinstance(a, Var) and out_index.get(a) == j)
                                    for j, a in enumerate(graph.outvars)]
            self.passthrough_outputs = sum(self.outputs_to_copy)
            self.donated_outputs = tuple(j for j, a in enumerate(graph.outvars)
                                         if isinstance(a, Var) and plan.placements[a].kind == "inplace"
                                         and plan.placements[a].offset < 0)
            produced = {s for _, _, outs, *_ in program for s in outs}
            self.release_slots = tuple(input_slots) + tuple(sorted(set(output_slots) & produced))
            #: the step each product of ``plan.early`` starts at -> that product's own step
            self.launches = {step: j for j, step in plan.early.items()
                             if not early_program[j][6] and _not_donated(early_program[j][4][0]) and 0 <= step < j}
        return _Buffers(arena, env, program, early_program if plan.early else None)

    @property
    def buffer_sets(self) -> int:
        """Idle buffer sets kept: 1 until calls have overlapped (read it between calls)."""
        return len(self._idle)

    def _buffer(self, a: tuple, into: Sequence[np.ndarray] | None, env: list[Any],
                recycled: dict[int, np.ndarray]) -> np.ndarray:
        if a[0] == "donated":
            return env[a[1]]
        if into is not None and a[0] >= 0:
            return into[a[0]]
        if a[0] >= 0 and a[0] in recycled and _UNREFERENCED is not None:
            old = recycled[a[0]]
            if sys.getrefcount(old) == _UNREFERENCED:
                old.setflags(True)  # write=True
                return old
        ENGINE_STATS["output_allocations"] += 1
        buf = np.empty(a[1], a[2])
        if a[0] >= 0 and buf.nbytes >= RECYCLE_BYTES:
            recycled[a[0]] = buf
        return buf

    def run(self, args: Sequence[np.ndarray], into: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        """Run on ``args``; outputs go to fresh arrays, or into the arrays ``into`` (then no
        output is allocated: what loop lowerings use to alternate carry buffers). Safe to
        call from several threads at once (see the class docstring). numpy's floating-point
        warnings are off meanwhile (``fungraph._fp_errors``), as JAX's computations are silent."""
        try:
            buffers = self._idle.pop()
        except IndexError:
            buffers = self._bind(_aligned_bytes(self.plan.arena_bytes))
        env, recycled = buffers.env, buffers.recycled
        token = fp.STATE.set(fp.QUIET)
        try:
            for s, a in zip(self.input_slots, args):
                env[s] = unhosted(a)
            if self.launches and buffers.early_program is not None and cpu_overlap.worth_overlapping():
                self._run_overlapped(buffers.early_program, env, into, recycled)
            elif into is None and buffers.run_step is not None and len(buffers.program) <= MAX_GENERATED_STEPS:
                step = buffers.run_step or self._run_step(buffers)
                return _results(step([env[s] for s in self.input_slots]), self.outputs_to_copy)
            else:
                if into is None:
                    buffers.run_step = False
                for fn, ins, outs, fixed, alloc, params, multi in buffers.program:
                    bufs = [f if a is None else self._buffer(a, into, env, recycled) for f, a in zip(fixed, alloc)]
                    if not multi:
                        env[outs[0]] = fn(bufs[0], *[env[i] for i in ins], **params)
                    elif outs:
                        env[outs[0]:outs[-1] + 1] = fn(bufs, *[env[i] for i in ins], **params)
                    else:
                        fn(bufs, *[env[i] for i in ins], **params)
            if into is None:
                results = _results([env[s] for s in self.output_slots], self.outputs_to_copy)
            else:
                for s, copy, target in zip(self.output_slots, self.outputs_to_copy, into):
                    if copy:
                        np.copyto(target, env[s])
                results = list(into)
                for j in self.donated_outputs:
                    results[j] = env[self.output_slots[j]]
        finally:
            fp.STATE.reset(token)
            for s in self.release_slots:
                env[s] = None
            if len(self._idle) < MAX_IDLE_BUFFER_SETS:
                self._idle.append(buffers)
        return results

    def _run_step(self, buffers: _Buffers) -> Callable[[Sequence[Any]], list[Any]]:
        """``buffers``' program as one generated function (:func:`_step_function`) from the
        inputs to the outputs' values, each output buffer outside the arena got by a bound
        :meth:`_buffer` call: a training step's ~50 small equations then pay no per-equation
        list building and ``env`` indexing (interpreted, 0.9 us an equation)."""
        steps = _resolved_steps(buffers.program,
                                lambda a: functools.partial(self._buffer, a, None, buffers.env, buffers.recycled))
        assert steps is not False
        buffers.run_step = _step_function(steps, buffers.env, self.input_slots, (), (), 0, self.output_slots)
        return buffers.run_step

    def _run_overlapped(self, program: list[tuple], env: list[Any], into: Sequence[np.ndarray] | None,
                        recycled: dict[int, np.ndarray]) -> None:
        """The program, each product of ``plan.early`` begun on the overlap thread at its
        planned step and joined at its own (``cpu_overlap``); an error on either thread
        surfaces here once the other has let go of the arena."""
        task, joins = None, -1
        try:
            for i, (fn, ins, outs, fixed, alloc, params, multi) in enumerate(program):
                j = self.launches.get(i)
                if j is not None:
                    lfn, lins, _, lfixed, lalloc, lparams, _ = program[j]
                    out = lfixed[0] if lalloc[0] is None else self._buffer(lalloc[0], into, env, recycled)
                    task, joins = cpu_overlap.start(lfn, out, *[env[k] for k in lins], **lparams), j
                if i == joins:
                    env[outs[0]] = task.join()
                    task = None
                    continue
                bufs = [f if a is None else self._buffer(a, into, env, recycled) for f, a in zip(fixed, alloc)]
                if not multi:
                    env[outs[0]] = fn(bufs[0], *[env[k] for k in ins], **params)
                elif outs:
                    env[outs[0]:outs[-1] + 1] = fn(bufs, *[env[k] for k in ins], **params)
                else:
                    fn(bufs, *[env[k] for k in ins], **params)
        except BaseException:
            if task is not None:
                with contextlib.suppress(BaseException):
                    task.join()
            raise

    @contextlib.contextmanager
    def held(self) -> Iterator[Callable[[Sequence[Any], Sequence[np.ndarray]], list[Any]]]:
        """``step(args, into)``, :meth:`run` with ``into`` for a loop body called once per
        iteration: one buffer set is held for the whole loop, and the step is a Python
        function generated for that set (:func:`_step_function`), each equation one direct
        call with its buffers and parameters bound as names, so an iteration pays little
        beyond its kernels (a one-op ``fori_loop`` body on 256 floats: 6.9 -> 4.3 us per
        iteration against the interpreted held step, the row-update loop 22 -> 15 us; 3.1 and
        12.5 us once the drivers stopped rebuilding argument lists)."""
        try:
            buffers = self._idle.pop()
        except IndexError:
            buffers = self._bind(_aligned_bytes(self.plan.arena_bytes))
        if buffers.step is None:
            steps = _held_steps(buffers.program)
            copies = [(s, j) for j, (s, copy) in enumerate(zip(self.output_slots, self.outputs_to_copy)) if copy]
            donated = [(j, self.output_slots[j]) for j in self.donated_outputs]
            buffers.step = steps if steps is False else _step_function(
                steps, buffers.env, self.input_slots, copies, donated, len(self.output_slots))
        step = buffers.step
        if step is False:
            self._idle.append(buffers)
            yield lambda args, into: self.run(args, into)
            return
        try:
            yield step
        finally:
            if len(self._idle) < MAX_IDLE_BUFFER_SETS:
                self._idle.append(buffers)


def _step_function(steps: list[tuple], env: list[Any], input_slots: Sequence[int],
                   copies: Sequence[tuple[int, int]], donated: Sequence[tuple[int, int]],
                   n_out: int, returns: Sequence[int] | None = None) -> Callable[..., list[Any]]:
    """``steps`` (:func:`_held_steps`) as the source of one function ``step(args, into)``:
    slot ``s`` is the local ``v{s}``, a slot no step writes (a constant, a literal) a bound
    name, a fixed buffer a bound name, ``into[j]`` and donated inputs read where they lie, a
    callable spec called for its buffer. With ``returns`` (slots), ``step(args)`` returns
    those slots' values instead of filling ``into``.
    Generated rather than interpreted because a loop body runs once per iteration: the
    interpreter's per-equation list building and ``env`` indexing cost more than a small
    kernel."""
    names: dict[str, Any] = {"np_copyto": np.copyto}
    written = set(input_slots) | {s for _, _, outs, *_ in steps for s in outs}

    def value(slot: int) -> str:
        if slot in written:
            return f"v{slot}"
        names[f"c{slot}"] = env[slot]
        return f"c{slot}"

    lines = ["def step(args):" if returns is not None else "def step(args, into):"]
    if input_slots:
        lines.append(f"    {', '.join(f'v{s}' for s in input_slots)}, = args")
    for i, (fn, ins, outs, spec, params, multi) in enumerate(steps):
        names[f"f{i}"] = fn
        bufs = []
        for j, b in enumerate(spec):
            if b is None:
                bufs.append("None")
            elif b.__class__ is int:
                bufs.append(f"into[{b}]" if b >= 0 else value(-1 - b))
            elif callable(b):
                names[f"a{i}_{j}"] = b
                bufs.append(f"a{i}_{j}()")
            else:
                names[f"b{i}_{j}"] = b
                bufs.append(f"b{i}_{j}")
        if all(k.isidentifier() for k in params):
            names.update({f"p{i}_{k}": v for k, v in params.items()})
            kwargs = [f"{k}=p{i}_{k}" for k in params]
        else:
            names[f"p{i}"] = params
            kwargs = [f"**p{i}"]
        out = "[" + ", ".join(bufs) + "]" if multi else bufs[0]
        call = f"f{i}({', '.join([out, *map(value, ins), *kwargs])})"
        if not multi:
            lines.append(f"    v{outs[0]} = {call}")
        elif outs:
            lines.append(f"    {', '.join(f'v{s}' for s in outs)}, = {call}")
        else:
            lines.append(f"    {call}")
    if returns is not None:
        lines.append(f"    return [{', '.join(map(value, returns))}]")
        exec(compile("\n".join(lines), "<fungraph step>", "exec"), names)  # noqa: S102 - generated above
        return names["step"]
    lines += [f"    np_copyto(into[{j}], {value(s)})" for s, j in copies]
    result = [f"into[{j}]" for j in range(n_out)]
    for j, s in donated:
        result[j] = value(s)
    lines.append(f"    return [{', '.join(result)}]")
    exec(compile("\n".join(lines), "<fungraph held loop step>", "exec"), names)  # noqa: S102 - generated above
    return names["step"]


def _arena_view(arena: np.ndarray, offset: int, v: Var) -> np.ndarray:
    return arena[offset:offset + v.aval.nbytes].view(v.aval.dtype).reshape(v.aval.shape)


def _root(plan: MemoryPlan, v: Var) -> Var:
    """The value whose storage ``v`` reuses (following in-place chains to a donated input)."""
    while plan.placements[v].kind == "inplace":
        v = plan.placements[v].origin
    return v


def _produced(graph: Graph, v: Var) -> bool:
    return v not in set(graph.invars) and v not in set(graph.constvars)


def _aligned_bytes(n: int, alignment: int = 64) -> np.ndarray:
    raw = np.empty(n + alignment, np.uint8)
    start = (-raw.ctypes.data) % alignment
    return raw[start:start + n]


# --- control flow: sub-graphs planned recursively into one scratch block of the parent ------


def _compiled(graph: Graph, donated: Sequence[bool] = ()) -> Any:
    return compile_subgraph(graph, "cpu", donated)


def _views(block: np.ndarray, offset: int, avals: Sequence[Any]) -> tuple[list[np.ndarray], int]:
    views = []
    for a in avals:
        views.append(block[offset:offset + a.nbytes].view(a.dtype).reshape(a.shape))
        offset += -(-a.nbytes // 64) * 64
    return views, offset


def _loop_body(graph: Graph, n_carry: int) -> tuple[Any, tuple[int, ...]]:
    """A loop body compiled with the carries it updates in place donated, and which those
    are: carry ``j`` whose output the plan puts in input ``j``'s own buffer (an
    ``x.at[i].set(v)`` writes only its window), no other output there. The loop gives such
    a carry one buffer of its own for all iterations instead of two alternating views.
    Donating a carry whose output lands elsewhere could let another output take its buffer,
    which the next iteration's write would clobber, so the body is re-planned with the
    kept carries only until every one of them stays (each plan is in ``jit``'s cache)."""
    stay = tuple(range(n_carry))
    while True:
        compiled = _compiled(graph, [j in stay for j in range(len(graph.invars))] if stay else ())
        if not stay:
            return compiled, stay
        g, plan = compiled.graph, compiled.plan
        roots = [_root(plan, a) if isinstance(a, Var) and a in plan.placements else None for a in g.outvars]
        kept = tuple(j for j in stay if roots[j] is g.invars[j] and roots.count(g.invars[j]) == 1)
        if kept == stay:
            return compiled, stay
        stay = kept


def _carry_bytes(avals: Sequence[Any]) -> int:
    return sum(-(-a.nbytes // 64) * 64 for a in avals)


# The block a control-flow equation needs: its sub-graphs' arenas (branches, and a loop's cond
# and body, share one region, as only one runs at a time), for a loop plus a second carry view.


def _cond_bytes(eqn: Any) -> int:
    """Nothing for a cond the native engine runs (:mod:`.native.conds`), whose C function needs no
    branch executables; else the largest branch's arena."""
    if cond_runs_natively(eqn):
        return 0
    return max(_compiled(b).plan.arena_bytes for b in eqn.params["branches"])


def _while_bytes(eqn: Any) -> int:
    p = eqn.params
    body = _loop_body(p["body_graph"], len(p["body_graph"].outvars))[0]
    sub = max(_compiled(p["cond_graph"]).plan.arena_bytes, body.plan.arena_bytes)
    return -(-sub // 64) * 64 + _carry_bytes(p["body_graph"].out_avals)


def _scan_bytes(eqn: Any) -> int:
    p = eqn.params
    sub = _loop_body(p["body"], p["num_carry"])[0].plan.arena_bytes
    return -(-sub // 64) * 64 + _carry_bytes(p["body"].out_avals[:p["num_carry"]])


def _bound_on_use(compiled: Any, block: np.ndarray) -> Callable[[], CpuExecutable]:
    """``compiled``'s graph as an executable in ``block``, built on its first use. Binding an
    executable lowers its own control flow, so sub-executables built up front made every
    compiled level bind all the levels below it again: ``cond`` nested 160 deep built 25,602
    executables (2.5 s). Built on use, compiling binds each level once and running builds
    one per sub-graph reached. A lowering belongs to one buffer set, which one call holds at
    a time (``CpuExecutable``), so building needs no lock."""
    built: list[CpuExecutable] = []

    def executable() -> CpuExecutable:
        if not built:
            built.append(CpuExecutable(compiled.graph, compiled.plan, arena=block))
        return built[0]

    return executable


def _lower_cond(eqn: Any, block: np.ndarray) -> Lowering:
    exes = [_bound_on_use(c, block) for c in map(_compiled, eqn.params["branches"])]

    def run(outs: list[np.ndarray], index: Any, *args: Any, **_: Any) -> list[np.ndarray]:
        return exes[int(np.clip(int(index), 0, len(exes) - 1))]().run(list(args), into=outs)

    return run


def _own_carries(outs: Sequence[np.ndarray], carry: list[Any], stay: Sequence[int]) -> None:
    """The carries updated in place start as copies in the loop's outputs (the initial
    values belong to the caller), which every iteration then updates."""
    for j in stay:
        np.copyto(outs[j], carry[j])
        carry[j] = outs[j]


def _lower_while(eqn: Any, block: np.ndarray) -> Lowering:
    """An elementwise loop runs as one native C function (:mod:`.native.loops`). Otherwise
    iteration k writes the carry into view k % 2: the equation's planned outputs and a
    second view in the block (libnnc's multi-view, k = 2); no carry is copied between
    iterations, and one copy at the end when the loop ends on the second view."""
    native = loop_lowering(eqn)
    if native is not None:
        return native
    p = eqn.params
    n_cc, n_bc = p["n_cc"], p["n_bc"]
    cond_c = _compiled(p["cond_graph"])
    body_c, stay = _loop_body(p["body_graph"], len(p["body_graph"].outvars))
    cond_on_use, body_on_use = _bound_on_use(cond_c, block), _bound_on_use(body_c, block)
    sub = -(-max(cond_c.plan.arena_bytes, body_c.plan.arena_bytes) // 64) * 64
    second, _ = _views(block, sub, p["body_graph"].out_avals)
    pred = [np.empty((), np.bool_)]

    def run(outs: list[np.ndarray], *args: Any, **_: Any) -> list[np.ndarray]:
        cc, bc, carry = list(args[:n_cc]), list(args[n_cc:n_cc + n_bc]), list(args[n_cc + n_bc:])
        _own_carries(outs, carry, stay)
        views = (outs, second)
        k = 0
        cond_exe, body_exe = cond_on_use(), body_on_use()
        with cond_exe.held() as test, body_exe.held() as body:
            while test(carry + cc if cc else carry, pred)[0]:
                carry = body(carry + bc if bc else carry, views[k & 1])
                k += 1
        if k == 0 or k % 2 == 0:
            for o, c in zip(outs, carry):
                if o is not c:
                    np.copyto(o, c)
            LOOP_STATS["final_copies"] += 1
        LOOP_STATS["iterations"] += k
        LOOP_STATS["carry_copies"] += k * body_exe.passthrough_outputs
        return outs

    return run


def _lower_scan(eqn: Any, block: np.ndarray) -> Lowering:
    native = loop_lowering(eqn)
    if native is not None:
        return native
    p = eqn.params
    nc, nx, length, reverse = p["num_carry"], p["num_xs"], p["length"], p["reverse"]
    body_c, stay = _loop_body(p["body"], nc)
    body_on_use = _bound_on_use(body_c, block)
    sub = -(-body_c.plan.arena_bytes // 64) * 64
    second, _ = _views(block, sub, p["body"].out_avals[:nc])

    def run(outs: list[np.ndarray], *args: Any, **_: Any) -> list[np.ndarray]:
        carry, xs, consts = list(args[:nc]), args[nc:nc + nx], list(args[nc + nx:])
        _own_carries(outs, carry, stay)
        ys = outs[nc:]
        views = (outs[:nc], list(second))
        order = range(length - 1, -1, -1) if reverse else range(length)
        with body_on_use().held() as body:
            for k, i in enumerate(order):
                args = carry + [x[i] for x in xs] + consts if xs or consts else carry
                res = body(args, views[k & 1] + [y[i, ...] for y in ys] if ys else views[k & 1])
                carry = res[:nc] if ys else res
        if length == 0 or length % 2 == 0:
            for o, c in zip(outs[:nc], carry):
                if o is not c:
                    np.copyto(o, c)
        return outs

    return run


# --- finding an equation's lowering ----------------------------------------------------------


def lowering_for(prim: Primitive) -> tuple[Lowering, bool]:
    """The CPU lowering of ``prim`` and whether it is its own (False: ``impl`` + a copy into
    ``out``, for primitives that register no rule, or only a scratch one whose plan lacks it)."""
    rule = prim.lowerings.get("cpu")
    if rule is not None and rule.rule is not None:
        return rule.rule, True
    return _fallback(prim), False


def _fallback(prim: Primitive) -> Lowering:
    impl = prim.impl

    def run(out: Any, *ins: Any, **params: Any) -> Any:
        res = impl(*ins, **params)
        if prim.multiple_results:
            for o, r in zip(out, res):
                np.copyto(o, r, casting="unsafe")
            return out
        np.copyto(out, res, casting="unsafe")
        return out

    return run


def scratch_bytes(eqn: Any) -> int:
    """The scratch block ``eqn`` needs on the CPU engine (0: none); ``plan_memory``'s rule.
    ``plan_memory`` places that block in the arena, live only while the equation runs, and
    ``scratch.lower`` binds the lowering to it; a plan made without this rule (``plan.scratch``
    lacks the equation) runs the primitive's plain lowering."""
    rule = eqn.primitive.lowerings.get("cpu")
    return rule.scratch.nbytes(eqn) if rule is not None and rule.scratch is not None else 0


# --- the lowerings that need this engine: sub-graphs run by executables in a scratch block ----

def _fusion_scratch_bytes(eqn: Any) -> int:
    """A region the native engine runs needs none of the numpy engine's chunk scratch."""
    return 0 if runs_natively(eqn) else fusion_scratch_bytes(eqn)


register_lowering(fusion_p, "cpu", scratch=ScratchLowering(_fusion_scratch_bytes, lower_fusion))
# Control flow lies above the engines in the layers, so its primitives are found by name; this
# module is imported on first use of the backend, after ``import fungraph`` has defined them.
register_lowering(get_primitive("cond"), "cpu", scratch=ScratchLowering(_cond_bytes, _lower_cond))
register_lowering(get_primitive("while"), "cpu", scratch=ScratchLowering(_while_bytes, _lower_while))
register_lowering(get_primitive("scan"), "cpu", scratch=ScratchLowering(_scan_bytes, _lower_scan))


def _make_cpu(graph: Graph, plan: MemoryPlan, donated: Sequence[bool] = ()) -> CpuExecutable:
    return CpuExecutable(graph, plan, donated)


_make_cpu.scratch_bytes = scratch_bytes  # type: ignore[attr-defined]
# large matrix products started early on a second thread, beside the steps before them
_make_cpu.early_starts = cpu_overlap.overlap_starts  # type: ignore[attr-defined]
# elementwise chains of at least two chunks, streamed chunk by chunk (``cpu_regions``), with the
# reductions over trailing axes that feed them or end them when the native engine runs them
_make_cpu.fusion = FusionCapability(min_bytes=2 * CHUNK_BYTES, reduces=reduces_natively)  # type: ignore[attr-defined]


register_backend("cpu", _make_cpu)
