"""``jax.experimental.checkify``: run-time checks as values.

``checkify(f)`` stages ``f`` to a Graph and runs it through an interpreter that threads an
:class:`Error` through the program: ``check`` equations merge their error into it, and, when
enabled, the primitives that can produce a NaN, divide by zero or index out of bounds add a
check of their own. Sub-graphs (``jit``, ``cond``, ``while_loop``, ``scan``) are checkified in
turn and carry the error as extra inputs and outputs, so the result works eagerly and under
``jit``, ``vmap`` and ``grad`` alike. Messages and the choice of the error reported are JAX's.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph.array import Array
from fungraph.core import Tracer, as_typed_constant, is_staging, source_stack
from fungraph.experimental._checkify_errors import (
    BATCH_REDUCER,
    BatchedError,
    DivisionByZeroError,
    Error,
    FailedCheckError,
    JaxException,
    JaxRuntimeError,
    Meta,
    NaNError,
    OOBError,
    _check_error,
    check_p,
    effect_of,
    init_error,
    new_error,
    next_code,
)
from fungraph.interpreters.eval import add_eqn_note
from fungraph.interpreters.staging import abstractify, stage
from fungraph.ir import Eqn, Graph, Literal
from fungraph.lax._slicing import INDEX_OBSERVERS
from fungraph.primitives.while_loop import MASKED_BODIES
from fungraph.tree_util import tree_flatten, tree_leaves, tree_map, tree_unflatten

__all__ = ["BatchedError", "DivisionByZeroError", "Error", "ErrorCategory", "FailedCheckError", "JaxException",
           "JaxRuntimeError", "NaNError", "OOBError", "all_checks", "automatic_checks", "check", "check_error",
           "checkify", "debug_check", "div_checks", "float_checks", "index_checks", "nan_checks", "user_checks"]

#: A kind of error ``checkify`` can look for: the classes the error sets below hold.
ErrorCategory = type[JaxException]

user_checks = frozenset({FailedCheckError})
nan_checks = frozenset({NaNError})
index_checks = frozenset({OOBError})
div_checks = frozenset({DivisionByZeroError})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks

_FUNCTIONALIZATION_ERROR = (
    "Cannot abstractly evaluate a checkify.check which was not functionalized. This probably means you tried to "
    "stage (jit/scan/pmap/...) a `check` without functionalizing it through `checkify.checkify`.")

#: fungraph's primitives that can make a NaN, by JAX's name for them (the name the message shows).
_NAN_PRIMITIVES = {
    **{n: n for n in ("acos", "acosh", "add", "asin", "atan2", "atan", "atanh", "bessel_i0e", "bessel_i1e", "cos",
                      "cosh", "cumsum", "digamma", "dot_general", "erf_inv", "erf", "erfc", "exp", "expm1", "fft",
                      "igamma_grad_a", "igamma", "igammac", "integer_pow", "lgamma", "log1p", "log", "logistic",
                      "mul", "pad", "pow", "psum", "reduce_prod", "reduce_sum", "sin", "sinh", "sqrt", "sub", "tan",
                      "tanh", "div")},
    "conv": "conv_general_dilated", "mod": "rem", "floor_divide": "div", "betainc": "regularized_incomplete_beta",
    "custom_linear_solve": "linear_solve",
}
_DIV_PRIMITIVES = ("div", "floor_divide")

class _Functionalizing(threading.local):
    depth = 0
    #: True while an index check is staged (its own indexing is not checked again)
    in_index_check = False


_functionalizing = _Functionalizing()


@contextlib.contextmanager
def _functionalized() -> Iterator[None]:
    """While staging for checkify, ``check`` stages an equation that the interpreter consumes."""
    _functionalizing.depth += 1
    try:
        yield
    finally:
        _functionalizing.depth -= 1


# --- the public API -------------------------------------------------------------------------

def checkify(f: Callable[..., Any], errors: frozenset = user_checks) -> Callable[..., tuple[Error, Any]]:
    """``checkify(f)(*args)`` is ``(err, f(*args))``: ``err.get()`` is the message of the first
    failed check (``check`` calls, and the automatic checks named in ``errors``) or None."""
    errors = frozenset(errors)

    def checked(*args: Any, **kwargs: Any) -> tuple[Error, Any]:
        leaves, in_tree = tree_flatten((args, kwargs))
        traced = [i for i, x in enumerate(leaves) if isinstance(x, (Array, Tracer))]
        out_trees: list[Any] = []

        def flat(*xs: Any) -> list[Any]:
            full = list(leaves)
            for i, x in zip(traced, xs):
                full[i] = x
            a, k = tree_unflatten(in_tree, full)
            out_leaves, out_tree = tree_flatten(f(*a, **k))
            out_trees.append(out_tree)
            return out_leaves

        # arrays are staged as inputs; other arguments (numpy arrays, Python scalars) are closed
        # over, as JAX's checkify closes over every argument
        inputs = [leaves[i] for i in traced]
        with _functionalized(), _observing_starts(OOBError in errors):
            graph, closure = stage(flat, [abstractify(x) for x in inputs],
                                   [dtypes.is_weak(x) for x in inputs])
        error, outs = checkify_graph(graph, errors, init_error, [*inputs, *closure])
        return error, tree_unflatten(out_trees[0], outs)

    checked.__name__ = getattr(f, "__name__", "checked")
    return checked


def check(pred: Any, msg: str, *fmt_args: Any, debug: bool = False, **fmt_kwargs: Any) -> None:
    """Add an error with message ``msg.format(*fmt_args, **fmt_kwargs)`` when ``pred`` (a scalar
    bool) is False. Outside ``checkify`` it raises :class:`JaxRuntimeError` at once; staged
    (``jit``) without ``checkify`` it is a ``ValueError``, as in JAX."""
    _check(pred, msg, debug, fmt_args, fmt_kwargs)


def debug_check(pred: Any, msg: str, *fmt_args: Any, **fmt_kwargs: Any) -> None:
    """``check`` under ``checkify``; dropped everywhere else."""
    _check(pred, msg, True, fmt_args, fmt_kwargs)


def check_error(error: Error) -> None:
    """Raise ``error`` as ``check`` would (``checkify`` turns it back into a value)."""
    if not isinstance(error, Error):
        raise TypeError(f"check_error takes an Error as argument, got type {type(error)} instead.")
    if not _functionalizing.depth and is_staging():
        raise ValueError(_FUNCTIONALIZATION_ERROR)
    _check_error(error)


def _is_scalar_pred(pred: Any) -> bool:
    return isinstance(pred, bool) or (isinstance(pred, (Array, Tracer)) and pred.shape == ()
                                      and pred.dtype == np.dtype(bool))


def _check(pred: Any, msg: str, debug: bool, fmt_args: tuple, fmt_kwargs: dict) -> None:
    if not _is_scalar_pred(pred):
        raise TypeError(f"{'debug_check' if debug else 'check'} takes a scalar pred as argument, got {pred}")
    for arg in tree_leaves((fmt_args, fmt_kwargs)):
        if not isinstance(arg, (Array, Tracer, np.ndarray)):
            raise TypeError("Formatting arguments to checkify.check need to be PyTrees of arrays, but got "
                            f"{arg!r} of type {type(arg)}.")
    if not _functionalizing.depth:
        if debug:
            return
        if is_staging():
            raise ValueError(_FUNCTIONALIZATION_ERROR)
    error = assert_func(init_error, fnp.logical_not(pred), FailedCheckError(msg, *fmt_args, **fmt_kwargs))
    _check_error(error)


@contextlib.contextmanager
def _observing_starts(on: bool) -> Iterator[None]:
    """While staging with index checks on, dynamic slices, gathers and indexing expressions check
    their start indices before they are clamped (the staged graph only sees the clamped ones)."""
    if not on:
        yield
        return
    INDEX_OBSERVERS.append(_check_starts)
    try:
        yield
    finally:
        INDEX_OBSERVERS.remove(_check_starts)


def _check_starts(name: str, shape: tuple[int, ...], starts: list[Any], axes: tuple[int, ...],
                  sizes: tuple[int, ...]) -> None:
    """JAX's dynamic_slice and gather check: a window starting below 0 or ending past its axis;
    the message names the first such start in row-major order of (window, axis)."""
    if not starts or not _functionalizing.depth or _functionalizing.in_index_check:
        return
    _functionalizing.in_index_check = True
    try:
        _stage_start_check(name, shape, starts, axes, sizes)
    finally:
        _functionalizing.in_index_check = False


def _stage_start_check(name: str, shape: tuple[int, ...], starts: list[Any], axes: tuple[int, ...],
                       sizes: tuple[int, ...]) -> None:
    begin = fnp.stack([fnp.asarray(i, np.int32) for i in starts], axis=-1)
    if begin.size == 0:
        return
    dims = np.asarray(shape, np.int32)[list(axes)]
    oob = (begin < 0) | (begin + np.asarray(sizes, np.int32) > dims)
    first = fnp.argmax(oob.ravel())
    column = first % len(axes)
    payload = fnp.stack([begin.ravel()[first], fnp.asarray(np.asarray(axes, np.int32))[column],
                         fnp.asarray(dims)[column]])
    _check_error(assert_func(init_error, fnp.any(oob), OOBError(name, shape, payload), deferred=True))


# --- errors as values -----------------------------------------------------------------------

def assert_func(error: Error, pred: Any, exc: JaxException, deferred: bool = False) -> Error:
    """``error`` with ``exc`` added, happening where ``pred`` holds."""
    code, meta, payload = new_error(exc, deferred)
    return update_error(error, pred, code, {code: meta}, payload, effect_of(exc, payload))


def update_error(error: Error, pred: Any, code: Any, metadata: dict[int, Meta], payload: list[Any],
                 effect: tuple) -> Error:
    """Keep the first error of each effect: a new one only counts where none happened before."""
    code = fnp.asarray(code, dtype=np.int32)
    if effect not in error._pred:
        return error._update(effect, fnp.asarray(pred), code, metadata, list(payload))
    before = error._pred[effect]
    out_code = fnp.where(before, error._code[effect], code)
    out_payload = [fnp.where(before, old, new) for old, new in zip(error._payload[effect], payload)]
    return error._update(effect, fnp.logical_or(before, pred), out_code, metadata, out_payload)


def _reduce_any_error(error: Error) -> Error:
    """One example's errors of a batched error: the last failing example, as JAX's stable
    ``argsort(pred)[-1]`` picks (the last example when none failed)."""
    out = init_error
    for effect, pred in error._pred.items():
        n = np.shape(pred)[0]
        idx = n - 1 - fnp.argmax(fnp.flip(pred))
        pick = lambda x, i=idx: fnp.asarray(x)[i]  # noqa: E731
        out = out._update(effect, pick(pred), pick(error._code[effect]), {}, [pick(p) for p in error._payload[effect]])
    return out._replace_metadata(error._metadata)


BATCH_REDUCER.append(_reduce_any_error)


def _with_placeholders(error: Error, effects: Sequence[tuple]) -> Error:
    """``error`` holding every effect in ``effects`` (new ones never happened), so that a loop
    or a branch gets and returns the same error structure."""
    for effect in effects:
        if effect not in error._pred:
            payload = [np.ones(shape, dtype) for shape, dtype in effect[1]]
            error = error._update(effect, np.False_, np.int32(-1), {}, payload)
    return error


def _as_arrays(error: Error) -> Error:
    """``error`` whose leaves are all typed arrays (Python bools and ints as staged inputs would be weak)."""
    return tree_map(lambda x: x if isinstance(x, Tracer) else np.asarray(x), error)


# --- the interpreter ------------------------------------------------------------------------

def checkify_graph(graph: Graph, enabled: frozenset, error: Error, args: Sequence[Any]) -> tuple[Error, list[Any]]:
    """Run ``graph`` on ``args`` by binding each equation, threading ``error`` through it."""
    if graph.has_64bit_values and not dtypes.x64_enabled():
        previous = dtypes.set_x64_override(True)
        try:
            return _checkify_graph(graph, enabled, error, args)
        finally:
            dtypes.set_x64_override(previous)
    return _checkify_graph(graph, enabled, error, args)


def _checkify_graph(graph: Graph, enabled: frozenset, error: Error, args: Sequence[Any]) -> tuple[Error, list[Any]]:
    env: dict[Any, Any] = {}

    def read(a: Any) -> Any:
        return as_typed_constant(a.array) if isinstance(a, Literal) else env[a]

    env.update(zip(graph.invars, args))
    env.update(zip(graph.constvars, map(as_typed_constant, graph.consts)))
    sources = source_stack()
    for i, eqn in enumerate(graph.eqns):
        ins = [read(a) for a in eqn.inputs]
        sources.append(eqn.source)
        try:
            error, outs = _checkify_eqn(eqn, enabled, error, ins)
        except Exception as err:
            add_eqn_note(err, graph, i)
            raise
        finally:
            sources.pop()
        env.update(zip(eqn.outputs, outs))
    return error, [read(a) for a in graph.outvars]


def _checkify_eqn(eqn: Eqn, enabled: frozenset, error: Error, ins: list[Any]) -> tuple[Error, list[Any]]:
    name = eqn.primitive.name
    params = eqn.params.kwargs()
    rule = _CALL_RULES.get(name)
    if rule is not None:
        return rule(eqn, enabled, error, ins)
    if name == "floor_divide" and NaNError in enabled and dtypes.is_float(ins[0].dtype):
        # JAX's float floor division takes the remainder (lax.rem) before it divides
        error = assert_func(error, fnp.any(fnp.isnan(fnp.fmod(ins[0], ins[1]))), NaNError("rem"))
    if name in _DIV_PRIMITIVES and DivisionByZeroError in enabled:
        error = assert_func(error, fnp.any(fnp.equal(ins[1], 0)), DivisionByZeroError())
    if name == "take" and OOBError in enabled:
        error = _take_check(error, ins[0], ins[1], params["axis"])
    if name == "scatter_add" and OOBError in enabled:
        error = _scatter_check(error, ins[1], params["shape"], params["axis"])
    if name == "dynamic_update_slice" and params["mode"] == "drop" and OOBError in enabled:
        error = _drop_window_check(error, ins[0], ins[1], ins[2:])
    out = eqn.primitive.bind(*ins, **params)
    outs = list(out) if eqn.primitive.multiple_results else [out]
    if name in _NAN_PRIMITIVES and NaNError in enabled:
        floats = [o for o in outs if dtypes.is_float(o.dtype) or dtypes.is_complex(o.dtype)]
        if floats:
            pred = fnp.any(fnp.stack([fnp.any(fnp.isnan(o)) for o in floats]))
            error = assert_func(error, pred, NaNError(_NAN_PRIMITIVES[name]))
    return error, outs


def _take_check(error: Error, x: Any, idx: Any, axis: int) -> Error:
    """JAX's gather check: the first index outside ``[0, size)`` once negative ones are wrapped."""
    size = x.shape[axis]
    idx = fnp.ravel(fnp.asarray(idx))
    if idx.size == 0:
        return error
    wrapped = fnp.where(idx < 0, idx + size, idx)
    oob = (wrapped < 0) | (wrapped > size - 1)
    first = fnp.argmax(oob)
    payload = fnp.stack([fnp.asarray(wrapped[first], np.int32), fnp.asarray(axis, np.int32),
                         fnp.asarray(size, np.int32)])
    return assert_func(error, fnp.any(oob), OOBError("gather", tuple(x.shape), payload))


