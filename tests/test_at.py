"""``x.at[idx].op(v)``: every update against numpy's ``ufunc.at`` (repeated positions apply in
order; ``set``: the last one wins) on random shapes and indices, eagerly, under jit, vmap and
on OpenCL; derivatives against finite differences; traced indices; errors; inputs untouched."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.testing import check_grads
from fungraph.testing.strategies import random_array, shapes
from tests.helpers import jax_or_skip

UFUNCS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
          "power": np.power, "min": np.minimum, "max": np.maximum}
OPS = ["set", *UFUNCS]


def reference(x: np.ndarray, idx: Any, op: str, v: Any) -> np.ndarray:
    """numpy's answer: ``ufunc.at``, or for ``set`` the updates assigned one after another."""
    out = x.copy()
    if op == "set":
        pos = np.arange(x.size).reshape(x.shape)[idx]
        vals = np.broadcast_to(np.asarray(v, x.dtype), pos.shape)
        for p, u in zip(pos.reshape(-1), vals.reshape(-1)):
            out.flat[p] = u
        return out
    with np.errstate(all="ignore"):
        UFUNCS[op].at(out, idx, np.asarray(v, x.dtype))
    return out


@st.composite
def indexed(draw: st.DrawFn) -> tuple[np.ndarray, Any, tuple[int, ...]]:
    """An array, a concrete index (ints, slices, integer arrays with repeats and negative
    entries, ``None``, ``...``) and the indexed shape."""
    shape = draw(shapes(min_dims=1, max_dims=3, max_side=5))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    x = random_array(rng, shape, np.float64, 0.5, 2.0)
    entries: list[Any] = []
    arrays, length = 0, draw(st.integers(1, 4))
    for d in shape[:draw(st.integers(1, len(shape)))]:
        kind = draw(st.sampled_from(["int", "slice", "array", "none"] if arrays < 2 else ["int", "slice"]))
        if kind == "int":
            entries.append(draw(st.integers(-d, d - 1)))
        elif kind == "slice":
            entries.append(slice(draw(st.integers(-d, d)), draw(st.integers(-d, d)), draw(st.sampled_from([1, 2, -1]))))
        elif kind == "array":
            arrays += 1
            entries.append(rng.integers(-d, d, size=length))
        else:
            entries.append(None)
            entries.append(slice(None))
    if draw(st.booleans()):
        entries.append(Ellipsis)
    idx = tuple(entries)
    return x, idx, np.arange(x.size).reshape(shape)[idx].shape


@settings(max_examples=60, deadline=None)
@given(case=indexed(), op=st.sampled_from(OPS), scalar=st.booleans(), seed=st.integers(0, 2**16))
def test_updates_match_numpy_eagerly_and_under_jit(case, op: str, scalar: bool, seed: int) -> None:
    x, idx, shape = case
    v = 1.5 if scalar else np.random.default_rng(seed).uniform(0.5, 2.0, shape)
    want = reference(x, idx, op, v)
    before = x.copy()
    eager = getattr(fnp.at(x)[idx], op)(v)
    jitted = fg.jit(lambda x, v: getattr(x.at[idx], op)(v))(x, np.asarray(v))
    np.testing.assert_allclose(eager, want, rtol=1e-12, err_msg=f"{op} {idx}")
    np.testing.assert_allclose(jitted, want, rtol=1e-12, err_msg=f"jit {op} {idx}")
    np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(fg.jit(lambda x: x.at[idx].get())(x), x[idx])


@pytest.mark.parametrize("op", ["set", "add", "multiply", "max"])
def test_derivatives_match_finite_differences(op: str) -> None:
    """First and second order, with repeated positions: both ``x`` and the updates."""
    rng = np.random.default_rng(3)
    x = rng.uniform(0.5, 2.0, (4, 3))
    v = rng.uniform(0.5, 2.0, (3, 3))
    idx = np.array([2, 0, 2])
    check_grads(lambda x, v: fnp.sin(getattr(fnp.at(x)[idx], op)(v)) * x, (x, v), order=2)


