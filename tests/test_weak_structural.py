"""Weak types beyond one elementwise function, against JAX's in both dtype modes: the outputs of
``jit``, derivatives at Python scalars, loop carries started from Python scalars, ``cond``, and
the structural and creation functions (``where``, ``full``, ``reshape``, ``stack``, indexing,
``.at``, ...). Each case checks the result's dtype and weak flag, and the consequence: the dtype
of the result times a 0-d float32 array (x64) or float16 array (32-bit mode)."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

#: the namespace a case uses: ``m.np``, ``m.lax``, ``m.jit``, ``m.grad``, ``m.vg`` (value_and_grad), ...
JAX = types.SimpleNamespace(np=jnp, lax=jax.lax, jit=jax.jit, grad=jax.grad, vg=jax.value_and_grad,
                            jvp=jax.jvp, vjp=jax.vjp, jacfwd=jax.jacfwd, jacrev=jax.jacrev, hessian=jax.hessian,
                            vmap=jax.vmap, custom_jvp=jax.custom_jvp, checkpoint=jax.checkpoint)
FG = types.SimpleNamespace(np=fnp, lax=fg.lax, jit=fg.jit, grad=fg.grad, vg=fg.value_and_grad,
                           jvp=fg.jvp, vjp=fg.vjp, jacfwd=fg.jacfwd, jacrev=fg.jacrev, hessian=fg.hessian,
                           vmap=fg.vmap, custom_jvp=fg.custom_jvp, checkpoint=fg.checkpoint)


def _w(m: Any) -> Any:
    """A weak 0-d array: ``asarray`` of a Python float."""
    return m.np.asarray(1.5)


def _bw(m: Any) -> Any:
    """A weak array of shape (3,)."""
    return m.np.broadcast_to(_w(m), (3,))


def _doubled(m: Any) -> Any:
    """``x * 2`` as a ``custom_jvp`` function."""
    f = m.custom_jvp(lambda x: x * 2)
    f.defjvp(lambda primals, tangents: (primals[0] * 2, tangents[0] * 2))
    return f


CASES: dict[str, Callable[[Any], Any]] = {
    # jit outputs
    "jit(lambda: 1.0)()": lambda m: m.jit(lambda: 1.0)(),
    "jit(lambda: 1)()": lambda m: m.jit(lambda: 1)(),
    "jit(x * 2)(2.0)": lambda m: m.jit(lambda x: x * 2)(2.0),
    "jit(identity)(2.0)": lambda m: m.jit(lambda x: x)(2.0),
    "jit(identity)(2)": lambda m: m.jit(lambda x: x)(2),
    "jit(identity)(float32)": lambda m: m.jit(lambda x: x)(np.float32(2)),
    "jit(identity)(weak array)": lambda m: m.jit(lambda x: x)(_w(m)),
    "jit pair, weak first": lambda m: m.jit(lambda x, y: (x * 2, y))(2.0, np.ones(2, np.float32))[0],
    "jit pair, strong second": lambda m: m.jit(lambda x, y: (x * 2, y))(2.0, np.ones(2, np.float32))[1],
    "jit(x.sum())(2.0)": lambda m: m.jit(lambda x: x.sum())(2.0),
    "jit(x * float32)(2.0)": lambda m: m.jit(lambda x: x * np.float32(2))(2.0),
    "jit inside jit": lambda m: m.jit(lambda x: m.jit(lambda y: y * 3)(x) + 0)(2.0),
    "jit(grad)(2.0)": lambda m: m.jit(m.grad(lambda x: x * x))(2.0),
    "jit(reshape)(2.0)": lambda m: m.jit(lambda x: m.np.reshape(x, (1,)))(2.0),
    # derivatives at Python scalars
    "grad(x * x)(1.0)": lambda m: m.grad(lambda x: x * x)(1.0),
    "grad(sin)(1.0)": lambda m: m.grad(lambda x: m.np.sin(x))(1.0),
    "grad(x * x)(float32)": lambda m: m.grad(lambda x: x * x)(np.float32(1)),
    "grad(x * float32)(1.0)": lambda m: m.grad(lambda x: x * np.float32(2))(1.0),
    "value_and_grad value": lambda m: m.vg(lambda x: x * x)(1.0)[0],
    "value_and_grad grad": lambda m: m.vg(lambda x: x * x)(1.0)[1],
    "jvp primal": lambda m: m.jvp(lambda x: x * x, (1.0,), (1.0,))[0],
    "jvp tangent": lambda m: m.jvp(lambda x: x * x, (1.0,), (1.0,))[1],
    "vjp primal": lambda m: m.vjp(lambda x: x * x, 1.0)[0],
    "vjp cotangent": lambda m: m.vjp(lambda x: x * x, 1.0)[1](1.0)[0],
    "jvp of a constant": lambda m: m.jvp(lambda x: 2.0, (1.0,), (1.0,))[1],
    "jacfwd(1.0)": lambda m: m.jacfwd(lambda x: x ** 3)(1.0),
    "jacrev(1.0)": lambda m: m.jacrev(lambda x: x ** 3)(1.0),
    "hessian(1.0)": lambda m: m.hessian(lambda x: x ** 3)(1.0),
    "jacfwd(x * float32)(1.0)": lambda m: m.jacfwd(lambda x: x * np.float32(2))(1.0),
    "jacrev(x * float32)(1.0)": lambda m: m.jacrev(lambda x: x * np.float32(2))(1.0),
    "grad(grad)(1.0)": lambda m: m.grad(m.grad(lambda x: x ** 3))(1.0),
    "vmap(x * 2.)(weak array)": lambda m: m.vmap(lambda x: x * 2.0)(_bw(m)),
    "vmap(x * 2.)(float32)": lambda m: m.vmap(lambda x: x * 2.0)(np.ones(3, np.float32)),
    "custom_jvp(x * 2)(w)": lambda m: _doubled(m)(_w(m)),
    "jit(custom_jvp)(1.0)": lambda m: m.jit(_doubled(m))(1.0),
    "checkpoint(x * 2)(1.0)": lambda m: m.checkpoint(lambda x: x * 2)(1.0),
    # control flow
    "fori_loop(c * 2, 1.0)": lambda m: m.lax.fori_loop(0, 3, lambda i, c: c * 2, 1.0),
    "fori_loop(c + i, 0)": lambda m: m.lax.fori_loop(0, 3, lambda i, c: c + i, 0),
    "fori_loop index": lambda m: m.lax.fori_loop(0, 3, lambda i, c: i, 0),
    "fori_loop(c * float32, 1.0)": lambda m: m.lax.fori_loop(0, 3, lambda i, c: c * np.float32(2), 1.0),
    "fori_loop(c + 0.5, 0)": lambda m: m.lax.fori_loop(0, 3, lambda i, c: c + 0.5, 0),
    "fori_loop(c * 2., float32)": lambda m: m.lax.fori_loop(0, 3, lambda i, c: c * 2.0, np.float32(1)),
    "fori_loop, traced bounds": lambda m: m.jit(lambda n: m.lax.fori_loop(0, n, lambda i, c: c * 2, 1.0))(3),
    "while_loop(c * 2, 1.0)": lambda m: m.lax.while_loop(lambda c: c < 10, lambda c: c * 2, 1.0),
    "while_loop(c + 0.5, 1)": lambda m: m.lax.while_loop(lambda c: c < 10, lambda c: c + 0.5, 1),
    "scan carry": lambda m: m.lax.scan(lambda c, x: (c * 2, c), 1.0, None, length=3)[0],
    "scan ys": lambda m: m.lax.scan(lambda c, x: (c * 2, c), 1.0, None, length=3)[1],
    "scan strong ys": lambda m: m.lax.scan(lambda c, x: (c * 2, c * np.float32(1)), 1.0, None, length=2)[1],
    "scan tuple carry": lambda m: m.lax.scan(lambda c, x: ((c[0] + 1, c[1] * 2), None), (0, 1.0), None,
                                             length=2)[0][1],
    "cond(weak, weak)": lambda m: m.lax.cond(True, lambda x: x * 2, lambda x: x, 1.0),
    "cond(weak, float32)": lambda m: m.lax.cond(True, lambda x: x, lambda x: x * np.float32(1), np.float32(1)),
    "cond of constants": lambda m: m.lax.cond(True, lambda: 1.0, lambda: 2.0),
    "switch": lambda m: m.lax.switch(0, [lambda x: x, lambda x: x + 1], 1.0),
    # structural and creation functions
    "where(True, 1., 2.)": lambda m: m.np.where(True, 1.0, 2.0),
    "where(mask, 1., 2.)": lambda m: m.np.where(np.array([True, False]), 1.0, 2.0),
    "where(True, w, 2.)": lambda m: m.np.where(True, _w(m), 2.0),
    "where(True, float32, 2.)": lambda m: m.np.where(True, np.float32(1), 2.0),
    "full((), 1.)": lambda m: m.np.full((), 1.0),
    "full((2,), w)": lambda m: m.np.full((2,), _w(m)),
    "full((2,), 1., float32)": lambda m: m.np.full((2,), 1.0, np.float32),
    "full_like(float32, 1.)": lambda m: m.np.full_like(np.ones(2, np.float32), 1.0),
    "full_like(w, 1.)": lambda m: m.np.full_like(_w(m), 1.0),
    "zeros_like(w)": lambda m: m.np.zeros_like(_w(m)),
    "ones_like(w)": lambda m: m.np.ones_like(_w(m)),
    "zeros_like(1.)": lambda m: m.np.zeros_like(1.0),
    "zeros_like(w, float32)": lambda m: m.np.zeros_like(_w(m), dtype=np.float32),
    "reshape(w)": lambda m: m.np.reshape(_w(m), (1,)),
    "w.reshape": lambda m: _w(m).reshape((1, 1)),
    "stack([w, w])": lambda m: m.np.stack([_w(m), _w(m)]),
    "stack([1., 2.])": lambda m: m.np.stack([1.0, 2.0]),
    "concatenate([w, w])": lambda m: m.np.concatenate([_w(m)[None], _w(m)[None]]),
    "broadcast_to(w)": lambda m: _bw(m),
    "broadcast_to(1.)": lambda m: m.np.broadcast_to(1.0, (3,)),
    "transpose(w)": lambda m: m.np.transpose(m.np.broadcast_to(_w(m), (2, 3))),
    "w[None]": lambda m: _w(m)[None],
    "bw[0]": lambda m: _bw(m)[0],
    "bw[1:]": lambda m: _bw(m)[1:],
    "clip(w, 0., 1.)": lambda m: m.np.clip(_w(m), 0.0, 1.0),
    "clip(1., 0., 0.5)": lambda m: m.np.clip(1.0, 0.0, 0.5),
    "lax.select": lambda m: m.lax.select(True, _w(m), m.np.asarray(2.0)),
    "sum(w)": lambda m: m.np.sum(_w(m)),
    "max(bw)": lambda m: m.np.max(_bw(m)),
    "asarray(1.)": lambda m: m.np.asarray(1.0),
    "asarray(1)": lambda m: m.np.asarray(1),
    "array(1.)": lambda m: m.np.array(1.0),
    "array(w)": lambda m: m.np.array(_w(m)),
    "asarray([1., 2.])": lambda m: m.np.asarray([1.0, 2.0]),
    "squeeze(w)": lambda m: m.np.squeeze(_w(m)[None]),
    "expand_dims(w)": lambda m: m.np.expand_dims(_w(m), 0),
    "ravel(w)": lambda m: m.np.ravel(_w(m)),
    "tile(w)": lambda m: m.np.tile(_w(m), 2),
    "repeat(w)": lambda m: m.np.repeat(_w(m), 2),
    "pad(w)": lambda m: m.np.pad(_w(m)[None], 1),
    "flip(w)": lambda m: m.np.flip(_w(m)[None]),
    "copy(w)": lambda m: m.np.copy(_w(m)),
    "sort(w)": lambda m: m.np.sort(_w(m)[None]),
    "lax.full": lambda m: m.lax.full((), 1.0),
    "lax.full_like(w)": lambda m: m.lax.full_like(_w(m), 2.0),
    "lax.broadcast": lambda m: m.lax.broadcast(_w(m), (2,)),
    "lax.reshape": lambda m: m.lax.reshape(_w(m), (1,)),
    "lax.dynamic_slice": lambda m: m.lax.dynamic_slice(_bw(m), (1,), (1,)),
    "bw.at[0].set(2.)": lambda m: _bw(m).at[0].set(2.0),
    "bw.at[0].add(float32)": lambda m: _bw(m).at[0].add(np.float32(2)),
    "float32.at[0].set(2.)": lambda m: m.np.asarray(np.ones(2, np.float32)).at[0].set(2.0),
    # reductions, products, cumulative and indexing primitives: weak when every operand is (JAX's
    # standard rule), while fungraph.numpy's reductions convert their operand strongly first
    "lax.reduce_sum(bw)": lambda m: m.lax.reduce_sum(_bw(m), (0,)),
    "lax.reduce_max(bw)": lambda m: m.lax.reduce_max(_bw(m), (0,)),
    "lax.reduce_min(bw)": lambda m: m.lax.reduce_min(_bw(m), (0,)),
    "lax.reduce_prod(bw)": lambda m: m.lax.reduce_prod(_bw(m), (0,)),
    "lax.reduce(bw, 0., add)": lambda m: m.lax.reduce(_bw(m), 0.0, m.lax.add, (0,)),
    "lax.reduce(bw, float32, add)": lambda m: m.lax.reduce(_bw(m), m.lax.convert_element_type(0, _bw(m).dtype),
                                                           m.lax.add, (0,)),
    "lax.reduce_window(bw, -inf, max)": lambda m: m.lax.reduce_window(_bw(m), -np.inf, m.lax.max, (2,), (1,),
                                                                      "VALID"),
    "lax.reduce_or(int)": lambda m: m.lax.reduce_or(m.np.broadcast_to(m.np.asarray(2), (3,)), (0,)),
    "lax.reduce_xor(int)": lambda m: m.lax.reduce_xor(m.np.broadcast_to(m.np.asarray(2), (3,)), (0,)),
    "lax.cumsum(bw)": lambda m: m.lax.cumsum(_bw(m)),
    "lax.cummax(bw)": lambda m: m.lax.cummax(_bw(m)),
    "cumsum(bw)": lambda m: m.np.cumsum(_bw(m)),
    "cumprod(bw)": lambda m: m.np.cumprod(_bw(m)),
    "argmax(bw)": lambda m: m.np.argmax(_bw(m)),
    "lax.argmax(bw)": lambda m: m.lax.argmax(_bw(m), 0, np.int32),
    "lax.dot_general(bw, bw)": lambda m: m.lax.dot_general(_bw(m), _bw(m), (((0,), (0,)), ((), ()))),
    "dot(bw, bw)": lambda m: m.np.dot(_bw(m), _bw(m)),
    "dot(bw, float32)": lambda m: m.np.dot(_bw(m), np.ones(3, np.float32)),
    "matmul(bw2, bw)": lambda m: m.np.matmul(m.np.broadcast_to(_w(m), (2, 3)), _bw(m)),
    "bw2 @ bw": lambda m: m.np.broadcast_to(_w(m), (2, 3)) @ _bw(m),
    "einsum(bw, bw)": lambda m: m.np.einsum("i,i->", _bw(m), _bw(m)),
    "lax.conv(w, w)": lambda m: m.lax.conv(m.np.broadcast_to(_w(m), (1, 1, 3, 3)),
                                           m.np.broadcast_to(_w(m), (1, 1, 2, 2)), (1, 1), "VALID"),
    "lax.convert_element_type(w)": lambda m: m.lax.convert_element_type(_w(m), _w(m).dtype),
    "lax.dynamic_update_slice(bw, bw)": lambda m: m.lax.dynamic_update_slice(_bw(m), _bw(m)[:1], (1,)),
    "lax.concatenate([bw, bw])": lambda m: m.lax.concatenate([_bw(m), _bw(m)], 0),
    "lax.pad(bw, 0.)": lambda m: m.lax.pad(_bw(m), 0.0, [(1, 1, 0)]),
    "lax.sort((bw, bw), 1)": lambda m: m.lax.sort((_bw(m), _bw(m)), num_keys=1)[1],
    "bw[index array]": lambda m: _bw(m)[np.array([0, 2])],
    "take(bw)": lambda m: m.np.take(_bw(m), np.array([0, 2])),
    "diag(bw)": lambda m: m.np.diag(_bw(m)),
    "tril(bw2)": lambda m: m.np.tril(m.np.broadcast_to(_w(m), (2, 3))),
    "triu(bw2)": lambda m: m.np.triu(m.np.broadcast_to(_w(m), (2, 3))),
    "round(bw)": lambda m: m.np.round(_bw(m)),
    "convolve(bw, bw)": lambda m: m.np.convolve(_bw(m), _bw(m)),
    "cross(bw, bw)": lambda m: m.np.cross(_bw(m), _bw(m)),
    "polyval(bw, 2.)": lambda m: m.np.polyval(_bw(m), 2.0),
    "lax.cumlogsumexp(bw)": lambda m: m.lax.cumlogsumexp(_bw(m)),
    "lax.reduce_precision(bw)": lambda m: m.lax.reduce_precision(_bw(m), 8, 7),
    "lax.population_count(int)": lambda m: m.lax.population_count(m.np.broadcast_to(m.np.asarray(5), (3,))),
    "dot(bw, bw, preferred float32)": lambda m: m.np.dot(_bw(m), _bw(m), preferred_element_type=np.float32),
    "lax.dot_general(bw, bw, preferred float32)": lambda m: m.lax.dot_general(
        _bw(m), _bw(m), (((0,), (0,)), ((), ())), preferred_element_type=np.float32),
    "jit(where)(1.0)": lambda m: m.jit(lambda x: m.np.where(x > 0, x, 0.0))(1.0),
    "jit(stack)(1.0)": lambda m: m.jit(lambda x: m.np.stack([x, x]))(1.0),
}


def _typed(x: Any) -> tuple[str, bool]:
    return str(x.dtype), bool(getattr(x, "weak_type", False))


def _run(m: Any, name: str, x64: bool) -> tuple[tuple[str, bool], str, Any]:
    """The case's (dtype, weak) and the dtype of the result times a 0-d narrower float array."""
    other = np.ones((), np.float32 if x64 else np.float16)
    out = CASES[name](m)
    return _typed(out), str((out * other).dtype), np.asarray(out, np.float64)


