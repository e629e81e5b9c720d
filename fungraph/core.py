"""Primitives, the trace stack and tracers: how Python calls become IR.

Follows Autodidax: every operation is ``prim.bind(*args)``; ``bind`` finds the innermost
active trace among the arguments (or the dynamic trace) and lets it interpret the call.
"""

from __future__ import annotations

import operator
import os
import sys
import threading
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from fungraph import dtypes
from fungraph._config import FLOAT_CHECKS
from fungraph.array import DeletedHostArray, HostArray, deleted_error, hosted, hosted_copy_if_shared, unhosted
from fungraph.ir import HasAval, Params, ShapedArray, aval_of
from fungraph.ir import Literal as Literal  # noqa: PLC0414  (jax.core.Literal, as JAX programs reach it)
from fungraph.ir import Var as Var  # noqa: PLC0414  (jax.core.Var)


class ShapeError(ValueError, TypeError):
    """Operands have incompatible shapes or dtypes; the message names both and the source line."""


class ConcretizationError(TypeError):
    """A traced value was used where Python needs a concrete one (``if``, ``bool``, ``int``);
    JAX's ``ConcretizationTypeError``."""


class TracerBoolConversionError(ConcretizationError):
    """``bool()`` (an ``if`` or ``while``) of an abstract traced value, as JAX names it."""


class TracerIntegerConversionError(ConcretizationError):
    """An abstract traced value used as an index (``__index__``), as JAX names it."""


class TracerArrayConversionError(ConcretizationError):
    """An abstract traced value converted to a numpy array, as JAX names it."""


class UnexpectedTracerError(TypeError):
    """A traced value used after (or outside) the transformation that made it, as JAX names it."""


class JAXTypeError(TypeError):
    """JAX's base of its own type errors (``jax.errors.JAXTypeError``)."""


class JAXIndexError(IndexError):
    """JAX's base of its own index errors (``jax.errors.JAXIndexError``)."""


class NonConcreteBooleanIndexError(JAXIndexError):
    """Boolean-mask indexing with a traced mask, whose result shape depends on the data."""


class KeyReuseError(JAXTypeError):
    """A random key used twice where key-reuse checking is on, as JAX names it."""


class JaxRuntimeError(RuntimeError):
    """An error of a running computation, as JAX names those XLA reports."""


class NestingError(RecursionError):
    """A program nests transformations or sub-graphs (cond in cond, pytrees in pytrees)
    deeper than fungraph can trace; the message names the depth."""


class MissingRuleError(NotImplementedError):
    """A primitive lacks the rule an interpreter needs."""


class MissingTransposeError(MissingRuleError, TypeError):
    """Reverse mode met a primitive with no transpose rule applied to tangents: JAX's
    ``NotImplementedError`` (a user's primitive before ``ad.primitive_transposes`` has its rule),
    and the ``TypeError`` of a primitive that is not linear."""


class NotDifferentiable:
    """Marker rule: the primitive has no derivative (its outputs are integer-valued or piecewise constant)."""

    def __repr__(self) -> str:
        return "NOT_DIFFERENTIABLE"


NOT_DIFFERENTIABLE = NotDifferentiable()


@dataclass(frozen=True)
class MissingRule:
    """The rule a user's primitive has until it is given one (JAX lets a primitive exist before
    its rules): calling it is a clear error naming the primitive and the method that fills it.
    Eager evaluation of a primitive whose abstract evaluation is missing takes its result types
    from the ``impl``'s outputs, as JAX's eager ``bind`` does."""

    what: str
    name: str
    how: str

    def __call__(self, *args: Any, **params: Any) -> Any:
        raise MissingRuleError(f"no {self.what} rule for primitive `{self.name}`: give one with `{self.how}`")

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


_INTERNAL_FILES: dict[str, bool] = {}


def _is_internal(filename: str) -> bool:
    internal = _INTERNAL_FILES.get(filename)
    if internal is None:
        internal = os.path.abspath(filename).startswith(_PACKAGE_DIR) or "contextlib" in filename
        _INTERNAL_FILES[filename] = internal
    return internal


def source_stack() -> list[str | None]:
    """This thread's stack of source lines that interpreters re-binding an equation push
    (its last item, when not None, is the line :func:`user_source` reports)."""
    return _STATE.sources