def _scatter_check(error: Error, idx: Any, shape: tuple[int, ...], axis: int) -> Error:
    """JAX's scatter check: the first index outside ``[0, size)`` (``.at`` updates)."""
    idx = fnp.ravel(fnp.asarray(idx))
    if idx.size == 0:
        return error
    size = shape[axis]
    oob = (idx < 0) | (idx > size - 1)
    payload = fnp.stack([fnp.asarray(idx[fnp.argmax(oob)], np.int32), fnp.asarray(axis, np.int32),
                         fnp.asarray(size, np.int32)])
    return assert_func(error, fnp.any(oob), OOBError("scatter", tuple(shape), payload))


def _drop_window_check(error: Error, x: Any, update: Any, starts: Sequence[Any]) -> Error:
    """A window written by ``.at[...]`` (negative starts count from the end once), outside the array."""
    if not starts:
        return error
    shape = np.asarray(x.shape, np.int32)
    begin = fnp.stack([fnp.asarray(s, np.int32) for s in starts])
    begin = fnp.where(begin < 0, begin + shape, begin)
    oob = (begin < 0) | (begin + np.asarray(update.shape, np.int32) > shape)
    axis = fnp.argmax(oob)
    payload = fnp.stack([begin[axis], fnp.asarray(axis, np.int32), fnp.asarray(shape)[axis]])
    return assert_func(error, fnp.any(oob), OOBError("scatter", tuple(x.shape), payload))


