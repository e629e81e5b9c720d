"""User-defined derivatives (``custom_jvp``, ``custom_vjp``) and rematerialisation
(``checkpoint``), each a primitive holding the staged function as a sub-graph.

Batching one of them gives the same primitive again, holding the batched graph and the
user's rules mapped over the batch, so a derivative taken outside a ``vmap`` still uses them.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fungraph import custom_rule_checks as checks
from fungraph import dtypes
from fungraph.checkpoint_policies import everything_saveable, nothing_saveable
from fungraph.core import (
    Primitive,
    Tracer,
    UnexpectedTracerError,
    as_operand,
    find_top_trace,
    full_raise,
    innermost_main,
    is_eager,
    weak_array,
    weak_outputs,
)
from fungraph.interpreters.batching import BatchTrace, BatchTracer, batching_axis_name, vmap_flat
from fungraph.interpreters.dce import dce
from fungraph.interpreters.eval import eval_graph
from fungraph.interpreters.graph_transforms import batched_graph, jvp_graph
from fungraph.interpreters.jvp import JVPTrace, JVPTracer, jvp_flat
from fungraph.interpreters.rewrite import Rewriter, producers
from fungraph.interpreters.staging import abstractify, flat_fun, stage
from fungraph.interpreters.transpose import backward_pass, partial_eval
from fungraph.ir import Eqn, Graph, ShapedArray, Var
from fungraph.jit import _argnums
from fungraph.primitives import elementwise as ew
from fungraph.primitives._batching import batch_size
from fungraph.primitives._rules import aval, instantiate, zeros
from fungraph.primitives.barrier import optimization_barrier
from fungraph.primitives.names import name_p, saved_p
from fungraph.primitives.reductions import reduce_sum
from fungraph.tree_util import PyTreeDef, tree_flatten, tree_map, tree_unflatten


def _stage_call(fun: Callable[..., Any], args: Sequence[Any],
                ) -> tuple[list[Any], Graph, list[Any], PyTreeDef, PyTreeDef, tuple[int, ...]]:
    """``fun`` staged on ``args``: their leaves as operands, the graph, its closure, the input
    and output trees, and the positions of the outputs JAX types weakly (weak arguments stay weak)."""
    leaves, in_tree = tree_flatten(tuple(args))
    weak = [dtypes.is_weak(x) for x in leaves]
    leaves = [as_operand(x) for x in leaves]
    box: list[PyTreeDef] = []
    weak_box: list[tuple[int, ...]] = []
    graph, closure = stage(flat_fun(fun, in_tree, {}, box, weak_box), [abstractify(x) for x in leaves], weak)
    return leaves, graph, closure, in_tree, box[0], weak_box[0]


def _typed_operand(x: Any) -> Any:
    """``as_operand(x)``, weakly typed where ``x`` is (a Python scalar, a weak array)."""
    out = as_operand(x)
    return weak_array(out) if not isinstance(x, Tracer) and dtypes.is_weak(x) and not dtypes.is_weak(out) else out


def _call_impl(*args: Any, call: Graph, **_: Any) -> list[Any]:
    return eval_graph(call, *args)


def _call_aval(*avals: ShapedArray, call: Graph, **_: Any) -> tuple[ShapedArray, ...]:
    return call.out_avals


def _batched_call_graph(args: Sequence[Any], dims: Sequence[int | None], call: Graph) -> tuple[int, Graph]:
    """The batch size and ``call`` mapped over ``dims`` (every output batched on axis 0)."""
    size = batch_size(args, dims)
    return size, batched_graph(call, tuple(dims), size, tuple(abstractify(a) for a in args))


def _inline_batch(args: Sequence[Any], dims: Sequence[int | None], call: Graph) -> tuple:
    """Batch the wrapped graph's equations one by one; the wrapper (and any custom rule) is gone."""
    size = batch_size(args, dims)
    outs = vmap_flat(lambda *a: eval_graph(call, *a), args, dims, [0] * len(call.outvars), size)
    return outs, [0] * len(outs)


def _closes_over_batched(dims: Sequence[int | None], num_consts: int) -> bool:
    """Whether a value the function closes over is batched: the user's rules refer to it
    directly, not through their arguments, so they cannot be mapped over the batch."""
    return any(d is not None for d in dims[len(dims) - num_consts:])


def _mapped_dims(raw: Sequence[Any]) -> list[int | None]:
    """For ``vmap_flat``'s ``out_dims``: 0 for the outputs that depend on the mapped axis,
    None for the others (it calls this while its trace is the innermost)."""
    main = innermost_main()
    return [0 if isinstance(o, BatchTracer) and o._trace.main is main and o.bdim is not None else None
            for o in raw]


# --- custom_jvp -------------------------------------------------------------------------

custom_jvp_call_p = Primitive("custom_jvp_call", impl=_call_impl, abstract_eval=_call_aval, multiple_results=True)


_RUNNING_RULES = threading.local()


@custom_jvp_call_p.def_jvp
def _custom_jvp_rule(primals: tuple, tangents: tuple, *, call: Graph, jvp: Callable[..., Any],
                     num_consts: int) -> tuple:
    """The rule on the function's own arguments (a closed-over value's tangent is dropped, as
    JAX's ``custom_jvp_call`` of a staged function drops it). A rule that meets itself again
    through such a value (its function, called inside it, closes over the differentiated
    value) is JAX's ``UnexpectedTracerError``, not an endless recursion."""
    n = len(primals) - num_consts
    running = _RUNNING_RULES.__dict__.setdefault("ids", set())
    key = id(getattr(jvp, "user_rule", jvp))
    if key in running and any(t is not None for t in tangents[n:]):
        raise UnexpectedTracerError(f"Custom JVP rule {getattr(jvp, '__name__', 'jvp')} closes over a value that the "
                                    "enclosing differentiation traces; pass that value to the custom_jvp function as "
                                    "an argument instead")
    ts = [instantiate(t, aval(p)) for p, t in zip(primals[:n], tangents[:n])]
    running.add(key)
    try:
        return jvp(list(primals[:n]), ts)
    finally:
        running.discard(key)


