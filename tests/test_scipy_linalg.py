"""``fungraph.scipy.linalg`` against JAX 0.10's ``jax.scipy.linalg`` (and SciPy): values,
gradients (JAX's and finite differences), and ``vmap`` against a loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.scipy import linalg as fsl
from fungraph.testing import check_grads
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
jsl = jax.scipy.linalg

RNG = np.random.default_rng(7)
A = RNG.standard_normal((4, 4)) + 4 * np.eye(4)
SPD = A @ A.T + np.eye(4)
B = RNG.standard_normal((4, 2))
V = RNG.standard_normal(4)
TALL = RNG.standard_normal((5, 3))
WIDE = RNG.standard_normal((3, 5))


def _leaves(x: Any) -> list[np.ndarray]:
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(x)]


def _close(got: Any, want: Any, tol: float = 1e-10) -> None:
    got_l, want_l = _leaves(got), _leaves(want)
    assert len(got_l) == len(want_l)
    for g, w in zip(got_l, want_l):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


# (name, function of the library's scipy.linalg, arguments): each is compared on values,
# gradient of a weighted sum (a non-symmetric weight, so symmetrisation shows) and vmap.
CASES: list[tuple[str, Callable[[Any], Callable[..., Any]], tuple[np.ndarray, ...]]] = [
    ("solve_triangular_lower", lambda sl: lambda a, b: sl.solve_triangular(a, b, lower=True), (A, B)),
    ("solve_triangular_upper_T", lambda sl: lambda a, b: sl.solve_triangular(a, b, trans="T"), (A, V)),
    ("solve_triangular_unit_C", lambda sl: lambda a, b: sl.solve_triangular(a, b, trans=2, lower=True,
                                                                           unit_diagonal=True), (A, B)),
    ("cholesky_upper", lambda sl: lambda a: sl.cholesky(a), (SPD,)),
    ("cholesky_lower", lambda sl: lambda a: sl.cholesky(a, lower=True), (SPD,)),
    ("cho_solve", lambda sl: lambda a, b: sl.cho_solve(sl.cho_factor(a), b), (SPD, B)),
    ("cho_solve_lower", lambda sl: lambda a, b: sl.cho_solve(sl.cho_factor(a, lower=True), b), (SPD, V)),
    ("lu", lambda sl: lambda a: sl.lu(a), (A,)),
    ("lu_tall", lambda sl: lambda a: sl.lu(a)[1:], (TALL,)),
    ("lu_wide", lambda sl: lambda a: sl.lu(a)[1:], (WIDE,)),
    ("lu_permute_l", lambda sl: lambda a: sl.lu(a, permute_l=True), (A,)),
    ("lu_factor", lambda sl: lambda a: sl.lu_factor(a)[0], (A,)),
    ("lu_solve", lambda sl: lambda a, b: sl.lu_solve(sl.lu_factor(a), b), (A, B)),
    ("lu_solve_T", lambda sl: lambda a, b: sl.lu_solve(sl.lu_factor(a), b, trans=1), (A, V)),
    ("qr_economic", lambda sl: lambda a: sl.qr(a, mode="economic"), (TALL,)),
    ("qr_full_square", lambda sl: lambda a: sl.qr(a), (A,)),
    ("qr_r", lambda sl: lambda a: sl.qr(a, mode="r"), (TALL,)),
    ("svd_values", lambda sl: lambda a: sl.svd(a, compute_uv=False), (TALL,)),
    ("qr_pivoting", lambda sl: lambda a: sl.qr(a, pivoting=True), (A,)),
    ("qr_pivoting_economic", lambda sl: lambda a: sl.qr(a, mode="economic", pivoting=True), (TALL,)),
    ("qr_pivoting_r_wide", lambda sl: lambda a: sl.qr(a, mode="r", pivoting=True), (WIDE,)),
    ("polar", lambda sl: lambda a: sl.polar(a, method="svd"), (A,)),
    ("polar_tall", lambda sl: lambda a: sl.polar(a, method="svd"), (TALL,)),
    ("polar_wide_left", lambda sl: lambda a: sl.polar(a, side="left", method="svd"), (WIDE,)),
    ("polar_left", lambda sl: lambda a: sl.polar(a, side="left", method="svd"), (A,)),
    ("eigh_values", lambda sl: lambda a: sl.eigh(a, eigvals_only=True), (SPD,)),
    ("eigh_upper_values", lambda sl: lambda a: sl.eigh(a, lower=False, eigvals_only=True), (SPD,)),
    ("eigh_symmetrised_values", lambda sl: lambda a: sl.eigh(a, eigvals_only=True), (A,)),
    ("eigh_symmetrised_upper_values", lambda sl: lambda a: sl.eigh(a, lower=False, eigvals_only=True), (A,)),
    ("inv", lambda sl: lambda a: sl.inv(a), (A,)),
    ("det", lambda sl: lambda a: sl.det(a), (A,)),
    ("solve", lambda sl: lambda a, b: sl.solve(a, b), (A, B)),
    ("solve_pos", lambda sl: lambda a, b: sl.solve(a, b, assume_a="pos"), (SPD, V)),
    ("expm_small", lambda sl: lambda a: sl.expm(a * 0.01), (A,)),
    ("expm", lambda sl: lambda a: sl.expm(a * 0.3), (A,)),
    ("expm_large", lambda sl: lambda a: sl.expm(a * 2.0), (A,)),
    ("expm_upper_triangular", lambda sl: lambda a: sl.expm(a * 0.5, upper_triangular=True), (np.triu(A),)),
    ("block_diag", lambda sl: lambda a, b: sl.block_diag(a, b, b[0]), (A, B)),
]
IDS = [c[0] for c in CASES]


def _weighted_sum(m: Any, fun: Callable[..., Any]) -> Callable[..., Any]:
    def scalar(*args: Any) -> Any:
        leaves = [x for x in m.tree_util.tree_leaves(fun(*args)) if x.dtype.kind in "fc"]
        total = 0.0
        for i, x in enumerate(leaves):
            w = np.cos(np.arange(x.size) * 1.3 + i).reshape(x.shape)
            total = total + (x * w).sum()
        return total

    return scalar


@pytest.mark.parametrize("name, make, args", CASES, ids=IDS)
def test_values_match_jax(name: str, make: Callable[[Any], Any], args: tuple) -> None:
    _close(make(fsl)(*args), make(jsl)(*args), 1e-9)


@pytest.mark.parametrize("name, make, args", CASES, ids=IDS)
def test_gradients_match_jax(name: str, make: Callable[[Any], Any], args: tuple) -> None:
    argnums = tuple(range(len(args)))
    got = fg.grad(_weighted_sum(fg, make(fsl)), argnums=argnums)(*args)
    want = jax.grad(_weighted_sum(jax, make(jsl)), argnums=argnums)(*args)
    _close(got, want, 1e-7)


FINITE_DIFFERENCES = ["solve_triangular_lower", "solve", "lu", "lu_solve", "expm", "expm_large", "block_diag",
                      "qr_economic"]


@pytest.mark.parametrize("name, make, args", [c for c in CASES if c[0] in FINITE_DIFFERENCES],
                         ids=[c[0] for c in CASES if c[0] in FINITE_DIFFERENCES])
def test_gradients_match_finite_differences(name: str, make: Callable[[Any], Any], args: tuple) -> None:
    check_grads(_weighted_sum(fg, make(fsl)), args, order=1)


VMAPPED = ["solve_triangular_lower", "cholesky_upper", "cho_solve", "lu", "lu_tall", "lu_factor", "lu_solve",
           "qr_economic", "inv", "det", "solve", "expm", "expm_large", "qr_pivoting", "qr_pivoting_r_wide", "polar",
           "polar_wide_left"]


@pytest.mark.parametrize("name, make, args", [c for c in CASES if c[0] in VMAPPED],
                         ids=[c[0] for c in CASES if c[0] in VMAPPED])
def test_vmap_matches_a_loop(name: str, make: Callable[[Any], Any], args: tuple) -> None:
    scales = np.array([0.5, 1.0, 1.7])
    batched = tuple(np.stack([a * s if i == 0 else a + s for s in scales]) for i, a in enumerate(args))
    fun = make(fsl)
    got = fg.vmap(fun)(*batched)
    for k in range(len(scales)):
        want = fun(*(b[k] for b in batched))
        _close(jax.tree_util.tree_map(lambda x: np.asarray(x)[k], got), want, 1e-10)


def test_batched_inputs_match_jax() -> None:
    """Leading axes are a batch, as in jax.scipy.linalg."""
    a = np.stack([A, A.T + np.eye(4)])
    _close(fsl.expm(a * 0.2), jsl.expm(a * 0.2))
    _close(fsl.solve_triangular(a, np.stack([B, B]), lower=True), jsl.solve_triangular(a, np.stack([B, B]), lower=True))


def test_values_match_scipy() -> None:
    scipy_linalg = pytest.importorskip("scipy.linalg")
    np.testing.assert_allclose(fsl.expm(A * 0.7), scipy_linalg.expm(A * 0.7), rtol=1e-10)
    lu_, piv = fsl.lu_factor(A)
    want_lu, want_piv = scipy_linalg.lu_factor(A)
    np.testing.assert_allclose(lu_, want_lu, rtol=1e-12)
    np.testing.assert_array_equal(piv, want_piv)
    np.testing.assert_allclose(fsl.qr(TALL)[0] @ fsl.qr(TALL)[1], TALL, atol=1e-12)


def test_jit_matches_eager() -> None:
    f = lambda a, b: fsl.lu_solve(fsl.lu_factor(a), b) + fsl.expm(a * 0.1) @ b  # noqa: E731
    _close(fg.jit(f)(A, B), f(A, B))


def test_numpy_cholesky_gradient_is_symmetric_as_jaxs() -> None:
    """jnp.linalg.cholesky symmetrises its input, so a non-symmetric cotangent gives a symmetric
    gradient (before, only the lower triangle got one)."""
    w = np.arange(16.0).reshape(4, 4)
    got = fg.grad(lambda a: (fnp.linalg.cholesky(a) * w).sum())(SPD)
    want = jax.grad(lambda a: (jnp.linalg.cholesky(a) * w).sum())(SPD)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    np.testing.assert_allclose(got, got.T, rtol=1e-12)


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="trans"):
        fsl.solve_triangular(A, B, trans=3)
    with pytest.raises(ValueError, match="square"):
        fsl.inv(TALL)
    with pytest.raises(ValueError, match="mode"):
        fsl.qr(A, mode="bad")
    with pytest.raises(ValueError, match="assume_a"):
        fsl.solve(A, B, assume_a="tri")
    with pytest.raises(ValueError, match="at most 2"):
        fsl.block_diag(np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="output"):
        fsl.schur(A, output="bad")
    with pytest.raises(ValueError, match="square"):
        fsl.sqrtm(TALL)
    with pytest.raises(ValueError, match="side"):
        fsl.polar(A, side="up")
    with pytest.raises(ValueError, match="method"):
        fsl.polar(A, method="newton")


@pytest.mark.parametrize("shape", [(5, 3), (3, 5)])
def test_full_matrices_under_jit_and_vmap_match_jax(shape: tuple[int, int]) -> None:
    """qr(mode='full') and svd(full_matrices=True) of non-square matrices run under jit and vmap
    (they were eager-only), and refuse differentiation as JAX's do."""
    a = RNG.standard_normal(shape)
    stack = np.stack([a, 2 * a])
    q, r = fg.jit(fsl.qr)(a)
    jq, jr = jsl.qr(a)
    assert q.shape == jq.shape and r.shape == jr.shape
    np.testing.assert_allclose(np.abs(q), np.abs(jq), atol=1e-10)
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), a, atol=1e-12)
    qs, rs = fg.vmap(fsl.qr)(stack)
    np.testing.assert_allclose(np.einsum("bij,bjk->bik", qs, rs), stack, atol=1e-12)
    u, s, vh = fg.jit(fsl.svd)(a)
    ju, js, jvh = jsl.svd(a)
    assert u.shape == ju.shape and vh.shape == jvh.shape
    np.testing.assert_allclose(s, js, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(u)[:, :len(s)] * np.asarray(s) @ np.asarray(vh)[:len(s)], a, atol=1e-12)
    with pytest.raises(NotImplementedError):
        jax.grad(lambda m: jsl.svd(m)[0].sum())(a)
    with pytest.raises(NotImplementedError, match="full_matrices"):
        fg.grad(lambda m: fsl.svd(m)[0].sum())(a)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
