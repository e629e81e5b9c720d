"""``dynamic_update_slice``: the primitive against numpy in both modes on random shapes and
starts, on both backends; the memory plan writes only the window when the operand's buffer is
free (a donated input, a loop carry); loops that update a carry in place leave their initial
values alone and agree with eager evaluation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.backends import cpu
from fungraph.primitives.indexing import dynamic_update_slice, dynamic_update_slice_p
from fungraph.testing.strategies import random_array, shapes
from fungraph.tree_util import tree_leaves


def reference(x: np.ndarray, u: np.ndarray, starts: list[int], mode: str) -> np.ndarray:
    out = x.copy()
    lo = []
    for s, d, n in zip(starts, x.shape, u.shape):
        if mode == "drop":
            s = s + d if s < 0 else s
            if not 0 <= s <= d - n:
                return out
        lo.append(min(max(s, 0), d - n))
    out[tuple(slice(s, s + n) for s, n in zip(lo, u.shape))] = u
    return out


@st.composite
def cases(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, list[int], str]:
    shape = draw(shapes(min_dims=1, max_dims=3, max_side=5))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    ushape = tuple(draw(st.integers(0, d)) for d in shape)
    starts = [draw(st.integers(-d - 2, d + 2)) for d in shape]
    return (random_array(rng, shape, np.float32, 0.5, 2.0), random_array(rng, ushape, np.float32, 0.5, 2.0),
            starts, draw(st.sampled_from(["clamp", "drop"])))


@settings(max_examples=25, deadline=None)
@given(cases())
def test_matches_numpy_eagerly_and_under_jit(case: tuple) -> None:
    x, u, starts, mode = case
    want = reference(x, u, starts, mode)
    keep = x.copy()

    def f(x: object, u: object, *s: object) -> object:
        return dynamic_update_slice(x, u, s, mode)

    args = (x, u, *(np.int64(s) for s in starts))
    np.testing.assert_array_equal(f(*args), want)
    np.testing.assert_array_equal(np.asarray(fg.jit(f)(*args)), want)
    np.testing.assert_array_equal(x, keep)


@pytest.mark.parametrize("mode", ["clamp", "drop"])
def test_opencl_matches_numpy(require_opencl: None, mode: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5, 3)).astype(np.float32)
    u = rng.standard_normal((2, 3, 3)).astype(np.float32)
    f = fg.jit(lambda x, u, i, j: dynamic_update_slice(x, u, (i, j, 0), mode), backend="opencl")
    for i, j in [(1, 1), (-1, 2), (3, -4), (9, 0), (-9, 1)]:
        got = np.asarray(f(x, u, np.int64(i), np.int64(j)))
        np.testing.assert_array_equal(got, reference(x, u, [i, j, 0], mode))


def test_lax_clamps_like_jax() -> None:
    x = np.arange(10.0, dtype=np.float32)
    u = np.ones(3, np.float32)
    for start, lo in [(8, 7), (-1, 7), (-20, 0), (2, 2)]:
        got = fg.jit(lambda x, u, i: fg.lax.dynamic_update_slice(x, u, (i,)))(x, u, np.int64(start))
        want = x.copy()
        want[lo:lo + 3] = 1
        np.testing.assert_array_equal(np.asarray(got), want)


def test_a_donated_operand_is_updated_in_place() -> None:
    """The plan gives the update the operand's buffer: the output is the donated array."""
    def f(x: object, i: object, v: object) -> object:
        return x.at[i].set(v)

    jf = fg.jit(f, donate_argnums=0)
    x = fnp.zeros((50, 4), np.float32)  # a fungraph array: a donated numpy one is copied, as in JAX
    ptr = np.asarray(x).ctypes.data
    out = jf(x, np.int64(3), np.ones(4, np.float32))
    assert np.asarray(out).ctypes.data == ptr
    assert np.asarray(out)[3].tolist() == [1, 1, 1, 1] and np.asarray(out).sum() == 4
    kept = np.zeros((50, 4), np.float32)
    out = fg.jit(f)(kept, np.int64(3), np.ones(4, np.float32))
    assert not np.shares_memory(np.asarray(out), kept) and kept.sum() == 0


