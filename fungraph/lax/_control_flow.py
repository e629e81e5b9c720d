"""``jax.lax``'s control flow: ``cond``/``switch``, ``while_loop``, ``fori_loop``, ``scan`` and
``map``, each staging its functions into graphs held by one higher-order primitive, and
``optimization_barrier``."""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import dtypes, tree_util
from fungraph._ref_frames import RefsTouched
from fungraph._refs import bind as bind_refs
from fungraph.array import hosted
from fungraph.core import ShapeError, Tracer, UnexpectedTracerError, user_source, weak_outputs
from fungraph.ir import ShapedArray, aval_of
from fungraph.primitives import shape as sh
from fungraph.primitives.collectives import pvary
from fungraph.primitives.elementwise import strong
from fungraph.primitives.operands import asarray, weak_asarray
from fungraph.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding


def _stage_fn(fun: Any, in_tree: Any, avals: Sequence[Any], what: str,
              weak: Sequence[bool] = ()) -> tuple[Any, list[Any], Any, tuple[int, ...]]:
    """``fun`` staged on ``avals`` (``weak[i]``: argument ``i`` weakly typed): its graph, closure,
    output tree and the positions of its weakly typed outputs."""
    from fungraph.api import flat_fun
    from fungraph.interpreters.staging import stage

    box: list[Any] = []
    weak_box: list[tuple[int, ...]] = []
    graph, closure = stage(flat_fun(fun, in_tree, {}, box, weak_box), list(avals), weak)
    return graph, closure, box[0], weak_box[0]


def _promote_weak_carries(leaves: list[Any], avals: list[ShapedArray], weak: list[bool],
                          out_avals: Sequence[ShapedArray], out_weak: Sequence[int]) -> bool:
    """JAX's two passes over a loop body: a weakly typed initial carry (a Python scalar) whose
    body output has another dtype is converted, strongly typed, to the promotion of the two (in
    place in ``leaves``/``avals``/``weak``); whether any was, so the body is staged again."""
    from fungraph.primitives.elementwise import convert

    changed = False
    for i, (a, out) in enumerate(zip(avals, out_avals)):
        if weak[i] and out.dtype != a.dtype:
            dtype = dtypes.join([a.dtype, out.dtype], [True, i in out_weak])[0]
            leaves[i] = convert(strong(leaves[i]), dtype)
            avals[i] = ShapedArray(a.shape, dtype, a.vma)
            weak[i] = False
            changed = True
    return changed


def _grow_carries(leaves: list[Any], avals: list[ShapedArray], out_avals: Sequence[ShapedArray]) -> bool:
    """Inside ``shard_map``: raise each carry to the mesh axes the body's output for it varies
    over (a ``pvary`` before the loop, in place in ``leaves``/``avals``); whether any grew, so
    the body is staged again on the grown types. A carry typed below its fixed point would
    get its ``pvary`` inside the body, whose transpose sums the carry's cotangent at every step."""
    grew = False
    for i, (a, out) in enumerate(zip(avals, out_avals)):
        extra = out.vma - a.vma
        if extra:
            grew = True
            if dtypes.is_inexact(a.dtype):
                leaves[i] = pvary(leaves[i], tuple(extra))
            avals[i] = ShapedArray(a.shape, a.dtype, a.vma | extra)
    return grew


def _leaves(tree: Any) -> tuple[list[Any], Any, list[Any], list[bool]]:
    """``tree``'s leaves as arrays (weakly typed where they are: Python scalars, weak arrays),
    its structure, their avals and which are weak."""
    from fungraph.api import abstractify
    from fungraph.tree_util import tree_flatten

    leaves, td = tree_flatten(tree)
    weak = [dtypes.is_weak(x) for x in leaves]
    leaves = [weak_asarray(x) for x in leaves]
    return leaves, td, [abstractify(x) for x in leaves], weak


def switch(index: Any, branches: Sequence[Any], *operands: Any) -> Any:
    """Apply ``branches[index]`` to ``operands``; the index, an integer scalar (as JAX, a
    float or bool one is a ``TypeError``), is clamped to the valid range."""
    idx = asarray(index)
    if idx.shape != ():
        raise _at_user_line(f"switch index must be a scalar, got shape {idx.shape}")
    if np.dtype(idx.dtype).kind not in "iu":
        raise _at_user_line(f"switch index must be an integer, got {_describe(index)} of dtype {idx.dtype}")
    return _switch(idx, branches, operands)


