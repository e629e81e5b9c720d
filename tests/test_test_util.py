"""``fungraph.test_util.check_grads``: JAX's location and signature, fungraph.testing's checker."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.test_util import check_grads
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()


def test_signature_is_jaxs() -> None:
    import jax.test_util

    ours = inspect.signature(check_grads).parameters
    theirs = inspect.signature(jax.test_util.check_grads).parameters
    assert list(ours) == list(theirs)
    assert [p.default for p in ours.values()] == [p.default for p in theirs.values()]


def test_accepts_correct_derivatives_to_second_order() -> None:
    x = np.array([0.3, 1.1, -0.7])
    check_grads(lambda x: fnp.sin(x) * fnp.exp(x), (x,), 2)
    check_grads(lambda x, y: {"p": x * y, "q": fnp.tanh(x - y)}, (x, 2 * x), 2, modes=["rev"])
    jax.test_util.check_grads(lambda x: jnp.sin(x) * jnp.exp(x), (x,), 2)


def _wrong(lib: Any, m: Any) -> Any:
    f = lib.custom_jvp(lambda x: m.sin(x))
    f.defjvp(lambda p, t: (m.sin(p[0]), 1.1 * m.cos(p[0]) * t[0]))
    return f


@pytest.mark.parametrize("modes", [("fwd",), ("rev",)])
def test_rejects_a_wrong_derivative_as_jax_does(modes: tuple[str, ...]) -> None:
    x = np.array([0.3, 1.1])
    with pytest.raises(AssertionError):
        jax.test_util.check_grads(_wrong(jax, jnp), (x,), 1, modes=modes)
    with pytest.raises(AssertionError):
        check_grads(_wrong(fg, fnp), (x,), 1, modes=modes)


def test_rejects_an_unknown_mode() -> None:
    with pytest.raises(ValueError, match="modes"):
        check_grads(fnp.sin, (1.0,), 1, modes=("backward",))
