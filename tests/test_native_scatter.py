"""The CPU engine's ``scatter_add`` as native loops (fungraph.backends.native.scatter).

Against ``np.add.at``, bit for bit: the loop adds each output element's updates in index
order, as ``np.add.at`` does, so the bound is 0 ulp (every value and index dtype, any axis,
duplicates, negative and clamped indices, empty shapes). Against JAX: ``.at[idx].add`` (out of
bounds dropped), ``segment_sum``, a gather's gradient, ``.at[idx].get(mode="fill")`` and a BCOO
product under jit, vmap and grad; and the simplification of ``zeros + scatter_add`` to the
scatter-add.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
import fungraph.ops as fops
from fungraph.backends.native import toolchain
from fungraph.backends.native.scatter import NATIVE_SCATTER_STATS
from fungraph.experimental import sparse
from fungraph.primitives.indexing import scatter_add
from tests.helpers import jax_or_skip

pytestmark = pytest.mark.skipif(toolchain.find_compiler() is None, reason="no C compiler")

VALUE_DTYPES = (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
                np.float32, np.float64, np.complex64, np.complex128)
INDEX_DTYPES = (np.int32, np.int64, np.uint8, np.int16, np.uint64)


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.3
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    real = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)
    if dt.kind == "c":
        return (real + 1j * rng.standard_normal(shape)).astype(dt)
    return real.astype(dt)


def _np_scatter(upd: np.ndarray, idx: np.ndarray, axis: int, shape: tuple[int, ...]) -> np.ndarray:
    """The primitive's meaning in numpy: an index wrapped once when negative, then clamped."""
    d = shape[axis]
    wide = np.minimum(idx, np.iinfo(np.int64).max).astype(np.int64) if idx.dtype == np.uint64 else idx.astype(np.int64)
    wide = np.clip(np.where(wide < 0, wide + d, wide), 0, max(d - 1, 0))
    out = np.zeros(shape, upd.dtype)
    if out.size:
        moved = np.moveaxis(upd.reshape(shape[:axis] + (idx.size,) + shape[axis + 1:]), axis, 0)
        np.add.at(np.moveaxis(out, axis, 0), wide.reshape(-1), moved)
    return out


def _cases(rng: np.random.Generator) -> list[tuple[Any, Any, tuple[int, ...], int, tuple[int, ...]]]:
    """(value dtype, index dtype, output shape, axis, index shape): every value dtype with a
    random index dtype and layout, a few indices per row (duplicates), and empty shapes."""
    cases = []
    for k, dtype in enumerate(VALUE_DTYPES):
        ndim = 1 + k % 3
        shape = tuple(int(s) for s in rng.integers(1, 6, ndim))
        axis = int(rng.integers(0, ndim))
        idx_shape = ((7,), (2, 5), ())[k % 3]
        cases.append((dtype, INDEX_DTYPES[k % len(INDEX_DTYPES)], shape, axis, idx_shape))
    cases += [(np.float32, np.int32, (0, 4), 0, (3,)), (np.float64, np.int64, (4, 0), 0, (3,)),
              (np.float64, np.int64, (4, 3), 0, (0,)), (np.float64, np.int32, (3, 1, 5), 2, (9,))]
    return cases


def _indices(rng: np.random.Generator, dtype: Any, shape: tuple[int, ...], d: int) -> np.ndarray:
    """In range, negative, and beyond either end (clamped), for a signed type; an unsigned one
    gets huge values too (clamped, never wrapped negative)."""
    dt = np.dtype(dtype)
    lo = 0 if dt.kind == "u" else -2 * d - 1
    idx = rng.integers(lo, 2 * d + 2, shape).astype(dt)
    if dt == np.uint64 and idx.size:
        idx.reshape(-1)[0] = np.iinfo(np.uint64).max - 1
    return idx


def test_scatter_add_matches_np_add_at_bit_for_bit() -> None:
    """The native loop, the numpy engine's rule and the eager impl (both 1-D ``np.add.at`` over
    flat positions) against ``np.add.at`` along the moved axis."""
    rng = np.random.default_rng(35)
    cases = []
    for dtype, idx_dtype, shape, axis, idx_shape in _cases(rng):
        idx = _indices(rng, idx_dtype, idx_shape, shape[axis])
        upd = _values(rng, shape[:axis] + idx_shape + shape[axis + 1:], dtype)
        what = f"{np.dtype(dtype).name}{list(shape)} axis {axis}, indices {np.dtype(idx_dtype).name}{list(idx_shape)}"
        cases.append((upd, idx, axis, shape, _np_scatter(upd, idx, axis, shape), what))
    for native in (True, False):
        fg.config.update("fungraph_native_cpu", native)
        try:
            for upd, idx, axis, shape, want, what in cases:
                before = NATIVE_SCATTER_STATS["runs"]
                got = np.asarray(fg.jit(lambda u, i, axis=axis, shape=shape: scatter_add(u, i, axis, shape))(upd, idx))
                assert NATIVE_SCATTER_STATS["runs"] == before + native, what
                eager = np.asarray(scatter_add(upd, idx, axis, shape))
                for result in (got, eager):
                    assert result.dtype == want.dtype and result.shape == want.shape, what
                    assert result.tobytes() == want.tobytes(), f"{what}, native {native}: {result} != {want}"
        finally:
            fg.config.update("fungraph_native_cpu", True)
    upd = np.arange(6, dtype=np.float16).reshape(3, 2)
    before = NATIVE_SCATTER_STATS["runs"]
    got = np.asarray(fg.jit(lambda u, i: scatter_add(u, i, 0, (2, 2)))(upd, np.array([1, 0, 1])))
    assert NATIVE_SCATTER_STATS["runs"] == before, "float16 has no loop: the numpy rule runs it"
    np.testing.assert_array_equal(got, _np_scatter(upd, np.array([1, 0, 1]), 0, (2, 2)))