@pytest.mark.parametrize("op", ["set", "add", "min", "apply"])
def test_traced_scalar_indices_in_a_loop(op: str) -> None:
    """``fori_loop`` writes position ``i`` of its carry: the index is traced, one element."""
    def body(i, c):
        ref = c.at[i]
        return ref.apply(lambda u: u * 2.0 + 1.0) if op == "apply" else getattr(ref, op)(i.astype(c.dtype) - 1.0)

    got = fg.lax.fori_loop(0, 4, body, np.full(5, 0.5))
    want = np.full(5, 0.5)
    for i in range(4):
        want = np.array(want)
        if op == "apply":
            want[i] = want[i] * 2 + 1
        else:
            want[i] = {"set": lambda a, b: b, "add": np.add, "min": np.minimum}[op](want[i], i - 1.0)
    np.testing.assert_allclose(got, want)


def test_traced_index_arrays_with_repeats_update_as_jax_scatters() -> None:
    """Repeated traced positions: ``add``/``multiply``/``min``/``max`` fold every value in,
    ``set`` keeps the last one (JAX's CPU scatter), ``divide``/``power`` apply the product of
    their values; out-of-range and (under ``mode="drop"``) negative-beyond-range ids drop."""
    jax, _ = jax_or_skip()
    x = np.arange(1.0, 6.0)
    idx = np.array([1, 1, 3, -1, 7, 1, 0])
    vals = np.array([2.0, 3.0, 0.5, 5.0, 6.0, -1.0, 4.0])
    for op in ("set", "add", "multiply", "min", "max", "divide", "power"):
        want = jax.jit(lambda x, i, v: getattr(x.at[i], op)(v))(x, idx, vals)
        got = fg.jit(lambda x, i, v: getattr(x.at[i], op)(v))(x, idx, vals)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, err_msg=op)
    rows = fg.jit(lambda x, i: x.at[i].max(np.ones((2, 3))))(np.zeros((4, 3)), np.array([2, 2]))
    np.testing.assert_array_equal(rows, [[0, 0, 0], [0, 0, 0], [1, 1, 1], [0, 0, 0]])
    one = fg.jit(lambda x, i: x.at[i].set(1.0))
    np.testing.assert_array_equal(one(np.zeros(4), np.array([2])), [0, 0, 1, 0])


def test_traced_out_of_bounds_updates_are_dropped_and_gathers_clamp() -> None:
    """JAX's defaults: an update at a traced index outside the axis changes nothing (after
    negative indices wrap once); ``get`` clamps, as indexing does."""
    x = np.arange(5.0)
    set_at = fg.jit(lambda x, i: x.at[i].set(-1.0))
    add_at = fg.jit(lambda x, i: x.at[i].add(10.0, mode="drop"))
    for i in (-9, -6, 5, 7):
        np.testing.assert_array_equal(set_at(x, i), x)
        np.testing.assert_array_equal(add_at(x, i), x)
    np.testing.assert_array_equal(set_at(x, -5), [-1, 1, 2, 3, 4])
    y = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(fg.jit(lambda y, j: y.at[1:, j].set(0.0))(y, 4), y)
    np.testing.assert_array_equal(fg.jit(lambda y, i: y.at[i, 2].min(-1.0))(y, 2), reference(y, (2, 2), "min", -1.0))
    assert fg.jit(lambda x, i: x.at[i].get())(x, 9) == 4.0
    with pytest.raises(TypeError, match=r"mode='wrap' is not supported \(mode takes one of"):
        fg.jit(lambda x: x.at[1].get(mode="wrap"))(x)
    with pytest.raises(TypeError, match="fill_value goes with get"):
        fnp.at(x)[1].set(0.0, fill_value=1.0)


MODE_INDICES = [7, -7, 2, (np.array([1, 9, -2, -9]),), (np.array([0, 5, 3]), np.array([1, 2, 9])),
                (slice(None), np.array([4, 5, -6])), (np.array([[1, 6], [0, 2]]),), (2, 6),
                (Ellipsis, np.array([0, 7]))]