@dataclass(frozen=True)
class _MappedJVP:
    """A jvp rule mapped over a batch: each tangent has its primal's batch axis ``dims[i]``;
    outputs and output tangents get axis 0."""

    jvp: Callable[..., Any]
    dims: tuple[int | None, ...]
    size: int
    axis_name: Hashable | None
    adopt: Any = None

    @property
    def __name__(self) -> str:
        return f"vmap({self.jvp.__name__})"

    def __call__(self, primals: list[Any], tangents: list[Any]) -> tuple[list[Any], list[Any]]:
        n = len(primals)

        def both(*args: Any) -> list[Any]:
            outs, t_outs = self.jvp(list(args[:n]), list(args[n:]))
            return [*outs, *t_outs]

        flat = vmap_flat(both, [*primals, *tangents], self.dims * 2, lambda outs: [0] * len(outs), self.size,
                         self.axis_name, self.adopt)
        half = len(flat) // 2
        return flat[:half], flat[half:]


@custom_jvp_call_p.def_batch
def _custom_jvp_batch(args: Sequence[Any], dims: Sequence[int | None], *, call: Graph, jvp: Callable[..., Any],
                      num_consts: int) -> tuple:
    """A custom_jvp_call of the batched graph whose rule is the user's rule mapped over the batch."""
    if _closes_over_batched(dims, num_consts):
        return _inline_batch(args, dims, call)
    size, graph = _batched_call_graph(args, dims, call)
    rule = _MappedJVP(jvp, tuple(dims[:len(dims) - num_consts]), size, batching_axis_name())
    outs = custom_jvp_call_p.bind(*args, call=graph, jvp=rule, num_consts=num_consts)
    return outs, [0] * len(outs)


def _canonical_numpy(x: Any) -> Any:
    """A numpy array or scalar as a numpy array of the mode's dtype; anything else as it is."""
    if type(x) is not np.ndarray and not isinstance(x, np.generic):
        return x
    arr = np.asarray(x)
    return arr.astype(dtypes.canonicalize(arr.dtype), copy=False)


def eager_arguments(args: tuple) -> list[Any]:
    """The arguments a custom_jvp or custom_vjp function called outside every transformation
    runs on, as JAX 0.10 runs it: Python scalars and arrays as they are, numpy values in the
    mode's dtype; so a body computing on Python floats returns a Python float, as in JAX."""
    return [tree_map(_canonical_numpy, a) for a in args]


def _nondiff_positions(fun: Callable[..., Any], nums: Sequence[int], names: Sequence[str]) -> tuple[int, ...]:
    return tuple(sorted(_argnums(fun, nums, names, "nondiff")))


def _split_nondiff(name: str, positions: tuple[int, ...],
                   args: tuple) -> tuple[list[Any], Callable[[tuple], list[Any]]]:
    """The arguments at ``positions`` (passed to the rules first, as JAX does) and a function that
    puts the remaining, differentiable arguments back among them."""
    if positions[-1] >= len(args):
        raise TypeError(f"{name}: nondiff_argnums {positions} name argument {positions[-1]}, but it was called "
                        f"with {len(args)} positional arguments")
    fixed = {i: args[i] for i in positions}

    def merged(diff: tuple) -> list[Any]:
        rest = iter(diff)
        return [fixed[i] if i in fixed else next(rest) for i in range(len(args))]

    return [fixed[i] for i in positions], merged


