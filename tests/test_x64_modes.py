"""JAX's dtype modes: ``jax_enable_x64`` both ways (config, ``JAX_ENABLE_X64``, per-thread
contexts) and fungraph's 32-bit behaviour against JAX's with x64 off."""

import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
import fungraph.random as fr
from fungraph import dtypes
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fresh_mode(env_value: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    if env_value is not None:
        env["JAX_ENABLE_X64"] = env_value
    code = ("import fungraph, fungraph.numpy as fnp; "
            "print(fungraph.config.jax_enable_x64, fnp.zeros(1).dtype, fnp.arange(2).dtype)")
    return subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": ROOT}, capture_output=True,
                          text=True, timeout=120)


def test_default_mode_is_jax_default_and_the_environment_variable_sets_it() -> None:
    assert _fresh_mode(None).stdout.split() == ["False", "float32", "int32"]
    assert _fresh_mode("1").stdout.split() == ["True", "float64", "int64"]
    assert _fresh_mode("false").stdout.split() == ["False", "float32", "int32"]
    bad = _fresh_mode("maybe")
    assert bad.returncode != 0 and "JAX_ENABLE_X64" in bad.stderr


def test_config_update_both_ways() -> None:
    try:
        fg.config.update("jax_enable_x64", False)
        assert fg.config.jax_enable_x64 is False
        assert fnp.zeros(2).dtype == np.float32 and dtypes.default_float() == np.float32
        fg.config.update("jax_enable_x64", True)
        assert fg.config.jax_enable_x64 is True
        assert fnp.zeros(2).dtype == np.float64 and dtypes.default_float() == np.float64
    finally:
        fg.config.update("jax_enable_x64", True)


def test_contexts_are_per_thread_and_restore() -> None:
    seen = {}
    inside = threading.Event()
    release = threading.Event()

    def other() -> None:
        inside.wait(10)
        seen["other"] = (fg.config.jax_enable_x64, fnp.zeros(1).dtype)
        release.set()

    t = threading.Thread(target=other)
    t.start()
    with fg.disable_x64():
        assert fnp.zeros(1).dtype == np.float32
        with fg.enable_x64():
            assert fnp.zeros(1).dtype == np.float64
        assert fnp.zeros(1).dtype == np.float32
        inside.set()
        release.wait(10)
    t.join(10)
    assert seen["other"] == (True, np.float64)
    assert fnp.zeros(1).dtype == np.float64


CASES = {
    "zeros": lambda m: m.zeros(3),
    "ones_int": lambda m: m.ones(2, int),
    "arange_int": lambda m: m.arange(5),
    "arange_float": lambda m: m.arange(0.0, 1.0, 0.25),
    "linspace": lambda m: m.linspace(0, 1, 5),
    "asarray_float": lambda m: m.asarray(1.5),
    "asarray_list": lambda m: m.asarray([1, 2]),
    "numpy_float64": lambda m: m.asarray(np.ones(2)),
    "numpy_int64": lambda m: m.asarray(np.arange(3)),
    "sum_int": lambda m: m.sum(m.arange(5)),
    "mean_int": lambda m: m.mean(m.arange(5)),
    "sin_int": lambda m: m.sin(m.arange(3)),
    "var": lambda m: m.var(m.arange(4.0)),
    "argmax": lambda m: m.argmax(m.arange(3.0)),
    "cumsum_int": lambda m: m.cumsum(m.arange(3)),
    "eye": lambda m: m.eye(2),
    "full_int": lambda m: m.full(2, 3),
    "where_mixed": lambda m: m.where(m.asarray([True, False]), 1.0, 2),
    "int_times_float_scalar": lambda m: m.multiply(m.arange(3), 1.5),
    "float32_plus_int64": lambda m: m.add(m.ones(2, m.float32), m.asarray(np.arange(2))),
    "matmul": lambda m: m.ones((2, 2)) @ m.ones(2),
    "fft": lambda m: m.fft.fft(m.ones(4)),
    "power_scalar": lambda m: m.power(m.asarray(2.0), 0.5),
}