@pytest.mark.parametrize("idx", MODE_INDICES, ids=[str(i) for i in range(len(MODE_INDICES))])
def test_explicit_modes_match_jax(idx: Any) -> None:
    """``mode="fill"``/``"clip"`` for ``get`` and ``"drop"``/``"clip"`` for updates, with
    concrete indices out of bounds (which the default mode refuses), eagerly and under jit."""
    from tests.helpers import jax_or_skip

    jax, jnp = jax_or_skip()
    rng = np.random.default_rng(1)
    for arr in (rng.standard_normal((4, 5)), rng.integers(-9, 9, (4, 5))):
        for mode, kw in [("fill", {}), ("fill", {"fill_value": 3}), ("clip", {})]:
            want = np.asarray(jnp.asarray(arr).at[idx].get(mode=mode, **kw))
            np.testing.assert_array_equal(fnp.at(arr)[idx].get(mode=mode, **kw), want)
            np.testing.assert_array_equal(fg.jit(lambda a: a.at[idx].get(mode=mode, **kw))(arr), want)
        v = 2.5 if arr.dtype.kind == "f" else 3
        for op in ("set", "add", "multiply", "min"):
            for mode in ("drop", "clip"):
                want = np.asarray(getattr(jnp.asarray(arr).at[idx], op)(v, mode=mode))
                np.testing.assert_array_equal(getattr(fnp.at(arr)[idx], op)(v, mode=mode), want)
                np.testing.assert_array_equal(fg.jit(lambda a: getattr(a.at[idx], op)(v, mode=mode))(arr), want)


@pytest.mark.parametrize("i", [np.int64(7), np.int64(-7), np.array([1, 9, -2, -9])], ids=["7", "-7", "array"])
def test_explicit_modes_with_traced_indices_match_jax(i: Any) -> None:
    from tests.helpers import jax_or_skip

    jax, jnp = jax_or_skip()
    x = np.random.default_rng(2).standard_normal((4, 3))
    for mode in ("fill", "clip"):
        np.testing.assert_array_equal(fg.jit(lambda a, j: a.at[j].get(mode=mode))(x, i),
                                      jnp.asarray(x).at[i].get(mode=mode))
    for mode in ("drop", "clip"):
        np.testing.assert_array_equal(fg.jit(lambda a, j: a.at[j].add(1.5, mode=mode))(x, i),
                                      jnp.asarray(x).at[i].add(1.5, mode=mode))
    check_grads(lambda a: fg.jit(lambda b, j: b.at[j].get(mode="fill", fill_value=0.0))(a, i), (x,), order=2)


def test_vmap_matches_a_loop() -> None:
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((3, 4, 2))
    vs = rng.standard_normal((3, 2))
    idx = np.array([3, 1, 2])
    f = lambda x, v, i: x.at[i].multiply(v)  # noqa: E731
    got = fg.vmap(f)(xs, vs, idx)
    want = np.stack([reference(x, i, "multiply", v) for x, v, i in zip(xs, vs, idx)])
    np.testing.assert_allclose(got, want)


def test_integer_and_boolean_arrays_keep_their_dtype() -> None:
    x = np.arange(6, dtype=np.int32)
    got = fg.jit(lambda x: x.at[np.array([1, 1, 4])].add(3))(x)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [0, 7, 2, 3, 7, 5])
    b = np.zeros(3, bool)
    np.testing.assert_array_equal(fg.jit(lambda b: b.at[1].set(True))(b), [False, True, False])
    mask = np.array([True, False, True, False, False, True])
    np.testing.assert_array_equal(fnp.at(x)[mask].set(-1), np.where(mask, -1, x))


def test_opencl_matches_the_cpu(require_opencl: None) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    v = rng.standard_normal((3, 5)).astype(np.float32)

    def f(x, v, i):
        y = x.at[np.array([4, 0, 4])].add(v)
        y = y.at[1:3, ::2].max(0.25)
        return y.at[i, 1].set(9.0)

    want = fg.jit(f)(x, v, 2)
    got = fg.jit(f, backend="opencl")(x, v, 2)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("op", ["add", "subtract"])