@contextmanager
def source_of(source: str | None) -> Iterator[None]:
    """Attribute equations staged inside to ``source`` (an interpreter re-binding an equation)."""
    sources = _STATE.sources
    sources.append(source)
    try:
        yield
    finally:
        sources.pop()


def user_source() -> str | None:
    """``file:line (function)`` of the innermost stack frame outside the fungraph package."""
    override = _STATE.sources[-1]
    if override is not None:
        return override
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if not _is_internal(code.co_filename):
            return f"{code.co_filename}:{frame.f_lineno} ({code.co_name})"
        frame = frame.f_back
    return None


AbstractEval = Callable[..., "ShapedArray | tuple[ShapedArray, ...]"]

#: The byte alignment of every buffer in a planned arena: the memory planner places buffers at
#: multiples of it, and a primitive's scratch rule (a conv's taps) rounds its blocks up to it.
ALIGNMENT = 64


@dataclass(frozen=True)
class ScratchLowering:
    """A lowering that runs in a block of planned scratch memory: ``nbytes(eqn)`` is the block's
    size (the memory planner places it in the arena, live only while the equation runs) and
    ``lower(eqn, block)`` gives the lowering bound to that block."""

    nbytes: Callable[[Any], int]
    lower: Callable[[Any, Any], Callable[..., Any]]


@dataclass(frozen=True)
class LoweringRule:
    """What a backend runs for one primitive: ``rule`` (its form is the backend's: the CPU
    engine's ``rule(out, *inputs, **params)``, OpenCL's C expression or kernel builder) and,
    for lowerings that need planned scratch, ``scratch``; either may be absent."""

    rule: Callable[..., Any] | None = None
    scratch: ScratchLowering | None = None


@dataclass(eq=False)
class Primitive:
    """An operation of the IR with its rule tables; each interpreter reads one table entry.

    ``jvp(primals, tangents, **params) -> (primal_out, tangent_out)``;
    ``transpose(cts, *inputs, **params) -> cotangents per input`` (linear primitives only);
    ``batch(args, dims, **params) -> (out, out_dim)``; ``lowerings[backend]`` for engines,
    filled by :func:`register_lowering` and read by :meth:`lowering`;
    ``partial_eval(eqn, unknown_inputs)`` splits a call-like equation for reverse mode;
    ``inplace`` names the inputs an engine may overwrite with the output; ``effectful``
    primitives are never merged, folded or removed by the optimiser; equations of a primitive
    that is not ``mergeable`` are never merged by CSE (an optimisation barrier).
    """

    name: str
    impl: Callable[..., Any]
    abstract_eval: AbstractEval
    multiple_results: bool = False
    arity: int | None = None
    jvp: Callable[..., Any] | NotDifferentiable | None = None
    transpose: Callable[..., Any] | None = None
    batch: Callable[..., Any] | None = None
    lowerings: dict[str, LoweringRule] = field(default_factory=dict, init=False)
    partial_eval: Callable[..., Any] | None = None
    inplace: tuple[int, ...] = ()
    #: Which inputs output ``j`` of ``eqn`` may overwrite, when that depends on the equation
    #: (a fusion region's body); ``inplace_rule(eqn, j)`` overrides ``inplace``.
    inplace_rule: Callable[[Any, int], tuple[int, ...]] | None = None
    elementwise: bool = False
    #: JAX's weak-type rule: the outputs are weakly typed when the operands at these positions
    #: all are (None: every operand, as for an elementwise primitive); ``()`` for a primitive
    #: whose outputs are always strong. Structural primitives (reshape, concatenate, gather, ...)
    #: set it as JAX's do, so ``reshape`` of a weak value stays weak.
    weak_from: tuple[int, ...] | None = ()
    effectful: bool = False
    mergeable: bool = True
    #: An effectful primitive whose effect only the readers of its outputs observe (the tape
    #: ``while_fwd`` records): dead-code elimination removes it when its outputs are dead.
    effect_in_outputs: bool = False
    #: Its jvp rule binds control flow on primals and tangents together (its primal outputs
    #: are not computed apart from the tangents), so reverse mode at concrete primals splits
    #: it as it splits a primitive with a ``partial_eval`` rule.
    joint_jvp: bool = False

    registry: ClassVar[dict[str, Primitive]] = {}

    def __post_init__(self) -> None:
        if self.name in Primitive.registry:
            raise ValueError(f"primitive {self.name!r} is defined twice")
        Primitive.registry[self.name] = self
        if self.elementwise and self.name != "convert_element_type" and self.weak_from == ():
            self.weak_from = None

    def __repr__(self) -> str:
        return self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def rule(self, kind: str) -> Callable[..., Any]:
        """The ``kind`` rule, or a clear error that it is missing."""
        r = getattr(self, kind) if kind != "lowering" else None
        if r is None:
            raise MissingRuleError(f"no {kind} rule for primitive `{self.name}`")
        if isinstance(r, NotDifferentiable):
            raise TypeError(f"`{self.name}` is not differentiable")
        return r

    def lowering(self, backend: str) -> LoweringRule:
        """The ``backend`` lowering (:func:`register_lowering`), or a clear error that it is missing."""
        rule = self.lowerings.get(backend)
        if rule is None:
            raise MissingRuleError(f"no {backend} lowering for primitive `{self.name}`")
        return rule

    def def_impl(self, f: Callable[..., Any]) -> Callable[..., Any]:
        self.impl = f
        return f

    def def_abstract_eval(self, f: AbstractEval) -> AbstractEval:
        self.abstract_eval = f
        return f

    def def_jvp(self, f: Callable[..., Any]) -> Callable[..., Any]:
        self.jvp = f
        return f

    def def_transpose(self, f: Callable[..., Any]) -> Callable[..., Any]:
        self.transpose = f
        return f

    def def_batch(self, f: Callable[..., Any]) -> Callable[..., Any]:
        self.batch = f
        return f

    def abstract_eval_tuple(self, avals: Sequence[ShapedArray], params: Params) -> tuple[ShapedArray, ...]:
        out = self.abstract_eval(*avals, **params.kwargs())
        return tuple(out) if self.multiple_results else (out,)

    def bind(self, *args: Any, **params: Any) -> Any:
        """Apply the primitive under whichever trace owns the arguments."""
        return bind(self, args, Params(params))


