"""``fungraph.numpy``'s polynomials: fitting, division, roots and characteristic polynomials
against numpy, traced and differentiated."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.core import ConcretizationError
from fungraph.testing import check_grads
from tests.helpers import assert_same, check_jit_and_vmap


@settings(max_examples=6)
@given(st.integers(3, 9), st.integers(0, 3), st.integers(0, 2), st.booleans(), st.integers(0, 2**31 - 1))
def test_polyfit_matches_numpy(n: int, deg: int, ncols: int, weighted: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    deg = min(deg, n - 2)
    x = np.sort(rng.uniform(-2, 2, n)) + np.arange(n) * 0.1
    y = rng.normal(size=(n, ncols) if ncols else n)
    w = rng.uniform(0.5, 2, n) if weighted else None
    assert_same(fnp.polyfit(x, y, deg, w=w), np.polyfit(x, y, deg, w=w))
    got, want = fnp.polyfit(x, y, deg, w=w, full=True), np.polyfit(x, y, deg, w=w, full=True)
    for g, wv in zip(got, want):
        assert_same(g, wv)
    for cov in (True, "unscaled"):
        for g, wv in zip(fnp.polyfit(x, y, deg, w=w, cov=cov), np.polyfit(x, y, deg, w=w, cov=cov)):
            assert_same(g, wv)


def test_polyfit_traces_and_differentiates() -> None:
    rng = np.random.default_rng(1)
    x, y, w = np.linspace(0, 1, 7), rng.normal(size=7), rng.uniform(1, 2, 7)
    check_grads(lambda a, b: fnp.polyfit(a, b, 2), (x, y), order=2)
    check_grads(lambda b, v: fnp.polyfit(x, b, 1, w=v, cov=True)[1], (y, w), order=1)
    check_jit_and_vmap(lambda b: fnp.polyfit(x, b, 2, full=True)[:2], (rng.normal(size=(3, 7)),))
    check_jit_and_vmap(lambda a, b: fnp.polyfit(a, b, 1, cov=True),
                       (x + rng.normal(size=(2, 7)) * 0.1, y + np.ones((2, 1))))
    with pytest.raises(ValueError, match="exceed order"):
        fnp.polyfit(x[:3], y[:3], 2, cov=True)
    assert fnp.polyfit(np.arange(4), np.arange(4), 1).dtype == np.float64


@settings(max_examples=6)
@given(st.integers(1, 6), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_polydiv_and_poly_match_numpy(nu: int, nv: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    u, v = rng.normal(size=nu), rng.normal(size=nv) + np.eye(1, nv)[0] * 2
    q, r = fnp.polydiv(u, v)
    assert r.shape == u.shape
    nq, nr = np.polydiv(u, v)
    assert_same(q, nq)
    assert_same(fnp.polyadd(fnp.polymul(q, v), r)[-nu:], u)
    assert_same(fnp.polydiv(u, v, trim_leading_zeros=True)[1][-nr.size:], nr)
    z = rng.normal(size=nu)
    assert_same(fnp.poly(z), np.poly(z))
    zc = z + 1j * rng.normal(size=nu)
    assert_same(fnp.poly(zc), np.poly(zc))
    m = rng.normal(size=(nv, nv))
    assert_same(fnp.real(fnp.poly(m)), np.poly(m))


def test_polydiv_and_poly_trace_and_differentiate() -> None:
    rng = np.random.default_rng(2)
    u, v = rng.normal(size=5), np.array([3.0, 0.5, -1.0])
    check_grads(fnp.polydiv, (u, v), order=2)
    check_grads(fnp.poly, (rng.normal(size=4),), order=2)
    check_jit_and_vmap(fnp.polydiv, (rng.normal(size=(3, 5)), rng.normal(size=(3, 3)) + [2.0, 0, 0]))
    check_jit_and_vmap(fnp.poly, (rng.normal(size=(3, 4)),))
    with pytest.raises(ConcretizationError, match="trim_leading_zeros"):
        fg.jit(lambda a: fnp.polydiv(a, v, trim_leading_zeros=True))(u)


@settings(max_examples=6)
@given(st.integers(1, 5), st.integers(0, 2), st.integers(0, 2), st.integers(0, 2**31 - 1))
def test_roots_match_numpy(k: int, leading: int, trailing: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = np.concatenate([np.zeros(leading), np.poly(rng.uniform(-3, 3, k)) * 1.5, np.zeros(trailing)])
    key = lambda r: np.sort_complex(np.round(np.asarray(r), 6))
    got = fnp.roots(p)
    assert got.dtype == np.complex128
    assert_same(key(got), key(np.roots(p).astype(complex)))
    loose = fnp.roots(p, strip_zeros=False)
    assert np.isnan(loose).sum() == leading
    assert_same(key(loose[~np.isnan(loose)]), key(got))
    assert_same(key(fg.jit(lambda c: fnp.roots(c, strip_zeros=False))(p)), key(loose))


def test_roots_trace_with_strip_zeros_false_and_differentiate() -> None:
    p = np.poly([1.0, 2.5, -1.0])
    real_sum = lambda c: fnp.sum(fnp.real(fnp.roots(c, strip_zeros=False)) ** 2)
    check_grads(real_sum, (p,), order=2)
    batch = np.stack([p, np.poly([0.5, -2.0, 3.0])])
    got = fg.vmap(lambda c: fnp.sort_complex(fnp.roots(c, strip_zeros=False)))(batch)
    assert_same(got, np.stack([np.sort_complex(np.roots(c).astype(complex)) for c in batch]))
    with pytest.raises(ConcretizationError, match="strip_zeros=False"):
        fg.jit(fnp.roots)(p)
    assert fnp.roots(np.array([0.0, 0.0])).shape == (0,) and fnp.roots(np.array([3.0])).shape == (0,)
    assert np.isnan(fnp.roots(np.zeros(3), strip_zeros=False)).all()
