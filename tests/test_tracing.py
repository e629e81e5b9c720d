"""Tracing: pytrees, promotion, tracer operators, clear errors for bad input."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.tree_util import register_pytree_node, tree_flatten, tree_unflatten


def test_pytrees_round_trip() -> None:
    Point = namedtuple("Point", "x y")
    tree = {"a": [1, (2, None)], "b": Point(3, {"c": 4})}
    leaves, td = tree_flatten(tree)
    assert leaves == [1, 2, 3, 4]
    assert tree_unflatten(td, leaves) == tree


def test_registered_class_passes_through_transformations() -> None:
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, c: Pair(*c))
    g = fg.grad(lambda p: fnp.sum(p.a * p.b))(Pair(np.array([1.0, 2.0]), np.array([3.0, 4.0])))
    np.testing.assert_allclose(g.a, [3.0, 4.0])
    np.testing.assert_allclose(g.b, [1.0, 2.0])
    graph = fg.make_graph(lambda p: p.a + p.b)(Pair(np.ones(2), np.ones(2)))
    assert len(graph.invars) == 2


def test_python_scalars_are_weak() -> None:
    x = np.ones(3, np.float32)
    assert fnp.add(x, 1.0).dtype == np.float32
    g = fg.make_graph(lambda x: x * 2 + 1.5)(x)
    assert all(v.aval.dtype == np.float32 for e in g.eqns for v in e.outputs)
    assert fnp.add(np.ones(3, np.int32), 1.5).dtype == np.float64
    assert fnp.add(np.ones(3, np.int32), np.ones(3, np.int64)).dtype == np.int64
    assert fnp.add(np.ones(3, np.float32), np.ones(3, np.int64)).dtype == np.float32  # JAX's lattice


def test_tracer_operators_and_methods() -> None:
    def f(x, y):
        return (x + y, x - y, x * y, x / y, x // y, x % y, x ** 2, -x, abs(x), x @ y.T, x < y, x >= y,
                x[0], x[:, ::-1], x[None, ..., 1], x.T, x.reshape(-1), x.reshape(3, 2), x.astype(np.int32),
                x.sum(), x.mean(axis=0), x.max(), x.min(axis=1), x.prod(), 2.0 - x, 1 / y, x.shape == (2, 3),
                x.ndim, x.size, x.dtype)

    x = np.arange(1.0, 7.0).reshape(2, 3)
    y = np.arange(2.0, 8.0).reshape(2, 3)
    graph = fg.make_graph(lambda a, b: [o for o in f(a, b) if not isinstance(o, (bool, int, np.dtype))])(x, y)
    staged = fg.eval_graph(graph, x, y)
    eager = [o for o in f(x, y) if not isinstance(o, (bool, int, np.dtype))]
    assert len(staged) == len(eager)
    for s, e in zip(staged, eager):
        np.testing.assert_allclose(s, e)


def test_integer_array_indexing_follows_numpy() -> None:
    x = np.arange(24.0).reshape(2, 3, 4)
    i, j = np.array([1, 0, 1]), np.array([[2], [0]])
    cases = [lambda a: a[:, i], lambda a: a[1, i, j], lambda a: a[i[:2], :, j], lambda a: a[..., -1],
             lambda a: a[np.array([True, False])], lambda a: a[:, [0, 2], 1:3],
             # an integer beside an index array counts as one: a slice between them moves the
             # indexed axes to the front
             lambda a: a[0, :, np.array([1, 3])], lambda a: a[1, None, :, np.array([-1])]]
    for f in cases:
        (got,) = fg.eval_graph(fg.make_graph(f)(x), x)
        np.testing.assert_array_equal(got, f(x))


def test_shape_mismatch_names_both_shapes_and_the_source_line() -> None:
    with pytest.raises(fg.ShapeError) as info:
        fg.make_graph(lambda x, y: x + y)(np.ones((2, 3)), np.ones(4))
    msg = str(info.value)
    assert "f64[2,3]" in msg and "f64[4]" in msg and "test_tracing.py" in msg
    with pytest.raises(fg.ShapeError, match=r"\(2, 3\).*\(4, 5\)"):
        fg.make_graph(lambda x, y: x @ y)(np.ones((2, 3)), np.ones((4, 5)))


def test_branching_on_a_tracer_is_a_clear_error() -> None:
    with pytest.raises(fg.ConcretizationError, match="lax.cond") as info:
        fg.make_graph(lambda x: x if x > 0 else -x)(1.0)
    assert isinstance(info.value, TypeError)
    assert "test_tracing.py" in str(info.value)


def test_unsupported_dtype_is_named() -> None:
    with pytest.raises(TypeError, match="float128; supported dtypes are .*complex128"):
        fnp.sin(np.ones(2, np.longdouble))
    with pytest.raises(TypeError, match="complex256"):
        fnp.sin(np.ones(2, np.clongdouble))


def test_out_of_bounds_integer_index_clamps_as_in_jax() -> None:
    graph = fg.make_graph(lambda x: x[5])(np.arange(3.0))
    assert float(fg.eval_graph(graph, np.arange(3.0))[0]) == 2.0
    with pytest.raises(IndexError, match="size 0"):
        fg.make_graph(lambda x: x[0])(np.ones(0))


def test_calls_do_not_modify_inputs() -> None:
    x = np.arange(6.0).reshape(2, 3)
    before = x.copy()
    fg.grad(lambda a: fnp.sum(fnp.sin(a[:, ::-1]) * a))(x)
    fg.eval_graph(fg.make_graph(lambda a: a.reshape(-1) * 2)(x), x)
    np.testing.assert_array_equal(x, before)


def test_pure_callback_is_one_opaque_node() -> None:
    def host(x):
        return np.sort(x)

    f = lambda x: fg.pure_callback(host, fg.ShapeDtypeStruct(x.shape, x.dtype), x) * 2
    g = fg.make_graph(f)(np.ones(4))
    assert [e.primitive.name for e in g.eqns] == ["pure_callback", "mul"]
    x = np.array([3.0, 1.0, 2.0, 0.0])
    np.testing.assert_array_equal(fg.eval_graph(g, x)[0], np.sort(x) * 2)
    np.testing.assert_array_equal(f(x), np.sort(x) * 2)
    with pytest.raises(TypeError, match="custom_jvp"):
        fg.grad(lambda x: f(x).sum())(x)


def test_creation_functions() -> None:
    np.testing.assert_array_equal(fnp.zeros((2, 3)), np.zeros((2, 3)))
    np.testing.assert_array_equal(fnp.ones(3, dtype=np.int32), np.ones(3, np.int32))
    np.testing.assert_array_equal(fnp.full((2,), 7.0), np.full((2,), 7.0))
    np.testing.assert_array_equal(fnp.arange(5), np.arange(5))
    np.testing.assert_array_equal(fnp.arange(1, 7, 2), np.arange(1, 7, 2))
    np.testing.assert_array_equal(fnp.eye(3, k=1), np.eye(3, k=1))
    np.testing.assert_array_equal(fnp.zeros_like(np.ones((2, 2), np.float32)), np.zeros((2, 2), np.float32))
    np.testing.assert_array_equal(fnp.ones_like(np.ones(3)), np.ones(3))
    g = fg.make_graph(lambda v: fnp.full((2, 3), v))(np.float32(2.0))
    np.testing.assert_array_equal(fg.eval_graph(g, np.float32(2.0))[0], np.full((2, 3), 2.0, np.float32))


def test_static_argnums_are_python_values() -> None:
    def f(x, n, mode):
        for _ in range(n):
            x = fnp.sin(x) if mode == "sin" else fnp.cos(x)
        return x

    g = fg.make_graph(f, static_argnums=(1, 2))(np.ones(3), 3, "sin")
    assert [e.primitive.name for e in g.eqns] == ["sin"] * 3
    assert len(g.invars) == 1
    np.testing.assert_allclose(fg.eval_graph(g, np.ones(3))[0], np.sin(np.sin(np.sin(np.ones(3)))))


def test_isinf_isnan_isfinite_on_integers() -> None:
    ints = np.arange(3)
    np.testing.assert_array_equal(fnp.isinf(ints), np.isinf(ints))
    np.testing.assert_array_equal(fnp.isnan(ints), np.isnan(ints))
    np.testing.assert_array_equal(fnp.isfinite(ints), np.isfinite(ints))
