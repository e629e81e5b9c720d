"""Transformations as JAX 0.10 applies them, with JAX as the oracle in both dtype modes: which
carries of a batched loop are batched, ``custom_jvp`` functions that close over values an inner
``vmap`` batches, and the dtypes ``cond``/``switch`` outputs and loop carries take."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

#: (fungraph, JAX) namespaces a case is written against: ``m.np``, ``m.lax``, ``m.vmap``, ...
FG = {"np": fnp, "lax": fg.lax, "vmap": fg.vmap, "jit": fg.jit, "grad": fg.grad, "jvp": fg.jvp,
      "jacfwd": fg.jacfwd, "jacrev": fg.jacrev, "custom_jvp": fg.custom_jvp, "custom_vjp": fg.custom_vjp}
JAX = {"np": jnp, "lax": jax.lax, "vmap": jax.vmap, "jit": jax.jit, "grad": jax.grad, "jvp": jax.jvp,
       "jacfwd": jax.jacfwd, "jacrev": jax.jacrev, "custom_jvp": jax.custom_jvp, "custom_vjp": jax.custom_vjp}


class _NS:
    def __init__(self, names: dict[str, Any]) -> None:
        self.__dict__.update(names)


F, J = _NS(FG), _NS(JAX)


@pytest.fixture(params=[False, True], ids=["x32", "x64"])
def x64(request: pytest.FixtureRequest) -> Iterator[bool]:
    with fg.enable_x64(request.param), jax.enable_x64(request.param):
        yield request.param


# --- batched loops: a carry the batch never reaches stays unbatched ----------------------------


def _fori_dynamic_slice(m: Any, traced_bounds: bool) -> Callable[..., Any]:
    """``fori_loop`` whose body indexes the mapped row with the counter (``dynamic_slice``)."""
    def f(x: Any, n: Any) -> Any:
        body = lambda i, c: c + m.lax.dynamic_slice(x, (i,), (1,))[0] * i  # noqa: E731
        return m.lax.fori_loop(0, n if traced_bounds else 3, body, 0.0)
    return f


def _scan_with_counter(m: Any) -> Callable[..., Any]:
    """``scan`` carrying an unbatched counter and a batched sum, emitting both."""
    def f(x: Any, n: Any) -> Any:
        def body(c: Any, t: Any) -> Any:
            i, s = c
            return (i + 1, s + t * i), (i * 2, s)
        return m.lax.scan(body, (0, 0.0), x)
    return f


def _while_counter(m: Any) -> Callable[..., Any]:
    """``while_loop`` whose predicate reads only the (unbatched) counter."""
    def f(x: Any, n: Any) -> Any:
        return m.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * x[0] + c[0]), (0, 1.0))
    return f


def _while_batched_predicate(m: Any) -> Callable[..., Any]:
    """``while_loop`` whose predicate depends on the batch: every carry is batched, as in JAX."""
    def f(x: Any, n: Any) -> Any:
        return m.lax.while_loop(lambda c: c[1] < x[0] * 10, lambda c: (c[0] + 1, c[1] * 2.0 + 1.0), (0, 1.0))
    return f


LOOPS = {
    "fori_loop, static bounds": lambda m: _fori_dynamic_slice(m, False),
    "fori_loop, traced bounds": lambda m: _fori_dynamic_slice(m, True),
    "scan with a counter": _scan_with_counter,
    "while_loop on a counter": _while_counter,
    "while_loop, batched predicate": _while_batched_predicate,
}


def _jax_loop_outputs(jaxpr: Any) -> list[tuple[int, ...]]:
    """The output shapes of the (one) loop equation in a jaxpr, nested jits included."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in ("scan", "while"):
            return [tuple(v.aval.shape) for v in eqn.outvars]
        for sub in eqn.params.values():
            inner = getattr(sub, "jaxpr", None)
            if inner is not None and hasattr(inner, "eqns"):
                found = _jax_loop_outputs(inner)
                if found:
                    return found
    return []


def _fg_loop_outputs(graph: Any) -> list[tuple[int, ...]]:
    loops = [e for e in graph.eqns if e.primitive.name in ("scan", "while")]
    assert len(loops) == 1, graph
    return [tuple(v.aval.shape) for v in loops[0].outputs]


