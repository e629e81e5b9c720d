"""custom_jvp, custom_vjp and checkpoint inside shard_map over N processes: their outputs are
typed from the function itself (a value computed from replicated inputs only stays
replicated), their rules run typed (a replicated value meeting a block gets a pvary, whose
transpose sums the gradient over the processes), against JAX's shard_map over N host devices
and one-process full-batch gradients."""

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from fungraph.sharding import PartitionSpec as P
from tests.helpers import jax_or_skip
from tests.mpi.helpers import block, global_array, jax_mesh, mesh, world

N, R = world()
W, X = global_array(50, (3,)), global_array(51, (2 * N, 3))


def _custom_jvp(c, np_):
    @c.custom_jvp
    def f(w, x):
        return np_.sin(w) * 2.0, x @ w

    @f.defjvp
    def f_jvp(primals, tangents):
        (w, x), (tw, tx) = primals, tangents
        return f(w, x), (np_.cos(w) * 2.0 * tw, tx @ w + x @ tw)

    return f


def _custom_vjp(c, np_, lax_):
    @c.custom_vjp
    def f(w, x):
        return np_.sin(w) * 2.0, x @ w

    def fwd(w, x):
        return f(w, x), (w, x)

    def bwd(res, ct):
        w, x = res
        a, b = ct
        return np_.cos(w) * 2.0 * a + lax_.psum(x.T @ b, "dp"), np_.outer(b, w)

    f.defvjp(fwd, bwd)
    return f


def _both(make_local, out_specs=(), grad_outside=False):
    """Our shard_map of ``make_local(fg, fnp, lax)`` over the processes and JAX's over N devices."""
    jax, jnp = jax_or_skip()
    ours = fg.shard_map(make_local(fg, fnp, lax), mesh=mesh(), in_specs=(P(), P("dp")), out_specs=P(*out_specs))
    theirs = jax.shard_map(make_local(jax, jnp, jax.lax), mesh=jax_mesh(jax), in_specs=(jax.P(), jax.P("dp")),
                           out_specs=jax.P(*out_specs))
    if grad_outside:
        return fg.jit(fg.grad(ours)), jax.jit(jax.grad(theirs))
    return fg.jit(ours), jax.jit(theirs)


@pytest.mark.parametrize("kind", ["custom_jvp", "custom_vjp"])
def test_custom_rule_outputs_typed_from_the_function_and_grad_outside(kind):
    def make(c, np_, lax_):
        f = _custom_jvp(c, np_) if kind == "custom_jvp" else _custom_vjp(c, np_, lax_)

        def local(w, x):
            a, b = f(w, x)        # a depends on the replicated w only: it may be returned as P()
            return a.sum() + lax_.psum((b ** 2).sum(), "dp")
        return local

    ours, theirs = _both(make, grad_outside=True)
    np.testing.assert_allclose(ours(W, block(X)), theirs(W, X), rtol=1e-10)
    full = fg.grad(lambda w: (fnp.sin(w) * 2.0).sum() + ((X @ w) ** 2).sum())(W)
    np.testing.assert_allclose(ours(W, block(X)), full, rtol=1e-10)


def test_grad_of_a_local_loss_inside_the_body_through_custom_jvp_and_checkpoint():
    """``grad`` inside the body with respect to replicated parameters sums the processes'
    gradients (the pvary the custom rule and the checkpointed body insert transposes to psum)."""
    def make(c, np_, lax_):
        f = _custom_jvp(c, np_)

        def local(w, x):
            g1 = c.grad(lambda w: (f(w, x)[1] ** 2).sum())(w)
            g2 = c.grad(lambda w: c.checkpoint(lambda w: (np_.tanh(x @ w) ** 2).sum())(w))(w)
            return g1 + g2
        return local

    ours, theirs = _both(make)
    np.testing.assert_allclose(ours(W, block(X)), theirs(W, X), rtol=1e-10)
    full = fg.grad(lambda w: ((X @ w) ** 2).sum() + (fnp.tanh(X @ w) ** 2).sum())(W)
    np.testing.assert_allclose(ours(W, block(X)), full, rtol=1e-10)


def test_custom_vjp_bwd_giving_a_replicated_input_a_varying_cotangent_is_an_error_as_in_jax():
    jax, jnp = jax_or_skip()

    def make(c, np_, lax_):
        @c.custom_vjp
        def f(w, x):
            return x @ w

        f.defvjp(lambda w, x: (f(w, x), (w, x)), lambda res, b: (res[1].T @ b, np_.outer(b, res[0])))
        return lambda w, x: lax_.psum((f(w, x) ** 2).sum(), "dp")

    ours, theirs = _both(make, grad_outside=True)
    with pytest.raises(ValueError, match="Custom VJP bwd rule"):
        theirs(W, X)
    with pytest.raises(ValueError, match="cotangent varying over mesh axes \\['dp'\\]"):
        ours(W, block(X))


def test_grad_inside_the_body_through_loops_whose_carry_starts_replicated():
    """A carry that starts replicated (``0.0``) and meets the block in the body is raised before
    the loop (its typing reaches the fixed point while staging), so the gradient of the local
    loss is summed once, not at every step: it equals the full-batch gradient."""
    def scan_loss(w, x):
        return lax.scan(lambda c, row: (c + fnp.tanh(row @ w), None), 0.0, x)[0]

    def fori_loss(w, x):
        return lax.fori_loop(0, 3, lambda i, a: a + fnp.sin(x @ w).sum(), 0.0)

    for loss in (scan_loss, fori_loss):
        inside = fg.jit(fg.shard_map(lambda w, x: fg.grad(loss)(w, x), mesh=mesh(), in_specs=(P(), P("dp")),
                                     out_specs=P()))(W, block(X))
        np.testing.assert_allclose(inside, fg.grad(loss)(W, X), rtol=1e-10)
