"""BCOO indexing, slicing and sparse-sparse elementwise products against ``jax.experimental.sparse``:
``A[idx]`` with static and traced indices (under ``jit``), ``bcoo_slice``, ``bcoo_dynamic_slice``,
``bcoo_squeeze``, ``bcoo_rev``, ``bcoo_broadcast_in_dim`` and ``bcoo_multiply_sparse`` give JAX's
data and indices for every layout (batch and dense dimensions), and gradients through the data."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.experimental import sparse
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
from jax.experimental import sparse as jsparse  # noqa: E402 - after jax_or_skip's set-up

S = slice
_M = np.array([[0., 1., 0., 2.], [3., 0., 0., 0.], [0., 0., 4., 0.]], np.float32)
_T = (np.arange(24.).reshape(2, 3, 4) % 5).astype(np.float32)
#: name: (dense array, n_batch, n_dense)
_LAYOUTS = {"A": (_M, 0, 0), "B": (_T, 1, 0), "D": (_T, 1, 1), "E": (_T, 0, 1)}


def _arrays() -> tuple[dict[str, Any], dict[str, Any]]:
    """Each layout as our BCOO and as JAX's, JAX's built from our data and indices (test_sparse
    checks that ``fromdense`` agrees; JAX's eager ``fromdense`` costs seconds of compilation)."""
    ours = {k: sparse.BCOO.fromdense(m, n_batch=b, n_dense=d) for k, (m, b, d) in _LAYOUTS.items()}
    return ours, {k: _theirs(v) for k, v in ours.items()}


def _theirs(mat: sparse.BCOO) -> Any:
    return jsparse.BCOO((np.asarray(mat.data), np.asarray(mat.indices)), shape=mat.shape)


def _same(ours: Any, theirs: Any, what: Any) -> None:
    """The same BCOO array: shape, layout, nse, and JAX's very data and indices."""
    assert isinstance(ours, sparse.BCOO), (what, type(ours))
    assert (ours.shape, ours.nse, ours.n_batch, ours.n_dense) == (theirs.shape, theirs.nse, theirs.n_batch,
                                                                  theirs.n_dense), (what, ours, theirs)
    np.testing.assert_array_equal(np.asarray(ours.data), np.asarray(theirs.data), err_msg=str(what))
    np.testing.assert_array_equal(np.asarray(ours.indices), np.asarray(theirs.indices), err_msg=str(what))


def _jax_compiled(f: Any, *args: Any) -> Any:
    """``jax.jit(f)`` compiled for ``args`` without XLA's backend optimisations: one compilation
    for a test's every case (JAX's compilations would dominate this file's time)."""
    return jax.jit(f).lower(*args).compile(compiler_options={"xla_backend_optimization_level": 0})


def _jax_once(f: Any, *args: Any) -> Any:
    return _jax_compiled(f, *args)(*args)


#: (array, index): basic indices over every layout, negative steps, new axes, a clamped integer
_STATIC = [("A", 1), ("A", (1, 2)), ("A", (S(None, None, -2), S(3, 0, -1))),
           ("A", 5), ("A", (1, None, S(1, 3))), ("B", (S(None), 1)), ("B", (0, S(1, 3), 2)),
           ("B", (S(None, None, -1), 2)), ("D", (S(None), S(1, None), S(2, None))), ("D", (Ellipsis, 1)),
           ("D", (1, S(None, None, -1), S(None, None, 2))), ("E", (S(None), 1, S(1, 3)))]
#: (array, index of a traced integer)
_TRACED = [("A", lambda i: (i, 2)), ("B", lambda i: (i,)), ("D", lambda i: (i, S(None, None, -1))),
           ("E", lambda i: (S(None), i))]


def test_bcoo_indexing_static_and_traced_matches_jax() -> None:
    ours, theirs = _arrays()

    def traced_cases(a: Any, i: Any) -> list[Any]:
        return [a[name][index(i)] for name, index in _TRACED]

    want = _jax_compiled(lambda a, i: ([a[name][idx] for name, idx in _STATIC], traced_cases(a, i)), theirs, 1)
    traced = fg.jit(traced_cases)
    for i in (1, -1, 7):
        static, dynamic = want(theirs, i)
        for (name, _), got, w in zip(_TRACED, traced(ours, i), dynamic, strict=True):
            _same(got, w, (name, "traced", i))
    for (name, idx), w in zip(_STATIC, static, strict=True):
        _same(ours[name][idx], w, (name, idx))
    rows = list(ours["A"])
    assert [r.shape for r in rows] == [(4,)] * 3
    np.testing.assert_array_equal(np.stack([np.asarray(r.todense()) for r in rows]), _M)


#: (array, start_indices, limit_indices, strides)
_SLICES = [("A", (0, 1), (3, 4), (2, 2)), ("B", (0, 1, 0), (2, 3, 4), (1, 1, 3)),
           ("D", (1, 0, 1), (2, 3, 4), (1, 2, 2)), ("E", (0, 1, 1), (2, 3, 3), None)]
#: (array, start_indices, slice_sizes): in range, moved inside, negative
_DYNAMIC_SLICES = [("A", (1, 1), (2, 2)), ("A", (2, 3), (2, 2)), ("A", (-1, 0), (1, 4)), ("B", (1, 0, 2), (1, 2, 2)),
                   ("D", (0, 1, 1), (2, 2, 3))]
#: (array, shape, broadcast_dimensions): new batch, sparse (size 1) and dense axes
_BROADCASTS = [("A", (2, 3, 4), (1, 2)), ("A", (3, 1, 4), (0, 2)), ("E", (2, 3, 4, 5), (0, 1, 2)),
               ("E", (2, 2, 3, 4), (1, 2, 3)), ("B", (2, 2, 3, 4), (0, 2, 3))]


def _slicings(lib: Any, np_: Any, mats: dict[str, Any]) -> list[Any]:
    """Every slicing function of ``lib`` on ``mats``."""
    out = [lib.bcoo_slice(mats[name], start_indices=start, limit_indices=limit, strides=strides)
           for name, start, limit, strides in _SLICES]
    out += [lib.bcoo_dynamic_slice(mats[name], np_.asarray(start), sizes) for name, start, sizes in _DYNAMIC_SLICES]
    out.append(lib.bcoo_rev(mats["D"], (0, 1, 2)))
    out.append(lib.bcoo_squeeze(mats["D"][1:], dimensions=(0,)))
    out += [lib.bcoo_broadcast_in_dim(mats[name], shape=shape, broadcast_dimensions=dims)
            for name, shape, dims in _BROADCASTS]
    out.append(lib.sparsify(lambda m: np_.expand_dims(m[:, ::-1], 1))(mats["D"]))
    return out


def test_bcoo_slices_squeeze_rev_and_broadcast_match_jax() -> None:
    ours, theirs = _arrays()
    want = _jax_once(lambda m: _slicings(jsparse, jnp, m), theirs)
    for k, (got, w) in enumerate(zip(_slicings(sparse, fnp, ours), want, strict=True)):
        _same(got, w, k)
    dynamic = fg.jit(lambda m, s: sparse.bcoo_dynamic_slice(m, s, (2, 2)))
    for start, w in zip([(1, 1), (2, 3)], want[4:6]):
        _same(dynamic(ours["A"], fnp.asarray(start)), w, ("jit", start))


_PRODUCTS = [("A", "A"), ("B", "B"), ("E", "E"), ("D", "D"), ("R", "A"), ("B", "C")]


def _products(lib: Any, mats: dict[str, Any]) -> list[Any]:
    return [lib.bcoo_multiply_sparse(mats[lhs], mats[rhs]) for lhs, rhs in _PRODUCTS] + [mats["A"] * mats["P"]]


def _product_loss(lib: Any, mat: Any) -> Any:
    def f(data: Any) -> Any:
        m = lib.BCOO((data, mat.indices), shape=mat.shape)
        return (lib.bcoo_multiply_sparse(m, m)[1:].todense() * np.arange(1., 5.)).sum()
    return f


def test_bcoo_multiply_sparse_matches_jax_with_gradients() -> None:
    ours, theirs = _arrays()
    extra = {"R": ((np.arange(4.) % 3).reshape(1, 4).astype(np.float32), 0), "C": (_T % 3, 2), "P": (_M + 1, 0)}
    for name, (m, n_batch) in extra.items():
        ours[name] = sparse.BCOO.fromdense(m, n_batch=n_batch)
        theirs[name] = _theirs(ours[name])
    want = _jax_once(lambda m: (_products(jsparse, m), jax.grad(_product_loss(jsparse, m["A"]))(m["A"].data)), theirs)
    for k, (got, w) in enumerate(zip(_products(sparse, ours), want[0], strict=True)):
        _same(got, w, k)
    grad = fg.jit(fg.grad(_product_loss(sparse, ours["A"])))
    np.testing.assert_allclose(np.asarray(grad(ours["A"].data)), np.asarray(want[1]), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="differing numbers of dense dimensions"):
        sparse.bcoo_multiply_sparse(ours["B"], ours["E"])


def test_sparsify_indexes_with_traced_integers_as_the_dense_array() -> None:
    mat = sparse.BCOO.fromdense(_T, n_batch=1, n_dense=1)
    for index in (lambda m, i: m[i], lambda m, i: m[:, i], lambda m, i: m[:, :, i]):
        f = fg.jit(lambda m, i, index=index: sparse.sparsify(lambda m: index(m, i))(m))
        for i in (1, -1, -7):
            out = f(mat, i)
            assert isinstance(out, sparse.BCOO)
            np.testing.assert_array_equal(np.asarray(out.todense()), np.asarray(index(fnp.asarray(_T), i)))
    with pytest.raises(NotImplementedError, match="`take` of a sparse array at an index array"):
        sparse.sparsify(lambda m: m[fnp.asarray([0, 1])])(mat)


def test_bcoo_indexing_refuses_what_it_does_not_support() -> None:
    mat = sparse.BCOO.fromdense(_M)
    with pytest.raises(IndexError, match="Too many indices"):
        mat[1, 2, 3]
    with pytest.raises(NotImplementedError, match="index array.*todense"):
        mat[fnp.asarray([0, 2])]
    with pytest.raises(IndexError, match="only integers, slices.*float"):
        mat[1.5]
    with pytest.raises(ValueError, match="invalid indices"):
        sparse.bcoo_slice(mat, start_indices=(0, 2), limit_indices=(3, 5))
    with pytest.raises(NotImplementedError, match="lengths? other than 1"):
        sparse.bcoo_broadcast_in_dim(sparse.BCOO.fromdense(np.ones((1, 4))), shape=(3, 4), broadcast_dimensions=(0, 1))
    with pytest.raises(ValueError, match="size not equal to one"):
        sparse.bcoo_squeeze(mat, dimensions=(0,))
