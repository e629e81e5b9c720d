"""Defects found by probing as a hostile user would (issue #36): silent wrong answers, edge
derivatives, and bad input that must raise a clear error. Each case is checked against JAX
where JAX defines the behaviour, or against the CPU engine for the OpenCL backend."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from fungraph.testing.strategies import Program, programs
from fungraph.tree_util import tree_flatten
from tests.helpers import jax_or_skip

# --- OpenCL: gradients of indexing by a traced scalar (#36 item 1) ---------------------------------

_RNG = np.random.default_rng(36)
_X2 = _RNG.standard_normal((3, 4))
_X3 = _RNG.standard_normal((3, 2, 4))
_W = _RNG.standard_normal(4)

#: Losses reading or writing ``x`` at a traced scalar ``i`` (0, 1 or 2): their gradients scatter
#: rows by a computed index, which the OpenCL engine once read through the work-item id.
TRACED_INDEXING = {
    "x[i]": (lambda x, i: fnp.sum(_W * x[i] ** 2), _X2),
    "x[i, :]": (lambda x, i: fnp.sum(_W * x[i, :] ** 2), _X2),
    "x[:, i]": (lambda x, i: fnp.sum(x[:, i] ** 2 * _W[:3]), _X2),
    "x[i, i]": (lambda x, i: x[i, i] ** 2, _X2),
    "x[-1 - i]": (lambda x, i: fnp.sum(_W * x[-1 - i] ** 2), _X2),
    "rank 3 x[i]": (lambda x, i: fnp.sum(x[i] ** 2 * _W), _X3),
    "rank 3 x[:, :, i]": (lambda x, i: fnp.sum(x[:, :, i] ** 3), _X3),
    "dynamic_slice": (lambda x, i: fnp.sum(lax.dynamic_slice(x, (i, 0), (2, 4)) ** 2), _X2),
    "dynamic_index_in_dim": (lambda x, i: fnp.sum(lax.dynamic_index_in_dim(x, i, 1, keepdims=False) ** 2), _X2),
    "take": (lambda x, i: fnp.sum(fnp.take(x, i, axis=0) ** 2 * _W), _X2),
    "at[i].set": (lambda x, i: fnp.sum(x.at[i].set(fnp.sin(x[0])) ** 2), _X2),
    "at[i].add": (lambda x, i: fnp.sum(x.at[i].add(_W * x[i]) ** 2), _X2),
    "at[i].multiply": (lambda x, i: fnp.sum(x.at[i].multiply(_W) ** 2), _X2),
    "dynamic_update_slice": (lambda x, i: fnp.sum(lax.dynamic_update_slice(x, fnp.tanh(x[:1]), (i, 0)) ** 2), _X2),
    "fori_loop at[k].set": (lambda x, i: fnp.sum(lax.fori_loop(
        0, 3, lambda k, c: c.at[k].set(fnp.sin(c[k - i]) * _W), x) ** 2), _X2),
    "fori_loop at[k].add": (lambda x, i: fnp.sum(lax.fori_loop(
        0, 3, lambda k, c: c.at[k].add(c[k] * x[i]), x) ** 2), _X2),
    "fori_loop from i": (lambda x, i: fnp.sum(lax.fori_loop(
        i, 3, lambda k, c: c.at[k].set(fnp.sin(c[k - 1]) * 2.0), x) ** 2), _X2),
}


@pytest.mark.usefixtures("require_opencl")
@pytest.mark.parametrize("name", list(TRACED_INDEXING))
def test_opencl_gradient_of_traced_scalar_indexing_matches_the_cpu(name: str) -> None:
    f, x = TRACED_INDEXING[name]
    for i in (0, 1, 2):
        want = np.asarray(fg.jit(fg.grad(f))(x, i))
        got = np.asarray(fg.jit(fg.grad(f), backend="opencl")(x, i))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"{name}, i={i}")


#: The same with an index known when compiling (a literal): the OpenCL engine once typed a
#: scalar constant ``(1,)``, so the scatter read the first update for every element of a row.
LITERAL_INDEXING = {
    "take(x, 1)": lambda x: fnp.sum(fnp.tanh(fnp.take(x, 1, axis=0)) * _W),
    "take(x, 2, axis=1)": lambda x: fnp.sum(fnp.tanh(fnp.take(x, 2, axis=1)) * _W[:3]),
    "index folded to a literal": lambda x: fnp.sum(fnp.tanh(x[(fnp.max(x) > 99.0).astype(np.int32) * 2]) * _W),
}


@pytest.mark.usefixtures("require_opencl")
@pytest.mark.parametrize("name", list(LITERAL_INDEXING))
def test_opencl_gradient_of_literal_indexing_matches_the_cpu(name: str) -> None:
    f = LITERAL_INDEXING[name]
    want = np.asarray(fg.jit(fg.grad(f))(_X2))
    got = np.asarray(fg.jit(fg.grad(f), backend="opencl")(_X2))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.usefixtures("require_opencl")
def test_opencl_gradient_of_a_row_at_a_traced_index_goes_to_that_row() -> None:
    """The probe's case: ``sum(w * x[i])`` with ``x`` 3x2 has gradient ``w`` in row ``i``."""
    w = np.array([10.0, 20.0])
    x = np.arange(6.0).reshape(3, 2)
    got = fg.jit(fg.grad(lambda x, i: fnp.sum(w * x[i])), backend="opencl")(x, 1)
    np.testing.assert_array_equal(np.asarray(got), [[0, 0], [10, 20], [0, 0]])