def _both(case: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    f = CASES[case]
    with fg.disable_x64():
        eager = np.asarray(f(fnp))
        staged = np.asarray(fg.jit(lambda: f(fnp))())
    with jax.enable_x64(False):
        want = np.asarray(f(jnp))
    return eager, staged, want


@pytest.mark.parametrize("case", sorted(CASES))
def test_32_bit_results_match_jax(case: str) -> None:
    eager, staged, want = _both(case)
    for got in (eager, staged):
        assert got.dtype == want.dtype, (case, got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("request_64", [
    ("zeros", lambda m: m.zeros(2, m.float64)),
    ("ones", lambda m: m.ones(2, "float64")),
    ("asarray", lambda m: m.asarray([1.0], m.float64)),
    ("arange", lambda m: m.arange(3, dtype=m.int64)),
    ("linspace", lambda m: m.linspace(0, 1, 3, dtype=m.float64)),
    ("full", lambda m: m.full(2, 1.0, m.float64)),
    ("eye", lambda m: m.eye(2, dtype=m.float64)),
], ids=lambda c: c[0])
def test_64_bit_requests_are_truncated_with_jax_warning(request_64: tuple) -> None:
    _, f = request_64

    def run(m: object, ctx: object) -> tuple[np.dtype, list[str]]:
        with warnings.catch_warnings(record=True) as caught, ctx:
            warnings.simplefilter("always")
            out = f(m)
        return np.asarray(out).dtype, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]

    got, got_msgs = run(fnp, fg.disable_x64())
    want, want_msgs = run(jnp, jax.enable_x64(False))
    assert got == want
    assert got_msgs and want_msgs and got_msgs[0] == want_msgs[0], (got_msgs, want_msgs)


def test_internal_64_bit_constants_do_not_warn() -> None:
    with fg.disable_x64(), warnings.catch_warnings():
        warnings.simplefilter("error")
        fnp.histogram(fnp.arange(10.0), bins=3)
        fnp.unique(fnp.asarray([3, 1, 3]))


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_python_scalar_jit_arguments_are_weak(x64: bool, dtype: type) -> None:
    f = lambda x, lr: x - lr * x  # noqa: E731
    with fg.enable_x64(x64):
        got = fg.jit(f)(dtype([1.0]), 0.1)
        got_int = fg.jit(lambda x, n: x * n)(dtype([1.0]), 3)
    with jax.enable_x64(x64):
        want = jax.jit(f)(dtype([1.0]), 0.1)
        want_int = jax.jit(lambda x, n: x * n)(dtype([1.0]), 3)
    assert np.asarray(got).dtype == want.dtype and np.asarray(got_int).dtype == want_int.dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-3)


def test_jitted_function_retraces_per_mode_and_canonicalizes_arguments_and_constants() -> None:
    table = np.arange(3.0)
    f = fg.jit(lambda x: x * 2 + table)
    assert f(np.ones(3)).dtype == np.float64
    with fg.disable_x64():
        assert f(np.ones(3)).dtype == np.float32
        assert fg.jit(lambda x: x + np.ones(2))(np.ones(2, np.float32)).dtype == np.float32
    assert f(np.ones(3)).dtype == np.float64


RANDOM = {
    "key": lambda r, k: k,
    "negative_seed": lambda r, k: r.PRNGKey(-1),
    "big_seed": lambda r, k: r.PRNGKey(2**33 + 5),
    "split": lambda r, k: r.split(k, 3),
    "fold_in": lambda r, k: r.fold_in(k, 7),
    "bits": lambda r, k: r.bits(k, (4,)),
    "uniform": lambda r, k: r.uniform(k, (5,)),
    "uniform_range": lambda r, k: r.uniform(k, (5,), minval=-2.0, maxval=3.0),
    "randint": lambda r, k: r.randint(k, (5,), 0, 10),
    "randint_uint8": lambda r, k: r.randint(k, (5,), 0, 256, np.uint8),
    "randint_int16": lambda r, k: r.randint(k, (5,), -300, 7000, np.int16),
    "randint_uint32": lambda r, k: r.randint(k, (5,), 9, 2**31 - 1, np.uint32),
    "bernoulli": lambda r, k: r.bernoulli(k, 0.3, (6,)),
    "permutation": lambda r, k: r.permutation(k, 6),
    "choice": lambda r, k: r.choice(k, 10, (5,)),
    "choice_of_an_array": lambda r, k: r.choice(k, (jnp if r is jax.random else fnp).arange(7.0), (3, 2)),
    "choice_without_replacement": lambda r, k: r.choice(k, 10, (4,), replace=False),
    "categorical": lambda r, k: r.categorical(k, (jnp if r is jax.random else fnp).zeros(3), shape=(4,)),
}
RANDOM_CLOSE = {
    "normal": lambda r, k: r.normal(k, (5,)),
    "gumbel": lambda r, k: r.gumbel(k, (4,)),
    "exponential": lambda r, k: r.exponential(k, (4,)),
    "gamma": lambda r, k: r.gamma(k, 2.0, (3,)),
    "beta": lambda r, k: r.beta(k, 2.0, 3.0, (3,)),
    "truncated_normal": lambda r, k: r.truncated_normal(k, -1.0, 1.0, (3,)),
}


def _draw(sample: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with fg.disable_x64():
        got = np.asarray(sample(fr, fr.PRNGKey(42)))
        staged = np.asarray(fg.jit(lambda k: sample(fr, k))(fr.PRNGKey(42)))
    with jax.enable_x64(False):
        want = np.asarray(sample(jax.random, jax.random.PRNGKey(42)))
    return got, staged, want


@pytest.mark.parametrize("name", sorted(RANDOM))
def test_random_bits_match_jax_32_bit_mode_exactly(name: str) -> None:
    got, staged, want = _draw(RANDOM[name])
    for g in (got, staged):
        assert g.dtype == want.dtype, (g.dtype, want.dtype)
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("name", sorted(RANDOM_CLOSE))
def test_random_samplers_match_jax_32_bit_mode(name: str) -> None:
    got, staged, want = _draw(RANDOM_CLOSE[name])
    for g in (got, staged):
        assert g.dtype == want.dtype == np.float32
        np.testing.assert_allclose(g, want, rtol=2e-6, atol=2e-6)


def test_initializer_default_dtype_follows_the_mode() -> None:
    with fg.disable_x64():
        assert dtypes.default_float() == np.float32 and dtypes.default_int() == np.int32
    assert dtypes.default_float() == np.float64 and dtypes.default_int() == np.int64
