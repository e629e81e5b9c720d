"""Opaque host callbacks (Owl's ``Delay``) and ``stop_gradient``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph._key_array import KeyArray
from fungraph.core import Primitive
from fungraph.ir import ShapedArray, aval_of
from fungraph.primitives._batching import batch_size, broadcast_batch, per_example

# The vmap methods whose callback takes the whole batch at once (JAX's names).
_VECTORIZED = ("expand_dims", "broadcast_all", "legacy_vectorized")


def _callback_impl(*args: Any, callback: Callable[..., Any], result_avals: tuple[ShapedArray, ...],
                   vmap_method: str | None = None) -> tuple:
    outs = callback(*args)
    if outs is None and not result_avals:
        return ()
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    if len(outs) != len(result_avals):
        raise TypeError(f"pure_callback {getattr(callback, '__name__', callback)} returned {len(outs)} results, "
                        f"expected {len(result_avals)}")
    result = []
    for o, a in zip(outs, result_avals):
        arr = np.asarray(o)
        if aval_of(arr).shape != a.shape:
            raise TypeError(f"pure_callback {getattr(callback, '__name__', callback)} returned shape "
                            f"{arr.shape}, declared {a}")
        result.append(arr.astype(a.dtype, copy=False))
    return tuple(result)


def _callback_jvp(primals: tuple, tangents: tuple, **params: Any) -> tuple:
    name = getattr(params["callback"], "__name__", "callback")
    raise TypeError(f"pure_callback `{name}` is opaque to differentiation; wrap it with fungraph.custom_jvp "
                    "or fungraph.custom_vjp to give it a derivative")


pure_callback_p = Primitive(
    "pure_callback", impl=_callback_impl,
    abstract_eval=lambda *avals, callback, result_avals, vmap_method=None: result_avals,
    multiple_results=True, jvp=_callback_jvp)

stop_gradient_p = Primitive("stop_gradient", impl=lambda x: np.array(x, copy=True),
                            abstract_eval=lambda x: x, arity=1, weak_from=(0,),
                            jvp=lambda primals, tangents: (stop_gradient(primals[0]), None))


def _callback_batch(args: Any, dims: Any, *, callback: Any, result_avals: tuple,
                    vmap_method: str | None = None) -> tuple:
    """The host function is called once per example, on the host (named in docs/vmap.md), or
    once on the whole batch when ``vmap_method`` says it takes batched arguments; without a
    ``vmap_method`` JAX's ``NotImplementedError``."""
    if vmap_method is None:
        raise NotImplementedError(
            "vmap is only supported for the pure_callback primitive when vmap_method is one of 'sequential', "
            "'sequential_unrolled', 'expand_dims', 'broadcast_all', or 'legacy_vectorized'. Got vmap_method=None.")
    size = batch_size(args, dims)
    batched = tuple(ShapedArray((size,) + a.shape, a.dtype) for a in result_avals)
    if vmap_method in _VECTORIZED:
        unbatched_size = size if vmap_method == "broadcast_all" else 1
        stacked = [broadcast_batch(a, d, size if d is not None else unbatched_size) for a, d in zip(args, dims)]
        return pure_callback_p.bind(*stacked, callback=callback, result_avals=batched,
                                    vmap_method=vmap_method), [0] * len(result_avals)
    stacked, run = _per_example_callback(args, dims, callback, len(result_avals))
    return pure_callback_p.bind(*stacked, callback=run, result_avals=batched,
                                vmap_method=vmap_method), [0] * len(result_avals)


def _per_example_callback(args: Any, dims: Any, callback: Any, n_results: int) -> tuple[list[Any], Any]:
    """The batched operands and a host function calling ``callback`` once per example, in
    order, its results stacked."""
    stacked, _, each = per_example(args, dims, callback)

    def run(*xs: Any) -> tuple:
        results = [() if r is None and not n_results else r if isinstance(r, (tuple, list)) else (r,)
                   for r in each(*xs)]
        return tuple(np.stack([np.asarray(r[k]) for r in results]) for k in range(n_results))

    run.__name__ = f"vmap({getattr(callback, '__name__', 'callback')})"
    return stacked, run


pure_callback_p.batch = _callback_batch


def _io_callback_jvp(primals: tuple, tangents: tuple, **params: Any) -> tuple:
    raise ValueError("IO callbacks do not support JVP.")


def _io_callback_batch(args: Any, dims: Any, *, callback: Any, result_avals: tuple, ordered: bool) -> tuple:
    """Once per example, in order, as JAX's unordered ``io_callback``; an ordered one refuses
    ``vmap`` (the order of its examples' effects is not defined)."""
    if ordered:
        raise ValueError("Cannot `vmap` ordered IO callback.")
    size = batch_size(args, dims)
    batched = tuple(ShapedArray((size,) + a.shape, a.dtype) for a in result_avals)
    stacked, run = _per_example_callback(args, dims, callback, len(result_avals))
    return io_callback_p.bind(*stacked, callback=run, result_avals=batched, ordered=False), [0] * len(result_avals)


def _io_callback_impl(*args: Any, callback: Callable[..., Any], result_avals: tuple[ShapedArray, ...],
                      ordered: bool) -> tuple:
    return _callback_impl(*args, callback=callback, result_avals=result_avals)


#: ``jax.experimental.io_callback``: a host function with side effects, so every pass keeps the
#: equation (``effectful``) and runs it as often as the program says, in program order.
io_callback_p = Primitive(
    "io_callback", impl=_io_callback_impl, abstract_eval=lambda *avals, callback, result_avals, ordered: result_avals,
    multiple_results=True, effectful=True, jvp=_io_callback_jvp, batch=_io_callback_batch)
stop_gradient_p.batch = lambda args, dims: (stop_gradient(args[0]), dims[0])


def stop_gradient(x: Any) -> Any:
    if isinstance(x, KeyArray):
        return KeyArray(stop_gradient_p.bind(x.words), x.dtype)
    return stop_gradient_p.bind(x)
