"""The ``jax.random`` tutorial's samplers, run on JAX and on fungraph with only the import
changed, in both dtype modes: draws whose inner calls take a Python float or the default int
(``rademacher``'s ``bernoulli(key, 0.5)``, ``choice``'s index draw, ``ball``) match JAX's bit for
bit in 32-bit mode too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

SAMPLERS: dict[str, Callable[[Any, Any], Any]] = {
    "rademacher": lambda r, k: r.rademacher(k, (16,)),
    "rademacher_float": lambda r, k: r.rademacher(k, (8,), dtype=np.float32),
    "choice_int": lambda r, k: r.choice(k, 7, (12,)),
    "choice_array": lambda r, k: r.choice(k, np.arange(7.0), (3, 4)),
    "ball": lambda r, k: r.ball(k, 3, shape=(4,)),
    "jit_choice": lambda r, k: (jax if r is jax.random else fg).jit(lambda key: r.choice(key, 9, (5,)))(k),
}


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_samplers_with_inner_defaults_match_jax(name: str, x64: bool) -> None:
    sample = SAMPLERS[name]
    with fg.enable_x64(x64):
        ours = np.asarray(sample(fg.random, fg.random.PRNGKey(3)))
    with jax.enable_x64(x64):
        theirs = np.asarray(sample(jax.random, jax.random.PRNGKey(3)))
    assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape)
    np.testing.assert_allclose(ours, theirs, rtol=2e-6 if theirs.dtype == np.float32 else 1e-12)
