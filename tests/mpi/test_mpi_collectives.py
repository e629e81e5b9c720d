"""Each collective over N processes against JAX's shard_map over N host devices (values and
shapes of every process's block), against its one-process ``vmap(axis_name=)`` meaning, and
its gradient against a finite difference along a random direction."""

import numpy as np
import pytest

import fungraph as fg
from fungraph import lax
from fungraph.sharding import PartitionSpec as P
from tests.helpers import jax_or_skip
from tests.mpi.helpers import allsum, block, global_array, jax_mesh, mesh, world

N, R = world()

#: name -> (the function of the collectives' namespace and one block, the out spec's axes,
#: the dimension of the result the out spec splits)
CASES = {
    "psum": (lambda c, v: c.psum(v, "dp"), ()),
    "pmean": (lambda c, v: c.pmean(v, "dp"), ()),
    "pmax": (lambda c, v: c.pmax(v, "dp"), ()),
    "pmin": (lambda c, v: c.pmin(v, "dp"), ()),
    "all_gather": (lambda c, v: c.all_gather(v, "dp"), ("dp",)),
    "all_gather_axis1": (lambda c, v: c.all_gather(v, "dp", axis=1), ("dp",)),
    "all_gather_tiled": (lambda c, v: c.all_gather(v, "dp", axis=1, tiled=True), ("dp",)),
    "psum_scatter": (lambda c, v: c.psum_scatter(v, "dp", scatter_dimension=1, tiled=True), ("dp",)),
    "psum_scatter_untiled": (lambda c, v: c.psum_scatter(v[:, :N], "dp", scatter_dimension=1), ("dp",)),
    "ppermute": (lambda c, v: c.ppermute(v, "dp", [(i, (i + 1) % N) for i in range(N)]), ("dp",)),
    "ppermute_partial": (lambda c, v: c.ppermute(v, "dp", [(0, N - 1)]), ("dp",)),
    "all_to_all": (lambda c, v: c.all_to_all(v, "dp", 1, 0, tiled=True), ("dp",)),
    "axis_index": (lambda c, v: c.axis_index("dp") + v, ("dp",)),
}

#: the block every process holds: 2 rows, 2N columns (psum_scatter and all_to_all split them)
SHAPE = (2 * N, 2 * N)


def _ours(name: str, jit: bool = False):
    body, out = CASES[name]
    f = fg.shard_map(lambda v: body(lax, v), mesh=mesh(), in_specs=P("dp"), out_specs=P(*out))
    return fg.jit(f) if jit else f


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_collective_matches_jax_shard_map(name, jit):
    jax, _ = jax_or_skip()
    body, out = CASES[name]
    x = global_array(1, SHAPE)
    theirs = np.asarray(jax.shard_map(lambda v: body(jax.lax, v), mesh=jax_mesh(jax), in_specs=jax.P("dp"),
                                      out_specs=jax.P(*out))(x))
    ours = np.asarray(_ours(name, jit)(block(x)))
    want = block(theirs) if out else theirs
    assert ours.shape == want.shape and ours.dtype == want.dtype
    np.testing.assert_allclose(ours, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_collective_matches_its_vmap_meaning(name):
    """vmap(axis_name="dp") over the N blocks stacked: example r's result is process r's."""
    body, out = CASES[name]
    x = global_array(2, SHAPE)
    stacked = np.stack(np.split(x, N, axis=0))
    meant = fg.vmap(lambda v: body(lax, v), axis_name="dp")(stacked)
    np.testing.assert_allclose(_ours(name, jit=True)(block(x)), meant[R], rtol=1e-12, atol=1e-12)


DIFFERENTIABLE = sorted(n for n in CASES if n != "axis_index")


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_collective_gradient_matches_finite_difference(name):
    """d/dt of sum_r <w_r, f(x + t v)_r> at 0 (a scalar every process agrees on after a
    psum) against the gradient's inner product with ``v``, summed over processes."""
    body, out = CASES[name]
    x = block(global_array(3, SHAPE)) + 0.01 * R  # distinct values: pmax/pmin ties are not differentiable
    v = block(global_array(4, SHAPE))

    def objective(u, w):
        y = body(lax, u)
        return lax.psum((y * w).sum(), "dp") if not out else lax.psum((y * w).sum(), "dp")

    probe = np.asarray(_ours(name, jit=True)(x))
    w = np.random.default_rng(5 + R).normal(size=probe.shape)
    w = w if out else np.random.default_rng(5).normal(size=probe.shape)  # a replicated result: one w
    f = fg.jit(fg.shard_map(objective, mesh=mesh(), in_specs=(P("dp"), P("dp") if out else P()), out_specs=P()))
    g = fg.jit(fg.grad(f))(x, w)
    eps = 1e-6
    fd = (float(f(x + eps * v, w)) - float(f(x - eps * v, w))) / (2 * eps)
    np.testing.assert_allclose(allsum(float((g * v).sum())), fd, rtol=1e-6, atol=1e-8)


def test_psum_in_place_and_on_every_dtype():
    for dt in [np.float32, np.float64, np.int32, np.int64, np.complex128, np.float16]:
        x = (np.arange(6) + R).astype(dt).reshape(2, 3)
        f = fg.jit(fg.shard_map(lambda v: lax.psum(v, "dp"), mesh=mesh(), in_specs=P("dp"), out_specs=P()))
        want = sum((np.arange(6) + r).astype(dt).reshape(2, 3) for r in range(N))
        got = f(x)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want)
    flags = fg.shard_map(lambda v: lax.pmax(v, "dp"), mesh=mesh(), in_specs=P("dp"), out_specs=P())(
        np.array([R == 0, False]))
    np.testing.assert_array_equal(flags, [True, False])


