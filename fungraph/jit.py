"""``jit``: stage once per input signature, optimise, plan memory, run on an engine.

A jitted function is a ``jit_call`` equation holding its staged graph, so every other
interpreter sees through it: its jvp is a ``jit_call`` of the JVP graph, reverse mode splits
it into a forward and a backward ``jit_call`` (both compiled), and ``jit`` inside ``jit`` is
inlined. Compiled plans are cached by signature per function, and across functions by the
graph's structural hash, so a re-created closure that traces to the same graph reuses the
optimised, planned result.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import time
import types
import warnings
import weakref
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fungraph import _mpi, _ref_frames, dtypes
from fungraph._caches import LRUCache, clear_all, on_clear
from fungraph._config import (
    CACHE_LIMITS,
    DISABLE_JIT,
    FLOAT_CHECKS,
    JIT_DISABLED,
    ON_TRACING_CHANGE,
    RANK_PROMOTION,
    tracing_settings,
)
from fungraph._donation import (
    MIXED_REFERENCES,
    bare_donations,
    held_keywords,
    held_positions,
    memory_owner,
    owner_counts,
)
from fungraph._refs import Ref, closing_over, threading_refs
from fungraph.array import DeviceArray, HostArray, take_donated, usable_donations
from fungraph.backends import backend_factory, known_backends, register_compiler
from fungraph.backends.incremental import IncrementalExecutable
from fungraph.core import (
    NestingError,
    Primitive,
    Tracer,
    check_finite,
    deep_recursion,
    nesting_error,
    to_concrete_dtype_array,
    weak_outputs,
)
from fungraph.interpreters.graph_transforms import (
    batched_graph,
    jvp_graph,
    partial_eval_graph,
    transpose_graph,
)
from fungraph.interpreters.memory import MemoryPlan, plan_memory
from fungraph.interpreters.optimize import PassStat, backend_passes, optimize
from fungraph.interpreters.schedule import SCHEDULES, updates_last
from fungraph.interpreters.staging import ShapeDtypeStruct, abstractify, flat_fun, split_static, stage
from fungraph.ir import Eqn, Graph, Params, Var
from fungraph.primitives._batching import batch_size
from fungraph.primitives._rules import is_undefined, zeros
from fungraph.primitives.mesh_collectives import checked_executable
from fungraph.sharding import PartitionSpec
from fungraph.stages import ArgInfo, Lowered, Traced
from fungraph.tree_util import LEAF, PyTreeDef, tree_flatten, tree_leaves, tree_unflatten


@dataclass(frozen=True)
class Compiled:
    """A staged graph after optimisation and planning, bound to an executable."""

    staged: Graph
    graph: Graph
    stats: tuple[PassStat, ...]
    plan: MemoryPlan
    executable: Any
    seconds: dict[str, float]


CompileKey = tuple[Graph, str, tuple[bool, ...]]
#: Compiled graphs by (graph, backend, donated inputs), shared across functions for as long as
#: something holds them (a jitted function's signature cache, a ``Lowered``): a re-created
#: closure that traces to an equal graph reuses the plan, and a dropped function frees its own.
_SHARED: weakref.WeakValueDictionary[CompileKey, Compiled] = weakref.WeakValueDictionary()
#: The compiled graphs that no function holds (``jit_call`` of a transformed graph, direct
#: ``compile_graph`` calls), most recently used kept.
_COMPILED: LRUCache[CompileKey, Compiled] = LRUCache("compiled graphs")
on_clear(_SHARED.clear)


#: Called with ``(graph, backend, seconds)`` after each compilation (``fungraph.profiler`` records
#: them while a trace runs).
COMPILE_LISTENERS: list[Callable[[Graph, str, dict[str, float]], None]] = []


class BackendFallbackWarning(RuntimeWarning):
    """A jitted function runs on the CPU engine because its backend cannot run its graph."""


def compile_graph(graph: Graph, backend: str = "cpu", donated: Sequence[bool] = (), keep: bool = True) -> Compiled:
    """Optimise and plan ``graph`` once; later calls with an equal graph hit the cache. The
    result is kept in the bounded cache when ``keep``, else only while the caller holds it. A
    backend that declines the graph (``factory.declines(graph)`` gives the reason: OpenCL and
    a narrow dtype) leaves it to the CPU engine, with a warning naming the reason."""
    with deep_recursion():
        try:
            return _compile_graph(graph, backend, tuple(donated), keep)
        except RecursionError as err:
            if isinstance(err, NestingError):
                raise
            raise nesting_error("the jitted graph", graph_depth(graph)) from None


def graph_depth(graph: Graph) -> int:
    """How many graphs deep ``graph``'s sub-graphs nest (1 without any), found with a stack."""
    deepest = 0
    stack = [(graph, 1)]
    while stack:
        g, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((sub, depth + 1) for e in g.eqns for sub in e.subgraphs)
    return deepest


