"""``fungraph.scipy.special``'s error-function family (``erfcx``, ``wofz``, ``dawsn``, ``owens_t``),
integrals (``expi``, ``exp1``, ``expn``, ``sici``, ``fresnel``, ``spence``), ``bessel_jn`` and hypergeometric functions
(``hyp1f1``, ``hyp2f1``) against JAX 0.10's
``jax.scipy.special``: values and dtypes in both dtype modes (eagerly and under ``jit``),
gradients (``jax.grad``), ``vmap``, and SciPy where JAX's own values or derivatives are off."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fungraph as fg
from fungraph.scipy import special as fsp
from fungraph.tree_util import tree_leaves
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
jsp = jax.scipy.special


def a(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


WIDE = a(-30.0, -5.0, -1.3, -0.2, 0.0, 0.1, 0.7, 2.0, 3.3, 5.0, 7.0, 9.0, 9.5, 12.0, 27.0, 40.0, 1e4)
EI = a(-800.0, -50.0, -3.0, -1e-3, 0.0, 1e-3, 0.5, 2.0, 3.0, 7.0, 15.0, 30.0, 60.0, 100.0, 700.0, 800.0,
       np.nan, np.inf, -np.inf)
# JAX's batched expn evaluates every branch on every element, so a negative order or a tiny x > 0
# next to x > 1 never leaves its continued fraction: those stay out of the batched cases.
EXPN_N = a(0, 1, 2, 3, 2, 1, 0, -1, 1, 5, 5000, 6000, 2.5, 3, 1, 2, 0, 0, 5000, 7, 30, 1, 4)
EXPN_X = a(0, 0, 0, 0, 1.5, 0.5, 2, 1, -1, 0.3, 2, 100, 1.2, 20, 800, 0.5, 0, -1, 0, 0.9, 0.01, 1e-3, 3)
SICI = a(-np.inf, -1e10, -30.0, -5.0, -4.0, -0.5, 0.0, 1e-4, 0.5, 3.9, 4.0, 4.1, 7.5, 8.0, 8.5, 100.0, 1e9,
         2e9, np.inf, np.nan)
FRESNEL = a(-np.inf, -40000.0, -12.0, -3.3, -1.6, -0.2, 0.0, 1e-3, 0.5, 1.5, 1.6, 2.7, 5.0, 9.9, 30.0, 1000.0,
            36000.0, 40000.0, 1e6, np.inf, np.nan)
SPENCE = a(-1.0, 0.0, 1e-5, 0.3, 0.5, 1.0, 1.2, 1.6, 2.0, 2.5, 4.0, 100.0, np.inf, np.nan)
OWEN_H = a(-2.0, 0.0, 0.3, 1.0, 2.5, 0.5, 3.0, np.nan, 0.2, 1.5)
OWEN_A = a(0.5, 2.0, -1.0, 1.0, 0.2, -3.0, 10.0, 1.0, 0.0, 0.9)
# 1F1: a == 0, a == b, b == 0, |x| >= 100 (asymptotic series), x == 0.
H1_A = a(0, 1, 0.5, 2, 3, 1.5, 0.3, 2, 1, 4, 0.5, 2.0, 0.0)
H1_B = a(1, 1, 1.5, 3, 0, 2.5, 4, 2, 3, 1.2, 0.7, 5.0, 0.0)
H1_X = a(0.5, 2, -1, 3, 1, 120, 0.1, -5, 150, 20, 0, -30, 2.0)
# 2F1: terminating series (a or b a non-positive integer, swapped), c a pole, x > 1, x == 1,
# x == 0, b == c, c - a - b <= -1 (Euler's transformation), and the digamma expansion near x = 1.
H2_A = a(0.5, 1, 0.5, -2, 3, 1.5, 0.3, 2, 1, -3, 0.5, 2.0, 0.0, 1, 1.5, 0.5, 2, 1, -1.5, 0.7, 1.0, 2.0, 2.5)
H2_B = a(1.5, 1, 1.5, 3, -4, 2.5, 4, 2, 3, 1.2, 0.7, 5.0, 1.0, 2, 1.5, 0.5, 1, 1, 2.0, 1.3, 2.0, 2.0, 1.0)
H2_C = a(2, 3, 1.5, 2.5, 1, 0, -2, 2, 3, 4, 1.7, 8.0, 1.0, 3, 4, 3, 3.5, 2, 1.0, 3.0, 2.5, 2.5, 1.5)
H2_X = a(0.5, 0.2, -0.7, 0.4, 0.3, 0.1, 0.1, 1.5, 0.95, 0.5, 0, -3, 0.3, 1, 0.95, 0.97, 0.99, 0.92, 0.3, 0.93,
         0.95, 0.5, 0.6)

#: (function, arguments, argnums to differentiate, points to differentiate at)
CASES: list[tuple[str, tuple[np.ndarray, ...], tuple[int, ...], tuple[np.ndarray, ...] | None]] = [
    ("erfcx", (WIDE,), (0,), (a(-2.0, -0.3, 0.0, 0.5, 3.0, 9.0, 12.0, 30.0),)),
    ("dawsn", (WIDE,), (0,), (a(-7.0, -0.3, 0.0, 0.5, 3.0, 4.0, 12.0),)),
    ("owens_t", (OWEN_H, OWEN_A), (0, 1), (a(-2.0, 0.3, 1.0, 2.5, 0.5), a(0.5, -1.0, 1.0, 0.2, -3.0))),
    ("expi", (EI,), (0,), (a(-50.0, -3.0, -1e-3, 0.5, 3.0, 15.0, 100.0),)),
    ("exp1", (EI,), (0,), (a(1e-3, 0.5, 3.0, 15.0, 100.0),)),
    ("expn", (EXPN_N, EXPN_X), (1,), (a(1.0, 2.0, 3.0, 5.0, 2.0), a(0.5, 1.5, 0.3, 4.0, 20.0))),
    ("sici", (SICI,), (0,), (a(-30.0, -5.0, -0.5, 0.5, 3.9, 4.1, 7.5, 8.5, 100.0),)),
    ("fresnel", (FRESNEL,), (0,), (a(-3.3, -0.2, 0.5, 1.7, 5.0, 12.0),)),
    ("spence", (SPENCE,), (0,), (a(1e-5, 0.3, 0.5, 2.5, 4.0, 100.0),)),
    ("hyp1f1", (H1_A, H1_B, H1_X), (0, 1, 2), (a(0.5, 2, 1.5, 1), a(1.5, 3, 2.5, 3), a(-1, 3, 0.7, 2))),
    ("hyp2f1", (H2_A, H2_B, H2_C, H2_X), (0, 1, 2, 3),
     (a(0.5, 2, 1.5, 1), a(1.5, 3, 2.5, 3), a(2.5, 4.5, 3.1, 5), a(-0.5, 0.3, 0.7, 0.2))),
]
IDS = [name for name, *_rest in CASES]


def _close(got: Any, want: Any, x64: bool, what: str, tol64: float = 1e-13) -> None:
    gots, wants = tree_leaves(got), tree_leaves(want)
    assert len(gots) == len(wants), f"{what}: {len(gots)} outputs, JAX has {len(wants)}"
    for g, w in zip(gots, wants):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, f"{what}: dtype {g.dtype} != JAX's {w.dtype}"
        assert g.shape == w.shape, f"{what}: shape {g.shape} != JAX's {w.shape}"
        tol = tol64 if x64 else 2e-6
        np.testing.assert_allclose(g, w, rtol=tol, atol=0, err_msg=what)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_and_dtypes_match_jax(case: tuple, x64: bool) -> None:
    name, args, _, _ = case
    args = args if x64 else tuple(v.astype(np.float32) for v in args)
    with fg.enable_x64(x64), jax.enable_x64(x64), np.errstate(all="ignore"):
        want = getattr(jsp, name)(*args)
        _close(getattr(fsp, name)(*args), want, x64, f"{name} eager")
        _close(fg.jit(getattr(fsp, name))(*args), want, x64, f"{name} under jit")


def _summed(module: Any, name: str, np_mod: Any) -> Any:
    def f(*v: Any) -> Any:
        out = getattr(module, name)(*v)
        return sum(np_mod.sum(o) * (k + 1) for k, o in enumerate(tree_leaves(out)))

    return f


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradients_match_jax(case: tuple) -> None:
    name, args, argnums, grad_args = case
    args = grad_args or args
    want = jax.grad(_summed(jsp, name, jnp), argnums=argnums)(*args)
    got = fg.grad(_summed(fsp, name, fg.numpy), argnums=argnums)(*args)
    for i, g, w in zip(argnums, got, want):
        assert np.all(np.isfinite(np.asarray(w))), f"{name}: JAX's gradient is not finite here"
        _close(g, w, True, f"grad of {name} in argument {i}", tol64=1e-11)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_vmap_matches_jax(case: tuple) -> None:
    name, args, _, _ = case
    batched = tuple(np.stack([v, v[::-1]]) for v in args)
    with np.errstate(all="ignore"):
        want = jax.vmap(getattr(jsp, name))(*batched)
        _close(fg.vmap(getattr(fsp, name))(*batched), want, True, f"vmap({name})")


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_complex_erfcx_and_wofz_match_jax_and_scipy(x64: bool) -> None:
    scipy_special = pytest.importorskip("scipy.special")
    z = WIDE[1:9] + 1j * a(0.5, -1.0, 2.0, -0.3, 0.0, 3.0, -4.0, 1.0)
    zz = z if x64 else z.astype(np.complex64)
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for name in ("wofz", "erfcx"):
            got = getattr(fsp, name)(zz)
            _close(got, getattr(jsp, name)(zz), x64, f"{name} of complex")
            np.testing.assert_allclose(np.asarray(got), getattr(scipy_special, name)(z), rtol=1e-12 if x64 else 1e-6)
        _close(fsp.wofz(WIDE[2:6]), jsp.wofz(WIDE[2:6]), x64, "wofz of real")
    got = fg.grad(lambda v: fg.numpy.real(fsp.wofz(v)))(1.0 + 0.5j)
    want = jax.grad(lambda v: jnp.real(jsp.wofz(v)))(1.0 + 0.5j)
    np.testing.assert_allclose(complex(got), complex(want), rtol=1e-13)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_python_scalars_and_integers_follow_jax(x64: bool) -> None:
    calls = [("erfcx", (1,)), ("dawsn", (2,)), ("expi", (3,)), ("exp1", (1,)), ("expn", (2, 1)),
             ("expn", (2, np.float32(1.5))), ("sici", (2,)), ("owens_t", (1, 0.5)), ("erfcx", (np.int32(3),)),
             ("spence", (np.float32(0.5),)), ("hyp1f1", (1, 2, 0.5)), ("hyp2f1", (1, 2, 3, np.float32(0.5)))]
    for name, args in calls:
        with fg.enable_x64(x64), jax.enable_x64(x64):
            _close(getattr(fsp, name)(*args), getattr(jsp, name)(*args), x64, f"{name}{args}")


def test_values_match_scipy() -> None:
    """Against SciPy where JAX's values agree with it (JAX differs at expn(n >= 2, 0) = 1/n and
    expi(0) = nan, which fungraph follows)."""
    scipy_special = pytest.importorskip("scipy.special")
    x = np.concatenate([np.linspace(-20, 20, 81), np.logspace(-6, 2, 33)])
    with np.errstate(all="ignore"):
        for name in ("erfcx", "dawsn", "expi", "exp1", "spence"):
            want = getattr(scipy_special, name)(x)
            keep = np.isfinite(want) & (x != 0)
            np.testing.assert_allclose(np.asarray(getattr(fsp, name)(x))[keep], want[keep], rtol=1e-13, err_msg=name)
        for got, want in zip(fsp.fresnel(x), scipy_special.fresnel(x)):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-13, atol=1e-16)
        si, ci = fsp.sici(x)
        np.testing.assert_allclose(np.asarray(si), scipy_special.sici(x)[0], rtol=1e-13)
        np.testing.assert_allclose(np.asarray(ci)[x > 0], scipy_special.sici(x)[1][x > 0], rtol=1e-13)
        n, xs = np.meshgrid(np.arange(0, 8.0), np.logspace(-3, 1.5, 19))
        np.testing.assert_allclose(np.asarray(fsp.expn(n, xs)), scipy_special.expn(n, xs), rtol=1e-12)
        h, av = np.meshgrid(np.linspace(-3, 3, 13), np.linspace(-4, 4, 17))
        np.testing.assert_allclose(np.asarray(fsp.owens_t(h, av)), scipy_special.owens_t(h, av), rtol=1e-12,
                                   atol=1e-15)


def test_spence_gradient_is_log_x_over_one_minus_x() -> None:
    """JAX's own gradient is nan on (1, 2] (a log of a negative number in a discarded branch)."""
    x = a(0.2, 0.5, 1.2, 1.7, 2.5, 5.0)
    got = fg.vmap(fg.grad(fsp.spence))(x)
    np.testing.assert_allclose(np.asarray(got), np.log(x) / (1 - x), rtol=1e-12)


