"""``fungraph.nn``'s activations against ``jax.nn`` (a test dependency only): values in float32
and float64 over a range that includes large magnitudes, gradients against JAX's, second
derivatives against finite differences, jit and vmap."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.nn as fnn
import fungraph.numpy as fnp
from fungraph.testing import check_grads
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

# name -> keyword arguments; every function takes one array first
ELEMENTWISE: dict[str, dict[str, Any]] = {
    "identity": {}, "tanh": {}, "softplus": {}, "log_sigmoid": {}, "silu": {}, "swish": {}, "mish": {},
    "soft_sign": {}, "leaky_relu": {"negative_slope": 0.2}, "elu": {"alpha": 0.7}, "celu": {"alpha": 1.5},
    "selu": {}, "relu6": {}, "hard_tanh": {}, "hard_sigmoid": {}, "hard_silu": {}, "hard_swish": {},
    "squareplus": {"b": 3.0}, "sparse_plus": {}, "sparse_sigmoid": {},
}
# points away from every kink (0, +-1, +-3, 6), with large magnitudes for overflow
X = np.array([-60.0, -7.3, -3.4, -2.2, -0.9, -0.45, 0.3, 0.8, 1.7, 2.6, 4.1, 6.6, 35.0, 80.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_values_match_jax(name: str, dtype: type) -> None:
    x = X.astype(dtype)
    kw = ELEMENTWISE[name]
    want = np.asarray(getattr(jax.nn, name)(jnp.asarray(x), **kw))
    got = np.asarray(getattr(fnn, name)(x, **kw))
    assert got.dtype == want.dtype, name
    rtol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, err_msg=name)
    np.testing.assert_allclose(np.asarray(fg.jit(lambda v: getattr(fnn, name)(v, **kw))(x)), want, rtol=rtol,
                               atol=rtol, err_msg=f"jit {name}")


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_gradients_match_jax_and_finite_differences(name: str) -> None:
    kw = ELEMENTWISE[name]
    got = fg.vmap(fg.grad(lambda v: getattr(fnn, name)(v, **kw)))(X)
    want = jax.vmap(jax.grad(lambda v: getattr(jax.nn, name)(v, **kw)))(jnp.asarray(X))
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=1e-14, err_msg=name)
    assert np.all(np.isfinite(got)), name
    inner = X[np.abs(X) < 10]
    check_grads(lambda v: getattr(fnn, name)(v, **kw), (inner,), order=2)


def test_axis_functions_match_jax() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 6)) * 4
    cases = [("glu", {"axis": -1}), ("glu", {"axis": 0}) if x.shape[0] % 2 == 0 else ("glu", {"axis": 1}),
             ("standardize", {"axis": 1}), ("standardize", {"axis": (0, 1), "epsilon": 1e-3}),
             ("logmeanexp", {"axis": 1}), ("logmeanexp", {"axis": None, "keepdims": False})]
    for name, kw in cases:
        want = getattr(jax.nn, name)(jnp.asarray(x), **kw)
        np.testing.assert_allclose(getattr(fnn, name)(x, **kw), np.asarray(want), rtol=1e-12, err_msg=f"{name} {kw}")
        g = fg.grad(lambda v, name=name, kw=kw: fnp.sum(fnp.sin(getattr(fnn, name)(v, **kw))))(x)
        jg = jax.grad(lambda v, name=name, kw=kw: jnp.sum(jnp.sin(getattr(jax.nn, name)(v, **kw))))(jnp.asarray(x))
        np.testing.assert_allclose(g, np.asarray(jg), rtol=1e-10, atol=1e-12, err_msg=f"grad {name} {kw}")
    with pytest.raises(ValueError, match="odd size 3"):
        fnn.glu(x, axis=0)


def test_log1mexp_is_accurate_at_both_ends() -> None:
    x = np.array([1e-12, 1e-6, 0.3, np.log(2.0), 0.9, 5.0, 40.0])
    want = np.where(x < np.log(2.0), np.log(-np.expm1(-x)), np.log1p(-np.exp(-x)))
    np.testing.assert_allclose(fnn.log1mexp(x), want, rtol=1e-14)
    assert fnn.log1mexp(np.array(40.0)) == pytest.approx(-np.exp(-40.0), rel=1e-12)   # log(1 - e^-40) rounds to 0
    np.testing.assert_allclose(fnn.log1mexp(x), np.asarray(jax.nn.log1mexp(jnp.asarray(x))), rtol=1e-13)
    assert np.all(np.isfinite(fg.vmap(fg.grad(fnn.log1mexp))(x)))


def test_standardize_where_algorithm_and_logmeanexp_where() -> None:
    """``standardize``'s ``where`` and ``algorithm`` (the fast variance clipped at 0), ``logmeanexp``'s
    ``where`` and ``logsumexp``'s first parameter name, as JAX's (issue #32)."""
    x = np.random.default_rng(5).normal(size=(3, 5)) + 1e4
    mask = np.random.default_rng(6).random((3, 5)) > 0.3
    mask[:, 0] = True
    for algorithm in ("fast", "stable"):
        for where in (None, mask):
            np.testing.assert_allclose(fg.nn.standardize(x, where=where, algorithm=algorithm),
                                       jax.nn.standardize(x, where=where, algorithm=algorithm), rtol=1e-6, atol=1e-6)
    constant = np.full((2, 4), 3.0, np.float32)
    np.testing.assert_array_equal(fg.nn.standardize(constant), jax.nn.standardize(constant))
    with pytest.raises(ValueError, match="Unknown algorithm"):
        fg.nn.standardize(x, algorithm="exact")
    for axis, keepdims in ((1, False), (None, True), (0, True)):
        np.testing.assert_allclose(fg.nn.logmeanexp(x - 1e4, axis=axis, where=mask, keepdims=keepdims),
                                   jax.nn.logmeanexp(x - 1e4, axis=axis, where=mask, keepdims=keepdims), rtol=1e-12)
    np.testing.assert_allclose(fg.nn.logsumexp(a=x, axis=1), jax.nn.logsumexp(a=x, axis=1), rtol=1e-12)