def _compile_graph(graph: Graph, backend: str, donated: tuple[bool, ...], keep: bool) -> Compiled:
    factory = backend_factory(backend)
    key = (graph, backend, tuple(donated))
    hit = _COMPILED.get(key)
    if hit is not None:
        return hit
    hit = _SHARED.get(key)
    if hit is not None:
        if keep:
            _COMPILED[key] = hit
        return hit
    declines = getattr(factory, "declines", None)
    reason = declines(graph) if declines is not None else None
    if reason is not None:
        warnings.warn(f"jit(backend={backend!r}): {reason}, so this function runs on the CPU engine",
                      BackendFallbackWarning, stacklevel=5)
        factory = backend_factory("cpu")
    t0 = time.perf_counter()
    optimised, stats = optimize(graph, backend_passes(factory))
    t1 = time.perf_counter()
    optimised, plan = best_schedule(optimised, donated, getattr(factory, "scratch_bytes", None),
                                    getattr(factory, "early_starts", None))
    t2 = time.perf_counter()
    exe = checked_executable(graph, factory(optimised, plan, donated))
    t3 = time.perf_counter()
    compiled = Compiled(graph, optimised, stats, plan, exe,
                        {"optimise": t1 - t0, "plan": t2 - t1, "prepare": t3 - t2})
    _SHARED[key] = compiled
    if keep:
        _COMPILED[key] = compiled
    for listener in COMPILE_LISTENERS:
        listener(graph, backend, compiled.seconds)
    return compiled


register_compiler(compile_graph)


MAX_SCHEDULE_SEARCH_EQNS = 3000


def best_schedule(graph: Graph, donated: Sequence[bool] = (),
                  scratch_bytes: Callable[[Eqn], int] | None = None,
                  early_starts: Callable[[Graph], dict[int, int]] | None = None) -> tuple[Graph, MemoryPlan]:
    """Plan the graph under each execution order (traced, Owl's post-order DFS, memory-aware
    greedy) and keep the smallest arena; large graphs keep the traced order. With donated
    inputs, each order is also tried with the updates of those inputs last
    (:func:`~fungraph.interpreters.schedule.updates_last`), and the fewest bytes of outputs
    allocated per call come first: the arena is allocated once, those outputs on every call.
    Then the most products started early (``early_starts``, the backend's rule): an order that
    runs two products at once saves more time than the arena bytes it costs."""
    donating = any(donated)
    outputs = {a for a in graph.outvars if isinstance(a, Var)}

    def cost(plan: MemoryPlan) -> tuple[int, int, int]:
        allocated = sum(v.aval.nbytes for v in outputs if plan.placements[v].kind != "inplace") if donating else 0
        return allocated, -len(plan.early), plan.arena_bytes

    best = (graph, plan_memory(graph, donated, scratch_bytes=scratch_bytes, early_starts=early_starts))
    if len(graph.eqns) > MAX_SCHEDULE_SEARCH_EQNS:
        return best
    for name, order in SCHEDULES.items():
        candidates = [] if name == "given" else [order(graph)]
        if donating:
            candidates.append(updates_last(candidates[0] if candidates else graph, donated))
        for candidate in candidates:
            plan = plan_memory(candidate, donated, scratch_bytes=scratch_bytes, early_starts=early_starts)
            if cost(plan) < cost(best[1]):
                best = (candidate, plan)
    return best


#: Every live jitted function, so that :func:`clear_caches` reaches their own caches too.
_JITTED: weakref.WeakSet[Jitted] = weakref.WeakSet()


def clear_caches() -> None:
    """Forget every compiled graph, transformed graph, interned signature and jitted
    function's signature cache (``jax.clear_caches``): the next call of each jitted function
    traces and compiles again."""
    clear_all()
    _FUNCTION_CACHES.clear()
    for j in list(_JITTED):
        j._caches.clear()


#: compiled graphs hold the CPU engine they were built with (native regions or numpy's)
ON_TRACING_CHANGE.append(clear_caches)


# --- the jit_call primitive --------------------------------------------------------------


def _jit_call_impl(*args: Any, call: Graph, name: str, backend: str) -> list[np.ndarray]:
    return compile_graph(call, backend).executable.run([_as_input(a) for a in args])


jit_call_p = Primitive("jit_call", impl=_jit_call_impl, multiple_results=True,
                       abstract_eval=lambda *avals, call, name, backend: call.out_avals)