@pytest.mark.parametrize("mode", ["full", "economic", "r"])
def test_qr_gradients_of_every_mode_and_shape_match_jax(shape: tuple[int, int], mode: str) -> None:
    """JAX's rules: wide matrices through the leading square block, the complete Q of a tall
    matrix through Householder's gauge."""
    a = RNG.standard_normal(shape)
    got = fg.grad(_weighted_sum(fg, lambda m: fsl.qr(m, mode=mode)))(a)
    want = jax.grad(_weighted_sum(jax, lambda m: jsl.qr(m, mode=mode)))(a)
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)
    got_v = fg.vmap(fg.grad(_weighted_sum(fg, lambda m: fsl.qr(m, mode=mode))))(np.stack([a, 2 * a]))
    np.testing.assert_allclose(got_v[1], fg.grad(_weighted_sum(fg, lambda m: fsl.qr(m, mode=mode)))(2 * a),
                               rtol=1e-10, atol=1e-12)


def test_numpy_qr_complete_gradient_matches_jax() -> None:
    w = np.cos(np.arange(25.0)).reshape(5, 5)
    got = fg.grad(lambda m: (fnp.linalg.qr(m, mode="complete")[0] * w).sum())(TALL)
    want = jax.grad(lambda m: (jnp.linalg.qr(m, mode="complete")[0] * w).sum())(TALL)
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)