class custom_jvp:
    """A function with a hand-written JVP: ``f.defjvp(lambda primals, tangents: (out, t_out))``.

    Under differentiation only the rule runs (``f``'s own body is not called, as in JAX); the
    rule's outputs are checked against the types JAX expects (a pair; equal structures; each
    tangent of its primal's shape and dtype, float0 for integer outputs)."""

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: Sequence[int] = (),
                 nondiff_argnames: Sequence[str] = ()) -> None:
        self.fun = fun
        self.jvp: Callable[..., Any] | None = None
        self.nondiff = _nondiff_positions(fun, nondiff_argnums, nondiff_argnames)
        self.rule_label = f"{getattr(fun, '__name__', 'fun')}_jvp"
        #: traced values a mapped function's original closes over, beyond its own closure
        self.captured: tuple[Tracer, ...] = ()
        functools.update_wrapper(self, fun, updated=())

    def defjvp(self, jvp: Callable[..., Any], symbolic_zeros: bool = False) -> Callable[..., Any]:
        if symbolic_zeros:
            raise NotImplementedError("custom_jvp.defjvp(symbolic_zeros=True) is not supported: the rule gets "
                                      "instantiated zero tangents")
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps: Callable[..., Any] | None) -> None:
        """One rule per positional argument, ``jvp_i(t_i, primal_out, *primals)``, their tangents
        summed (None: the output does not depend on that argument), as JAX's ``defjvps``."""
        if self.nondiff:
            raise TypeError("Can't use ``defjvps`` with ``nondiff_argnums``.")

        def jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
            out = self(*primals)
            terms = [rule(t, out, *primals) for t, rule in zip(tangents, jvps) if rule is not None]
            if not terms:
                return out, tree_map(zero_tangent, out)
            return out, tree_map(lambda *ts: functools.reduce(lambda a, b: a + b, ts), *terms)

        jvp.__name__ = f"{getattr(self.fun, '__name__', 'fun')}_jvps"
        self.defjvp(jvp)

    def __call__(self, *args: Any) -> Any:
        if self.jvp is None:
            raise AttributeError(f"no JVP defined for custom_jvp function {self.fun.__name__}; use defjvp")
        if self.nondiff:
            return self._call_nondiff(args)
        if is_eager():
            return self.fun(*eager_arguments(args))
        leaves, in_tree = tree_flatten(tuple(args))
        return self._dispatch(leaves, in_tree)

    def _dispatch(self, leaves: list[Any], in_tree: PyTreeDef) -> Any:
        """The call on flat ``leaves``, processed by their top trace as JAX's traces process a
        custom_jvp call: differentiation runs the rule, batching maps function and rule, and
        anything else stages the function. Differentiating a function or rule that closes over
        values of ``vmap``s, the innermost of those traces batches the call (JAX's closure
        conversion: the closed-over values become batched arguments of the mapped function and
        rule, which the derivative then runs). Otherwise a function that closes over traced
        values is staged unless its arguments' trace is the innermost, so that value's own
        transformation sees it (a closed-over batched value is then batched inline)."""
        trace = find_top_trace(leaves)
        closed = _closure_tracers(self)
        if closed and all(issubclass(t._trace.main.trace_type, BatchTrace) for t in closed):
            main = max((t._trace.main for t in closed), key=lambda m: m.level)
            if main.level >= trace.main.level and _differentiated(leaves, main):
                return self._batched(BatchTrace(main), leaves, in_tree, adopt=True)
            if isinstance(trace, BatchTrace):
                return self._batched(trace, leaves, in_tree)
        if isinstance(trace, JVPTrace) and (trace.main is innermost_main() or not closed):
            return self._rule_only(trace, leaves, in_tree)
        if isinstance(trace, BatchTrace) and not closed:
            return self._batched(trace, leaves, in_tree)
        args = tree_unflatten(in_tree, leaves)
        leaves, graph, closure, in_tree, out_tree, weak_outs = _stage_call(self.fun, args)
        flat_jvp = self._flat_rule(in_tree, (out_tree, graph.out_avals), [])
        outs = custom_jvp_call_p.bind(*leaves, *closure, call=graph, jvp=flat_jvp, num_consts=len(closure))
        return tree_unflatten(out_tree, weak_outputs(outs, weak_outs))

    def _flat_rule(self, in_tree: PyTreeDef, expected: tuple[PyTreeDef, tuple[ShapedArray, ...]] | None,
                   box: list[PyTreeDef]) -> Callable[[list[Any], list[Any]], tuple[list[Any], list[Any]]]:
        """The rule over flat lists, its outputs checked (``expected``: the function's output
        structure and types, when it was staged); the output structure goes to ``box``."""
        rule = self.jvp
        fun_name = getattr(self.fun, "__name__", "fun")
        rule_name = getattr(rule, "__name__", "jvp")

        def flat_jvp(primals: list[Any], tangents: list[Any]) -> tuple[list[Any], list[Any]]:
            ts = [t if dtypes.is_inexact(aval(p).dtype) else checks.float0_zeros(aval(p))
                  for p, t in zip(primals, tangents)]
            out, t_out = checks.jvp_pair(rule(tree_unflatten(in_tree, primals), tree_unflatten(in_tree, ts)),
                                         rule_name, fun_name)
            out_leaves, tree1 = tree_flatten(out)
            t_leaves, tree2 = tree_flatten(t_out)
            if tree1 != tree2:
                raise TypeError(f"Custom JVP rule {rule_name} for function {fun_name} must produce primal and "
                                f"tangent outputs with equal container (pytree) structures, but got {tree1} and "
                                f"{tree2} respectively.")
            _refuse_differentiated_closure(rule_name, fun_name, [*out_leaves, *t_leaves])
            out_leaves = [as_operand(x) for x in out_leaves]
            if expected is not None:
                checks.check_rule_primals(f"Custom JVP rule {rule_name}", fun_name, tree1, out_leaves, *expected)
            box.append(tree1)
            return out_leaves, checks.checked_tangents(rule_name, fun_name, out_leaves, t_leaves)

        flat_jvp.__name__ = self.rule_label
        flat_jvp.user_rule = rule  # type: ignore[attr-defined]
        return flat_jvp

    def _rule_only(self, trace: JVPTrace, leaves: list[Any], in_tree: PyTreeDef) -> Any:
        """Differentiated: the rule alone gives the primal and tangent outputs (the function
        itself is not called, as in JAX); with no tangent in, the call moves one level down."""
        tracers = [full_raise(trace, x if isinstance(x, Tracer) else as_operand(x)) for x in leaves]
        primals = [t.primal for t in tracers]
        if all(t.tangent is None for t in tracers):
            return self(*tree_unflatten(in_tree, primals))
        tangents = [instantiate(t.tangent, aval(p)) for p, t in zip(primals, tracers)]
        box: list[PyTreeDef] = []
        outs, t_outs = self._flat_rule(in_tree, None, box)(primals, tangents)
        _refuse_differentiated_closure(self.rule_label, getattr(self.fun, "__name__", "fun"), [*outs, *t_outs],
                                       trace.main)
        return tree_unflatten(box[0], [JVPTracer(trace, p, t if dtypes.is_inexact(aval(p).dtype) else None)
                                       for p, t in zip(outs, t_outs)])

    def _batched(self, trace: BatchTrace, leaves: list[Any], in_tree: PyTreeDef, adopt: bool = False) -> Any:
        """Mapped over a batch: the function and its rule, both mapped, make a custom_jvp one
        level down (JAX's batching of a custom_jvp call), so a derivative taken outside the
        ``vmap`` runs the rule alone, and the function is not also staged. With ``adopt``, the
        function or rule closes over values of ``trace``, and the maps take them as batched
        arguments (JAX's closure conversion), whatever the trace of the arguments."""
        tracers = [full_raise(trace, _typed_operand(x)) for x in leaves]
        vals, dims = [t.val for t in tracers], tuple(t.bdim for t in tracers)
        if all(d is None for d in dims) and not adopt:
            return self(*tree_unflatten(in_tree, vals))
        frame = trace.main.global_data
        adopted = trace.main if adopt else None
        fun, box = self.fun, []

        def flat_fun(*xs: Any) -> list[Any]:
            out_leaves, out_tree = tree_flatten(fun(*tree_unflatten(in_tree, list(xs))))
            box.append(out_tree)
            return out_leaves

        def mapped(*xs: Any) -> list[Any]:
            return vmap_flat(flat_fun, xs, dims, lambda outs: [0] * len(outs), frame.size, frame.name, adopted)

        rule = _MappedJVP(self._flat_rule(in_tree, None, box), dims, frame.size, frame.name, adopted)
        inner = custom_jvp(functools.wraps(fun)(mapped))
        inner.defjvp(lambda primals, tangents: _rule_lists(rule, primals, tangents))
        inner.rule_label = f"vmap({self.rule_label})"
        inner.captured = tuple(t for t in _closure_tracers(self) if t._trace.main is not adopted)
        outs = inner._dispatch(vals, tree_flatten(tuple(vals))[1])
        return tree_unflatten(box[-1], [BatchTracer(trace, o, 0) for o in outs])

    def _call_nondiff(self, args: tuple) -> Any:
        """JAX's ``nondiff_argnums``: those arguments are held fixed and passed to the rule first."""
        fixed, merged = _split_nondiff(f"custom_jvp {self.fun.__name__}", self.nondiff, args)
        fun, rule = self.fun, self.jvp
        assert rule is not None
        inner = custom_jvp(functools.wraps(fun)(lambda *diff: fun(*merged(diff))))
        inner.defjvp(functools.wraps(rule)(lambda primals, tangents: rule(*fixed, primals, tangents)))
        return inner(*(a for i, a in enumerate(args) if i not in self.nondiff))


