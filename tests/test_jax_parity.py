"""JAX idioms that code moving over from ``jax.numpy`` relies on, checked against JAX (a test
dependency only): one-argument ``where`` with ``size``, ``clip(min=, max=)``, descending sorts,
``einsum`` with ``...``, repeated indices and several operands, callable scalar types and the
abstract dtype hierarchy, ``nondiff_argnums`` of the custom-derivative decorators, and
``make_jaxpr``."""

from __future__ import annotations

from functools import partial
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.testing import check_grads
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 5))


@pytest.mark.parametrize("size,fill", [(None, None), (4, None), (9, -1), (2, (7, 8))])
def test_one_argument_where_is_nonzero(size: int | None, fill: Any) -> None:
    want = jnp.where(X > 0, size=size, fill_value=fill)
    got = fnp.where(X > 0, size=size, fill_value=fill)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    if size is not None:
        jitted = fg.jit(lambda x: fnp.where(x > 0, size=size, fill_value=fill))(X)
        for g, w in zip(jitted, want):
            np.testing.assert_array_equal(g, w)


def test_where_argument_errors_name_the_form() -> None:
    with pytest.raises(ValueError, match="one argument .* or three"):
        fnp.where(X > 0, X)
    with pytest.raises(ValueError, match="only to the one-argument form"):
        fnp.where(X > 0, X, -X, size=3)
    with pytest.raises(fg.ConcretizationError, match="size="):
        fg.jit(lambda x: fnp.where(x > 0))(X)


@pytest.mark.parametrize("kw", [dict(min=-0.5), dict(max=0.25), dict(min=-0.5, max=0.25)])
def test_clip_takes_jax_keywords(kw: dict) -> None:
    np.testing.assert_array_equal(fnp.clip(X, **kw), jnp.clip(X, **kw))
    np.testing.assert_array_equal(fg.jit(lambda x: fnp.clip(x, **kw))(X), jnp.clip(X, **kw))
    np.testing.assert_array_equal(fnp.clip(X, kw.get("min"), kw.get("max")), jnp.clip(X, **kw))


def test_clip_bound_given_twice_is_an_error() -> None:
    with pytest.raises(TypeError, match="min given twice"):
        fnp.clip(X, 0.0, min=1.0)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_descending_sorts_match_jax(data: st.DataObject) -> None:
    shape = data.draw(st.sampled_from([(7,), (3, 6), (4, 2, 3)]))
    x = np.asarray(data.draw(st.lists(st.sampled_from([0.0, 1.0, 2.0, -1.0, np.nan]), min_size=int(np.prod(shape)),
                                      max_size=int(np.prod(shape)))), np.float64).reshape(shape)
    axis = data.draw(st.sampled_from([None, 0, -1]))
    for descending in (False, True):
        np.testing.assert_array_equal(fnp.argsort(x, axis=axis, descending=descending),
                                      jnp.argsort(x, axis=axis, descending=descending))
        np.testing.assert_array_equal(fnp.sort(x, axis=axis, descending=descending),
                                      jnp.sort(x, axis=axis, descending=descending))
    np.testing.assert_array_equal(fg.jit(lambda v: fnp.argsort(v, axis=axis, descending=True))(x),
                                  jnp.argsort(x, axis=axis, descending=True))


