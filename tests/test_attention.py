"""``fungraph.nn.dot_product_attention`` against ``jax.nn.dot_product_attention``: values over random
shapes and options, gradients (finite differences and JAX's), jit, vmap and OpenCL."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
from fungraph.testing import check_grads
from tests.helpers import jax_or_skip

attention = fg.nn.dot_product_attention


def _broadcast_shape(draw: Any, full: tuple[int, ...], name: str) -> tuple[int, ...]:
    """``full`` with some axes set to 1 and, sometimes, leading axes dropped (JAX adds them back)."""
    shape = tuple(d if draw(st.booleans(), label=f"{name} keeps axis {i}") else 1 for i, d in enumerate(full))
    return shape[draw(st.integers(0, 2), label=f"{name} leading axes dropped"):]


@st.composite
def _cases(draw: Any) -> tuple[tuple[np.ndarray, ...], dict[str, Any]]:
    """Arguments and keywords: grouped heads, optional bias/mask/lengths/window/scale, 3-d or 4-d."""
    b, t, s = draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    kv_heads, groups, h = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 4))
    n = kv_heads * groups
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    batchless = b == 1 and draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    lead = () if batchless else (b,)
    q = rng.normal(size=lead + (t, n, h)).astype(dtype)
    k = rng.normal(size=lead + (s, kv_heads, h)).astype(dtype)
    v = rng.normal(size=lead + (s, kv_heads, h)).astype(dtype)
    bias = mask = None
    if draw(st.booleans()):
        bias = rng.normal(size=_broadcast_shape(draw, (b, n, t, s), "bias")).astype(dtype)
    if draw(st.booleans()):
        mask = rng.random(_broadcast_shape(draw, (b, n, t, s), "mask")) < 0.7
    kw: dict[str, Any] = {"is_causal": draw(st.booleans())}
    kw["local_window_size"] = draw(st.one_of(st.none(), st.integers(0, 3), st.tuples(st.integers(0, 3),
                                                                                     st.integers(0, 3))))
    kw["scale"] = draw(st.one_of(st.none(), st.floats(0.1, 2.0)))
    if draw(st.booleans()):
        kw["query_seq_lengths"] = rng.integers(0, t + 1, size=b).astype(np.int32)
    if draw(st.booleans()):
        kw["key_value_seq_lengths"] = rng.integers(0, s + 1, size=b).astype(np.int32)
    return (q, k, v, bias, mask), kw


def _tolerance(dtype: np.dtype) -> float:
    """JAX takes the softmax in float32 even for float64 inputs; fungraph keeps float64."""
    return 2e-5 if dtype == np.float32 else 2e-6


@settings(max_examples=20)
@given(_cases())
def test_matches_jax(case: tuple) -> None:
    jax, _ = jax_or_skip()
    args, kw = case
    reference = jax.jit(jax.nn.dot_product_attention,
                        static_argnames=("is_causal", "local_window_size", "return_residual"))
    want, want_lse = (np.asarray(x) for x in reference(*args, **kw, return_residual=True))
    got = attention(*args, **kw)
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = _tolerance(got.dtype)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    out, lse = attention(*args, **kw, return_residual=True)
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(lse, want_lse, rtol=tol, atol=tol)


def _small(seed: int = 0, dtype: Any = np.float64) -> tuple[np.ndarray, ...]:
    """Grouped-query shapes: 2 query heads per key/value head."""
    rng = np.random.default_rng(seed)
    b, t, s, k_heads, n, h = 2, 3, 4, 1, 2, 2
    return (rng.normal(size=(b, t, n, h)).astype(dtype), rng.normal(size=(b, s, k_heads, h)).astype(dtype),
            rng.normal(size=(b, s, k_heads, h)).astype(dtype), rng.normal(size=(1, n, t, s)).astype(dtype))


def _masked(q: Any, k: Any, v: Any, bias: Any) -> Any:
    """Every masking rule at once; batch 1's last query row is fully masked by its length."""
    mask = np.array([[[[True, True, False, True]]], [[[True, False, True, True]]]])
    return attention(q, k, v, bias, mask, is_causal=True, local_window_size=(2, 0),
                     query_seq_lengths=np.array([3, 2], np.int32), key_value_seq_lengths=np.array([4, 3], np.int32))


