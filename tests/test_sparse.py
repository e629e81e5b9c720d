"""``fungraph.experimental.sparse`` against ``jax.experimental.sparse`` on random sparse arrays, in
both dtype modes: BCOO layouts (batch and dense dimensions) made from and turned into dense
arrays, products with dense arrays on either side, elementwise products, sums, transposes,
duplicate handling; the BCOO as a pytree through ``jit``, ``vmap``, ``grad`` and ``scan``;
``sparsify``, ``sparse.grad``, BCSR, and a small graph-convolution layer."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.experimental import sparse
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
from jax.experimental import sparse as jsparse  # noqa: E402 - after jax_or_skip's set-up

MODES = [True, False]
#: (n_batch, n_dense, x64): every layout once, both modes for the plain one (JAX's compilations
#: dominate this file's time)
LAYOUTS = [(0, 0, True), (0, 0, False), (1, 0, False), (0, 1, True), (1, 1, False)]


@contextlib.contextmanager
def _mode(x64: bool) -> Iterator[None]:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        yield


def _random_sparse(shape: tuple[int, ...], seed: int, density: float = 0.35) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.normal(size=shape)
    return np.where(rng.random(shape) < density, values, 0.0)


def _same(ours: Any, theirs: Any, x64: bool, what: str = "") -> None:
    got, want = np.asarray(ours), np.asarray(theirs)
    assert (got.shape, got.dtype) == (want.shape, want.dtype), (what, got.shape, got.dtype, want.shape, want.dtype)
    if want.dtype.kind in "fc":
        tol = 1e-12 if x64 else 2e-6
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def _same_bcoo(ours: Any, theirs: Any, x64: bool) -> None:
    assert isinstance(ours, sparse.BCOO), type(ours)
    assert (ours.shape, ours.nse, ours.n_batch, ours.n_dense) == (theirs.shape, theirs.nse, theirs.n_batch,
                                                                  theirs.n_dense)
    _same(ours.data, theirs.data, x64, "data")
    _same(ours.indices, theirs.indices, x64, "indices")


@pytest.mark.parametrize("n_batch, n_dense, x64", LAYOUTS)
def test_fromdense_and_todense_match_jax(n_batch: int, n_dense: int, x64: bool) -> None:
    mat = _random_sparse((3, 4, 5), seed=n_batch + 2 * n_dense)
    with _mode(x64):
        ours = sparse.BCOO.fromdense(mat, n_batch=n_batch, n_dense=n_dense)
        theirs = jsparse.BCOO.fromdense(mat, n_batch=n_batch, n_dense=n_dense)
        _same_bcoo(ours, theirs, x64)
        _same(ours.todense(), theirs.todense(), x64, "todense")
        padded = sparse.bcoo_fromdense(mat, nse=theirs.nse + 3, n_batch=n_batch, n_dense=n_dense,
                                       index_dtype=np.int16)
        _same_bcoo(padded, jsparse.bcoo_fromdense(mat, nse=theirs.nse + 3, n_batch=n_batch, n_dense=n_dense,
                                                  index_dtype=np.int16), x64)
        _same(sparse.bcoo_todense(padded), mat.astype(theirs.dtype), x64, "padded todense")
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("n_batch, n_dense, x64", LAYOUTS)
def test_products_with_dense_arrays_on_either_side_match_jax(n_batch: int, n_dense: int, x64: bool) -> None:
    mat = _random_sparse((2, 4, 3), seed=10 + n_batch + 2 * n_dense)
    rng = np.random.default_rng(1)
    right, left = rng.normal(size=(2, 3, 2)), rng.normal(size=(2, 5, 4))
    vector = rng.normal(size=3)
    with _mode(x64):
        ours = sparse.BCOO.fromdense(mat, n_batch=n_batch, n_dense=n_dense)
        theirs = jsparse.BCOO.fromdense(mat, n_batch=n_batch, n_dense=n_dense)
        # JAX's sparse products contract only sparse dimensions and batch only batch ones: where
        # it refuses, the reference is JAX's dense product
        reference = jnp.asarray(mat) if n_dense else theirs
        _same(ours @ right[0], reference @ right[0], x64, "A @ X")
        _same(fnp.asarray(left[0]) @ ours, jnp.asarray(left[0]) @ reference, x64, "X @ A")
        _same(left[0] @ ours, jnp.asarray(left[0]) @ reference, x64, "numpy X @ A")
        _same(ours @ vector, reference @ vector, x64, "A @ v")
        batched = jnp.asarray(mat) if n_dense or not n_batch else theirs
        _same(ours @ fnp.asarray(right), batched @ jnp.asarray(right), x64, "batched A @ X")
        _same(fnp.asarray(left) @ ours, jnp.asarray(left) @ batched, x64, "batched X @ A")
        _same((ours * 2.5).todense(), (theirs * 2.5).todense(), x64, "A * scalar")
        _same((fnp.asarray(vector) * ours).todense(), (jnp.asarray(vector) * theirs).todense(), x64, "v * A")
        _same(ours.sum(), theirs.sum(), x64, "sum")
        for axis in (0, 1, 2):
            _same(ours.sum(axis).todense(), theirs.sum(axis).todense(), x64, f"sum({axis})")


@pytest.mark.parametrize("x64", MODES)
def test_dot_general_transpose_and_multiply_dense_match_jax(x64: bool) -> None:
    mat = _random_sparse((3, 4, 2), seed=5)
    rng = np.random.default_rng(2)
    rhs = rng.normal(size=(2, 4, 5))
    dims = (((1,), (1,)), ((), ()))
    with _mode(x64):
        ours = sparse.BCOO.fromdense(mat, n_dense=1)
        theirs = jsparse.BCOO.fromdense(mat, n_dense=1)
        _same(sparse.bcoo_dot_general(ours, rhs, dimension_numbers=dims),
              jsparse.bcoo_dot_general(theirs, rhs, dimension_numbers=dims), x64, "dot_general")
        flipped = (((1,), (1,)), ((), ()))
        _same(sparse.bcoo_dot_general(rhs, ours, dimension_numbers=flipped),
              jsparse.bcoo_dot_general(rhs, theirs, dimension_numbers=flipped), x64, "rdot_general")
        _same_bcoo(sparse.bcoo_transpose(ours, permutation=(1, 0, 2)),
                   jsparse.bcoo_transpose(theirs, permutation=(1, 0, 2)), x64)
        _same(ours.transpose((1, 0, 2)).todense(), theirs.transpose((1, 0, 2)).todense(), x64, "transpose")
        scale = rng.normal(size=(4, 1))
        _same(sparse.bcoo_multiply_dense(ours, scale), jsparse.bcoo_multiply_dense(theirs, scale), x64, "multiply")
        _same_bcoo(ours.astype(np.float32), theirs.astype(np.float32), x64)
        _same_bcoo(sparse.bcoo_reduce_sum(ours, axes=(1,)), jsparse.bcoo_reduce_sum(theirs, axes=(1,)), x64)


@pytest.mark.parametrize("x64", [True])
def test_duplicates_and_sorting_match_jax(x64: bool) -> None:
    data = np.array([1., 2., 3., 0., 5., -1.])
    indices = np.array([[2, 1], [0, 3], [2, 1], [1, 1], [0, 0], [3, 0]], np.int32)
    with _mode(x64):
        ours = sparse.BCOO((data, indices), shape=(3, 4))
        theirs = jsparse.BCOO((data, indices), shape=(3, 4))
        _same_bcoo(ours.sort_indices(), theirs.sort_indices(), x64)
        _same_bcoo(ours.sum_duplicates(), theirs.sum_duplicates(), x64)
        _same_bcoo(ours.sum_duplicates(nse=6, remove_zeros=False), theirs.sum_duplicates(nse=6, remove_zeros=False),
                   x64)
        _same(ours.todense(), theirs.todense(), x64, "todense with duplicates and padding")
        batched = sparse.BCOO.fromdense(_random_sparse((2, 3, 3), seed=3), n_batch=1)
        jbatched = jsparse.BCOO.fromdense(_random_sparse((2, 3, 3), seed=3), n_batch=1)
        _same_bcoo(batched.sort_indices(), jbatched.sort_indices(), x64)
        _same_bcoo(batched.sum_duplicates(nse=5), jbatched.sum_duplicates(nse=5), x64)


@pytest.mark.parametrize("x64", [True])
def test_products_of_two_sparse_arrays_match_jax(x64: bool) -> None:
    a, b, v = _random_sparse((4, 3), seed=12), _random_sparse((3, 5), seed=13, density=0.5), np.array([1., 0., 2.])
    with _mode(x64):
        for lhs, rhs in ((a, b), (a, v), (a.T, a)):
            _same_bcoo(sparse.BCOO.fromdense(lhs) @ sparse.BCOO.fromdense(rhs),
                       jsparse.BCOO.fromdense(lhs) @ jsparse.BCOO.fromdense(rhs), x64)
        with pytest.raises(NotImplementedError, match="two sparse arrays"):
            sparse.BCOO.fromdense(a, n_dense=1) @ sparse.BCOO.fromdense(b)
        other = _random_sparse((4, 3), seed=14)
        ours, theirs = sparse.BCOO.fromdense(a), jsparse.BCOO.fromdense(a)
        _same_bcoo(ours + sparse.BCOO.fromdense(other), theirs + jsparse.BCOO.fromdense(other), x64)
        _same_bcoo(ours - sparse.BCOO.fromdense(other), theirs - jsparse.BCOO.fromdense(other), x64)
        _same(ours + other, theirs + other, x64, "sparse + dense")


def test_update_layout_concatenate_todense_and_from_scipy_sparse_match_jax() -> None:
    mat = _random_sparse((2, 3, 4, 2), seed=11)
    for (n_batch, n_dense), target in [((1, 1), (0, 0)), ((1, 1), (1, 0)), ((1, 1), (0, 1)), ((2, 0), (0, 0)),
                                       ((0, 2), (0, 0))]:
        ours = sparse.BCOO.fromdense(mat, n_batch=n_batch, n_dense=n_dense)
        theirs = jsparse.BCOO.fromdense(mat, n_batch=n_batch, n_dense=n_dense)
        _same_bcoo(ours.update_layout(n_batch=target[0], n_dense=target[1]),
                   jsparse.bcoo_update_layout(theirs, n_batch=target[0], n_dense=target[1]), True)
    for n_batch in (0, 1):
        for dimension, other in ((1, mat[:, :2]), (0, mat[:1])):
            pair = [sparse.BCOO.fromdense(m, n_batch=n_batch) for m in (mat, other)]
            jpair = [jsparse.BCOO.fromdense(m, n_batch=n_batch) for m in (mat, other)]
            _same_bcoo(sparse.bcoo_concatenate(pair, dimension=dimension),
                       jsparse.bcoo_concatenate(jpair, dimension=dimension), True)
            _same_bcoo(sparse.sparsify(lambda a, b, d=dimension: fnp.concatenate([a, b], axis=d))(*pair),
                       jsparse.sparsify(lambda a, b, d=dimension: jnp.concatenate([a, b], axis=d))(*jpair), True)
    flat = sparse.BCOO.fromdense(mat)
    with pytest.raises(sparse.SparseEfficiencyError, match="inefficient storage"):
        flat.update_layout(n_batch=1)
    with pytest.warns(sparse.SparseEfficiencyWarning):
        grown = flat.update_layout(n_dense=1, on_inefficient="warn")
    _same(grown.todense(), mat, True, "grown layout")
    assert isinstance(flat, sparse.JAXSparse) and isinstance(sparse.BCSR.fromdense(mat[0, :, :, 0]), sparse.JAXSparse)
    _same(sparse.todense(flat), jsparse.todense(jsparse.BCOO.fromdense(mat)), True, "sparse.todense")
    _same(sparse.todense(mat), mat, True, "sparse.todense of a dense array")
    import scipy.sparse  # noqa: PLC0415 - JAX's own dependency, only this test needs it

    coo = scipy.sparse.coo_matrix(mat[0, :, :, 1])
    _same_bcoo(sparse.BCOO.from_scipy_sparse(coo), jsparse.BCOO.from_scipy_sparse(coo), True)


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype float64")  # JAX's default float64 in 32-bit mode
@pytest.mark.parametrize("x64", [False])
def test_eye_empty_reshape_and_random_bcoo_match_jax(x64: bool) -> None:
    with _mode(x64):
        for k in (-1, 0, 2):
            _same_bcoo(sparse.eye(3, 4, k=k), jsparse.eye(3, 4, k=k), x64)
        _same_bcoo(sparse.empty((2, 3), nse=2), jsparse.empty((2, 3), nse=2), x64)
        mat = _random_sparse((4, 6), seed=4)
        ours, theirs = sparse.BCOO.fromdense(mat), jsparse.BCOO.fromdense(mat)
        _same_bcoo(ours.reshape(3, 8), theirs.reshape(3, 8), x64)
        for kwargs in ({"nse": 5}, {"nse": 0.5, "n_batch": 1, "sorted_indices": True}):
            _same_bcoo(sparse.random_bcoo(fg.random.key(3), (3, 4), **kwargs),
                       jsparse.random_bcoo(jax.random.key(3), (3, 4), **kwargs), x64)


@pytest.mark.parametrize("x64", MODES)
def test_bcoo_is_a_pytree_through_jit_vmap_and_scan(x64: bool) -> None:
    mat = _random_sparse((2, 4, 3), seed=6)
    x = np.random.default_rng(3).normal(size=(3, 5))
    with _mode(x64):
        ours = sparse.BCOO.fromdense(mat, n_batch=1)
        theirs = jsparse.BCOO.fromdense(mat, n_batch=1)
        _same(fg.jit(lambda a, x: a @ x)(ours, x), jax.jit(lambda a, x: a @ x)(theirs, x), x64, "jit")
        ours_out = fg.jit(lambda a: a * 3.0)(ours)
        _same_bcoo(ours_out, jax.jit(lambda a: a * 3.0)(theirs), x64)
        _same(fg.vmap(lambda a: a @ x)(ours), jax.vmap(lambda a: a @ x)(theirs), x64, "vmap over the batch")
        _same_bcoo(fg.vmap(lambda a: a * 2.0)(ours), jax.vmap(lambda a: a * 2.0)(theirs), x64)
        flat = sparse.BCOO.fromdense(mat[0])
        jflat = jsparse.BCOO.fromdense(mat[0])
        _same(fg.vmap(lambda col: flat @ col, in_axes=1)(x), jax.vmap(lambda col: jflat @ col, in_axes=1)(x), x64,
              "vmap over the dense operand")

        def step(lib: Any, carry: Any, _: Any) -> Any:
            return carry * 0.5, (carry @ x).sum()

        got = fg.lax.scan(lambda c, i: step(fg, c, i), ours, None, length=3)
        want = jax.lax.scan(lambda c, i: step(jax, c, i), theirs, None, length=3)
        _same_bcoo(got[0], want[0], x64)
        _same(got[1], want[1], x64, "scan outputs")


@pytest.mark.parametrize("x64", MODES)
def test_gradients_with_respect_to_data_and_the_dense_operand_match_jax(x64: bool) -> None:
    mat = _random_sparse((4, 3), seed=7)
    x = np.random.default_rng(4).normal(size=(3, 2))
    with _mode(x64):
        ours = sparse.BCOO.fromdense(mat)
        theirs = jsparse.BCOO.fromdense(mat)

        def loss(lib: Any, bcoo: Any, data: Any, x: Any) -> Any:
            a = bcoo((data, ours.indices if lib is fg else theirs.indices), shape=(4, 3))
            return ((a @ x) ** 2).sum() + (x.T @ a.T).sum()

        for argnum in (0, 1):
            got = fg.jit(fg.grad(lambda d, x: loss(fg, sparse.BCOO, d, x), argnum))(ours.data, x)
            want = jax.jit(jax.grad(lambda d, x: loss(jax, jsparse.BCOO, d, x), argnum))(theirs.data, x)
            _same(got, want, x64, f"grad of argument {argnum}")
        value, grads = sparse.value_and_grad(lambda a, x: ((a @ x) ** 2).sum(), (0, 1))(ours, x)
        jvalue, jgrads = jsparse.value_and_grad(lambda a, x: ((a @ x) ** 2).sum(), (0, 1))(theirs, x)
        _same(value, jvalue, x64, "sparse.value_and_grad value")
        _same_bcoo(grads[0], jgrads[0], x64)
        _same(grads[1], jgrads[1], x64, "sparse.value_and_grad dense gradient")
        _same_bcoo(sparse.grad(lambda a: (a @ x).sum())(ours), jsparse.grad(lambda a: (a @ x).sum())(theirs), x64)


@pytest.mark.parametrize("x64", MODES)
def test_sparsify_matches_jax(x64: bool) -> None:
    mat = _random_sparse((4, 3), seed=8)
    rng = np.random.default_rng(5)
    v, w = rng.normal(size=4), rng.normal(size=(4, 3))

    def f(np_: Any, m: Any, v: Any, w: Any) -> Any:
        y = 2 * np_.dot(np_.log1p(np_.abs(m.T)), v) + 1
        scaled = (m * w) * 0.5 - m
        return y, scaled, (m + m).sum(0), np_.sin(m).sum(), -m.T

    with _mode(x64):
        ours = sparse.BCOO.fromdense(mat)
        theirs = jsparse.BCOO.fromdense(mat)
        got = sparse.sparsify(lambda *a: f(fnp, *a))(ours, v, w)
        want = jsparse.sparsify(lambda *a: f(jnp, *a))(theirs, v, w)
        for i, (g, t) in enumerate(zip(got, want)):
            assert isinstance(g, sparse.BCOO) == isinstance(t, jsparse.BCOO), i
            _same(g.todense() if isinstance(g, sparse.BCOO) else g,
                  t.todense() if isinstance(t, jsparse.BCOO) else t, x64, f"output {i}")
        jitted = fg.jit(sparse.sparsify(lambda m, v: fnp.tanh(m).T @ v))(ours, v)
        _same(jitted, jax.jit(jsparse.sparsify(lambda m, v: jnp.tanh(m).T @ v))(theirs, v), x64, "jit(sparsify)")
        inner, jinner = fg.jit(lambda m, w: fnp.sin(m) @ w.T), jax.jit(lambda m, w: jnp.sin(m) @ w.T)
        _same(fg.vmap(sparse.sparsify(inner), in_axes=(None, 0))(ours, w[None]),
              jax.vmap(jsparse.sparsify(jinner), in_axes=(None, 0))(theirs, w[None]), x64, "vmap(sparsify(jit))")


def test_sparsify_refuses_what_it_cannot_keep_sparse() -> None:
    mat = sparse.BCOO.fromdense(np.eye(3))
    with pytest.raises(NotImplementedError, match="`exp` of a sparse array.*todense"):
        sparse.sparsify(fnp.exp)(mat)
    with pytest.raises(NotImplementedError, match="no sparse rule for `cumsum`|no sparse rule for `cum"):
        sparse.sparsify(lambda m: fnp.cumsum(m, axis=0))(mat)
    with pytest.raises(NotImplementedError, match="would broadcast the sparse array"):
        sparse.sparsify(lambda m: m + fnp.ones(3))(mat)
    with pytest.raises(TypeError, match="pass nse= explicitly"):
        fg.jit(lambda x: sparse.BCOO.fromdense(x).data)(np.eye(2))
    with pytest.raises(NotImplementedError, match="mixes batch, sparse and dense"):
        sparse.BCOO.fromdense(np.ones((2, 3)), n_dense=1).transpose()
    with pytest.raises(TypeError, match="not converted to a dense array implicitly"):
        fnp.dot(mat, fnp.ones(3))
    with pytest.raises(ValueError, match="must map one of its batch dimensions"):
        fg.vmap(lambda m: m @ fnp.ones(3))(mat)
    with pytest.raises(ValueError, match="data and indices disagree"):
        sparse.BCOO((np.ones(3), np.zeros((2, 2), np.int32)), shape=(2, 2))


@pytest.mark.parametrize("x64", MODES)
def test_bcsr_matches_jax(x64: bool) -> None:
    mat = _random_sparse((4, 5), seed=9)
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(5, 2)), rng.normal(size=(2, 4))
    with _mode(x64):
        ours = sparse.BCSR.fromdense(mat, nse=9)
        theirs = jsparse.BCSR.fromdense(mat, nse=9)
        for name in ("data", "indices", "indptr"):
            _same(getattr(ours, name), getattr(theirs, name), x64, name)
        _same(ours.todense(), theirs.todense(), x64, "todense")
        _same(ours @ x, theirs @ x, x64, "A @ X")
        _same(fnp.asarray(y) @ ours, jnp.asarray(y) @ theirs.todense(), x64, "X @ A (JAX: BCSR on the left only)")
        _same_bcoo(ours.to_bcoo(), theirs.to_bcoo(), x64)


def _gcn(lib: Any, np_: Any, sp: Any) -> Any:
    """A two-layer graph convolution on a small ring graph, trained by a few gradient steps:
    the normalised adjacency is a BCOO, the propagation ``A @ H`` a sparse-dense product."""
    n = 6
    edges = np.array([(i, (i + 1) % n) for i in range(n)] + [((i + 1) % n, i) for i in range(n)] +
                     [(i, i) for i in range(n)])
    degree = np.bincount(edges[:, 0], minlength=n).astype(float)
    weights = 1.0 / np.sqrt(degree[edges[:, 0]] * degree[edges[:, 1]])
    adj = sp.BCOO((np_.asarray(weights), np_.asarray(edges, np_.int32)), shape=(n, n))
    rng = np.random.default_rng(0)
    features = np_.asarray(rng.normal(size=(n, 3)))
    labels = np_.asarray(rng.normal(size=(n, 2)))
    params = (np_.asarray(rng.normal(size=(3, 4)) * 0.5), np_.asarray(rng.normal(size=(4, 2)) * 0.5))

    def forward(params: Any, x: Any) -> Any:
        w1, w2 = params
        h = lib.nn.relu(adj @ (x @ w1))
        return adj @ (h @ w2)

    def loss(params: Any) -> Any:
        return np_.mean((forward(params, features) - labels) ** 2)

    @lib.jit
    def update(params: Any) -> Any:
        grads = lib.grad(loss)(params)
        return tuple(p - 0.1 * g for p, g in zip(params, grads))

    for _ in range(3):
        params = update(params)
    return loss(params), params


@pytest.mark.parametrize("x64", MODES)
def test_gcn_layer_program_matches_jax(x64: bool) -> None:
    with _mode(x64):
        got = _gcn(fg, fnp, sparse)
        want = _gcn(jax, jnp, jsparse)
    _same(got[0], want[0], x64, "loss")
    for i, (g, t) in enumerate(zip(got[1], want[1])):
        _same(g, t, x64, f"parameter {i}")


def test_array_operators_defer_to_sparse_operands_under_jit() -> None:
    mat = sparse.BCOO.fromdense(np.array([[0., 2.], [1., 0.]]))
    got = fg.jit(lambda x: (x @ mat, x * mat))(np.array([1., 3.]))
    np.testing.assert_allclose(got[0], [3., 2.])
    np.testing.assert_allclose(got[1].todense(), [[0., 6.], [1., 0.]])
