"""``nonzero``/``flatnonzero``/``argwhere`` with JAX's ``size=``/``fill_value=`` under tracing
(against numpy eagerly and ``jax.numpy`` traced), ``vectorize`` with and without a signature,
and ``apply_along_axis``, against numpy and JAX on random shapes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.testing.strategies import shapes
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()


@settings(max_examples=25, deadline=None)
@given(shape=shapes(min_dims=1, max_dims=3, max_side=4), seed=st.integers(0, 2**16), size=st.integers(0, 30),
       fill=st.sampled_from([None, -1, 7]))
def test_nonzero_family_matches_numpy_eagerly_and_jax_traced(shape, seed: int, size: int, fill) -> None:
    x = np.random.default_rng(seed).integers(-1, 2, shape) * np.random.default_rng(seed + 1).integers(0, 2, shape)
    for name in ("nonzero", "flatnonzero", "argwhere"):
        tuple_of = (lambda r: tuple(r)) if name == "nonzero" else (lambda r: (r,))
        for g, w in zip(tuple_of(getattr(fnp, name)(x)), tuple_of(getattr(np, name)(x)), strict=True):
            np.testing.assert_array_equal(g, w, err_msg=name)
        traced = fg.jit(lambda v, name=name: getattr(fnp, name)(v, size=size, fill_value=fill))(x)
        ref = getattr(jnp, name)(x, size=size, fill_value=fill)
        for g, w in zip(tuple_of(traced), tuple_of(ref), strict=True):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w), err_msg=f"{name} size={size} fill={fill}")


def test_nonzero_without_size_under_jit_says_what_to_do() -> None:
    with pytest.raises(fg.ConcretizationError, match="pass size="):
        fg.jit(fnp.nonzero)(np.ones(3))
    with pytest.raises(ValueError, match="fill_value has 1 entries for an array of rank 2"):
        fnp.nonzero(np.ones((2, 2)), size=2, fill_value=(1,))


@pytest.mark.parametrize(("signature", "shapes_"), [
    (None, [(3,), (2, 1)]),
    ("(m,n),(n)->(m)", [(4, 2, 3), (5, 1, 3)]),
    ("(n),(n)->()", [(3, 4), (4,)]),
    ("(n)->(n),()", [(2, 5)]),
])
def test_vectorize_matches_jax(signature, shapes_) -> None:
    funcs = {None: lambda a, b: a * 2 + b, "(m,n),(n)->(m)": lambda a, b: a @ b,
             "(n),(n)->()": lambda a, b: (a * b).sum(), "(n)->(n),()": lambda a: (a[::-1], a.max())}
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s) for s in shapes_]
    f = funcs[signature]
    got = fnp.vectorize(f, signature=signature)(*args)
    want = jnp.vectorize(f, signature=signature)(*args)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-12)
    jitted = fg.jit(lambda *xs: fnp.vectorize(f, signature=signature)(*xs))(*args)
    for g, w in zip(jax.tree_util.tree_leaves(jitted), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-12)


def test_vectorize_excluded_and_errors() -> None:
    f = fnp.vectorize(lambda a, n: a * n, excluded={1})
    np.testing.assert_allclose(f(np.arange(3.0), 4), np.arange(3.0) * 4)
    with pytest.raises(ValueError, match="core dimension 'n' is 3 and 4"):
        fnp.vectorize(lambda a, b: a @ b, signature="(n),(n)->()")(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="not a generalised-ufunc signature"):
        fnp.vectorize(lambda a: a, signature="n->n")


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_apply_along_axis_matches_numpy(axis: int) -> None:
    a = np.random.default_rng(4).standard_normal((4, 2, 3))
    cases = [(lambda r: fnp.outer(r, r), lambda r: np.outer(r, r)), (lambda r: r.sum(), lambda r: r.sum()),
             (lambda r: fnp.cumsum(r)[::-1], lambda r: np.cumsum(r)[::-1])]
    for ours, theirs in cases:
        want = np.apply_along_axis(theirs, axis, a)
        np.testing.assert_allclose(fnp.apply_along_axis(ours, axis, a), want, rtol=1e-12)
        np.testing.assert_allclose(fg.jit(lambda v, ours=ours: fnp.apply_along_axis(ours, axis, v))(a), want,
                                   rtol=1e-12)
