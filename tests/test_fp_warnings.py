"""numpy's floating-point warnings (divide by zero, invalid value, overflow) never reach a
fungraph user, as JAX computes NaNs and infinities silently; numpy's own state is left as the
user set it."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

X = np.array([-1.0, 0.0, 1e30], np.float32)

CASES: dict[str, Callable[[Any, Any, Any], Any]] = {
    "log": lambda lib, np_, x: np_.log(x),
    "sqrt": lambda lib, np_, x: np_.sqrt(x),
    "arccos": lambda lib, np_, x: np_.arccos(x),
    "log1p": lambda lib, np_, x: np_.log1p(x - 1),
    "arctanh": lambda lib, np_, x: np_.arctanh(np_.ones(2)),
    "divide": lambda lib, np_, x: np_.divide(1.0, np_.asarray(x)),
    "operator /": lambda lib, np_, x: 1.0 / np_.asarray(x),
    "operator x / x": lambda lib, np_, x: np_.asarray(x) / np_.asarray(x),
    "operator *": lambda lib, np_, x: np_.asarray(x) * np_.asarray(x),
    "operator **": lambda lib, np_, x: np_.asarray(x) ** 0.5,
    "exp overflow": lambda lib, np_, x: np_.exp(np_.asarray(x) * 1e3),
    "reciprocal": lambda lib, np_, x: np_.reciprocal(np_.asarray(x)),
    "logaddexp": lambda lib, np_, x: np_.logaddexp(np_.asarray(-np.inf), -np.inf),
    "lax.log": lambda lib, np_, x: lib.lax.log(np_.asarray(x)),
    "lax.div": lambda lib, np_, x: lib.lax.div(np_.asarray(x), np_.asarray(x)),
    "jit log": lambda lib, np_, x: lib.jit(np_.log)(x),
    "jit divide": lambda lib, np_, x: lib.jit(lambda a: 1.0 / a)(x),
    "vmap log": lambda lib, np_, x: lib.vmap(np_.log)(x),
    "grad sqrt": lambda lib, np_, x: lib.grad(lambda a: np_.sqrt(a))(0.0),
    "jit grad sqrt": lambda lib, np_, x: lib.jit(lib.grad(lambda a: np_.sqrt(a)))(0.0),
    "while_loop": lambda lib, np_, x: lib.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 1e30),
                                                          (0, np_.float32(1.0)))[1],
}


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_nan_and_inf_come_silently_as_jax(name: str, x64: bool) -> None:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        want = np.asarray(CASES[name](jax, jnp, X))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = np.asarray(CASES[name](fg, fnp, X))
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_numpy_state_of_the_user_is_left_as_it_was() -> None:
    before = np.geterr()
    with np.errstate(divide="raise"):
        fnp.log(X)
        fg.jit(fnp.log)(X)
        with pytest.raises(FloatingPointError):
            np.log(np.zeros(1))
    assert np.geterr() == before
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        np.log(np.zeros(1))
    assert lax is fg.lax
