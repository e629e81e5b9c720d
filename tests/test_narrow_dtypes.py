"""Narrow dtypes kept as JAX keeps them (uint8/16/32/64, int8/16, float16, bfloat16 and the
float8 family from ml_dtypes) and JAX's promotion lattice, in both dtype modes, against JAX."""

import itertools
import warnings

import ml_dtypes
import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import dtypes
from fungraph.jit import BackendFallbackWarning
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

NARROW = ["uint8", "uint16", "uint32", "int8", "int16", "float16", "bfloat16"]
ALL = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bfloat16", "float16",
       "float32", "float64", "complex64", "complex128", *dtypes.FLOAT8]


def _np_dtype(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)


def _jax_promote(a: str, b: str) -> np.dtype | None:
    try:
        return np.dtype(jnp.promote_types(_np_dtype(a), _np_dtype(b)))
    except Exception:  # noqa: BLE001 - JAX's TypePromotionError: no common type
        return None


def _fg_promote(a: str, b: str) -> np.dtype | None:
    try:
        return fnp.promote_types(_np_dtype(a), _np_dtype(b))
    except TypeError:
        return None


@pytest.mark.parametrize("x64", [True, False])
def test_promote_types_matches_jax_on_every_pair(x64: bool) -> None:
    """jnp.promote_types on all pairs of dtypes, in each mode (JAX's lattice, 64-bit results
    truncated with x64 off)."""
    pairs = list(itertools.product(ALL, ALL))
    with jax.enable_x64(x64):
        want = [_jax_promote(a, b) for a, b in pairs]
    with fg.enable_x64(x64):
        got = [_fg_promote(a, b) for a, b in pairs]
    wrong = [(p, g, w) for p, g, w in zip(pairs, got, want) if g != w]
    assert not wrong, wrong[:10]


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("scalar", [True, 3, 2.5, 1j])
def test_python_scalars_are_weak_against_every_dtype(x64: bool, scalar: object) -> None:
    names = [n for n in ALL if n not in dtypes.FLOAT8 and (x64 or n not in ("int64", "uint64", "float64",
                                                                                  "complex128"))]
    with jax.enable_x64(x64):
        want = [np.dtype(jnp.result_type(jnp.zeros(2, _np_dtype(n)), scalar)) for n in names]
    with fg.enable_x64(x64):
        got = [fnp.result_type(np.zeros(2, _np_dtype(n)), scalar) for n in names]
        added = [(np.zeros(2, _np_dtype(n)) if n != "bool" else np.zeros(2, bool)) for n in names]
        op_dtypes = [fnp.add(a, scalar).dtype for a in added]
    assert got == want, list(zip(names, got, want))
    assert op_dtypes == want, list(zip(names, op_dtypes, want))


def test_uint8_wraps_under_jit_as_jax() -> None:
    v = np.uint8([0, 100, 200])
    got = fg.jit(lambda v: v * 2)(v)
    want = jax.jit(lambda v: v * 2)(v)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(got), [0, 200, 144])


def test_eager_float16_stays_float16() -> None:
    x = np.array([0.5, 1.5, 3.0], np.float16)
    for f in (lambda x: x * 2, fnp.sin, fnp.exp, lambda x: fnp.sum(x), lambda x: x + 1.0):
        assert f(x).dtype == np.float16
        assert f(fnp.asarray(x)).dtype == np.float16


OPS = {
    "add": lambda x, y: x + y,
    "mul": lambda x, y: x * y,
    "sub": lambda x, y: x - y,
    "max": lambda x, y: fnp.maximum(x, y),
    "neg_abs": lambda x, y: abs(-x),
    "sum": lambda x, y: fnp.sum(x * y, axis=0),
    "where": lambda x, y: fnp.where(x > y, x, y),
    "scalar": lambda x, y: x * 3 + 1,
}
JOPS = {
    "add": lambda x, y: x + y,
    "mul": lambda x, y: x * y,
    "sub": lambda x, y: x - y,
    "max": lambda x, y: jnp.maximum(x, y),
    "neg_abs": lambda x, y: abs(-x),
    "sum": lambda x, y: jnp.sum(x * y, axis=0),
    "where": lambda x, y: jnp.where(x > y, x, y),
    "scalar": lambda x, y: x * 3 + 1,
}
FLOAT_OPS = {"sin": (fnp.sin, jnp.sin), "exp": (fnp.exp, jnp.exp), "tanh": (fnp.tanh, jnp.tanh),
             "sqrt": (fnp.sqrt, jnp.sqrt), "log1p": (fnp.log1p, jnp.log1p)}


