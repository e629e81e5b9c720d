"""``fungraph.scipy.signal`` (convolve/correlate, 1-d to 3-d, and the 2-d variants with
boundaries) against ``scipy.signal``: values for hypothesis-drawn shapes and dtypes, derivatives
against finite differences, jit, and vmap against a Python loop. ``fungraph.scipy.integrate``
(odeint with its adjoint gradient) against SciPy, closed forms and finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate as si
import scipy.linalg as sla
import scipy.signal as ss
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
from fungraph.scipy import integrate as fi
from fungraph.scipy import signal as fs
from fungraph.testing import arrays, check_grads

MODES = ("full", "same", "valid")
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _tol(dtype: np.dtype) -> float:
    return 2e-4 if dtype == np.float32 else 1e-10


@st.composite
def _pair(draw: st.DrawFn, ndims: tuple[int, ...] = (1, 2, 3), modes: tuple[str, ...] = MODES) -> tuple:
    """(in1, in2, mode) of one rank and dtype; "valid" gets shapes where one input is at least
    as large as the other in every dimension (in either order)."""
    nd = draw(st.sampled_from(ndims), label="ndim")
    dtype = draw(st.sampled_from(FLOATS), label="dtype")
    mode = draw(st.sampled_from(modes), label="mode")
    s1 = draw(st.lists(st.integers(1, 5), min_size=nd, max_size=nd), label="shape1")
    s2 = draw(st.lists(st.integers(1, 4), min_size=nd, max_size=nd), label="shape2")
    if mode == "valid":
        big = [max(a, b) for a, b in zip(s1, s2)]
        small = [min(a, b) for a, b in zip(s1, s2)]
        s1, s2 = (big, small) if draw(st.booleans(), label="in1 larger") else (small, big)
    a = draw(arrays(dtype, tuple(s1), -2.0, 2.0), label="in1")
    b = draw(arrays(dtype, tuple(s2), -2.0, 2.0), label="in2")
    return a, b, mode


def _scipy(name: str, a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    return getattr(ss, name)(a, b, mode, method="direct")


# --- values -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@settings(max_examples=25)
@given(case=_pair())
def test_nd_values_match_scipy(name: str, case: tuple) -> None:
    a, b, mode = case
    got = getattr(fs, name)(a, b, mode)
    want = _scipy(name, a, b, mode)
    assert np.asarray(got).dtype == a.dtype
    assert np.shape(got) == want.shape, (a.shape, b.shape, mode)
    np.testing.assert_allclose(np.asarray(got), want, rtol=_tol(a.dtype), atol=_tol(a.dtype))


@pytest.mark.parametrize("name", ["convolve2d", "correlate2d"])
@settings(max_examples=25)
@given(case=_pair(ndims=(2,)), boundary=st.sampled_from(["fill", "wrap", "symm"]),
       fillvalue=st.sampled_from([0.0, 1.5]))
def test_2d_values_match_scipy(name: str, case: tuple, boundary: str, fillvalue: float) -> None:
    a, b, mode = case
    got = getattr(fs, name)(a, b, mode, boundary, fillvalue)
    want = getattr(ss, name)(a, b, mode, boundary, fillvalue)
    assert np.asarray(got).dtype == a.dtype
    np.testing.assert_allclose(np.asarray(got), want, rtol=_tol(a.dtype), atol=_tol(a.dtype))


def test_mixed_and_integer_dtypes_promote() -> None:
    a32 = np.arange(5, dtype=np.float32)
    assert np.asarray(fs.convolve(a32, np.ones(3))).dtype == np.float64
    assert np.asarray(fs.convolve(a32, 2.0 * np.ones(3, np.float32))).dtype == np.float32
    got = fs.correlate(np.arange(6), np.array([1, 2]), "valid")
    np.testing.assert_array_equal(np.asarray(got), ss.correlate(np.arange(6), np.array([1, 2]), "valid"))
    assert np.asarray(got).dtype == np.float64


def test_scalars_multiply() -> None:
    assert float(fs.convolve(np.float64(3.0), np.float64(2.0))) == 6.0


# --- errors -----------------------------------------------------------------------------------


def test_valid_mode_error_names_the_shapes() -> None:
    with pytest.raises(ValueError, match=r"'valid' mode.*\(3, 5\) and \(4, 2\)"):
        fs.convolve(np.ones((3, 5)), np.ones((4, 2)), "valid")
    with pytest.raises(ValueError, match=r"'valid' mode.*\(3, 5\) and \(4, 2\)"):
        fs.correlate2d(np.ones((3, 5)), np.ones((4, 2)), "valid")


def test_bad_arguments_raise_clearly() -> None:
    with pytest.raises(ValueError, match=r"same dimensionality.*\(3,\) and \(2, 2\)"):
        fs.convolve(np.ones(3), np.ones((2, 2)))
    with pytest.raises(ValueError, match="mode flags"):
        fs.correlate(np.ones(3), np.ones(2), "circular")
    with pytest.raises(ValueError, match="method flags"):
        fs.correlate(np.ones(3), np.ones(2), method="overlap")
    with pytest.raises(ValueError, match=r"cannot be empty.*\(0,\)"):
        fs.convolve(np.ones(0), np.ones(2))
    with pytest.raises(ValueError, match=r"2-D arrays.*\(3,\)"):
        fs.convolve2d(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="boundary flags"):
        fs.convolve2d(np.ones((3, 3)), np.ones((2, 2)), boundary="reflect")


# --- transformations --------------------------------------------------------------------------


def _f64(case: tuple) -> tuple:
    a, b, mode = case
    return a.astype(np.float64), b.astype(np.float64), mode


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@settings(max_examples=8)
@given(case=_pair())
def test_nd_derivatives_match_finite_differences(name: str, case: tuple) -> None:
    a, b, mode = _f64(case)
    fun = getattr(fs, name)
    check_grads(lambda x, y: fun(x, y, mode), (a, b), order=2)


@pytest.mark.parametrize("name", ["convolve2d", "correlate2d"])
@settings(max_examples=6)
@given(case=_pair(ndims=(2,)), boundary=st.sampled_from(["fill", "wrap", "symm"]))
def test_2d_derivatives_match_finite_differences(name: str, case: tuple, boundary: str) -> None:
    a, b, mode = _f64(case)
    fun = getattr(fs, name)
    check_grads(lambda x, y, v: fun(x, y, mode, boundary, v), (a, b, np.float64(0.7)), order=1)


@pytest.mark.parametrize("name", ["convolve", "correlate", "convolve2d", "correlate2d"])
@settings(max_examples=6)
@given(case=_pair(ndims=(2,)))
def test_jit_matches_eager(name: str, case: tuple) -> None:
    a, b, mode = case
    fun = getattr(fs, name)
    got = fg.jit(lambda x, y: fun(x, y, mode))(a, b)
    np.testing.assert_allclose(np.asarray(got), np.asarray(fun(a, b, mode)), rtol=_tol(a.dtype), atol=_tol(a.dtype))
    g = fg.jit(fg.grad(lambda x, y: (fun(x, y, mode) ** 2).sum(), argnums=(0, 1)))(a, b)
    want = fg.grad(lambda x, y: (fun(x, y, mode) ** 2).sum(), argnums=(0, 1))(a, b)
    for gi, wi in zip(g, want):
        np.testing.assert_allclose(np.asarray(gi), np.asarray(wi), rtol=10 * _tol(a.dtype), atol=10 * _tol(a.dtype))


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@settings(max_examples=10)
@given(case=_pair(ndims=(1, 2)), size=st.integers(1, 3), which=st.sampled_from(["in1", "in2", "both"]),
       seed=st.integers(0, 2**31 - 1))
def test_vmap_matches_a_loop(name: str, case: tuple, size: int, which: str, seed: int) -> None:
    a, b, mode = case
    fun = getattr(fs, name)
    rng = np.random.default_rng(seed)
    a_batch = np.stack([a + rng.standard_normal(a.shape).astype(a.dtype) for _ in range(size)])
    b_batch = np.stack([b + rng.standard_normal(b.shape).astype(b.dtype) for _ in range(size)])
    axes = {"in1": (0, None), "in2": (None, 0), "both": (0, 0)}[which]
    args = (a_batch if axes[0] == 0 else a, b_batch if axes[1] == 0 else b)
    got = fg.vmap(lambda x, y: fun(x, y, mode), in_axes=axes)(*args)
    want = np.stack([_scipy(name, a_batch[k] if axes[0] == 0 else a, b_batch[k] if axes[1] == 0 else b, mode)
                     for k in range(size)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=_tol(a.dtype), atol=_tol(a.dtype))


def test_gradient_of_a_1d_convolution_is_a_correlation() -> None:
    """d/dx sum(c * convolve(x, w)) = correlate(c, w, "valid") (the adjoint of full convolution)."""
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(7), rng.standard_normal(3)
    c = rng.standard_normal(9)
    g = fg.grad(lambda x: (c * fs.convolve(x, w)).sum())(x)
    np.testing.assert_allclose(np.asarray(g), ss.correlate(c, w, "valid"), rtol=1e-12, atol=1e-12)


# === fungraph.scipy.integrate.odeint ==========================================================

def _decay(y: object, t: object, k: object) -> object:
    return -k * y


def _lotka_volterra(s: object, t: object, a: object, b: object, c: object, d: object) -> object:
    x, y = s[0], s[1]
    return fg.numpy.stack([a * x - b * x * y, -c * y + d * x * y])


def _lotka_volterra_np(s: np.ndarray, t: float, a: float, b: float, c: float, d: float) -> list[float]:
    x, y = s
    return [a * x - b * x * y, -c * y + d * x * y]


LV_T = np.linspace(0.0, 6.0, 13)
LV_Y0 = np.array([1.0, 0.5])
LV_P = (1.5, 1.0, 3.0, 1.0)


def test_exponential_decay_matches_the_closed_form() -> None:
    t = np.linspace(0.0, 3.0, 7)
    y0 = np.array([1.0, -2.0, 0.5])
    ys = fi.odeint(_decay, y0, t, 0.8)
    assert np.shape(ys) == (7, 3) and np.asarray(ys).dtype == np.float64
    np.testing.assert_allclose(np.asarray(ys), np.exp(-0.8 * t)[:, None] * y0, rtol=1e-7, atol=1e-9)
    accepted, rejected = fi._stats(_decay, y0, t, 0.8)
    assert 6 <= accepted < 60 and rejected < accepted


def test_harmonic_oscillator_with_a_pytree_state() -> None:
    w = 2.0

    def oscillator(s: dict, t: object) -> dict:
        return {"x": s["v"], "v": -(w ** 2) * s["x"]}

    t = np.linspace(0.0, 5.0, 11)
    out = fi.odeint(oscillator, {"x": np.float64(1.0), "v": np.float64(0.0)}, t)
    assert set(out) == {"x", "v"}
    np.testing.assert_allclose(np.asarray(out["x"]), np.cos(w * t), atol=1e-6)
    np.testing.assert_allclose(np.asarray(out["v"]), -w * np.sin(w * t), atol=2e-6)


def test_lotka_volterra_matches_scipy() -> None:
    ys = fi.odeint(_lotka_volterra, LV_Y0, LV_T, *LV_P)
    want = si.odeint(_lotka_volterra_np, LV_Y0, LV_T, LV_P, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(ys), want, rtol=1e-6, atol=1e-7)
    loose = fi.odeint(_lotka_volterra, LV_Y0, LV_T, *LV_P, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(loose), want, rtol=1e-2, atol=1e-3)
    assert fi._stats(_lotka_volterra, LV_Y0, LV_T, *LV_P, rtol=1e-4, atol=1e-6)[0] < \
        fi._stats(_lotka_volterra, LV_Y0, LV_T, *LV_P)[0]


@settings(max_examples=6)
@given(n=st.integers(1, 3), seed=st.integers(0, 2**31 - 1))
def test_linear_systems_match_expm_and_its_frechet_derivative(n: int, seed: int) -> None:
    """y' = A y: y(T) = expm(A T) y0, and d(c . y(T))/dA from expm_frechet, for random A."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    y0, c = rng.standard_normal(n), rng.standard_normal(n)
    t = np.array([0.0, 0.4, 1.0])
    ys = fi.odeint(lambda y, t, a: a @ y, y0, t, a)
    for k, tk in enumerate(t):
        np.testing.assert_allclose(np.asarray(ys[k]), sla.expm(a * tk) @ y0, rtol=1e-6, atol=1e-7)
    g = fg.grad(lambda a: c @ fi.odeint(lambda y, t, a: a @ y, y0, t, a)[-1])(a)
    want = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            e = np.zeros((n, n))
            e[i, j] = 1.0
            want[i, j] = c @ sla.expm_frechet(a * t[-1], e * t[-1], compute_expm=False) @ y0
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-6, atol=1e-7)


