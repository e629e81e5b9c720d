"""Data-parallel gradients and a short training run over N processes against one-process
full-batch runs, shard_map under jit and grad with collectives in control flow (scan, cond,
while_loop, fori_loop), and the same against JAX's shard_map over N host devices."""

import numpy as np

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from fungraph.sharding import PartitionSpec as P
from tests.helpers import jax_or_skip
from tests.mpi.helpers import block, global_array, jax_mesh, mesh, world

N, R = world()
SIZES = (6, 8, 3)
BATCH = 4 * N


def _params():
    return [global_array(10 + i, (a, b)) * 0.5 for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:]))]


def _data():
    return global_array(20, (BATCH, SIZES[0])), global_array(21, (BATCH, SIZES[-1]))


def _mse(np_, params, x, y):
    h = x
    for w in params[:-1]:
        h = np_.tanh(h @ w)
    return ((h @ params[-1] - y) ** 2).sum()


def _full_batch_loss(params, x, y):
    return _mse(fnp, params, x, y) / BATCH


def _local_loss(params, x, y):
    return lax.psum(_mse(fnp, params, x, y), "dp") / BATCH


def _dp_step():
    return fg.jit(fg.value_and_grad(fg.shard_map(_local_loss, mesh=mesh(), in_specs=(P(), P("dp"), P("dp")),
                                                 out_specs=P())))


def test_data_parallel_gradient_is_the_full_batch_gradient():
    params, (x, y) = _params(), _data()
    loss, grads = _dp_step()(params, block(x), block(y))
    want_loss, want = fg.value_and_grad(_full_batch_loss)(params, x, y)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-12)
    for g, w in zip(grads, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_data_parallel_gradient_matches_jax_shard_map():
    jax, jnp = jax_or_skip()
    params, (x, y) = _params(), _data()

    def jloss(params, x, y):
        return jax.lax.psum(_mse(jnp, params, x, y), "dp") / BATCH

    want = jax.jit(jax.grad(jax.shard_map(jloss, mesh=jax_mesh(jax), in_specs=(jax.P(), jax.P("dp"), jax.P("dp")),
                                          out_specs=jax.P())))(params, x, y)
    grads = _dp_step()(params, block(x), block(y))[1]
    for g, w in zip(grads, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_short_training_run_matches_one_process_full_batch():
    params, (x, y) = _params(), _data()
    ours, single = list(params), list(params)
    step = _dp_step()
    full = fg.jit(fg.grad(_full_batch_loss))
    for _ in range(10):
        grads = step(ours, block(x), block(y))[1]
        ours = [p - 0.1 * g for p, g in zip(ours, grads)]
        single = [p - 0.1 * g for p, g in zip(single, full(single, x, y))]
    for a, b in zip(ours, single):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_training_loop_inside_shard_map_with_fori_loop():
    """The whole loop in one shard_map: the parameters stay invariant through the loop's
    carry (its typing reaches a fixed point), so they can be returned as P()."""
    params, (x, y) = _params(), _data()

    def train(params, x, y):
        def body(_, ps):
            grads = fg.grad(lambda q: lax.psum(_mse(fnp, q, x, y), "dp") / BATCH)(ps)
            return [p - 0.1 * g for p, g in zip(ps, grads)]
        return lax.fori_loop(0, 5, body, params)

    ours = fg.jit(fg.shard_map(train, mesh=mesh(), in_specs=(P(), P("dp"), P("dp")), out_specs=P()))(
        params, block(x), block(y))
    single = list(params)
    for _ in range(5):
        single = [p - 0.1 * g for p, g in zip(single, fg.grad(_full_batch_loss)(single, x, y))]
    for a, b in zip(ours, single):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_collectives_in_control_flow_bodies_match_jax_with_gradients():
    jax, jnp = jax_or_skip()
    w, x = global_array(30, (3,)), global_array(31, (2 * N, 3))

    def make(lax_, np_, loop=True):
        """``loop``: with a while_loop, which JAX cannot differentiate in reverse mode."""
        def local(w, x):
            def step(c, row):
                return c + lax_.psum(np_.sin(row @ w), "dp"), lax_.pmax(row, "dp")
            total, ys = lax_.scan(step, np_.zeros(()), x)
            branch = lax_.cond(total > 0, lambda a: lax_.psum((x @ a) ** 2, "dp").sum(),
                               lambda a: lax_.pmean(x @ a, "dp").sum(), w)
            count = lax_.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + lax_.psum(c[1], "dp")),
                                    (0, total))[1] if loop else 0.0
            return total + branch + count + lax_.psum(ys.sum(), "dp")
        return local

    def both(loop):
        ours = fg.shard_map(make(lax, fnp, loop), mesh=mesh(), in_specs=(P(), P("dp")), out_specs=P())
        theirs = jax.shard_map(make(jax.lax, jnp, loop), mesh=jax_mesh(jax), in_specs=(jax.P(), jax.P("dp")),
                               out_specs=jax.P())
        return ours, theirs

    ours, theirs = both(loop=True)
    np.testing.assert_allclose(fg.jit(ours)(w, block(x)), theirs(w, x), rtol=1e-10)
    ours, theirs = both(loop=False)
    np.testing.assert_allclose(fg.grad(ours)(w, block(x)), jax.grad(theirs)(w, x), rtol=1e-10)


def test_jvp_and_vmap_inside_shard_map_match_jax():
    jax, jnp = jax_or_skip()
    x = global_array(40, (2 * N, 3))

    def make(lax_, np_, vmap, jvp):
        def local(v):
            rows = vmap(lambda r: lax_.psum(r * r, "dp"))(v)
            tangent = jvp(lambda u: lax_.all_gather(np_.sin(u), "dp", tiled=True), (v,), (v,))[1]
            return rows, tangent
        return local

    ours = fg.shard_map(make(lax, fnp, fg.vmap, fg.jvp), mesh=mesh(), in_specs=P("dp"), out_specs=P("dp"))(block(x))
    theirs = jax.shard_map(make(jax.lax, jnp, jax.vmap, jax.jvp), mesh=jax_mesh(jax), in_specs=jax.P("dp"),
                           out_specs=jax.P("dp"))(x)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, block(np.asarray(b)), rtol=1e-12)


def test_process_and_device_counts():
    assert (fg.process_count(), fg.device_count(), fg.local_device_count()) == (N, N, 1)
    assert 0 <= fg.process_index() < N
    devices = mesh().devices.ravel()
    assert [d.process_index for d in devices] == list(range(N))
