"""The wider numpy API (``fungraph.testing.op_records_more`` and ``op_records_extra``): every
row against numpy eagerly and staged, its derivatives against finite differences (float64), under jit, and under vmap
against a Python loop; plus a few direct checks (isinstance, lists, conventions)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import dtypes
from fungraph.testing.op_records_extra import EXTRA_RECORDS
from fungraph.testing.op_records_more import MORE_RECORDS
from fungraph.testing.strategies import random_array
from tests.helpers import (
    check_derivatives,
    check_jit_against_eager,
    check_values,
    check_vmap_against_loop,
    check_zero_tangents,
)

ALL_RECORDS = MORE_RECORDS + EXTRA_RECORDS
RECORDS = {r.name: r for r in ALL_RECORDS}
assert len(RECORDS) == len(ALL_RECORDS), "op record names must be unique"
DIFFERENTIABLE = [r.name for r in ALL_RECORDS if r.differentiable and "no_grad" not in r.tags]
NON_DIFFERENTIABLE = [r.name for r in ALL_RECORDS
                      if not r.differentiable and any(dtypes.is_float(d) for d in r.dtypes)]


@pytest.mark.parametrize("name", list(RECORDS))
@settings(max_examples=10)
@given(data=st.data())
def test_matches_numpy_eager_and_staged(name: str, data: st.DataObject) -> None:
    check_values(data, RECORDS[name])


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@settings(max_examples=4)
@given(data=st.data())
def test_derivatives_match_finite_differences(name: str, data: st.DataObject) -> None:
    rec = RECORDS[name]
    check_derivatives(data, rec, 1 if "grad1" in rec.tags else rec.grad_order)


@pytest.mark.parametrize("name", NON_DIFFERENTIABLE)
@settings(max_examples=2)
@given(data=st.data())
def test_non_differentiable_rows_have_zero_tangents(name: str, data: st.DataObject) -> None:
    check_zero_tangents(data, RECORDS[name])


@pytest.mark.parametrize("name", list(RECORDS))
@settings(max_examples=4)
@given(data=st.data())
def test_jit_matches_eager(name: str, data: st.DataObject) -> None:
    check_jit_against_eager(data, RECORDS[name])


@pytest.mark.parametrize("name", list(RECORDS))
@settings(max_examples=8)
@given(data=st.data())
def test_vmap_matches_a_python_loop(name: str, data: st.DataObject) -> None:
    check_vmap_against_loop(data, RECORDS[name])


@pytest.mark.parametrize("name", ["sort", "cumsum", "cumprod", "eigh", "svd", "inv", "cholesky", "qr", "pad_reflect"])
@settings(max_examples=2)
@given(data=st.data())
def test_per_example_gradients(name: str, data: st.DataObject) -> None:
    rec = RECORDS[name]
    shps = data.draw(rec.shapes, label="shapes")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1), label="seed"))
    xs = np.stack([random_array(rng, shps[0], np.float64, *rec.domain(0, shps)) for _ in range(3)])
    rest = tuple(random_array(rng, s, np.float64, *rec.domain(i + 1, shps)) for i, s in enumerate(shps[1:]))

    def loss(x, *others):
        return fnp.sum(fnp.sin(rec.fun(x, *others)))

    got = fg.vmap(fg.grad(loss), in_axes=(0,) + (None,) * len(rest))(xs, *rest)
    want = np.stack([fg.grad(loss)(x, *rest) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


# --- direct checks ---------------------------------------------------------------------------------


def test_ndarray_isinstance_covers_numpy_arrays_and_tracers() -> None:
    seen = []

    def f(x):
        seen.append(isinstance(x, fnp.ndarray))
        return x * 2

    fg.jit(f)(np.ones(3))
    fg.grad(lambda x: fnp.sum(f(x)))(np.ones(3))
    assert seen and all(seen)
    assert isinstance(np.zeros(2), fnp.ndarray)
    assert not isinstance([1.0], fnp.ndarray)
    with pytest.raises(TypeError):
        fnp.ndarray((2,))


def test_list_arguments_like_numpy() -> None:
    def f(a, b):
        return fnp.mean([a, b]) + fnp.sum(fnp.hstack([a, b])) + fnp.max(fnp.stack((a, b)))

    a, b = np.float64(1.5), np.float64(-0.5)
    want = np.mean([a, b]) + np.sum(np.hstack([a, b])) + np.max(np.stack((a, b)))
    np.testing.assert_allclose(fg.jit(f)(a, b), want)
    g = fg.grad(f, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(g, (2.5, 1.5))


def test_round_is_half_to_even() -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999999999999994, np.inf, -np.inf, np.nan])
    np.testing.assert_array_equal(fnp.round(x), np.round(x))
    np.testing.assert_array_equal(fg.jit(fnp.round)(x), np.round(x))


def test_fmax_fmin_nan_conventions() -> None:
    x = np.array([np.nan, 1.0, np.nan, 2.0])
    y = np.array([0.0, np.nan, np.nan, 3.0])
    np.testing.assert_array_equal(fnp.fmax(x, y), np.fmax(x, y))
    np.testing.assert_array_equal(fnp.fmin(x, y), np.fmin(x, y))
    np.testing.assert_array_equal(fnp.maximum(x, y), np.maximum(x, y))


def test_logaddexp_infinities_and_tie_gradient() -> None:
    x = np.array([-np.inf, np.inf, 0.0, -np.inf])
    y = np.array([-np.inf, np.inf, -np.inf, 1.0])
    np.testing.assert_array_equal(fnp.logaddexp(x, y), np.logaddexp(x, y))
    gx, gy = fg.grad(lambda a, b: fnp.sum(fnp.logaddexp(a, b)), argnums=(0, 1))(np.zeros(2), np.zeros(2))
    np.testing.assert_allclose(gx, 0.5)
    np.testing.assert_allclose(gy, 0.5)


def test_sort_gradient_follows_the_permutation() -> None:
    x = np.array([3.0, -1.0, 2.0, 0.5])
    w = np.array([1.0, 10.0, 100.0, 1000.0])
    g = fg.grad(lambda x: fnp.sum(fnp.sort(x) * w))(x)
    np.testing.assert_array_equal(g, w[np.argsort(np.argsort(x))])


def test_cumsum_transpose_is_reversed_cumsum() -> None:
    x = np.arange(5.0)
    ct = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    _, pullback = fg.vjp(lambda x: fnp.cumsum(x), x)
    (g,) = pullback(ct)
    np.testing.assert_array_equal(g, np.cumsum(ct[::-1])[::-1])


def test_linalg_batched_over_leading_axes_and_namedtuples() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 4, 4))
    spd = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)
    w, v = fnp.linalg.eigh(spd)
    ref = np.linalg.eigh(spd)
    np.testing.assert_allclose(w, ref.eigenvalues, rtol=1e-12)
    assert fnp.linalg.eigh(spd).eigenvalues is not None
    np.testing.assert_allclose(fnp.linalg.inv(spd), np.linalg.inv(spd), rtol=1e-10)
    np.testing.assert_allclose(fnp.linalg.cholesky(spd), np.linalg.cholesky(spd), rtol=1e-12)
    sign, logdet = fnp.linalg.slogdet(spd)
    np.testing.assert_allclose(logdet, np.linalg.slogdet(spd).logabsdet, rtol=1e-12)
    u, s, vt = fnp.linalg.svd(a)
    np.testing.assert_allclose(u @ (s[..., None] * vt), a, atol=1e-12)


def test_gradient_of_logdet_is_inverse_transpose() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    g = fg.grad(lambda a: fnp.linalg.slogdet(a)[1])(a)
    np.testing.assert_allclose(g, np.linalg.inv(a).T, rtol=1e-10)
    g = fg.grad(lambda a: fnp.linalg.det(a))(a)
    np.testing.assert_allclose(g, np.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-10)


def test_qr_of_wide_matrix_has_values_and_jaxs_derivative() -> None:
    """JAX's rule for m < n: the thin rule on the leading square block, then dR_2 = dQ^H A_2 + Q^H dA_2."""
    from tests.helpers import jax_or_skip

    jax, jnp = jax_or_skip()
    a = np.arange(6.0).reshape(2, 3) + np.eye(2, 3)
    q, r = fnp.linalg.qr(a)
    np.testing.assert_allclose(q @ r, a, atol=1e-12)
    got = fg.grad(lambda a: fnp.sum(fnp.linalg.qr(a)[1] ** 2) + fnp.sum(fnp.linalg.qr(a)[0]))(a)
    want = jax.grad(lambda a: jnp.sum(jnp.linalg.qr(a)[1] ** 2) + jnp.sum(jnp.linalg.qr(a)[0]))(a)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_fft_frequency_helpers() -> None:
    np.testing.assert_array_equal(fnp.fft.fftfreq(5, 0.1), np.fft.fftfreq(5, 0.1))
    np.testing.assert_array_equal(fnp.fft.rfftfreq(6), np.fft.rfftfreq(6))