class RuleTable(MutableMapping[Primitive, Callable[..., Any]]):
    """One rule of every primitive seen as JAX's registry of it (``ad.primitive_jvps``,
    ``batching.primitive_batchers``): setting ``table[prim]`` sets the primitive's ``kind`` rule,
    through ``adapt(prim, rule)`` where JAX's calling convention differs from fungraph's, so the
    primitive stays the one place its rules live. Iteration lists the registered primitives that
    have the rule and the ones given it through the table."""

    def __init__(self, kind: str,
                 adapt: Callable[[Primitive, Callable[..., Any]], Callable[..., Any]] | None = None) -> None:
        self.kind = kind
        self.adapt = adapt
        self.assigned: dict[int, Primitive] = {}

    def __getitem__(self, prim: Primitive) -> Callable[..., Any]:
        rule = getattr(prim, self.kind, None) if isinstance(prim, Primitive) else None
        if rule is None or isinstance(rule, NotDifferentiable):
            raise KeyError(prim)
        return rule

    def __setitem__(self, prim: Primitive, rule: Callable[..., Any]) -> None:
        if not isinstance(prim, Primitive):
            raise TypeError(f"a {self.kind} rule is registered for a Primitive, got {type(prim).__name__}")
        if not callable(rule):
            raise TypeError(f"the {self.kind} rule of `{prim.name}` must be callable, got {type(rule).__name__}")
        setattr(prim, self.kind, rule if self.adapt is None else self.adapt(prim, rule))
        self.assigned[id(prim)] = prim

    def __delitem__(self, prim: Primitive) -> None:
        self[prim]  # noqa: B018  (a KeyError when there is none)
        setattr(prim, self.kind, None)

    def __iter__(self) -> Iterator[Primitive]:
        prims = {id(p): p for p in (*Primitive.registry.values(), *self.assigned.values())}
        return iter([p for p in prims.values() if p in self])

    def __contains__(self, prim: object) -> bool:
        try:
            self[prim]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def __len__(self) -> int:
        return sum(1 for _ in self)


