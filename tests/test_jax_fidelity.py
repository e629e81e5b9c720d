"""Small points where fungraph follows JAX 0.10 rather than numpy or a plainer rule (issue #32):
the derivative of ``abs`` at 0, ``nn.celu``'s derivatives at its kink, bitwise ``reduce_and``/
``reduce_or`` of integers, ``lax``'s refusal of dtypes it does not take, and JAX's functions
taking fungraph arrays. Each compared with JAX in both dtype modes."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax as flax
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
jlax = jax.lax

MODES = ["x64", "x32"]


def _in_mode(mode: str) -> Any:
    """Both libraries in one dtype mode (fungraph's per thread, JAX's per context)."""
    class Both:
        def __enter__(self) -> None:
            self.contexts = [fg.enable_x64(mode == "x64"), jax.enable_x64(mode == "x64")]
            for c in self.contexts:
                c.__enter__()

        def __exit__(self, *exc: Any) -> None:
            for c in reversed(self.contexts):
                c.__exit__(*exc)

    return Both()


def _same(got: Any, want: Any) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("mode", MODES)
def test_derivative_of_abs_is_one_at_zero_as_jaxs(mode: str) -> None:
    xs = np.array([-2.0, -0.0, 0.0, 3.0])
    with _in_mode(mode):
        for x in xs:
            _same(fg.grad(abs)(float(x)), jax.grad(abs)(float(x)))
            _same(fg.grad(fnp.abs)(x), jax.grad(jnp.abs)(x))
        _same(fg.vmap(fg.grad(fnp.abs))(xs), jax.vmap(jax.grad(jnp.abs))(xs))
        _same(fg.jit(fg.grad(lambda v: fnp.abs(v).sum()))(xs), jax.grad(lambda v: jnp.abs(v).sum())(xs))
        _same(fg.grad(fg.grad(fnp.abs))(0.0), jax.grad(jax.grad(jnp.abs))(0.0))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("alpha", [1.0, 2.0, 0.5])
def test_celu_derivatives_at_its_kink_match_jax(alpha: float, mode: str) -> None:
    """JAX writes celu with ``maximum``/``minimum``, whose ties split the derivative in half."""
    with _in_mode(mode):
        ours = lambda x: fg.nn.celu(x, alpha)        # noqa: E731
        theirs = lambda x: jax.nn.celu(x, alpha)     # noqa: E731
        for x in (-1.5, 0.0, 2.0):
            _same(ours(x), theirs(x))
            _same(fg.grad(ours)(x), jax.grad(theirs)(x))
            _same(fg.grad(fg.grad(ours))(x), jax.grad(jax.grad(theirs))(x))
        _same(fg.grad(ours)(60.0), jax.grad(theirs)(60.0))          # no overflow in the unused branch
        _same(fg.grad(ours)(-60.0), jax.grad(theirs)(-60.0))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "uint32", "int64"])
def test_bitwise_reductions_of_integers_match_jax(dtype: str, mode: str) -> None:
    """``reduce_and``/``reduce_or`` of integers are bitwise, as JAX's (not truth values)."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, 2, (3, 4)).astype(dtype) if dtype == "bool" else rng.integers(-100, 100, (3, 4)).astype(dtype)
    with _in_mode(mode):
        for name in ("reduce_and", "reduce_or", "reduce_xor"):
            for axes in ((0,), (1,), (0, 1), ()):
                _same(getattr(flax, name)(x, axes), getattr(jlax, name)(x, axes))
            _same(fg.jit(lambda v: getattr(flax, name)(v, (1,)))(x), getattr(jlax, name)(x, (1,)))
            _same(getattr(flax, name)(x[:0], (0,)), getattr(jlax, name)(x[:0], (0,)))
            with pytest.raises(TypeError):
                getattr(jlax, name)(x.astype(np.float32), (0,))
            with pytest.raises(TypeError, match="bool or int"):
                getattr(flax, name)(x.astype(np.float32), (0,))


SAMPLES = {"bool": np.array([True, False]), "int32": np.array([1, 2], np.int32),
           "uint32": np.array([1, 2], np.uint32), "float32": np.array([0.5, 0.25], np.float32),
           "complex64": np.array([0.5, 0.25j], np.complex64)}