def _decay_loss(y0: object, t: object, k: object) -> object:
    return (fi.odeint(_decay, y0, t, k) ** 2).sum()


DECAY_ARGS = (np.array([1.0, 2.0]), np.linspace(0.0, 2.0, 5), np.float64(0.7))


def _decay_loss_grads_closed_form(y0: np.ndarray, t: np.ndarray, k: float) -> tuple:
    """L = sum_i |y0|^2 exp(-2 k (t_i - t_0)); ys[0] = y0 does not depend on t_0."""
    e = np.exp(-2 * k * (t - t[0]))
    s = (y0 ** 2).sum()
    t_bar = -2 * k * s * e
    t_bar[0] = 2 * k * s * e[1:].sum()
    return 2 * y0 * e.sum(), t_bar, -2 * s * ((t - t[0]) * e).sum()


def test_decay_gradients_match_the_closed_form() -> None:
    got = fg.grad(_decay_loss, argnums=(0, 1, 2))(*DECAY_ARGS)
    for g, w in zip(got, _decay_loss_grads_closed_form(*DECAY_ARGS)):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-7, atol=1e-8)


def test_oscillator_gradient_wrt_frequency_matches_the_closed_form() -> None:
    t = np.array([0.0, 1.0, 2.5])

    def x_end(w: object) -> object:
        out = fi.odeint(lambda s, t, w: (s[1], -w * w * s[0]), (np.float64(1.0), np.float64(0.0)), t, w)
        return out[0][-1]

    w = np.float64(1.3)
    np.testing.assert_allclose(float(x_end(w)), np.cos(w * 2.5), atol=1e-7)
    np.testing.assert_allclose(float(fg.grad(x_end)(w)), -2.5 * np.sin(w * 2.5), rtol=1e-6, atol=1e-7)


