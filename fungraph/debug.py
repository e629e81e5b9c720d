"""Printing and host callbacks from inside staged functions, as ``jax.debug`` offers them.

``print`` and ``callback`` stage one effectful equation with no outputs: the optimiser never
removes, merges or folds it, and every engine runs it on the host with the values it is given,
in program order. Under ``grad`` it prints the primal values (the forward pass), under
``vmap`` once per example, under ``jit`` on every call (not once at trace time, as Python's
own ``print`` would).
"""

from __future__ import annotations

import builtins
import string
from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph._key_array import KeyArray
from fungraph.core import Primitive, as_operand
from fungraph.interpreters.staging import GraphTracer
from fungraph.primitives._batching import per_example
from fungraph.tree_util import tree_flatten, tree_map, tree_unflatten

__all__ = ["callback", "print"]


def _debug_impl(*args: Any, callback: Callable[..., Any]) -> tuple:
    callback(*[np.asarray(a) for a in args])
    return ()


def _debug_jvp(primals: tuple, tangents: tuple, *, callback: Callable[..., Any]) -> tuple:
    debug_callback_p.bind(*primals, callback=callback)
    return (), ()


def _debug_batch(args: Any, dims: Any, *, callback: Callable[..., Any]) -> tuple:
    """One call per example, in order (JAX unrolls its debug callbacks the same way)."""
    stacked, _, each = per_example(args, dims, callback)

    def run(*xs: Any) -> None:
        each(*xs)

    run.__name__ = getattr(callback, "__name__", "callback")
    debug_callback_p.bind(*stacked, callback=run)
    return (), ()


debug_callback_p = Primitive(
    "debug_callback", impl=_debug_impl, abstract_eval=lambda *avals, callback: (),
    multiple_results=True, effectful=True, jvp=_debug_jvp, batch=_debug_batch)


def callback(fun: Callable[..., Any], *args: Any, ordered: bool = False, **kwargs: Any) -> None:
    """Call ``fun(*args, **kwargs)`` on the host with the arrays' values whenever the staged
    function runs; ``args``/``kwargs`` are pytrees of arrays, ``fun``'s result is ignored.
    Callbacks always run in program order, so ``ordered`` (JAX's flag) changes nothing."""

    leaves, tree = tree_flatten((args, kwargs))

    def flat(*xs: Any) -> None:
        a, k = tree_unflatten(tree, list(xs))
        fun(*a, **k)

    flat.__name__ = getattr(fun, "__name__", "callback")
    debug_callback_p.bind(*[as_operand(x) for x in leaves], callback=flat)


def print(fmt: str, *args: Any, ordered: bool = False, **kwargs: Any) -> None:  # noqa: A001  (jax.debug.print's name)
    """``print(fmt.format(*args, **kwargs))`` with the values the arrays have when the staged
    function runs. ``fmt`` must be a format string: its fields are checked now, so a field
    with no argument fails at the call site rather than inside a compiled function."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(fmt) if f is not None]
    except ValueError as err:
        raise ValueError(f"debug.print: bad format string {fmt!r}: {err}") from None
    auto = sum(1 for f in fields if f == "")
    named = {f.split(".")[0].split("[")[0] for f in fields if f and not f[0].isdigit()}
    numbered = [int(f.split(".")[0].split("[")[0]) for f in fields if f and f[0].isdigit()]
    missing = sorted(n for n in named if n not in kwargs)
    if auto > len(args) or any(i >= len(args) for i in numbered) or missing:
        raise ValueError(f"debug.print: format string {fmt!r} needs {auto or len(set(numbered))} positional "
                         f"argument(s){' and ' + ', '.join(missing) if missing else ''}; got {len(args)} positional "
                         f"and {sorted(kwargs)} keyword")

    def show(*a: Any, **k: Any) -> None:
        builtins.print(fmt.format(*a, **k))

    if any(isinstance(leaf, GraphTracer) for leaf in tree_flatten((args, kwargs))[0]):
        args, kwargs = _key_words((args, kwargs))
    callback(show, *args, **kwargs)


def _key_words(tree: Any) -> Any:
    """``tree`` with each key array as its uint32 words: what JAX's ``debug.print`` shows of a key
    in a staged function (eagerly and per example under ``vmap`` it shows the key array)."""
    is_key = lambda x: isinstance(x, KeyArray)  # noqa: E731
    return tree_map(lambda x: x.words if is_key(x) else x, tree, is_leaf=is_key)
