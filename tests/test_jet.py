"""``fungraph.experimental.jet`` against ``jax.experimental.jet`` in both dtype modes: Taylor
coefficients of polynomials and of exp/sin/tanh compositions, orders 1 to 4, one and two
arguments, tuple outputs, and ``jet2``'s plain coefficients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.experimental import jet as fjet
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
from jax.experimental import jet as jjet  # noqa: E402

#: name: (function of (numpy namespace, *arguments), number of arguments)
FUNCTIONS: dict[str, tuple[Callable[..., Any], int]] = {
    "poly": (lambda np_, x: 3.0 * x ** 3 - 2.0 * x ** 2 + x - 5.0, 1),
    "exp_sin": (lambda np_, x: np_.exp(np_.sin(x)), 1),
    "tanh_exp": (lambda np_, x: np_.tanh(0.5 * np_.exp(x)) * x, 1),
    "sin_tanh_sum": (lambda np_, x: np_.sum(np_.sin(np_.tanh(x)) * x), 1),
    "two_args": (lambda np_, x, y: np_.exp(x * y) + np_.sin(x) / (1.0 + y * y), 2),
    "tuple_out": (lambda np_, x: (np_.sin(x), np_.exp(-x) * x), 1),
}


def _inputs(n_args: int, order: int, dtype: Any) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    rng = np.random.default_rng(order + 10 * n_args)
    primals = [rng.uniform(-1.0, 1.0, 3).astype(dtype) for _ in range(n_args)]
    series = [[rng.uniform(-1.0, 1.0, 3).astype(dtype) for _ in range(order)] for _ in range(n_args)]
    return primals, series


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("order", [1, 2, 3, 4])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_jet_equals_jax(name: str, order: int, x64: bool) -> None:
    fun, n_args = FUNCTIONS[name]
    primals, series = _inputs(n_args, order, np.float64 if x64 else np.float32)
    with fg.enable_x64(x64), jax.enable_x64(x64):
        want = jjet.jet(lambda *a: fun(jnp, *a), tuple(map(jnp.asarray, primals)),
                        tuple([jnp.asarray(t) for t in ts] for ts in series))
        got = fjet.jet(lambda *a: fun(fnp, *a), tuple(primals), tuple(series))
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    got_leaves, got_tree = jax.tree_util.tree_flatten(jax.tree_util.tree_map(np.asarray, got))
    assert got_tree == want_tree
    tol = 1e-10 if x64 else 2e-5
    for g, w in zip(got_leaves, want_leaves, strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, np.asarray(w), rtol=tol, atol=tol * 10)


def test_jet2_takes_and_gives_plain_taylor_coefficients() -> None:
    primals, series = _inputs(1, 3, np.float64)
    with fg.enable_x64(True), jax.enable_x64(True):
        want = jjet.jet2(jnp.sin, (jnp.asarray(primals[0]),), ([jnp.asarray(t) for t in series[0]],))
        got = fjet.jet2(fnp.sin, tuple(primals), tuple(series))
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), rtol=1e-12)
    for g, w in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-10, atol=1e-12)


def test_jet_argument_errors_as_jax() -> None:
    x = np.float32(1.0)
    for lib, mod in (("jax", jjet), ("fungraph", fjet)):
        with pytest.raises(ValueError, match="inconsistent lengths") as info:
            mod.jet(lambda a, b: a * b, (x, x), ([x], [x, x]))
        with pytest.raises(ValueError, match="position 0 is not an array"):
            mod.jet(lambda a: a, ((x, x),), ([x],))
        assert str(info.value) == "jet terms have inconsistent lengths for different arguments", lib