def _central_difference(f: object, x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    x = np.asarray(x, np.float64)
    out = np.zeros(x.shape)
    for idx in np.ndindex(x.shape):
        step = np.zeros(x.shape)
        step[idx] = eps
        out[idx] = (float(f(x + step)) - float(f(x - step))) / (2 * eps)
    return out


def test_lotka_volterra_gradients_match_finite_differences() -> None:
    """Gradients with respect to y0, every parameter and every time, against central differences."""
    weights = np.random.default_rng(3).standard_normal((LV_T.shape[0], 2))
    t = LV_T[:6]
    w = weights[:6]

    def loss(y0: object, t: object, p: object) -> object:
        return (w * fi.odeint(_lotka_volterra, y0, t, *[p[i] for i in range(4)])).sum()

    p = np.array(LV_P)
    g_y0, g_t, g_p = fg.grad(loss, argnums=(0, 1, 2))(LV_Y0, t, p)
    for got, fd in ((g_y0, _central_difference(lambda y: loss(y, t, p), LV_Y0)),
                    (g_t, _central_difference(lambda s: loss(LV_Y0, s, p), t)),
                    (g_p, _central_difference(lambda q: loss(LV_Y0, t, q), p))):
        np.testing.assert_allclose(np.asarray(got), fd, rtol=2e-5, atol=2e-6)


def test_gradient_is_the_adjoint_solve_not_a_taped_loop() -> None:
    """The gradient graph runs two plain ``while`` loops (forward and adjoint), never the taped
    ``while_fwd``/``while_bwd`` pair of reverse mode through a loop."""
    text = str(fg.make_graph(fg.grad(_decay_loss, argnums=(0, 2)))(*DECAY_ARGS))
    assert text.count("= while[") == 2
    assert "while_fwd" not in text and "while_bwd" not in text
    forward = str(fg.make_graph(_decay_loss)(*DECAY_ARGS))
    assert "custom_vjp_call" in forward and "= while[" in forward


def test_grad_under_jit_both_ways() -> None:
    want = fg.grad(_decay_loss, argnums=(0, 1, 2))(*DECAY_ARGS)
    for got in (fg.jit(fg.grad(_decay_loss, argnums=(0, 1, 2)))(*DECAY_ARGS),
                fg.grad(fg.jit(_decay_loss), argnums=(0, 1, 2))(*DECAY_ARGS)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(fg.jit(fi.odeint, static_argnums=0)(_decay, *DECAY_ARGS)),
                               np.asarray(fi.odeint(_decay, *DECAY_ARGS)), rtol=1e-12)


def test_vmap_over_y0_matches_a_loop() -> None:
    y0s = np.array([[1.0, 0.5], [2.0, 1.0], [0.5, 2.5]])
    t = LV_T[:5]
    got = fg.vmap(lambda y0: fi.odeint(_lotka_volterra, y0, t, *LV_P))(y0s)
    want = np.stack([np.asarray(fi.odeint(_lotka_volterra, y0, t, *LV_P)) for y0 in y0s])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)

    def loss(y0: object) -> object:
        return fi.odeint(_lotka_volterra, y0, t, *LV_P)[-1, 0]

    got = fg.vmap(fg.grad(loss))(y0s)
    want = np.stack([np.asarray(fg.grad(loss)(y0)) for y0 in y0s])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-12)