def test_structured_matrices_match_jax() -> None:
    c, r = np.array([1.0, 2.0, 3.0]), np.array([9.0, 4.0, 5.0, 6.0])
    z = np.array([1 + 1j, 2 - 1j, 0.5j])
    for args in ((c,), (c, r), (z,), (np.arange(6.0).reshape(2, 3),), (np.arange(6.0).reshape(2, 3), r)):
        _close(fsl.toeplitz(*args), jsl.toeplitz(*args), 0)
    for args in ((c,), (c, r), (np.arange(6.0).reshape(2, 3), r)):
        _close(fsl.hankel(*args), jsl.hankel(*args), 0)
    _close(fsl.hilbert(5), jsl.hilbert(5), 1e-15)
    got = fg.grad(lambda c, r: (fsl.toeplitz(c, r) * np.arange(12.0).reshape(3, 4)).sum(), argnums=(0, 1))(c, r)
    want = jax.grad(lambda c, r: (jsl.toeplitz(c, r) * np.arange(12.0).reshape(3, 4)).sum(), argnums=(0, 1))(c, r)
    _close(got, want, 1e-12)


def test_expm_frechet_matches_jax_and_its_float32_path() -> None:
    e = RNG.standard_normal((4, 4))
    _close(fsl.expm_frechet(A * 0.3, e), jsl.expm_frechet(A * 0.3, e), 1e-9)
    _close(fsl.expm_frechet(A * 0.3, e, compute_expm=False), jsl.expm_frechet(A * 0.3, e, compute_expm=False), 1e-9)
    for scale in (0.01, 0.3, 3.0):
        a32 = (A * scale).astype(np.float32)
        got, want = np.asarray(fsl.expm(a32)), np.asarray(jsl.expm(a32))
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def _gp_neg_log_likelihood(lib: Any, m: Any, sl: Any) -> Callable[..., Any]:
    """A Gaussian-process marginal likelihood as JAX tutorials write it."""
    x = np.linspace(0.0, 3.0, 7)
    y = np.sin(2 * x)

    def nll(log_scale: Any, log_noise: Any) -> Any:
        d = x[:, None] - x[None, :]
        k = m.exp(-0.5 * d ** 2 / m.exp(2 * log_scale)) + m.exp(2 * log_noise) * m.eye(7)
        c, low = sl.cho_factor(k, lower=True)
        alpha = sl.cho_solve((c, low), y)
        return 0.5 * y @ alpha + m.sum(m.log(m.diag(c))) + 0.5 * 7 * m.log(2 * m.pi)

    return lib.jit(lib.value_and_grad(nll, argnums=(0, 1)))