@pytest.mark.parametrize("order", [1, 2])
def test_gradients_match_finite_differences(order: int) -> None:
    # The softmax runs in float32 as JAX's does, so central differences of float64 inputs take
    # a wider step and tolerance than check_grads' float64 defaults.
    tols = dict(eps=1e-3, atol=2e-3, rtol=2e-3)
    check_grads(_masked, _small(), order=order, **tols)
    check_grads(lambda q, k, v, bias: attention(q, k, v, bias, scale=0.5), _small(1), order=order, **tols)


def test_gradients_match_jax() -> None:
    jax, _ = jax_or_skip()
    args = _small(2)
    weights = np.random.default_rng(3).normal(size=args[0].shape)

    def loss(fun: Any, *xs: Any) -> Any:
        return (fun(*xs) * weights).sum()

    got = fg.grad(lambda *xs: loss(_masked, *xs), argnums=(0, 1, 2, 3))(*args)
    want = jax.jit(jax.grad(lambda *xs: loss(lambda *ys: _jax_masked(jax, *ys), *xs), argnums=(0, 1, 2, 3)))(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=1e-6)


def _jax_masked(jax: Any, q: Any, k: Any, v: Any, bias: Any) -> Any:
    mask = np.array([[[[True, True, False, True]]], [[[True, False, True, True]]]])
    return jax.nn.dot_product_attention(q, k, v, bias, mask, is_causal=True, local_window_size=(2, 0),
                                        query_seq_lengths=np.array([3, 2], np.int32),
                                        key_value_seq_lengths=np.array([4, 3], np.int32))


def test_fully_masked_rows_average_the_values_and_padded_queries_are_zero() -> None:
    q, k, v, _ = _small()
    mask = np.zeros((1, 1, 3, 4), bool)
    out = attention(q, k, v, mask=mask)
    np.testing.assert_allclose(out, np.repeat(v.mean(axis=1, keepdims=True), 3, axis=1).repeat(2, axis=2))
    out = attention(q, k, v, query_seq_lengths=np.array([1, 0], np.int32))
    assert np.all(out[0, 1:] == 0) and np.all(out[1] == 0) and np.all(out[0, 0] != 0)


def test_jit_and_vmap_match_eager() -> None:
    args = _small(4)
    np.testing.assert_allclose(fg.jit(_masked)(*args), _masked(*args), rtol=1e-13)
    stacked = [np.stack([a, a * 0.5]) for a in args]
    got = fg.vmap(_masked)(*stacked)
    want = np.stack([_masked(*args), _masked(*(a * 0.5 for a in args))])
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_opencl_matches_cpu(require_opencl: None) -> None:
    args = _small(5, np.float32)
    got = np.asarray(fg.jit(_masked, backend="opencl")(*args))
    np.testing.assert_allclose(got, fg.jit(_masked)(*args), rtol=1e-5, atol=1e-6)


def test_errors_name_the_problem() -> None:
    q, k, v, _ = _small()
    with pytest.raises(NotImplementedError, match="cuDNN"):
        attention(q, k, v, implementation="cudnn")
    with pytest.raises(ValueError, match="unsupported implementation 'flash'"):
        attention(q, k, v, implementation="flash")
    np.testing.assert_array_equal(attention(q, k, v, implementation="xla"), attention(q, k, v))
    with pytest.raises(ValueError, match="query dtype should be float64, but got float32"):
        attention(q.astype(np.float32), k, v)
    with pytest.raises(ValueError, match="multiple of key/value heads, but got 3 vs 2"):
        attention(q[:, :, :1].repeat(3, axis=2), k.repeat(2, axis=2), v.repeat(2, axis=2))
    with pytest.raises(ValueError, match="mask dtype should be bool"):
        attention(q, k, v, mask=np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"key_value_seq_lengths must be an int32 array of shape \(2,\)"):
        attention(q, k, v, key_value_seq_lengths=np.array([1.0, 2.0]))