def _describe(value: Any) -> str:
    """``value`` for an error message: a concrete scalar's value, else its type."""
    return repr(value) if isinstance(value, (builtins.bool, builtins.int, builtins.float, builtins.complex,
                                             np.generic)) else "a traced value"


def _at_user_line(message: str) -> TypeError:
    """A ``TypeError`` with the user's source line appended."""
    src = user_source()
    return TypeError(message + (f"\n  at {src}" if src else ""))


def _switch(idx: Any, branches: Sequence[Any], operands: tuple[Any, ...], api: str = "switch") -> Any:
    """``_switch_staged``, with the references its branches touch threaded through as operands
    and outputs."""
    try:
        return _switch_staged(idx, branches, operands, api)
    except RefsTouched as touched:
        refs = touched.refs
    outs, values = _switch_staged(idx, [_ref_branch(b, refs) for b in branches],
                                  (operands, [r.read() for r in refs]), api)
    _set_refs(refs, values)
    return outs


def _ref_branch(branch: Any, refs: list[Any]) -> Any:
    """``branch`` taking and returning the references' values besides its own operands and outputs."""

    def run(operands: Any, values: list[Any]) -> Any:
        bind_refs(refs, values)
        return branch(*operands), [r.read() for r in refs]

    return run


def _set_refs(refs: list[Any], values: list[Any]) -> None:
    for r, v in zip(refs, values):
        r.write(v)


def _switch_staged(idx: Any, branches: Sequence[Any], operands: tuple[Any, ...], api: str = "switch") -> Any:
    """``switch`` on a checked scalar index (integer or bool), converted to int32 as JAX does;
    ``api`` names the caller in errors ("cond": branches are ``false_fun``, ``true_fun``)."""
    from fungraph.primitives.control_flow import cond_p
    from fungraph.primitives.elementwise import convert
    from fungraph.primitives.graph_utils import insert_unused_inputs
    from fungraph.tree_util import tree_unflatten

    if not branches:
        raise ValueError("switch needs at least one branch")
    leaves, in_tree, avals, weak = _leaves(tuple(operands))
    staged = [_stage_fn(b, in_tree, avals, f"branch {k}", weak) for k, b in enumerate(branches)]
    out_trees = [s[2] for s in staged]
    for k, t in enumerate(out_trees):
        if t != out_trees[0]:
            raise TypeError(f"switch/cond branches must return the same structure: branch 0 returns {out_trees[0]}, "
                            f"branch {k} returns {t}")
    for k in range(1, len(staged)):
        _check_branch_types(api, k, staged[0][0].out_avals, staged[k][0].out_avals)
    closure_avals = [[v.aval for v in g.invars[len(avals):]] for g, _, _, _ in staged]
    graphs = []
    for k, (g, _, _, _) in enumerate(staged):
        before = [a for c in closure_avals[:k] for a in c]
        after = [a for c in closure_avals[k + 1:] for a in c]
        g = insert_unused_inputs(g, len(avals), before)
        graphs.append(insert_unused_inputs(g, len(g.invars), after))
    closures = [c for _, cl, _, _ in staged for c in cl]
    idx = convert(idx, np.dtype(np.int32))
    outs = cond_p.bind(idx, *leaves, *closures, branches=tuple(graphs))
    return tree_unflatten(out_trees[0], weak_outputs(outs, staged[0][3]))


def _branch_name(api: str, k: int) -> str:
    if api == "cond":
        return ("false_fun", "true_fun")[k]
    return f"branch {k}" if k == 0 else f"branch{k}"


def _check_branch_types(api: str, k: int, first: Sequence[ShapedArray], other: Sequence[ShapedArray]) -> None:
    """JAX's check: every branch returns the shapes and dtypes of branch 0 (weak types may
    differ; the outputs take branch 0's), else its ``TypeError`` naming each differing output."""
    name0, name = _branch_name(api, 0), _branch_name(api, k)
    if api == "cond":
        name0, name = name, name0
        first, other = other, first
    diffs = [f"the output {i} of {name0} has type {a} but the "
             f"corresponding output of {name} has type {b}"
             for i, (a, b) in enumerate(zip(first, other)) if (a.shape, a.dtype) != (b.shape, b.dtype)]
    if diffs:
        raise _at_user_line(f"{api} branches must have equal output types but they differ: " + "; ".join(diffs)
                            + f". Revise {name0} and/or {name} so that all output types match.")