def test_grad_of_vmap_runs_the_adjoint_and_agrees() -> None:
    """Under vmap odeint's custom_vjp rule is kept (docs/vmap.md), so grad of a vmapped odeint
    runs the batched adjoint; it agrees with the per-example adjoint gradients and the closed
    form to the solver's tolerance."""
    y0s = np.array([[1.0, 2.0], [0.5, -1.0]])
    t, k = DECAY_ARGS[1], DECAY_ARGS[2]
    got = fg.grad(lambda k: fg.vmap(lambda y0: fi.odeint(_decay, y0, t, k))(y0s).sum())(k)
    want = sum(float(fg.grad(lambda k: fi.odeint(_decay, y0, t, k).sum())(k)) for y0 in y0s)
    exact = sum((y0.sum() * -(t * np.exp(-k * t))).sum() for y0 in y0s)
    np.testing.assert_allclose(float(got), want, rtol=1e-6)
    np.testing.assert_allclose(float(got), exact, rtol=1e-6)


def test_second_derivative_through_the_adjoint_solve() -> None:
    y0, t, k = DECAY_ARGS
    h = fg.grad(fg.grad(lambda k: _decay_loss(y0, t, k)))(k)
    np.testing.assert_allclose(float(h), (y0 ** 2).sum() * (4 * t ** 2 * np.exp(-2 * k * t)).sum(), rtol=1e-6)


