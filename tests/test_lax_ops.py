"""``fungraph.lax``'s array operations against ``jax.lax`` (a test dependency only): values
eagerly and under jit, gradients where differentiable, vmap against a loop, and the errors
lax gives where numpy would promote or wrap."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from tests.helpers import check_eager_and_jit, jax_or_skip

jax, jnp = jax_or_skip()

RNG = np.random.default_rng(0)
A = RNG.uniform(0.2, 0.9, (3, 4))          # inside every unary function's domain but acosh's
B = RNG.uniform(-2.0, 2.0, (3, 4))
BIG = RNG.uniform(1.5, 3.0, (3, 4))
IA = RNG.integers(-7, 8, (3, 4))
JA = np.where(RNG.integers(-5, 6, (3, 4)) == 0, 3, RNG.integers(-5, 6, (3, 4)))
V = RNG.standard_normal(7)

UNARY = ["neg", "abs", "sign", "floor", "ceil", "exp", "exp2", "log", "log1p", "expm1", "sin", "cos", "tan", "asin",
         "acos", "atan", "sinh", "cosh", "tanh", "asinh", "atanh", "sqrt", "rsqrt", "cbrt", "square", "logistic",
         "erf", "erfc", "erf_inv", "lgamma", "digamma", "is_finite"]
BINARY = ["add", "sub", "mul", "div", "rem", "max", "min", "atan2", "eq", "ne", "lt", "le", "gt", "ge", "pow"]
SMOOTH = set(UNARY) - {"sign", "floor", "ceil", "is_finite"} | {"add", "sub", "mul", "div", "max", "min", "atan2",
                                                                  "pow"}

# name -> (arguments, keyword arguments); the same call on both libraries
CASES: dict[str, tuple[tuple, dict]] = {
    **{f"{n}": ((A,), {}) for n in UNARY},
    "acosh": ((BIG,), {}),
    **{f"{n}": ((A, B if n not in ("pow", "rem") else A + 0.5), {}) for n in BINARY},
    "div_int": ((IA, JA), {}),
    "rem_int": ((IA, JA), {}),
    "integer_pow": ((B, 3), {}),
    "round": ((np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999999999999994, -3.7]),), {}),
    "round_even": ((np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.7]), 1), {}),
    "bitwise_and": ((IA, JA), {}), "bitwise_or": ((IA, JA), {}), "bitwise_xor": ((IA, JA), {}),
    "bitwise_not": ((IA,), {}),
    "select": ((A > 0.5, A, B), {}),
    "clamp": ((-0.5, B, 1.0), {}),
    "convert_element_type": ((B, np.int32), {}),
    "reshape": ((B, (4, 3)), {}), "reshape_dims": ((B, (4, 3), (1, 0)), {}),
    "transpose": ((B, (1, 0)), {}),
    "broadcast_in_dim": ((V[:4], (3, 2, 4), (2,)), {}),
    "broadcast": ((B, (2,)), {}),
    "squeeze": ((B[:, :1], (1,)), {}), "expand_dims": ((B, (0, 3)), {}),
    "rev": ((B, (0, 1)), {}),
    "collapse": ((RNG.standard_normal((2, 3, 4)), 1), {}),
    "concatenate": (([A, B], 1), {}),
    "pad": ((B, 0.5, [(1, 2, 1), (-1, 1, 0)]), {}),
    "pad_crop": ((B, -1.0, [(-1, -1, 0), (0, 2, 2)]), {}),
    "slice": ((B, (0, 1), (3, 4), (2, 2)), {}),
    "slice_in_dim": ((B, 1, 4, 2, 1), {}),
    "index_in_dim": ((B, -1, 1, False), {}),
    "dynamic_slice": ((B, (2, -3), (2, 2)), {}),
    "dynamic_slice_in_dim": ((B, 3, 2, 1), {}),
    "dynamic_index_in_dim": ((B, 1, 0, False), {}),
    "dynamic_update_slice": ((B, A[:2, :3], (5, 2)), {}),
    "dynamic_update_slice_in_dim": ((B, A[:, :2], -1, 1), {}),
    "dynamic_update_index_in_dim": ((B, A[0], 2, 0), {}),
    "reduce_sum": ((B, (0,)), {}), "reduce_prod": ((A, (1,)), {}), "reduce_max": ((B, (0, 1)), {}),
    "reduce_min": ((B, (1,)), {}), "reduce_and": ((A > 0.3, (1,)), {}), "reduce_or": ((A > 0.8, (0,)), {}),
    "argmax": ((B, 1, np.int32), {}), "argmin": ((B, 0, np.int64), {}),
    "iota": ((np.int32, 5), {}), "broadcasted_iota": ((np.float64, (2, 3), 1), {}),
    "full": (((2, 3), 1.5), {}), "full_like": ((IA, 4), {}),
    "cumsum": ((B, 1), {}), "cumsum_rev": ((B, 0, True), {}), "cumprod": ((A, 1), {}),
    "cummax": ((B, 1), {}), "cummin": ((B, 0, True), {}), "cumlogsumexp": ((B, 1), {}),
    "sort": ((B, 1), {}), "sort_keys": (([IA, B], 1, True, 1), {}),
    "top_k": ((B, 2), {}),
    "dot": ((A, B.T), {}), "dot_general": ((A, B), {"dimension_numbers": (((1,), (1,)), ((), ()))}),
    "batch_matmul": ((RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 4, 5))), {}),
}
ALIASES = {"dot_general": "dot",
           "div_int": "div", "rem_int": "rem", "round_even": "round", "reshape_dims": "reshape", "pad_crop": "pad",
           "cumsum_rev": "cumsum", "sort_keys": "sort"}
DIFFERENTIABLE = sorted(n for n in CASES if ALIASES.get(n, n) in SMOOTH | {
    "clamp", "reshape", "transpose", "broadcast_in_dim", "rev", "concatenate", "pad", "slice", "dynamic_slice",
    "dynamic_update_slice", "reduce_sum", "reduce_prod", "reduce_max", "cumsum", "cumprod", "cummax", "cumlogsumexp",
    "dot", "batch_matmul", "select", "integer_pow", "square"}
                        and any(isinstance(a, np.ndarray) and a.dtype == np.float64 for a in CASES[n][0]))


def _call(lib: Any, name: str, args: tuple, kwargs: dict) -> Any:
    fn = getattr(lib, ALIASES.get(name, name))
    return fn(*args, **kwargs)


def _check(got: Any, want: Any, what: str) -> None:
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves), what
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, f"{what}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13, err_msg=what)


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_jax_eagerly_and_under_jit(name: str) -> None:
    args, kwargs = CASES[name]
    want = _call(jax.lax, name, args, kwargs)
    check_eager_and_jit(lambda a: _call(lax, name, a, kwargs), args, want, _check, name)


def _float_positions(args: tuple) -> list[int]:
    return [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype == np.float64]


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradients_match_jax(name: str) -> None:
    args, kwargs = CASES[name]
    pos = _float_positions(args)

    def loss(lib: Any, m: Any) -> Callable[..., Any]:
        def f(*xs: Any) -> Any:
            full = list(args)
            for i, x in zip(pos, xs):
                full[i] = x
            out = _call(lib, name, tuple(full), kwargs)
            return m.sum(m.sin(out) * m.arange(1, out.size + 1).reshape(out.shape))
        return f

    import fungraph.numpy as fnp

    floats = [args[i] for i in pos]
    got = fg.grad(loss(lax, fnp), argnums=tuple(range(len(pos))))(*floats)
    want = jax.grad(loss(jax.lax, jnp), argnums=tuple(range(len(pos))))(*floats)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-10, atol=1e-12, err_msg=name)


def test_dynamic_slices_take_traced_starts_and_batch() -> None:
    x = np.arange(20.0).reshape(4, 5)
    starts = np.array([[0, 4], [3, 1], [-1, 2]])
    f = fg.jit(lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3)))
    for i, j in starts:
        np.testing.assert_array_equal(f(x, i, j), jax.lax.dynamic_slice(x, (i, j), (2, 3)))
    got = fg.vmap(lambda i, j: lax.dynamic_update_slice(x, -np.ones((2, 2)), (i, j)))(starts[:, 0], starts[:, 1])
    want = np.stack([jax.lax.dynamic_update_slice(x, -np.ones((2, 2)), (i, j)) for i, j in starts])
    np.testing.assert_array_equal(got, want)


def test_fori_loop_with_dynamic_update_index() -> None:
    """The common JAX idiom: fill row ``i`` of a buffer in a loop."""
    def fill(m: Any, L: Any) -> Any:
        def body(i: Any, buf: Any) -> Any:
            row = m.full((3,), 1.0) * i.astype(buf.dtype)
            return L.dynamic_update_index_in_dim(buf, row, i, 0)
        return L.fori_loop(0, 4, body, m.zeros((4, 3)))

    import fungraph.numpy as fnp

    np.testing.assert_array_equal(fill(fnp, lax), fill(jnp, jax.lax))
    np.testing.assert_array_equal(fg.jit(lambda: fill(fnp, lax))(), fill(jnp, jax.lax))


@pytest.mark.parametrize("name", ["lt", "le", "gt", "ge"])
def test_lax_ordered_comparisons_refuse_complex_as_jax_does(name: str) -> None:
    """JAX's ``lax.lt`` and kin refuse complex operands; ``numpy.less`` orders them
    lexicographically, and fungraph.numpy keeps that."""
    import fungraph.numpy as fnp

    z = np.array([1 + 2j, 1 - 1j], np.complex64)
    with pytest.raises(TypeError, match=rf"lax.{name} does not accept complex operands \(c64\[2\]\)"):
        getattr(lax, name)(z, z[::-1])
    with pytest.raises(TypeError, match=f"lax.{name}"):
        fg.jit(lambda a: getattr(lax, name)(a, 1.0))(z)
    np_name = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal"}[name]
    np.testing.assert_array_equal(getattr(fnp, np_name)(z, z[::-1]), getattr(np, np_name)(z, z[::-1]))
    np.testing.assert_array_equal(getattr(lax, name)(z.real, z.imag), getattr(np, np_name)(z.real, z.imag))


def test_lax_refuses_mixed_dtypes_and_bad_shapes() -> None:
    with pytest.raises(TypeError, match=r"lax.add requires arguments to have the same dtypes, got f32\[3\], f64\[3\]"):
        lax.add(np.ones(3, np.float32), np.ones(3))
    with pytest.raises(ValueError, match="broadcast_in_dim"):
        lax.broadcast_in_dim(np.ones(3), (2, 4), (1,))
    with pytest.raises(ValueError, match="lax.slice"):
        lax.slice(np.ones((2, 2)), (0, 0), (3, 2))
    with pytest.raises(ValueError, match="lax.pad"):
        lax.pad(np.ones(2), 0.0, [(0, 0, -1)])
    with pytest.raises(TypeError, match="integer_pow"):
        lax.integer_pow(np.ones(2, np.int32), -1)


@pytest.mark.parametrize("config", [[(-2, 0, 0)], [(-1, -1, 1)], [(1, -2, 2)], [(0, -3, 0)], [(-3, 0, 0)]])
def test_pad_crops_as_jax(config: list) -> None:
    """Negative low/high crop; cropping more than the padded axis holds is an error, as in JAX."""
    x = np.arange(2.0)
    try:
        want = jax.lax.pad(x, 0.0, config)
    except (TypeError, ValueError):
        with pytest.raises(ValueError, match="lax.pad: padding_config .* crops more than"):
            lax.pad(x, 0.0, config)
        return
    np.testing.assert_array_equal(lax.pad(x, 0.0, config), want)


def test_cumsum_binds_the_cumsum_primitive_numpy_binds() -> None:
    """``lax.cumsum`` is one ``cumsum`` equation, as ``numpy.cumsum`` stages it (not a scan of
    additions), with the primitive's linear derivative."""
    import fungraph.numpy as fnp

    x = np.arange(6.0).reshape(2, 3)
    graph = fg.make_graph(lambda v: lax.cumsum(v, axis=1, reverse=True))(x)
    assert [e.primitive.name for e in graph.eqns] == ["cumsum"]
    assert [e.primitive.name for e in fg.make_graph(lambda v: fnp.cumsum(v, axis=1))(x).eqns] == ["cumsum"]
    np.testing.assert_array_equal(lax.cumsum(x, 1, True), jax.lax.cumsum(x, 1, True))
    np.testing.assert_array_equal(fg.grad(lambda v: lax.cumsum(v, 1)[0, 0])(x), jax.grad(
        lambda v: jax.lax.cumsum(v, 1)[0, 0])(x))