def cond(pred: Any, true_fun: Any, false_fun: Any, *operands: Any) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, staged as one ``cond``.
    A numeric ``pred`` is true when nonzero, as Python's truthiness and JAX (``0.5``, ``-1``
    and ``2**32`` are true; NaN is true)."""
    from fungraph.primitives.elementwise import ne_p

    p = asarray(pred)
    if p.shape != ():
        raise _at_user_line(f"cond predicate must be a scalar, got shape {p.shape}")
    kind = np.dtype(p.dtype).kind
    if kind not in "biuf":
        raise _at_user_line(f"cond predicate must be a bool or a real number, got {_describe(pred)} of dtype {p.dtype}")
    if kind != "b":
        p = ne_p.bind(p, asarray(np.zeros((), p.dtype)))
    return _switch(p, [false_fun, true_fun], operands, "cond")


def while_loop(cond_fun: Any, body_fun: Any, init_val: Any, *, checkpoint: str = "all") -> Any:
    """Repeat ``body_fun`` while ``cond_fun`` holds. Unlike JAX, reverse-mode differentiation
    works (trip count found at run time); ``checkpoint`` is "all", "sqrt" or "every:K". The
    references the functions touch are threaded through as carries."""
    try:
        return _while_loop(cond_fun, body_fun, init_val, checkpoint)
    except RefsTouched as touched:
        refs = touched.refs

    def cond(c: Any) -> Any:
        bind_refs(refs, c[1])
        return cond_fun(c[0])

    def body(c: Any) -> Any:
        bind_refs(refs, c[1])
        return body_fun(c[0]), [r.read() for r in refs]

    out, values = _while_loop(cond, body, (init_val, [r.read() for r in refs]), checkpoint)
    _set_refs(refs, values)
    return out


def _while_loop(cond_fun: Any, body_fun: Any, init_val: Any, checkpoint: str) -> Any:
    from fungraph.primitives.while_loop import _policy, while_p
    from fungraph.tree_util import tree_unflatten

    _policy(checkpoint)
    leaves, tree, avals, weak = _leaves(init_val)
    cgraph, cclosure, ctree, _ = _stage_fn(lambda c: cond_fun(c), _single(tree), avals, "cond_fun", weak)
    if cgraph.out_avals != (ShapedArray((), np.dtype(np.bool_)),):
        raise TypeError(f"while_loop cond_fun must return a bool scalar, got {[str(a) for a in cgraph.out_avals]}")
    bgraph, bclosure, btree, bweak = _stage_fn(lambda c: body_fun(c), _single(tree), avals, "body_fun", weak)
    while btree == tree and (_grow_carries(leaves, avals, bgraph.out_avals)
                             or _promote_weak_carries(leaves, avals, weak, bgraph.out_avals, bweak)):
        cgraph, cclosure, ctree, _ = _stage_fn(lambda c: cond_fun(c), _single(tree), avals, "cond_fun", weak)
        bgraph, bclosure, btree, bweak = _stage_fn(lambda c: body_fun(c), _single(tree), avals, "body_fun", weak)
    if btree != tree or bgraph.out_avals != tuple(avals):
        raise _carry_error("while_loop body_fun", tree, avals, btree, bgraph.out_avals)
    outs = while_p.bind(*cclosure, *bclosure, *leaves, cond_graph=cgraph, body_graph=bgraph, n_cc=len(cclosure),
                        n_bc=len(bclosure), policy=checkpoint)
    return tree_unflatten(tree, weak_outputs(outs, bweak))


def _carry_error(what: str, tree: Any, avals: Sequence[ShapedArray], out_tree: Any,
                 out_avals: Sequence[ShapedArray]) -> TypeError:
    """A loop body returned a carry unlike its input: JAX's error, naming the leaves that differ
    and the user's line (a weakly typed initial carry was already promoted, as JAX does)."""
    src = "" if not user_source() else f"\n  at {user_source()}"
    if out_tree != tree:
        return TypeError(f"{what} must return the carry's structure and types: the carry is {tree}, the body "
                         f"returned {out_tree}{src}")
    differences = "; ".join(f"the input carry leaf {k} has type {a} but the corresponding output carry component "
                            f"has type {b}, so the {_mismatch(a, b)} do not match"
                            for k, (a, b) in enumerate(zip(avals, out_avals)) if a != b)
    hint = ""
    if any(a.shape == b.shape and a.dtype != b.dtype for a, b in zip(avals, out_avals)):
        hint = ("; a value of another dtype reached the carry (a numpy scalar or array, which is strongly typed, "
                "unlike a Python scalar): cast it, e.g. `(c + y).astype(c.dtype)`")
    return TypeError(f"{what} function carry input and carry output must have equal types, but they differ: "
                     f"{differences}. Revise the function so that all output types match the corresponding input "
                     f"types{hint}{src}")


