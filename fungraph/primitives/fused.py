"""Primitives the optimiser creates by fusion: ``fma`` and Owl's Adagrad update.

Each has all its rules here (numpy impl, shape rule, jvp), so an optimised graph can still
be evaluated, verified and differentiated like any other.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph.core import Primitive, register_lowering
from fungraph.ir import ShapedArray
from fungraph.primitives._batching import elementwise_batch
from fungraph.primitives._rules import aval, broadcast_shapes, require_float, require_same_dtype, transform
from fungraph.primitives.elementwise import add, div, mul, sqrt_p, sub
from fungraph.primitives.shape import broadcast_to


def _fma_aval(a: ShapedArray, b: ShapedArray, c: ShapedArray) -> ShapedArray:
    return ShapedArray(broadcast_shapes("fma", a, b, c), require_same_dtype("fma", a, b, c))


def _fma_impl(a: Any, b: Any, c: Any) -> np.ndarray:
    return np.add(np.multiply(a, b), c)


fma_p = Primitive("fma", impl=_fma_impl, abstract_eval=_fma_aval, arity=3, elementwise=True, inplace=(0, 1, 2))


@fma_p.def_jvp
def _fma_jvp(primals: tuple, tangents: tuple) -> tuple:
    a, b, c = primals
    ta, tb, tc = tangents
    terms = [t for t in (mul(ta, b) if ta is not None else None, mul(a, tb) if tb is not None else None, tc)
             if t is not None]
    t = terms[0]
    for extra in terms[1:]:
        t = add(t, extra)
    out = fma(a, b, c)

    return out, t if aval(t).shape == aval(out).shape else broadcast_to(t, aval(out).shape)


fma_p.batch = elementwise_batch(fma_p)


def fma(a: Any, b: Any, c: Any) -> Any:
    """``a * b + c`` in one operation."""
    return fma_p.bind(a, b, c)


def _adagrad_aval(w: ShapedArray, acc: ShapedArray, g: ShapedArray, lr: ShapedArray,
                  eps: ShapedArray) -> tuple[ShapedArray, ShapedArray]:
    require_float("adagrad", w)
    dtype = require_same_dtype("adagrad", w, acc, g, lr, eps)
    shape = broadcast_shapes("adagrad", w, acc, g, lr, eps)
    acc_shape = broadcast_shapes("adagrad", acc, g)
    return ShapedArray(shape, dtype), ShapedArray(acc_shape, dtype)


def _adagrad_impl(w: Any, acc: Any, g: Any, lr: Any, eps: Any) -> tuple[np.ndarray, np.ndarray]:
    new_acc = acc + g * g
    return w - lr * (g / np.sqrt(new_acc + eps)), new_acc


adagrad_p = Primitive("adagrad", impl=_adagrad_impl, abstract_eval=_adagrad_aval, arity=5, multiple_results=True,
                      elementwise=True, inplace=(0, 1))


@adagrad_p.def_jvp
def _adagrad_jvp(primals: tuple, tangents: tuple) -> tuple:
    return tuple(transform("jvp")(lambda *a: adagrad_reference(*a), primals, tangents, instantiate=False))


adagrad_p.batch = elementwise_batch(adagrad_p)


def adagrad_reference(w: Any, acc: Any, g: Any, lr: Any, eps: Any) -> tuple[Any, Any]:
    """Owl's Adagrad step written with ordinary primitives: the pattern the optimiser fuses."""
    new_acc = add(acc, mul(g, g))
    return sub(w, mul(lr, div(g, sqrt_p.bind(add(new_acc, eps))))), new_acc


def _fma_cpu(out: np.ndarray, a: Any, b: Any, c: Any) -> np.ndarray:
    """The CPU lowering: ``a * b`` into ``out``, then ``+ c`` in place (``a * b`` in a fresh
    array when ``out`` is ``c``'s buffer)."""
    if np.shares_memory(out, c):
        np.add(np.multiply(a, b), c, out=out)
        return out
    np.multiply(a, b, out=out)
    return np.add(out, c, out=out)


register_lowering(fma_p, "cpu", _fma_cpu)
