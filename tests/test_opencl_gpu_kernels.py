"""OpenCL GPU code paths run on PoCL by presenting the device as a non-CPU one: the
local-memory tiled and register-blocked matmuls, work-group reduction trees, tile sizes from
the device's limits, and op records and an MLP step through those paths.

Without an OpenCL platform these tests skip, except under ``CI=true`` where a missing
driver is a failure.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import dtypes
from fungraph.testing import OP_RECORDS
from fungraph.testing.models import sgd_step
from fungraph.tree_util import tree_flatten
from tests.helpers import GPU_LIKE, assert_matches, draw_args, kernel_notes
from tests.test_opencl import _tol
from tests.test_opencl_matmul_kernels import _check_matmuls

RECORDS = {r.name: r for r in OP_RECORDS}

# the CPU kernel choices are checked on every driver; the GPU_LIKE cases undo this
pytestmark = pytest.mark.usefixtures("require_opencl", "cpu_code_paths")


@pytest.mark.parametrize("device_as", [GPU_LIKE], indirect=True)
def test_gpu_matmul_is_the_local_memory_tiled_kernel(device_as) -> None:
    _check_matmuls(np.random.default_rng(4))
    a = np.ones((40, 24), np.float32)
    f = fg.jit(lambda x, y: x @ y, backend="opencl")
    text = kernel_notes(f, a, a.T[:, :20].copy())   # smaller than one 32 x 32 register-blocked tile
    assert "local-memory tiles 16x16, 4 outputs per work-item" in text
    assert "packed" not in text


@pytest.mark.parametrize("device_as", [{**GPU_LIKE, "compute_units": 8, "max_work_group_size": 1024,
                                        "local_mem_size": 49152}], indirect=True)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_matmul_blocks_outputs_in_registers(device_as, dtype) -> None:
    """Products of at least a 32 x 32 tile take the register-blocked kernel: 4x4 outputs per
    work-item when that still gives each compute unit a work-group, else 2x2; edges, batches
    and a transposed operand included."""
    rng = np.random.default_rng(12)
    for (bt, m, k, n), r in (((1, 200, 37, 130), 4), ((1, 70, 20, 33), 2), ((3, 33, 70, 65), 2)):
        a = rng.standard_normal((bt, k, m)).astype(dtype)
        b = rng.standard_normal((bt, k, n)).astype(dtype)
        f = fg.jit(lambda x, y: fnp.swapaxes(x, 1, 2) @ y, backend="opencl")
        want = np.swapaxes(a, 1, 2).astype(np.float64) @ b
        np.testing.assert_allclose(np.asarray(f(a, b)), want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
        assert f"{r}x{r} outputs per work-item in registers" in kernel_notes(f, a, b)


@pytest.mark.parametrize("device_as", [{**GPU_LIKE, "compute_units": 16, "max_work_group_size": 1024,
                                        "local_mem_size": 49152}], indirect=True)
def test_gpu_long_reductions_combine_in_work_group_trees(device_as) -> None:
    """A long reduction on a GPU: pass 1 spreads each row over many work-items whose
    work-group combines its shares in local memory, pass 2 one work-group per row; arg
    reductions keep one partial per work-item. Values as numpy's, with prologue and epilogue."""
    rng = np.random.default_rng(15)
    v = rng.standard_normal(50000).astype(np.float32)
    r = rng.standard_normal((3, 20000))
    cases = [(lambda v: v.sum(), v, True), (lambda v: v.max(), v, True), (lambda r: r.min(axis=1), r, True),
             (lambda r: fnp.prod(1.0 + r * 1e-5, axis=1), r, True), (lambda v: (v > 0).astype(np.int32).sum(), v, True),
             (lambda v: fnp.sqrt((v * v).sum()) + 1.0, v, True), (lambda r: r.T.sum(axis=0), r, True),
             (lambda v: fnp.argmax(v), v, False)]
    for f, a, tree in cases:
        j = fg.jit(f, backend="opencl")
        np.testing.assert_allclose(np.asarray(j(a)), np.asarray(f(a)), rtol=1e-5)
        assert ("work-group sums" in kernel_notes(j, a)) == tree


@pytest.mark.parametrize("device_as", [{"is_cpu": False, "max_work_group_size": 16, "local_mem_size": 600}],
                         indirect=True)
def test_tile_size_follows_the_device_limits(device_as) -> None:
    rng = np.random.default_rng(5)
    a = rng.standard_normal((37, 29)).astype(np.float32)
    b = rng.standard_normal((29, 45)).astype(np.float32)
    f = fg.jit(lambda x, y: x @ y, backend="opencl")
    np.testing.assert_allclose(np.asarray(f(a, b)), a @ b, rtol=1e-4, atol=1e-4)
    assert "local-memory tiles 8x8" in kernel_notes(f, a, b)


GPU_RECORDS = ["add", "multiply", "tanh", "exp", "sum_axis0", "max", "argmax", "softmax", "matmul",
               "transpose", "getitem_basic", "take", "concatenate", "conv_same", "where", "max_pool", "avg_pool"]


@pytest.mark.parametrize("device_as", [GPU_LIKE], indirect=True)
@pytest.mark.parametrize("name", GPU_RECORDS)
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_gpu_code_paths_match_eager(device_as, name: str, data: st.DataObject) -> None:
    rec = RECORDS[name]
    args = draw_args(data, rec)
    with np.errstate(all="ignore"):
        want = rec.fun(*args)
    got = fg.jit(rec.fun, backend="opencl")(*args)
    for g, w in zip(tree_flatten(got)[0], tree_flatten(want)[0]):
        assert_matches(np.asarray(g), np.asarray(w), _tol(rec, args), f"jit({name}, opencl, GPU paths)")


@pytest.mark.parametrize("device_as", [GPU_LIKE], indirect=True)
def test_gpu_code_paths_train_an_mlp_like_the_cpu(device_as) -> None:
    rng = np.random.default_rng(6)
    sizes = [20, 32, 32, 4]
    params = [{"w": (rng.standard_normal((m, n)) * 0.3).astype(np.float32), "b": np.zeros(n, np.float32)}
              for m, n in zip(sizes[:-1], sizes[1:])]
    x = rng.standard_normal((70, 20)).astype(np.float32)
    y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 70)]
    step = fg.jit(lambda p, a, b: sgd_step(p, a, b, lr=0.1), backend="opencl")
    p_ocl, l_ocl = step(params, x, y)
    p_cpu, l_cpu = fg.jit(lambda p, a, b: sgd_step(p, a, b, lr=0.1))(params, x, y)
    np.testing.assert_allclose(np.asarray(l_ocl), np.asarray(l_cpu), rtol=1e-4)
    for g, w in zip(tree_flatten(p_ocl)[0], tree_flatten(p_cpu)[0]):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-5)
    assert dtypes.float32 == np.asarray(l_ocl).dtype