R_C_CASES = [
    lambda m, a, b, M: m.r_[a, b],
    lambda m, a, b, M: m.r_[a, 0, 0, b],
    lambda m, a, b, M: m.r_[-1:1:6j, [0.0] * 3, 5, 6],
    lambda m, a, b, M: m.r_[1:5:2, a],
    lambda m, a, b, M: m.c_[a, b],
    lambda m, a, b, M: m.c_[M, M],
    lambda m, a, b, M: m.c_[a, 0:3],
    lambda m, a, b, M: m.r_["-1", M, M],
    lambda m, a, b, M: m.r_["0,2", a, b],
    lambda m, a, b, M: m.r_["0,2,0", a, b],
    lambda m, a, b, M: m.r_["1,2,0", a, b],
]


@pytest.mark.parametrize("case", range(len(R_C_CASES)))
def test_r_and_c_match_numpy_eagerly_and_under_jit(case: int) -> None:
    rng = np.random.default_rng(case)
    a, b = rng.standard_normal((2, 3))
    M = rng.standard_normal((2, 3)).astype(np.float32)
    fun = R_C_CASES[case]
    want = fun(np, a, b, M)
    for got in (fun(fnp, a, b, M), fg.jit(lambda a, b, M: fun(fnp, a, b, M))(a, b, M)):
        got = np.asarray(got)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_r_is_differentiable_and_rejects_matrix_directives() -> None:
    x = np.arange(3.0)
    np.testing.assert_allclose(fg.grad(lambda x: fnp.sum(fnp.r_[x, 2.0 * x] ** 2))(x), 10 * x)
    with pytest.raises(ValueError, match="matrix directive 'r'"):
        fnp.r_["r", x]
    with pytest.raises(ValueError, match="unknown directive 'x'"):
        fnp.r_["x", x]