def _check_rule(eqn: Eqn, enabled: frozenset, error: Error, ins: list[Any]) -> tuple[Error, list[Any]]:
    """A ``check`` equation: merge its error into the one threaded through the program."""
    new = tree_unflatten(eqn.params["err_tree"], ins)
    deferred = [m for m in new._metadata.values() if m.deferred]
    if deferred:
        return _deferred_check(error, enabled, new, deferred[0]), []
    for effect, pred in new._pred.items():
        if effect[0] in enabled:
            error = update_error(error, pred, new._code[effect], {}, new._payload[effect], effect)
    return error._replace_metadata({**new._metadata, **error._metadata}), []


def _deferred_check(error: Error, enabled: frozenset, new: Error, meta: Meta) -> Error:
    """A check staged for an automatic one (one effect, one metadata entry): numbered now, in
    the order of the automatic checks around it."""
    if meta.kind not in enabled:
        return error
    code = next_code()
    (effect, pred), = new._pred.items()
    return update_error(error, pred, code, {code: replace(meta, deferred=False)}, new._payload[effect], effect)


# --- sub-graphs: staged again with the error as inputs and outputs --------------------------

def _stage_checked(body: Callable[..., tuple[Error, list[Any]]], error: Error,
                   avals: Sequence[Any]) -> tuple[Graph, Any]:
    """Stage ``body(error, *xs) -> (error, outs)`` as a graph over ``(*error leaves, *xs)``;
    returns it and the output error's tree."""
    leaves, tree = tree_flatten(_as_arrays(error))
    n = len(leaves)
    out_trees: list[Any] = []

    def flat(*xs: Any) -> list[Any]:
        err, outs = body(tree_unflatten(tree, list(xs[:n])), *xs[n:])
        err_leaves, err_tree = tree_flatten(err)
        out_trees.append(err_tree)
        return [*err_leaves, *outs]

    with _functionalized():
        graph, closure = stage(flat, [abstractify(x) for x in leaves] + list(avals))
    if closure:
        raise ValueError("checkify: a sub-graph closed over a traced value")
    return graph, out_trees[0]


