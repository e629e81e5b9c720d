"""Differential tests against JAX (a test dependency only; fungraph never imports it):
control flow and a few compositions, values, jvp, vmap and gradients where JAX supports them."""

from __future__ import annotations

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

XS = np.array([-1.3, -0.2, 0.4, 1.7])


# Each program is written once against a numpy-like module ``m`` and its ``lax`` ``L``.


def cond_prog(m, L):
    return lambda x: L.cond(x > 0, lambda y: m.sin(y) * y, lambda y: m.cos(y) - y, x)


def switch_prog(m, L):
    return lambda x: L.switch(2, [lambda v: v * 2.0, lambda v: m.exp(v), lambda v: -v * v], x)


def scan_prog(m, L):
    def f(x):
        c, ys = L.scan(lambda c, xi: (c * xi + m.sin(c), c * 2.0), x, np.arange(1.0, 4.0))
        return c + m.sum(ys)

    return f


def fori_prog(m, L):
    return lambda x: L.fori_loop(0, 5, lambda i, v: m.sin(v) * 1.5 + i, x)


def while_prog(m, L):
    return lambda x: L.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, m.sin(c[1]) * x), (0, x))[1]


PROGRAMS = {"cond": cond_prog, "switch": switch_prog, "scan": scan_prog, "fori": fori_prog, "while": while_prog}
REVERSE_IN_JAX = {"cond", "switch", "scan", "fori"}  # JAX refuses reverse mode through while_loop


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_values_jvp_and_vmap_match_jax(name: str) -> None:
    ours, theirs = PROGRAMS[name](fnp, lax), PROGRAMS[name](jnp, jax.lax)
    for x in XS:
        np.testing.assert_allclose(ours(x), theirs(x), rtol=1e-12)
        np.testing.assert_allclose(fg.jit(ours)(x), theirs(x), rtol=1e-12)
        np.testing.assert_allclose(fg.jvp(ours, (x,), (1.0,))[1], jax.jvp(theirs, (x,), (1.0,))[1], rtol=1e-10)
    np.testing.assert_allclose(fg.vmap(ours)(XS), jax.vmap(theirs)(XS), rtol=1e-12)