def test_refusals_follow_jax() -> None:
    for name in ("dawsn", "expi", "exp1", "sici"):
        with pytest.raises(ValueError, match="complex"):
            getattr(fsp, name)(np.complex64(1 + 1j))
    with pytest.raises(NotImplementedError, match="complex"):
        fsp.fresnel(np.complex64(1 + 1j))
    with pytest.raises(TypeError, match="not supported"):
        fsp.spence(np.int32(2))


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_bessel_jn_matches_jax_and_scipy(x64: bool) -> None:
    """Shape (v + 1, *z.shape); float32 overflows in the recurrence for small z to nan, as JAX's."""
    scipy_special = pytest.importorskip("scipy.special")
    z = a(0.5, 1.0, 3.0, 7.5, 12.0, 0.1).reshape(2, 3)
    zz = z if x64 else z.astype(np.float32)
    with fg.enable_x64(x64), jax.enable_x64(x64), np.errstate(all="ignore"):
        want = jsp.bessel_jn(zz, v=4)
        for got in (fsp.bessel_jn(zz, v=4), fg.jit(lambda t: fsp.bessel_jn(t, v=4))(zz)):
            assert np.asarray(got).shape == (5, 2, 3)
            _close(got, want, x64, "bessel_jn", tol64=1e-12)
        _close(fsp.bessel_jn(2, v=1, n_iter=30), jsp.bessel_jn(2, v=1, n_iter=30), x64, "bessel_jn of an int")
    np.testing.assert_allclose(np.asarray(fsp.bessel_jn(z, v=4)), scipy_special.jv(np.arange(5)[:, None, None], z),
                               rtol=1e-12, atol=1e-15)
    got = fg.vmap(fg.grad(lambda t: fsp.bessel_jn(t, v=2)[2]))(z[0])
    want = jax.vmap(jax.grad(lambda t: jsp.bessel_jn(t, v=2)[2]))(z[0])
    _close(got, want, True, "vmap of grad of bessel_jn", tol64=1e-11)
    with pytest.raises(TypeError, match="concrete integer"):
        fsp.bessel_jn(z, v=1.5)
    with pytest.raises(ValueError, match="complex"):
        fsp.bessel_jn(z + 1j, v=1)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_sph_harm_y_matches_jax_and_scipy(x64: bool) -> None:
    """Dtypes as JAX's ((-1)^|m| is a strong default float, so int32 orders give complex128 with
    x64 on), degrees and orders above ``n_max`` clipped in the Legendre factor, as JAX."""
    scipy_special = pytest.importorskip("scipy.special")
    n = np.array([0, 1, 2, 3, 3, 4, 5, 6, 6, 2])
    m = np.array([0, -1, 2, -2, 1, 0, -5, 3, -6, 0])
    theta = a(0.3, 1.0, 2.0, 0.5, 1.5, 2.5, 0.0, 3.0, 0.7, 1.2)
    phi = a(0.1, 2.0, 3.0, 4.0, 5.0, 6.0, 1.0, 2.0, 3.0, 4.0)
    calls = [(n, m, theta, phi), (n, m, np.float32(0.3), phi.astype(np.float32)), (n, m, theta, phi, None, 4),
             (n.astype(np.int32), m.astype(np.int32), theta.astype(np.float32), phi.astype(np.float32))]
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for args in calls:
            tol64 = 1e-13 if np.asarray(args[2]).dtype == np.float64 else 5e-6
            _close(fsp.sph_harm_y(*args), jsp.sph_harm_y(*args), x64, f"sph_harm_y {len(args)} args", tol64=tol64)
        got = fg.jit(lambda t, p: fsp.sph_harm_y(n, m, t, p, n_max=6))(theta, phi)
        _close(got, jsp.sph_harm_y(n, m, theta, phi), x64, "sph_harm_y under jit", tol64=1e-13)
    np.testing.assert_allclose(np.asarray(fsp.sph_harm_y(n, m, theta, phi)), scipy_special.sph_harm_y(n, m, theta, phi),
                               rtol=1e-12, atol=1e-15)
    keep = theta > 0  # JAX's gradient is nan at the pole
    got = fg.grad(lambda t: fg.numpy.sum(fg.numpy.real(fsp.sph_harm_y(n[keep], m[keep], t, phi[keep]))))(theta[keep])
    want = jax.grad(lambda t: jnp.sum(jnp.real(jsp.sph_harm_y(n[keep], m[keep], t, phi[keep]))))(theta[keep])
    _close(got, want, True, "grad of sph_harm_y", tol64=1e-11)
    with pytest.raises(NotImplementedError, match="diff_n"):
        fsp.sph_harm_y(n, m, theta, phi, diff_n=1)