def _mismatch(a: ShapedArray, b: ShapedArray) -> str:
    """What differs between two avals, in JAX's words."""
    parts = [name for name, differs in (("dtypes", a.dtype != b.dtype), ("shapes", a.shape != b.shape)) if differs]
    return " and ".join(parts) or "types"


def _single(tree: Any) -> Any:
    """The in-tree of a one-argument function whose argument has structure ``tree``."""
    from fungraph.tree_util import PyTreeDef

    return PyTreeDef(tuple, None, (tree,))


def _check_unroll(unroll: Any, what: str) -> None:
    """``unroll`` only tunes XLA's loop code, so fungraph takes and checks it as JAX does, then
    ignores it."""
    if isinstance(unroll, Tracer):
        raise TypeError(f"{what}: `unroll` expects a concrete `int` or `bool`, got {_describe(unroll)}")
    if unroll < 0:
        raise ValueError(f"{what}: `unroll` must be a `bool` or a non-negative `int`, got {unroll}")


def scan(f: Any, init: Any, xs: Any = None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1, _split_transpose: bool = False) -> tuple[Any, Any]:
    """``jax.lax.scan``: ``carry, y = f(carry, x)`` over the leading axis of ``xs``; returns
    the final carry and the stacked ``y``. The references ``f`` touches are threaded through as
    carries."""
    try:
        return _scan(f, init, xs, length, reverse, unroll)
    except RefsTouched as touched:
        refs = touched.refs

    def body(carry: Any, x: Any) -> Any:
        bind_refs(refs, carry[1])
        out = f(carry[0], x)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(f"scan body must return a pair (carry, y), got {type(out).__name__}")
        return (out[0], [r.read() for r in refs]), out[1]

    (out, values), ys = _scan(body, (init, [r.read() for r in refs]), xs, length, reverse, unroll)
    _set_refs(refs, values)
    return out, ys


def _scan(f: Any, init: Any, xs: Any, length: int | None, reverse: bool, unroll: int | bool) -> tuple[Any, Any]:
    from fungraph.primitives.scan import scan_p
    from fungraph.tree_util import PyTreeDef, tree_unflatten

    _check_unroll(unroll, "scan")
    c_leaves, c_tree, c_avals, c_weak = _leaves(init)
    x_leaves, x_tree, x_avals, x_weak = _leaves(xs)
    lengths = {a.shape[0] for a in x_avals if a.shape}
    if any(not a.shape for a in x_avals):
        raise ValueError("scan: every xs leaf needs a leading axis to scan over")
    if length is None:
        if len(lengths) != 1:
            raise ValueError(f"scan: xs leaves have different leading sizes {sorted(lengths)} (or none; pass length)")
        length = lengths.pop()
    elif lengths and lengths != {length}:
        raise ValueError(f"scan: length={length} but xs have leading sizes {sorted(lengths)}")
    slice_avals = [ShapedArray(a.shape[1:], a.dtype, a.vma) for a in x_avals]  # vma: the mesh axes it varies over
    in_tree = PyTreeDef(tuple, None, (c_tree, x_tree))
    graph, closure, out_tree, out_weak = _stage_fn(f, in_tree, c_avals + slice_avals, "scan body", c_weak + x_weak)
    nc = len(c_leaves)
    while out_tree.node_type in (tuple, list) and (
            _grow_carries(c_leaves, c_avals, graph.out_avals[:nc])
            or _promote_weak_carries(c_leaves, c_avals, c_weak, graph.out_avals[:nc], out_weak)):
        graph, closure, out_tree, out_weak = _stage_fn(f, in_tree, c_avals + slice_avals, "scan body",
                                                       c_weak + x_weak)
    if out_tree.node_type not in (tuple, list) or len(out_tree.children) != 2:
        raise TypeError(f"scan body must return a pair (carry, y), got {out_tree}")
    carry_tree, y_tree = out_tree.children
    nc = len(c_leaves)
    if carry_tree != c_tree or graph.out_avals[:nc] != tuple(c_avals):
        raise _carry_error("scan body (or fori_loop body_fun)", c_tree, c_avals, carry_tree, graph.out_avals[:nc])
    outs = scan_p.bind(*c_leaves, *x_leaves, *closure, body=graph, length=int(length), reverse=bool(reverse),
                       num_carry=nc, num_xs=len(x_leaves))
    outs = weak_outputs(outs, out_weak)
    return tree_unflatten(carry_tree, outs[:nc]), tree_unflatten(y_tree, outs[nc:])