def test_gaussian_process_program_matches_jax() -> None:
    got = _gp_neg_log_likelihood(fg, fnp, fsl)(0.1, -1.0)
    want = _gp_neg_log_likelihood(jax, jnp, jsl)(0.1, -1.0)
    _close(got, want, 1e-10)


def test_lu_edge_cases_match_jax() -> None:
    """Singular (a zero pivot is left unscaled, as LAPACK), empty, integer and complex inputs."""
    singular = np.array([[1.0, 2, 3], [2, 4, 6], [1, 0, 1]])
    for a in (singular, np.zeros((2, 2)), np.arange(9).reshape(3, 3), np.zeros((0, 0))):
        _close(fsl.lu_factor(a), jsl.lu_factor(a), 1e-12)
    c = RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3))
    _close(fsl.lu(c), jsl.lu(c), 1e-12)
    w = np.arange(9.0).reshape(3, 3)
    got = fg.grad(lambda a: fnp.real(fsl.lu(a)[1] * w).sum())(c)
    want = jax.grad(lambda a: jnp.real(jsl.lu(a)[1] * w).sum())(c)
    _close(got, want, 1e-10)
    assert fsl.lu(np.zeros((2, 0, 3)))[1].shape == (2, 0, 0)


# general real matrices: complex pairs before, between and after real eigenvalues, two pairs
_GENERAL_RNG = np.random.default_rng(21)
GENERAL = [_GENERAL_RNG.standard_normal((5, 5)) for _ in range(6)]