def _rule_lists(rule: _MappedJVP, primals: tuple, tangents: tuple) -> tuple[list[Any], list[Any]]:
    return rule(list(primals), list(tangents))


def _differentiated(leaves: Sequence[Any], main: Any) -> bool:
    """Whether arguments, seen from batch trace ``main``, are differentiated: traced by a JVP
    (under ``main``'s batching, where they belong to it)."""
    for x in leaves:
        while isinstance(x, BatchTracer) and x._trace.main is main:
            x = x.val
        if isinstance(x, Tracer) and issubclass(x._trace.main.trace_type, JVPTrace):
            return True
    return False


def _closure_tracers(f: custom_jvp) -> list[Tracer]:
    """The traced values the function or its rule holds in closure cells (and, for a function
    mapped over a batch, those its original closed over that the map did not take in)."""
    found = list(f.captured)
    for fn in (f.fun, f.jvp):
        cells = getattr(fn, "__closure__", None) or ()
        for cell in cells:
            try:
                contents = cell.cell_contents
            except ValueError:
                continue
            found.extend(x for x in tree_flatten(contents)[0] if isinstance(x, Tracer))
    return found


def _refuse_differentiated_closure(rule: str, fun: str, outs: Sequence[Any], main: Any = None) -> None:
    """A rule runs inside the JVP that differentiates its function (``main``, by default the
    innermost trace); an output traced by that JVP itself came from a value the rule closes
    over, which the rule cannot differentiate (JAX raises UnexpectedTracerError). Refuse it
    instead of letting the tracer escape."""
    main = innermost_main() if main is None else main
    if not issubclass(main.trace_type, JVPTrace):
        return
    if any(isinstance(x, Tracer) and x._trace.main is main for x in outs):
        raise UnexpectedTracerError(f"Custom JVP rule {rule} for function {fun} closes over a value that the enclosing "
                        f"differentiation traces; pass that value to {fun} as an argument instead")


def _cotangent(ct: Any, a: ShapedArray) -> Any:
    """A bwd rule's cotangent for an input of type ``a``: zeros for None, else in ``a``'s dtype."""
    if ct is None:
        return zeros(a)
    ct = as_operand(ct)
    return ct if aval(ct).dtype == a.dtype else ew.convert(ct, a.dtype)


def zero_tangent(x: Any) -> Any:
    """The zero tangent of ``x``: zeros of its type, float0 zeros for integer and boolean ``x``."""
    a = aval(x)
    return np.zeros(a.shape, a.dtype) if dtypes.is_inexact(a.dtype) else checks.float0_zeros(a)


# --- custom_vjp -------------------------------------------------------------------------


