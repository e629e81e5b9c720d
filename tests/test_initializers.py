"""``fungraph.nn.initializers`` against ``jax.nn.initializers``: initializers built on uniform draws
agree bit for bit, those built on normal draws (erfinv, log) to a few ulps, orthogonal ones up to
the rounding of the two QR implementations (the sign of R's diagonal is fixed, so Q is unique).
Then the fans, jit and vmap over keys, the default dtype and the error messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
from fungraph import random as fr
from fungraph.initializers import _fans
from fungraph.nn import initializers as fi
from tests.helpers import jax_or_skip

FLOATS = (np.float32, np.float64)
# (label, shape, layout keywords for the fan-based builders)
LAYOUTS = (("dense", (5, 7), {}),
           ("conv HWIO", (3, 3, 4, 8), {}),
           ("batch_axis", (4, 5, 6), {"batch_axis": 0}),
           ("grouped axes", (2, 3, 4, 5), {"in_axis": (0, 1), "out_axis": -1, "batch_axis": ()}))

Builder = Callable[[Any, dict[str, Any]], Any]  # (module, layout keywords) -> initializer
# name -> (builder, ulps of the largest magnitude it may differ from JAX's by; 0 means bit for bit)
BUILDERS: dict[str, tuple[Builder, int]] = {
    "uniform": (lambda m, kw: m.uniform(0.7), 0),
    "normal": (lambda m, kw: m.normal(0.3), 8),
    "truncated_normal": (lambda m, kw: m.truncated_normal(0.3, lower=-1.5, upper=2.5), 16),
    "glorot_uniform": (lambda m, kw: m.glorot_uniform(**kw), 0),
    "lecun_uniform": (lambda m, kw: m.lecun_uniform(**kw), 0),
    "he_uniform": (lambda m, kw: m.he_uniform(**kw), 0),
    "fan_geo_avg uniform": (lambda m, kw: m.variance_scaling(0.4, "fan_geo_avg", "uniform", **kw), 0),
    "glorot_normal": (lambda m, kw: m.glorot_normal(**kw), 16),
    "lecun_normal": (lambda m, kw: m.lecun_normal(**kw), 16),
    "he_normal": (lambda m, kw: m.he_normal(**kw), 16),
    "fan_out normal": (lambda m, kw: m.variance_scaling(3.0, "fan_out", "normal", **kw), 8),
}
ORTHOGONAL = (((5, 3), -1), ((3, 5), -1), ((4, 4), 1), ((2, 3, 4), -1), ((2, 3, 4), 0))
DELTA = ((3, 4, 4), (3, 2, 2, 5), (2, 3, 3, 3, 3))
N_KEYS = 5

Sample = Callable[[Any, Any], Any]  # (initializers module, key) -> array


def _cases() -> dict[str, Sample]:
    """Every comparison with JAX, by label; each builder sees every layout, half in float32 and
    half in float64. JAX computes them all in one jit (compiling each eagerly costs seconds)."""
    cases: dict[str, Sample] = {}
    for j, (name, (build, _)) in enumerate(BUILDERS.items()):
        for i, (label, shape, kw) in enumerate(LAYOUTS):
            dtype = FLOATS[(i + j) % 2]
            cases[f"{name} {label} {shape} {dtype.__name__}"] = (
                lambda m, k, b=build, i=i, kw=kw, s=shape, d=dtype: b(m, kw)(k[i], s, d))
    for dist in ("uniform", "normal", "truncated_normal"):
        for dtype in (np.complex64, np.complex128):
            cases[f"complex {dist} {dtype.__name__}"] = (
                lambda m, k, dist=dist, d=dtype: m.variance_scaling(2.0, "fan_avg", dist)(k[0], (6, 9), d))
    for dtype in (np.float32, np.float64, np.complex64):
        for i, (shape, axis) in enumerate(ORTHOGONAL):
            cases[f"orthogonal {shape} {axis} {dtype.__name__}"] = (
                lambda m, k, i=i, s=shape, a=axis, d=dtype: m.orthogonal(1.5, column_axis=a)(k[i], s, d))
    for i, shape in enumerate(DELTA):
        cases[f"delta_orthogonal {shape}"] = lambda m, k, i=i, s=shape: m.delta_orthogonal(0.5)(k[i], s, np.float64)
    for dtype in (np.float32, np.float64, np.complex64, np.int32):
        for name in ("zeros", "ones"):
            cases[f"{name} {dtype.__name__}"] = lambda m, k, n=name, d=dtype: getattr(m, n)(k[0], (2, 3), d)
    cases["constant -7"] = lambda m, k: m.constant(-7)(k[0], (2, 3), np.float32)
    cases["constant row broadcast"] = lambda m, k: m.constant(np.arange(3.0), np.float64)(k[0], (2, 3))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def results() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """label -> (ours, JAX's) for every case. JAX's jit is compiled with LLVM at -O0, a third of
    the compilation time; its values are the same bits as at the default level and as eager
    calls for the uniform-based cases, and as close for the others (checked when writing this)."""
    jax, _ = jax_or_skip()
    jax_keys = jax.random.split(jax.random.PRNGKey(0), N_KEYS)
    keys = fr.split(fr.PRNGKey(0), N_KEYS)
    reference = jax.jit(lambda k: {label: sample(jax.nn.initializers, k) for label, sample in CASES.items()})
    want = reference.lower(jax_keys).compile({"xla_backend_optimization_level": 0})(jax_keys)
    return {label: (np.asarray(sample(fi, keys)), np.asarray(want[label])) for label, sample in CASES.items()}


def _close(got: Any, want: Any, ulps: int, what: str) -> None:
    """Bitwise equal for ``ulps == 0``, else within ``ulps`` ulps of the largest magnitude."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {got.dtype}{got.shape} vs {want.dtype}"
    if ulps == 0:
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    eps = np.finfo(got.dtype).eps * ulps
    np.testing.assert_allclose(got, want, rtol=eps, atol=eps * np.abs(want).max(initial=1e-30), err_msg=what)


@pytest.mark.parametrize("name", list(BUILDERS))
def test_matches_jax_on_dense_conv_and_batched_shapes(name: str, results: dict) -> None:
    ulps = BUILDERS[name][1]
    labels = [label for label in results if label.startswith(f"{name} ")]
    assert len(labels) == len(LAYOUTS)
    for label in labels:
        _close(*results[label], ulps, label)


def test_complex_variance_scaling_matches_jax(results: dict) -> None:
    for label, (got, want) in results.items():
        if label.startswith("complex "):
            _close(got, want, 16, label)


def test_orthogonal_is_orthogonal_and_matches_jax(results: dict) -> None:
    """LAPACK's QR (numpy) and XLA's differ in rounding, not in signs: R's diagonal is made
    positive, which fixes Q, so the values agree to a few ulps but not bit for bit."""
    for dtype in (np.float32, np.float64, np.complex64):
        for shape, axis in ORTHOGONAL:
            label = f"orthogonal {shape} {axis} {dtype.__name__}"
            got, want = results[label]
            assert got.shape == shape
            _close(got, want, 32, label)
            m = np.moveaxis(got, axis, -1).reshape(-1, shape[axis]).astype(np.complex128)
            gram = m.conj().T @ m if m.shape[0] >= m.shape[1] else m @ m.conj().T
            tol = 64 * np.finfo(dtype).eps
            np.testing.assert_allclose(gram, 2.25 * np.eye(len(gram)), atol=tol, err_msg=f"gram of {label}")


def test_delta_orthogonal_matches_jax(results: dict) -> None:
    for shape in DELTA:
        got, want = results[f"delta_orthogonal {shape}"]
        _close(got, want, 32, f"delta_orthogonal {shape}")
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        assert np.count_nonzero(got) == np.count_nonzero(got[centre])
        np.testing.assert_allclose(got[centre] @ got[centre].T, 0.25 * np.eye(shape[-2]), atol=1e-12)


def test_constants_match_jax(results: dict) -> None:
    for label, (got, want) in results.items():
        if label.startswith(("zeros ", "ones ", "constant ")):
            _close(got, want, 0, label)


def test_fans_use_the_receptive_field() -> None:
    assert _fans((5, 7), -2, -1, ()) == (5.0, 7.0)
    assert _fans((3, 3, 4, 8), -2, -1, ()) == (36.0, 72.0)
    assert _fans((4, 5, 6), -2, -1, 0) == (5.0, 6.0)
    assert _fans((2, 3, 4, 5), (0, 1), -1, ()) == (24.0, 20.0)


def test_variance_reaches_its_target() -> None:
    key = fr.PRNGKey(0)
    shape = (3, 3, 64, 128)
    target = 2.0 / (9 * 64)
    for distribution in ("uniform", "normal", "truncated_normal"):
        w = np.asarray(fi.variance_scaling(2.0, "fan_in", distribution)(key, shape, np.float64))
        assert abs(w.var() / target - 1) < 0.03, distribution
    assert np.abs(fi.he_uniform()(key, shape)).max() <= np.sqrt(3 * target)


def test_default_dtype_is_the_modes_default_float_as_jaxs() -> None:
    """Without a dtype, each initializer gives ``dtypes.default_float()``, JAX's dtype in the same
    mode (the suite runs JAX with x64, fungraph's one mode)."""
    from fungraph import dtypes

    jax, _ = jax_or_skip()
    key = fr.PRNGKey(1)
    names = [("zeros", None), ("ones", None), ("constant", (2,)), ("uniform", ()), ("normal", ()),
             ("truncated_normal", ()), ("glorot_uniform", ()), ("he_normal", ()), ("orthogonal", ()),
             ("delta_orthogonal", ())]
    for name, build in names:
        init = getattr(fi, name) if build is None else getattr(fi, name)(*build)
        theirs = getattr(jax.nn.initializers, name)
        theirs = theirs if build is None else theirs(*build)
        assert isinstance(init, fi.Initializer)
        got = np.asarray(init(key, (3, 3, 3))).dtype
        assert got == dtypes.default_float() == np.asarray(theirs(jax.random.PRNGKey(1), (3, 3, 3))).dtype, name
    assert np.asarray(fi.lecun_normal(dtype=np.float64)(key, (2, 3))).dtype == np.float64
    assert fi.xavier_uniform is fi.glorot_uniform and fi.kaiming_normal is fi.he_normal
    assert fg.nn.initializers.glorot_normal is fi.glorot_normal


def test_empty_shapes_give_empty_arrays() -> None:
    key = fr.PRNGKey(0)
    assert np.asarray(fi.glorot_uniform()(key, (0, 5))).shape == (0, 5)
    assert np.asarray(fi.orthogonal()(key, (4, 0))).shape == (4, 0)
    assert np.asarray(fi.he_normal()(key, (3, 0, 2, 4))).shape == (3, 0, 2, 4)


TRACEABLE: dict[str, Callable[[Any], Any]] = {
    "uniform": lambda k: fi.uniform(2.0)(k, (3, 4)),
    "glorot_uniform": lambda k: fi.glorot_uniform()(k, (3, 3, 2, 4), np.float64),
    "he_normal": lambda k: fi.he_normal(batch_axis=0)(k, (2, 3, 4)),
    "normal complex": lambda k: fi.variance_scaling(1.0, "fan_in", "normal")(k, (2, 3), np.complex64),
    "orthogonal": lambda k: fi.orthogonal()(k, (4, 3), np.float64),
    "delta_orthogonal": lambda k: fi.delta_orthogonal()(k, (3, 2, 3)),
}


@pytest.mark.parametrize("name", list(TRACEABLE))
def test_jit_with_a_traced_key_and_vmap_over_keys_match_eager(name: str) -> None:
    f = TRACEABLE[name]
    keys = fr.split(fr.PRNGKey(3), 3)
    eager = np.stack([np.asarray(f(k)) for k in keys])
    np.testing.assert_array_equal(fg.jit(f)(keys[1]), eager[1], err_msg=f"jit({name})")
    np.testing.assert_array_equal(fg.vmap(f)(keys), eager, err_msg=f"vmap({name})")


KEY = fr.PRNGKey(0)
ERRORS: list[tuple[Callable[[], Any], type, str]] = [
    (lambda: fi.glorot_uniform()(KEY, (5,)), ValueError, r"1-D shape \(5,\) with the default in_axis"),
    (lambda: fi.variance_scaling(1.0, "fan_sum", "normal"), ValueError, "mode must be one of .*'fan_sum'"),
    (lambda: fi.variance_scaling(1.0, "fan_in", "cauchy"), ValueError, "distribution must be one of .*'cauchy'"),
    (lambda: fi.he_normal(in_axis=3)(KEY, (2, 3)), ValueError, r"in_axis=3 is out of range .*\(2, 3\)"),
    (lambda: fi.lecun_normal(out_axis=(0, 5))(KEY, (2, 3)), ValueError, r"out_axis=5 is out of range"),
    (lambda: fi.glorot_normal(batch_axis="0")(KEY, (2, 3)), TypeError, "batch_axis must be an int"),
    (lambda: fi.lecun_normal(dtype=np.int32)(KEY, (2, 3)), TypeError, "dtype must be a float or complex dtype"),
    (lambda: fi.uniform()(KEY, (2,), np.complex64), TypeError, "uniform: dtype must be float32 or float64"),
    (lambda: fi.orthogonal()(KEY, (4,)), ValueError, r"orthogonal: shape \(4,\) has 1 dimensions"),
    (lambda: fi.orthogonal(column_axis=2)(KEY, (3, 4)), ValueError, "column_axis=2 is out of range"),
    (lambda: fi.delta_orthogonal()(KEY, (3, 3)), ValueError, r"shape \(3, 3\) has 2 dimensions; it needs 3, 4 or 5"),
    (lambda: fi.delta_orthogonal()(KEY, (3, 3, 5, 4)), ValueError, r"more input channels \(5\) than output"),
    (lambda: fi.zeros(KEY, (-1, 2)), ValueError, "zeros: shape must hold non-negative ints"),
    (lambda: fi.normal()(KEY, None), TypeError, "normal: shape must be a sequence of ints"),
]


@pytest.mark.parametrize(("call", "error", "match"), ERRORS)
def test_errors_name_the_argument_and_shape(call: Callable[[], Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        call()