@pytest.mark.usefixtures("require_opencl")
@settings(max_examples=30, deadline=None)
@given(prog=programs(max_eqns=6, control_ops=("index_traced", "fori_update", "take_perm")))
def test_random_program_gradients_on_opencl_match_the_cpu(prog: Program) -> None:
    """Gradients of random programs (gathers and updates at traced scalar indices among the
    steps) on OpenCL against the CPU engine."""

    def loss(*xs):
        return sum(fnp.sum(o) for o in prog.fun(*xs))

    g = fg.grad(loss, argnums=tuple(range(len(prog.args))))
    got = fg.jit(g, backend="opencl")(*prog.args)
    want = fg.jit(g)(*prog.args)
    for a, b in zip(tree_flatten(got)[0], tree_flatten(want)[0]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-4, err_msg=repr(prog))


# --- cond and switch predicates (#36 item 2) ---------------------------------------------------

PREDICATES = [0.5, -1, 2**32, np.nan, -0.0, 0.0, np.float32(0.25), True, False, np.uint8(0), np.int64(-3)]


@pytest.mark.parametrize("pred", PREDICATES, ids=repr)
def test_cond_takes_any_nonzero_number_as_true_eagerly_and_jitted(pred) -> None:
    jax, _ = jax_or_skip()
    want = int(jax.lax.cond(pred, lambda: 1, lambda: 0))
    assert want == (1 if pred else 0)
    assert int(lax.cond(pred, lambda: 1, lambda: 0)) == want
    assert int(fg.jit(lambda p: lax.cond(p, lambda: 1, lambda: 0))(pred)) == want


def test_cond_on_a_traced_negative_sum_takes_the_true_branch() -> None:
    jax, jnp = jax_or_skip()
    v = np.array([-1.0, -2.0])

    def f(cond, m):
        return lambda v: cond(m.sum(v), lambda u: u * 2.0, lambda u: u - 1.0, v)

    want = np.asarray(jax.jit(f(jax.lax.cond, jnp))(v))
    np.testing.assert_array_equal(np.asarray(fg.jit(f(lax.cond, fnp))(v)), want)
    np.testing.assert_array_equal(np.asarray(f(lax.cond, fnp)(v)), want)


