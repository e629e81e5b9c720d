"""``fungraph.numpy``'s indexing and set routines: index tricks (``r_``, ``c_``, ``mgrid``, ...),
functional updates (``inplace=False`` as JAX requires), selections, ``place``/``put``, and
``unique`` and the set functions with JAX's ``size=`` under a trace."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.testing import check_grads, shapes
from tests.helpers import assert_same, check_jit_and_vmap, jax_or_skip

# --- index tricks ---------------------------------------------------------------------------------


R_C_CASES = [
    lambda m, a, b, M: m.r_[a, b],
    lambda m, a, b, M: m.r_[a, 0, 0, b],
    lambda m, a, b, M: m.r_[-1:1:6j, [0.0] * 3, 5, 6],
    lambda m, a, b, M: m.r_[1:5:2, a],
    lambda m, a, b, M: m.c_[a, b],
    lambda m, a, b, M: m.c_[M, M],
    lambda m, a, b, M: m.c_[a, 0:3],
    lambda m, a, b, M: m.r_["-1", M, M],
    lambda m, a, b, M: m.r_["0,2", a, b],
    lambda m, a, b, M: m.r_["0,2,0", a, b],
    lambda m, a, b, M: m.r_["1,2,0", a, b],
]


@pytest.mark.parametrize("case", range(len(R_C_CASES)))
def test_r_and_c_match_numpy_eagerly_and_under_jit(case: int) -> None:
    rng = np.random.default_rng(case)
    a, b = rng.standard_normal((2, 3))
    M = rng.standard_normal((2, 3)).astype(np.float32)
    fun = R_C_CASES[case]
    want = fun(np, a, b, M)
    for got in (fun(fnp, a, b, M), fg.jit(lambda a, b, M: fun(fnp, a, b, M))(a, b, M)):
        got = np.asarray(got)
        assert got.shape == want.shape and got.dtype == want.dtype
        # a complex step's points come from JAX's linspace (start * (1 - t) + stop * t), an ulp from numpy's
        np.testing.assert_allclose(got, want, rtol=0, atol=4 * np.finfo(want.dtype).eps)


def test_r_is_differentiable_and_rejects_matrix_directives() -> None:
    x = np.arange(3.0)
    np.testing.assert_allclose(fg.grad(lambda x: fnp.sum(fnp.r_[x, 2.0 * x] ** 2))(x), 10 * x)
    with pytest.raises(ValueError, match="matrix directive 'r'"):
        fnp.r_["r", x]
    with pytest.raises(ValueError, match="unknown directive 'x'"):
        fnp.r_["x", x]


def test_mgrid_ogrid_s_and_index_exp_match_numpy_and_jax() -> None:
    _, jnp = jax_or_skip()
    keys = [slice(0, 4), (slice(0, 3), slice(1, 5, 2)), (slice(0, 1, 3j), slice(0, 2)), slice(3, 0, -1),
            (slice(0, 3),), (slice(-1, 1, 5j), slice(0, 2, 0.5), slice(2))]
    for key in keys:
        for ours, theirs in ((fnp.mgrid, np.mgrid), (fnp.ogrid, np.ogrid)):
            got, want = ours[key], theirs[key]
            assert isinstance(got, list) == isinstance(want, tuple)
            for g, w in zip(*(x if isinstance(x, (list, tuple)) else [x] for x in (got, want))):
                assert_same(g, w, exact=True)
                assert g.dtype == w.dtype
    key = (slice(0, 2, 3j), slice(1, 3))
    assert_same(fnp.mgrid[key], np.asarray(jnp.mgrid[key]), exact=True)
    assert isinstance(jnp.ogrid[key], list) and isinstance(fnp.ogrid[key], list)
    assert fnp.s_[1:2, ::3] == np.s_[1:2, ::3] and fnp.index_exp[2] == (2,)
    x = np.arange(12.0).reshape(3, 4)
    assert_same(fg.jit(lambda v: v[fnp.s_[1:, ::2]])(x), x[1:, ::2])


# --- selections and functional updates ------------------------------------------------------------


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


@settings(max_examples=6)
@given(shapes(1, 3, 1, 4), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_place_and_put_match_numpy(shape: tuple[int, ...], nv: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=shape)
    mask = rng.uniform(size=shape) < 0.5
    vals = rng.normal(size=nv)
    want = a.copy()
    np.place(want, mask, vals)
    assert_same(fnp.place(a, mask, vals, inplace=False), want)
    ind = rng.choice(a.size, size=min(nv + 1, a.size), replace=False) - rng.integers(0, 2) * a.size
    for mode in ("raise", "clip", "wrap"):
        want = a.copy()
        np.put(want, ind, vals, mode=mode)
        assert_same(fnp.put(a, ind, vals, mode=mode, inplace=False), want)
    far = np.concatenate([ind, [a.size + 3, -a.size - 1]])
    for mode in ("clip", "wrap"):
        want = a.copy()
        np.put(want, far, vals, mode=mode)
        assert_same(fnp.put(a, far, vals, mode=mode, inplace=False), want)
    want = a.copy()
    np.put(want, ind, np.resize(vals, far.size)[:ind.size])
    assert_same(fnp.put(a, far, vals, mode="fill", inplace=False), want)


def test_place_and_put_are_functional_trace_and_differentiate() -> None:
    a = np.arange(6.0)
    for call in (lambda: fnp.place(a, a > 2, 0.0), lambda: fnp.put(a, [0], 1.0)):
        with pytest.raises(ValueError, match="inplace=False"):
            call()
    with pytest.raises(IndexError, match="out of bounds"):
        fnp.put(a, [6], 1.0, mode="raise", inplace=False)
    assert_same(fnp.put(a, [1, 1], [5.0, 7.0], inplace=False), [0, 7, 2, 3, 4, 5])
    rng = np.random.default_rng(4)
    mask = np.array([True, False, True, True, False, False])
    check_grads(lambda x, v: fnp.place(x, mask, v, inplace=False), (rng.normal(size=6), rng.normal(size=2)), order=2)
    check_grads(lambda x, v: fnp.put(x, np.array([0, 4, 4]), v, inplace=False),
                (rng.normal(size=(2, 3)), rng.normal(size=3)), order=2)
    masks = rng.uniform(size=(3, 6)) < 0.5
    check_jit_and_vmap(lambda x, m: fnp.place(x, m, np.array([9.0, 8.0]), inplace=False),
                       (rng.normal(size=(3, 6)), masks))
    idx = rng.integers(-8, 8, size=(3, 4))
    for mode in ("fill", "clip", "wrap"):
        check_jit_and_vmap(lambda i, m=mode: fnp.put(a, i, np.array([1.0, 2.0]), mode=m, inplace=False), (idx,))


# --- unique values and sets -----------------------------------------------------------------------


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