@pytest.mark.parametrize("name", list(LOOPS))
def test_a_batched_loop_batches_the_carries_jax_does(name: str, x64: bool) -> None:
    """Under ``vmap`` a loop carry is batched only when the batch reaches it (JAX's fixpoint):
    the counter of a ``fori_loop``, ``scan`` or ``while_loop`` over batched data stays a scalar,
    and ``dynamic_slice`` by it stays a slice. The loop's output shapes in the staged graph are
    those of JAX's jaxpr, and the values JAX's."""
    xs = np.arange(12, dtype=np.float32).reshape(3, 4) / 4
    want = jax.vmap(LOOPS[name](J), (0, None))(xs, 3)
    got = fg.vmap(LOOPS[name](F), (0, None))(xs, 3)
    jax_shapes = _jax_loop_outputs(jax.make_jaxpr(jax.vmap(LOOPS[name](J), (0, None)))(xs, 3).jaxpr)
    fg_shapes = _fg_loop_outputs(fg.make_graph(fg.vmap(LOOPS[name](F), (0, None)))(xs, 3))
    assert fg_shapes == jax_shapes
    for g, w in zip(fg.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert (g.dtype, g.shape) == (w.dtype, w.shape)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
    jitted = fg.jit(fg.vmap(LOOPS[name](F), (0, None)))(xs, 3)
    for g, w in zip(fg.tree_util.tree_leaves(jitted), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def test_grad_of_a_batched_loop_with_an_unbatched_counter(x64: bool) -> None:
    """Reverse mode through the loop batched with its counter unbatched, against JAX."""
    xs = np.arange(12, dtype=np.float32).reshape(3, 4) / 4

    def loss(m: Any) -> Callable[..., Any]:
        return lambda x: m.vmap(_fori_dynamic_slice(m, False), (0, None))(x, 3).sum()

    np.testing.assert_allclose(np.asarray(fg.grad(loss(F))(xs)), np.asarray(jax.grad(loss(J))(xs)), rtol=1e-6)
    scan_loss = lambda m: lambda x: m.vmap(_scan_with_counter(m), (0, None))(x, 3)[0][1].sum()  # noqa: E731
    np.testing.assert_allclose(np.asarray(fg.grad(scan_loss(F))(xs)), np.asarray(jax.grad(scan_loss(J))(xs)),
                               rtol=1e-6)


# --- custom_jvp closing over values an inner vmap batches ------------------------------------


def _closing_custom_jvp(m: Any, calls: dict[str, int]) -> Callable[..., Any]:
    """``f(x, y)``: a ``custom_jvp`` function of ``x`` alone whose body and rule close over ``y``;
    the rule's tangent is twice the true one, so a result shows whether the rule was used."""
    def outer(x: Any, y: Any) -> Any:
        @m.custom_jvp
        def f(x: Any) -> Any:
            calls["body"] += 1
            return m.np.sin(x) * y

        @f.defjvp
        def f_jvp(primals: tuple, tangents: tuple) -> tuple:
            calls["rule"] += 1
            return f(primals[0]), 2.0 * m.np.cos(primals[0]) * y * tangents[0]

        return f(x)
    return outer


_XS = np.linspace(0.1, 1.0, 3).astype(np.float32)
_YS = np.linspace(1.0, 2.0, 3).astype(np.float32)

CLOSURES: dict[str, Callable[[Any, Callable[..., Any]], Any]] = {
    "grad(vmap(closure))": lambda m, f: m.grad(lambda x: m.vmap(lambda y: f(x, y))(_YS).sum())(0.5),
    "vmap(grad(closure))": lambda m, f: m.vmap(lambda y: m.grad(lambda x: f(x, y))(0.5))(_YS),
    "jit(vmap(grad))": lambda m, f: m.jit(m.vmap(lambda y: m.grad(lambda x: f(x, y))(0.5)))(_YS),
    "vmap(jvp)": lambda m, f: m.vmap(lambda y: m.jvp(lambda x: f(x, y), (0.5,), (1.0,))[1])(_YS),
    "jacfwd(vmap)": lambda m, f: m.jacfwd(lambda x: m.vmap(lambda y: f(x, y))(_YS))(0.5),
    "jacrev(vmap)": lambda m, f: m.jacrev(lambda x: m.vmap(lambda y: f(x, y))(_YS))(0.5),
    "grad(vmap(vmap))": lambda m, f: m.grad(
        lambda s: m.vmap(lambda y: m.vmap(lambda x: f(x * s, y))(_XS))(_YS).sum())(1.0),
    "vmap(vmap(grad))": lambda m, f: m.vmap(lambda y: m.vmap(lambda x: m.grad(lambda x: f(x, y))(x))(_XS))(_YS),
    "vmap alone": lambda m, f: m.vmap(lambda y: f(0.5, y) * y)(_YS),
    "jvp(vmap) of a batched argument": lambda m, f: m.jvp(
        lambda s: m.vmap(lambda x, y: f(x * s, y))(_XS, _YS), (1.0,), (1.0,))[1],
}


@pytest.mark.parametrize("name", list(CLOSURES))
def test_custom_jvp_closing_over_inner_vmap_values_uses_its_rule(name: str, x64: bool) -> None:
    """A ``custom_jvp`` function (and its rule) closing over a value an inner ``vmap`` batches:
    JAX batches the call where the value lives and differentiates it by the rule, with the
    closed-over value taken in as a batched argument. fungraph gives JAX's values and dtypes,
    and calls the function and its rule as often."""
    j_calls, f_calls = {"body": 0, "rule": 0}, {"body": 0, "rule": 0}
    want = CLOSURES[name](J, _closing_custom_jvp(J, j_calls))
    got = CLOSURES[name](F, _closing_custom_jvp(F, f_calls))
    assert (np.asarray(got).dtype, np.shape(got)) == (np.asarray(want).dtype, np.shape(want))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    assert f_calls == j_calls


def test_a_rule_closing_over_a_differentiated_value_is_refused_as_in_jax(x64: bool) -> None:
    """A closed-over value the outer differentiation traces (``y * x``) cannot be differentiated
    by the rule: JAX raises ``UnexpectedTracerError``, and so does fungraph (not a silent zero)."""
    def loss(m: Any) -> Callable[..., Any]:
        calls = {"body": 0, "rule": 0}
        return lambda x: m.vmap(lambda y: _closing_custom_jvp(m, calls)(x, y * x))(_YS).sum()

    with pytest.raises(jax.errors.UnexpectedTracerError):
        jax.grad(loss(J))(0.5)
    with pytest.raises(fg.errors.UnexpectedTracerError, match="closes over a value"):
        fg.grad(loss(F))(0.5)
    calls = {"body": 0, "rule": 0}
    with pytest.raises(jax.errors.UnexpectedTracerError):
        jax.grad(lambda x: _closing_custom_jvp(J, calls)(x, 2.0 * x))(0.5)
    with pytest.raises(fg.errors.UnexpectedTracerError, match="closes over a value"):  # not a RecursionError
        fg.grad(lambda x: _closing_custom_jvp(F, calls)(x, 2.0 * x))(0.5)


def test_a_batched_nondiff_argument_reaches_the_rule_as_in_jax(x64: bool) -> None:
    """A ``nondiff_argnums`` argument batched by the ``vmap`` inside ``grad``: JAX's rule gets it
    batched, and its derivative is the rule's."""
    def loss(m: Any) -> Callable[..., Any]:
        f = m.custom_jvp(lambda y, x: m.np.sin(x) * y, nondiff_argnums=(0,))
        f.defjvp(lambda y, primals, tangents: (f(y, primals[0]), 2.0 * m.np.cos(primals[0]) * y * tangents[0]))
        return lambda x: m.vmap(lambda y: f(y, x))(_YS).sum()

    want, got = jax.grad(loss(J))(0.5), fg.grad(loss(F))(0.5)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


# --- the types cond/switch outputs and loop carries take -----------------------------------

_F32 = np.float32(1.0)

BRANCHES: dict[str, Callable[[Any], Any]] = {
    "cond(py float, float32)": lambda m: m.lax.cond(True, lambda: 1.0, lambda: _F32),
    "cond(float32, py float)": lambda m: m.lax.cond(False, lambda: _F32, lambda: 1.0),
    "cond(py int, float32)": lambda m: m.lax.cond(True, lambda: 1, lambda: _F32),
    "cond(py int, py float)": lambda m: m.lax.cond(True, lambda: 1, lambda: 2.0),
    "cond(int32, float32)": lambda m: m.lax.cond(True, lambda: np.int32(1), lambda: _F32),
    "cond(float64, float32)": lambda m: m.lax.cond(True, lambda: np.float64(1), lambda: _F32),
    "cond(bool, py int)": lambda m: m.lax.cond(True, lambda: True, lambda: 1),
    "cond, shapes differ": lambda m: m.lax.cond(True, lambda: np.ones(2, np.float32), lambda: np.ones(3, np.float32)),
    "cond(x * 2., x)": lambda m: m.lax.cond(True, lambda x: x * 2.0, lambda x: x, np.ones(2, np.float32)),
    "cond(weak array, float32)": lambda m: m.lax.cond(True, lambda: m.np.asarray(1.0), lambda: _F32),
    "jit cond(py float, float32)": lambda m: m.jit(lambda p: m.lax.cond(p, lambda: 1.0, lambda: _F32))(True),
    "jit cond(x * 2., 3.)": lambda m: m.jit(lambda p, x: m.lax.cond(p, lambda: x * 2.0, lambda: 3.0))(True, _F32),
    "switch(py float, float32, py int)": lambda m: m.lax.switch(1, [lambda: 1.0, lambda: _F32, lambda: 2]),
    "switch(float32, py float)": lambda m: m.lax.switch(1, [lambda: _F32, lambda: 1.0]),
    "switch(py float, float32)": lambda m: m.lax.switch(0, [lambda: 1.0, lambda: _F32]),
    "jit switch": lambda m: m.jit(lambda i: m.lax.switch(i, [lambda: 1.0, lambda: _F32, lambda: 2]))(1),
    "vmap cond": lambda m: m.vmap(lambda p: m.lax.cond(p, lambda: 1.0, lambda: _F32))(np.array([True, False])),
    "grad cond": lambda m: m.grad(lambda x: m.lax.cond(True, lambda: x * 2.0, lambda: x * _F32))(1.0),
    "while_loop(weak carry, float32 body)": lambda m: m.lax.while_loop(lambda c: c < 3, lambda c: c + _F32, 0.0),
    "while_loop(py int carry, float body)": lambda m: m.lax.while_loop(lambda c: c < 3, lambda c: c + 1.5, 0),
    "while_loop(float16 carry, float32 body)": lambda m: m.lax.while_loop(lambda c: c < 3, lambda c: c + _F32,
                                                                          np.float16(0)),
    "scan(weak carry, float32 xs)": lambda m: m.lax.scan(lambda c, x: (c + x, c), 0.0, np.ones(3, np.float32))[0],
    "scan(py int carry, float32 xs)": lambda m: m.lax.scan(lambda c, x: (c + x, c), 0, np.ones(3, np.float32))[0],
    "scan(int32 carry, float32 xs)": lambda m: m.lax.scan(lambda c, x: (c + x, c), np.int32(0),
                                                          np.ones(3, np.float32))[0],
    "fori_loop(weak, float32 body)": lambda m: m.lax.fori_loop(0, 3, lambda i, c: c + _F32, 0.0),
    "fori_loop(float32, c * 2.)": lambda m: m.lax.fori_loop(0, 3, lambda i, c: c * 2.0, _F32),
    "fori_loop(weak pair)": lambda m: m.lax.fori_loop(0, 3, lambda i, c: (c[0] + _F32, c[1] + 1), (0.0, 0))[0],
}


def _outcome(m: Any, name: str) -> Any:
    """The case's dtype, weak flag and value, or that it raised a ``TypeError``."""
    try:
        out = BRANCHES[name](m)
    except TypeError:
        return "TypeError"
    return str(out.dtype), bool(getattr(out, "weak_type", False)), np.asarray(out, np.float64).tolist()


@pytest.mark.parametrize("name", list(BRANCHES))
def test_branch_and_carry_types_follow_jax(name: str, x64: bool) -> None:
    """``cond``/``switch`` branches must return equal shapes and dtypes (JAX's ``TypeError``
    otherwise; a Python scalar is not promoted to another branch's dtype), and their weak types
    may differ: the outputs take branch 0's (``cond``'s ``false_fun``), as JAX's ``cond_p``
    does. A weak loop carry is promoted to its body's dtype, a strong one is a ``TypeError``."""
    assert _outcome(F, name) == _outcome(J, name)


def test_the_branch_type_error_names_the_branches_and_types() -> None:
    with pytest.raises(TypeError, match=r"cond branches must have equal output types but they differ: the output 1 "
                                        r"of true_fun has type f32\[\] but the corresponding output of false_fun "
                                        r"has type f32\[2\]") as info:
        fg.lax.cond(True, lambda: (1, np.float32(2)), lambda: (1, np.ones(2, np.float32)))
    assert "test_jax_transformations.py" in str(info.value)
    with pytest.raises(TypeError, match=r"switch branches must have equal output types but they differ: the output "
                                        r"0 of branch 0 has type f32\[\] but the corresponding output of branch1"):
        fg.lax.switch(1, [lambda: np.float32(1), lambda: np.int32(1)])