@pytest.mark.parametrize("index", [1.7, True, 1j, np.float32(1.0)], ids=repr)
def test_switch_on_a_non_integer_index_is_a_type_error_as_in_jax(index) -> None:
    jax, _ = jax_or_skip()
    branches = [lambda: 0, lambda: 1, lambda: 2]
    with pytest.raises(TypeError):
        jax.lax.switch(index, branches)
    with pytest.raises(TypeError, match="(?s)switch index must be an integer.*at .*test_reliability.py"):
        lax.switch(index, branches)
    with pytest.raises(TypeError, match="switch index must be an integer"):
        fg.jit(lambda i: lax.switch(i, branches))(index)


@pytest.mark.parametrize("index", [-1, 5, 2**32 + 1, np.uint32(1), np.int64(2**40)], ids=repr)
def test_switch_on_an_integer_index_clamps_as_jax(index) -> None:
    jax, _ = jax_or_skip()
    branches = [lambda: 0, lambda: 1, lambda: 2]
    assert int(lax.switch(index, branches)) == int(jax.lax.switch(index, branches))


def test_cond_on_a_complex_predicate_is_a_type_error_as_in_jax() -> None:
    jax, _ = jax_or_skip()
    with pytest.raises(TypeError):
        jax.lax.cond(1j, lambda: 1, lambda: 0)
    with pytest.raises(TypeError, match="cond predicate must be a bool or a real number.*complex128"):
        lax.cond(1j, lambda: 1, lambda: 0)


# --- derivatives at special points (#36 items 6 and 8) --------------------------------------------


def _derivative(grad, f, order: int):
    for _ in range(order):
        f = grad(f)
    return f


def _special_points(fnp_, lax_, nn_, special_):
    """(name, function, point, orders): each derivative at a point where the function's formula
    switches (a select, a max, an abs) or is singular, as both libraries spell the function."""
    return [
        ("sinc at 0", fnp_.sinc, 0.0, (1, 2, 3, 4)),
        ("sinc at 1", fnp_.sinc, 1.0, (1, 2)),
        ("logaddexp at a tie", lambda x: fnp_.logaddexp(x, 0.0), 0.0, (1, 2, 3)),
        ("logaddexp2 at a tie", lambda x: fnp_.logaddexp2(x, 0.0), 0.0, (1, 2)),
        ("softplus at 0", nn_.softplus, 0.0, (1, 2, 3)),
        ("log_sigmoid at 0", nn_.log_sigmoid, 0.0, (1, 2)),
        ("hypot(x, 1) at 0", lambda x: fnp_.hypot(x, 1.0), 0.0, (1, 2, 3)),
        ("hypot(x, 2) at 2", lambda x: fnp_.hypot(x, 2.0), 2.0, (1,)),
        ("xlogy(x, 2) at 0", lambda x: special_.xlogy(x, 2.0), 0.0, (1, 2)),
        ("xlog1py(x, 2) at 0", lambda x: special_.xlog1py(x, 2.0), 0.0, (1, 2)),
        ("entr at 0", special_.entr, 0.0, (1, 2, 3)),
        ("entr at 1", special_.entr, 1.0, (1, 2, 3)),
        ("elu at 0", nn_.elu, 0.0, (1, 2)),
        ("selu at 0", nn_.selu, 0.0, (1, 2)),
        ("gelu at 0", nn_.gelu, 0.0, (1, 2, 3)),
        ("relu at 0", nn_.relu, 0.0, (1, 2)),
        ("cbrt at 0", fnp_.cbrt, 0.0, (1, 2)),
        ("arcsinh at 0", fnp_.arcsinh, 0.0, (1, 2, 3)),
        ("arctanh at 0", fnp_.arctanh, 0.0, (1, 2, 3)),
        ("sqrt at 0", fnp_.sqrt, 0.0, (1, 2)),
        ("x ** 2 at 0", lambda x: fnp_.power(x, 2.0), 0.0, (1, 2)),
        ("0 ** y at 2", lambda y: fnp_.power(0.0, y), 2.0, (1, 2)),
        ("i0e at 0", special_.i0e, 0.0, (1, 2)),
        ("arcsin at 1", fnp_.arcsin, 1.0, (1, 2, 3)),
        ("arcsin at -1", fnp_.arcsin, -1.0, (1, 2)),
        ("arccos at 1", fnp_.arccos, 1.0, (1, 2)),
        ("arccosh at 1", fnp_.arccosh, 1.0, (1, 2)),
        ("arctanh at 1", fnp_.arctanh, 1.0, (1,)),
        ("rint at inf", fnp_.rint, np.inf, (1,)),
        ("rint at nan", fnp_.rint, np.nan, (1,)),
        ("round at -inf", fnp_.round, -np.inf, (1,)),
        ("round at nan", fnp_.round, np.nan, (1,)),
    ]