def register_lowering(prim: Primitive, backend: str, rule: Callable[..., Any] | None = None, *,
                      scratch: ScratchLowering | None = None) -> None:
    """The one way to give ``prim`` a lowering on ``backend`` (JAX's ``mlir.register_lowering``):
    ``rule`` in the backend's own form, ``scratch`` when the lowering needs planned scratch.
    A second registration for the same primitive and backend is an error."""
    if rule is None and scratch is None:
        raise ValueError(f"register_lowering({prim.name}, {backend!r}): give a rule, a scratch lowering or both")
    if backend in prim.lowerings:
        raise ValueError(f"primitive `{prim.name}` already has a {backend} lowering")
    prim.lowerings[backend] = LoweringRule(rule, scratch)


def get_primitive(name: str) -> Primitive:
    try:
        return Primitive.registry[name]
    except KeyError:
        raise KeyError(f"unknown primitive `{name}`") from None


# --- deep nesting ----------------------------------------------------------------------

#: Python's recursion limit while fungraph traces or compiles: a nested ``cond`` costs about
#: seven frames a level, so JAX's 200 levels need more than Python's default 1000. Bounded so
#: that recursion through C (hashing nested graphs) stays well inside a thread's stack.
TRACE_RECURSION_LIMIT = 4000
_DEEP = threading.Lock()
_deep_users = 0
_saved_limit = 0


@contextmanager
def deep_recursion() -> Iterator[None]:
    """Raise Python's recursion limit to :data:`TRACE_RECURSION_LIMIT` while any thread is
    inside (restored when the last one leaves)."""
    global _deep_users, _saved_limit
    with _DEEP:
        if _deep_users == 0:
            _saved_limit = sys.getrecursionlimit()
            if _saved_limit < TRACE_RECURSION_LIMIT:
                sys.setrecursionlimit(TRACE_RECURSION_LIMIT)
        _deep_users += 1
    try:
        yield
    finally:
        with _DEEP:
            _deep_users -= 1
            if _deep_users == 0:
                sys.setrecursionlimit(_saved_limit)


def nesting_error(what: str, depth: int) -> NestingError:
    """The error for a program nested ``depth`` levels deep, past what Python's stack allows."""
    return NestingError(f"{what} nests {depth} levels deep (cond, while_loop, scan or jit inside one another), "
                        f"past what fungraph can trace with Python's recursion limit of {TRACE_RECURSION_LIMIT}; "
                        "flatten the nesting (lax.switch over several branches, a loop instead of recursion)")


# --- the trace stack -------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class MainTrace:
    level: int
    trace_type: type[Trace]
    global_data: Any


class Trace:
    """Interprets primitives applied to its tracers; subclasses are the interpreters."""

    def __init__(self, main: MainTrace) -> None:
        self.main = main

    def pure(self, val: Any) -> Tracer:
        raise NotImplementedError

    def lift(self, val: Tracer) -> Tracer:
        raise NotImplementedError

    def process_primitive(self, prim: Primitive, tracers: Sequence[Any], params: Params) -> Sequence[Any]:
        raise NotImplementedError


def check_finite(what: str, outs: Sequence[Any], source: str | None) -> None:
    """Raise ``FloatingPointError`` (as JAX's ``jax_debug_nans`` does) if an inexact array of
    ``outs`` holds a NaN (or, with ``jax_debug_infs``, an infinity), naming ``what`` made it
    and where."""
    for i, o in enumerate(outs):
        arr = np.asarray(o)
        if arr.dtype.kind not in "fc":
            continue
        for bad, on, test in (("nan", FLOAT_CHECKS.nans, np.isnan), ("inf", FLOAT_CHECKS.infs, np.isinf)):
            count = int(np.count_nonzero(test(arr))) if on else 0
            if count:
                where = f" at {source}" if source else ""
                which = f" (output {i})" if len(outs) > 1 else ""
                raise FloatingPointError(f"invalid value ({bad}) encountered in {what}{which}{where}: "
                                         f"{count} of the {arr.size} values of its {arr.dtype.name}{list(arr.shape)} "
                                         f"result (jax_debug_{bad}s is on)")


