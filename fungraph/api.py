"""The public transformations: pytree handling around the interpreters."""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph._devices import Device
from fungraph._key_array import KeyArray
from fungraph.array import Array, hosted_copy_if_shared, owned_results
from fungraph.backends import known_backends
from fungraph.core import (
    EvalTrace,
    MainTrace,
    Tracer,
    innermost_main,
    is_staging,
    new_dynamic,
    to_concrete_dtype_array,
    weak_array,
    weak_view,
)
from fungraph.dtypes import float0
from fungraph.interpreters.batching import vmap_flat
from fungraph.interpreters.eval import eval_graph as _eval_graph
from fungraph.interpreters.jvp import jvp_flat
from fungraph.interpreters.linearize import is_concrete, linearize_concrete
from fungraph.interpreters.staging import (  # the pytree side of staging, used by api, jit and custom_derivatives
    ShapeDtypeStruct,
    abstractify,
    flat_fun,
    flatten_outputs,
    split_static,
    stage,
)
from fungraph.interpreters.transpose import backward_pass, eval_linear, linearize_flat, partial_eval, transpose_linear
from fungraph.ir import Graph, Literal, ShapedArray
from fungraph.primitives._rules import zeros
from fungraph.primitives.callback import io_callback_p, pure_callback_p
from fungraph.primitives.shape import reshape, transpose
from fungraph.primitives.while_loop import live_tapes, release_tapes, retain_tapes
from fungraph.sharding import NamedSharding, SingleDeviceSharding
from fungraph.tree_util import PyTreeDef, tree_flatten, tree_leaves, tree_map, tree_unflatten


def _is_float0(x: Any) -> bool:
    return getattr(x, "dtype", None) == float0


def make_graph(fun: Callable[..., Any], static_argnums: int | Sequence[int] = ()) -> Callable[..., Graph]:
    """``make_graph(f)(*args)`` traces ``f`` on the arguments' shapes and dtypes and returns its Graph."""
    static_argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(fun, updated=())
    def traced(*args: Any) -> Graph:
        dynamic, static = split_static(args, static_argnums)
        leaves, in_tree = tree_flatten(dynamic)
        out_tree: list[PyTreeDef] = []
        graph, _ = stage(flat_fun(fun, in_tree, static, out_tree), [abstractify(x) for x in leaves])
        return graph

    return traced


def eval_shape(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The shapes and dtypes ``fun(*args, **kwargs)`` would return, as a tree of
    :class:`ShapeDtypeStruct`, found by tracing (nothing is computed; arguments may themselves
    be ``ShapeDtypeStruct``)."""
    leaves, in_tree = tree_flatten((args, kwargs))
    out_tree: list[PyTreeDef] = []

    def call(*xs: Any) -> Any:
        a, k = tree_unflatten(in_tree, xs)
        return fun(*a, **k)

    graph, _ = stage(flat_fun(call, tree_flatten(tuple(leaves))[1], {}, out_tree), [abstractify(x) for x in leaves])
    return _key_structs(tree_unflatten(out_tree[0], [ShapeDtypeStruct(a.shape, a.dtype) for a in graph.out_avals]))


def _key_structs(out: Any) -> Any:
    """``out`` with each key array as its shape and key dtype, as JAX's ``eval_shape`` gives them."""
    if not _holds_keys(out):
        return out
    return tree_map(lambda x: ShapeDtypeStruct(x.shape, x.dtype) if _is_key(x) else x, out, is_leaf=_is_key)


def _is_key(x: Any) -> bool:
    return isinstance(x, KeyArray)


def _holds_keys(tree: Any) -> bool:
    """Whether ``tree`` holds typed key arrays (pytree nodes over their words, looked at as leaves here)."""
    return any(_is_key(x) for x in tree_leaves(tree, is_leaf=_is_key))


def eval_graph(graph: Graph, *args: Any) -> list[Any]:
    """Evaluate a Graph on flat arguments; returns the list of its outputs."""
    if len(args) != len(graph.invars):
        raise TypeError(f"the graph takes {len(graph.invars)} inputs, got {len(args)}")
    vals = [a if isinstance(a, Tracer) else to_concrete_dtype_array(a) for a in args]
    for i, (v, a) in enumerate(zip(graph.invars, vals)):
        if abstractify(a) != v.aval:
            raise TypeError(f"graph input {i} has type {v.aval}, but the argument has type {abstractify(a)}")
    return owned_results(_eval_graph(graph, *vals), args)


_VMAP_METHODS = (None, "sequential", "sequential_unrolled", "expand_dims", "broadcast_all", "legacy_vectorized")


def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any, sharding: Any = None,
                  vmap_method: str | None = None, **kwargs: Any) -> Any:
    """Stage a host numpy function as one opaque node with the declared result shapes;
    ``callback(*args, **kwargs)`` runs on the host. Under ``vmap`` it runs once per example
    (``vmap_method`` ``"sequential"`` or ``"sequential_unrolled"``), or once on the whole
    batch (``"expand_dims"``: unbatched arguments get a leading axis of size 1;
    ``"broadcast_all"``: they are broadcast to the batch), as ``jax.pure_callback``; with the
    default ``vmap_method=None`` a batched call raises JAX's ``NotImplementedError``."""
    if vmap_method not in _VMAP_METHODS:
        raise ValueError(f"pure_callback: vmap_method must be one of {list(_VMAP_METHODS[1:])} or None, "
                         f"got {vmap_method!r}")
    leaves, flat_callback, result_avals, res_tree = _flat_callback(callback, result_shape_dtypes, args, kwargs)
    outs = pure_callback_p.bind(*leaves, callback=flat_callback, result_avals=result_avals, vmap_method=vmap_method)
    return tree_unflatten(res_tree, outs)


