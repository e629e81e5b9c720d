"""``lax.reduce_window``, ``lax.reduce`` and ``lax.map(batch_size=...)`` against JAX: values on
random geometries (strides, paddings, dilations, any rank), gradients against finite
differences, vmap against a loop, OpenCL against the CPU, and the errors for bad input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
from fungraph import lax
from fungraph import numpy as fnp
from fungraph.testing import check_grads
from tests.helpers import jax_or_skip

IDENTITY = {"add": 0, "mul": 1, "max": -np.inf, "min": np.inf}
INT_IDENTITY = {"add": 0, "mul": 1, "max": np.iinfo(np.int32).min, "min": np.iinfo(np.int32).max}


@st.composite
def geometries(draw: st.DrawFn) -> dict[str, Any]:
    """A shape with a window, strides, padding and dilations on every axis."""
    rank = draw(st.integers(1, 3), label="rank")
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank), label="shape"))
    axis_ints = st.lists(st.integers(1, 3), min_size=rank, max_size=rank).map(tuple)
    window = draw(axis_ints, label="window")
    strides = draw(axis_ints, label="strides")
    pad_kind = draw(st.sampled_from(["VALID", "SAME", "SAME_LOWER", "pairs"]), label="padding")
    if pad_kind == "pairs":
        pair = st.tuples(st.integers(-1, 2), st.integers(-1, 2))
        padding: Any = tuple(draw(st.lists(pair, min_size=rank, max_size=rank), label="pairs"))
    else:
        padding = pad_kind
    dil = st.one_of(st.none(), st.lists(st.integers(1, 2), min_size=rank, max_size=rank).map(tuple))
    return {"shape": shape, "window_dimensions": window, "window_strides": strides, "padding": padding,
            "base_dilation": draw(dil, label="base_dilation"), "window_dilation": draw(dil, label="window_dilation")}


def _geometry_args(g: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in g.items() if k != "shape"}


def _operand(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        return rng.integers(-5, 6, shape).astype(dtype)
    return rng.uniform(-2, 2, shape).astype(dtype)


def _assert_same(got: Any, want: Any, dtype: Any) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    tol = 1e-5 if np.dtype(dtype) == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@settings(max_examples=60)
@given(g=geometries(), dtype=st.sampled_from([np.float32, np.float64, np.int32]),
       name=st.sampled_from(["add", "max", "min", "mul"]), seed=st.integers(0, 2**16))
def test_reduce_window_matches_jax(g: dict[str, Any], dtype: Any, name: str, seed: int) -> None:
    jax, jnp = jax_or_skip()
    if np.dtype(dtype).kind == "i" and name == "mul":
        name = "add"
    x = _operand(g["shape"], dtype, seed)
    init = (INT_IDENTITY if np.dtype(dtype).kind == "i" else IDENTITY)[name]
    init = np.asarray(init, dtype)
    want = jax.lax.reduce_window(x, init, getattr(jax.lax, name), **_geometry_args(g))
    _assert_same(lax.reduce_window(x, init, getattr(lax, name), **_geometry_args(g)), want, dtype)


@settings(max_examples=30)
@given(g=geometries(), seed=st.integers(0, 2**16), init=st.sampled_from([0.0, 1.5, -3.0]))
def test_any_callable_and_any_init_match_jax(g: dict[str, Any], seed: int, init: float) -> None:
    """A lambda is folded pairwise; padding and holes are skipped and ``init`` enters once per
    window, as in XLA; a known computation with another init agrees."""
    jax, jnp = jax_or_skip()
    x = _operand(g["shape"], np.float64, seed)
    want = jax.lax.reduce_window(x, init, lambda a, b: a + b, **_geometry_args(g))
    _assert_same(lax.reduce_window(x, init, lambda a, b: a + b, **_geometry_args(g)), want, np.float64)
    _assert_same(lax.reduce_window(x, init, fnp.add, **_geometry_args(g)), want, np.float64)


def test_numpy_computations_and_variadic_argmax_pool() -> None:
    jax, jnp = jax_or_skip()
    x = _operand((4, 6), np.float64, 1)
    for ours, theirs in [(fnp.maximum, jax.lax.max), (fnp.minimum, jax.lax.min), (fnp.multiply, jax.lax.mul)]:
        init = {"max": -np.inf, "min": np.inf, "mul": 1.0}[theirs.__name__]
        _assert_same(lax.reduce_window(x, init, ours, (2, 3), (1, 2), "SAME"),
                     jax.lax.reduce_window(x, init, theirs, (2, 3), (1, 2), "SAME"), np.float64)

    def argmax_pair(jl: Any) -> Any:
        def pick(a: Any, b: Any) -> Any:
            take_b = jl.gt(b[0], a[0])
            return jl.select(take_b, b[0], a[0]), jl.select(take_b, b[1], a[1])
        return pick

    idx = np.arange(24, dtype=np.int64).reshape(4, 6)
    args = ((2, 2), (2, 2), ((0, 1), (1, 0)))
    got = lax.reduce_window((x, idx), (-np.inf, np.int64(-1)), argmax_pair(lax), *args)
    want = jax.lax.reduce_window((x, idx), (-np.inf, np.int64(-1)), argmax_pair(jax.lax), *args)
    assert isinstance(got, tuple) and len(got) == 2
    for a, b, dt in zip(got, want, (np.float64, np.int64)):
        _assert_same(a, b, dt)


@pytest.mark.parametrize("comp, prim", [(lax.add, "reduce_sum"), (fnp.add, "reduce_sum"), (lax.mul, "reduce_prod"),
                                        (fnp.multiply, "reduce_prod"), (lax.max, "reduce_max"),
                                        (fnp.maximum, "reduce_max"), (lax.min, "reduce_min"),
                                        (fnp.minimum, "reduce_min")])
def test_known_computations_bind_the_reduction_primitive(comp: Any, prim: str) -> None:
    """lax's and numpy's add/mul/max/min are recognised (registered in primitives.reductions),
    so ``lax.reduce`` binds one reduction instead of folding pairwise."""
    init = {"reduce_sum": 0.0, "reduce_prod": 1.0, "reduce_max": -np.inf, "reduce_min": np.inf}[prim]
    graph = fg.make_graph(lambda x: lax.reduce(x, init, comp, (1,)))(np.ones((3, 4)))
    assert [e.primitive.name for e in graph.eqns] == [prim]


@settings(max_examples=30)
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple), data=st.data(),
       name=st.sampled_from(["add", "max", "min", "mul", "lambda"]), dtype=st.sampled_from([np.float32, np.int32]))
def test_reduce_matches_jax(shape: tuple[int, ...], data: st.DataObject, name: str, dtype: Any) -> None:
    jax, jnp = jax_or_skip()
    dims = data.draw(st.sets(st.integers(0, len(shape) - 1)), label="dims")
    x = _operand(shape, dtype, 3)
    if name == "lambda":
        init = np.asarray(2, dtype)
        got = lax.reduce(x, init, lambda a, b: a + b, tuple(dims))
        want = jax.lax.reduce(x, init, lambda a, b: a + b, tuple(dims))
    else:
        init = np.asarray((INT_IDENTITY if np.dtype(dtype).kind == "i" else IDENTITY)[name], dtype)
        got = lax.reduce(x, init, getattr(lax, name), tuple(dims))
        want = jax.lax.reduce(x, init, getattr(jax.lax, name), tuple(dims))
    _assert_same(got, want, dtype)


def test_variadic_reduce_matches_jax() -> None:
    jax, jnp = jax_or_skip()
    x = _operand((3, 5), np.float64, 4)
    i = np.broadcast_to(np.arange(5), (3, 5))

    def pick(jl: Any) -> Any:
        return lambda a, b: (jl.select(jl.ge(a[0], b[0]), a[0], b[0]), jl.select(jl.ge(a[0], b[0]), a[1], b[1]))

    got = lax.reduce((x, i), (-np.inf, np.int64(0)), pick(lax), (1,))
    want = jax.lax.reduce((x, i), (-np.inf, np.int64(0)), pick(jax.lax), (1,))
    for a, b in zip(got, want):
        _assert_same(a, b, np.float64)


@pytest.mark.parametrize("n", [0, 1, 6, 7])
@pytest.mark.parametrize("batch_size", [None, 0, 1, 3, 9])
def test_map_batch_size_matches_jax(n: int, batch_size: int | None) -> None:
    jax, jnp = jax_or_skip()
    xs = {"a": np.arange(n * 2, dtype=np.float64).reshape(n, 2), "b": np.arange(n, dtype=np.int64)}
    if n == 0 and batch_size is None:
        return

    def f(lib: Any) -> Any:
        return lambda d: (lib.sin(d["a"]) * d["b"], lib.sum(d["a"]))

    got = lax.map(f(fnp), xs, batch_size=batch_size)
    want = jax.lax.map(f(jnp), xs, batch_size=batch_size)
    for a, b in zip(got, want):
        _assert_same(a, b, np.float64)


def test_map_batch_size_under_jit_and_grad() -> None:
    jax, jnp = jax_or_skip()
    xs = _operand((7, 3), np.float64, 5)

    def loss(lib: Any, jl: Any) -> Any:
        return lambda v: lib.sum(jl.map(lambda r: lib.tanh(r) * r[0], v, batch_size=3) ** 2)

    _assert_same(fg.jit(fg.grad(loss(fnp, lax)))(xs), jax.grad(loss(jnp, jax.lax))(xs), np.float64)


GRAD_CASES = [
    ((5, 6), (2, 3), (1, 2), "SAME", None, None),
    ((7,), (3,), (2,), ((2, 1),), (2,), None),
    ((2, 4, 5), (1, 2, 2), (1, 1, 2), "VALID", None, (1, 2, 1)),
]


@pytest.mark.parametrize("name", ["add", "max"])
@pytest.mark.parametrize("case", GRAD_CASES)
def test_gradients_against_finite_differences(name: str, case: tuple) -> None:
    shape, window, strides, padding, base, dil = case
    x = np.random.default_rng(6).permutation(np.prod(shape)).reshape(shape) / 7.0 - 1.0  # distinct: no max ties

    def f(v: Any) -> Any:
        return fnp.sin(lax.reduce_window(v, IDENTITY[name], getattr(lax, name), window, strides, padding, base, dil))

    check_grads(f, (x,), order=2)


def test_gradients_of_a_callable_with_padding_and_traced_init() -> None:
    x = _operand((4, 5), np.float64, 7)

    def f(v: Any, init: Any) -> Any:
        return lax.reduce_window(v, init, lambda a, b: a * b + a, (2, 2), (1, 2), "SAME", (1, 2))

    check_grads(f, (x, np.float64(0.5)), order=2)


def test_gradients_match_jax() -> None:
    jax, jnp = jax_or_skip()
    x = _operand((5, 6), np.float64, 8)

    def loss(jl: Any, lib: Any) -> Any:
        return lambda v: (lib.sum(jl.reduce_window(v, -np.inf, jl.max, (3, 2), (2, 1), "SAME") ** 2)
                          + lib.sum(lib.cos(jl.reduce_window(v, 0.0, jl.add, (2, 2), (1, 1), ((1, 0), (0, 2))))))

    _assert_same(fg.grad(loss(lax, fnp))(x), jax.grad(loss(jax.lax, jnp))(x), np.float64)


@pytest.mark.parametrize("comp", [lax.add, lax.max, lambda a, b: a + b])
def test_vmap_matches_a_loop(comp: Any) -> None:
    xs = _operand((3, 5, 4), np.float64, 9)
    inits = np.asarray([0.0, 1.0, -2.0])

    def f(x: Any, init: Any) -> Any:
        return lax.reduce_window(x, init, comp, (2, 3), (2, 1), "SAME", window_dilation=(1, 2))

    got = fg.vmap(f)(xs, inits)
    want = np.stack([np.asarray(f(x, i)) for x, i in zip(xs, inits)])
    _assert_same(got, want, np.float64)
    got = fg.vmap(f, in_axes=(2, None))(xs, 0.0)
    want = np.stack([np.asarray(f(xs[:, :, k], 0.0)) for k in range(4)])
    _assert_same(got, want, np.float64)


@pytest.mark.parametrize("name", ["add", "max", "lambda"])
def test_opencl_matches_cpu(require_opencl: None, name: str) -> None:
    x = _operand((2, 6, 7), np.float32, 10)
    comp = (lambda a, b: fnp.maximum(a, b) + 0) if name == "lambda" else getattr(lax, name)
    init = np.float32(IDENTITY.get(name, -np.inf))

    def f(v: Any) -> Any:
        return lax.reduce_window(v, init, comp, (1, 3, 2), (1, 2, 2), "SAME", (1, 1, 2), (1, 1, 2))

    _assert_same(fg.jit(f, backend="opencl")(x), f(x), np.float32)
    g = fg.grad(lambda v: fnp.sum(f(v) ** 2))
    _assert_same(fg.jit(g, backend="opencl")(x), g(x), np.float32)


def test_empty_output_is_init() -> None:
    jax, jnp = jax_or_skip()
    x = np.ones((2, 3))
    _assert_same(lax.reduce_window(x, 0.0, lax.add, (3, 2), (1, 1), "VALID"),
                 jax.lax.reduce_window(x, 0.0, jax.lax.add, (3, 2), (1, 1), "VALID"), np.float64)


@pytest.mark.parametrize("kwargs, message", [
    ({"window_dimensions": (2,)}, r"window_dimensions \(2,\).*operand shape \(4, 5\)"),
    ({"window_strides": (1, 0)}, r"window_strides must be positive.*\(4, 5\)"),
    ({"window_strides": (1,)}, r"window_strides \(1,\).*\(4, 5\)"),
    ({"window_dimensions": (0, 1)}, r"window_dimensions must be positive.*\(4, 5\)"),
    ({"padding": "FULL"}, r"'SAME', 'SAME_LOWER', 'VALID'.*'FULL'"),
    ({"padding": ((1, 1),)}, r"one \(lo, hi\) pair per axis.*\(4, 5\)"),
    ({"padding": ((1, 1, 0), (0, 0))}, r"one \(lo, hi\) pair per axis.*\(4, 5\)"),
    ({"window_dilation": (1, -1)}, r"window_dilation must be positive"),
])
def test_bad_input_gives_clear_errors(kwargs: dict[str, Any], message: str) -> None:
    args = {"window_dimensions": (2, 2), "window_strides": (1, 1), "padding": "VALID", **kwargs}
    with pytest.raises((TypeError, ValueError), match=message):
        lax.reduce_window(np.ones((4, 5)), 0.0, lax.add, **args)


def test_bad_trees_and_inits_give_clear_errors() -> None:
    x = np.ones((4, 5))
    with pytest.raises(TypeError, match="same structure"):
        lax.reduce_window((x, x), 0.0, lax.add, (2, 2), (1, 1), "VALID")
    with pytest.raises(ValueError, match="share one shape"):
        lax.reduce_window((x, np.ones(3)), (0.0, 0.0), lambda a, b: a, (2, 2), (1, 1), "VALID")
    with pytest.raises(TypeError, match="must be scalars"):
        lax.reduce_window(x, np.zeros(2), lax.add, (2, 2), (1, 1), "VALID")
    with pytest.raises(TypeError, match="does not fit"):
        lax.reduce_window(np.ones(4, np.int32), 0.5, lax.add, (2,), (1,), "VALID")
    with pytest.raises(TypeError, match="dtypes"):
        lax.reduce_window(x, 0.0, lambda a, b: (a + b).astype(np.float32), (2, 2), (1, 1), "VALID")