def _graph_body(graph: Graph, enabled: frozenset) -> Callable[..., tuple[Error, list[Any]]]:
    return lambda err, *xs: checkify_graph(graph, enabled, err, xs)


def _effects_of(tree: Any) -> tuple:
    return tree_unflatten(tree, [None] * tree.num_leaves)._pred.keys() if tree.num_leaves else ()


def _loop_error(body: Callable[..., tuple[Error, list[Any]]], error: Error, avals: Sequence[Any]) -> Error:
    """``error`` with placeholders for every effect the loop body can add."""
    _, tree = _stage_checked(body, error, avals)
    return _as_arrays(_with_placeholders(error, list(_effects_of(tree))))


def _split_out(tree: Any, outs: Sequence[Any]) -> tuple[Error, list[Any]]:
    n = tree.num_leaves
    return tree_unflatten(tree, list(outs[:n])), list(outs[n:])


def _jit_rule(eqn: Eqn, enabled: frozenset, error: Error, ins: list[Any]) -> tuple[Error, list[Any]]:
    p = eqn.params
    graph, tree = _stage_checked(_graph_body(p["call"], enabled), error, p["call"].in_avals)
    leaves = tree_leaves(_as_arrays(error))
    outs = eqn.primitive.bind(*leaves, *ins, call=graph, name=p["name"], backend=p["backend"])
    return _split_out(tree, outs)


