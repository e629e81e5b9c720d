"""``fungraph.numpy._extra``: the conventions an op-record row cannot show (sizes under a trace,
JAX's ``inplace=False`` and dtypes, errors). Its rows (``fungraph.testing.op_records_extra``) run
with the wider API's in ``tests/test_numpy_more.py``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.testing import shapes

# --- conventions -------------------------------------------------------------------------------


def test_bincount_sizes_like_numpy_eagerly_and_needs_length_under_jit() -> None:
    x = np.array([0, 3, 3, 1, 9])
    np.testing.assert_array_equal(fnp.bincount(x), np.bincount(x))
    np.testing.assert_array_equal(fnp.bincount(x, minlength=12), np.bincount(x, minlength=12))
    np.testing.assert_array_equal(fg.jit(lambda v: fnp.bincount(v, length=4))(x), [1, 1, 0, 2])
    with pytest.raises(TypeError, match="length="):
        fg.jit(fnp.bincount)(x)
    with pytest.raises(ValueError, match="non-negative"):
        fnp.bincount(np.array([1, -1]))
    with pytest.raises(TypeError, match="integer"):
        fnp.bincount(np.array([1.0]))
    w = np.array([0.5, 1.0, 2.0, 4.0, 8.0], np.float32)
    assert fnp.bincount(x, w).dtype == np.float32


def test_histogram_edges_and_out_of_range_values() -> None:
    a = np.array([-5.0, 0.0, 0.5, 1.0, 1.0, 2.0, 7.0])
    for bins, rng in ((np.array([0.0, 0.5, 1.0, 2.0]), None), (3, (0.0, 2.0)), (4, None)):
        got, want = fnp.histogram(a, bins, rng), np.histogram(a, bins, rng)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1])
    np.testing.assert_array_equal(fnp.histogram(np.full(3, 2.0), 2)[1], np.histogram(np.full(3, 2.0), 2)[1])
    with pytest.raises(NotImplementedError, match="auto"):
        fnp.histogram(a, "auto")
    with pytest.raises(ValueError, match="range"):
        fnp.histogram(a, 3, (2.0, 1.0))


def test_nanquantile_of_an_all_nan_slice_is_nan() -> None:
    x = np.array([[np.nan, np.nan], [1.0, np.nan]])
    np.testing.assert_array_equal(fnp.nanmedian(x, axis=1), [np.nan, 1.0])
    np.testing.assert_array_equal(fg.jit(lambda v: fnp.nanquantile(v, 0.3, axis=1))(x), [np.nan, 1.0])


def test_updates_are_functional_as_in_jax() -> None:
    a = np.zeros((3, 3))
    for call in (lambda: fnp.fill_diagonal(a, 1.0), lambda: fnp.put_along_axis(a, np.zeros((3, 1), int), 1.0, 1)):
        with pytest.raises(ValueError, match="inplace=False"):
            call()
    out = fg.jit(lambda v: fnp.fill_diagonal(v, 2.0, inplace=False))(a)
    np.testing.assert_array_equal(out, 2.0 * np.eye(3))
    assert not a.any()


def test_selection_errors_name_the_problem() -> None:
    x = np.arange(4.0)
    with pytest.raises(TypeError, match="size="):
        fg.jit(lambda v: fnp.compress(v > 1, v))(x)
    with pytest.raises(IndexError, match="5 entries"):
        fnp.compress(np.ones(5, bool), x)
    with pytest.raises(ValueError, match="invalid entry"):
        fnp.choose(np.array([0, 3]), [x[:2], x[2:]])
    with pytest.raises(ValueError, match="mode"):
        fnp.choose(np.array([0, 1]), [x[:2], x[2:]], mode="nearest")
    np.testing.assert_array_equal(fg.jit(lambda i: fnp.choose(i, [x[:2], x[2:]]))(np.array([1, 0])),
                                  np.choose([1, 0], [x[:2], x[2:]]))


def test_block_shift_aliases_window_and_array_constructors() -> None:
    np.testing.assert_array_equal(fnp.block([[1, 2], [3, 4]]), np.block([[1, 2], [3, 4]]))
    with pytest.raises(TypeError, match="tuples"):
        fnp.block((np.ones(2), np.ones(2)))
    v, s = np.array([5, -5, 1 << 40]), np.array([1, 2, 63])
    np.testing.assert_array_equal(fnp.bitwise_left_shift(v, s), np.left_shift(v, s))
    np.testing.assert_array_equal(fnp.bitwise_right_shift(v, s), np.right_shift(v, s))
    for m, beta in ((1, 3.0), (8, 0.0), (11, 8.6)):
        np.testing.assert_allclose(fnp.kaiser(m, beta), np.kaiser(m, beta), rtol=1e-12)
    assert fnp.ascontiguousarray([1, 2]).dtype == np.int64
    assert fnp.asanyarray(np.float32(1)).dtype == np.float32
    np.testing.assert_allclose(fg.grad(lambda b: fnp.sum(fnp.kaiser(6, b)))(2.0),
                               (np.sum(np.kaiser(6, 2.0 + 1e-6)) - np.sum(np.kaiser(6, 2.0 - 1e-6))) / 2e-6,
                               rtol=1e-6)


def test_unique_matches_numpy_eagerly_and_jax_padding_under_jit() -> None:
    x = np.array([[3.0, 1.0, np.nan], [3.0, np.nan, 1.0]])
    for got, want in ((fnp.unique(x, True, True, True), np.unique(x, True, True, True)),
                      (fnp.unique_all(x), np.unique_all(x)), (fnp.unique_counts(x), np.unique_counts(x)),
                      (fnp.unique_inverse(x), np.unique_inverse(x)), ((fnp.unique_values(x),), (np.unique_values(x),))):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    v = np.array([3, 1, 3, 2, 1, 1])
    values, index, counts = fg.jit(lambda a: fnp.unique(a, return_index=True, return_counts=True, size=5))(v)
    np.testing.assert_array_equal(values, [1, 2, 3, 1, 1])
    np.testing.assert_array_equal(index, [1, 3, 0, 1, 1])
    np.testing.assert_array_equal(counts, [3, 1, 2, 0, 0])
    np.testing.assert_array_equal(fg.jit(lambda a: fnp.unique(a, size=2, fill_value=-1))(v), [1, 2])
    with pytest.raises(TypeError, match="size="):
        fg.jit(fnp.unique)(v)


@settings(max_examples=30, deadline=None)
@given(shape=shapes(min_dims=1, max_dims=3, min_side=0, max_side=4), dtype=st.sampled_from(["int64", "float64"]),
       seed=st.integers(0, 99), data=st.data())
def test_unique_along_an_axis_matches_numpy(shape: tuple[int, ...], dtype: str, seed: int,
                                            data: st.DataObject) -> None:
    """Few distinct values so slices repeat; float slices sometimes hold a NaN (never equal)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2, shape).astype(dtype)
    if dtype == "float64" and x.size:
        x.reshape(-1)[rng.random(x.size) < 0.1] = np.nan
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    want = np.unique(x, True, True, True, axis=axis)
    got = fnp.unique(x, True, True, True, axis=axis)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    size = want[0].shape[axis] + data.draw(st.integers(-1, 2)) if x.size else 0
    if size >= 0 and x.shape[axis]:
        traced = fg.jit(lambda a: fnp.unique(a, True, True, True, axis=axis, size=size))(x)
        cut = min(size, want[0].shape[axis])
        np.testing.assert_array_equal(np.take(traced[0], np.arange(cut), axis=axis), np.take(want[0], np.arange(cut),
                                                                                           axis=axis))
        np.testing.assert_array_equal(traced[1][:cut], want[1][:cut])
        np.testing.assert_array_equal(traced[2], want[2])
        np.testing.assert_array_equal(traced[3][:cut], want[3][:cut])
        assert not np.any(traced[3][cut:])