@jit_call_p.def_jvp
def _jit_call_jvp(primals: tuple, tangents: tuple, *, call: Graph, name: str, backend: str) -> tuple:
    diff = tuple(t is not None for t in tangents)
    jg = jvp_graph(call, diff)
    outs = jit_call_p.bind(*primals, *[t for t in tangents if t is not None], call=jg, name=f"jvp({name})",
                           backend=backend)
    n = len(call.outvars)
    return outs[:n], outs[n:]


def _jit_call_partial_eval(eqn: Eqn, unknown: Sequence[bool]) -> tuple[list[Eqn], list[Eqn]]:
    """Split a jit_call with some unknown inputs into a known and an unknown jit_call."""
    call = eqn.params["call"]
    known_g, lin_g, r, out_unknown = partial_eval_graph(call, tuple(unknown))
    res = [Var(v.aval) for v in lin_g.invars[:r]]
    known_outs = [o for o, u in zip(eqn.outputs, out_unknown) if not u]
    name, backend = eqn.params["name"], eqn.params["backend"]
    known_eqn = Eqn(jit_call_p, tuple(a for a, u in zip(eqn.inputs, unknown) if not u),
                    tuple(known_outs) + tuple(res), Params({"call": known_g, "name": f"{name}.known",
                                                             "backend": backend}), eqn.source)
    unknown_eqn = Eqn(jit_call_p, tuple(res) + tuple(a for a, u in zip(eqn.inputs, unknown) if u),
                      tuple(o for o, u in zip(eqn.outputs, out_unknown) if u),
                      Params({"call": lin_g, "name": f"{name}.linear", "backend": backend}), eqn.source)
    return [known_eqn], [unknown_eqn]


jit_call_p.partial_eval = _jit_call_partial_eval


@jit_call_p.def_transpose
def _jit_call_transpose(cts: Sequence[Any], *args: Any, call: Graph, name: str, backend: str) -> tuple:
    mask = tuple(is_undefined(a) for a in args)
    tg = transpose_graph(call, mask)
    known = [a for a in args if not is_undefined(a)]
    ct_vals = [zeros(v.aval) if c is None else c for c, v in zip(cts, call.outvars)]
    outs = iter(jit_call_p.bind(*known, *ct_vals, call=tg, name=f"transpose({name})", backend=backend))
    return tuple(next(outs) if m else None for m in mask)




@jit_call_p.def_batch
def _jit_call_batch(args: Sequence[Any], dims: Sequence[int | None], *, call: Graph, name: str,
                    backend: str) -> tuple:
    size = batch_size(args, dims)
    bg = batched_graph(call, tuple(dims), size, tuple(abstractify(a) for a in args))
    outs = jit_call_p.bind(*args, call=bg, name=f"vmap({name})", backend=backend)
    return outs, [0] * len(outs)


# --- the user-facing jit -----------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    graph: Graph
    out_tree: PyTreeDef
    compiled: Compiled | None
    #: the positions of the outputs JAX types weakly (returned Python scalars, weak arguments
    #: passed through, elementwise functions of them)
    weak_outs: tuple[int, ...] = ()


@contextlib.contextmanager
def disable_jit(disable: bool = True) -> Iterator[None]:
    """Within the block (on this thread), jitted functions run their Python eagerly (JAX's
    ``disable_jit``): ``print`` and breakpoints see values; nothing is staged or compiled."""
    previous = DISABLE_JIT.override(bool(disable))
    try:
        yield
    finally:
        DISABLE_JIT.override(previous)


class _Caches:
    """One function's compiled signatures under one set of jit options: ``signatures`` holds
    the entries (bounded, least recently used dropped); ``fast`` and ``fast_tree`` index them
    by the cheap keys of :meth:`Jitted.__call__` and are emptied when they outgrow the bound."""

    __slots__ = ("signatures", "fast", "fast_tree", "incremental", "__weakref__")

    def __init__(self) -> None:
        self.signatures: LRUCache[Hashable, _Entry] = LRUCache("signatures", shared=False)
        self.fast: dict[tuple, _Entry] = {}
        self.fast_tree: dict[tuple, _Entry] = {}
        self.incremental: LRUCache[Hashable, Any] = LRUCache("incremental executables", shared=False)

    def index(self, table: dict[tuple, _Entry], key: tuple, entry: _Entry) -> None:
        if len(table) >= CACHE_LIMITS.size:
            table.clear()
        table[key] = entry

    def clear(self) -> None:
        self.signatures.clear()
        self.fast.clear()
        self.fast_tree.clear()
        self.incremental.clear()