def fori_loop(lower: Any, upper: Any, body_fun: Any, init_val: Any, *, unroll: int | bool | None = None) -> Any:
    """``for i in range(lower, upper): val = body_fun(i, val)``: a ``scan`` when the bounds are
    concrete (so reverse mode is pure IR), a ``while_loop`` otherwise."""
    if unroll is not None:
        _check_unroll(unroll, "fori_loop")
    if not isinstance(lower, Tracer) and not isinstance(upper, Tracer):
        lo, hi = int(lower), int(upper)
        # JAX's index is weakly typed when both bounds are Python ints: ``c + i * 0.1`` keeps c's dtype
        weak_index = dtypes.is_weak(lower) and dtypes.is_weak(upper)
        one = 1 if weak_index else np.asarray(1, np.int64)

        def step(carry: Any, _: Any) -> Any:
            i, val = carry
            return (i + one, body_fun(i, val)), None

        start = lo if weak_index else np.asarray(lo, np.int64)
        (_, out), _ = scan(step, (start, init_val), None, length=builtins.max(hi - lo, 0))
        return out
    lo, hi = asarray(lower), asarray(upper)
    out = while_loop(lambda c: c[0] < c[1], lambda c: (c[0] + 1, c[1], body_fun(c[0], c[2])), (lo, hi, init_val))
    return out[2]


def map(f: Callable[[Any], Any], xs: Any, *, batch_size: int | None = None) -> Any:  # noqa: A001 - lax's name
    """``f`` applied to each slice of ``xs`` along its leading axis, as a ``scan``. With
    ``batch_size``, each scan step applies ``vmap(f)`` to ``batch_size`` slices, and the
    remaining ``n % batch_size`` slices go through one more ``vmap(f)`` after the scan;
    ``batch_size=0`` (or one above ``n``) is a single ``vmap``, as in JAX."""
    from fungraph.api import vmap
    from fungraph.tree_util import tree_flatten, tree_map, tree_unflatten

    if batch_size is None:
        _, ys = scan(lambda carry, x: (carry, f(x)), (), xs)
        return ys
    if int(batch_size) < 0:
        raise ValueError(f"lax.map: batch_size must be >= 0, got {batch_size}")
    leaves, tree = tree_flatten(xs)
    if not leaves:
        return map(f, xs)
    leaves = [asarray(x) for x in leaves]
    lengths = {aval_of(x).shape[0] if aval_of(x).shape else None for x in leaves}
    if len(lengths) != 1 or None in lengths:
        raise ShapeError(f"lax.map: every leaf of xs needs the same leading axis, got "
                         f"{[str(aval_of(x)) for x in leaves]}")
    n = lengths.pop()
    size = int(batch_size)
    batches = n // size if size else 0
    split = batches * size
    ys = None
    if batches:
        chunked = [sh.reshape(x[:split], (batches, size) + aval_of(x).shape[1:]) for x in leaves]
        _, stacked = scan(lambda carry, x: (carry, vmap(f)(x)), (), tree_unflatten(tree, chunked))
        ys = tree_map(lambda y: sh.reshape(y, (split,) + aval_of(y).shape[2:]), stacked)
    if ys is not None and split == n:
        return ys
    rest = vmap(f)(tree_unflatten(tree, [x[split:] for x in leaves]))
    if ys is None:
        return rest
    return tree_map(lambda a, b: sh.concatenate([a, b], 0), ys, rest)