EINSUMS = [
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk", [(2, 3, 4), (1, 4, 5)]),
    ("...d,d->...", [(2, 3, 4), (4,)]),
    ("a...,a...->...", [(2, 3, 4), (2, 4)]),
    ("...,...->...", [(2, 1), (3,)]),
    ("bqd,bkd->bqk", [(2, 3, 4), (2, 5, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iij->j", [(3, 3, 2)]),
    ("iji->ij", [(3, 2, 3)]),
    ("ij,jk,kl->il", [(2, 30), (30, 40), (40, 3)]),
    ("ij,j,k->", [(3, 4), (4,), (5,)]),
    ("ab,ab,ab->", [(2, 3)] * 3),
    ("ijk,ikl,ilm->jm", [(2, 3, 4), (2, 4, 5), (2, 5, 6)]),
    ("i,i->i", [(1,), (5,)]),
    ("i,j->ij", [(2,), (3,)]),
]


@pytest.mark.parametrize("subscripts,shapes", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum_matches_numpy_and_jax(subscripts: str, shapes: list[tuple[int, ...]]) -> None:
    ops = [RNG.standard_normal(s) for s in shapes]
    want = np.einsum(subscripts, *ops)
    np.testing.assert_allclose(jnp.einsum(subscripts, *ops), want, rtol=1e-10, atol=1e-12)
    for optimize in ("auto", False, "greedy"):
        np.testing.assert_allclose(fnp.einsum(subscripts, *ops, optimize=optimize), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fg.jit(lambda *o: fnp.einsum(subscripts, *o))(*ops), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("subscripts,shapes", [EINSUMS[0], EINSUMS[6], EINSUMS[10], EINSUMS[13]],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_einsum_derivatives(subscripts: str, shapes: list[tuple[int, ...]]) -> None:
    ops = [RNG.standard_normal(s) * 0.5 for s in shapes]
    check_grads(lambda *o: fnp.einsum(subscripts, *o), ops, order=2)


def test_einsum_greedy_order_contracts_the_small_pair_first() -> None:
    a, b, v = RNG.standard_normal((40, 50)), RNG.standard_normal((50, 60)), RNG.standard_normal(60)
    graph = fg.make_graph(lambda a, b, v: fnp.einsum("ij,jk,k->i", a, b, v))(a, b, v)
    dots = [e.outputs[0].aval.shape for e in graph.eqns if e.primitive.name == "dot_general"]
    assert dots == [(50,), (40,)], str(graph)
    left = fg.make_graph(lambda a, b, v: fnp.einsum("ij,jk,k->i", a, b, v, optimize=False))(a, b, v)
    first = next(e for e in left.eqns if e.primitive.name == "dot_general")
    assert first.outputs[0].aval.shape == (40, 60)


def test_einsum_keywords_and_errors() -> None:
    a = RNG.integers(-3, 4, (3, 4)).astype(np.int32)
    got = fnp.einsum("ij,jk->ik", a, a.T, preferred_element_type=fnp.float64)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, a.astype(np.float64) @ a.T)
    np.testing.assert_array_equal(fnp.einsum("ij,jk->ik", a, a.T, precision="highest"), a @ a.T)
    with pytest.raises(fg.ShapeError, match="index 'j' has sizes 4 and 3"):
        fnp.einsum("ij,jk->ik", a, a)
    with pytest.raises(fg.ShapeError, match="repeats in 'ii' over axes of sizes 3 and 4"):
        fnp.einsum("ii->i", a)
    with pytest.raises(ValueError, match="output index 'z'"):
        fnp.einsum("ij->z", a)
    with pytest.raises(ValueError, match="only letters"):
        fnp.einsum("i1,j->ij", a[0], a[0])
    with pytest.raises(TypeError, match="out="):
        fnp.einsum("ij->ji", a, out=np.empty((4, 3)))


def test_scalar_types_are_callable_dtypes() -> None:
    assert fnp.float32(3).dtype == np.float32 and float(fnp.float32(3)) == 3.0
    assert np.asarray(fnp.int32([1.7, -2.2])).tolist() == np.asarray(jnp.int32(np.array([1.7, -2.2]))).tolist()
    assert fnp.zeros(2, fnp.float32).dtype == np.float32 and fnp.ones(2, dtype=fnp.int64).dtype == np.int64
    assert X.astype(fnp.float32).dtype == fnp.float32 and fnp.float32 == np.dtype("float32")
    assert fnp.dtype(fnp.complex64) == np.complex64 and fnp.finfo(fnp.float32).eps == np.finfo(np.float32).eps
    assert fg.jit(lambda x: fnp.float32(x) * 2)(X).dtype == np.float32
    assert fg.grad(lambda x: fnp.sum(fnp.float32(x) ** 2))(np.float32(1.5)) == 3.0
    assert isinstance(np.float32(1), fnp.float32) and not isinstance(np.float64(1), fnp.float32)
    for t in ("float32", "int32", "bool_", "complex128"):
        for abstract in ("floating", "integer", "inexact", "number", "complexfloating", "signedinteger", "generic"):
            assert fnp.issubdtype(getattr(fnp, t), getattr(fnp, abstract)) == \
                jnp.issubdtype(getattr(jnp, t), getattr(jnp, abstract)), (t, abstract)


def _custom_rules(lib: Any, np_: Any) -> Any:
    """A loss with a custom_vjp taking a function as its nondiff argument and a custom_jvp
    taking a Python float, written once for either library."""

    @partial(lib.custom_vjp, nondiff_argnums=(0,))
    def apply(f: Any, x: Any, y: Any) -> Any:
        return f(x) * y

    def fwd(f: Any, x: Any, y: Any) -> Any:
        return apply(f, x, y), (x, y)

    def bwd(f: Any, res: Any, g: Any) -> Any:
        x, y = res
        return g * y * 2.0, g * f(x)

    apply.defvjp(fwd, bwd)

    @partial(lib.custom_jvp, nondiff_argnames=("scale",))
    def scaled_sin(x: Any, scale: float) -> Any:
        return np_.sin(x) * scale

    @scaled_sin.defjvp
    def scaled_sin_jvp(scale: float, primals: Any, tangents: Any) -> Any:
        (x,), (t,) = primals, tangents
        return scaled_sin(x, scale), t * scale * 3.0

    return lambda x, y: np_.sum(apply(np_.tanh, x, y)) + np_.sum(scaled_sin(x * 3.0, 0.5))


def test_nondiff_argnums_match_jax() -> None:
    x, y = np.linspace(-1, 1, 5), np.linspace(2, 3, 5)
    want = jax.grad(_custom_rules(jax, jnp), argnums=(0, 1))(x, y)
    loss = _custom_rules(fg, fnp)
    for got in (fg.grad(loss, argnums=(0, 1))(x, y), fg.jit(fg.grad(loss, argnums=(0, 1)))(x, y)):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    np.testing.assert_allclose(loss(x, y), _custom_rules(jax, jnp)(x, y), rtol=1e-12)
    batched = fg.vmap(fg.grad(loss))(np.stack([x, -x]), np.stack([y, y]))
    np.testing.assert_allclose(batched[0], want[0], rtol=1e-12)


def test_nondiff_argnums_errors() -> None:
    f = fg.custom_vjp(lambda f, x: f(x), nondiff_argnums=(2,))
    f.defvjp(lambda f, x: (f(x), x), lambda f, r, g: (g,))
    with pytest.raises(TypeError, match="nondiff_argnums .* name argument 2"):
        f(fnp.sin, 1.0)
    with pytest.raises(ValueError, match="nondiff_argnames names 'nope'"):
        fg.custom_jvp(lambda x: x, nondiff_argnames=("nope",))


def test_make_jaxpr_is_make_graph() -> None:
    graph = fg.make_jaxpr(lambda x: fnp.sin(x) * 2)(X)
    assert isinstance(graph, fg.Graph)
    assert [e.primitive.name for e in graph.eqns] == ["sin", "mul"]


def test_linear_transpose_matches_jax() -> None:
    a = RNG.standard_normal((3, 4))
    primals = (np.ones(4), np.ones(5))
    ct = (np.arange(3.0), 2.0)
    got = fg.linear_transpose(lambda x, y: (a @ x + 2 * y[:3], fnp.sum(x)), *primals)(ct)
    want = jax.linear_transpose(lambda x, y: (jnp.asarray(a) @ x + 2 * y[:3], jnp.sum(x)), *primals)(ct)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    shapes = (fg.ShapeDtypeStruct((4,), np.float64), fg.ShapeDtypeStruct((5,), np.float64))
    again = fg.jit(lambda c: fg.linear_transpose(lambda x, y: (a @ x + 2 * y[:3], fnp.sum(x)), *shapes)((c, 2.0)))
    for g, w in zip(again(np.arange(3.0)), want):
        np.testing.assert_allclose(g, w, rtol=1e-12)


@pytest.mark.parametrize("fun,match", [(fnp.sin, "not linear in its inputs .cannot transpose `sin`"),
                                       (lambda x: x * x, "not linear in its inputs")])
def test_linear_transpose_refuses_nonlinear_functions(fun: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        fg.linear_transpose(fun, np.ones(3))(np.ones(3))
    with pytest.raises(ValueError, match=r"cotangent of shape \(4,\) for an output f64\[3\]"):
        fg.linear_transpose(lambda x: x, np.ones(3))(np.ones(4))


@pytest.mark.parametrize("name,args", [("dot", ((3, 4), (4, 2))), ("matmul", ((2, 3, 4), (4, 5))),
                                       ("inner", ((3, 4), (2, 4))), ("vdot", ((3, 4), (3, 4))),
                                       ("tensordot", ((3, 4), (3, 4)))])
def test_products_take_precision_and_preferred_element_type(name: str, args: tuple) -> None:
    ops = [RNG.integers(-4, 5, s).astype(np.int32) for s in args]
    for precision in (None, "highest", ("high", "default"), jax.lax.Precision.HIGHEST):
        got = getattr(fnp, name)(*ops, precision=precision, preferred_element_type=fnp.float32)
        want = getattr(jnp, name)(*ops, precision=precision, preferred_element_type=jnp.float32)
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_array_equal(got, want)
    with pytest.raises(TypeError, match=f"{name}: precision='hihgest' is not one of"):
        getattr(fnp, name)(*ops, precision="hihgest")


def test_linear_transpose_of_a_function_computing_on_constants() -> None:
    """Work on values that do not depend on the inputs (here ``sin`` of a constant) is
    evaluated once, as the residuals of the transpose; an output that does not depend on the
    inputs gets no cotangent."""
    got = fg.linear_transpose(lambda x: (x * fnp.sin(np.ones(3)), fnp.cos(np.ones(2))), np.ones(3))
    np.testing.assert_allclose(got((np.arange(3.0), np.ones(2)))[0], np.arange(3.0) * np.sin(1.0), rtol=1e-15)
