"""vmap: every op against a Python loop along random axes, compositions, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import dtypes, nn
from fungraph.testing import OP_RECORDS
from tests.helpers import check_vmap_against_loop, draw_batched

RECORDS = {r.name: r for r in OP_RECORDS}


@pytest.mark.parametrize("name", list(RECORDS))
@settings(max_examples=12)
@given(data=st.data())
def test_vmap_matches_a_python_loop(name: str, data: st.DataObject) -> None:
    check_vmap_against_loop(data, RECORDS[name])


@pytest.mark.parametrize("name", [r.name for r in OP_RECORDS if r.differentiable])
@settings(max_examples=4)
@given(data=st.data())
def test_per_example_gradients(name: str, data: st.DataObject) -> None:
    rec = RECORDS[name]
    batched, axes, per_example = draw_batched(data, rec, (dtypes.float64,))
    if np.asarray(batched[0]).dtype.kind != "f":
        return
    rest = per_example[0][1:]

    def loss(x, *others):
        return fnp.sum(fnp.sin(rec.fun(x, *others)))

    got = fg.vmap(fg.grad(loss), in_axes=(axes[0],) + (None,) * len(rest))(batched[0], *rest)
    want = np.stack([fg.grad(loss)(ex[0], *rest) for ex in per_example])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_compositions() -> None:
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((4, 3))
    w = rng.standard_normal((3, 2))
    f = lambda x, w: fnp.sum(fnp.tanh(x @ w) ** 2)
    loop = np.stack([fg.grad(f, argnums=1)(x, w) for x in xs])
    for g in (fg.vmap(fg.grad(f, argnums=1), in_axes=(0, None)),
              fg.jit(fg.vmap(fg.grad(f, argnums=1), in_axes=(0, None))),
              fg.vmap(fg.jit(fg.grad(f, argnums=1)), in_axes=(0, None)),
              fg.vmap(fg.grad(fg.jit(f), argnums=1), in_axes=(0, None))):
        np.testing.assert_allclose(g(xs, w), loop, rtol=1e-12)
    total = fg.grad(lambda w: fnp.sum(fg.vmap(f, in_axes=(0, None))(xs, w)))(w)
    np.testing.assert_allclose(total, loop.sum(0), rtol=1e-12)
    xss = rng.standard_normal((2, 4, 3))
    nested = fg.vmap(fg.vmap(f, in_axes=(0, None)), in_axes=(0, None))(xss, w)
    np.testing.assert_allclose(nested, [[f(x, w) for x in row] for row in xss], rtol=1e-12)


def test_in_axes_pytrees_and_out_axes() -> None:
    params = {"w": np.ones((3, 2)), "b": np.arange(2.0)}
    xs = np.arange(12.0).reshape(4, 3)
    out = fg.vmap(lambda p, x: x @ p["w"] + p["b"], in_axes=({"w": None, "b": None}, 0))(params, xs)
    np.testing.assert_allclose(out, xs @ params["w"] + params["b"])
    bs = np.stack([np.arange(2.0) + i for i in range(4)])
    out = fg.vmap(lambda p, x: x @ p["w"] + p["b"], in_axes=({"w": None, "b": 0}, 0), out_axes=1)(
        {"w": params["w"], "b": bs}, xs)
    np.testing.assert_allclose(out, (xs @ params["w"] + bs).T)


def test_cnn_per_example_gradient_has_no_python_loop() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 1, 2, 6, 6))
    w = rng.standard_normal((4, 2, 3, 3)) * 0.3

    def loss(w, x):
        h = nn.relu(fg.lax.conv(x, w, (1, 1), "SAME"))
        return fnp.sum(nn.max_pool(h, (2, 2), (2, 2)) ** 2)

    got = fg.vmap(fg.grad(loss), in_axes=(None, 0))(w, x)
    want = np.stack([fg.grad(loss)(w, xi) for xi in x])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    graph = fg.make_graph(fg.vmap(fg.grad(loss), in_axes=(None, 0)))(w, x)
    assert len(graph.eqns) < 80


def test_errors_name_sizes_and_axes() -> None:
    with pytest.raises(ValueError, match=r"leaf 0: size 3, leaf 1: size 4"):
        fg.vmap(lambda a, b: a + b)(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="out of range"):
        fg.vmap(lambda a: a, in_axes=2)(np.ones((3, 4)))
    with pytest.raises(ValueError, match="out_axes is None"):
        fg.vmap(lambda a: a, out_axes=None)(np.ones(3))
    with pytest.raises(ValueError, match="in_axes has 1 entries"):
        fg.vmap(lambda a, b: a, in_axes=(0,))(np.ones(3), np.ones(3))


def test_pure_callback_under_vmap_calls_the_host_per_example() -> None:
    calls = []

    def host(x):
        calls.append(x.shape)
        return np.sort(x)

    f = lambda x: fg.pure_callback(host, fg.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="sequential")
    xs = np.array([[3.0, 1.0, 2.0], [0.0, -1.0, 5.0]])
    np.testing.assert_array_equal(fg.vmap(f)(xs), np.sort(xs, axis=1))
    assert calls == [(3,), (3,)]