def optimization_barrier(operand: Any) -> Any:
    """``operand`` (any pytree) unchanged, behind one ``optimization_barrier`` equation: CSE
    never merges a computation on its outputs with the same computation on its inputs (the
    barrier is removed after CSE; fungraph's other passes do not move work across values)."""
    from fungraph.primitives.barrier import optimization_barrier as barrier
    from fungraph.tree_util import tree_flatten, tree_unflatten

    leaves, tree = tree_flatten(operand)
    return tree_unflatten(tree, barrier([asarray(x) for x in leaves]))


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """``x`` (any pytree) unchanged: every fungraph array lives on one device, so each
    sharding (a ``SingleDeviceSharding``, ``NamedSharding`` or ``PartitionSpec``, or a pytree
    prefix of them) already holds. ``None`` is refused, as in JAX."""
    kinds = (NamedSharding, PartitionSpec, SingleDeviceSharding)
    given, _ = tree_util.tree_flatten(shardings, is_leaf=lambda s: s is None or isinstance(s, kinds))
    for s in given:
        if s is None or not isinstance(s, kinds):
            raise ValueError(f"One of with_sharding_constraint arguments got sharding {s!r} which is not allowed. "
                             "Please only pass `fungraph.sharding.Sharding` instances.")
    leaves, tree = tree_util.tree_flatten(x)
    return tree_util.tree_unflatten(tree, [_as_array(leaf) for leaf in leaves])


def _as_array(x: Any) -> Any:
    """``x`` as a fungraph array; a numpy input is copied (the result is immutable, the input stays
    the caller's)."""
    x = asarray(x)
    return hosted(np.array(x)) if type(x) is np.ndarray else x


def platform_dependent(*args: Any, default: Callable[..., Any] | None = None,
                       **per_platform: Callable[..., Any]) -> Any:
    """``per_platform[platform](*args)`` for the platform the computation runs on, else
    ``default(*args)`` (``jax.lax.platform_dependent``). Every fungraph backend is a CPU
    platform for this choice, so the ``cpu`` branch is the one taken."""
    for name, branch in per_platform.items():
        if not callable(branch):
            raise TypeError(f"lax.platform_dependent: the '{name}' branch must be a callable.")
        if name == "gpu":
            raise ValueError("Use 'cuda' or 'rocm' for lax.platform_dependent.")
    if default is not None and not callable(default):
        raise TypeError("lax.platform_dependent: the 'default' branch must be a callable.")
    chosen = per_platform.get("cpu", default)
    if chosen is None:
        raise ValueError(f"lax.platform_dependent: no branch for platform 'cpu' (branches: "
                         f"{', '.join(per_platform) or 'none'}) and no default")
    return chosen(*args)


def composite(decomposition: Callable[..., Any], name: str, version: int = 0) -> Callable[..., Any]:
    """``decomposition`` as a named composite operation (``jax.lax.composite``): positional
    arguments are its inputs, keyword arguments its static attributes. fungraph has no compiler
    that recognises composites by name, so calling it calls ``decomposition``."""
    if not isinstance(name, str):
        raise TypeError(f"lax.composite: name must be a string, got {name!r}")

    @functools.wraps(decomposition)
    def call(*args: Any, **kwargs: Any) -> Any:
        leaves = tree_util.tree_leaves(kwargs)
        if any(isinstance(v, Tracer) for v in leaves):
            raise UnexpectedTracerError(
                f"Found a traced value as an attribute in the decomposition for the composite op '{name}'. "
                "Values that aren't known at compile time must be passed as positional arguments to the composite; "
                "pass arrays attributes as numpy arrays.")
        return decomposition(*args, **kwargs)

    call.composite_name, call.composite_version = name, int(version)
    return call