def _check_cotangent_vma(bwd_name: str, cts: Sequence[Any], in_avals: Sequence[ShapedArray]) -> None:
    """Inside ``shard_map`` (JAX's rule): a cotangent varies over no mesh axis its input is
    invariant over, since the gradient of a replicated value is itself replicated."""
    for i, (c, a) in enumerate(zip(cts, in_avals)):
        extra = getattr(aval(c), "vma", frozenset()) - a.vma if c is not None else frozenset()
        if extra:
            raise ValueError(f"custom_vjp bwd rule {bwd_name} gave input {i} ({a}) a cotangent varying over mesh "
                             f"axes {sorted(extra, key=repr)}, but the input is invariant over them; psum it over "
                             "those axes in bwd (JAX requires the same)")

custom_vjp_call_p = Primitive("custom_vjp_call", impl=_call_impl, abstract_eval=_call_aval, multiple_results=True)


def _custom_lin_impl(*args: Any, **_: Any) -> None:
    raise TypeError("can't apply forward-mode differentiation (jvp) to a custom_vjp function; "
                    "use grad/vjp, or define a custom_jvp")


custom_lin_p = Primitive("custom_lin", impl=_custom_lin_impl,
                         abstract_eval=lambda *avals, out_avals, **_: out_avals, multiple_results=True)


@custom_vjp_call_p.def_jvp
def _custom_vjp_rule(primals: tuple, tangents: tuple, *, call: Graph, fwd: Callable[..., Any],
                     bwd: Callable[..., Any], num_consts: int) -> tuple:
    n = len(primals) - num_consts
    outs, res = fwd(list(primals[:n]))
    ts = [instantiate(t, aval(p)) for p, t in zip(primals[:n], tangents[:n])]
    t_outs = custom_lin_p.bind(*res, *ts, bwd=bwd, num_res=len(res), out_avals=call.out_avals)
    return outs, t_outs


@custom_lin_p.def_transpose
def _custom_lin_transpose(cts: Sequence[Any], *args: Any, bwd: Callable[..., Any], num_res: int,
                          out_avals: tuple) -> tuple:
    return (None,) * num_res + tuple(bwd(list(args[:num_res]), list(cts)))


@dataclass(frozen=True)
class _MappedFwd:
    """A custom_vjp ``fwd`` mapped over a batch: outputs get axis 0, residuals axis 0 when
    they depend on the batch (recorded in ``res_dims`` for the matching ``_MappedBwd``)."""

    fwd: Callable[..., Any]
    dims: tuple[int | None, ...]
    size: int
    num_out: int
    res_dims: list[tuple[int | None, ...]] = field(compare=False)

    @property
    def __name__(self) -> str:
        return f"vmap({self.fwd.__name__})"

    def __call__(self, primals: list[Any]) -> tuple[list[Any], list[Any]]:
        def both(*args: Any) -> list[Any]:
            outs, res = self.fwd(list(args))
            return [*outs, *res]

        def out_dims(raw: list[Any]) -> list[int | None]:
            res_dims = _mapped_dims(raw[self.num_out:])
            self.res_dims[:] = [tuple(res_dims)]
            return [0] * self.num_out + res_dims

        flat = vmap_flat(both, primals, self.dims, out_dims, self.size)
        return flat[:self.num_out], flat[self.num_out:]


@dataclass(frozen=True)
class _MappedBwd:
    """A custom_vjp ``bwd`` mapped over a batch: cotangents of batched inputs get their axis
    ``dims[i]``; those of unbatched inputs are summed over the batch."""

    bwd: Callable[..., Any]
    dims: tuple[int | None, ...]
    size: int
    res_dims: list[tuple[int | None, ...]] = field(compare=False)

    @property
    def __name__(self) -> str:
        return f"vmap({self.bwd.__name__})"

    def __call__(self, res: list[Any], cts: list[Any]) -> list[Any]:
        r = len(res)
        summed: list[bool] = []

        def out_dims(raw: list[Any]) -> list[int | None]:
            mapped = _mapped_dims(raw)
            summed[:] = [d is None and m is not None for d, m in zip(self.dims, mapped)]
            return [m if d is None else d for d, m in zip(self.dims, mapped)]

        in_dims = [*self.res_dims[-1], *[0] * len(cts)]
        cts_in = vmap_flat(lambda *a: self.bwd(list(a[:r]), list(a[r:])), [*res, *cts], in_dims, out_dims,
                           self.size)
        return [reduce_sum(c, (0,)) if s else c for c, s in zip(cts_in, summed)]


@custom_vjp_call_p.def_batch
def _custom_vjp_batch(args: Sequence[Any], dims: Sequence[int | None], *, call: Graph, fwd: Callable[..., Any],
                      bwd: Callable[..., Any], num_consts: int) -> tuple:
    """A custom_vjp_call of the batched graph whose fwd and bwd are the user's mapped over the batch."""
    if _closes_over_batched(dims, num_consts):
        return _inline_batch(args, dims, call)
    size, graph = _batched_call_graph(args, dims, call)
    in_dims = tuple(dims[:len(dims) - num_consts])
    res_dims: list[tuple[int | None, ...]] = []
    outs = custom_vjp_call_p.bind(*args, call=graph, fwd=_MappedFwd(fwd, in_dims, size, len(call.outvars), res_dims),
                                  bwd=_MappedBwd(bwd, in_dims, size, res_dims), num_consts=num_consts)
    return outs, [0] * len(outs)