def test_traced_index_array_on_one_axis_is_one_scatter(axis: int, op: str, require_opencl: None) -> None:
    """``x.at[:, i].add(v)`` with ``i`` traced (an embedding gradient, a segment sum): one
    ``scatter_add`` along the axis, no table of positions the size of ``x`` in the graph;
    repeats add up, negative indices wrap once, indices still outside are dropped; on the CPU
    and on OpenCL; derivatives in ``x`` and ``v`` against finite differences."""
    rng = np.random.default_rng(axis)
    x = rng.standard_normal((5, 4, 3))
    i = np.array([[1, -1, 9], [1, 0, -7]])
    lead = (slice(None),) * axis
    v = rng.standard_normal(x.shape[:axis] + i.shape + x.shape[axis + 1:])

    def f(x: Any, v: Any, i: Any) -> Any:
        return getattr(x.at[(*lead, i)], op)(v)

    d = x.shape[axis]
    wrapped = np.where(i < 0, i + d, i)
    keep = (wrapped >= 0) & (wrapped < d)
    want = np.moveaxis(x.copy(), axis, 0)
    ufunc = np.add if op == "add" else np.subtract
    ufunc.at(want, wrapped[keep], np.moveaxis(v, tuple(range(axis, axis + 2)), (0, 1))[keep])
    want = np.moveaxis(want, 0, axis)
    np.testing.assert_allclose(fg.jit(f)(x, v, i), want, rtol=1e-12)
    x32, v32 = x.astype(np.float32), v.astype(np.float32)
    np.testing.assert_allclose(np.asarray(fg.jit(f, backend="opencl")(x32, v32, i)), want, rtol=1e-5, atol=1e-5)
    graph = fg.make_graph(f)(x, v, i)
    assert [e.primitive.name for e in graph.eqns].count("scatter_add") == 1 and not graph.consts
    check_grads(lambda x, v: fg.jit(f)(x, v, i), (x, v), order=2)


def test_errors_name_the_shapes() -> None:
    x = np.zeros((2, 3))
    with pytest.raises(ValueError, match=r"values of shape \(5,\) do not broadcast to the indexed shape \(3,\)"):
        fg.jit(lambda x: x.at[0].set(np.ones(5)))(x)
    np.testing.assert_array_equal(fg.jit(lambda x: x.at[2].set(1.0))(x), x)  # dropped, as JAX


def test_one_at_property_for_tracers_device_and_host_arrays() -> None:
    """``.at`` is installed in one place (``fungraph.numpy``), the same property on every array type."""
    from fungraph.array import Array, HostArray
    from fungraph.core import Tracer

    assert Tracer.at is Array.at is HostArray.at
    x = fnp.zeros(3)
    assert type(x) is HostArray
    np.testing.assert_array_equal(x.at[1].set(2.0), [0.0, 2.0, 0.0])
    np.testing.assert_array_equal(fg.jit(lambda v: v.at[0].add(1.0))(x), [1.0, 0.0, 0.0])


def test_unbatched_index_array_under_vmap_drops_what_lies_past_the_axis() -> None:
    """An index array passed unbatched to ``vmap`` (``in_axes=None``) is computed concretely
    there; its entries past either end are dropped as JAX drops them, where the lookup once
    indexed past its padded table (``IndexError``)."""
    x = np.arange(1.0, 5.0)
    idx = np.array([1, 7, 2, -9])
    v = np.arange(0.5, 2.5, 0.5)
    for op in ("set", "max", "add"):
        got = fg.vmap(lambda x, i, v: getattr(x.at[i], op)(v), (0, None, 0))(np.stack([x, 2 * x]), idx,
                                                                            np.stack([v, v + 1]))
        for row, xs, vs in zip(got, (x, 2 * x), (v, v + 1)):
            np.testing.assert_allclose(row, reference(xs, idx[[0, 2]], op, vs[[0, 2]]), rtol=1e-12)


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("dtype", ["int32", "uint8", "int64", "bool", "float16", "float32"])
def test_divide_is_true_division_as_jax(dtype: str, x64: bool) -> None:
    """``x.at[i].divide(v)`` is JAX's ``x / ones_like(x).at[i].multiply(v)``: an integer or
    boolean ``x`` gives a float (its values at the index divided, the rest as they were)."""
    jax_, jnp_ = jax_or_skip()
    values = [2, 2.0, np.int32(2), np.array([2, 3], np.int32)]
    for v in values:
        with fg.enable_x64(x64), jax_.enable_x64(x64), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = jnp_.arange(4).astype(dtype).at[1:3].divide(v)
            got = fnp.arange(4).astype(dtype).at[1:3].divide(v)
            traced = fg.jit(lambda x, i: x.at[i].divide(v))(fnp.arange(4).astype(dtype), np.array([1, 2]))
        for g in (got, traced):
            assert g.dtype == want.dtype, (dtype, v, g.dtype, want.dtype)
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(want, np.float64), rtol=1e-3)