@pytest.mark.parametrize("k", range(len(GENERAL)))
@pytest.mark.parametrize("output", ["real", "complex"])
def test_schur_is_a_schur_form_with_jaxs_eigenvalue_order(k: int, output: str) -> None:
    """``A = Z T Z^H``, ``Z`` unitary, ``T`` (quasi-)upper-triangular with JAX's diagonal (the
    eigenvalues in LAPACK's order); real 2x2 blocks standardised as LAPACK's (equal diagonal).
    The Schur form is unique only up to Z's column signs and each block's rotation by 90 degrees."""
    a = GENERAL[k]
    t, z = (np.asarray(m) for m in fsl.schur(a, output=output))
    jt, jz = (np.asarray(m) for m in jsl.schur(a, output=output))
    assert (t.dtype, z.dtype) == (jt.dtype, jz.dtype)
    np.testing.assert_allclose(z @ t @ z.conj().T, a, atol=1e-12)
    np.testing.assert_allclose(z.conj().T @ z, np.eye(5), atol=1e-12)
    np.testing.assert_allclose(np.diag(t), np.diag(jt), atol=1e-10)
    below = np.tril(t, -1)
    assert not np.tril(t, -2).any() and (output == "real" or not below.any())
    for i in np.flatnonzero(np.diag(below, -1)):
        assert t[i, i] == t[i + 1, i + 1] and t[i, i + 1] * t[i + 1, i] < 0
        assert jt[i + 1, i] != 0                               # the same blocks as JAX's
    assert np.count_nonzero(np.diag(jt, -1)) == np.count_nonzero(np.diag(t, -1))


def test_schur_and_sqrtm_batch_jit_dtypes_and_refuse_derivatives_as_jax(x32: None) -> None:
    a = GENERAL[0].astype(np.float32)
    with jax.enable_x64(False):
        for ours, theirs in ((fsl.schur(a), jsl.schur(a)), ((fsl.sqrtm(a),), (jsl.sqrtm(a),)),
                             (fsl.polar(a), jsl.polar(a)), (fsl.qr(a, pivoting=True), jsl.qr(a, pivoting=True))):
            assert [np.asarray(x).dtype for x in ours] == [np.asarray(x).dtype for x in theirs]
        np.testing.assert_allclose(fsl.sqrtm(a @ a.T), jsl.sqrtm(a @ a.T), rtol=2e-4, atol=2e-4)
        for name, f in (("schur", lambda m: fsl.schur(m)[0].sum()), ("schur", lambda m: fsl.sqrtm(m).real.sum())):
            with pytest.raises(NotImplementedError, match=f"'{name}' not implemented"):
                fg.grad(f)(a)
        with pytest.raises(NotImplementedError, match="'schur' not implemented"):
            jax.grad(lambda m: jsl.sqrtm(m).real.sum())(a)
    stack = np.stack([GENERAL[1], GENERAL[2]])
    for f in (lambda m: fsl.schur(m), lambda m: fsl.sqrtm(m)):
        batched = fg.vmap(f)(stack)
        leading = f(stack)
        for i in range(2):
            _close(jax.tree_util.tree_map(lambda x: np.asarray(x)[i], batched), f(stack[i]), 1e-12)
            _close(jax.tree_util.tree_map(lambda x: np.asarray(x)[i], leading), f(stack[i]), 1e-12)
            _close(fg.jit(f)(stack[i]), f(stack[i]), 1e-12)