#: Each function's caches by its jit options, held weakly on the function (as JAX's): ``jit(f)``
#: written inside a loop finds the signatures an earlier ``jit(f)`` compiled, and the caches
#: go with ``f``.
_FUNCTION_CACHES: weakref.WeakKeyDictionary[Callable[..., Any], dict[Hashable, _Caches]] = \
    weakref.WeakKeyDictionary()
_FUNCTION_CACHES_LOCK = threading.Lock()


def _caches_for(fun: Callable[..., Any], options: Hashable) -> _Caches:
    """The caches of ``fun`` under ``options``; a fresh set when ``fun`` cannot be weakly
    referenced or hashed."""
    with _FUNCTION_CACHES_LOCK:
        try:
            per_options = _FUNCTION_CACHES.get(fun)
            if per_options is None:
                per_options = _FUNCTION_CACHES[fun] = {}
        except TypeError:
            return _Caches()
        caches = per_options.get(options)
        if caches is None:
            caches = per_options[options] = _Caches()
        return caches


class Jitted:
    """A function staged and compiled once per input signature."""

    def __init__(self, fun: Callable[..., Any], static_argnums: Sequence[int], donate_argnums: Sequence[int],
                 backend: str, incremental: bool, caches_of: Callable[..., Any] | None = None) -> None:
        """``caches_of``: the function whose caches a keyword-call twin shares (see
        :meth:`_with_keywords`)."""
        if backend not in known_backends():
            raise ValueError(f"unknown backend {backend!r}; available: {', '.join(known_backends())}")
        self.fun = fun
        self.static_argnums = tuple(static_argnums)
        self.donate_argnums = tuple(donate_argnums)
        self.backend = backend
        self.incremental = incremental
        options = (self.static_argnums, self.donate_argnums, backend, incremental)
        self._caches = _caches_for(fun, options) if caches_of is None else _caches_for(caches_of, ("keywords", options))
        self._cache = self._caches.signatures
        self._fast = self._caches.fast
        self._fast_tree = self._caches.fast_tree
        self._keywords: Jitted | None = None
        #: the outer references (fungraph.Ref) the function touches, once a trace found some, and
        #: the jitted function taking and returning their values besides the arguments
        self._refs: list[Ref] | None = None
        self._with_refs: Jitted | None = None
        self._ref_args: dict[tuple, Jitted] = {}
        #: the jitted function whose keyword calls this one runs in positional form, if any
        self.parent: Jitted | None = None
        functools.update_wrapper(self, fun, updated=())
        _JITTED.add(self)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """As a method, ``self`` is the first argument (static with ``static_argnums=0``), as a
        function's would be."""
        return self if instance is None else types.MethodType(self, instance)

    def _with_keywords(self, args: tuple, kwargs: dict[str, Any], held_names: frozenset[str] = frozenset(),
                       held_positions: frozenset[int] = frozenset()) -> Any:
        """A call with keyword arguments: bound to the parameters (defaults filled in) and run
        through a twin jitted over the positional form, where keyword-only parameters follow
        the positional ones, so ``static_argnames``' positions hold in both. ``held_names`` and
        ``held_positions``: the bare host results among the call's keyword and positional
        arguments that only the caller's name holds (counted by ``__call__``), which donation
        may update in place as it does for a positional call."""
        twin, values = self._positional_call(args, kwargs)
        positional, keyword_only = _parameters(self.fun)  # type: ignore[misc]
        order = (*positional, *keyword_only)
        held = frozenset(i for i, n in enumerate(order) if n in held_names or i in held_positions)
        held_once = bare_donations(values, self.donate_argnums, self.static_argnums, held) if held else frozenset()
        if held_once:
            return twin._call(values, {}, None, held_once)
        return twin(*values)

    def _positional_call(self, args: tuple, kwargs: dict[str, Any]) -> tuple[Jitted, tuple]:
        """A keyword call as a positional one: the twin jitted over the positional form, where
        keyword-only parameters follow the positional ones (so ``static_argnames``' positions
        hold in both), and the bound arguments, defaults filled in."""
        params = _parameters(self.fun)
        if params is None:
            raise TypeError(f"jit({self.__name__}): keyword arguments need a function whose parameters are all "
                            "named (no *args or **kwargs); pass them positionally or bind them with functools.partial")
        try:
            bound = inspect.signature(self.fun).bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"jit({self.__name__}): {err}") from None
        bound.apply_defaults()
        positional, keyword_only = params
        if self._keywords is None:
            fun = self.fun

            def positional_form(*xs: Any) -> Any:
                n = len(positional)
                return fun(*xs[:n], **dict(zip(keyword_only, xs[n:])))

            functools.update_wrapper(positional_form, fun, updated=())
            self._keywords = Jitted(positional_form, self.static_argnums, self.donate_argnums, self.backend,
                                    self.incremental, caches_of=fun)
            self._keywords.parent = self
        return self._keywords, tuple(bound.arguments[n] for n in (*positional, *keyword_only))

    def _signature(self, args: Sequence[Any]) -> tuple[list[Any], PyTreeDef, dict[int, Any], Hashable]:
        dynamic, static = split_static(args, self.static_argnums)
        leaves, in_tree = tree_flatten(dynamic)
        try:
            static_key = tuple(sorted(static.items()))
            hash(static_key)
        except TypeError:
            raise TypeError(f"static arguments of jit({self.__name__}) must be hashable, got "
                            f"{[type(v).__name__ for v in static.values()]}") from None
        avals = tuple(abstractify(x) for x in leaves)
        weak = tuple(dtypes.is_weak(x) for x in leaves)
        return leaves, in_tree, static, (in_tree, static_key, avals, weak, dtypes.x64_enabled(), tracing_settings())

    def _stage(self, in_tree: PyTreeDef, static: dict[int, Any], key: Hashable) -> tuple:
        """Trace for the signature ``key`` (its avals and which arguments are weakly typed): the
        graph, its closure, the output tree and the positions of the weakly typed outputs."""
        box: list[PyTreeDef] = []
        weak_box: list[tuple[int, ...]] = []
        graph, closure = stage(flat_fun(self.fun, in_tree, static, box, weak_box), list(key[2]), key[3])
        return graph, closure, box[0], weak_box[0]

    def _donated_mask(self, args: Sequence[Any], n_leaves: int) -> tuple[bool, ...]:
        """The leaves ``donate_argnums`` names (:func:`usable_donations` picks those JAX would
        alias to an output, which are donated)."""
        if not self.donate_argnums:
            return (False,) * n_leaves
        mask: list[bool] = []
        for i, a in enumerate(args):
            if i in self.static_argnums:
                continue
            mask += [i in self.donate_argnums] * len(tree_flatten(a)[0])
        return tuple(mask)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.donate_argnums and not kwargs:
            held_once = bare_donations(args, self.donate_argnums, self.static_argnums)
            if held_once:
                return self._call(args, kwargs, None, held_once)
        if self.donate_argnums and kwargs and not JIT_DISABLED.on:
            return self._with_keywords(args, kwargs, held_keywords(kwargs), held_positions(args, MIXED_REFERENCES))
        entry = fast_key = None
        if not kwargs and not self.static_argnums and not JIT_DISABLED.on:
            fast_key = _fast_key(args)
            if fast_key is not None and not self.donate_argnums:
                entry = self._fast.get(fast_key)
        if entry is not None and entry.compiled is not None:
            outs = entry.compiled.executable.run(args)
            if entry.weak_outs:
                outs = weak_outputs(outs, entry.weak_outs)
            out = outs[0] if entry.out_tree is LEAF else tree_unflatten(entry.out_tree, outs)
        else:
            out = self._call(args, kwargs, fast_key)
        if FLOAT_CHECKS.nans or FLOAT_CHECKS.infs:
            self._check_finite(out, args, kwargs)
        return out

    def _check_finite(self, out: Any, args: tuple, kwargs: dict[str, Any]) -> None:
        """``jax_debug_nans``/``infs`` as JAX does: a non-finite output runs the function again
        op by op (``disable_jit``), so the error names the primitive and the line that made it."""
        leaves = [x for x in tree_flatten(out)[0] if not isinstance(x, Tracer)]
        try:
            check_finite(f"the output of jit-compiled {self.__name__}", leaves, None)
        except FloatingPointError as found:
            if self.donate_argnums:
                raise FloatingPointError(f"{found}; its donated arguments are gone, so it is not run again "
                                         "op by op: call it without donate_argnums to find the operation") from None
            with disable_jit():
                self.fun(*args, **kwargs)
            raise FloatingPointError(f"{found}, but running it op by op gave none: the optimised graph computes "
                                     "differently (fused or reordered operations); compare with "
                                     f"jit({self.__name__}).lower(...).text") from None

    def _call(self, args: tuple, kwargs: dict[str, Any], fast_key: tuple | None,
              held_once: frozenset[int] = frozenset()) -> Any:
        """:meth:`_call_plain`, or, for a function that touches references (``fungraph.Ref``)
        made outside it or takes them as arguments, :meth:`_call_with_refs`."""
        if self._refs is None and not JIT_DISABLED.on:
            if not kwargs and any(isinstance(a, Ref) for a in args):
                return self._call_ref_args(args)
            start = _ref_frames.next_serial()
            try:
                return self._call_plain(args, kwargs, fast_key, held_once)
            except _ref_frames.RefsTouched as touched:
                if kwargs or not all(r._serial < start for r in touched.refs):
                    raise
                self._refs = list(touched.refs)
        if self._refs is None or kwargs:
            return self._call_plain(args, kwargs, fast_key, held_once)
        return self._call_with_refs(args)

    def _call_with_refs(self, args: tuple) -> Any:
        """Pass the references' values in and write the new ones back, as JAX does with a
        reference a jitted function closes over; a trace finding more references adds them."""
        while True:
            refs = self._refs
            assert refs is not None
            if self._with_refs is None:
                self._with_refs = Jitted(threading_refs(self.fun, refs), tuple(i + 1 for i in self.static_argnums),
                                         tuple(i + 1 for i in self.donate_argnums), self.backend, self.incremental)
            start = _ref_frames.next_serial()
            try:
                out, values = self._with_refs(*(r.read() for r in refs), *args)
                break
            except _ref_frames.RefsTouched as touched:
                more = [r for r in touched.refs if r not in refs]
                if not more or not all(r._serial < start for r in more):
                    raise
                self._refs, self._with_refs = refs + more, None
        for r, v in zip(refs, values):
            r.write(v)
        return out

    def _call_ref_args(self, args: tuple) -> Any:
        """References passed as arguments are closed over by a twin jitted over the other
        arguments (one twin per set of references), which threads them."""
        if self.static_argnums or self.donate_argnums:
            raise TypeError(f"jit({self.__name__}): a fungraph.Ref argument together with static_argnums or "
                            "donate_argnums is not supported; close over the Ref instead")
        at = tuple(i for i, a in enumerate(args) if isinstance(a, Ref))
        key = tuple((i, id(args[i])) for i in at)
        twin = self._ref_args.get(key)
        if twin is None:
            if len(self._ref_args) >= 64:
                self._ref_args.clear()
            twin = self._ref_args[key] = Jitted(closing_over(self.fun, {i: args[i] for i in at}, len(args)), (),
                                                (), self.backend, self.incremental)
        return twin(*(a for i, a in enumerate(args) if i not in at))

    def _call_plain(self, args: tuple, kwargs: dict[str, Any], fast_key: tuple | None,
                    held_once: frozenset[int] = frozenset()) -> Any:
        """Every call but the hottest (a compiled signature seen before, positional arrays only),
        which ``__call__`` runs itself; ``fast_key``: ``__call__``'s key for ``args``, if any;
        ``held_once``: the leaves of donated bare arguments only the caller's name holds."""
        if JIT_DISABLED.on:
            return self.fun(*args, **kwargs)
        if kwargs:
            return self._with_keywords(args, kwargs)
        tree_key = None
        if not self.static_argnums:
            flat, tree = tree_flatten(args)
            leaf_key = _fast_key(flat)
            if leaf_key is not None:
                tree_key = (tree, leaf_key)
                entry = self._fast_tree.get(tree_key)
                if entry is not None and entry.compiled is not None:
                    if self.donate_argnums:
                        flat = self._prepare(flat, entry, held_once)
                    return tree_unflatten(entry.out_tree, weak_outputs(entry.compiled.executable.run(flat),
                                                                        entry.weak_outs))
            del flat  # a donated leaf it held would count as the caller's second reference (take_donated)
        leaves, in_tree, static, key = self._signature(args)
        if any(isinstance(x, Tracer) for x in leaves):
            graph, closure, out_tree, weak_outs = self._stage(in_tree, static, key)
            outs = jit_call_p.bind(*leaves, *closure, call=graph, name=self.__name__, backend=self.backend)
            return tree_unflatten(out_tree, weak_outputs(outs, weak_outs))
        entry = self._cache.get(key)
        if entry is None:
            graph, closure, out_tree, weak_outs = self._stage(in_tree, static, key)
            if closure:
                outs = jit_call_p.bind(*leaves, *closure, call=graph, name=self.__name__, backend=self.backend)
                return tree_unflatten(out_tree, weak_outputs(outs, weak_outs))
            donated = usable_donations(graph.in_avals, graph.out_avals, self._donated_mask(args, len(leaves)))
            compiled = None if self.incremental else compile_graph(graph, self.backend, donated, keep=False)
            entry = _Entry(graph, out_tree, compiled, weak_outs)
            self._cache[key] = entry
        if entry.compiled is not None:
            if fast_key is not None:
                self._caches.index(self._fast, fast_key, entry)
            if tree_key is not None:
                self._caches.index(self._fast_tree, tree_key, entry)
        arrays = self._prepare(leaves, entry, held_once)
        if entry.compiled is None:
            outs = self._run_incremental(key, entry.graph, arrays)
        else:
            outs = entry.compiled.executable.run(arrays)
        return tree_unflatten(entry.out_tree, weak_outputs(outs, entry.weak_outs))

    def _prepare(self, leaves: list[Any], entry: _Entry, held_once: frozenset[int] = frozenset()) -> list[Any]:
        arrays = [_as_input(x) for x in leaves]
        if entry.compiled is not None and any(entry.compiled.executable.donated):
            owners = owner_counts(arrays)
            for i, d in enumerate(entry.compiled.executable.donated):
                if not d or isinstance(arrays[i], DeviceArray):
                    continue
                shared = (owners is None or owners[id(memory_owner(arrays[i]))] > 1) and any(
                    j != i and isinstance(b, np.ndarray) and np.may_share_memory(arrays[i], b)
                    for j, b in enumerate(arrays))
                if shared or not take_donated(leaves, arrays, i, i in held_once):
                    arrays[i] = np.array(arrays[i], copy=True)  # the caller's numpy array stays as it was, as in JAX
        return arrays

    def _run_incremental(self, key: Hashable, graph: Graph, arrays: list[np.ndarray]) -> list[np.ndarray]:
        exe = self._caches.incremental.get(key)
        if exe is None:
            exe = self._caches.incremental[key] = IncrementalExecutable(optimize(graph)[0])
        return exe.run(arrays)

    def trace(self, *args: Any, **kwargs: Any) -> Traced:
        """The function staged for these arguments, not yet optimised or compiled (JAX's
        ``jit(f).trace``): its graph, ``args_info`` and ``out_info``; ``lower()`` goes on."""
        if kwargs:
            jitted, args = self._positional_call(args, kwargs)
            return jitted.trace(*args)
        leaves, in_tree, static, key = self._signature(args)
        graph, closure, out_tree, weak_outs = self._stage(in_tree, static, key)
        if closure:
            raise TypeError(f"jit({self.__name__}).trace: the function closes over traced values")
        donated = self._donated_mask(args, len(leaves))
        args_info = tree_unflatten(in_tree, [ArgInfo(a, d) for a, d in zip(key[2], donated)])
        out_info = tree_unflatten(out_tree, [ShapeDtypeStruct(a.shape, a.dtype, weak_type=i in weak_outs)
                                             for i, a in enumerate(graph.out_avals)])

        def lowering() -> Lowered:
            usable = usable_donations(graph.in_avals, graph.out_avals, donated)
            compiled = compile_graph(graph, self.backend, usable, keep=False)
            return Lowered(compiled, self, key, args_info, out_info)

        return Traced(graph, args_info, out_info, self.__name__, lowering)

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """The function staged, optimised and planned for these arguments (JAX's
        ``jit(f).lower``): print it, or ``compile()`` it."""
        return self.trace(*args, **kwargs).lower()

    def last_incremental(self) -> Any:
        """The incremental executable of the most recent signature (for inspection in tests)."""
        return next(reversed(self._caches.incremental.values()), None)