class custom_vjp:
    """A function with a hand-written VJP: ``f.defvjp(fwd, bwd)`` where ``fwd(*args) -> (out, res)``
    and ``bwd(res, ct) -> cotangents`` (a tuple with one entry per argument)."""

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: Sequence[int] = (),
                 nondiff_argnames: Sequence[str] = ()) -> None:
        self.fun = fun
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None
        self.nondiff = _nondiff_positions(fun, nondiff_argnums, nondiff_argnames)
        functools.update_wrapper(self, fun, updated=())

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any], symbolic_zeros: bool = False,
               optimize_remat: bool = False) -> None:
        if symbolic_zeros:
            raise NotImplementedError("custom_vjp.defvjp(symbolic_zeros=True) is not supported: fwd gets plain "
                                      "arrays and bwd instantiated zero cotangents")
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args: Any) -> Any:
        if self.fwd is None or self.bwd is None:
            raise AttributeError(f"no VJP defined for custom_vjp function {self.fun.__name__}; use defvjp")
        if self.nondiff:
            return self._call_nondiff(args)
        if is_eager():
            return self.fun(*eager_arguments(args))
        leaves, in_tree = tree_flatten(tuple(args))
        trace = find_top_trace(leaves)
        if isinstance(trace, JVPTrace) and trace.main is innermost_main():
            return self._fwd_only(trace, leaves, in_tree)
        leaves, graph, closure, in_tree, out_tree, weak_outs = _stage_call(self.fun, args)
        flat_fwd, flat_bwd = self._flat_rules(in_tree, [aval(x) for x in leaves], (out_tree, graph.out_avals), [])
        outs = custom_vjp_call_p.bind(*leaves, *closure, call=graph, fwd=flat_fwd, bwd=flat_bwd,
                                      num_consts=len(closure))
        return tree_unflatten(out_tree, weak_outputs(outs, weak_outs))

    def _flat_rules(self, in_tree: PyTreeDef, in_avals: list[ShapedArray],
                    expected: tuple[PyTreeDef, tuple[ShapedArray, ...]] | None,
                    out_box: list[PyTreeDef]) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """``fwd`` and ``bwd`` over flat lists, their outputs checked (``expected``: the
        function's output structure and types, when it was staged); fwd's output structure goes
        to ``out_box``."""
        fwd, bwd = self.fwd, self.bwd
        assert fwd is not None and bwd is not None
        res_tree: list[PyTreeDef] = []
        fun_name = self.fun.__name__
        fwd_name = getattr(fwd, "__name__", "fwd")
        bwd_name = getattr(bwd, "__name__", "bwd")

        def flat_fwd(primals: list[Any]) -> tuple[list[Any], list[Any]]:
            out, res = checks.fwd_pair(fwd(*tree_unflatten(in_tree, primals)), fwd_name, fun_name)
            out_leaves, tree1 = tree_flatten(out)
            out_leaves = [as_operand(x) for x in out_leaves]
            if expected is not None:
                checks.check_rule_primals(f"Custom VJP fwd rule {fwd_name}", fun_name, tree1, out_leaves, *expected)
            out_box.append(tree1)
            res_leaves, rt = tree_flatten(res)
            res_tree.append(rt)
            return out_leaves, [as_operand(x) for x in res_leaves]

        def flat_bwd(res: list[Any], cts: list[Any]) -> list[Any]:
            out = bwd(tree_unflatten(res_tree[-1], res), tree_unflatten(out_box[-1], cts))
            ct_leaves = checks.bwd_cotangents(bwd_name, fun_name, out, in_tree, in_avals)
            _check_cotangent_vma(bwd_name, ct_leaves, in_avals)
            return [_cotangent(c, a) for c, a in zip(ct_leaves, in_avals)]

        flat_fwd.__name__ = f"{fun_name}_fwd"
        flat_bwd.__name__ = f"{fun_name}_bwd"
        return flat_fwd, flat_bwd

    def _fwd_only(self, trace: JVPTrace, leaves: list[Any], in_tree: PyTreeDef) -> Any:
        """Differentiated: ``fwd`` gives the outputs and residuals (the function itself is not
        called, as in JAX), and a ``custom_lin`` equation, transposed by ``bwd``, the tangents;
        with no tangent in, the call moves one level down."""
        tracers = [full_raise(trace, x if isinstance(x, Tracer) else as_operand(x)) for x in leaves]
        primals = [t.primal for t in tracers]
        if all(t.tangent is None for t in tracers):
            return self(*tree_unflatten(in_tree, primals))
        box: list[PyTreeDef] = []
        flat_fwd, flat_bwd = self._flat_rules(in_tree, [aval(p) for p in primals], None, box)
        outs, res = flat_fwd(primals)
        tangents = [instantiate(t.tangent, aval(p)) for p, t in zip(primals, tracers)]
        t_outs = custom_lin_p.bind(*res, *tangents, bwd=flat_bwd, num_res=len(res),
                                   out_avals=tuple(aval(o) for o in outs))
        return tree_unflatten(box[0], [JVPTracer(trace, p, t if dtypes.is_inexact(aval(p).dtype) else None)
                                       for p, t in zip(outs, t_outs)])

    def _call_nondiff(self, args: tuple) -> Any:
        """JAX's ``nondiff_argnums``: ``fwd`` sees every argument where it was, ``bwd`` the held
        ones first and returns cotangents for the others only."""
        fixed, merged = _split_nondiff(f"custom_vjp {self.fun.__name__}", self.nondiff, args)
        fun, fwd, bwd = self.fun, self.fwd, self.bwd
        assert fwd is not None and bwd is not None
        inner = custom_vjp(functools.wraps(fun)(lambda *diff: fun(*merged(diff))))
        inner.defvjp(functools.wraps(fwd)(lambda *diff: fwd(*merged(diff))),
                     functools.wraps(bwd)(lambda res, ct: bwd(*fixed, res, ct)))
        return inner(*(a for i, a in enumerate(args) if i not in self.nondiff))