def test_different_programs_fail_naming_both_signatures():
    f = fg.jit(fg.shard_map(lambda v: lax.psum(v.sum(), "dp"), mesh=mesh(), in_specs=P("dp"), out_specs=P()))
    with pytest.raises(RuntimeError, match=r"signature [0-9a-f]{15}\) that differs from process \d's \(signature"):
        f(np.ones((2 + (R == 0), 3)))
    np.testing.assert_allclose(f(np.ones((2, 3))), 6.0 * N)  # the processes still agree afterwards


def test_two_dimensional_mesh_collectives_run_per_axis():
    """A (N/2, 2) mesh: each collective runs over the processes of one axis only."""
    jax, _ = jax_or_skip()
    shape = (N // 2, 2)
    m = fg.make_mesh(shape, ("a", "b"))
    x = global_array(6, (2 * shape[0], 6))

    def body(c, v):
        return c.psum(v, "a") * 10 + c.psum(v, "b") + c.axis_index("b")

    theirs = np.asarray(jax.shard_map(lambda v: body(jax.lax, v), mesh=jax_mesh(jax, shape, ("a", "b")),
                                      in_specs=jax.P("a", "b"), out_specs=jax.P("a", "b"))(x))
    ia, ib = np.unravel_index(R, shape)

    def mine(a):
        return np.split(np.split(a, shape[0], axis=0)[ia], 2, axis=1)[ib]

    ours = fg.jit(fg.shard_map(lambda v: body(lax, v), mesh=m, in_specs=P("a", "b"), out_specs=P("a", "b")))(mine(x))
    np.testing.assert_allclose(ours, mine(theirs), rtol=1e-12)


def test_opencl_engine_runs_collectives_through_the_host(require_opencl):
    """The OpenCL engine reads a collective's operand back to the host, runs the MPI call and
    writes the result to the device: one counted round trip per collective per call."""
    from fungraph.backends import opencl
    x = block(global_array(7, SHAPE))

    def body(v):
        return lax.psum(v * 2, "dp") + 1, lax.all_gather(v[0] * 3, "dp", tiled=True)

    f = fg.shard_map(body, mesh=mesh(), in_specs=P("dp"), out_specs=(P(), P("dp")))
    want = fg.jit(f)(x)
    gpu = fg.jit(f, backend="opencl")
    gpu(x)
    opencl.reset_transfer_stats()
    got = gpu(x)
    assert opencl.TRANSFER_STATS["host_round_trips"] == 2
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-12)


def test_psum_runs_in_place_when_the_plan_shares_the_buffer():
    from fungraph._mpi import MPI_STATS
    x = block(global_array(8, SHAPE))
    f = fg.jit(fg.shard_map(lambda v: lax.psum(v * 2, "dp") + 1, mesh=mesh(), in_specs=P("dp"), out_specs=P()))
    f(x)
    before = dict(MPI_STATS)
    got = f(x)
    assert MPI_STATS["allreduce"] - before["allreduce"] == 1
    assert MPI_STATS["allreduce_in_place"] - before["allreduce_in_place"] == 1
    want = 2 * sum(np.split(global_array(8, SHAPE), N)) + 1
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_partially_overlapping_operands_are_copied_before_the_call():
    from fungraph import _mpi
    comm = _mpi.world()
    buf = np.arange(8.0) + R
    want = sum(np.arange(8.0)[0:4] + r for r in range(N))
    before = _mpi.MPI_STATS["overlap_copies"]
    _mpi.allreduce(comm, buf[0:4], buf[2:6], "sum")
    assert _mpi.MPI_STATS["overlap_copies"] == before + 1
    np.testing.assert_allclose(buf[2:6], want)


def test_different_cached_programs_fail_instead_of_mixing_collectives():
    """Both graphs compiled on every process first; then the processes call different ones:
    each call is checked, not only the first compilation."""
    f = fg.jit(fg.shard_map(lambda v: lax.psum(v.sum(), "dp"), mesh=mesh(), in_specs=P("dp"), out_specs=P()))
    g = fg.jit(fg.shard_map(lambda v: lax.pmax(v.sum(), "dp"), mesh=mesh(), in_specs=P("dp"), out_specs=P()))
    x = np.full((2, 3), 1.0 + R)
    assert float(f(x)) == 6.0 * sum(range(1, N + 1)) and float(g(x)) == 6.0 * N
    with pytest.raises(RuntimeError, match=r"(?s)process \d runs a program .* first difference.*mesh_p"):
        (f if R == 0 else g)(x)
    assert float(g(x)) == 6.0 * N


def test_eager_collectives_are_checked_too():
    """A collective bound outside a compiled graph runs its numpy implementation: it is checked
    before it talks to the others."""
    from fungraph.primitives.mesh_collectives import mesh_psum_p
    axes = mesh().shape_tuple
    np.testing.assert_allclose(mesh_psum_p.bind(np.ones(2), axis_name="dp", mesh=axes), N * np.ones(2))
    with pytest.raises(RuntimeError, match=r"(?s)first difference.*mesh_psum.*f64\[[23]\].*mesh_psum.*f64\[[23]\]"):
        mesh_psum_p.bind(np.ones(2 + (R == 0)), axis_name="dp", mesh=axes)