def _inputs(name: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    d = _np_dtype(name)
    if dtypes.is_float(d):
        return (rng.uniform(0.1, 4, (3, 4)).astype(d), rng.uniform(0.1, 4, (3, 4)).astype(d))
    info = np.iinfo(d)
    hi = min(int(info.max), 1000)
    lo = max(int(info.min), -1000)
    return rng.integers(lo, hi, (3, 4)).astype(d), rng.integers(lo, hi, (3, 4)).astype(d)


def _close(got: object, want: object, name: str) -> None:
    got_np, want_np = np.asarray(got), np.asarray(want)
    assert got_np.dtype == want_np.dtype, (got_np.dtype, want_np.dtype)
    if dtypes.is_float(got_np.dtype):
        tol = 1e-2 if name == "bfloat16" else 2e-3
        np.testing.assert_allclose(got_np.astype(np.float32), want_np.astype(np.float32), rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got_np, want_np)


@pytest.mark.parametrize("name", NARROW)
@pytest.mark.parametrize("op", sorted(OPS))
def test_narrow_ops_eager_and_jit_match_jax(name: str, op: str) -> None:
    x, y = _inputs(name)
    want = JOPS[op](jnp.asarray(x), jnp.asarray(y))
    _close(OPS[op](x, y), want, name)
    _close(fg.jit(OPS[op])(x, y), want, name)


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("op", sorted(FLOAT_OPS))
def test_narrow_float_functions_match_jax(name: str, op: str) -> None:
    x, _ = _inputs(name)
    f, jf = FLOAT_OPS[op]
    want = np.asarray(jf(jnp.asarray(x)))
    for got in (f(x), fg.jit(f)(x)):
        got = np.asarray(got)
        assert got.dtype == want.dtype
        tol = 0.13 if name.startswith("float8") else 1e-2
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_narrow_float_gradients_keep_dtype(name: str) -> None:
    x, _ = _inputs(name)
    f = lambda x: fnp.sum(fnp.sin(x) * x)  # noqa: E731
    jf = lambda x: jnp.sum(jnp.sin(x) * x)  # noqa: E731
    want = jax.grad(jf)(jnp.asarray(x))
    _close(fg.grad(f)(x), want, name)
    _close(fg.jit(fg.grad(f))(x), want, name)


def test_bfloat16_and_float8_names_import_and_are_dtypes() -> None:
    assert fnp.bfloat16 == jnp.bfloat16
    assert fnp.zeros(3, fnp.bfloat16).dtype == jnp.zeros(3, jnp.bfloat16).dtype
    assert fnp.bfloat16(1.5).dtype == np.dtype(ml_dtypes.bfloat16)
    for name in dtypes.FLOAT8:
        assert getattr(fnp, name) == getattr(jnp, name)
    assert fnp.ones(2, "bfloat16").dtype == fnp.bfloat16
    assert fnp.finfo(fnp.bfloat16).eps == jnp.finfo(jnp.bfloat16).eps


@pytest.mark.parametrize("name", ["uint8", "int16", "float16", "bfloat16"])
def test_casts_between_narrow_dtypes_match_jax(name: str) -> None:
    x = np.array([-3.7, -0.5, 0.0, 1.25, 200.5, 70000.0], np.float32)
    d = _np_dtype(name)
    if dtypes.is_int(d):
        x = x[(x > np.iinfo(d).min) & (x < np.iinfo(d).max)]
    want = np.asarray(jnp.asarray(x).astype(d))
    np.testing.assert_array_equal(np.asarray(fnp.asarray(x).astype(d)), want)
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda v: v.astype(d))(x)), want)


def test_uint64_exists_only_in_x64_mode() -> None:
    v = np.array([2**63 + 5], np.uint64)
    assert fnp.asarray(v).dtype == np.uint64
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda v: v + 1)(v)), np.asarray(jnp.asarray(v) + 1))
    with fg.enable_x64(False), jax.enable_x64(False):
        assert fnp.asarray(np.array([7], np.uint64)).dtype == jnp.asarray(np.array([7], np.uint64)).dtype


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float8_e4m3fn"])
def test_opencl_runs_narrow_dtypes_on_the_cpu_engine_with_a_reason(require_opencl: None, name: str) -> None:
    x, y = _inputs(name)
    f = lambda x, y: fnp.maximum(x * y, y) - x  # noqa: E731
    want = fg.jit(f)(x, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = fg.jit(f, backend="opencl")(x, y)
    reasons = [str(w.message) for w in caught if issubclass(w.category, BackendFallbackWarning)]
    assert reasons and name in reasons[0] and "CPU engine" in reasons[0], reasons
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_unsupported_jax_dtype_names_still_explain() -> None:
    with pytest.raises(AttributeError, match="int4"):
        fnp.int4  # noqa: B018


def test_ir_text_round_trips_narrow_dtypes() -> None:
    from fungraph.ir_text import parse

    args = (np.uint8([1, 200]), np.array([1, 2], ml_dtypes.bfloat16), np.array([1, 2], ml_dtypes.float8_e4m3fn))
    g = fg.make_graph(lambda x, y, z: (x * 2, y + 1.5, z * 2))(*args)
    text = str(g)
    assert "u8[2]" in text and "bf16[2]" in text and "f8_e4m3fn[2]" in text
    assert str(parse(text)) == text
    got = fg.eval_graph(parse(text), *args)
    want = [jnp.asarray(args[0]) * 2, jnp.asarray(args[1]) + 1.5, jnp.asarray(args[2]) * 2]
    for g_, w in zip(got, want):
        assert g_.dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g_).astype(np.float32), np.asarray(w).astype(np.float32))


def test_opencl_fallback_takes_device_arrays_of_narrow_dtypes(require_opencl: None) -> None:
    tree = fg.device_put({"a": np.arange(3, dtype=np.float32), "b": np.float16(1.5)}, "opencl")
    assert tree["b"].aval.dtype == np.float16
    with pytest.warns(BackendFallbackWarning, match="float16"):
        got = fg.jit(lambda t: t["a"] * 2.0 + t["b"], backend="opencl")(tree)
    want = jnp.arange(3, dtype=jnp.float32) * 2.0 + jnp.float16(1.5)
    assert np.asarray(got).dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