# --- checkpoint -------------------------------------------------------------------------

remat_p = Primitive("remat", impl=_call_impl, abstract_eval=_call_aval, multiple_results=True)


@remat_p.def_jvp
def _remat_jvp(primals: tuple, tangents: tuple, *, call: Graph) -> tuple:
    """The forward pass also returns the values its policy saves (those behind a
    ``remat_saved`` marker); the tangent equation takes them beside the inputs, so the backward
    pass reads them instead of recomputing them."""
    marks = _saved_marks(call)
    n = len(call.outvars)
    outs = remat_p.bind(*primals, call=_with_saved_outputs(call, marks) if marks else call)
    saved = outs[n:]
    diff = tuple(t is not None for t in tangents)
    jg = jvp_graph(call, diff)
    t_outs = remat_tangent_p.bind(*primals, *saved, *[t for t in tangents if t is not None], jvp_graph=jg,
                                  num_primals=len(primals), num_saved=len(saved))
    return outs[:n], t_outs


def _saved_marks(call: Graph) -> list[Eqn]:
    return [e for e in call.eqns if e.primitive is saved_p]


def _with_saved_outputs(call: Graph, marks: Sequence[Eqn]) -> Graph:
    """``call`` returning the marked values after its own outputs, in marker order."""
    return Graph(call.invars, call.constvars, call.consts, call.eqns,
                 call.outvars + tuple(e.outputs[0] for e in sorted(marks, key=lambda e: e.params["index"])))


def _read_saved(known: Graph, saved: Sequence[ShapedArray]) -> Graph:
    """``known`` with each ``remat_saved`` marker's value taken from a new trailing input (the
    value the forward pass saved, of type ``saved[index]``) instead of computed. The marked
    value's own equation (and the ``checkpoint_name`` labels before it) read the input too, so
    derivative rules that use an output (``tanh``'s) need no recomputation; what only fed
    them is dropped."""
    slots = tuple(Var(a) for a in saved)
    producer = producers(known)
    rw = Rewriter(Graph(known.invars + slots, known.constvars, known.consts, known.eqns, known.outvars))
    for e in known.eqns:
        if e.primitive is saved_p:
            slot = slots[e.params["index"]]
            rw.replace(e.outputs[0], slot)
            v = e.inputs[0]
            while isinstance(v, Var) and v not in rw.subst and v in producer:
                rw.replace(v, slot)
                p = producer[v]
                if p.primitive is not name_p:
                    break
                v = p.inputs[0]
    for e in known.eqns:
        if e.primitive is not saved_p:
            rw.keep(e)
    return rw.finish()


@remat_p.def_batch
def _remat_batch(args: Sequence[Any], dims: Sequence[int | None], *, call: Graph) -> tuple:
    _, graph = _batched_call_graph(args, dims, call)
    outs = remat_p.bind(*args, call=graph)
    return outs, [0] * len(outs)


def _without_saved(args: Sequence[Any], num_primals: int, num_saved: int) -> list[Any]:
    """The ``jvp_graph``'s own arguments: the inputs and tangents, without the saved values."""
    return list(args[:num_primals]) + list(args[num_primals + num_saved:])