def _elementwise_names() -> list[str]:
    """lax's public functions of one or two array operands (``x``, ``y``, ``operand``)."""
    names = []
    for n in sorted(set(dir(flax)) & set(dir(jlax))):
        if n.startswith("_") or not callable(getattr(jlax, n)):
            continue
        try:
            sig = inspect.signature(getattr(jlax, n))
        except (TypeError, ValueError):
            continue
        required = [p for p in sig.parameters.values()
                    if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(required) in (1, 2) and all(p.name in ("x", "y", "operand") for p in required):
            names.append(n)
    return names


def _outcome(fn: Any, args: tuple) -> str:
    try:
        return str(np.asarray(fn(*args)).dtype)
    except TypeError:
        return "TypeError"
    except Exception as err:            # JAX's own failures (cumlogsumexp of integers overflows)
        return f"failed: {type(err).__name__}"


@pytest.mark.parametrize("dtype", sorted(SAMPLES))
def test_lax_functions_take_and_refuse_the_dtypes_jax_does(dtype: str) -> None:
    """``lax.sin`` of int32 is JAX's ``TypeError`` (numpy's sin would promote it); where JAX
    takes the dtype, the result's dtype is JAX's."""
    names = _elementwise_names()
    assert {"sin", "add", "abs", "erf", "pow", "cumsum", "round", "is_finite"} <= set(names)
    arrays = SAMPLES[dtype]
    for n in names:
        arity = 2 if n in {"add", "sub", "mul", "div", "rem", "pow", "atan2", "max", "min", "eq", "ne", "lt", "le",
                           "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left",
                           "shift_right_arithmetic", "shift_right_logical", "complex", "nextafter"} else 1
        if len(inspect.signature(getattr(jlax, n)).parameters) < arity:
            continue
        args = (arrays,) * arity
        want = _outcome(getattr(jlax, n), args)
        if want.startswith("failed"):
            continue
        assert _outcome(getattr(flax, n), args) == want, n
    with pytest.raises(TypeError, match="sin does not accept dtype int32. Accepted dtypes are subtypes of floating, "
                                        "complexfloating"):
        flax.sin(SAMPLES["int32"])
    with pytest.raises(TypeError, match="add does not accept dtype bool at position 0"):
        flax.add(SAMPLES["bool"], SAMPLES["bool"])


def test_jax_functions_take_fungraph_arrays_as_numpy_arrays() -> None:
    """JAX reads ``sharding`` of every argument; a fungraph result offers JAX none, so JAX takes
    it as the numpy array it is (before: an AttributeError inside JAX's dispatch)."""
    f = fnp.arange(3.0)
    j = jnp.arange(3.0)
    want = np.arange(3.0)
    cases = [(lambda: j + f, want * 2), (lambda: j * f, want ** 2), (lambda: jnp.sin(f), np.sin(want)),
             (lambda: jax.jit(lambda v: v * 2)(f), want * 2), (lambda: jax.grad(lambda v: (v ** 2).sum())(f), 2 * want),
             (lambda: jax.vmap(jnp.cos)(f), np.cos(want)), (lambda: j[fnp.array([2, 0])], want[[2, 0]])]
    for run, expected in cases:
        out = run()
        assert isinstance(out, jax.Array)
        np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-12)
    assert isinstance(f + j, fg.Array)                 # numpy's operation on the left, as before
    assert f.sharding.device_set == {f.device} and f.sharding.is_fully_replicated


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("y", [3, 4, 5, 7, -1, -3])
def test_integer_pow_multiplies_as_xla_does(dtype: Any, y: int) -> None:
    """Repeated squaring, bit for bit as JAX's for real floats, eagerly and under jit (numpy's
    ``power`` of a negative float base rounds differently and is ~35x slower); complex products
    round as numpy's, not XLA's, so those agree to a few ulp."""
    rng = np.random.default_rng(y + 10)
    x = rng.standard_normal(257).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = (x + 1j * rng.standard_normal(257)).astype(dtype)
    expected = np.asarray(jax.jit(lambda v: jax.lax.integer_pow(v, y))(x))
    check = np.testing.assert_array_equal if np.dtype(dtype).kind == "f" else (
        lambda a, b: np.testing.assert_allclose(a, b, rtol=4e-6))
    check(np.asarray(flax.integer_pow(x, y)), expected)
    check(np.asarray(fg.jit(lambda v: flax.integer_pow(v, y))(x)), expected)