def io_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any, sharding: Any = None,
                ordered: bool = False, **kwargs: Any) -> Any:
    """Stage a host function with side effects (``jax.experimental.io_callback``): unlike
    ``pure_callback`` no pass removes, merges or repeats it, so it runs each time the program
    reaches it (every iteration of a loop), effects in program order. Under ``vmap`` an
    unordered one runs once per example and an ordered one is refused; it has no derivative."""
    leaves, flat_callback, result_avals, res_tree = _flat_callback(callback, result_shape_dtypes, args, kwargs)
    outs = io_callback_p.bind(*leaves, callback=flat_callback, result_avals=result_avals, ordered=bool(ordered))
    return tree_unflatten(res_tree, outs)


def _flat_callback(callback: Callable[..., Any], result_shape_dtypes: Any, args: tuple,
                   kwargs: dict[str, Any]) -> tuple[list[Any], Callable[..., Any], tuple[ShapedArray, ...], Any]:
    """A callback's operands, the callback over flat leaves, its declared result types and tree."""
    res_leaves, res_tree = tree_flatten(result_shape_dtypes)
    result_avals = tuple(ShapedArray(np.shape(r) if not hasattr(r, "shape") else r.shape, r.dtype)
                         for r in res_leaves)
    arg_leaves, arg_tree = tree_flatten((args, kwargs))

    def flat_callback(*leaves: Any) -> Any:
        call_args, call_kwargs = tree_unflatten(arg_tree, leaves)
        return tree_flatten(callback(*call_args, **call_kwargs))[0]

    flat_callback.__name__ = getattr(callback, "__name__", "callback")
    return [_concrete(a) for a in arg_leaves], flat_callback, result_avals, res_tree


# --- automatic differentiation ----------------------------------------------------------


def _check_tangent(p: Any, t: Any, i: int) -> Any:
    pa = abstractify(p)
    t_shape = np.shape(t) if _is_float0(t) else abstractify(t).shape
    if pa.shape != t_shape:
        raise ValueError(f"jvp: primal {i} has shape {pa.shape} but its tangent has shape {t_shape}")
    if not dtypes.is_inexact(pa.dtype):
        return None
    if _is_float0(t):
        raise TypeError(f"jvp: primal {i} has dtype {pa.dtype}, so its tangent cannot be float0")
    ta = abstractify(t)
    if ta.dtype != pa.dtype:
        raise TypeError(f"jvp: primal {i} has dtype {pa.dtype} but its tangent has dtype {ta.dtype}")
    return _concrete(t)


def _concrete(x: Any) -> Any:
    """``x`` as an array (a tracer as it is), weakly typed where ``x`` is (a Python scalar)."""
    if isinstance(x, Tracer):
        return x
    arr = to_concrete_dtype_array(x)
    return weak_array(arr) if dtypes.is_weak(x) and not dtypes.is_weak(arr) else arr


def _weak_like(values: Sequence[Any], like: Sequence[Any]) -> list[Any]:
    """``values`` weakly typed where ``like`` (the primals they are derivatives of, or the
    outputs they are tangents of) are and the dtypes agree: JAX's tangent and cotangent types
    are their primal's (``grad(f)(1.0)`` is weak)."""
    return [weak_view(v) if dtypes.is_weak(p) and not dtypes.is_weak(v) and _dtype_of(v) == _dtype_of(p) else v
            for v, p in zip(values, like)]


def _key_tangents(primals: Any, tangents: Any) -> Any:
    """The tangents (or cotangents) with each key array's float0 tangent (of the keys' shape, as
    JAX takes it) widened to the shape of the keys' words, where the primals hold key arrays."""
    if not _holds_keys(primals):
        return tangents

    def widen(p: Any, t: Any) -> Any:
        dt = getattr(t, "dtype", None)
        if not _is_key(p) or _is_key(t) or dt is None or np.dtype(dt) != dtypes.float0:
            return t
        if tuple(np.shape(t)) != p.shape:
            raise TypeError(f"the tangent of a key array of shape {p.shape} is a float0 array of that shape, "
                            f"got shape {tuple(np.shape(t))}")
        return KeyArray(np.zeros((*p.shape, *p.dtype.key_shape), dtypes.float0), p.dtype)

    try:
        return tree_map(widen, primals, tangents, is_leaf=_is_key)
    except ValueError:
        return tangents


