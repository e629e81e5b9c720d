"""``jax.Array``'s methods on traced values, and numpy's ``where=``/``initial=`` on reductions:
each against numpy, eagerly and under jit, with gradients where a mask changes them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.testing import arrays, check_grads, shapes

X = np.array([[3.0, -1.5, 2.0], [0.5, 4.0, -2.0]])
N = np.array([[3, 1, 2], [5, 4, 7]])

# (method call on t, the numpy expression it must equal, operand)
METHODS = [
    ("t.conj()", "np.conj(t)", X), ("t.conjugate()", "np.conjugate(t)", X), ("t.round()", "np.round(t)", X),
    ("t.round(1)", "np.round(t, 1)", X * 1.234), ("t.cumsum()", "np.cumsum(t)", X),
    ("t.cumsum(axis=1)", "np.cumsum(t, axis=1)", X), ("t.cumprod(axis=0)", "np.cumprod(t, axis=0)", X),
    ("t.sort()", "np.sort(t)", X), ("t.sort(axis=0)", "np.sort(t, axis=0)", X), ("t.argsort()", "np.argsort(t)", X),
    ("t.argpartition(1)[:, 1]", "np.argpartition(t, 1)[:, 1]", X), ("t.real", "t.real", X + 2j),
    ("t.imag", "t.imag", X * 1j), ("t.repeat(2, axis=1)", "np.repeat(t, 2, axis=1)", X),
    ("t.trace()", "np.trace(t)", X), ("t.diagonal(1)", "np.diagonal(t, 1)", X),
    ("t.ptp(axis=1)", "np.ptp(t, axis=1)", X),
    ("t.compress([True, False], axis=0)", "np.compress([True, False], t, axis=0)", X),
    ("t.searchsorted(4)", "np.int32(np.searchsorted(t, 4))", np.array([1, 3, 5])),  # int32 as JAX
    ("t.choose([[1] * 3, [2] * 3, [3] * 3])", "np.choose(t, [[1] * 3, [2] * 3, [3] * 3])",
     np.array([[0, 1, 2], [2, 1, 0]])),
    ("divmod(t, 3)[0]", "divmod(t, 3)[0]", N), ("divmod(17, t)[1]", "divmod(17, t)[1]", N),
    ("t << 2", "t << 2", N), ("1 << t", "1 << t", N), ("t >> 1", "t >> 1", N), ("256 >> t", "256 >> t", N),
    ("t.nbytes + t.itemsize", "t.nbytes + t.itemsize", X),
]


@pytest.mark.parametrize("call, reference, operand", METHODS, ids=[m[0] for m in METHODS])
def test_array_methods_match_numpy_eagerly_and_traced(call: str, reference: str, operand: np.ndarray) -> None:
    """Traced, each method is JAX's; eagerly a result is a HostArray, a numpy array, whose own
    ``sort`` sorts in place and which has no ``ptp`` (numpy 2), so those two run traced only."""
    f = eval(f"lambda t: {call}")
    want = eval(f"lambda t: {reference}", {"np": np})(operand)
    eager = [] if call.startswith(("t.sort", "t.ptp")) else [f(fnp.asarray(operand))]
    for got in [*eager, fg.jit(f)(operand)]:
        np.testing.assert_array_equal(np.asarray(got), want)
        assert np.asarray(got).dtype == np.asarray(want).dtype


def test_nonzero_method_needs_a_size_under_jit() -> None:
    np.testing.assert_array_equal(fnp.asarray(X).nonzero()[1], X.nonzero()[1])
    np.testing.assert_array_equal(fg.jit(lambda t: t.nonzero(size=6)[0])(X), X.nonzero()[0])


REDUCTIONS = ["sum", "prod", "max", "min", "mean", "var", "std", "all", "any"]


@settings(max_examples=25)
@given(st.data())
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions_take_where_and_initial_as_numpy(name: str, data: st.DataObject) -> None:
    shape = data.draw(shapes(1, 3, 1, 4))
    x = data.draw(arrays(np.float64, shape, -3, 3))
    mask = data.draw(arrays(np.bool_, shape[data.draw(st.integers(0, len(shape))):]))
    axis = data.draw(st.sampled_from([None, 0, -1]))
    keepdims = data.draw(st.booleans())
    kwargs: dict = {"axis": axis, "keepdims": keepdims, "where": mask}
    if name in ("sum", "prod", "max", "min"):
        kwargs["initial"] = data.draw(st.sampled_from([-1.5, 0.5, 2.0]))
    if name in ("var", "std"):
        kwargs["ddof"] = data.draw(st.integers(0, 1))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        want = getattr(np, name)(x, **kwargs)
    eager = getattr(fnp, name)(x, **kwargs)
    traced = fg.jit(lambda v, m: getattr(fnp, name)(v, **{**kwargs, "where": m}))(x, mask)
    for got in (eager, traced):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12, equal_nan=True)
        assert np.asarray(got).dtype == np.asarray(want).dtype and np.shape(got) == np.shape(want)


def test_masked_reductions_differentiate_and_leave_masked_elements_out() -> None:
    x = np.array([[0.3, -1.2, 2.0], [1.5, 0.7, -0.4]])
    mask = np.array([True, False, True])
    for f in (lambda v: fnp.sum(v * v, where=mask, initial=1.0), lambda v: fnp.mean(fnp.sin(v), axis=1, where=mask),
              lambda v: fnp.var(v, where=mask), lambda v: fnp.max(v, axis=0, where=mask, initial=-5.0)):
        check_grads(f, (x,), order=2)
        g = fg.grad(lambda v, f=f: fnp.sum(f(v)))(x)
        np.testing.assert_array_equal(g[:, 1], 0.0)


def test_reduction_keyword_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="initial="):
        fnp.max(X, where=X > 0)
    with pytest.raises(Exception, match=r"where= of shape \(4,\)"):
        fnp.sum(X, where=np.ones(4, bool))
    with pytest.raises(NotImplementedError, match="out="):
        fnp.sum(X, out=np.empty(()))
    np.testing.assert_array_equal(fnp.max(np.zeros((0, 3)), axis=0, initial=7.0), np.full(3, 7.0))


def test_masked_mean_and_var_of_complex_operands_match_numpy() -> None:
    z = (X + 1j * X[::-1]).astype(np.complex64)
    mask = np.array([[True, False, True], [True, True, False]])
    for name in ("mean", "var", "std", "sum"):
        want = getattr(np, name)(z, axis=1, where=mask)
        got = fg.jit(lambda v, m, name=name: getattr(fnp, name)(v, axis=1, where=m))(z, mask)
        np.testing.assert_allclose(got, want, rtol=1e-6)
        assert got.dtype == want.dtype


X_NAN = np.where(np.arange(12).reshape(3, 4) % 5 == 1, np.nan, np.linspace(-2, 2, 12).reshape(3, 4))
ROW_MASK = np.array([True, False, True, True])
MASK = np.array([[True, False, True, True], [False] * 4, [True] * 4])

# (fungraph call, JAX call): both see x (with NaNs), xs (without), m (a row mask), mm (a full mask
# with one row all left out), as fg/jax and fnp/jnp.
WHERE_CALLS = [
    ("fg.nn.softmax(xs, where=mm)", "jax.nn.softmax(xs, where=mm)"),
    ("fg.nn.log_softmax(xs, axis=1, where=mm)", "jax.nn.log_softmax(xs, axis=1, where=mm)"),
    ("fg.nn.logsumexp(xs, axis=1, where=mm)", "jax.nn.logsumexp(xs, axis=1, where=mm)"),
    ("fg.scipy.special.logsumexp(xs, axis=1, b=xs, where=mm, return_sign=True)",
     "jax.scipy.special.logsumexp(xs, axis=1, b=xs, where=mm, return_sign=True)"),
    ("fnp.nansum(x, axis=1, where=m, initial=0.5)", "jnp.nansum(x, axis=1, where=m, initial=0.5)"),
    ("fnp.nanprod(x, where=m, initial=2.0)", "jnp.nanprod(x, where=m, initial=2.0)"),
    ("fnp.nanmean(x, axis=1, where=m)", "jnp.nanmean(x, axis=1, where=m)"),
    ("fnp.nanvar(x, axis=0, where=m, ddof=1)", "jnp.nanvar(x, axis=0, where=m, ddof=1)"),
    ("fnp.nanstd(x, axis=1, keepdims=True)", "jnp.nanstd(x, axis=1, keepdims=True)"),
    ("fnp.nanmax(x, axis=1, where=m, initial=-3.0)", "jnp.nanmax(x, axis=1, where=m, initial=-3.0)"),
    ("fnp.nanmin(x, axis=0)", "jnp.nanmin(x, axis=0)"),
    ("fnp.std(xs, axis=0, correction=1)", "jnp.std(xs, axis=0, correction=1)"),
    ("fnp.var(xs, correction=2)", "jnp.var(xs, correction=2)"),
    ("fnp.sum(np.arange(4, dtype=np.int32), promote_integers=False)",
     "jnp.sum(np.arange(4, dtype=np.int32), promote_integers=False)"),
]


@pytest.mark.parametrize("ours, theirs", WHERE_CALLS, ids=[c[0] for c in WHERE_CALLS])
def test_masked_softmax_logsumexp_and_nan_reductions_match_jax(ours: str, theirs: str) -> None:
    from tests.helpers import jax_or_skip

    jax, jnp = jax_or_skip()
    env = {"x": X_NAN, "xs": np.nan_to_num(X_NAN), "m": ROW_MASK, "mm": MASK, "np": np}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = eval(ours, {**env, "fg": fg, "fnp": fnp})
        traced = fg.jit(lambda x, xs: eval(ours, {**env, "x": x, "xs": xs, "fg": fg, "fnp": fnp}))(X_NAN, env["xs"])
    want = eval(theirs, {**env, "jax": jax, "jnp": jnp})
    for g in (got, traced):
        for a, b in zip(*(v if isinstance(v, tuple) else (v,) for v in (g, want)), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-14, equal_nan=True)
            assert np.asarray(a).dtype == np.asarray(b).dtype


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_masked_softmax_and_nan_reductions_have_finite_gradients_like_jax() -> None:
    """A left-out element adds nothing to the gradient, even where it is large enough that its
    exponential overflows or is a NaN (no 0 * inf or 0 * NaN)."""
    from tests.helpers import jax_or_skip

    jax, jnp = jax_or_skip()
    xs = np.nan_to_num(X_NAN) * 300

    def ours(v: np.ndarray) -> object:
        return fg.nn.softmax(v, where=MASK)[0, 0] + fg.nn.logsumexp(v, axis=1, where=MASK).sum()

    def theirs(v: np.ndarray) -> object:
        return jax.nn.softmax(v, where=MASK)[0, 0] + jax.nn.logsumexp(v, axis=1, where=MASK).sum()

    g = fg.grad(ours)(xs)
    assert np.isfinite(g).all()
    np.testing.assert_allclose(g, jax.grad(theirs)(xs), rtol=1e-12, atol=1e-14)
    g = fg.grad(lambda v: fnp.nanvar(v, axis=1).sum() + fnp.nanmean(v, where=ROW_MASK))(X_NAN)
    gj = jax.grad(lambda v: jnp.nanvar(v, axis=1).sum() + jnp.nanmean(v, where=ROW_MASK))(X_NAN)
    np.testing.assert_allclose(g, gj, rtol=1e-12, atol=1e-14)
    assert np.isfinite(g).all()


def test_device_put_on_the_cpu_gives_an_array_with_at() -> None:
    y = fg.device_put(X)
    np.testing.assert_array_equal(y.at[0, 0].set(7.0)[0], [7.0, -1.5, 2.0])