def _cond_rule(eqn: Eqn, enabled: frozenset, error: Error, ins: list[Any]) -> tuple[Error, list[Any]]:
    branches = eqn.params["branches"]
    index, ops = ins[0], ins[1:]
    avals = branches[0].in_avals
    for b in branches:
        error = _loop_error(_graph_body(b, enabled), error, avals)
    staged = [_stage_checked(_graph_body(b, enabled), error, avals) for b in branches]
    outs = eqn.primitive.bind(index, *tree_leaves(error), *ops, branches=tuple(g for g, _ in staged))
    out_error, values = _split_out(staged[0][1], outs)
    metadata = {k: v for _, t in staged for k, v in tree_unflatten(t, [None] * t.num_leaves)._metadata.items()}
    return out_error._replace_metadata({**error._metadata, **metadata}), values


def _scan_rule(eqn: Eqn, enabled: frozenset, error: Error, ins: list[Any]) -> tuple[Error, list[Any]]:
    p = eqn.params
    body = p["body"]
    error = _loop_error(_graph_body(body, enabled), error, body.in_avals)
    graph, tree = _stage_checked(_graph_body(body, enabled), error, body.in_avals)
    leaves = tree_leaves(error)
    outs = eqn.primitive.bind(*leaves, *ins, body=graph, length=p["length"], reverse=p["reverse"],
                              num_carry=p["num_carry"] + len(leaves), num_xs=p["num_xs"])
    return _split_out(tree, outs)


