"""``fungraph.numpy.linalg`` and ``numpy.fft`` beyond the op records: batches over leading axes,
named tuples, derivatives of ``slogdet`` and wide ``qr``, frequency helpers, ``einsum_path``."""

from __future__ import annotations

import numpy as np

import fungraph as fg
import fungraph.numpy as fnp
from tests.helpers import assert_same


def test_linalg_batched_over_leading_axes_and_namedtuples() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 4, 4))
    spd = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)
    w, v = fnp.linalg.eigh(spd)
    ref = np.linalg.eigh(spd)
    np.testing.assert_allclose(w, ref.eigenvalues, rtol=1e-12)
    assert fnp.linalg.eigh(spd).eigenvalues is not None
    np.testing.assert_allclose(fnp.linalg.inv(spd), np.linalg.inv(spd), rtol=1e-10)
    np.testing.assert_allclose(fnp.linalg.cholesky(spd), np.linalg.cholesky(spd), rtol=1e-12)
    sign, logdet = fnp.linalg.slogdet(spd)
    np.testing.assert_allclose(logdet, np.linalg.slogdet(spd).logabsdet, rtol=1e-12)
    u, s, vt = fnp.linalg.svd(a)
    np.testing.assert_allclose(u @ (s[..., None] * vt), a, atol=1e-12)


def test_gradient_of_logdet_is_inverse_transpose() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    g = fg.grad(lambda a: fnp.linalg.slogdet(a)[1])(a)
    np.testing.assert_allclose(g, np.linalg.inv(a).T, rtol=1e-10)
    g = fg.grad(lambda a: fnp.linalg.det(a))(a)
    np.testing.assert_allclose(g, np.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-10)


def test_qr_of_wide_matrix_has_values_and_jaxs_derivative() -> None:
    """JAX's rule for m < n: the thin rule on the leading square block, then dR_2 = dQ^H A_2 + Q^H dA_2."""
    from tests.helpers import jax_or_skip

    jax, jnp = jax_or_skip()
    a = np.arange(6.0).reshape(2, 3) + np.eye(2, 3)
    q, r = fnp.linalg.qr(a)
    np.testing.assert_allclose(q @ r, a, atol=1e-12)
    got = fg.grad(lambda a: fnp.sum(fnp.linalg.qr(a)[1] ** 2) + fnp.sum(fnp.linalg.qr(a)[0]))(a)
    want = jax.grad(lambda a: jnp.sum(jnp.linalg.qr(a)[1] ** 2) + jnp.sum(jnp.linalg.qr(a)[0]))(a)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_fft_frequency_helpers() -> None:
    np.testing.assert_array_equal(fnp.fft.fftfreq(5, 0.1), np.fft.fftfreq(5, 0.1))
    np.testing.assert_array_equal(fnp.fft.rfftfreq(6), np.fft.rfftfreq(6))


def test_einsum_path_reports_fungraphs_greedy_order() -> None:
    rng = np.random.default_rng(6)
    cases = [("ij,jk,kl->il", [(2, 30), (30, 4), (4, 50)]), ("ab,bc,cd,de->ae", [(8, 2), (2, 9), (9, 3), (3, 7)]),
             ("i...,...j,j->i", [(3, 4, 5), (4, 5, 6), (6,)]), ("ij,jk->ik", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)])]
    for subscripts, shp in cases:
        ops = [rng.normal(size=s) for s in shp]
        path, report = fnp.einsum_path(subscripts, *ops)
        assert path[0] == "einsum_path" and isinstance(report, str) and "Complete contraction" in report
        assert_same(np.einsum(subscripts, *ops, optimize=path), fnp.einsum(subscripts, *ops))
        if len(ops) <= 2:
            assert path == np.einsum_path(subscripts, *ops)[0]
    ops = [rng.normal(size=s) for s in cases[0][1]]
    assert fnp.einsum_path("ij,jk,kl->il", *ops, optimize=False)[0] == ["einsum_path", (0, 1, 2)]
    assert fnp.einsum_path("ij,jk,kl->il", *ops)[0] == ["einsum_path", (0, 1), (0, 1)]
    explicit = ["einsum_path", (0, 2), (0, 1)]
    assert fnp.einsum_path("ij,jk,kl->il", *ops, optimize=explicit)[0] == explicit


def _eigh_summary(m, lib_linalg, **kw):
    """Eigenvalues weighted, plus the sign-free squares of the eigenvectors' entries."""
    def f(a):
        w, v = lib_linalg.eigh(a, **kw)
        weights = np.cos(np.arange(w.shape[-1]) * 1.3)
        return (w * weights).sum() + (m.abs(v) ** 2 * np.sin(np.arange(v.size) * 0.7).reshape(v.shape)).sum()
    return f


def test_eigh_symmetrises_its_input_as_jax_does() -> None:
    """``(a + a^H) / 2`` is decomposed by default (values and a symmetric gradient as JAX's);
    ``symmetrize_input=False`` reads one triangle, as numpy's."""
    from tests.helpers import jax_or_skip

    jax, jnp = jax_or_skip()
    rng = np.random.default_rng(4)
    real = rng.standard_normal((4, 4))
    cplx = real + 1j * rng.standard_normal((4, 4))
    options = [{}, {"UPLO": "U"}, {"symmetrize_input": False}, {"UPLO": "U", "symmetrize_input": False}]
    for a in (real, cplx, np.stack([real, 2 * real])):
        for kw in options:
            np.testing.assert_allclose(fnp.linalg.eigvalsh(a, **kw), jnp.linalg.eigvalsh(a, **kw), rtol=1e-10)
            w, v = fnp.linalg.eigh(a, **kw)
            want_w, want_v = jnp.linalg.eigh(a, **kw)
            np.testing.assert_allclose(w, want_w, rtol=1e-10)
            np.testing.assert_allclose(np.abs(v), np.abs(want_v), rtol=1e-8, atol=1e-10)
            if a.ndim == 2 and a.dtype == real.dtype and kw.get("symmetrize_input", True):
                # (with symmetrize_input=False JAX's rule assumes a symmetric input and uses the
                # symmetrised matrix's values; fungraph's is the derivative of what it computes,
                # checked by the op records against finite differences)
                got = fg.grad(_eigh_summary(fnp, fnp.linalg, **kw))(a)
                want = jax.grad(_eigh_summary(jnp, jnp.linalg, **kw))(a)
                np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)
    got = fg.jit(fg.grad(_eigh_summary(fnp, fnp.linalg)))(real)
    np.testing.assert_allclose(got, got.T, rtol=1e-12)
    np.testing.assert_allclose(got, jax.grad(_eigh_summary(jnp, jnp.linalg))(real), rtol=1e-8)