class EvalTrace(Trace):
    """The bottom of the stack: run the numpy implementation."""

    def pure(self, val: Any) -> Any:
        return val

    lift = pure

    def process_primitive(self, prim: Primitive, tracers: Sequence[Any], params: Params) -> Sequence[Any]:
        if not dtypes.x64_enabled():
            tracers = [_in_32_bit_mode(x) for x in tracers]
        avals = [aval_of(x) for x in tracers]
        no_shape_rule = isinstance(prim.abstract_eval, MissingRule)
        expected = () if no_shape_rule else checked_abstract_eval(prim, avals, params)
        out = run_impl(prim, [unhosted(x) for x in tracers], params.kwargs())
        outs = out if prim.multiple_results else (out,)
        if no_shape_rule:
            expected = tuple(_impl_aval(o) for o in outs)
        if FLOAT_CHECKS.nans or FLOAT_CHECKS.infs:
            check_finite(prim.name, outs, user_source())
        writeable = [x for x in tracers if isinstance(x, np.ndarray) and x.flags.writeable]
        return [_as_array(o, a, writeable) for o, a in zip(outs, expected)]


def _in_32_bit_mode(x: Any) -> Any:
    """An eager operand with x64 off: a 64-bit numpy value (an internal constant) as its 32-bit
    counterpart, except integers beyond 32 bits (``while_loop``'s tape handles), which are ids."""
    if not isinstance(x, (np.ndarray, np.generic)) or x.dtype in dtypes.enabled():
        return x
    if x.dtype.kind in "iu" and x.size and (x.min() < -(2**31) or x.max() >= 2**31):
        return x
    return to_concrete_dtype_array(x)


