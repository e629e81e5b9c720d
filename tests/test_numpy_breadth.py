"""``fungraph.numpy._breadth`` and the other names that close the gap to ``dir(jax.numpy)``:
values against numpy and ``jax.numpy`` on random shapes, then jit, vmap (against a loop) and
derivatives (``check_grads``, second order) where JAX's function is traceable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.array import HostArray
from fungraph.core import ConcretizationError
from fungraph.testing import check_grads, shapes
from tests.helpers import jax_or_skip

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 3.0, 0.75, np.inf, -np.inf, np.nan, 5e-324, 1e-310, 2.0**-1022,
                    np.finfo(np.float64).max, -np.finfo(np.float64).max, 1e300, -7.5])


def _same(got: Any, want: Any, exact: bool = False) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if exact or got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def _jit_and_vmap(f: Callable[..., Any], batch: tuple[np.ndarray, ...], exact: bool = False) -> None:
    """``jit(f)`` agrees with ``f`` on the first example, ``vmap(f)`` with a loop over all."""
    first = tuple(b[0] for b in batch)
    fg.tree.map(lambda g, w: _same(g, w, exact), fg.jit(f)(*first), f(*first))
    loop = [f(*(b[i] for b in batch)) for i in range(batch[0].shape[0])]
    stacked = fg.tree.map(lambda *xs: np.stack(xs), *loop)
    fg.tree.map(lambda g, w: _same(g, w, exact), fg.vmap(f)(*batch), stacked)


# --- names, dtypes and errors -----------------------------------------------------------------------


def test_every_jax_numpy_name_is_present_or_an_unsupported_dtype() -> None:
    _, jnp = jax_or_skip()
    missing = {n for n in dir(jnp) if not n.startswith("_")} - set(dir(fnp))
    unsupported = set()
    for name in missing:
        try:
            getattr(fnp, name)
        except AttributeError as err:
            if "does not support" in str(err):
                unsupported.add(name)
    assert missing == unsupported, sorted(missing - unsupported)


def test_from_dlpack_shares_memory_converts_dtypes_and_takes_device_arrays() -> None:
    """``from_dlpack`` as ``jnp.from_dlpack``: a view of the producer's memory unless
    ``copy=True`` or a dtype conversion needs a copy (which ``copy=False`` refuses, naming the
    dtype); ``device`` places the result; device arrays and JAX arrays export and import."""
    jax, jnp = jax_or_skip()
    a = np.arange(6.0).reshape(2, 3)
    shared = fnp.from_dlpack(a)
    assert isinstance(shared, HostArray) and np.shares_memory(shared, a)
    _same(shared, a, exact=True)
    copied = fnp.from_dlpack(a, copy=True)
    assert not np.shares_memory(copied, a)
    small = np.array([1, 2, 255], np.uint8)
    widened = fnp.from_dlpack(small)
    assert widened.dtype == np.int32 and widened.tolist() == [1, 2, 255]
    with pytest.raises(ValueError, match=r"uint8\[3\] .* int32"):
        fnp.from_dlpack(small, copy=False)
    _same(fnp.from_dlpack(jnp.asarray(a) * 2), a * 2, exact=True)
    _same(np.asarray(jnp.from_dlpack(fnp.from_dlpack(a))), a, exact=True)
    with pytest.raises(TypeError, match="does not support"):
        fnp.from_dlpack(np.arange(3, dtype=np.uint64))


def test_device_arrays_export_dlpack(require_opencl: None) -> None:
    """A device array exports a host copy: numpy, JAX and fungraph import it, and a consumer
    that asks for no copy gets a ``BufferError``; ``device=`` uploads an imported array."""
    _, jnp = jax_or_skip()
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = fg.jit(lambda x: x * 2 + 1, backend="opencl")(a)
    assert d.__dlpack_device__() == (1, 0)
    for imported in (np.from_dlpack(d), fnp.from_dlpack(d), np.asarray(jnp.from_dlpack(d))):
        _same(imported, a * 2 + 1, exact=True)
    with pytest.raises(BufferError, match=r"f32\[3,4\].*copy=False"):
        d.__dlpack__(copy=False)
    back = fnp.from_dlpack(a, device="opencl")
    assert isinstance(back, fg.Array) and back.backend == "opencl"
    _same(np.asarray(back), a, exact=True)


def test_dtype_aliases_cast_like_float32_and_unsupported_dtypes_explain() -> None:
    for alias, target in ((fnp.double, fnp.float64), (fnp.single, fnp.float32), (fnp.cdouble, fnp.complex128),
                          (fnp.csingle, fnp.complex64), (fnp.complex_, fnp.complex128), (fnp.float_, fnp.float64),
                          (fnp.int_, fnp.int64)):
        assert alias is target and alias == target.dtype
        assert fg.jit(lambda v, t=alias: t(v))(np.arange(3)).dtype == target.dtype
        assert fnp.zeros(2, alias).dtype == target.dtype
    with pytest.raises(AttributeError, match=r"does not support the int8 dtype.*float32"):
        _ = fnp.int8
    with pytest.raises(AttributeError, match="bfloat16"):
        _ = fnp.bfloat16
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        _ = fnp.no_such_name
    assert not hasattr(fnp, "uint8") and "int8" not in fnp.__all__
    assert fnp.ComplexWarning is np.exceptions.ComplexWarning and fnp.issubdtype(np.str_, fnp.character)


def test_promote_types_follows_fungraphs_numpy2_promotion() -> None:
    names = ["bool", "int32", "int64", "float32", "float64", "complex64", "complex128"]
    for a in names:
        for b in names:
            want = np.promote_types(a, b)
            assert fnp.promote_types(a, b) == want
            assert (np.zeros(1, a) + fnp.zeros(1, b)).dtype == want
    assert fnp.promote_types(fnp.float32, int) == np.float64
    assert fnp.promote_types("int8", "uint8") == np.int32
    with pytest.raises(TypeError, match="does not support"):
        fnp.promote_types("uint64", "float32")


# --- index tricks ---------------------------------------------------------------------------------------


def test_mgrid_ogrid_s_and_index_exp_match_numpy_and_jax() -> None:
    _, jnp = jax_or_skip()
    keys = [slice(0, 4), (slice(0, 3), slice(1, 5, 2)), (slice(0, 1, 3j), slice(0, 2)), slice(3, 0, -1),
            (slice(0, 3),), (slice(-1, 1, 5j), slice(0, 2, 0.5), slice(2))]
    for key in keys:
        for ours, theirs in ((fnp.mgrid, np.mgrid), (fnp.ogrid, np.ogrid)):
            got, want = ours[key], theirs[key]
            assert isinstance(got, list) == isinstance(want, tuple)
            for g, w in zip(*(x if isinstance(x, (list, tuple)) else [x] for x in (got, want))):
                _same(g, w, exact=True)
                assert g.dtype == w.dtype
    key = (slice(0, 2, 3j), slice(1, 3))
    _same(fnp.mgrid[key], np.asarray(jnp.mgrid[key]), exact=True)
    assert isinstance(jnp.ogrid[key], list) and isinstance(fnp.ogrid[key], list)
    assert fnp.s_[1:2, ::3] == np.s_[1:2, ::3] and fnp.index_exp[2] == (2,)
    x = np.arange(12.0).reshape(3, 4)
    _same(fg.jit(lambda v: v[fnp.s_[1:, ::2]])(x), x[1:, ::2])


# --- floating-point decomposition ---------------------------------------------------------------------


@settings(max_examples=8)
@given(st.sampled_from([np.float32, np.float64]), shapes(1, 2, 1, 6), st.integers(0, 2**31 - 1))
def test_frexp_nextafter_spacing_match_numpy(dtype: Any, shape: tuple[int, ...], seed: int) -> None:
    rng = np.random.default_rng(seed)
    pool = np.concatenate([SPECIAL, rng.normal(size=8) * 10.0 ** rng.integers(-40, 40, 8)])
    with np.errstate(all="ignore"):
        x = rng.choice(pool, shape).astype(dtype)
        y = rng.choice(pool, shape).astype(dtype)
        want_next, want_spacing = np.nextafter(x, y), np.spacing(x)
    m, e = fnp.frexp(x)
    wm, we = np.frexp(x)
    _same(m, wm, exact=True)
    _same(e, we, exact=True)
    assert (m.dtype, e.dtype) == (wm.dtype, we.dtype)
    got = fnp.nextafter(x, y)
    _same(got, want_next, exact=True)
    _same(np.signbit(got), np.signbit(want_next))
    _same(fg.jit(fnp.nextafter)(x, y), want_next, exact=True)
    _same(fnp.spacing(x), want_spacing, exact=True)
    _jit_and_vmap(fnp.frexp, (x[None].repeat(2, 0),), exact=True)
    _jit_and_vmap(fnp.spacing, (x[None].repeat(2, 0),), exact=True)


def test_float_decomposition_derivatives_and_integer_inputs() -> None:
    x = np.array([0.3, -2.5, 7.0, 1e-3])
    check_grads(lambda v: fnp.frexp(v)[0], (x,), order=2)
    _same(fg.grad(lambda v: fnp.frexp(v)[0].sum())(x), 2.0 ** -np.frexp(x)[1])
    _same(fg.grad(lambda v: (fnp.nextafter(v, 9.0) + fnp.spacing(v)).sum())(x), np.zeros(4))
    assert fnp.frexp(np.arange(3))[0].dtype == np.float64 and fnp.nextafter(1, 2) == np.nextafter(1.0, 2.0)
    with pytest.raises(TypeError, match="complex"):
        fnp.frexp(np.array([1j]))


# --- piecewise, apply_over_axes, fromfunction ----------------------------------------------------------


@settings(max_examples=6)
@given(shapes(0, 2, 1, 5), st.integers(0, 2**31 - 1))
def test_piecewise_matches_numpy(shape: tuple[int, ...], seed: int) -> None:
    x = np.random.default_rng(seed).normal(size=shape) * 2
    want = np.piecewise(x, [x < 0, x > 1], [np.sin, 0.5, lambda t: 3 * t ** 2])
    _same(fnp.piecewise(x, [x < 0, x > 1], [fnp.sin, 0.5, lambda t: 3 * t ** 2]), want)
    if x.ndim == 1:
        _same(fnp.piecewise(x, x > 0, [lambda t: -t]), np.piecewise(x, x > 0, [lambda t: -t]))
    xi = (x * 3).astype(np.int64)
    _same(fnp.piecewise(xi, [xi > 0], [1.7, -2.2]), np.piecewise(xi, [xi > 0], [1.7, -2.2]))


def test_piecewise_traces_and_differentiates() -> None:
    f = lambda v: fnp.piecewise(v, [v < 0, v > 1], [lambda t: t ** 3, fnp.sin, lambda t: 2 * t])
    x = np.array([-1.5, 0.3, 0.7, 2.0, -0.2])
    check_grads(f, (x,), order=2)
    _jit_and_vmap(f, (np.stack([x, -x, x * 3]),))
    with pytest.raises(ValueError, match="functions are expected"):
        fnp.piecewise(x, [x < 0], [1, 2, 3])


def test_apply_over_axes_and_fromfunction() -> None:
    _, jnp = jax_or_skip()
    a = np.random.default_rng(0).normal(size=(2, 3, 4))
    for axes in ([0, 2], 1, (2, 0)):
        _same(fnp.apply_over_axes(fnp.sum, a, axes), np.apply_over_axes(np.sum, a, axes))
    _same(fnp.apply_over_axes(lambda v, ax: fnp.cumsum(v, ax), a, [1]), np.cumsum(a, 1))
    check_grads(lambda v: fnp.apply_over_axes(fnp.max, v, [0, 2]), (a,), order=2)
    _jit_and_vmap(lambda v: fnp.apply_over_axes(fnp.mean, v, [1]), (a,))
    for fun, shape, dtype in ((lambda i, j: i * 10 + j, (3, 4), float), (lambda i: i ** 2, (5,), int),
                              (lambda i, j, k: i - j * k, (2, 3, 2), np.float32)):
        got = fnp.fromfunction(fun, shape, dtype=dtype)
        _same(got, np.fromfunction(fun, shape, dtype=dtype))
        _same(got, np.asarray(jnp.fromfunction(fun, shape, dtype=dtype)))
        assert got.dtype == np.fromfunction(fun, shape, dtype=dtype).dtype
    one = fnp.fromfunction(lambda i, j: 1.0, (2, 2))
    _same(one, np.asarray(jnp.fromfunction(lambda i, j: 1.0, (2, 2))))
    pair = fnp.fromfunction(lambda i, j: (i + j, i * j), (2, 3))
    _same(pair[1], np.fromfunction(lambda i, j: i * j, (2, 3)))
    check_grads(lambda c: fnp.fromfunction(lambda i, j: fnp.sin(c * i) + j, (3, 2)), (np.array(0.7),), order=2)
    _same(fg.jit(lambda c: fnp.fromfunction(lambda i: c * i, (4,)))(2.0), [0.0, 2.0, 4.0, 6.0])


# --- polynomials ------------------------------------------------------------------------------------------


@settings(max_examples=6)
@given(st.integers(3, 9), st.integers(0, 3), st.integers(0, 2), st.booleans(), st.integers(0, 2**31 - 1))
def test_polyfit_matches_numpy(n: int, deg: int, ncols: int, weighted: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    deg = min(deg, n - 2)
    x = np.sort(rng.uniform(-2, 2, n)) + np.arange(n) * 0.1
    y = rng.normal(size=(n, ncols) if ncols else n)
    w = rng.uniform(0.5, 2, n) if weighted else None
    _same(fnp.polyfit(x, y, deg, w=w), np.polyfit(x, y, deg, w=w))
    got, want = fnp.polyfit(x, y, deg, w=w, full=True), np.polyfit(x, y, deg, w=w, full=True)
    for g, wv in zip(got, want):
        _same(g, wv)
    for cov in (True, "unscaled"):
        for g, wv in zip(fnp.polyfit(x, y, deg, w=w, cov=cov), np.polyfit(x, y, deg, w=w, cov=cov)):
            _same(g, wv)


def test_polyfit_traces_and_differentiates() -> None:
    rng = np.random.default_rng(1)
    x, y, w = np.linspace(0, 1, 7), rng.normal(size=7), rng.uniform(1, 2, 7)
    check_grads(lambda a, b: fnp.polyfit(a, b, 2), (x, y), order=2)
    check_grads(lambda b, v: fnp.polyfit(x, b, 1, w=v, cov=True)[1], (y, w), order=1)
    _jit_and_vmap(lambda b: fnp.polyfit(x, b, 2, full=True)[:2], (rng.normal(size=(3, 7)),))
    _jit_and_vmap(lambda a, b: fnp.polyfit(a, b, 1, cov=True), (x + rng.normal(size=(2, 7)) * 0.1, y + np.ones((2, 1))))
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
    _same(q, nq)
    _same(fnp.polyadd(fnp.polymul(q, v), r)[-nu:], u)
    _same(fnp.polydiv(u, v, trim_leading_zeros=True)[1][-nr.size:], nr)
    z = rng.normal(size=nu)
    _same(fnp.poly(z), np.poly(z))
    zc = z + 1j * rng.normal(size=nu)
    _same(fnp.poly(zc), np.poly(zc))
    m = rng.normal(size=(nv, nv))
    _same(fnp.real(fnp.poly(m)), np.poly(m))


def test_polydiv_and_poly_trace_and_differentiate() -> None:
    rng = np.random.default_rng(2)
    u, v = rng.normal(size=5), np.array([3.0, 0.5, -1.0])
    check_grads(fnp.polydiv, (u, v), order=2)
    check_grads(fnp.poly, (rng.normal(size=4),), order=2)
    _jit_and_vmap(fnp.polydiv, (rng.normal(size=(3, 5)), rng.normal(size=(3, 3)) + [2.0, 0, 0]))
    _jit_and_vmap(fnp.poly, (rng.normal(size=(3, 4)),))
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
    _same(key(got), key(np.roots(p).astype(complex)))
    loose = fnp.roots(p, strip_zeros=False)
    assert np.isnan(loose).sum() == leading
    _same(key(loose[~np.isnan(loose)]), key(got))
    _same(key(fg.jit(lambda c: fnp.roots(c, strip_zeros=False))(p)), key(loose))


def test_roots_trace_with_strip_zeros_false_and_differentiate() -> None:
    p = np.poly([1.0, 2.5, -1.0])
    real_sum = lambda c: fnp.sum(fnp.real(fnp.roots(c, strip_zeros=False)) ** 2)
    check_grads(real_sum, (p,), order=2)
    batch = np.stack([p, np.poly([0.5, -2.0, 3.0])])
    got = fg.vmap(lambda c: fnp.sort_complex(fnp.roots(c, strip_zeros=False)))(batch)
    _same(got, np.stack([np.sort_complex(np.roots(c).astype(complex)) for c in batch]))
    with pytest.raises(ConcretizationError, match="strip_zeros=False"):
        fg.jit(fnp.roots)(p)
    assert fnp.roots(np.array([0.0, 0.0])).shape == (0,) and fnp.roots(np.array([3.0])).shape == (0,)
    assert np.isnan(fnp.roots(np.zeros(3), strip_zeros=False)).all()


@settings(max_examples=6)
@given(shapes(1, 3, 1, 5), st.sampled_from(["fb", "f", "b", "F"]), st.integers(0, 2**31 - 1))
def test_trim_zeros_matches_numpy(shape: tuple[int, ...], trim: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 3, shape) * (rng.uniform(size=shape) < 0.3)
    _same(fnp.trim_zeros(x, trim), np.trim_zeros(x, trim))
    _same(fnp.trim_zeros(x, trim, axis=-1), np.trim_zeros(x, trim, axis=-1))
    with pytest.raises(ConcretizationError):
        fg.jit(fnp.trim_zeros)(x)


# --- histograms -----------------------------------------------------------------------------------------


@settings(max_examples=6)
@given(st.integers(1, 3), st.integers(1, 30), st.integers(1, 4), st.booleans(), st.booleans(),
       st.integers(0, 2**31 - 1))
def test_histogramdd_matches_numpy(d: int, n: int, nbins: int, weighted: bool, ranged: bool,
                                           seed: int) -> None:
    rng = np.random.default_rng(seed)
    sample = np.round(rng.normal(size=(n, d)), 1)
    w = rng.uniform(size=n) if weighted else None
    rng_ = [(-1.0, 1.0)] * d if ranged else None
    bins = [nbins + k for k in range(d)]
    for density in (None, True):
        got, edges = fnp.histogramdd(sample, bins, rng_, w, density)
        want, wedges = np.histogramdd(sample, bins, rng_, weights=w, density=density)
        _same(got, want)
        assert got.dtype == (np.int64 if w is None and not density else np.float64)
        for e, we in zip(edges, wedges):
            _same(e, we)
    if d == 2:
        got2 = fnp.histogram2d(sample[:, 0], sample[:, 1], nbins, rng_, w)
        want2 = np.histogram2d(sample[:, 0], sample[:, 1], nbins, rng_, weights=w)
        for g, wv in zip(got2, want2):
            _same(g, wv)
        edges = np.linspace(-2, 2, 6)
        got_e = fnp.histogram2d(sample[:, 0], sample[:, 1], edges)[0]
        _same(got_e, np.histogram2d(sample[:, 0], sample[:, 1], edges)[0])


def test_histogramdd_traces_and_differentiates_in_the_weights() -> None:
    rng = np.random.default_rng(3)
    pts, w = rng.uniform(size=(3, 20, 2)), rng.uniform(size=(3, 20))
    f = lambda s, v: fnp.histogramdd(s, [2, 3], [(0, 1), (0, 1)], v, density=True)[0]
    _jit_and_vmap(f, (pts, w))
    _jit_and_vmap(lambda x, y: fnp.histogram2d(x, y, 3)[0], (pts[..., 0], pts[..., 1]))
    check_grads(lambda v: f(pts[0], v), (w[0],), order=2)


# --- place and put ----------------------------------------------------------------------------------------


@settings(max_examples=6)
@given(shapes(1, 3, 1, 4), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_place_and_put_match_numpy(shape: tuple[int, ...], nv: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=shape)
    mask = rng.uniform(size=shape) < 0.5
    vals = rng.normal(size=nv)
    want = a.copy()
    np.place(want, mask, vals)
    _same(fnp.place(a, mask, vals, inplace=False), want)
    ind = rng.choice(a.size, size=min(nv + 1, a.size), replace=False) - rng.integers(0, 2) * a.size
    for mode in ("raise", "clip", "wrap"):
        want = a.copy()
        np.put(want, ind, vals, mode=mode)
        _same(fnp.put(a, ind, vals, mode=mode, inplace=False), want)
    far = np.concatenate([ind, [a.size + 3, -a.size - 1]])
    for mode in ("clip", "wrap"):
        want = a.copy()
        np.put(want, far, vals, mode=mode)
        _same(fnp.put(a, far, vals, mode=mode, inplace=False), want)
    want = a.copy()
    np.put(want, ind, np.resize(vals, far.size)[:ind.size])
    _same(fnp.put(a, far, vals, mode="fill", inplace=False), want)


def test_place_and_put_are_functional_trace_and_differentiate() -> None:
    a = np.arange(6.0)
    for call in (lambda: fnp.place(a, a > 2, 0.0), lambda: fnp.put(a, [0], 1.0)):
        with pytest.raises(ValueError, match="inplace=False"):
            call()
    with pytest.raises(IndexError, match="out of bounds"):
        fnp.put(a, [6], 1.0, mode="raise", inplace=False)
    _same(fnp.put(a, [1, 1], [5.0, 7.0], inplace=False), [0, 7, 2, 3, 4, 5])
    rng = np.random.default_rng(4)
    mask = np.array([True, False, True, True, False, False])
    check_grads(lambda x, v: fnp.place(x, mask, v, inplace=False), (rng.normal(size=6), rng.normal(size=2)), order=2)
    check_grads(lambda x, v: fnp.put(x, np.array([0, 4, 4]), v, inplace=False),
                (rng.normal(size=(2, 3)), rng.normal(size=3)), order=2)
    masks = rng.uniform(size=(3, 6)) < 0.5
    _jit_and_vmap(lambda x, m: fnp.place(x, m, np.array([9.0, 8.0]), inplace=False), (rng.normal(size=(3, 6)), masks))
    idx = rng.integers(-8, 8, size=(3, 4))
    for mode in ("fill", "clip", "wrap"):
        _jit_and_vmap(lambda i, m=mode: fnp.put(a, i, np.array([1.0, 2.0]), mode=m, inplace=False), (idx,))


# --- bits -------------------------------------------------------------------------------------------------


@settings(max_examples=8)
@given(shapes(1, 3, 1, 11), st.sampled_from([None, 0, -1]), st.sampled_from(["big", "little"]),
       st.integers(0, 2**31 - 1))
def test_packbits_unpackbits_bitwise_count_match_numpy(shape: tuple[int, ...], axis: Any, order: str,
                                                       seed: int) -> None:
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2, shape)
    packed = fnp.packbits(bits, axis, order)
    want = np.packbits(bits.astype(np.uint8), axis, bitorder=order)
    _same(packed, want)
    assert packed.dtype == np.int32
    data = rng.integers(0, 256, shape)
    unpacked = fnp.unpackbits(data, axis, bitorder=order)
    _same(unpacked, np.unpackbits(data.astype(np.uint8), axis, bitorder=order))
    assert unpacked.dtype == np.int32
    for count in (3, -5, 20):
        _same(fnp.unpackbits(data, axis, count, order), np.unpackbits(data.astype(np.uint8), axis, count, order))
    _same(fnp.unpackbits(data - 256, axis, bitorder=order), unpacked)
    for dt in (np.int32, np.int64):
        info = np.iinfo(dt)
        v = np.concatenate([rng.integers(info.min, info.max, 20, dtype=dt), [info.min, info.max, -1, 0]]).astype(dt)
        got = fnp.bitwise_count(v)
        _same(got, np.bitwise_count(v))
        assert got.dtype == np.int32
    _same(fnp.bitwise_count(bits > 0), np.bitwise_count(bits > 0))


def test_bit_functions_trace() -> None:
    rng = np.random.default_rng(5)
    _jit_and_vmap(lambda b: fnp.packbits(b, axis=-1, bitorder="little"), (rng.integers(0, 2, (3, 2, 11)),))
    _jit_and_vmap(lambda b: fnp.unpackbits(b, count=5), (rng.integers(0, 256, (3, 2)),))
    _jit_and_vmap(fnp.bitwise_count, (rng.integers(-(2**40), 2**40, (3, 5)),))
    with pytest.raises(TypeError, match="integer"):
        fnp.packbits(np.ones(3))
    with pytest.raises(TypeError, match="byte"):
        fnp.unpackbits(np.ones(3))


# --- einsum_path ------------------------------------------------------------------------------------------


def test_einsum_path_reports_fungraphs_greedy_order() -> None:
    rng = np.random.default_rng(6)
    cases = [("ij,jk,kl->il", [(2, 30), (30, 4), (4, 50)]), ("ab,bc,cd,de->ae", [(8, 2), (2, 9), (9, 3), (3, 7)]),
             ("i...,...j,j->i", [(3, 4, 5), (4, 5, 6), (6,)]), ("ij,jk->ik", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)])]
    for subscripts, shp in cases:
        ops = [rng.normal(size=s) for s in shp]
        path, report = fnp.einsum_path(subscripts, *ops)
        assert path[0] == "einsum_path" and isinstance(report, str) and "Complete contraction" in report
        _same(np.einsum(subscripts, *ops, optimize=path), fnp.einsum(subscripts, *ops))
        if len(ops) <= 2:
            assert path == np.einsum_path(subscripts, *ops)[0]
    ops = [rng.normal(size=s) for s in cases[0][1]]
    assert fnp.einsum_path("ij,jk,kl->il", *ops, optimize=False)[0] == ["einsum_path", (0, 1, 2)]
    assert fnp.einsum_path("ij,jk,kl->il", *ops)[0] == ["einsum_path", (0, 1), (0, 1)]
    explicit = ["einsum_path", (0, 2), (0, 1)]
    assert fnp.einsum_path("ij,jk,kl->il", *ops, optimize=explicit)[0] == explicit


# --- numpy's eager helpers ---------------------------------------------------------------------------------


def test_printing_and_files_are_numpys(tmp_path: Any) -> None:
    x = np.linspace(0, 1, 7).reshape(7, 1)
    assert fnp.array_repr(x, precision=2) == np.array_repr(x, precision=2)
    assert fnp.array_str(fnp.sin(x), suppress_small=True) == np.array_str(np.sin(x), suppress_small=True)
    with fnp.printoptions(precision=3):
        assert fnp.get_printoptions()["precision"] == 3
    assert fnp.get_printoptions()["precision"] == np.get_printoptions()["precision"]
    fnp.save(tmp_path / "a.npy", np.arange(4, dtype=np.int8))
    loaded = fnp.load(tmp_path / "a.npy")
    assert loaded.dtype == np.int32 and loaded.tolist() == [0, 1, 2, 3]
    fnp.savez(tmp_path / "b.npz", x=x)
    with fnp.load(tmp_path / "b.npz") as archive:
        _same(archive["x"], x)
    np.arange(5, dtype=np.uint16).tofile(tmp_path / "c.bin")
    from_file = fnp.fromfile(tmp_path / "c.bin", dtype=np.uint16)
    assert from_file.dtype == np.int32 and from_file.tolist() == list(range(5))
    raw = fnp.frombuffer(b"\x01\x02\xff", dtype=np.uint8)
    assert raw.dtype == np.int32 and raw.tolist() == [1, 2, 255] and isinstance(raw, fg.Array)
    assert fnp.frombuffer(np.arange(3.0).tobytes()).tolist() == [0.0, 1.0, 2.0]
    assert fnp.fromstring("1 2 3", dtype=np.int16, sep=" ").dtype == np.int32
    assert fnp.fromiter(range(4), dtype=np.float16).dtype == np.float32
    with pytest.raises(TypeError, match="does not support"):
        fnp.frombuffer(b"\x00" * 8, dtype=np.uint64)
    _same(fnp.mask_indices(4, fnp.triu, 1), np.mask_indices(4, np.triu, 1))
    _same(fnp.mask_indices(3, fnp.tril, 0, size=8)[0], np.concatenate([np.mask_indices(3, np.tril)[0], [0, 0]]))


def test_agrees_with_jax_on_fixed_inputs() -> None:
    """A few calls (JAX compiles each): the conventions where JAX differs from numpy (always
    complex roots and matrix ``poly``, untrimmed 2-d ``trim_zeros``, -0.0's spacing aside)."""
    _, jnp = jax_or_skip()
    rng = np.random.default_rng(7)
    normal = SPECIAL[(SPECIAL != 0) & ~(np.abs(SPECIAL) < 2.0**-1022)]
    x = np.concatenate([normal, rng.normal(size=6)])
    m = rng.normal(size=(3, 3))
    p = np.array([0.0, 0.0, 1.0, -1.5, -2.5, 3.0])
    bits = rng.integers(0, 2, (3, 10))
    pairs = [
        (fnp.frexp(x), jnp.frexp(x)),
        (fnp.spacing(x), jnp.spacing(x)),
        (fnp.poly(m), jnp.poly(m)),
        (np.isnan(fnp.roots(p, strip_zeros=False)), np.isnan(jnp.roots(p, strip_zeros=False))),
        (fnp.trim_zeros(np.pad(bits, 2)), jnp.trim_zeros(np.pad(bits, 2))),
        (fnp.packbits(bits, -1), jnp.packbits(bits, -1)),
        (fnp.fromfunction(lambda i, j: i * j + 1.0, (2, 3)), jnp.fromfunction(lambda i, j: i * j + 1.0, (2, 3))),
    ]
    for ours, theirs in pairs:
        fg.tree.map(lambda g, t: _same(g, np.asarray(t)), ours, fg.tree.map(np.asarray, theirs))
    roots = fnp.roots(p)
    assert roots.dtype == jnp.roots(p).dtype
    _same(np.sort_complex(roots), np.sort_complex(np.roots(p).astype(complex)))
