"""``fungraph.scipy.optimize`` against JAX 0.10's ``jax.scipy.optimize``: ``minimize`` by BFGS and
L-BFGS takes JAX's steps (same iterates, counts and status, in both dtype modes), under ``jit``
and ``vmap``; the line search as JAX's internal one."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.scipy import optimize as fo
from fungraph.scipy.optimize._line_search import line_search
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
jso = importlib.import_module("jax.scipy.optimize")
jax_line_search = importlib.import_module("jax._src.scipy.optimize.line_search").line_search

LBFGS = "l-bfgs-experimental-do-not-rely-on-this"
METHODS = ["BFGS", LBFGS]


def rosenbrock(m: Any) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        return m.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)

    return f


def quartic(m: Any) -> Callable[..., Any]:
    def f(x: Any, scale: Any, shift: Any) -> Any:
        return m.sum(scale * (x - shift) ** 4 + m.cos(x) * x ** 2)

    return f


def _check_results(got: Any, want: Any, rtol: float) -> None:
    assert type(got).__name__ == "OptimizeResults" and got._fields == want._fields
    for name in want._fields:
        g, w = getattr(got, name), getattr(want, name)
        if w is None:
            assert g is None, name
            continue
        g, w = np.asarray(g), np.asarray(w)
        assert (g.shape, g.dtype) == (w.shape, w.dtype), (name, g.shape, g.dtype, w.shape, w.dtype)
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, err_msg=name)


X0 = np.array([-1.2, 1.0, 0.5, 0.3, 0.8])


@pytest.mark.parametrize("method", METHODS)
def test_minimize_rosenbrock_takes_jaxs_steps(method: str) -> None:
    got = fo.minimize(rosenbrock(fnp), X0, method=method)
    want = jso.minimize(rosenbrock(jnp), X0, method=method)
    _check_results(got, want, 1e-8)
    assert int(got.nit) > 10


@pytest.mark.parametrize("method", METHODS)
def test_minimize_with_args_options_and_jit_match_jax(method: str) -> None:
    args = (np.array([0.5, 1.0, 2.0]), np.array([1.0, -0.5, 0.25]))
    options = {"maxiter": 7, "gtol": 1e-9}
    x0 = np.array([0.3, 0.1, -0.2])
    want = jso.minimize(quartic(jnp), x0, args, method=method, options=options)
    got = fg.jit(lambda x, a, b: fo.minimize(quartic(fnp), x, (a, b), method=method, options=options))(x0, *args)
    _check_results(got, want, 1e-8)
    assert int(got.nit) <= 7 and not bool(got.success)


@pytest.mark.parametrize("method", METHODS)
def test_minimize_in_32_bit_mode_matches_jax(method: str, x32: None) -> None:
    """Float32 iterates round differently in the last bit, so the comparison stops early (a
    long run on a curved valley amplifies that rounding)."""
    args = (np.float32([0.5, 1.0, 2.0]), np.float32([1.0, -0.5, 0.25]))
    x0 = np.float32([0.3, 0.1, -0.2])
    with jax.enable_x64(False):
        want = jso.minimize(quartic(jnp), x0, args, method=method, options={"maxiter": 4})
        want_py = jso.minimize(quartic(jnp), x0, (0.5, 1.0), method=method, options={"maxiter": 4})
    got = fo.minimize(quartic(fnp), x0, args, method=method, options={"maxiter": 4})
    got_py = fo.minimize(quartic(fnp), x0, (0.5, 1.0), method=method, options={"maxiter": 4})
    assert np.asarray(got.nit).dtype == np.int32 and np.asarray(got.x).dtype == np.float32
    _check_results(got, want, 1e-4)
    _check_results(got_py, want_py, 1e-4)


@pytest.mark.parametrize("method", METHODS)
def test_minimize_under_vmap_matches_a_loop_and_jax(method: str) -> None:
    starts = np.stack([X0, X0 * 0.5, X0[::-1]])
    got = fg.vmap(lambda x: fo.minimize(rosenbrock(fnp), x, method=method))(starts)
    want = jax.vmap(lambda x: jso.minimize(rosenbrock(jnp), x, method=method))(starts)
    _check_results(got, want, 1e-7)
    one = fo.minimize(rosenbrock(fnp), starts[2], method=method)
    np.testing.assert_allclose(np.asarray(got.x)[2], one.x, rtol=1e-12)
    assert int(np.asarray(got.nit)[2]) == int(one.nit)


def test_line_search_matches_jaxs() -> None:
    f_fg, f_jax = rosenbrock(fnp), rosenbrock(jnp)
    xk = np.array([-1.2, 1.0, 0.4])
    pk = -np.asarray(jax.grad(f_jax)(xk))
    for kwargs in ({}, {"c2": 0.1, "maxiter": 5}):
        got = line_search(f_fg, xk, pk, **kwargs)
        want = jax_line_search(f_jax, xk, pk, **kwargs)
        for name in want._fields:
            np.testing.assert_allclose(np.asarray(getattr(got, name)), np.asarray(getattr(want, name)), rtol=1e-10,
                                       err_msg=name)


def test_public_names_are_jaxs() -> None:
    assert sorted(n for n in dir(jso) if not n.startswith("_")) == sorted(fo.__all__)


def test_minimize_bad_arguments_raise_as_jax() -> None:
    with pytest.raises(ValueError, match="Method Nelder-Mead not recognized"):
        fo.minimize(rosenbrock(fnp), X0, method="Nelder-Mead")
    with pytest.raises(TypeError, match="must be a tuple"):
        fo.minimize(quartic(fnp), X0, [1.0, 2.0], method="BFGS")
    with pytest.raises(ValueError, match=r"1-d array .* shape \(2, 2\)"):
        fo.minimize(rosenbrock(fnp), np.ones((2, 2)), method="BFGS")