def _ours():
    from fungraph import nn
    from fungraph.scipy import special

    return _special_points(fnp, lax, nn, special)


@pytest.mark.parametrize("case", range(len(_ours())), ids=[c[0] for c in _ours()])
def test_derivatives_at_special_points_match_jax(case: int) -> None:
    """Each order of derivative, eagerly and jitted, against JAX's at a point where a formula
    switches branch or is singular (an exact value there: sinc''(0) = -pi^2/3, entr'(0) = inf,
    arcsin'(1) = inf, rint'(inf) = 0)."""
    jax, jnp = jax_or_skip()
    import jax.scipy.special as jss

    name, f, x, orders = _ours()[case]
    jf = _special_points(jnp, jax.lax, jax.nn, jss)[case][1]
    for order in orders:
        want = float(_derivative(jax.grad, jf, order)(x))
        got = float(_derivative(fg.grad, f, order)(x))
        jitted = float(fg.jit(_derivative(fg.grad, f, order))(x))
        for value, how in ((got, "eager"), (jitted, "jit")):
            np.testing.assert_allclose(value, want, rtol=1e-9, atol=1e-12, err_msg=f"{name}: order {order}, {how}")


def test_sinc_second_derivative_at_zero_is_exact() -> None:
    got = float(fg.grad(fg.grad(fnp.sinc))(0.0))
    assert got == pytest.approx(-np.pi**2 / 3, rel=1e-15)


def test_bessel_i1_derivatives_at_zero_are_its_series() -> None:
    """I1(x) = x/2 + x^3/16 + x^5/384 + ...: derivatives 1/2, 0, 3/8, 0, 5/16 at 0 (JAX's third
    is 1.5); the derivative I0 - I1/x takes I1/x at 0 from its series."""
    from fungraph.scipy.special import i1

    f = i1
    for want in (0.5, 0.0, 3 / 8, 0.0, 5 / 16):
        f = fg.grad(f)
        assert float(f(0.0)) == pytest.approx(want, abs=1e-15)
        assert float(fg.jit(f)(0.0)) == pytest.approx(want, abs=1e-15)


@pytest.mark.parametrize("x", [0.0, 2.0, -2.0, 3.0])
def test_hypot_second_derivative_is_exact_where_the_operands_tie_or_vanish(x: float) -> None:
    """d^2/dx^2 sqrt(x^2 + 4) = 4 / (x^2 + 4)^(3/2); at |x| = 2 the two magnitudes tie (JAX's
    max/min split the derivative there and give 0)."""
    got = float(fg.grad(fg.grad(lambda v: fnp.hypot(v, 2.0)))(x))
    assert got == pytest.approx(4.0 / (x * x + 4.0) ** 1.5, rel=1e-12)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("x", [[-np.inf, 0.0, 1.0], [-np.inf, -np.inf, 2.0], [[-np.inf, 1.0], [0.5, -np.inf]]], ids=str)