def test_closed_over_values_get_gradients() -> None:
    y0, t, k = DECAY_ARGS
    via_closure = fg.grad(lambda k: fi.odeint(lambda y, t: -k * y, y0, t).sum())(k)
    via_args = fg.grad(lambda k: fi.odeint(_decay, y0, t, k).sum())(k)
    np.testing.assert_allclose(float(via_closure), float(via_args), rtol=1e-12)
    assert abs(float(via_args)) > 1.0


def test_integer_arguments_and_float32() -> None:
    t = np.linspace(0.0, 1.0, 3)
    ys = fi.odeint(lambda y, t, n: -n * y, np.float32(1.0), t.astype(np.float32), np.int32(2), rtol=1e-5, atol=1e-6)
    assert np.asarray(ys).dtype == np.float32
    np.testing.assert_allclose(np.asarray(ys), np.exp(-2 * t), rtol=1e-4)
    g = fg.grad(lambda y0: fi.odeint(lambda y, t, n: -n * y, y0, t, 2).sum())(np.float64(1.0))
    np.testing.assert_allclose(float(g), np.exp(-2 * t).sum(), rtol=1e-7)


def test_mxstep_exhausted_gives_nan() -> None:
    ys = np.asarray(fi.odeint(_lotka_volterra, LV_Y0, LV_T[:4], *LV_P, mxstep=2))
    assert np.all(np.isfinite(ys[0])) and np.all(np.isnan(ys[-1]))


def test_forward_mode_raises_a_clear_error() -> None:
    y0, t, k = DECAY_ARGS
    with pytest.raises(TypeError, match="odeint: forward-mode.*adjoint"):
        fg.jvp(lambda k: fi.odeint(_decay, y0, t, k), (k,), (np.float64(1.0),))


def test_bad_arguments_raise_clearly_odeint() -> None:
    y0 = np.array([1.0, 2.0])
    with pytest.raises(ValueError, match="non-decreasing"):
        fi.odeint(_decay, y0, np.array([0.0, 1.0, 0.5]), 1.0)
    with pytest.raises(ValueError, match=r"1-d array of times, got shape \(2, 2\)"):
        fi.odeint(_decay, y0, np.ones((2, 2)), 1.0)
    with pytest.raises(TypeError, match="structure of y0"):
        fi.odeint(lambda y, t: (y, y), y0, np.array([0.0, 1.0]))
    with pytest.raises(TypeError, match=r"shape \(3,\) for a state leaf of shape \(2,\)"):
        fi.odeint(lambda y, t: fg.numpy.ones(3), y0, np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="rtol must be a positive number"):
        fi.odeint(_decay, y0, np.array([0.0, 1.0]), 1.0, rtol=-1.0)
