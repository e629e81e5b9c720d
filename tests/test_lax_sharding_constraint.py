"""``fungraph.lax.with_sharding_constraint`` on one device: the value unchanged, as JAX's on one
CPU device, eagerly, under ``jit``, ``grad`` and ``vmap``; ``None`` refused as JAX does."""

from __future__ import annotations

import numpy as np
import pytest

import fungraph as fg
from fungraph import lax
from fungraph.sharding import CPU_DEVICE, Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()


def test_matches_jax_on_one_device() -> None:
    x = {"a": np.arange(4.0), "b": (np.ones((2, 2)),)}
    ours = SingleDeviceSharding(CPU_DEVICE)
    theirs = jax.sharding.SingleDeviceSharding(jax.devices()[0])

    def f(lib, sharding):  # noqa: ANN001, ANN202
        return lambda t: lib.with_sharding_constraint(jax.tree_util.tree_map(lambda v: v * 2.0, t), sharding)

    want = jax.jit(f(jax.lax, theirs))(x)
    for got in (f(lax, ours)(x), fg.jit(f(lax, ours))(x)):
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            assert isinstance(g, fg.Array)
            np.testing.assert_array_equal(g, w)
    g = fg.grad(lambda v: (lax.with_sharding_constraint(v * v, ours)).sum())(np.arange(3.0))
    np.testing.assert_array_equal(g, jax.grad(lambda v: jax.lax.with_sharding_constraint(v * v, theirs).sum())(
        np.arange(3.0)))
    mesh = Mesh(np.array([CPU_DEVICE]), ("x",))
    batched = fg.vmap(lambda v: lax.with_sharding_constraint(v + 1.0, NamedSharding(mesh, PartitionSpec())))
    np.testing.assert_array_equal(batched(np.ones((2, 3))), np.full((2, 3), 2.0))


def test_none_is_refused_like_jax() -> None:
    with pytest.raises(ValueError, match="got sharding None"):
        jax.lax.with_sharding_constraint(jnp.ones(2), None)
    with pytest.raises(ValueError, match="got sharding None"):
        lax.with_sharding_constraint(np.ones(2), None)
