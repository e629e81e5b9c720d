"""Weak types of ``fungraph.numpy``/``lax`` results against JAX's, in both dtype modes: an
elementwise function of weak operands alone (Python scalars, ``asarray`` of one) is weak, so
combined later with a float32 or float16 array it keeps that array's dtype; eager and in jit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

#: an elementwise function of weak values alone: ``w`` a weak 0-d array of ``lib`` (its numpy namespace)
CASES: dict[str, Callable[[Any, Any, Any], Any]] = {
    "sqrt(2.)": lambda lib, lax, w: lib.sqrt(2.0), "exp(2)": lambda lib, lax, w: lib.exp(2),
    "sin(w)": lambda lib, lax, w: lib.sin(w), "abs(w)": lambda lib, lax, w: lib.abs(w),
    "maximum(1.,2)": lambda lib, lax, w: lib.maximum(1.0, 2), "add(w,1)": lambda lib, lax, w: lib.add(w, 1),
    "multiply(2.,w)": lambda lib, lax, w: lib.multiply(2.0, w), "power(w,2.)": lambda lib, lax, w: lib.power(w, 2.0),
    "tanh(w)*3": lambda lib, lax, w: lib.tanh(w) * 3, "log1p(0.5)": lambda lib, lax, w: lib.log1p(0.5),
    "clip(w,0.,1.)": lambda lib, lax, w: lib.clip(w, 0.0, 1.0), "square(w)": lambda lib, lax, w: lib.square(w),
    "lax.sqrt(2.)": lambda lib, lax, w: lax.sqrt(2.0), "lax.exp(w)": lambda lib, lax, w: lax.exp(w),
}


def _check(got: Any, want: Any, what: str) -> None:
    assert (got.dtype, bool(got.weak_type)) == (want.dtype, bool(want.weak_type)), \
        f"{what}: fungraph {got.dtype} weak={got.weak_type}, JAX {want.dtype} weak={want.weak_type}"
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=1e-3)


def _both(name: str, x64: bool, other: Any) -> tuple[Any, Any]:
    """The case's value ``v`` and ``v * other`` in fungraph and in JAX, in the ``x64`` mode."""
    f = CASES[name]
    saved = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", x64)
    try:
        want = f(jnp, jax.lax, jnp.asarray(0.5))
        want_mixed = want * other
    finally:
        jax.config.update("jax_enable_x64", saved)
    with fg.enable_x64(x64):
        got = f(fnp, fg.lax, fnp.asarray(0.5))
        got_mixed = got * other
    return (got, want), (got_mixed, want_mixed)


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
@pytest.mark.parametrize("name", list(CASES))
def test_eager_weak_result(name: str, x64: bool) -> None:
    (got, want), (mixed, want_mixed) = _both(name, x64, np.ones(2, np.float16 if not x64 else np.float32))
    _check(got, want, name)
    _check(mixed, want_mixed, f"{name} * array")


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
@pytest.mark.parametrize("name", list(CASES))
def test_weak_result_in_jit_keeps_array_dtype(name: str, x64: bool) -> None:
    """Inside jit, a value computed from weak values alone promotes as weak: ``v * float16`` stays float16."""
    f = CASES[name]
    other = np.ones(2, np.float16)
    saved = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", x64)
    try:
        want = jax.jit(lambda a, y: f(jnp, jax.lax, a) * y)(0.5, other)
    finally:
        jax.config.update("jax_enable_x64", saved)
    with fg.enable_x64(x64):
        got = fg.jit(lambda a, y: f(fnp, fg.lax, a) * y)(0.5, other)
    _check(got, want, name)


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean"])
def test_reductions_of_weak_values_are_strong(name: str, x64: bool) -> None:
    """JAX's reductions give strong results, also of a 0-d weak operand (a reduction over no axes)."""
    saved = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", x64)
    try:
        want = getattr(jnp, name)(jnp.sqrt(2.0))
    finally:
        jax.config.update("jax_enable_x64", saved)
    with fg.enable_x64(x64):
        got = getattr(fnp, name)(fnp.sqrt(2.0))
    _check(got, want, name)
