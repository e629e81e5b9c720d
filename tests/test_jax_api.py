"""The pieces of JAX's top-level API that ported code calls besides the transformations:
``jit`` with keyword arguments and ``static_argnames``/``donate_argnames``, ``eval_shape``,
``jacobian``, the ``fungraph.tree`` names, ``device_put``/``block_until_ready`` on the CPU."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp


@partial(fg.jit, static_argnames=("n", "training"))
def _layers(x, n, *, training=False, scale=1.0):
    for _ in range(n):
        x = fnp.sin(x)
    return x * scale * (2.0 if training else 1.0)


def _layers_eager(x, n, training=False, scale=1.0):
    for _ in range(n):
        x = np.sin(x)
    return x * scale * (2.0 if training else 1.0)


def test_jit_takes_keywords_static_by_name_and_caches_per_static_value() -> None:
    x = np.linspace(-1, 1, 5)
    for args, kwargs in [((x, 2), {}), ((x,), {"n": 2}), ((x, 3), {"training": True}),
                         ((x,), {"n": 1, "scale": np.float64(0.5), "training": True})]:
        want = _layers_eager(*args, **kwargs)
        np.testing.assert_allclose(_layers(*args, **kwargs), want, rtol=1e-15, err_msg=f"{args[1:]} {kwargs}")
    traced = _layers._keywords
    before = len(traced._cache)
    _layers(x, n=2, training=False)              # defaults are filled in: the same entry as n=2 alone
    assert len(traced._cache) == before
    _layers(x, n=2, training=True)
    assert len(traced._cache) == before + 1
    g = fg.grad(lambda v: _layers(v, n=1, training=True).sum())(x)
    np.testing.assert_allclose(g, 2 * np.cos(x), rtol=1e-12)
    np.testing.assert_allclose(fg.vmap(lambda v: _layers(v, n=1))(np.stack([x, x])), np.sin(np.stack([x, x])))


def test_jit_keyword_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="static_argnames names 'zz', which is not a named parameter"):
        fg.jit(lambda x: x, static_argnames="zz")
    with pytest.raises(TypeError, match=r"keyword arguments need a function whose parameters are all named"):
        fg.jit(lambda *xs: xs[0])(1.0, y=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'm'"):
        _layers(np.ones(2), n=1, m=3)


def test_donate_argnames_donates_on_opencl(require_opencl: None) -> None:
    step = fg.jit(lambda w, g: w - 0.5 * g, donate_argnames="w", backend="opencl")
    w = fg.device_put(np.ones(4, np.float32), "opencl")
    out = step(g=np.ones(4, np.float32), w=w)
    np.testing.assert_array_equal(np.asarray(out), np.full(4, 0.5, np.float32))
    assert w.is_deleted()


def test_eval_shape_traces_without_computing() -> None:
    calls = []

    def f(x, w, *, b):
        calls.append(1)
        return {"y": x @ w + b, "n": fnp.sum(x)}

    out = fg.eval_shape(f, fg.ShapeDtypeStruct((4, 3), np.float32), np.ones((3, 5), np.float32), b=np.float32(1))
    assert out == {"y": fg.ShapeDtypeStruct((4, 5), np.float32), "n": fg.ShapeDtypeStruct((), np.float32)}
    assert calls == [1]


def test_tree_names_jacobian_and_cpu_device_put() -> None:
    a, b = {"x": 1, "y": (2, 3)}, {"x": 10, "y": (20, 30)}
    assert fg.tree.map(lambda u, v: u + v, a, b) == {"x": 11, "y": (22, 33)}
    assert fg.tree.leaves(a) == [1, 2, 3] and fg.tree.reduce(lambda u, v: u * v, a) == 6
    assert fg.tree.all([True, 1]) and not fg.tree.all([True, 0])
    leaves, structure = fg.tree.flatten(a)
    assert fg.tree.unflatten(structure, leaves) == a and fg.tree.structure(a) == structure
    assert fg.tree.map(lambda t: len(t), {"p": (1, 2)}, is_leaf=lambda t: isinstance(t, tuple)) == {"p": 2}
    x = np.arange(3.0)
    np.testing.assert_array_equal(fg.jacobian(lambda v: v ** 2)(x), np.diag(2 * x))
    put = fg.device_put({"a": np.float16(1), "b": [1, 2]})
    assert put["a"].dtype == np.float16 and isinstance(put["b"][0], np.ndarray)
    assert fg.block_until_ready(put) is put


def test_disable_jit_runs_python_eagerly_on_this_thread() -> None:
    seen = []

    @fg.jit
    def f(x):
        seen.append(type(x).__name__)
        return x * 2

    x = np.ones(2)
    f(x)
    with fg.disable_jit():
        np.testing.assert_array_equal(f(x), 2 * x)
        f(x)
    f(x)
    assert seen == ["GraphTracer", "ndarray", "ndarray"]