def test_unique_along_an_axis_errors_and_vmap() -> None:
    x = np.array([[1, 2], [0, 5], [1, 2], [1, 0]])
    with pytest.raises(TypeError, match="size="):
        fg.jit(lambda a: fnp.unique(a, axis=0))(x)
    with pytest.raises(fg.ShapeError, match="axis 2 is out of bounds"):
        fnp.unique(x, axis=2)
    got = fg.vmap(lambda a: fnp.unique(a, axis=0, size=3))(np.stack([x, x[::-1], x[[0, 0, 2, 2]]]))
    np.testing.assert_array_equal(got, [np.unique(x, axis=0), np.unique(x, axis=0), [[1, 2], [1, 2], [1, 2]]])


@pytest.mark.parametrize("shape", [(2, 0), (0, 3), (2, 3), ()])
def test_all_and_any_of_empty_axes_match_numpy(shape: tuple[int, ...]) -> None:
    a = np.random.default_rng(0).random(shape) < 0.5
    for name in ("all", "any"):
        for axis in (None, 0, 1, (0, 1), -1) if shape else (None,):
            for keep in (False, True):
                want = getattr(np, name)(a, axis=axis, keepdims=keep)
                for got in (getattr(fnp, name)(a, axis=axis, keepdims=keep),
                            fg.jit(lambda x: getattr(fnp, name)(x, axis=axis, keepdims=keep))(a)):
                    got = np.asarray(got)
                    assert got.shape == want.shape and got.dtype == want.dtype, (name, axis, keep)
                    np.testing.assert_array_equal(got, want)


def test_set_functions_match_numpy_eagerly_and_need_size_under_jit() -> None:
    a, b = np.array([5, 1, 3, 3, 9, 1]), np.array([3, 4, 1, 1, 7])
    for name in ("intersect1d", "setdiff1d", "setxor1d", "union1d"):
        np.testing.assert_array_equal(getattr(fnp, name)(a, b), getattr(np, name)(a, b), err_msg=name)
        with pytest.raises(TypeError, match="size="):
            fg.jit(getattr(fnp, name))(a, b)
    for got, want in zip(fnp.intersect1d(a, b, return_indices=True), np.intersect1d(a, b, return_indices=True)):
        np.testing.assert_array_equal(got, want)
    values, i1, i2 = fg.jit(lambda x, y: fnp.intersect1d(x, y, return_indices=True, size=4, fill_value=-1))(a, b)
    np.testing.assert_array_equal(values, [1, 3, -1, -1])
    np.testing.assert_array_equal(i1[:2], [1, 2])
    np.testing.assert_array_equal(i2[:2], [2, 0])
    np.testing.assert_array_equal(fnp.setdiff1d(a, a), np.setdiff1d(a, a))