def _tangent_impl(*args: Any, jvp_graph: Graph, num_primals: int, num_saved: int = 0) -> list[Any]:
    outs = eval_graph(jvp_graph, *_without_saved(args, num_primals, num_saved))
    return outs[len(outs) // 2:]


remat_tangent_p = Primitive(
    "remat_tangent", impl=_tangent_impl, multiple_results=True,
    abstract_eval=lambda *avals, jvp_graph, **_: jvp_graph.out_avals[len(jvp_graph.outvars) // 2:])


@remat_tangent_p.def_transpose
def _remat_tangent_transpose(cts: Sequence[Any], *args: Any, jvp_graph: Graph, num_primals: int,
                             num_saved: int = 0) -> tuple:
    """Recompute the forward pass from the saved inputs (reading the values the policy saved
    instead of recomputing them), then transpose its linear part. The inputs pass an
    optimisation barrier first, so that under ``jit`` CSE does not merge the recomputation with
    the forward pass and keep its intermediates alive after all."""
    n_tan = len(args) - num_primals - num_saved
    known, linear, _, out_unknown = partial_eval(jvp_graph, [False] * num_primals + [True] * n_tan)
    kept = args[:num_primals + num_saved]
    if num_saved:
        known = _read_saved(known, [aval(x) for x in kept[num_primals:]])
    known_vals = eval_graph(known, *optimization_barrier(kept))
    n_out = len(jvp_graph.outvars) // 2
    num_res = len(linear.invars) - n_tan
    residuals = known_vals[len(known_vals) - num_res:]
    t_cts = [c for c, u in zip(cts, out_unknown[n_out:]) if u]
    return (None,) * (num_primals + num_saved) + tuple(backward_pass(linear, residuals, t_cts))


@remat_tangent_p.def_jvp
def _remat_tangent_jvp(primals: tuple, tangents: tuple, *, jvp_graph: Graph, num_primals: int,
                       num_saved: int = 0) -> tuple:
    n_out = len(jvp_graph.outvars) // 2
    p, t = jvp_flat(lambda *a: eval_graph(jvp_graph, *a)[n_out:], _without_saved(primals, num_primals, num_saved),
                    _without_saved(tangents, num_primals, num_saved))
    return p, t


@remat_tangent_p.def_batch
def _tangent_batch(args: Sequence[Any], dims: Sequence[int | None], *, jvp_graph: Graph, num_primals: int,
                   num_saved: int = 0) -> tuple:
    n_out = len(jvp_graph.outvars) // 2
    size = batch_size(args, dims)
    outs = vmap_flat(lambda *a: eval_graph(jvp_graph, *a)[n_out:], _without_saved(args, num_primals, num_saved),
                     _without_saved(dims, num_primals, num_saved), [0] * n_out, size)
    return outs, [0] * n_out


def checkpoint(fun: Callable[..., Any], *, prevent_cse: bool | Sequence[bool] = True,
               policy: Callable[..., bool] | None = None, static_argnums: int | Sequence[int] = (),
               static_argnames: str | Sequence[str] = ()) -> Callable[..., Any]:
    """Differentiate ``fun`` by recomputing its forward pass in the backward pass instead of
    saving its intermediates: only its inputs are kept as residuals.

    ``policy(prim, *avals, **params)`` (see :mod:`fungraph.checkpoint_policies`) says which
    equations' outputs the forward pass saves instead: the backward pass reads those and
    recomputes only the rest. ``everything_saveable`` returns ``fun`` itself.
    ``static_argnums``/``static_argnames`` name arguments passed through as Python values (not
    traced). ``prevent_cse`` is accepted; the recomputation always passes an optimisation
    barrier, so CSE under ``jit`` never merges it with the forward pass."""

    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint: policy must be a callable from fungraph.checkpoint_policies, got {policy!r}")
    if policy is everything_saveable:
        return fun
    static_nums = _argnums(fun, static_argnums, static_argnames, "static")
    static_names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)

    @functools.wraps(fun, updated=())
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        fixed = {i % len(args): args[i] for i in static_nums if -len(args) <= i < len(args)}
        fixed_kw = {k: v for k, v in kwargs.items() if k in static_names}
        traced = [a for i, a in enumerate(args) if i not in fixed]
        traced_kw = {k: v for k, v in kwargs.items() if k not in static_names}

        def call(traced: list[Any], traced_kw: dict[str, Any]) -> Any:
            rest = iter(traced)
            full = [fixed[i] if i in fixed else next(rest) for i in range(len(args))]
            return fun(*full, **traced_kw, **fixed_kw)

        leaves, graph, closure, _, out_tree, weak_outs = _stage_call(call, (traced, traced_kw))
        if policy is not None and policy is not nothing_saveable:
            graph = mark_saved(graph, policy)
        outs = remat_p.bind(*leaves, *closure, call=graph)
        return tree_unflatten(out_tree, weak_outputs(outs, weak_outs))

    return wrapped


def mark_saved(graph: Graph, policy: Callable[..., Any]) -> Graph:
    """``graph`` with a ``remat_saved`` marker after each output of each equation ``policy``
    saves (one that returns a true value for ``(primitive, *input avals, **params)``). A policy
    with an ``excluded_names`` attribute saves no value that a ``checkpoint_name`` of one of
    those names labels."""
    excluded = getattr(policy, "excluded_names", frozenset())
    unsaved = {a for e in graph.eqns if e.primitive is name_p and e.params["name"] in excluded
               for a in (*e.inputs, *e.outputs)}
    graph = dce(graph)
    rw = Rewriter(graph)
    count = 0
    for e in graph.eqns:
        rw.keep(e)
        if e.primitive is saved_p or not policy(e.primitive, *(a.aval for a in e.inputs), **e.params.kwargs()):
            continue
        for o in e.outputs:
            if o not in unsaved and rw.uses(o):
                rw.replace(o, rw.emit(saved_p, (o,), {"index": count}, e.source)[0])
                count += 1
    return rw.finish() if count else graph


remat = checkpoint


# --- custom_gradient --------------------------------------------------------------------


def custom_gradient(fun: Callable[..., Any]) -> Callable[..., Any]:
    """JAX's ``custom_gradient``: ``fun(*args)`` returns ``(value, vjp)`` where ``vjp(ct)`` returns
    one cotangent per argument (a tuple; a lone value for a one-argument function). Built on
    :class:`custom_vjp`: ``vjp`` is staged on the cotangent's shapes in the forward pass, and the
    values it closes over become the residuals."""

    @functools.wraps(fun, updated=())
    def wrapped(*args: Any) -> Any:
        rules: list[tuple[Graph, PyTreeDef]] = []

        def fwd(*primals: Any) -> tuple[Any, tuple]:
            value, rule = fun(*primals)
            out_leaves, out_tree = tree_flatten(value)
            ct_tree: list[PyTreeDef] = []

            def flat_rule(*ct_leaves: Any) -> list[Any]:
                cts = rule(tree_unflatten(out_tree, list(ct_leaves)))
                leaves, tree = tree_flatten(cts if isinstance(cts, tuple) else (cts,))
                ct_tree.append(tree)
                return leaves

            graph, closure = stage(flat_rule, [abstractify(as_operand(x)) for x in out_leaves])
            rules.append((graph, ct_tree[0]))
            return value, tuple(closure)

        def bwd(res: tuple, ct: Any) -> tuple:
            graph, ct_tree = rules[-1]
            return tree_unflatten(ct_tree, eval_graph(graph, *tree_flatten(ct)[0], *res))

        inner = custom_vjp(functools.wraps(fun)(lambda *primals: fun(*primals)[0]))
        inner.defvjp(fwd, bwd)
        return inner(*args)

    return wrapped