def run_impl(prim: Primitive, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """``prim``'s numpy implementation; where numpy (with ml_dtypes' loops) has none for an
    emulated float (bfloat16, float8), it runs in float32 and the caller rounds the result
    to the output type."""
    try:
        return prim.impl(*args, **kwargs)
    except (TypeError, ValueError, NotImplementedError):
        if not any(getattr(a, "dtype", None) in dtypes.EMULATED for a in args):
            raise
    return prim.impl(*[np.asarray(a, dtypes.float32) if getattr(a, "dtype", None) in dtypes.EMULATED else a
                       for a in args], **kwargs)


def _impl_aval(x: Any) -> ShapedArray:
    """The type of an ``impl``'s output, its dtype canonical for the dtype mode."""
    arr = np.asarray(x)
    return ShapedArray(arr.shape, dtypes.canonicalize(arr.dtype))


def _as_array(x: Any, aval: ShapedArray, writeable: list[np.ndarray]) -> np.ndarray:
    """The impl's output as a read-only result; a copy where it is (a view of) one of the
    ``writeable`` inputs, which the caller may still change."""
    arr = np.asarray(x, dtype=aval.dtype)
    if arr.shape != aval.shape:
        raise AssertionError(f"impl gave shape {arr.shape}, shape rule {aval.shape}")
    return hosted_copy_if_shared(arr, writeable) if writeable else hosted(arr)


class _TraceState(threading.local):
    """The stack of active transformations and the dynamic (staging) trace, per thread as in
    JAX: a thread starts at the eval trace, so threads may trace and transform at once. The
    source lines interpreters push (:func:`source_of`) are per thread too."""

    def __init__(self) -> None:
        self.stack: list[MainTrace] = [MainTrace(0, EvalTrace, None)]
        self.dynamic: list[MainTrace] = [self.stack[0]]
        self.sources: list[str | None] = [None]


_STATE = _TraceState()


def innermost_main() -> MainTrace:
    """The innermost active transformation of this thread."""
    return _STATE.stack[-1]


def is_eager() -> bool:
    """Whether this thread runs operations now, outside every transformation and staging."""
    return len(_STATE.stack) == 1 and len(_STATE.dynamic) == 1


def is_staging() -> bool:
    """Whether operations on concrete values are being staged (inside ``jit``, ``make_graph``
    or a control-flow body) rather than run now."""
    return _STATE.dynamic[-1].trace_type is not EvalTrace


@contextmanager
def new_main(trace_type: type[Trace], global_data: Any = None) -> Iterator[MainTrace]:
    stack = _STATE.stack
    main = MainTrace(len(stack), trace_type, global_data)
    stack.append(main)
    try:
        yield main
    finally:
        stack.pop()


@contextmanager
def new_dynamic(main: MainTrace) -> Iterator[None]:
    dynamic = _STATE.dynamic
    dynamic.append(main)
    try:
        yield
    finally:
        dynamic.pop()


def checked_abstract_eval(prim: Primitive, avals: Sequence[ShapedArray], params: Params) -> tuple[ShapedArray, ...]:
    """Run the shape rule, re-raising its complaint with the user's source line attached."""
    try:
        return prim.abstract_eval_tuple(avals, params)
    except (ShapeError, TypeError, ValueError) as err:
        if getattr(err, "_fungraph_located", False):
            raise
        src = user_source()
        msg = f"{err}" + (f"\n  at {src}" if src else "")
        new = (type(err) if isinstance(err, ShapeError) else ShapeError)(msg)
        new._fungraph_located = True  # type: ignore[attr-defined]
        raise new from None


def find_top_trace(xs: Sequence[Any]) -> Trace:
    top = _STATE.dynamic[-1]
    for x in xs:
        if isinstance(x, Tracer) and x._trace.main.level > top.level:
            top = x._trace.main
    return top.trace_type(top)


def full_raise(trace: Trace, val: Any) -> Any:
    if not isinstance(val, Tracer):
        return trace.pure(val)
    main = val._trace.main
    if main is trace.main:
        return val
    if main.level < trace.main.level:
        return trace.lift(val)
    raise UnexpectedTracerError(
        f"a traced value of type {val.aval} escaped from the transformation that created it "
        "(was it stored in a global or returned through a side channel?)"
    )


def full_lower(val: Any) -> Any:
    return val.full_lower() if isinstance(val, Tracer) else val


def bind(prim: Primitive, args: Sequence[Any], params: Params) -> Any:
    trace = find_top_trace(args)
    tracers = [full_raise(trace, a) for a in args]
    outs = [full_lower(o) for o in trace.process_primitive(prim, tracers, params)]
    if prim.weak_from != () and _weak_result(prim.weak_from, args):
        outs = [weakened(o) for o in outs]
    return tuple(outs) if prim.multiple_results else outs[0]


def _weak_result(positions: tuple[int, ...] | None, args: Sequence[Any]) -> bool:
    """JAX's weak-type rule: the operands at ``positions`` (None: all) are all weakly typed."""
    if positions is None:
        return all(dtypes.is_weak(a) for a in args)
    return all(dtypes.is_weak(args[i]) for i in positions)


_WEAK_CLASSES: dict[type, type] = {}


def weak_array(arr: np.ndarray) -> np.ndarray:
    """``arr`` as a read-only result typed weakly (a Python scalar converted for a primitive)."""
    out = hosted(arr)
    out.weak_type = True
    return out


def weak_outputs(outs: Sequence[Any], positions: Sequence[int]) -> list[Any]:
    """``outs`` with those at ``positions`` typed weakly: the results of a staged function
    (``jit``, a loop, ``cond``) whose outputs JAX types weakly."""
    outs = list(outs)
    for i in positions:
        outs[i] = weak_view(outs[i])
    return outs


def weak_view(x: Any) -> Any:
    """``x`` (a result of a compiled function, perhaps a constant or an input it shares with
    other outputs) typed weakly: a weak view of a host array, ``x`` itself weakened otherwise."""
    if type(x) is HostArray or type(x) is np.ndarray:
        out = x.view(HostArray)
        out.setflags(False)
        out.weak_type = True
        return out
    weakly_typed = getattr(x, "weakly_typed", None)
    if weakly_typed is not None:
        return weakly_typed()
    return weakened(x)


def weakened(x: Any) -> Any:
    """``x`` (a fresh result) marked weakly typed, as JAX types an elementwise result of weak inputs."""
    if isinstance(x, Tracer):
        cls = type(x)
        if not cls.weak_type:
            weak = _WEAK_CLASSES.get(cls)
            if weak is None:
                weak = _WEAK_CLASSES[cls] = type(cls.__name__, (cls,), {"__slots__": (), "weak_type": True})
            x.__class__ = weak
    elif isinstance(x, np.ndarray) and hasattr(x, "weak_type"):
        x.weak_type = True
    return x


# --- tracers ---------------------------------------------------------------------------


class Tracer(HasAval):
    """A stand-in for an array during a transformation; operators call ``fungraph.numpy``."""

    __slots__ = ("_trace",)
    #: True for a value JAX types weakly (a Python scalar passed to jit): see ``dtypes.is_weak``
    weak_type = False
    __array_priority__ = 1000
    __array_ufunc__ = None
    _trace: Trace

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    def full_lower(self) -> Any:
        return self

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d traced array")
        return self.shape[0]

    def to_concrete_value(self) -> Any:
        """The concrete array this traced value stands for when its transformation knows it
        (``jvp``/``grad`` outside ``jit`` run on concrete primals), else None."""
        return None

    def _concrete_error(self, what: str, kind: type[ConcretizationError] = ConcretizationError) -> ConcretizationError:
        src = user_source()
        return kind(
            f"{what} needs a concrete value, but this is an abstract traced value of type {self.aval}: "
            "inside `jit` (or make_graph, vmap, a lax control-flow body) values are known only by "
            "shape and dtype. Use fungraph.lax.cond / fungraph.numpy.where for branches and "
            "fungraph.lax.while_loop for data-dependent loops, or mark the argument static with "
            "jit's `static_argnums` / `static_argnames`."
            + (f"\n  at {src}" if src else "")
        )

    def _concrete(self, what: str, kind: type[ConcretizationError] = ConcretizationError) -> Any:
        value = self.to_concrete_value()
        if value is None:
            raise self._concrete_error(what, kind)
        return value

    def __bool__(self) -> bool:
        return bool(self._concrete("bool() / an `if` or `while` on a traced value", TracerBoolConversionError))

    def __int__(self) -> int:
        return int(self._concrete("int()"))

    def __float__(self) -> float:
        return float(self._concrete("float()"))

    def __complex__(self) -> complex:
        return complex(self._concrete("complex()"))

    def __index__(self) -> int:
        return operator.index(np.asarray(self._concrete("using a traced value as an index",
                                                        TracerIntegerConversionError)))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise self._concrete_error("converting a traced value to a numpy array", TracerArrayConversionError)

    def __iter__(self) -> Iterator[Any]:
        return iter([self[i] for i in range(len(self))])

    def __hash__(self) -> int:
        raise TypeError("traced values are not hashable")

    def __repr__(self) -> str:
        return f"{type(self).__name__}<{self.aval}>"


class TypedConstant(np.ndarray):
    """A constant of a traced graph bound again by an interpreter (:func:`as_typed_constant`):
    its dtype was decided when the graph was traced, possibly 64-bit in 32-bit mode (the words
    ``fungraph.random`` computes in), so binding it must not canonicalise it again."""


def as_typed_constant(value: Any) -> Any:
    """``value`` (a graph's literal or constant) marked to keep its dtype when bound, where the
    current mode would narrow it; anything else as it is."""
    if isinstance(value, np.ndarray) and not dtypes.x64_enabled() and dtypes.canonicalize(value.dtype) != value.dtype:
        return value.view(TypedConstant)
    return value


def to_concrete_dtype_array(x: Any) -> np.ndarray:
    """``x`` as a numpy array of the dtype the current mode gives it (Python scalars take the
    mode's default int/float/complex; with x64 off 64-bit arrays become 32-bit), through
    :func:`fungraph.dtypes.canonicalize`, the one place values are canonicalised. A donated array raises JAX's error."""
    if x.__class__ is DeletedHostArray:
        raise deleted_error(x)
    if x.__class__ is TypedConstant:
        return x.view(np.ndarray)
    arr = np.asarray(x)
    dt = dtypes.canonicalize(arr.dtype)
    if arr.dtype == dt:
        return arr
    if type(x) is int and not np.can_cast(np.min_scalar_type(x), dt):
        raise OverflowError(f"Python int {x} too large to convert to {dt.name}")
    return arr.astype(dt)


def as_operand(x: Any) -> Any:
    """A tracer as it is, anything else as a numpy array of a supported dtype: a pytree leaf
    made ready to bind."""
    return x if isinstance(x, Tracer) else to_concrete_dtype_array(x)
