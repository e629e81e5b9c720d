"""A numpy scalar on the left of an operator with a fungraph array (``np.float64(2) * x``):
JAX's promotion (a numpy scalar is a strong operand of its dtype, canonicalized in 32-bit mode),
JAX's weak flag and a ``fungraph.Array`` result, eagerly and on traced values, in both modes."""

import warnings

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

SCALARS = [np.float64(2.5), np.float32(2.5), np.int64(3), np.uint8(3), np.bool_(True), np.complex64(1 + 2j)]
OPERATORS = {name: eval(f"lambda s, x: s {name} x") for name in  # noqa: S307 - fixed operator symbols
             ("+", "-", "*", "/", "//", "%", "**", "<", ">=", "==", "&")}
ARRAYS = [np.array([1.0, 2.0], np.float32), np.array([1, 2], np.int32), np.array([1.0, 2.0], np.float16),
          np.array([True, True])]  # no zero divisors: XLA's differ from numpy's


def _jax(op: object, s: object, a: np.ndarray) -> tuple:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = op(s, jnp.asarray(a))
    except TypeError:
        return None, None, None
    return out.dtype, out.weak_type, np.asarray(out)


def _ours(op: object, s: object, x: object) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return op(s, x)


@pytest.mark.parametrize("x64", [True, False])
def test_numpy_scalar_on_the_left_matches_jax(x64: bool) -> None:
    bad = []
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for s in SCALARS:
            for a in ARRAYS:
                wants = {name: _jax(op, s, a) for name, op in OPERATORS.items()}
                valid = [name for name, w in wants.items() if w[0] is not None]
                for name in set(OPERATORS) - set(valid):
                    with pytest.raises(TypeError):
                        _ours(OPERATORS[name], s, fnp.asarray(a))
                staged = fg.jit(lambda v, s=s, valid=valid: [_ours(OPERATORS[n], s, v) for n in valid])(a)
                for name, traced in zip(valid, staged):
                    dtype, weak, values = wants[name]
                    got = _ours(OPERATORS[name], s, fnp.asarray(a))
                    what = f"{type(s).__name__}(...) {name} {a.dtype}[2]"
                    if not (isinstance(got, fg.Array) and got.dtype == dtype and bool(got.weak_type) == weak
                            and traced.dtype == dtype):
                        bad.append(f"{what}: JAX {dtype} weak={weak}, eager {type(got).__name__} {got.dtype} "
                                   f"weak={getattr(got, 'weak_type', None)}, jit {traced.dtype}")
                        continue
                    tol = 1e-2 if dtype == np.float16 else 1e-6
                    np.testing.assert_allclose(np.asarray(got), values, rtol=tol, err_msg=what)
                    np.testing.assert_allclose(np.asarray(traced), values, rtol=tol, err_msg=what)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("scalar", [np.float64(2.0), np.float32(3.0), np.int64(3)], ids=lambda s: type(s).__name__)
def test_numpy_scalar_on_the_left_under_grad_and_vmap(x64: bool, scalar: object) -> None:
    def f(m: object) -> object:
        def loss(x: object) -> object:
            y = scalar * x - scalar + scalar ** x
            return m.sum(y * (scalar < x))
        return loss

    a = np.array([0.5, 1.5, 2.5], np.float32)
    with fg.enable_x64(x64), jax.enable_x64(x64):
        want = jax.grad(f(jnp))(a)
        batched_want = jax.vmap(lambda x: scalar * x)(a)
        for got in (fg.grad(f(fnp))(a), fg.jit(fg.grad(f(fnp)))(a)):
            assert got.dtype == want.dtype
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
        batched = fg.vmap(lambda x: scalar * x)(a)
        assert isinstance(batched, fg.Array) and batched.dtype == batched_want.dtype


def test_numpy_functions_of_a_numpy_scalar_stay_numpy() -> None:
    """Only the operator syntax is JAX's: numpy's own functions compute as numpy does."""
    x = fnp.asarray(np.array([1.0, 2.0], np.float32))
    with fg.enable_x64(False):
        assert (np.float64(2) * x).dtype == np.float32
        assert np.multiply(np.float64(2), x).dtype == np.float64
        assert np.sin(x).dtype == np.float32
