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
