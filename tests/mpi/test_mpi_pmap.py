"""``fungraph.pmap`` over N processes (one local device each: a leading axis of size 1 here,
N in JAX's pmap over N host devices), with collectives over its axis name, gradients inside,
and the ``axis_size`` / ``psum(1, axis)`` idioms, against JAX's pmap."""

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from tests.helpers import jax_or_skip
from tests.mpi.helpers import global_array, world

N, R = world()


def _body(c, np_, lax_):
    def step(w, x):
        loss = lambda w: lax_.pmean(((np_.tanh(x @ w)) ** 2).sum(), "i")  # noqa: E731
        value, grad = c.value_and_grad(loss)(w)
        count = lax_.psum(1, "i") + lax_.axis_size("i") * 0
        return value, lax_.pmean(grad, "i"), lax_.axis_index("i") + count * 10, lax_.all_gather(x.sum(), "i")
    return step


def test_pmap_matches_jax_pmap_over_host_devices():
    jax, jnp = jax_or_skip()
    w, x = global_array(60, (N, 3)), global_array(61, (N, 4, 3))
    ours = fg.pmap(_body(fg, fnp, lax), axis_name="i")(w[R:R + 1], x[R:R + 1])
    theirs = jax.pmap(_body(jax, jnp, jax.lax), axis_name="i")(w, x)
    for a, b in zip(ours, theirs):
        assert np.shape(a) == (1,) + np.shape(b)[1:]
        np.testing.assert_allclose(a, np.asarray(b)[R:R + 1], rtol=1e-10)


def test_pmap_with_a_replicated_argument_and_errors():
    jax, jnp = jax_or_skip()
    w, x = global_array(62, (3,)), global_array(63, (N, 4, 3))

    def body(c, lax_):
        return lambda w, x: lax_.psum(x @ w, "i")

    ours = fg.pmap(body(fg, lax), axis_name="i", in_axes=(None, 0))(w, x[R:R + 1])
    theirs = jax.pmap(body(jax, jax.lax), axis_name="i", in_axes=(None, 0))(w, x)
    np.testing.assert_allclose(ours, np.asarray(theirs)[R:R + 1], rtol=1e-10)
    with pytest.raises(ValueError, match="axis 0 has shape .2, 3.*must have size 1"):
        fg.pmap(lambda v: v, axis_name="i")(np.ones((2, 3)))


def test_unchecked_shard_map_gradients_match_jax():
    """``check_vma=False``: every value is taken to vary, so psum transposes to psum (JAX's rule)."""
    jax, jnp = jax_or_skip()
    from fungraph.sharding import PartitionSpec as P
    from tests.mpi.helpers import block, jax_mesh, mesh
    w, x = global_array(64, (3,)), global_array(65, (2 * N, 3))

    def local(lax_, np_):
        return lambda w, x: lax_.psum((np_.tanh(x @ w) ** 2).sum(), "dp") * (w ** 2).sum()

    ours = fg.grad(fg.shard_map(local(lax, fnp), mesh=mesh(), in_specs=(P(), P("dp")), out_specs=P(),
                                check_vma=False))(w, block(x))
    theirs = jax.grad(jax.shard_map(local(jax.lax, jnp), mesh=jax_mesh(jax), in_specs=(jax.P(), jax.P("dp")),
                                    out_specs=jax.P(), check_vma=False))(w, x)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10)


def test_pmap_over_another_axis_matches_jax():
    jax, jnp = jax_or_skip()
    x = global_array(66, (4, N, 3))

    def body(lax_):
        return lambda v: (lax_.psum(v, "i") + v, lax_.pmean(v.sum(), "i"))

    ours = fg.pmap(body(lax), axis_name="i", in_axes=1, out_axes=(2, None))(x[:, R:R + 1])
    theirs = jax.pmap(body(jax.lax), axis_name="i", in_axes=1, out_axes=(2, None))(x)
    np.testing.assert_allclose(ours[0], np.asarray(theirs[0])[..., R:R + 1], rtol=1e-10)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-10)