def _key_float0(primals: Any, tangents: Any) -> Any:
    """The tangents (or cotangents) of key arrays among ``primals`` as JAX gives them: float0 zeros
    of the keys' shape."""
    if not _holds_keys(primals):
        return tangents
    return tree_map(lambda p, t: np.zeros(p.shape, dtypes.float0) if _is_key(p) else t, primals, tangents,
                    is_leaf=_is_key)


def _dtype_of(x: Any) -> Any:
    return abstractify(x).dtype


def _batch_last(x: Any) -> Any:
    """``x`` with its leading (vmapped) axis moved last."""
    nd = abstractify(x).ndim
    return transpose(x, tuple(range(1, nd)) + (0,))


def jvp(fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """Forward mode: ``(fun(*primals), J @ tangents)``, both pytrees like ``fun``'s output."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primals and tangents must be tuples or lists of arguments")
    p_leaves, p_tree = tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_flatten(_key_tangents(tuple(primals), tuple(tangents)))
    if p_tree != t_tree:
        raise TypeError(f"jvp: primal structure {p_tree} differs from tangent structure {t_tree}")
    ts = [_check_tangent(p, t, i) for i, (p, t) in enumerate(zip(p_leaves, t_leaves))]
    out_tree: list[PyTreeDef] = []
    po, to = jvp_flat(flat_fun(fun, p_tree, {}, out_tree), [_concrete(p) for p in p_leaves], ts)
    both = owned_results([*po, *to], [*p_leaves, *t_leaves])
    tangents_out = _weak_like(both[len(po):], both[:len(po)])
    primal_out = tree_unflatten(out_tree[0], both[:len(po)])
    return primal_out, _key_float0(primal_out, tree_unflatten(out_tree[0], tangents_out))


def _linearize(fun: Callable[..., Any], primals: Sequence[Any], what: str, staged: bool = False) -> tuple[Any, ...]:
    """Linearize ``fun`` at ``primals``: at concrete values (JAX's eager autodiff, so Python
    control flow on values works) unless ``staged`` or the primals are abstract (under ``jit``,
    ``vmap``), where the JVP is staged into one graph and split."""
    leaves, in_tree = tree_flatten(tuple(primals))
    avals = [abstractify(x) for x in leaves]
    diff = [dtypes.is_inexact(a.dtype) for a in avals]
    out_tree: list[PyTreeDef] = []
    concrete = not staged and not is_staging() and all(is_concrete(x) for x in leaves)
    split = linearize_concrete if concrete else linearize_flat
    outs, lin, known_t, res = split(flat_fun(fun, in_tree, {}, out_tree), [_concrete(x) for x in leaves], avals, diff)
    return outs, out_tree[0], lin, known_t, res, leaves, in_tree, avals, diff


def linearize(fun: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[..., Any]]:
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` reuses the saved linearization."""
    before = _tapes_if_outermost()
    outs, out_tree, lin, known_t, res, _, in_tree, avals, diff = _linearize(fun, primals, "linearize")

    def f_jvp(*tangents: Any) -> Any:
        t_leaves, t_tree = tree_flatten(tuple(tangents))
        if t_tree != in_tree:
            raise TypeError(f"linearize: tangent structure {t_tree} differs from primal structure {in_tree}")
        ts = [_concrete(t) for t, d in zip(t_leaves, diff) if d]
        return tree_unflatten(out_tree, owned_results(eval_linear(lin, res, known_t, ts), t_leaves))

    _hold_tapes(f_jvp, res, lin.linear, before)
    return tree_unflatten(out_tree, outs), f_jvp


def _tapes_if_outermost() -> set[int] | None:
    """The live ``while_loop`` tapes, when a linearization starts outside every transformation
    (so that every tape it records is its own), else None."""
    return None if is_staging() or innermost_main().level else live_tapes()


def _hold_tapes(fun: Callable[..., Any], residuals: Sequence[Any], linear: Graph, before: set[int] | None) -> None:
    """The ``while_loop`` tapes among ``residuals`` (and the scalars ``linear`` holds as
    literals) live as long as ``fun`` (a ``vjp`` or ``linearize`` function) and no longer: it
    may be called many times, or never. An outermost linearization (``before`` the tapes
    live when it started) also frees, with ``fun``, the tapes it recorded that nothing read
    (those of derivatives no output needed)."""
    literals = [a.array for e in linear.eqns for a in e.inputs if isinstance(a, Literal)]
    values = [np.asarray(r) for r in list(residuals) + literals if isinstance(r, (np.ndarray, np.generic))]
    handles = retain_tapes(values)
    if before is not None:
        handles += sorted(live_tapes() - before - set(handles))
    if handles:
        weakref.finalize(fun, release_tapes, handles)


def vjp(fun: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """Reverse mode: ``(fun(*primals), f_vjp)`` with ``f_vjp(ct)`` the cotangents of each primal;
    with ``has_aux`` ``fun`` returns ``(out, aux)`` and ``aux`` is returned third, undifferentiated."""

    target = fun if has_aux else (lambda *a: (fun(*a), None))
    before = _tapes_if_outermost()
    outs, pair_tree, lin, _, res, leaves, in_tree, avals, diff = _linearize(target, primals, "vjp")
    if pair_tree.node_type is not tuple or len(pair_tree.children) != 2:
        raise TypeError("vjp(..., has_aux=True) needs a function returning a pair (output, aux)")
    out_tree, aux_tree = pair_tree.children
    n_out = out_tree.num_leaves

    def f_vjp(ct: Any) -> tuple[Any, ...]:
        ct_leaves, ct_tree = tree_flatten(_key_tangents(primal_out, ct))
        if ct_tree != out_tree:
            raise TypeError(f"vjp: cotangent structure {ct_tree} differs from output structure {out_tree}")
        for c, o in zip(ct_leaves, outs):
            c_shape = np.shape(c) if _is_float0(c) else abstractify(c).shape
            if c_shape != abstractify(o).shape:
                raise ValueError(f"vjp: cotangent of shape {c_shape} for an output of shape "
                                 f"{abstractify(o).shape}")
        cts = [None if _is_float0(c) else _concrete(c) for c in ct_leaves] + [None] * (len(outs) - n_out)
        grads_iter = iter(transpose_linear(lin, res, cts))
        grads = []
        for a, d in zip(avals, diff):
            g = next(grads_iter) if d else None
            grads.append(zeros(a) if g is None else g)
        grads = _weak_like(owned_results(grads, [*ct_leaves, *outs]), leaves)
        grads = [g if d or _is_key(p) else np.zeros(a.shape, dtypes.float0)
                 for g, d, p, a in zip(grads, diff, leaves, avals)]
        return _key_float0(tuple(primals), tuple(tree_unflatten(in_tree, grads)))

    _hold_tapes(f_vjp, res, lin.linear, before)
    primal_out = tree_unflatten(out_tree, owned_results(outs[:n_out], tree_flatten(primals)[0]))
    if has_aux:
        return primal_out, f_vjp, tree_unflatten(aux_tree, outs[n_out:])
    return primal_out, f_vjp


def linear_transpose(fun: Callable[..., Any], *primals: Any) -> Callable[[Any], tuple[Any, ...]]:
    """The transpose of ``fun``, linear in its inputs, at inputs shaped like ``primals`` (arrays
    or :class:`ShapeDtypeStruct`; only shapes and dtypes are read), as ``jax.linear_transpose``:
    ``f_t(ct)`` returns one cotangent per primal. ``fun``'s graph is transposed directly, so a
    nonlinear operation on an input is an error, not a silent Jacobian at some point (a constant
    added to the output is dropped: the transpose of the linear part)."""

    leaves, in_tree = tree_flatten(tuple(primals))
    avals = [abstractify(x) for x in leaves]
    box: list[PyTreeDef] = []
    graph, closure = stage(flat_fun(fun, in_tree, {}, box), avals)
    out_tree = box[0]
    name = getattr(fun, "__name__", "fun")
    known, linear, r, out_unknown = partial_eval(graph, [True] * len(avals) + [False] * len(closure))
    known_vals = eval_graph(known, *closure)
    residuals = known_vals[len(known_vals) - r:] if r else []

    def f_t(ct: Any) -> tuple[Any, ...]:
        ct_leaves, ct_tree = tree_flatten(ct)
        if ct_tree != out_tree:
            raise TypeError(f"linear_transpose: cotangent structure {ct_tree} differs from the output structure "
                            f"{out_tree} of {name}")
        for c, want in zip(ct_leaves, graph.out_avals):
            got = abstractify(c)
            if got.shape != want.shape:
                raise ValueError(f"linear_transpose: cotangent of shape {got.shape} for an output {want} of {name}")
        try:
            cts = backward_pass(linear, residuals, [_concrete(c) for c, u in zip(ct_leaves, out_unknown) if u])
        except TypeError as err:
            reason = str(err).split(";")[0]
            raise TypeError(f"linear_transpose: {name} is not linear in its inputs ({reason})") from None
        grads = [zeros(a) if c is None else c for a, c in zip(avals, cts)]
        return tuple(tree_unflatten(in_tree, owned_results(grads, ct_leaves)))

    return f_t


def _argnums_tuple(argnums: int | Sequence[int]) -> tuple[int, ...]:
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


def value_and_grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False, holomorphic: bool = False, allow_int: bool = False) -> Callable[..., Any]:
    """``(fun(*args), gradient)`` of a scalar-valued ``fun`` with respect to ``argnums``.

    Keyword arguments are passed to ``fun`` and not differentiated, as in JAX. Complex inputs
    follow JAX: for a real-valued ``fun`` of ``z = x + iy`` the gradient is
    ``df/dx - i df/dy``; a complex-valued ``fun`` needs ``holomorphic=True`` (and complex
    inputs), and then the gradient is ``f'(z)``. With ``allow_int`` integer and boolean
    arguments are accepted, their gradients float0 zeros, as JAX gives."""
    nums = _argnums_tuple(argnums)

    @functools.wraps(fun, updated=())
    def vg(*args: Any, **kwargs: Any) -> Any:
        for i in nums:
            if not -len(args) <= i < len(args):
                raise ValueError(f"argnums {argnums} refers to argument {i}, but only {len(args)} were given")
            for leaf in tree_leaves(args[i], is_leaf=_is_key):
                dt = leaf.dtype if _is_key(leaf) else abstractify(leaf).dtype
                if isinstance(dt, dtypes.KeyDType):
                    raise TypeError(f"grad requires float or complex inputs, but argument {i} has dtype {dt} (a key "
                                    "array); differentiate with respect to float arguments only (see argnums)")
                if holomorphic and not dtypes.is_complex(dt):
                    raise TypeError(f"grad with holomorphic=True requires complex inputs, but argument {i} "
                                    f"has dtype {dt}")
                if not dtypes.is_inexact(dt) and not (allow_int and not holomorphic):
                    raise TypeError(f"grad requires float or complex inputs, but argument {i} has dtype {dt}; "
                                    "differentiate with respect to float arguments only (see argnums), or "
                                    "pass allow_int=True for float0 gradients of integer inputs")
        diff_args = tuple(args[i] for i in nums)

        def partial_fun(*diff: Any) -> Any:
            full = list(args)
            for i, d in zip(nums, diff):
                full[i] = d
            return fun(*full, **kwargs)

        result = vjp(partial_fun, *diff_args, has_aux=has_aux)
        out, f_vjp = result[0], result[1]
        leaves = tree_flatten(out)[0]
        if len(leaves) != 1 or abstractify(leaves[0]).shape != ():
            shapes = [abstractify(x).shape for x in leaves]
            raise TypeError(f"grad requires a scalar output, but the function returned shape(s) {shapes}")
        if leaves[0] is not out:
            raise TypeError(f"grad requires a scalar output, but the function returned a {type(out).__name__} "
                            f"holding one: {tree_flatten(out)[1]}; return the scalar itself (or use has_aux)")
        dt = abstractify(leaves[0]).dtype
        if holomorphic and not dtypes.is_complex(dt):
            raise TypeError(f"grad with holomorphic=True requires a complex output, got dtype {dt}")
        if dtypes.is_complex(dt) and not holomorphic:
            raise TypeError(f"grad requires a real-valued output, got dtype {dt}; for holomorphic functions "
                            "use grad(f, holomorphic=True), or differentiate a real function of the output "
                            "(e.g. its real part or abs)")
        if not dtypes.is_inexact(dt):
            raise TypeError(f"grad requires a real-valued (float) output, got dtype {dt}")
        grads = f_vjp(tree_unflatten(tree_flatten(out)[1], [np.ones((), dt)]))
        g = grads[0] if isinstance(argnums, int) else grads
        return ((out, result[2]), g) if has_aux else (out, g)

    return vg


def grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False, allow_int: bool = False) -> Callable[..., Any]:
    """The gradient of a scalar-valued ``fun`` with respect to ``argnums`` (any order composes);
    complex and (``allow_int``) integer arguments as in ``value_and_grad``."""
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int)

    @functools.wraps(fun, updated=())
    def g(*args: Any, **kwargs: Any) -> Any:
        (out, grads) = vg(*args, **kwargs)
        return (grads, out[1]) if has_aux else grads

    return g


