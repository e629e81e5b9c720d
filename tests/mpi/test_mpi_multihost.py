"""``fungraph.experimental.multihost_utils`` over N processes: what every process gets from
``process_allgather``, ``broadcast_one_to_all``, ``sync_global_devices`` and ``assert_equal``
(JAX's multihost_utils, checked against what each process passed)."""

import numpy as np
import pytest

from fungraph.experimental import multihost_utils as mh
from tests.mpi.helpers import world

N, R = world()


def test_process_allgather_stacks_or_tiles_in_process_order():
    tree = {"a": np.full((2, 3), float(R)), "b": np.int32(R)}
    out = mh.process_allgather(tree)
    np.testing.assert_array_equal(out["a"], np.stack([np.full((2, 3), float(p)) for p in range(N)]))
    np.testing.assert_array_equal(out["b"], np.arange(N, dtype=np.int32))
    tiled = mh.process_allgather(np.full((2, 3), float(R)), tiled=True)
    np.testing.assert_array_equal(tiled, np.concatenate([np.full((2, 3), float(p)) for p in range(N)]))
    with pytest.raises(ValueError, match="same shapes"):
        mh.process_allgather(np.zeros(2 + (R == 0)))


def test_broadcast_one_to_all_from_process_zero_or_the_source():
    out = mh.broadcast_one_to_all({"w": np.full(3, 10.0 + R), "step": np.int64(R)})
    np.testing.assert_array_equal(out["w"], np.full(3, 10.0))
    assert int(out["step"]) == 0
    last = mh.broadcast_one_to_all(np.array([R, 2 * R]), is_source=R == N - 1)
    np.testing.assert_array_equal(last, [N - 1, 2 * (N - 1)])
    with pytest.raises(ValueError, match=f"{N} processes passed is_source=True"):
        mh.broadcast_one_to_all(np.zeros(2), is_source=True)


def test_sync_global_devices_and_assert_equal():
    mh.sync_global_devices("step 1")
    with pytest.raises(RuntimeError, match="waits at"):
        mh.sync_global_devices(f"step {R == 0}")
    mh.assert_equal({"x": np.arange(3.0)})
    with pytest.raises(AssertionError, match="params differ"):
        mh.assert_equal(np.array([R]), "params differ:")


def test_make_array_from_callback_gives_each_process_its_block():
    """JAX's global-array constructors in fungraph's one-device-per-process model: each process
    gets its block of the global array, which ``shard_map`` takes as its in-spec's block."""
    import fungraph as fg
    from fungraph.experimental import mesh_utils
    from fungraph.sharding import Mesh, NamedSharding
    from fungraph.sharding import PartitionSpec as P

    full = np.arange(4.0 * N * 3).reshape(4 * N, 3)
    mesh = fg.make_mesh((N,), ("dp",))
    assert Mesh(mesh_utils.create_device_mesh((N,)), ("dp",)) == mesh
    block = fg.make_array_from_callback(full.shape, NamedSharding(mesh, P("dp")), lambda idx: full[idx])
    np.testing.assert_array_equal(block, full[4 * R:4 * (R + 1)])
    replicated = fg.make_array_from_callback(full.shape, NamedSharding(mesh, P()), lambda idx: full[idx])
    np.testing.assert_array_equal(replicated, full)
    total = fg.jit(fg.shard_map(lambda x: fg.lax.psum(x.sum(), "dp"), mesh=mesh, in_specs=P("dp"), out_specs=P()))
    assert float(total(block)) == full.sum()
    same = fg.make_array_from_single_device_arrays(full.shape, NamedSharding(mesh, P("dp")), [block])
    np.testing.assert_array_equal(same, block)
    with pytest.raises(ValueError, match="is not this process's block"):
        fg.make_array_from_process_local_data(NamedSharding(mesh, P("dp")), np.zeros((3, 3)), full.shape)
    if N == 4:
        grid = fg.make_mesh((2, 2), ("a", "b"))
        cols = fg.make_array_from_callback((4, 6), NamedSharding(grid, P("a", "b")),
                                           lambda idx: np.arange(24.0).reshape(4, 6)[idx])
        a, b = divmod(R, 2)
        np.testing.assert_array_equal(cols, np.arange(24.0).reshape(4, 6)[2 * a:2 * a + 2, 3 * b:3 * b + 3])