def _as_input(x: Any) -> Any:
    """Device arrays pass through untouched; everything else becomes a numpy array."""
    return x if isinstance(x, DeviceArray) else to_concrete_dtype_array(x)


def _fast_key(args: Sequence[Any]) -> tuple | None:
    """A cache key for the common call with only numpy arrays (results of earlier calls
    included, weakly typed ones not) of supported dtypes, else None."""
    x64 = dtypes.x64_enabled()
    key: list[Any] = [x64, RANK_PROMOTION.mode, dtypes.PROMOTION.mode]
    enabled = dtypes.ENABLED_IN_MODE[x64]
    for a in args:
        if type(a) is np.ndarray or type(a) is HostArray:
            if a.dtype not in enabled or type(a) is HostArray and a.weak_type:
                return None
            key.append((a.shape, a.dtype))
        elif isinstance(a, DeviceArray):
            key.append((type(a), a.shape, a.dtype))
        else:
            return None
    return tuple(key)


def _parameters(fun: Callable[..., Any]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """``fun``'s positional and keyword-only parameter names, or None when it has ``*args``,
    ``**kwargs`` or no signature."""
    try:
        params = inspect.signature(fun).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return None
    return (tuple(p.name for p in params if p.kind != p.KEYWORD_ONLY),
            tuple(p.name for p in params if p.kind == p.KEYWORD_ONLY))


def _in_range(fun: Callable[..., Any], nums: int | Sequence[int], what: str) -> tuple[int, ...]:
    """``nums`` checked against ``fun``'s positional parameters and made non-negative (left as
    given for a function taking ``*args``, as JAX does)."""
    nums = (nums,) if isinstance(nums, int) else tuple(nums)
    params = _parameters(fun)
    if params is None:
        return nums
    n = len(params[0])
    bad = [i for i in nums if not -n <= i < n]
    if bad:
        raise ValueError(f"jit({getattr(fun, '__name__', fun)}) has {what}_argnums={nums}, but it takes only {n} "
                         f"positional argument(s) {params[0]}")
    return tuple(i % n for i in nums)


def _argnums(fun: Callable[..., Any], nums: int | Sequence[int], names: str | Sequence[str], what: str) -> tuple:
    """``nums`` with the positions of the parameters ``names`` added (keyword-only parameters
    counted after the positional ones, as :meth:`Jitted._with_keywords` orders them)."""
    out = (nums,) if isinstance(nums, int) else tuple(nums)
    names = (names,) if isinstance(names, str) else tuple(names)
    if not names:
        return out
    params = _parameters(fun)
    order = None if params is None else params[0] + params[1]
    for name in names:
        if order is None or name not in order:
            raise ValueError(f"jit: {what}_argnames names {name!r}, which is not a named parameter of "
                             f"{getattr(fun, '__name__', fun)}" + ("" if order is None else f" {order}"))
        out += (order.index(name),)
    return tuple(dict.fromkeys(out))


def jit(fun: Callable[..., Any] | None = None, *, static_argnums: int | Sequence[int] | None = (),
        static_argnames: str | Sequence[str] | None = (), donate_argnums: int | Sequence[int] | None = (),
        donate_argnames: str | Sequence[str] | None = (), backend: str | None = "cpu", incremental: bool = False,
        in_shardings: Any = None, out_shardings: Any = None, keep_unused: bool = False, device: Any = None,
        inline: bool = False, compiler_options: dict[str, Any] | None = None) -> Any:
    """Compile ``fun``: trace it once per input signature, optimise, plan memory and execute.
    Calls may pass keyword arguments; ``static_argnames``/``donate_argnames`` name parameters
    as ``static_argnums``/``donate_argnums`` number them. JAX's other options are taken as they
    mean on one device: shardings that place everything on it (``in_shardings``/``out_shardings``
    of single-device or fully replicated shardings, a one-device mesh), ``device`` (picks the
    backend), ``keep_unused``, ``inline`` and ``compiler_options`` (XLA's, which have no
    meaning here)."""
    _check_one_device(fun, in_shardings, "in_shardings")
    _check_one_device(fun, out_shardings, "out_shardings")
    if device is not None:
        backend = getattr(device, "platform", device)
    backend = "cpu" if backend is None else backend

    def make(f: Callable[..., Any]) -> Jitted:
        sa = _argnums(f, _in_range(f, _given(static_argnums), "static"), _given(static_argnames), "static")
        da = _argnums(f, _in_range(f, _given(donate_argnums), "donate"), _given(donate_argnames), "donate")
        both = sorted(set(sa) & set(da))
        if both:
            raise ValueError(f"jit({getattr(f, '__name__', f)}): argument(s) {both} are both static and donated "
                             "(static_argnums/static_argnames and donate_argnums/donate_argnames must not "
                             "intersect: a static argument is not an array to donate)")
        return Jitted(f, sa, da, backend, incremental)

    return make if fun is None else make(fun)


def _given(argnums: Any) -> Any:
    """An argnums/argnames option, None (JAX's default) as none."""
    return () if argnums is None else argnums


def _check_one_device(fun: Any, shardings: Any, what: str) -> None:
    """Shardings that keep every array whole on one device, which is what fungraph's ``jit``
    computes; a split over several devices belongs in ``shard_map`` (docs/distributed.md)."""
    for sharding in tree_leaves(shardings, is_leaf=lambda x: x is None or isinstance(x, PartitionSpec)):
        if sharding is None or isinstance(sharding, PartitionSpec) and (not sharding.axis_names() or
                                                                         _mpi.process_count() == 1):
            continue
        mesh = getattr(sharding, "mesh", None)
        if getattr(sharding, "is_fully_replicated", False) or getattr(sharding, "num_devices", 1) == 1 or \
                (mesh is not None and mesh.size == 1):
            continue
        raise NotImplementedError(f"jit({getattr(fun, '__name__', 'f')}, {what}=...): {sharding} splits arrays over "
                                  "several devices; fungraph's jit computes on one device per process: split the "
                                  "work with shard_map (docs/distributed.md)")