def _flat_args_fun(fun: Callable[..., Any], args: Sequence[Any], nums: tuple[int, ...]) -> tuple:
    """``fun`` as a function of the flat leaves of the differentiated arguments."""
    in_leaves, in_tree = tree_flatten([args[i] for i in nums])

    def f_flat(*leaves: Any) -> Any:
        full = list(args)
        for i, d in zip(nums, tree_unflatten(in_tree, leaves)):
            full[i] = d
        return fun(*full)

    return f_flat, [_concrete(x) for x in in_leaves], in_tree


def _basis(a: ShapedArray) -> np.ndarray:
    return np.eye(a.size, dtype=a.dtype).reshape((a.size,) + a.shape)


def _output_and_aux(fun: Callable[..., Any]) -> tuple[Callable[..., Any], list[Any]]:
    """``fun`` returning the output of its ``(output, aux)`` pair alone, and a box that keeps
    the ``aux`` of its first call (made at the caller's level, so never differentiated)."""
    box: list[Any] = []

    def main(*args: Any) -> Any:
        pair = fun(*args)
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError("has_aux=True needs a function returning a pair (output, aux)")
        if not box:
            box.append(pair[1])
        return pair[0]

    return main, box


def _check_holomorphic(name: str, what: str, leaves: Sequence[Any]) -> None:
    """JAX's check that a ``holomorphic=True`` derivative's inputs or outputs are complex."""
    for x in leaves:
        dt = abstractify(x).dtype
        if not dtypes.is_complex(dt):
            raise TypeError(f"{name} with holomorphic=True requires {what} with complex dtype, but got {dt.name}.")