def test_sqrtm_is_the_principal_root() -> None:
    """JAX's on matrices whose real eigenvalues are positive; with a negative real eigenvalue,
    SciPy's principal root (JAX's complex Schur form carries -0j there and takes the other
    branch of that eigenvalue's root)."""
    scipy_linalg = pytest.importorskip("scipy.linalg")
    for a in (SPD, A, GENERAL[0]):
        assert np.linalg.eigvals(a)[np.abs(np.linalg.eigvals(a).imag) < 1e-12].real.min() > 0
        _close(fsl.sqrtm(a), jsl.sqrtm(a), 1e-9)
    negative = GENERAL[1]
    assert np.linalg.eigvals(negative).real.min() < 0
    got = np.asarray(fsl.sqrtm(negative))
    np.testing.assert_allclose(got, scipy_linalg.sqrtm(negative), atol=1e-10)
    np.testing.assert_allclose(got @ got, negative, atol=1e-10)


@pytest.mark.parametrize("a, side", [(A, "right"), (TALL, "right"), (WIDE, "left")], ids=["square", "tall", "wide"])
def test_polar_qdwh_matches_jax_and_differentiates_as_the_svd_method(a: np.ndarray, side: str) -> None:
    """JAX's default 'qdwh' iteration gives the SVD's factors; its reverse derivative is refused
    by JAX (a while_loop), fungraph's is the SVD method's (JAX's derivative of method='svd')."""
    _close(fsl.polar(a, side), jsl.polar(a, side), 1e-9)
    with pytest.raises(ValueError, match="Reverse-mode"):
        jax.grad(_weighted_sum(jax, lambda m: jsl.polar(m, side)))(a)
    got = fg.grad(_weighted_sum(fg, lambda m: fsl.polar(m, side)))(a)
    want = jax.grad(_weighted_sum(jax, lambda m: jsl.polar(m, side, method="svd")))(a)
    _close(got, want, 1e-8)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_singular_and_indefinite_matrices_give_jax_s_infinities_and_nans(x64: bool) -> None:
    """numpy raises LinAlgError; JAX's solve/inv return the infinities of a zero pivot and its
    cholesky NaN, batch entries that factor keeping their values, eagerly and under jit."""
    singular = [(np.array([[1.0, 2.0], [2.0, 4.0]]), np.array([1.0, 1.0])),
                (np.zeros((2, 2)), np.array([1.0, 1.0])),
                (np.array([[0.0, 1.0], [0.0, 1.0]]), np.array([[1.0, 2.0], [3.0, 4.0]])),
                (np.stack([np.array([[1.0, 2.0], [2.0, 4.0]]), np.eye(2)]), np.ones((2, 2)))]
    indefinite = [-np.eye(2), np.stack([np.eye(2), -np.eye(2)]), np.array([[1.0, 2.0], [2.0, 1.0]])]
    dtype = np.float64 if x64 else np.float32
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for a, b in singular:
            a, b = a.astype(dtype), b.astype(dtype)
            want = np.asarray(jnp.linalg.solve(a, b))
            for got in (fg.numpy.linalg.solve(a, b), fg.jit(fg.numpy.linalg.solve)(a, b)):
                np.testing.assert_array_equal(np.asarray(got), want)
            np.testing.assert_array_equal(np.asarray(fg.numpy.linalg.inv(a)), np.asarray(jnp.linalg.inv(a)))
        for a in indefinite:
            a = a.astype(dtype)
            want = np.asarray(jnp.linalg.cholesky(a))
            for got in (fg.numpy.linalg.cholesky(a), fg.jit(fg.numpy.linalg.cholesky)(a)):
                np.testing.assert_array_equal(np.asarray(got), want)