def _jax(name: str, x64: bool) -> tuple[tuple[str, bool], str, Any]:
    saved = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", x64)
    try:
        return _run(JAX, name, x64)
    finally:
        jax.config.update("jax_enable_x64", saved)


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
@pytest.mark.parametrize("name", list(CASES))
def test_weak_type_and_promotion_match_jax(name: str, x64: bool) -> None:
    typed, promoted, values = _jax(name, x64)
    with fg.enable_x64(x64):
        got_typed, got_promoted, got_values = _run(FG, name, x64)
    assert (got_typed, got_promoted) == (typed, promoted), \
        f"{name}: fungraph {got_typed} (times a narrower array: {got_promoted}), JAX {typed} ({promoted})"
    np.testing.assert_allclose(got_values, values, rtol=1e-6)


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_cached_jit_calls_keep_the_weak_outputs(x64: bool) -> None:
    """The cached dispatch (second and later calls, array and pytree arguments) marks the same
    outputs weak as the first call; a weak output is a view, so an input passed through and
    returned as a strong output elsewhere stays strong."""
    with fg.enable_x64(x64):
        f = fg.jit(lambda x, y: (x, y * 2.0, 3.0))
        a = np.ones(2, np.float32)
        for _ in range(3):
            x, y, c = f(a, a)
            assert not x.weak_type and not y.weak_type and c.weak_type
        g = fg.jit(lambda t: {"w": 1.0, "a": t["a"]})
        for _ in range(3):
            out = g({"a": a})
            assert out["w"].weak_type and not out["a"].weak_type
        h = fg.jit(lambda: (1.0, 1.0))
        one, two = h()
        assert one.weak_type and two.weak_type and one is not two


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_a_carry_the_body_widens_raises_as_in_jax(x64: bool) -> None:
    """A strongly typed carry whose body returns another dtype is JAX's ``TypeError``, naming
    the leaf, both types and that the dtypes do not match; a weak one is promoted instead."""
    body = lambda i, c: c + 0.5  # noqa: E731
    saved = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", x64)
    try:
        with pytest.raises(TypeError, match="the dtypes do not match"):
            jax.lax.fori_loop(0, 3, body, jnp.int32(0))
    finally:
        jax.config.update("jax_enable_x64", saved)
    with fg.enable_x64(x64):
        with pytest.raises(TypeError, match=r"carry input and carry output must have equal types, but they differ: "
                                            r"the input carry leaf 1 has type i32\[\] but the corresponding output "
                                            r"carry component has type f\d\d\[\], so the dtypes do not match") as info:
            fg.lax.fori_loop(0, 3, body, np.int32(0))
        assert "test_weak_structural.py" in str(info.value)
        with pytest.raises(TypeError, match="so the dtypes do not match"):
            fg.lax.while_loop(lambda c: c < 3, lambda c: c + 0.5, np.int32(0))