def jacfwd(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable[..., Any]:
    """The Jacobian by forward mode: a JVP per input element, batched with vmap; shape
    out.shape + in.shape. With ``has_aux`` ``fun`` returns ``(out, aux)`` and so does this;
    ``holomorphic=True`` takes complex inputs to complex outputs (the complex derivative)."""
    nums = _argnums_tuple(argnums)

    @functools.wraps(fun, updated=())
    def jac(*args: Any) -> Any:
        if has_aux:
            main, box = _output_and_aux(fun)
            main(*args)  # one primal evaluation for aux: forward mode evaluates fun under vmap
            return jacfwd(main, argnums, holomorphic=holomorphic)(*args), box[0]
        f_flat, in_leaves, in_tree = _flat_args_fun(fun, args, nums)
        if holomorphic:
            _check_holomorphic("jacfwd", "inputs", in_leaves)
            _check_holomorphic("jacfwd", "outputs", tree_flatten(eval_shape(f_flat, *in_leaves))[0])
        zeros_like = [np.zeros(abstractify(x).shape, abstractify(x).dtype) for x in in_leaves]
        per_input = []
        out_tree = None
        for j, x in enumerate(in_leaves):
            a = abstractify(x)

            def push(t: Any, j: int = j) -> Any:
                tangents = list(zeros_like)
                tangents[j] = t
                return jvp(f_flat, tuple(in_leaves), tuple(tangents))[1]

            basis = _basis(a)
            cols = vmap(push)(weak_view(basis) if dtypes.is_weak(x) else basis)
            col_leaves, out_tree = tree_flatten(cols)
            per_input.append([reshape(_batch_last(_concrete(c)), abstractify(c).shape[1:] + a.shape)
                              for c in col_leaves])
        return _assemble(per_input, out_tree, in_tree, isinstance(argnums, int))

    return jac


def jacrev(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, allow_int: bool = False) -> Callable[..., Any]:
    """The Jacobian by reverse mode: one linearization, a VJP per output element batched with
    vmap. With ``has_aux`` ``fun`` returns ``(out, aux)`` and so does this; ``holomorphic=True``
    takes complex inputs to complex outputs (the complex derivative). ``allow_int`` is JAX's
    keyword; integer inputs are accepted either way."""
    nums = _argnums_tuple(argnums)

    @functools.wraps(fun, updated=())
    def jac(*args: Any) -> Any:
        f_flat, in_leaves, in_tree = _flat_args_fun(fun, args, nums)
        if holomorphic:
            _check_holomorphic("jacrev", "inputs", in_leaves)
        if has_aux:
            out, f_vjp, aux = vjp(f_flat, *in_leaves, has_aux=True)
        else:
            out, f_vjp = vjp(f_flat, *in_leaves)
        out_leaves, out_tree = tree_flatten(out)
        if holomorphic:
            _check_holomorphic("jacrev", "outputs", out_leaves)
        out_avals = [abstractify(o) for o in out_leaves]
        in_avals = [abstractify(x) for x in in_leaves]
        rows: list[list[Any]] = []
        for k, oa in enumerate(out_avals):

            def pull(c: Any, k: int = k) -> Any:
                cts = [np.zeros(o.shape, o.dtype) for o in out_avals]
                cts[k] = c
                return f_vjp(tree_unflatten(out_tree, cts))

            grads = vmap(pull)(_basis(oa))
            rows.append([np.zeros(oa.shape + ia.shape, ia.dtype) if _is_float0(g) else
                         reshape(_concrete(g), oa.shape + ia.shape) for g, ia in zip(grads, in_avals)])
        per_input = [[rows[k][j] for k in range(len(out_avals))] for j in range(len(in_avals))]
        result = _assemble(per_input, out_tree, in_tree, isinstance(argnums, int))
        return (result, aux) if has_aux else result

    return jac


def _assemble(per_input: list[list[Any]], out_tree: PyTreeDef, in_tree: PyTreeDef, single: bool) -> Any:
    """Nest Jacobian blocks as JAX does: output structure outside, argument structure inside."""
    n_out = len(per_input[0]) if per_input else 0
    result = []
    for k in range(n_out):
        inner = tree_unflatten(in_tree, [per_input[j][k] for j in range(len(per_input))])
        result.append(inner[0] if single else tuple(inner))
    return tree_unflatten(out_tree, result)


def hessian(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable[..., Any]:
    """``jacfwd(jacrev(fun))``: forward-over-reverse second derivatives (with ``has_aux``,
    ``fun`` returns ``(out, aux)`` and so does this)."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums, has_aux=has_aux,
                  holomorphic=holomorphic)


# --- vmap --------------------------------------------------------------------------------


def _broadcast_prefix(prefix: Any, tree: Any, what: str) -> list[Any]:
    """One axis spec per leaf of ``tree``, from a spec that is a prefix of its structure."""
    if prefix is None or isinstance(prefix, int):
        return [prefix] * len(tree_flatten(tree)[0])
    p_leaves, p_tree = tree_flatten(prefix, is_leaf=lambda x: x is None)
    t_flat = tree_flatten(tree)[1]
    if p_tree == t_flat:
        return p_leaves
    if isinstance(prefix, (tuple, list)) and isinstance(tree, (tuple, list)) and len(prefix) == len(tree):
        return [a for p, t in zip(prefix, tree) for a in _broadcast_prefix(p, t, what)]
    if isinstance(prefix, dict) and isinstance(tree, dict) and set(prefix) == set(tree):
        return [a for k in sorted(tree) for a in _broadcast_prefix(prefix[k], tree[k], what)]
    raise ValueError(f"vmap {what} specification {prefix!r} does not match the structure {t_flat}")


def vmap(fun: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0, axis_size: int | None = None,
         axis_name: Hashable | None = None) -> Callable:
    """Map ``fun`` over an axis of its arguments, with JAX's ``in_axes``/``out_axes`` rules;
    ``axis_name`` names the mapped axis for collectives (``psum(x, axis_name)``) inside ``fun``."""
    @functools.wraps(fun, updated=())
    def mapped(*args: Any) -> Any:
        axes = in_axes
        if isinstance(axes, list):
            axes = tuple(axes)
        if isinstance(axes, tuple) and len(axes) != len(args):
            raise ValueError(f"vmap in_axes has {len(axes)} entries but the function got {len(args)} arguments")
        spec = axes if isinstance(axes, tuple) else (axes,) * len(args)
        leaves, in_tree = tree_flatten(args)
        dims = _broadcast_prefix(spec, args, "in_axes")
        sizes = {}
        norm_dims = []
        for i, (x, d) in enumerate(zip(leaves, dims)):
            if d is None:
                norm_dims.append(None)
                continue
            a = abstractify(x)
            if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
                raise TypeError(f"vmap in_axes must be an int or None, got {d!r} for argument leaf {i}")
            if not -a.ndim <= d < a.ndim:
                raise ValueError(f"vmap: in_axes {d} is out of range for argument leaf {i} of shape {a.shape}")
            norm_dims.append(d % a.ndim)
            sizes[i] = a.shape[d % a.ndim]
        if len(set(sizes.values())) > 1:
            detail = ", ".join(f"leaf {i}: size {n}" for i, n in sizes.items())
            raise ValueError(f"vmap got inconsistent sizes for the mapped axis: {detail}")
        if not sizes and axis_size is None:
            raise ValueError("vmap needs at least one mapped argument (or axis_size)")
        if sizes and axis_size is not None and set(sizes.values()) != {axis_size}:
            detail = ", ".join(f"leaf {i} of shape {abstractify(leaves[i]).shape}: size {n}" for i, n in sizes.items())
            raise ValueError(f"vmap got axis_size={axis_size} but the mapped axes have other sizes: {detail}")
        size = next(iter(sizes.values())) if sizes else axis_size
        out_box: list[PyTreeDef] = []

        # as JAX's, an unmapped argument reaches ``fun`` as it was given (a Python int stays an
        # int, so a jitted ``fun`` may take it as a static argument): only mapped ones are traced
        mapped = [i for i, d in enumerate(norm_dims) if d is not None]

        def flat(*xs: Any) -> list[Any]:
            args = list(leaves)
            for i, x in zip(mapped, xs):
                args[i] = x
            out_leaves, out_tree = flatten_outputs(fun(*tree_unflatten(in_tree, args)))
            out_box.append(out_tree)
            return out_leaves

        def out_dims(outs: list[Any]) -> list[Any]:
            return _broadcast_prefix(out_axes, tree_unflatten(out_box[-1], outs), "out_axes")

        outs = vmap_flat(flat, [_concrete(leaves[i]) for i in mapped], [norm_dims[i] for i in mapped], out_dims,
                         size, axis_name)
        result = tree_unflatten(out_box[-1], owned_results(outs, leaves))
        return _batched_float0(result, size, out_axes) if out_box[-1].num_leaves != len(tree_leaves(result)) else result

    return mapped


def _batched_float0(result: Any, size: int, out_axes: Any) -> Any:
    """``vmap``'s result with its float0 zeros (held in the output tree, unbatched) given the
    mapped axis, as JAX batches them."""
    axes = _broadcast_prefix(out_axes, result, "out_axes")
    leaves, tree = tree_flatten(result)
    return tree_unflatten(tree, [_float0_with_axis(x, a, size) if _is_float0(x) and a is not None else x
                                 for x, a in zip(leaves, axes)])


def _float0_with_axis(x: np.ndarray, axis: int, size: int) -> np.ndarray:
    shape = list(x.shape)
    shape.insert(axis % (x.ndim + 1), size)
    return np.zeros(tuple(shape), dtypes.float0)


def device_put(x: Any, device: Any = None) -> Any:
    """Every array leaf of ``x`` on ``device`` (a backend name: ``"cpu"``, the default, gives
    numpy arrays; ``"opencl"`` gives device arrays that OpenCL-jitted functions take without a
    transfer), converted to fungraph's dtypes. ``device`` may also be one of ``devices()``, a
    ``SingleDeviceSharding``, or a ``NamedSharding`` over a mesh of one device (the array stays
    whole on it)."""

    if isinstance(device, SingleDeviceSharding):
        device = device.device
    if isinstance(device, NamedSharding):
        if device.mesh.size != 1:
            raise NotImplementedError(
                f"device_put onto {device}: fungraph arrays lie whole on one device per process; split an "
                "array over processes with shard_map, whose blocks are each process's own (docs/distributed.md)")
        device = device.mesh.devices.reshape(-1)[0]
    if isinstance(device, Device):
        device = device.platform
    where = "cpu" if device is None else device
    if where not in known_backends():
        raise ValueError(f"device_put: unknown device {device!r}; available: {', '.join(known_backends())}")

    def put(leaf: Any) -> Any:
        if isinstance(leaf, Array) and leaf.backend == where:
            return leaf
        host = to_concrete_dtype_array(leaf)
        if where == "cpu":
            return hosted_copy_if_shared(host, (leaf,))
        # optional dependency: the OpenCL backend (and pyopencl) loads on its first use
        from fungraph.backends.opencl.device import device_put as to_opencl

        return to_opencl(host)

    return tree_map(put, x)


def block_until_ready(x: Any) -> Any:
    """Wait until every device array leaf of ``x`` is computed; returns ``x`` (JAX's function)."""
    for leaf in tree_leaves(x):
        if isinstance(leaf, Array):
            leaf.block_until_ready()
    return x


def device_get(x: Any) -> Any:
    """``x`` with every device array leaf copied to a numpy array (other leaves unchanged), as
    ``jax.device_get``; a traced leaf raises the usual concretization error."""
    return tree_map(lambda leaf: np.asarray(leaf) if isinstance(leaf, (Array, Tracer)) else leaf, x)


def typeof(x: Any) -> ShapedArray:
    """The abstract value (shape and dtype) of an array, a traced value or a Python scalar."""
    return abstractify(x)


# --- tracing utilities -------------------------------------------------------------------


@contextlib.contextmanager
def ensure_compile_time_eval() -> Iterator[None]:
    """Within the block, operations whose operands are all concrete run now, even while a
    function is being staged (under ``jit``, ``make_graph``); operations on traced values are
    still staged. Lets Python control flow and shape arithmetic use values computed from
    constants inside a jitted function, as in JAX."""
    with new_dynamic(MainTrace(0, EvalTrace, None)):
        yield


def closure_convert(fun: Callable[..., Any], *example_args: Any) -> tuple[Callable[..., Any], list[Any]]:
    """``(converted, consts)`` where ``converted(*args, *consts)`` computes ``fun(*args)`` and
    ``consts`` are the traced values ``fun`` closes over (from an enclosing transformation), now
    explicit arguments, e.g. to pass through ``custom_vjp``. Traced once on ``example_args``'
    shapes and dtypes; concrete values ``fun`` closes over stay constants of its graph."""
    leaves, in_tree = tree_flatten(example_args)
    box: list[PyTreeDef] = []
    graph, consts = stage(flat_fun(fun, in_tree, {}, box), [abstractify(x) for x in leaves])
    out_tree = box[0]
    n_consts = len(consts)
    name = getattr(fun, "__name__", "fun")

    def converted(*args_and_consts: Any) -> Any:
        args = args_and_consts[:len(args_and_consts) - n_consts]
        arg_leaves, tree = tree_flatten(args)
        if tree != in_tree:
            raise TypeError(f"closure_convert({name}): called with arguments {tree}, traced with {in_tree}")
        return tree_unflatten(out_tree, eval_graph(graph, *arg_leaves, *args_and_consts[len(args):]))

    functools.update_wrapper(converted, fun, updated=())
    return converted, list(consts)


def named_call(fun: Callable[..., Any], *, name: str | None = None) -> Callable[..., Any]:
    """``fun`` itself: JAX names the call in its IR for profiles; fungraph's equations record
    their user source line instead, so the name is not kept."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"named_call: name must be a string, got {type(name).__name__}")
    return fun


@contextlib.contextmanager
def named_scope(name: str) -> Iterator[None]:
    """Accepted for JAX code and changes nothing: equations record their user source line, not
    scope names."""
    if not isinstance(name, str):
        raise TypeError(f"named_scope: name must be a string, got {type(name).__name__}")
    yield