@pytest.mark.parametrize("length", [0, 1, 2, 7])
def test_loop_carries_updated_in_place_keep_the_initial_value(length: int) -> None:
    """A ``fori_loop`` (a scan) and a ``while_loop`` writing row ``i`` of their carry: the body
    is planned with that carry in place (one buffer for every iteration), the caller's array is
    untouched, and odd and even trip counts agree with eager evaluation."""
    def body(i: object, x: object) -> object:
        return x.at[i].set(x[i - 1] * 2.0 + 1.0)

    def scan_f(x: object) -> object:
        return fg.lax.fori_loop(0, length, body, x)

    def while_f(x: object, n: object) -> object:
        return fg.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, body(c[0], c[1])), (0, x))[1]

    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    keep = x.copy()
    want = scan_f(x)
    np.testing.assert_array_equal(np.asarray(fg.jit(scan_f)(x)), want)
    np.testing.assert_array_equal(np.asarray(fg.jit(while_f)(x, np.int64(length))), want)
    np.testing.assert_array_equal(x, keep)
    (loop,) = [e for e in fg.jit(scan_f).lower(x).graph.eqns if e.primitive.name == "scan"] if length > 1 else [None]
    if loop is not None:
        # the row-updated carry in place, and the counter too: its increment runs after its reads
        # (``schedule.updates_last``)
        assert cpu._loop_body(loop.params["body"], loop.params["num_carry"])[1] == (0, 1)


@pytest.mark.parametrize("backend", ["cpu", "opencl"])
def test_a_carry_read_after_its_update_is_not_updated_in_place(backend: str, request: pytest.FixtureRequest) -> None:
    """The body returns the carry before and after the update, or reads it after the update:
    the update may not overwrite what is still read, so that carry alternates between two
    views."""
    if backend == "opencl":
        request.getfixturevalue("require_opencl")

    def pair(x: object) -> object:
        return fg.lax.fori_loop(0, 5, lambda i, c: (c[0].at[i].set(c[1][i] + 1.0), c[0]), (x, x * 0.0))

    def later(x: object) -> object:
        return fg.lax.fori_loop(0, 5, lambda i, c: (c[0].at[i].set(c[0][i + 1] + 1.0), c[1] + c[0]), (x, x))

    x = np.arange(8, dtype=np.float32)
    for f in (pair, later):
        for got, w in zip(fg.jit(f, backend=backend)(x), f(x)):
            np.testing.assert_array_equal(np.asarray(got), w)


def test_opencl_loop_updates_its_carry_in_place(require_opencl: None) -> None:
    """On OpenCL the updated carry keeps one slot: the body's kernels copy nothing (the window
    kernel writes the carry's slot), and the result matches eager evaluation."""
    def f(x: object) -> object:
        return fg.lax.fori_loop(0, 7, lambda i, x: x.at[i].set(x[i - 1] * 2.0 + 1.0), x)

    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    jf = fg.jit(f, backend="opencl")
    np.testing.assert_array_equal(np.asarray(jf(x)), f(x))
    text = jf.lower(x).text
    body = text[text.index("  body:"):].split("\nkernel ")[0]
    assert "update_window" in body and "_copy " not in body, body


def _kernels(text: str) -> list[str]:
    return [line.split(" [")[0].split("_", 1)[1] for line in text.splitlines() if line.startswith("kernel ")]


def test_opencl_updates_a_dying_intermediate_in_place(require_opencl: None) -> None:
    """Outside loops too: an update of a value nothing reads afterwards shares its slot (a
    chain of updates included, the first producer writing the output's buffer), so only
    windows are written; a value read after the update, or returned as a view, is copied."""
    x = np.arange(60, dtype=np.float32).reshape(12, 5)
    v = np.full(5, -1.0, np.float32)

    def chain(x: object, v: object, i: object) -> object:
        return fnp.at(fnp.at(x * 2.0)[i].set(v))[i + 1].add(v + 1.0)

    def read_after(x: object, v: object, i: object) -> object:
        z = x * 2.0
        return fnp.at(z)[i].set(v), z.sum(), z.reshape(-1)

    for f, copies in ((chain, 0), (read_after, 1)):
        jf = fg.jit(f, backend="opencl")
        for i in (3, 0, 10, -3):
            got, want = tree_leaves(jf(x, v, np.int64(i))), tree_leaves(f(x, v, np.int64(i)))
            for g, w in zip(got, want, strict=True):
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
        names = _kernels(jf.lower(x, v, np.int64(3)).text)
        assert names.count("copy") == copies, names
        assert names.count("update_window") == (2 if f is chain else 1), names