@pytest.mark.parametrize("name", sorted(REVERSE_IN_JAX))
def test_gradients_match_jax(name: str) -> None:
    ours, theirs = PROGRAMS[name](fnp, lax), PROGRAMS[name](jnp, jax.lax)
    for x in XS:
        want = jax.grad(theirs)(x)
        np.testing.assert_allclose(fg.grad(ours)(x), want, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(fg.jit(fg.grad(ours))(x), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fg.vmap(fg.grad(ours))(XS), jax.vmap(jax.grad(theirs))(XS), rtol=1e-10, atol=1e-12)


def test_while_gradient_where_jax_has_none_equals_jax_forward_mode() -> None:
    ours, theirs = while_prog(fnp, lax), while_prog(jnp, jax.lax)
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        jax.grad(theirs)(0.5)
    for x in XS:
        np.testing.assert_allclose(fg.grad(ours)(x), jax.jacfwd(theirs)(x), rtol=1e-10, atol=1e-12)


def test_mlp_loss_and_per_example_gradients_match_jax() -> None:
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((5, 7)), rng.standard_normal((7, 3))
    xs, ys = rng.standard_normal((6, 5)), np.eye(3)[rng.integers(0, 3, 6)]

    def loss(m, nn_log_softmax):
        return lambda w1, w2, x, y: -m.sum(y * nn_log_softmax(m.tanh(x @ w1) @ w2))

    ours = loss(fnp, fg.nn.log_softmax)
    theirs = loss(jnp, jax.nn.log_softmax)
    got = fg.jit(fg.vmap(fg.grad(ours, argnums=(0, 1)), in_axes=(None, None, 0, 0)))(w1, w2, xs, ys)
    want = jax.vmap(jax.grad(theirs, argnums=(0, 1)), in_axes=(None, None, 0, 0))(w1, w2, xs, ys)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


# --- debug.print: the same lines, in the same order, as jax.debug.print ------------------------


def printing_programs(debug, m, L):
    """Programs that print under transformations, written once for ``jax`` and ``fungraph``."""
    def two_prints(x):
        y = m.sin(x) * 2.0
        debug.print("y {}", y)
        debug.print("s {s} f {0}", y[0], s=y.sum())
        return (y ** 2).sum()

    def loop(x):
        return L.fori_loop(0, 3, lambda i, c: (debug.print("i {} c {}", i, c), c * 1.5)[1], x)

    def branch(x):
        return L.cond(x > 0, lambda v: (debug.print("pos {}", v), v)[1], lambda v: (debug.print("neg {}", v), -v)[1], x)

    return two_prints, loop, branch


def _printed(run, capsys) -> list[list[str | float]]:
    """What ``run`` printed, a line per entry, numbers parsed so float32 digits may differ."""
    capsys.readouterr()
    run()
    words = [line.replace("[", " ").replace("]", " ").split() for line in capsys.readouterr().out.splitlines()]
    return [[float(w) if w[0].isdigit() or w[0] == "-" else w for w in ws] for ws in words]


def test_debug_print_prints_what_jax_prints(capsys) -> None:
    ours = printing_programs(fg.debug, fnp, lax)
    theirs = printing_programs(jax.debug, jnp, jax.lax)
    x3 = np.array([0.0, 1.0, 2.0], np.float32)
    cases = [
        (lambda p: p[0], lambda t: t.jit, (x3,)),
        (lambda p: p[0], lambda t: (lambda f: t.vmap(f)), (np.stack([x3, x3 + 1]),)),
        (lambda p: p[0], lambda t: (lambda f: t.jit(t.grad(f))), (x3,)),
        (lambda p: p[1], lambda t: t.jit, (np.float32(1.0),)),
        (lambda p: p[1], lambda t: (lambda f: t.jit(t.grad(f))), (np.float32(1.0),)),
        (lambda p: p[2], lambda t: t.jit, (np.float32(2.0),)),
        (lambda p: p[2], lambda t: t.jit, (np.float32(-3.0),)),
    ]
    for pick, transform, args in cases:
        want = _printed(lambda: (transform(jax)(pick(theirs))(*args), jax.effects_barrier()), capsys)
        got = _printed(lambda: transform(fg)(pick(ours))(*args), capsys)
        assert len(got) == len(want) and len(want) > 0
        for g, w in zip(got, want):
            assert [type(v) for v in g] == [type(v) for v in w], (g, w)
            np.testing.assert_allclose([v for v in g if isinstance(v, float)],
                                       [v for v in w if isinstance(v, float)], rtol=1e-5, atol=1e-6)
            assert [v for v in g if isinstance(v, str)] == [v for v in w if isinstance(v, str)]


@pytest.mark.parametrize("name", ["unique", "union1d", "intersect1d", "setdiff1d", "setxor1d"])
def test_sized_set_functions_pad_as_jax_does(name: str) -> None:
    a, b = np.array([3.0, 1.0, 5.0, 3.0]), np.array([1.0, 7.0, 7.0])
    args = (a,) if name == "unique" else (a, b)
    for operands in (args, tuple(x[:1] for x in args)):
        for size in (2, 6):
            got = fg.jit(lambda *xs: getattr(fnp, name)(*xs, size=size))(*operands)
            want = getattr(jnp, name)(*operands, size=size)
            np.testing.assert_array_equal(got, np.asarray(want), err_msg=f"{name} size={size} of {operands}")


@pytest.mark.parametrize("axis", [0, 1])
def test_sized_unique_along_an_axis_pads_as_jax_does(axis: int) -> None:
    x = np.array([[1, 2], [0, 5], [1, 2], [1, 0]])
    for size in (2, 5):
        got = fg.jit(lambda a: fnp.unique(a, True, True, True, axis=axis, size=size))(x)
        want = jnp.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis, size=size)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, np.asarray(w), err_msg=f"unique axis={axis} size={size}")


def test_index_updates_at_traced_indices_match_jax() -> None:
    """``x.at[i, 1:3].set/add/multiply`` and ``lax.dynamic_update_slice`` with traced indices
    (negative, at the edges, out of bounds: dropped by ``.at``, clamped by ``lax``), their
    gradients, under jit and vmap over the index, against JAX's."""
    x = np.arange(40.0).reshape(10, 4)
    v = np.array([0.5, -2.0])

    def updates(m: object, lx: object, x: object, v: object, i: object) -> object:
        at = fnp.at if m is fnp else (lambda a: jnp.asarray(a).at)
        a = at(x)[i, 1:3].set(v)
        b = at(x)[i, 1:3].add(v * 2.0)
        c = at(x)[i].multiply(3.0)
        d = lx.dynamic_update_slice(x, m.reshape(v, (1, 2)), (i, 1))
        return m.sum(a * b) + m.sum(c ** 2) + m.sum(d * x)

    mine = fg.jit(lambda x, v, i: updates(fnp, lax, x, v, i))
    theirs = jax.jit(lambda x, v, i: updates(jnp, jax.lax, x, v, i))
    for i in (0, 3, 9, -1, -10, 10, -11, 25):
        np.testing.assert_allclose(float(mine(x, v, i)), float(theirs(x, v, i)), rtol=1e-12)
        got = fg.jit(fg.grad(lambda x, v, i: updates(fnp, lax, x, v, i), argnums=(0, 1)))(x, v, i)
        want = jax.grad(lambda x, v, i: updates(jnp, jax.lax, x, v, i), argnums=(0, 1))(x, v, i)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12)
    idx = np.array([0, -1, 10, 4])
    got = fg.vmap(lambda i: updates(fnp, lax, x, v, i))(idx)
    want = jax.vmap(lambda i: updates(jnp, jax.lax, x, v, i))(idx)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)