def test_softmax_gradient_at_minus_infinity_is_the_same_eager_jitted_and_in_jax(fn: str, x: list) -> None:
    jax, jnp = jax_or_skip()
    from fungraph import nn

    x = np.asarray(x)
    w = np.linspace(-1.0, 2.0, x.shape[-1])

    def loss(nn_, m):
        return lambda v: m.sum(m.where(m.isfinite(v), getattr(nn_, fn)(v), 0.0) * w)

    want = np.asarray(jax.grad(loss(jax.nn, jnp))(x))
    np.testing.assert_allclose(np.asarray(fg.grad(loss(nn, fnp))(x)), want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.asarray(fg.jit(fg.grad(loss(nn, fnp)))(x)), want, rtol=1e-12, atol=1e-15)


SINGULAR = {
    "rank 1": np.outer([1.0, 2.0, 3.0], [1.0, 1.0, 2.0]),
    "rank 2": np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]]),
    "zero": np.zeros((2, 2)),
    "stack": np.stack([np.outer([1.0, 2.0], [3.0, 4.0]), np.eye(2)]),
}


@pytest.mark.parametrize("name", list(SINGULAR))
def test_gradient_of_det_at_a_singular_matrix_is_the_adjugate_as_jax(name: str) -> None:
    jax, jnp = jax_or_skip()
    a = SINGULAR[name]
    want = np.asarray(jax.grad(lambda m: jnp.sum(jnp.linalg.det(m)))(a))
    f = lambda m: fnp.sum(fnp.linalg.det(m))  # noqa: E731
    np.testing.assert_allclose(np.asarray(fg.grad(f)(a)), want, atol=1e-12)
    np.testing.assert_allclose(np.asarray(fg.jit(fg.grad(f))(a)), want, atol=1e-12)


def test_hessian_of_det_at_an_invertible_matrix_matches_jax() -> None:
    jax, jnp = jax_or_skip()
    a = np.random.default_rng(8).standard_normal((3, 3))
    want = np.asarray(jax.hessian(jnp.linalg.det)(a))
    np.testing.assert_allclose(np.asarray(fg.hessian(fnp.linalg.det)(a)), want, rtol=1e-10, atol=1e-12)


# --- invalid input: clear errors, as JAX (#36 items 9 and 10) --------------------------------------

_M = np.ones((2, 3))

#: (name, call with fungraph, call with JAX, the error type both raise)
BAD_INPUT = [
    ("vmap out_axes=-5", lambda fg_, m: fg_.vmap(lambda v: v * 2, out_axes=-5)(_M), ValueError),
    ("vmap out_axes=2", lambda fg_, m: fg_.vmap(lambda v: v * 2, out_axes=2)(_M), ValueError),
    ("vmap out_axes=1.0", lambda fg_, m: fg_.vmap(lambda v: v * 2, out_axes=1.0)(_M), TypeError),
    ("vmap axis_size=5 over size 2", lambda fg_, m: fg_.vmap(lambda v: v * 2, axis_size=5)(_M), ValueError),
    ("sum(axis=1.7)", lambda fg_, m: m.sum(_M, axis=1.7), TypeError),
    ("sum(axis=(0, 1.0))", lambda fg_, m: m.sum(_M, axis=(0, 1.0)), TypeError),
    ("mean(axis=1.7)", lambda fg_, m: m.mean(_M, axis=1.7), TypeError),
    ("zeros((2.7,))", lambda fg_, m: m.zeros((2.7,)), TypeError),
    ("zeros(2.0)", lambda fg_, m: m.zeros(2.0), TypeError),
    ("ones((2, 1.5))", lambda fg_, m: m.ones((2, 1.5)), TypeError),
    ("full((2.7,), 1.0)", lambda fg_, m: m.full((2.7,), 1.0), TypeError),
    ("full(None, 1.0)", lambda fg_, m: m.full(None, 1.0), TypeError),
    ("empty((2.7,))", lambda fg_, m: m.empty((2.7,)), TypeError),
    ("grad of [scalar]", lambda fg_, m: fg_.grad(lambda v: [m.sum(v)])(_M), TypeError),
    ("grad of {'a': scalar}", lambda fg_, m: fg_.grad(lambda v: {"a": m.sum(v)})(_M), TypeError),
    ("grad of (scalar,)", lambda fg_, m: fg_.grad(lambda v: (m.sum(v),))(_M), TypeError),
    ("value_and_grad of [scalar]", lambda fg_, m: fg_.value_and_grad(lambda v: [m.sum(v)])(_M), TypeError),
]


