"""``fungraph.scipy.special``'s combinatorial, entropy, Box-Cox, gamma-sign and zeta functions
against JAX 0.10's ``jax.scipy.special``: values and dtypes in both dtype modes (eagerly and
under ``jit``), gradients (``jax.grad``) and ``vmap``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fungraph as fg
from fungraph.scipy import special as fsp
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
jsp = jax.scipy.special


def a(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


P = a(0.0, 0.0, 0.5, 1.0, 2.0, 3.0, -1.0)
Q = a(0.0, 1.0, 0.25, 2.0, 0.0, 1.5, 1.0)
X = a(-2.5, -2.0, -0.5, 0.0, 0.3, 1.0, 4.5)
N = a(-1.0, 0.0, 1.0, 4.0, 6.0, 10.0, 7.5)
KK = a(0.0, 0.0, 1.0, 2.0, 7.0, 3.0, 2.5)

#: (function, arguments, argnums to differentiate, points to differentiate at)
CASES: list[tuple[str, tuple[np.ndarray, ...], tuple[int, ...], tuple[np.ndarray, ...] | None]] = [
    ("rel_entr", (P, Q), (0, 1), (a(0.5, 1.0, 3.0), a(0.25, 2.0, 1.5))),
    ("kl_div", (P, Q), (0, 1), (a(0.5, 1.0, 3.0), a(0.25, 2.0, 1.5))),
    ("gammasgn", (np.append(X, [-0.0, -3.7, np.nan]),), (), None),
    ("loggamma", (X,), (0,), (a(0.3, 1.0, 4.5),)),
    ("factorial", (N,), (0,), (a(0.5, 4.0, 7.5),)),
    ("comb", (N, KK), (), None),
    ("comb", (a(3.0, 5.0, 10.0), a(1.0, 2.0, 4.0)), (0, 1), None),
    ("poch", (a(0.5, 1.0, 2.0, 3.5, -1.5), a(0.0, 1.0, 2.5, 3.0, 2.0)), (0, 1), None),
    ("boxcox", (a(0.5, 1.0, 2.0, 7.0), a(0.0, 0.5, -1.5, 2.0)), (0, 1), None),
    ("boxcox1p", (a(-0.5, 1e-9, 1.0, 7.0), a(0.0, 0.5, -1.5, 2.0)), (0, 1), None),
    ("zeta", (a(2.0, 3.0, 4.5, 0.5, 1.0), a(1.0, 2.5, 0.5, 1.0, 3.0)), (1,), (a(2.0, 3.0, 4.5), a(1.0, 2.5, 0.5))),
]
IDS = [f"{name}-{i}" for i, (name, *_rest) in enumerate(CASES)]


def _close(got: Any, want: Any, x64: bool, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != JAX's {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != JAX's {want.shape}"
    tol = 1e-12 if x64 else 3e-6
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_and_dtypes_match_jax(case: tuple, x64: bool) -> None:
    name, args, _, _ = case
    args = args if x64 else tuple(v.astype(np.float32) for v in args)
    with fg.enable_x64(x64), jax.enable_x64(x64), np.errstate(all="ignore"):
        want = getattr(jsp, name)(*args)
        _close(getattr(fsp, name)(*args), want, x64, f"{name} eager")
        _close(fg.jit(getattr(fsp, name))(*args), want, x64, f"{name} under jit")


@pytest.mark.parametrize("case", [c for c in CASES if c[2]], ids=[i for c, i in zip(CASES, IDS) if c[2]])
def test_gradients_match_jax(case: tuple) -> None:
    name, args, argnums, grad_args = case
    args = grad_args or args
    want = jax.grad(lambda *v: jnp.sum(getattr(jsp, name)(*v)), argnums=argnums)(*args)
    got = fg.grad(lambda *v: fg.numpy.sum(getattr(fsp, name)(*v)), argnums=argnums)(*args)
    for i, g, w in zip(argnums, got, want):
        assert np.all(np.isfinite(np.asarray(w))), f"{name}: JAX's gradient is not finite here"
        _close(g, w, True, f"grad of {name} in argument {i}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_vmap_matches_jax(case: tuple) -> None:
    name, args, _, _ = case
    batched = tuple(np.stack([v, v[::-1]]) for v in args)
    with np.errstate(all="ignore"):
        want = jax.vmap(getattr(jsp, name))(*batched)
        _close(fg.vmap(getattr(fsp, name))(*batched), want, True, f"vmap({name})")


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_python_scalars_and_integers_follow_jax(x64: bool) -> None:
    calls = [("comb", (5, 2)), ("comb", (4, 3)), ("factorial", (5,)), ("poch", (3, 2)), ("kl_div", (1, 2.0)),
             ("boxcox", (2.0, 0)), ("gammasgn", (-1.5,)), ("loggamma", (7,))]
    for name, args in calls:
        with fg.enable_x64(x64), jax.enable_x64(x64):
            _close(getattr(fsp, name)(*args), getattr(jsp, name)(*args), x64, f"{name}{args}")
    with fg.enable_x64(x64), jax.enable_x64(x64):
        _close(fsp.comb(5, 2, repetition=True), jsp.comb(5, 2, repetition=True), x64, "comb with repetition")


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_bernoulli_numbers_match_jax_and_scipy(x64: bool) -> None:
    """Shapes and dtypes as JAX's; values as SciPy's (ours are exact fractions rounded), where JAX's
    series is off by up to 3e-6 relative (B_4)."""
    scipy_special = pytest.importorskip("scipy.special")
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for n in (0, 1, 2, 3, 8, 20):
            got, want = np.asarray(fsp.bernoulli(n)), np.asarray(jsp.bernoulli(n))
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=5e-6, atol=1e-15)
            exact = scipy_special.bernoulli(n).astype(got.dtype)
            np.testing.assert_allclose(got, exact, rtol=1e-11 if x64 else 1e-7, atol=0)
    with pytest.raises(ValueError, match="non-negative"):
        fsp.bernoulli(-1)
    with pytest.raises(TypeError, match="concrete"):
        fg.jit(fsp.bernoulli)(3)


def test_refusals_follow_jax() -> None:
    with pytest.raises(NotImplementedError, match="Riemann"):
        fsp.zeta(2.0)
    with pytest.raises(NotImplementedError, match="exact"):
        fsp.factorial(3, exact=True)