def test_scatter_adds_against_jax_under_jit_vmap_and_grad() -> None:
    jax, jnp = jax_or_skip()
    from jax.experimental import sparse as jsparse

    rng = np.random.default_rng(36)
    x = rng.standard_normal((6, 4))
    v = rng.standard_normal((5, 4))
    idx = np.array([1, -1, 7, 1, -9])                       # negative, out of bounds both ways, duplicate
    vb = rng.standard_normal((3, 5, 4))
    ib = rng.integers(-8, 8, (3, 5))
    gather_ib = rng.integers(-6, 6, (3, 5))     # a gather's gradient: in bounds (JAX's clamps forward, drops back)
    n, nse = 7, 12
    bidx = np.stack([rng.integers(0, n, nse), rng.integers(0, n, nse)], 1).astype(np.int32)
    bdata = rng.standard_normal(nse)
    dense = rng.standard_normal((n, 3))
    args = (x, v, idx, vb, ib, gather_ib, bdata, bidx, dense)

    def programs(xp: Any, ops: Any, transform: Any, bcoo: Any) -> Any:
        def at_add(x: Any, v: Any, i: Any) -> Any:
            return x.at[i].add(v)

        def run(x: Any, v: Any, idx: Any, vb: Any, ib: Any, gather_ib: Any, bdata: Any, bidx: Any,
                dense: Any) -> list[Any]:
            def loss(x: Any, v: Any) -> Any:
                return (xp.sin(at_add(x, v, idx)) + x[idx[:2]].sum() ** 2).sum()

            return [at_add(x, v, idx), x.at[:, idx[:3]].add(v[0, :3]),
                    ops.segment_sum(v, np.array([0, 2, 2, 5, -1]), 4),
                    transform.vmap(at_add, in_axes=(None, 0, 0))(x, vb, ib),
                    transform.grad(loss, argnums=(0, 1))(x, v),
                    transform.vmap(transform.grad(lambda x, i: (x[i] ** 2).sum()), in_axes=(None, 0))(x, gather_ib),
                    bcoo((bdata, bidx), shape=(n, n)) @ dense,
                    x.at[idx].get(mode="fill", fill_value=-1.5), x.at[:, ib].get(mode="fill"),
                    transform.grad(lambda x: (x.at[:, idx].get(mode="fill", fill_value=0.0) ** 2).sum())(x)]

        return transform.jit(run)

    before = NATIVE_SCATTER_STATS["runs"]
    got = fg.tree_util.tree_leaves(programs(fnp, fops, fg, sparse.BCOO)(*args))
    assert NATIVE_SCATTER_STATS["runs"] > before
    want = jax.tree_util.tree_leaves(programs(jnp, jax.ops, jax, jsparse.BCOO)(*args))
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-12, err_msg=f"result {k}")


def _adds_of_float(fun: Any, *args: Any) -> int:
    """The additions of floats left in ``jit(fun)``'s optimised graph (fusion regions' included)."""
    def count(graph: Any) -> int:
        return sum(count(e.params["call"]) if e.primitive.name == "fusion" else
                   e.primitive.name == "add" and e.outputs[0].aval.dtype.kind == "f" for e in graph.eqns)

    return count(fg.jit(fun).lower(*args).compiled.executable.graph)


def test_zeros_plus_scatter_add_is_the_scatter_add() -> None:
    """``zeros.at[i].add(v)`` needs no addition of the zeros (a scatter-add's sums start at +0
    and never round to -0), which JAX's results confirm; an addition of zeros to anything that
    may hold -0 stays, with numpy's result (XLA's simplifier drops it: JAX returns -0 there)."""
    jax, jnp = jax_or_skip()
    v = np.array([-0.0, 2.5, -0.0])
    i = np.array([0, 2, 2])

    def embed(xp: Any, v: Any, i: Any) -> Any:
        return xp.zeros(4).at[i].add(v)

    def signed(xp: Any, v: Any, i: Any) -> Any:
        return xp.asarray(np.zeros(3)) + xp.sin(v)

    assert _adds_of_float(lambda v, i: embed(fnp, v, i), v, i) == 0
    assert _adds_of_float(lambda v, i: signed(fnp, v, i), v, i) == 1
    got = np.asarray(fg.jit(lambda v, i: embed(fnp, v, i))(v, i))
    want = np.asarray(jax.jit(lambda v, i: embed(jnp, v, i))(v, i))
    assert got.tobytes() == want.tobytes(), (got, want)
    got = np.asarray(fg.jit(lambda v, i: signed(fnp, v, i))(v, i))
    assert got.tobytes() == signed(np, v, i).tobytes(), got
