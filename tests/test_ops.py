"""``fungraph.ops``' segment reductions against JAX 0.10's ``jax.ops``: values, dtypes and weak
types in both dtype modes, eagerly and under ``jit``, with negative and out-of-range ids,
``num_segments`` given or inferred, ``bucket_size``; gradients, ``vmap`` against a loop, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
from fungraph import ops
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

NAMES = ["segment_sum", "segment_prod", "segment_max", "segment_min"]


def _same(got: object, want: object, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), \
        f"{what}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}"
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=what)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), name=st.sampled_from(NAMES), x64=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64, np.int32, np.int64, np.uint8]))
def test_segment_reductions_match_jax(data: st.DataObject, name: str, x64: bool, dtype: type) -> None:
    n = data.draw(st.integers(0, 7), label="rows")
    tail = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2), label="tail"))
    values = np.random.default_rng(data.draw(st.integers(0, 99))).uniform(-3, 3, (n, *tail))
    values = values.astype(dtype) if dtype != np.uint8 else np.abs(values).astype(dtype)
    ids = np.asarray(data.draw(st.lists(st.integers(-2, 6), min_size=n, max_size=n)), dtype=np.int32)
    kwargs = data.draw(st.sampled_from([{}, {"num_segments": 4}, {"num_segments": 0},
                                        {"num_segments": 5, "bucket_size": 2},
                                        {"num_segments": 3, "indices_are_sorted": True, "unique_indices": False}]))
    if not kwargs.get("num_segments") and "num_segments" not in kwargs and not (ids >= 0).any():
        kwargs = {"num_segments": 2}
    if n == 0 and "bucket_size" in kwargs:
        kwargs = {"num_segments": kwargs["num_segments"]}  # JAX's max/min over zero buckets raise
    with fg.enable_x64(x64), jax.enable_x64(x64):
        want = getattr(jax.ops, name)(values, ids, **kwargs)
        what = f"{name}({values.dtype}{list(values.shape)}, ids={ids.tolist()}, {kwargs}) x64={x64}"
        _same(getattr(ops, name)(values, ids, **kwargs), want, what)
        if "num_segments" in kwargs:
            _same(fg.jit(lambda v, i: getattr(ops, name)(v, i, **kwargs))(values, ids), want, f"jit {what}")


@pytest.mark.parametrize("name", NAMES)
def test_segment_reduction_gradients_match_jax(name: str) -> None:
    """Repeated ids, except for the product, whose gradient JAX defines only for unique ids."""
    values = np.random.default_rng(1).standard_normal((6, 3))
    unique = name == "segment_prod"
    ids = np.asarray([0, 2, 3, -1, 7, 1] if unique else [0, 2, 2, -1, 7, 1])
    weight = np.random.default_rng(2).standard_normal((4, 3))
    want = jax.grad(lambda v: jnp.sum(getattr(jax.ops, name)(v, ids, 4, unique_indices=unique) * weight))(values)
    got = fg.grad(lambda v: fg.numpy.sum(getattr(ops, name)(v, ids, 4, unique_indices=unique) * weight))(values)
    _same(got, want, f"grad of {name}")


@pytest.mark.parametrize("name", NAMES)
def test_vmapped_segment_reductions_match_a_loop(name: str) -> None:
    values = np.random.default_rng(3).standard_normal((5, 6, 2))
    ids = np.random.default_rng(4).integers(-1, 4, (5, 6))
    f = lambda v, i: getattr(ops, name)(v, i, num_segments=3)  # noqa: E731
    want = np.stack([np.asarray(f(v, i)) for v, i in zip(values, ids)])
    np.testing.assert_allclose(np.asarray(fg.vmap(f)(values, ids)), want, rtol=1e-12)


def test_segment_sum_errors_name_the_arguments() -> None:
    with pytest.raises(TypeError, match="segment_ids must be integers, got float32"):
        ops.segment_sum(np.ones(3), np.ones(3, np.float32), 2)
    with pytest.raises(ValueError, match=r"int64\[2\] must index the leading axes of data float64\[3\]"):
        ops.segment_sum(np.ones(3), np.zeros(2, np.int64), 2)
    with pytest.raises(fg.errors.ConcretizationTypeError, match="num_segments=None needs concrete segment_ids"):
        fg.jit(lambda i: ops.segment_sum(np.ones(3), i))(np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="non-negative"):
        ops.segment_sum(np.ones(3), np.zeros(3, np.int32), -1)