def test_opencl_donated_operand_is_not_copied_onto_itself(require_opencl: None) -> None:
    """A donated device array taken over by the output skips the operand copy at run time;
    a host array (nothing to take over) is still copied, and neither input is changed."""
    from fungraph.backends.opencl.engine import ENGINE_STATS

    x = np.arange(40, dtype=np.float32).reshape(8, 5)
    v = np.zeros(5, np.float32)
    jf = fg.jit(lambda x, v, i: x.at[i].set(v), backend="opencl", donate_argnums=0)
    want = x.copy()
    d = fg.device_put(x, "opencl")
    for i in range(8):
        skipped = ENGINE_STATS["copies_skipped"]
        d = jf(d, v + i, np.int64(i))
        want[i] = i
        assert ENGINE_STATS["copies_skipped"] == skipped + 1
    np.testing.assert_array_equal(np.asarray(d), want)
    skipped = ENGINE_STATS["copies_skipped"]
    np.testing.assert_array_equal(np.asarray(jf(x, v + 9, np.int64(2))), np.where(np.arange(8)[:, None] == 2, 9, x))
    assert ENGINE_STATS["copies_skipped"] == skipped
    np.testing.assert_array_equal(x, np.arange(40, dtype=np.float32).reshape(8, 5))


def test_opencl_small_host_arguments_are_snapshots(require_opencl: None) -> None:
    """Small host arguments are uploaded without waiting, from a copy: changing the array
    right after the call does not change what the call computed, and many calls queued
    back to back see each their own index."""
    jf = fg.jit(lambda x, v, i: x.at[i].add(v), backend="opencl", donate_argnums=0)
    v = np.ones(4, np.float32)
    d = fg.device_put(np.zeros((50, 4), np.float32), "opencl")
    for i in range(50):
        d = jf(d, v, np.int64(i))
        v *= 2.0
    np.testing.assert_array_equal(np.asarray(d), (2.0 ** np.arange(50, dtype=np.float32))[:, None] * np.ones(4))


def test_updates_in_a_loop_are_one_equation_and_no_host_round_trip(require_opencl: None) -> None:
    """``x.at[i].set(v)`` with a traced ``i`` stages one ``dynamic_update_slice`` (no
    gather/scatter over the whole array), and runs on the device."""
    from fungraph.backends.opencl.device import TRANSFER_STATS

    def f(x: object) -> object:
        return fg.lax.fori_loop(0, 6, lambda i, x: x.at[i].set(x[i - 1] + 1.0), x)

    graph = fg.make_graph(lambda x, i, v: x.at[i].set(v))(np.zeros((1000, 8), np.float32), np.int64(1),
                                                        np.ones(8, np.float32))
    assert [e.primitive for e in graph.eqns] == [fg.core.get_primitive("reshape"), dynamic_update_slice_p]
    assert not graph.consts
    x = np.zeros((6, 3), np.float32)
    jf = fg.jit(f, backend="opencl")
    jf(x)
    before = TRANSFER_STATS["host_round_trips"]
    np.testing.assert_array_equal(np.asarray(jf(x)), f(x))
    assert TRANSFER_STATS["host_round_trips"] == before


def test_gradients_through_dropped_and_kept_updates() -> None:
    """Reverse mode: a dropped update (index out of bounds) passes the whole cotangent to the
    operand and none to the values; a kept one the reverse, at the wrapped index."""
    def f(x: object, v: object, i: object) -> object:
        return (fnp.at(x)[i].set(v * v) * fnp.arange(5.0)).sum()

    x = np.ones(5)
    for i, gx, gv in [(-2, [0, 1, 2, 0, 4], 2 * 3.0 * 3), (7, [0, 1, 2, 3, 4], 0.0)]:
        got_x, got_v = fg.jit(fg.grad(f, argnums=(0, 1)))(x, 3.0, np.int64(i))
        np.testing.assert_allclose(np.asarray(got_x), gx)
        np.testing.assert_allclose(float(got_v), gv)


def test_errors_name_the_shapes() -> None:
    with pytest.raises(fg.core.ShapeError, match=r"update f32\[4\] does not fit operand f32\[3\]"):
        dynamic_update_slice(np.zeros(3, np.float32), np.zeros(4, np.float32), [np.int64(0)])
    with pytest.raises(fg.core.ShapeError, match="not one integer scalar per axis"):
        dynamic_update_slice(np.zeros(3, np.float32), np.zeros(2, np.float32), [np.float32(0)])
