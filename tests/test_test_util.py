"""``fungraph.test_util.check_jvp``/``check_vjp`` as JAX's: they pass for correct rules (ours
and, through ``partial(jvp, f)``, the library's) and raise ``AssertionError`` for a wrong one, as
JAX's do on the same functions; ``scipy.integrate.trapezoid`` as JAX's."""

from __future__ import annotations

import importlib
from functools import partial

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.test_util import check_jvp, check_vjp
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
jax_test_util = importlib.import_module("jax.test_util")  # a submodule JAX does not import itself

ARGS = (np.array([0.3, -1.2, 2.0]), np.array([[1.0, 2.0], [0.5, -0.7]]))


def _f(lib: object, x: object, m: object) -> object:
    np_ = lib.numpy
    return {"a": np_.sin(x) * np_.sum(m ** 2), "b": np_.tanh(m @ m)}


def _wrong_jvp(lib: object, primals: tuple, tangents: tuple) -> tuple:
    out, t = lib.jvp(partial(_f, lib), primals, tangents)
    return out, {"a": t["a"] * 1.5, "b": t["b"]}


def _wrong_vjp(lib: object, *args: object) -> tuple:
    out, pullback = lib.vjp(partial(_f, lib), *args)
    return out, lambda ct: tuple(g * 0.5 for g in pullback(ct))


@pytest.mark.parametrize("lib_name", ["jax", "fungraph"])
def test_check_jvp_and_vjp_pass_correct_rules_and_catch_wrong_ones(lib_name: str) -> None:
    lib, check = (jax, jax_test_util) if lib_name == "jax" else (fg, fg.test_util)
    f = partial(_f, lib)
    check.check_jvp(f, partial(lib.jvp, f), ARGS)
    check.check_vjp(f, partial(lib.vjp, f), ARGS)
    with pytest.raises(AssertionError):
        check.check_jvp(f, partial(_wrong_jvp, lib), ARGS)
    with pytest.raises(AssertionError):
        check.check_vjp(f, partial(_wrong_vjp, lib), ARGS)


def test_check_vjp_names_the_dot_product_test_and_err_msg() -> None:
    f = partial(_f, fg)
    with pytest.raises(AssertionError, match=r"layer 3: check_vjp: the pullback fails the dot-product test"):
        check_vjp(f, partial(_wrong_vjp, fg), ARGS, err_msg="layer 3")
    with pytest.raises(AssertionError, match="check_jvp tangents vs finite differences"):
        check_jvp(f, partial(_wrong_jvp, fg), ARGS)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_scipy_integrate_trapezoid_matches_jax(x64: bool) -> None:
    y, x = np.array([[1.0, 2.5, 4.0], [0.0, -1.0, 3.0]]), np.array([0.0, 0.5, 2.0])
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for kwargs in ({}, {"x": x}, {"dx": 0.25, "axis": 0}):
            want = jax.scipy.integrate.trapezoid(y, **kwargs)
            got = fg.scipy.integrate.trapezoid(y, **kwargs)
            assert np.asarray(got).dtype == np.asarray(want).dtype
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    assert fnp.trapezoid is fg.scipy.integrate.trapezoid
