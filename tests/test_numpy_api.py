"""``fungraph.numpy`` as a namespace: every ``jax.numpy`` name, dtypes and promotion, DLPack,
``ndarray`` checks, list arguments, the functional helpers (``piecewise``, ``apply_over_axes``,
``fromfunction``), numpy's eager helpers (printing, files), and fixed inputs checked against JAX."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.array import HostArray
from fungraph.testing import check_grads, shapes
from tests.helpers import SPECIAL_FLOATS, assert_same, check_jit_and_vmap, jax_or_skip

# --- names, dtypes and arguments ------------------------------------------------------------------


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
    assert_same(shared, a, exact=True)
    copied = fnp.from_dlpack(a, copy=True)
    assert not np.shares_memory(copied, a)
    small = np.array([1, 2, 255], np.uint8)
    kept = fnp.from_dlpack(small, copy=False)
    assert kept.dtype == np.uint8 and np.shares_memory(kept, small) and kept.tolist() == [1, 2, 255]
    with fg.disable_x64(), pytest.raises(ValueError, match=r"float64\[2,3\] .* float32"):
        fnp.from_dlpack(a, copy=False)
    assert_same(fnp.from_dlpack(jnp.asarray(a) * 2), a * 2, exact=True)
    assert_same(np.asarray(jnp.from_dlpack(fnp.from_dlpack(a))), a, exact=True)


def test_device_arrays_export_dlpack(require_opencl: None) -> None:
    """A device array exports a host copy: numpy, JAX and fungraph import it, and a consumer
    that asks for no copy gets a ``BufferError``; ``device=`` uploads an imported array."""
    _, jnp = jax_or_skip()
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = fg.jit(lambda x: x * 2 + 1, backend="opencl")(a)
    assert d.__dlpack_device__() == (1, 0)
    for imported in (np.from_dlpack(d), fnp.from_dlpack(d), np.asarray(jnp.from_dlpack(d))):
        assert_same(imported, a * 2 + 1, exact=True)
    with pytest.raises(BufferError, match=r"f32\[3,4\].*copy=False"):
        d.__dlpack__(copy=False)
    back = fnp.from_dlpack(a, device="opencl")
    assert isinstance(back, fg.Array) and back.backend == "opencl"
    assert_same(np.asarray(back), a, exact=True)


def test_dtype_aliases_cast_like_float32_and_unsupported_dtypes_explain() -> None:
    for alias, target in ((fnp.double, fnp.float64), (fnp.single, fnp.float32), (fnp.cdouble, fnp.complex128),
                          (fnp.csingle, fnp.complex64), (fnp.complex_, fnp.complex128), (fnp.float_, fnp.float64),
                          (fnp.int_, fnp.int64)):
        assert alias is target and alias == target.dtype
        assert fg.jit(lambda v, t=alias: t(v))(np.arange(3)).dtype == target.dtype
        assert fnp.zeros(2, alias).dtype == target.dtype
    with pytest.raises(AttributeError, match=r"does not support the int4 dtype.*float32"):
        _ = fnp.int4
    _, jnp = jax_or_skip()
    assert fnp.bfloat16 == jnp.bfloat16 and fnp.uint8 == jnp.uint8
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        _ = fnp.no_such_name
    assert not hasattr(fnp, "uint4") and "int4" not in fnp.__all__ and "int8" in fnp.__all__
    assert fnp.ComplexWarning is np.exceptions.ComplexWarning and fnp.issubdtype(np.str_, fnp.character)


def test_promote_types_follows_jax_lattice() -> None:
    _, jnp = jax_or_skip()
    names = ["bool", "int8", "uint8", "int32", "int64", "uint32", "float16", "float32", "float64", "complex64",
             "complex128"]
    for a in names:
        for b in names:
            want = jnp.promote_types(a, b)
            assert fnp.promote_types(a, b) == want
            assert fnp.add(np.zeros(1, a), fnp.zeros(1, b)).dtype == want
    assert fnp.promote_types(fnp.float32, int) == jnp.promote_types(jnp.float32, int)
    assert fnp.promote_types("int8", "uint8") == np.int16
    with pytest.raises(TypeError, match="does not support"):
        fnp.promote_types("float128", "float32")


def test_ndarray_isinstance_covers_numpy_arrays_and_tracers() -> None:
    seen = []

    def f(x):
        seen.append(isinstance(x, fnp.ndarray))
        return x * 2

    fg.jit(f)(np.ones(3))
    fg.grad(lambda x: fnp.sum(f(x)))(np.ones(3))
    assert seen and all(seen)
    assert isinstance(np.zeros(2), fnp.ndarray)
    assert not isinstance([1.0], fnp.ndarray)
    with pytest.raises(TypeError):
        fnp.ndarray((2,))


def test_list_arguments_like_numpy() -> None:
    def f(a, b):
        return fnp.mean([a, b]) + fnp.sum(fnp.hstack([a, b])) + fnp.max(fnp.stack((a, b)))

    a, b = np.float64(1.5), np.float64(-0.5)
    want = np.mean([a, b]) + np.sum(np.hstack([a, b])) + np.max(np.stack((a, b)))
    np.testing.assert_allclose(fg.jit(f)(a, b), want)
    g = fg.grad(f, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(g, (2.5, 1.5))


# --- functional helpers ---------------------------------------------------------------------------


@settings(max_examples=6)
@given(shapes(0, 2, 1, 5), st.integers(0, 2**31 - 1))
def test_piecewise_matches_numpy(shape: tuple[int, ...], seed: int) -> None:
    x = np.random.default_rng(seed).normal(size=shape) * 2
    want = np.piecewise(x, [x < 0, x > 1], [np.sin, 0.5, lambda t: 3 * t ** 2])
    assert_same(fnp.piecewise(x, [x < 0, x > 1], [fnp.sin, 0.5, lambda t: 3 * t ** 2]), want)
    if x.ndim == 1:
        assert_same(fnp.piecewise(x, x > 0, [lambda t: -t]), np.piecewise(x, x > 0, [lambda t: -t]))
    xi = (x * 3).astype(np.int64)
    assert_same(fnp.piecewise(xi, [xi > 0], [1.7, -2.2]), np.piecewise(xi, [xi > 0], [1.7, -2.2]))


def test_piecewise_traces_and_differentiates() -> None:
    f = lambda v: fnp.piecewise(v, [v < 0, v > 1], [lambda t: t ** 3, fnp.sin, lambda t: 2 * t])
    x = np.array([-1.5, 0.3, 0.7, 2.0, -0.2])
    check_grads(f, (x,), order=2)
    check_jit_and_vmap(f, (np.stack([x, -x, x * 3]),))
    with pytest.raises(ValueError, match="functions are expected"):
        fnp.piecewise(x, [x < 0], [1, 2, 3])


def test_apply_over_axes_and_fromfunction() -> None:
    _, jnp = jax_or_skip()
    a = np.random.default_rng(0).normal(size=(2, 3, 4))
    for axes in ([0, 2], 1, (2, 0)):
        assert_same(fnp.apply_over_axes(fnp.sum, a, axes), np.apply_over_axes(np.sum, a, axes))
    assert_same(fnp.apply_over_axes(lambda v, ax: fnp.cumsum(v, ax), a, [1]), np.cumsum(a, 1))
    check_grads(lambda v: fnp.apply_over_axes(fnp.max, v, [0, 2]), (a,), order=2)
    check_jit_and_vmap(lambda v: fnp.apply_over_axes(fnp.mean, v, [1]), (a,))
    for fun, shape, dtype in ((lambda i, j: i * 10 + j, (3, 4), float), (lambda i: i ** 2, (5,), int),
                              (lambda i, j, k: i - j * k, (2, 3, 2), np.float32)):
        got = fnp.fromfunction(fun, shape, dtype=dtype)
        assert_same(got, np.fromfunction(fun, shape, dtype=dtype))
        assert_same(got, np.asarray(jnp.fromfunction(fun, shape, dtype=dtype)))
        assert got.dtype == np.fromfunction(fun, shape, dtype=dtype).dtype
    one = fnp.fromfunction(lambda i, j: 1.0, (2, 2))
    assert_same(one, np.asarray(jnp.fromfunction(lambda i, j: 1.0, (2, 2))))
    pair = fnp.fromfunction(lambda i, j: (i + j, i * j), (2, 3))
    assert_same(pair[1], np.fromfunction(lambda i, j: i * j, (2, 3)))
    check_grads(lambda c: fnp.fromfunction(lambda i, j: fnp.sin(c * i) + j, (3, 2)), (np.array(0.7),), order=2)
    assert_same(fg.jit(lambda c: fnp.fromfunction(lambda i: c * i, (4,)))(2.0), [0.0, 2.0, 4.0, 6.0])


# --- numpy's eager helpers ------------------------------------------------------------------------


def test_printing_and_files_are_numpys(tmp_path: Any) -> None:
    x = np.linspace(0, 1, 7).reshape(7, 1)
    assert fnp.array_repr(x, precision=2) == np.array_repr(x, precision=2)
    assert fnp.array_str(fnp.sin(x), suppress_small=True) == np.array_str(np.sin(x), suppress_small=True)
    with fnp.printoptions(precision=3):
        assert fnp.get_printoptions()["precision"] == 3
    assert fnp.get_printoptions()["precision"] == np.get_printoptions()["precision"]
    fnp.save(tmp_path / "a.npy", np.arange(4, dtype=np.int8))
    loaded = fnp.load(tmp_path / "a.npy")
    assert loaded.dtype == np.int8 and loaded.tolist() == [0, 1, 2, 3]
    fnp.savez(tmp_path / "b.npz", x=x)
    with fnp.load(tmp_path / "b.npz") as archive:
        assert_same(archive["x"], x)
    np.arange(5, dtype=np.uint16).tofile(tmp_path / "c.bin")
    from_file = fnp.fromfile(tmp_path / "c.bin", dtype=np.uint16)
    assert from_file.dtype == np.uint16 and from_file.tolist() == list(range(5))
    raw = fnp.frombuffer(b"\x01\x02\xff", dtype=np.uint8)
    assert raw.dtype == np.uint8 and raw.tolist() == [1, 2, 255] and isinstance(raw, fg.Array)
    assert fnp.frombuffer(np.arange(3.0).tobytes()).tolist() == [0.0, 1.0, 2.0]
    assert fnp.fromstring("1 2 3", dtype=np.int16, sep=" ").dtype == np.int16
    assert fnp.fromiter(range(4), dtype=np.float16).dtype == np.float16
    with pytest.raises(TypeError, match="does not support"):
        fnp.frombuffer(b"\x00" * 16, dtype=np.longdouble)
    assert_same(fnp.mask_indices(4, fnp.triu, 1), np.mask_indices(4, np.triu, 1))
    assert_same(fnp.mask_indices(3, fnp.tril, 0, size=8)[0], np.concatenate([np.mask_indices(3, np.tril)[0], [0, 0]]))


def test_agrees_with_jax_on_fixed_inputs() -> None:
    """A few calls (JAX compiles each): the conventions where JAX differs from numpy (always
    complex roots and matrix ``poly``, untrimmed 2-d ``trim_zeros``, -0.0's spacing aside)."""
    _, jnp = jax_or_skip()
    rng = np.random.default_rng(7)
    normal = SPECIAL_FLOATS[(SPECIAL_FLOATS != 0) & ~(np.abs(SPECIAL_FLOATS) < 2.0**-1022)]
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
        fg.tree.map(lambda g, t: assert_same(g, np.asarray(t)), ours, fg.tree.map(np.asarray, theirs))
    roots = fnp.roots(p)
    assert roots.dtype == jnp.roots(p).dtype
    assert_same(np.sort_complex(roots), np.sort_complex(np.roots(p).astype(complex)))


def test_linspace_matches_jax() -> None:
    """``linspace`` as JAX computes it: array end points, ``axis``, ``retstep``, integer dtypes,
    traced and differentiated end points, in both dtype modes (issue #32)."""
    from tests.helpers import jax_or_skip

    jax, jnp = jax_or_skip()
    cases = [((0.0, 1.0, 7), {}), ((0.0, 1.0, 7), {"endpoint": False}), ((2, 11, 4), {"dtype": np.int32}),
             ((np.array([0.0, 1.0]), np.array([[1.0], [3.0], [5.0]]), 4), {"axis": -1}),
             ((np.array([0.0, 1.0]), 2.0, 5), {"axis": 1, "retstep": True}), ((0.0, 1.0, 1), {"retstep": True}),
             ((0.0, 1.0, 0), {}), ((np.float32(-1), np.float32(3), 9), {})]
    for x64 in (True, False):
        with fg.enable_x64(x64), jax.enable_x64(x64):
            for args, kw in cases:
                got, want = fnp.linspace(*args, **kw), jnp.linspace(*args, **kw)
                for g, w in zip(got if kw.get("retstep") else [got], want if kw.get("retstep") else [want]):
                    assert np.asarray(g).dtype == np.asarray(w).dtype and np.shape(g) == np.shape(w), (args, kw)
                    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, equal_nan=True)
    loss = lambda lib, np_: lambda a, b: np_.sum(np_.sin(lib.numpy.linspace(a, b, 6)))
    g = fg.jit(fg.grad(loss(fg, fnp), argnums=(0, 1)))(0.5, 2.0)
    w = jax.grad(loss(jax, jnp), argnums=(0, 1))(0.5, 2.0)
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