def test_associative_scan_of_pytrees_matches_jax() -> None:
    """``lax.associative_scan`` (the one scan ``numpy.cumprod`` and ``lax.cummax`` use) over a
    pair of arrays, forwards and in reverse, on a middle axis."""
    a, b = np.arange(1.0, 25.0).reshape(2, 6, 2), np.linspace(-1.0, 1.0, 24).reshape(2, 6, 2)

    def fn(x: Any, y: Any) -> Any:
        return x[0] * y[0], x[1] * y[0] + y[1]

    for reverse in (False, True):
        got = lax.associative_scan(fn, (a, b), reverse=reverse, axis=1)
        want = jax.lax.associative_scan(fn, (a, b), reverse=reverse, axis=1)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12)


@pytest.mark.parametrize("x64", [False, True])
def test_lax_takes_python_scalars_at_the_default_dtype_as_jax(x64: bool) -> None:
    """JAX's lax converts a Python scalar to a (weak) array of the mode's default dtype for its
    kind and then refuses mixed dtypes: ``lax.add(f32, 1.0)`` works with x64 off only, and
    ``lax.add(f32, 1)`` never. fungraph.numpy's functions promote before calling lax."""
    f32, i32, u8 = np.ones(3, np.float32), np.ones(3, np.int32), np.ones(3, np.uint8)
    calls = [("add", f32, 1.0), ("add", f32, 1), ("mul", 2.0, f32), ("max", i32, 0), ("max", i32, 0.5),
             ("sub", u8, 1), ("lt", f32, 1.0), ("eq", i32, 1), ("atan2", f32, 1.0), ("rem", i32, 2),
             ("pow", f32, 2.0), ("shift_left", i32, 1), ("complex", f32, 1.0)]
    for name, a, b in calls:
        with fg.enable_x64(x64), jax.enable_x64(x64):
            try:
                want = getattr(jax.lax, name)(a, b)
            except TypeError:
                with pytest.raises(TypeError, match=f"lax.{name} requires arguments to have the same dtypes"):
                    getattr(lax, name)(a, b)
                continue
            got = getattr(lax, name)(a, b)
        assert got.dtype == want.dtype and getattr(got, "weak_type", False) == want.weak_type, (name, a, b)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    with fg.enable_x64(x64), pytest.raises(TypeError, match="conv_general_dilated requires arguments to have the same"):
        lax.conv_general_dilated(np.ones((1, 1, 3), np.int32), np.ones((1, 1, 2), np.int8), (1,), "VALID")
    with fg.enable_x64(x64):
        assert fnp.add(f32, 1).dtype == np.float32 and fnp.maximum(i32, 0.5).dtype == fnp.result_type(i32, 0.5)


@pytest.mark.parametrize("shapes", [((3,), (4,)), ((2, 3), (3, 2)), ((2, 3), (3,))])
def test_sort_of_operands_of_different_shapes_is_jax_error(shapes: tuple) -> None:
    keys, values = np.arange(np.prod(shapes[0]), dtype=float).reshape(shapes[0]), np.ones(shapes[1], np.int32)
    for lib in (jax, fg):
        with pytest.raises(TypeError, match="Arguments to sort must have equal shapes"):
            lib.lax.sort_key_val(keys, values)
        with pytest.raises(TypeError, match="Arguments to sort must have equal shapes"):
            lib.lax.sort((keys, values), num_keys=1)