def _while_rule(eqn: Eqn, enabled: frozenset, error: Error, ins: list[Any]) -> tuple[Error, list[Any]]:
    p = eqn.params
    cond_graph, body_graph, n_cc, n_bc = p["cond_graph"], p["body_graph"], p["n_cc"], p["n_bc"]
    if body_graph in MASKED_BODIES:
        raise ValueError("Checkify does not support batched while-loops (checkify-of-vmap-of-while). \nHint: if "
                         "possible, move the vmap to the outer level to get vmap-of-checkify-of-while.")
    cc, bc, carry = ins[:n_cc], ins[n_cc:n_cc + n_bc], ins[n_cc + n_bc:]
    n_carry = len(carry)
    error, _ = checkify_graph(cond_graph, enabled, error, [*carry, *cc])

    def body(err: Error, *xs: Any) -> tuple[Error, list[Any]]:
        c, cc_, bc_ = xs[:n_carry], xs[n_carry:n_carry + n_cc], xs[n_carry + n_cc:]
        err, new = checkify_graph(body_graph, enabled, err, [*c, *bc_])
        err, _ = checkify_graph(cond_graph, enabled, err, [*new, *cc_])
        return err, new

    avals = [*body_graph.in_avals[:n_carry], *cond_graph.in_avals[n_carry:], *body_graph.in_avals[n_carry:]]
    error = _loop_error(body, error, avals)
    body_g, tree = _stage_checked(body, error, avals)
    n_err = tree.num_leaves

    def cond(err: Error, *xs: Any) -> tuple[Error, list[Any]]:
        return err, checkify_graph(cond_graph, enabled, err, list(xs))[1]

    cond_g, _ = _stage_checked(cond, error, cond_graph.in_avals)
    cond_g = _drop_outputs(cond_g, n_err)
    # the loop's carry is (*error, *carry); its cond constants are the cond's, and the body's
    # are the cond's then the body's
    outs = eqn.primitive.bind(*cc, *cc, *bc, *tree_leaves(error), *carry, cond_graph=cond_g, body_graph=body_g,
                              n_cc=n_cc, n_bc=n_cc + n_bc, policy=p.get("policy", "all"))
    return _split_out(tree, outs)


def _drop_outputs(graph: Graph, n: int) -> Graph:
    return Graph(graph.invars, graph.constvars, graph.consts, graph.eqns, graph.outvars[n:])


def _inline_rule(eqn: Eqn, enabled: frozenset, error: Error, ins: list[Any]) -> tuple[Error, list[Any]]:
    """A call with custom rules (custom_jvp/vjp, remat): its body is checked where it holds a
    check or automatic checks are on, losing the custom rule; otherwise it runs as it is."""
    call = eqn.params["call"]
    if enabled <= user_checks and not _holds_check(call):
        out = eqn.primitive.bind(*ins, **eqn.params.kwargs())
        return error, list(out)
    return checkify_graph(call, enabled, error, ins)


def _holds_check(graph: Graph) -> bool:
    for e in graph.eqns:
        if e.primitive is check_p:
            return True
        for v in e.params.values():
            subs = v if isinstance(v, tuple) else (v,)
            if any(isinstance(s, Graph) and _holds_check(s) for s in subs):
                return True
    return False


_CALL_RULES: dict[str, Callable[..., tuple[Error, list[Any]]]] = {
    "check": _check_rule,
    "jit_call": _jit_rule,
    "cond": _cond_rule,
    "scan": _scan_rule,
    "while": _while_rule,
    "custom_jvp_call": _inline_rule,
    "custom_vjp_call": _inline_rule,
    "remat": _inline_rule,
}