@pytest.mark.parametrize("case", BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_raises_the_error_jax_raises(case) -> None:
    jax, jnp = jax_or_skip()
    name, call, error = case
    with pytest.raises(error):
        call(jax, jnp)
    with pytest.raises(error) as info:
        call(fg, fnp)
    message = str(info.value)
    assert any(part in message for part in ("must be", "out of bounds", "axis_size=", "holding one")), message


def test_vmap_errors_name_the_shapes() -> None:
    with pytest.raises(ValueError, match=r"out_axes -5 .* rank 2 \(shape \(2, 3\)"):
        fg.vmap(lambda v: v * 2, out_axes=-5)(_M)
    with pytest.raises(ValueError, match=r"axis_size=5 .* shape \(2, 3\): size 2"):
        fg.vmap(lambda v: v * 2, axis_size=5)(_M)
    assert fg.vmap(lambda v: v * 2, axis_size=2)(_M).shape == (2, 3)
    assert fg.vmap(lambda v: v * 2, out_axes=-2)(_M).shape == (2, 3)


@pytest.mark.parametrize("shape, axis", [((0, 3), 0), ((3, 0), 1), ((2, 0, 3), (1, 2)), ((0, 3), None)])
def test_gradient_of_prod_over_an_empty_axis_is_empty_as_jax(shape, axis) -> None:
    jax, jnp = jax_or_skip()
    x = np.ones(shape)
    want = np.asarray(jax.grad(lambda v: jnp.sum(jnp.prod(v, axis=axis)))(x))
    f = fg.grad(lambda v: fnp.sum(fnp.prod(v, axis=axis)))
    for got in (f(x), fg.jit(f)(x)):
        assert np.asarray(got).shape == want.shape


@pytest.mark.parametrize("rank", [32, 33, 40])
def test_vmap_over_high_rank_arrays_as_jax(rank: int) -> None:
    jax, _ = jax_or_skip()
    x = np.full((2,) + (1,) * (rank - 1), 1.5)
    want = np.asarray(jax.vmap(lambda v: v * 2 + v)(x))
    np.testing.assert_array_equal(np.asarray(fg.vmap(lambda v: v * 2 + v)(x)), want)


def test_reshape_past_64_dimensions_fails_at_trace_time() -> None:
    with pytest.raises(fg.ShapeError, match="rank 65 exceeds the maximum of 64"):
        fg.make_graph(lambda v: fnp.reshape(v, (1,) * 65))(np.ones(1))
    with pytest.raises(fg.ShapeError, match="rank 65 exceeds"):
        fg.make_graph(lambda v: fnp.broadcast_to(v, (1,) * 65))(np.ones(1))


@pytest.mark.parametrize("dtype", [">f8", ">f4", ">i8", ">i4"])
def test_jit_accepts_big_endian_input_as_eager_code_does(dtype: str) -> None:
    x = np.arange(4).astype(dtype)
    want = np.arange(4).astype(dtype[1:]) * 2 + 1
    eager = np.asarray(fnp.add(fnp.multiply(x, 2), 1))
    jitted = np.asarray(fg.jit(lambda v: v * 2 + 1)(x))
    for got in (eager, jitted):
        np.testing.assert_array_equal(got, want)
        assert got.dtype.byteorder in "=|"
