"""Eager results' operators and methods against JAX's, in both dtype modes: every operator and
array method × every dtype gives JAX's kind of result (an Array, or a Python scalar), its dtype,
its weak type and its values, or an error of JAX's type."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
          "float32", "float64", "complex64", "complex128"]


def _values(dtype: str) -> np.ndarray:
    d = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    if d == np.bool_:
        return np.array([[True, False, True], [False, True, True]])
    values = np.array([[1, 2, 3], [4, 5, 6]]).astype(d)
    return values + 0.5j * values if d.kind == "c" else values


#: one operand's array method or operator, ``x`` the array (``lib`` its numpy namespace)
UNARY: dict[str, Callable[[Any, Any], Any]] = {
    "x+1": lambda x, lib: x + 1, "1+x": lambda x, lib: 1 + x, "x+1.5": lambda x, lib: x + 1.5,
    "x*2j": lambda x, lib: x * 2j, "x-True": lambda x, lib: x - True, "3-x": lambda x, lib: 3 - x,
    "x*2.0": lambda x, lib: x * 2.0, "x/2": lambda x, lib: x / 2, "2/x": lambda x, lib: 2 / x,
    "x//2": lambda x, lib: x // 2, "x%2": lambda x, lib: x % 2, "x**2": lambda x, lib: x ** 2,
    "x**0.5": lambda x, lib: x ** 0.5, "2**x": lambda x, lib: 2 ** x, "x+300": lambda x, lib: x + 300,
    "-x": lambda x, lib: -x, "+x": lambda x, lib: +x, "abs": lambda x, lib: abs(x), "~x": lambda x, lib: ~x,
    "x&1": lambda x, lib: x & 1, "x|x": lambda x, lib: x | x, "x^x": lambda x, lib: x ^ x,
    "x<<1": lambda x, lib: x << 1, "x>>1": lambda x, lib: x >> 1,
    "x>1": lambda x, lib: x > 1, "x<=1.5": lambda x, lib: x <= 1.5, "x==x": lambda x, lib: x == x,
    "x!=2": lambda x, lib: x != 2, "x==None": lambda x, lib: x == None,  # noqa: E711
    "x+np.float64": lambda x, lib: x + np.float64(1), "x+np.float32": lambda x, lib: x + np.float32(1),
    "np.float64+x": lambda x, lib: np.float64(1) + x, "x+np.int64_array": lambda x, lib: x + np.ones(3, np.int64),
    "x*np.float64_array": lambda x, lib: x * np.ones(3), "x+np.int8_array": lambda x, lib: x + np.ones(3, np.int8),
    "x+list": lambda x, lib: x + [1, 2, 3],
    "x@x.T": lambda x, lib: x @ x.T, "x.dot(x.T)": lambda x, lib: x.dot(x.T), "x.T": lambda x, lib: x.T,
    "x.mT": lambda x, lib: x.mT,
    "x.sum()": lambda x, lib: x.sum(), "x.sum(0)": lambda x, lib: x.sum(0),
    "x.sum(keepdims)": lambda x, lib: x.sum(axis=1, keepdims=True),
    "x.sum(dtype)": lambda x, lib: x.sum(dtype="float32"),
    "x.prod()": lambda x, lib: x.prod(), "x.mean()": lambda x, lib: x.mean(), "x.mean(1)": lambda x, lib: x.mean(1),
    "x.max()": lambda x, lib: x.max(), "x.min(0)": lambda x, lib: x.min(axis=0), "x.var()": lambda x, lib: x.var(),
    "x.std()": lambda x, lib: x.std(), "x.argmax()": lambda x, lib: x.argmax(),
    "x.argmin(1)": lambda x, lib: x.argmin(1),
    "x.all()": lambda x, lib: x.all(), "x.any(0)": lambda x, lib: x.any(0), "x.cumsum()": lambda x, lib: x.cumsum(),
    "x.cumprod(1)": lambda x, lib: x.cumprod(1), "x.ptp()": lambda x, lib: x.ptp(),
    "x.reshape(3,2)": lambda x, lib: x.reshape(3, 2), "x.reshape(-1)": lambda x, lib: x.reshape(-1),
    "x.transpose()": lambda x, lib: x.transpose(), "x.ravel()": lambda x, lib: x.ravel(),
    "x.flatten()": lambda x, lib: x.flatten(), "x.squeeze()": lambda x, lib: x[:1].squeeze(),
    "x.swapaxes": lambda x, lib: x.swapaxes(0, 1),
    "x.astype(float64)": lambda x, lib: x.astype(np.float64), "x.astype(int64)": lambda x, lib: x.astype(np.int64),
    "x.astype(float)": lambda x, lib: x.astype(float), "x.astype(int)": lambda x, lib: x.astype(int),
    "x.astype(float32)": lambda x, lib: x.astype(np.float32), "x.astype(bool)": lambda x, lib: x.astype(bool),
    "x.copy()": lambda x, lib: x.copy(), "x.conj()": lambda x, lib: x.conj(), "x.real": lambda x, lib: x.real,
    "x.imag": lambda x, lib: x.imag, "x.round()": lambda x, lib: x.round(), "x.clip(1,2)": lambda x, lib: x.clip(1, 2),
    "x.sort()": lambda x, lib: x.sort(), "x.argsort()": lambda x, lib: x.argsort(), "x.take": lambda x, lib: x.take(2),
    "x.trace()": lambda x, lib: x.trace(), "x.diagonal()": lambda x, lib: x.diagonal(),
    "x.repeat(2)": lambda x, lib: x.repeat(2), "x.nonzero()": lambda x, lib: x.nonzero()[1],
    "x[0]": lambda x, lib: x[0], "x[0,1]": lambda x, lib: x[0, 1], "x[None]": lambda x, lib: x[None],
    "x[7]": lambda x, lib: x[7], "list(x)": lambda x, lib: list(x)[1], "x.at.set": lambda x, lib: x.at[0, 0].set(7),
    "x.at.add(1.5)": lambda x, lib: x.at[1].add(1.5), "x.at.get": lambda x, lib: x.at[0].get(),
    "x.item()": lambda x, lib: x[0, 1].item(), "x.tolist()": lambda x, lib: x.tolist(),
    "len": lambda x, lib: len(x), "bool": lambda x, lib: bool(x[0, 0]), "bool(vector)": lambda x, lib: bool(x[0, :1]),
    "int": lambda x, lib: int(x[0, 0]), "float": lambda x, lib: float(x[0, 0]),
    "complex": lambda x, lib: complex(x[0, 0]),
    "int(vector)": lambda x, lib: int(x[0, :1]), "float(matrix)": lambda x, lib: float(x[:1, :1]),
    "bool(matrix)": lambda x, lib: bool(x), "x.size": lambda x, lib: x.size, "x.ndim": lambda x, lib: x.ndim,
    "x.shape": lambda x, lib: x.shape, "x.nbytes": lambda x, lib: x.nbytes, "x.dtype": lambda x, lib: x.dtype,
}

SMALL_INTS = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32")

#: what still differs from JAX, and why (docs/differences_from_jax.md): (operation, dtype) -> the
#: modes it differs in
_BOTH = ("x32", "x64")
KNOWN: dict[tuple[str, str], tuple[str, ...]] = {
    # fungraph clips, orders and rounds where JAX refuses; JAX's clip of bools by Python ints is weak
    **{(op, d): _BOTH for op in ("x.clip(1,2)", "x.argmax()", "x.argmin(1)") for d in ("complex64", "complex128")},
    ("x.round()", "bool"): _BOTH, ("x.clip(1,2)", "bool"): _BOTH,
}


def _describe(v: Any) -> Any:
    """What a result is, in terms both libraries share: an array's dtype, shape and weak type,
    or a Python value's type."""
    if isinstance(v, (jax.Array, fg.Array)):
        return ("Array", np.dtype(v.dtype).name, tuple(v.shape), bool(v.weak_type))
    if isinstance(v, list):
        return ("list", tuple(_describe(e) for e in v))
    return (type(v).__name__,)


def _run(f: Callable[[Any, Any], Any], values: np.ndarray, lib: Any) -> tuple[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = f(lib.asarray(values), lib)
        except Exception as e:  # noqa: BLE001 - the error is compared with JAX's
            return ("error",), e
    return _describe(out), out


def _compare(name: str, dtype: str, x64: bool) -> None:
    values = _values(dtype)
    with jax.enable_x64(x64):
        want, want_value = _run(UNARY[name], values, jnp)
    with fg.enable_x64(x64):
        got, got_value = _run(UNARY[name], values, fnp)
    if want == ("error",):
        assert got == ("error",), f"{name} on {dtype}: JAX raises {want_value!r}, fungraph gives {got}"
        assert isinstance(got_value, type(want_value)), (got_value, want_value)
        return
    assert got == want, f"{name} on {dtype} (x64={x64}): fungraph {got} != JAX {want}"
    if isinstance(want_value, jax.Array):
        tol = 1e-2 if want_value.dtype.itemsize <= 2 else 1e-6
        np.testing.assert_allclose(_as_complex(got_value), _as_complex(want_value), rtol=tol, atol=tol)
    else:
        assert got_value == want_value


def _as_complex(v: Any) -> np.ndarray:
    a = np.asarray(v)
    return (a if a.dtype.kind in "biufc" else a.astype(np.float32)).astype(np.complex128)


@pytest.mark.parametrize("x64", [False, True], ids=_BOTH)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_array_operators_and_methods_match_jax(name: str, dtype: str, x64: bool, request: Any) -> None:
    if _BOTH[x64] in KNOWN.get((name, dtype), ()):
        request.applymarker(pytest.mark.xfail(strict=True, reason="a known difference"))
    _compare(name, dtype, x64)


BINARY_DTYPES = ["bool", "int8", "uint8", "int32", "uint32", "int64", "float16", "bfloat16", "float32", "float64",
                 "complex64"]
BINARY = {"+": lambda a, b: a + b, "/": lambda a, b: a / b, "<": lambda a, b: a < b, "@": lambda a, b: a @ b.T,
          "**": lambda a, b: a ** b, "&": lambda a, b: a & b}


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("left", BINARY_DTYPES)
def test_binary_operators_promote_as_jax_on_every_pair_of_dtypes(op: str, left: str, x64: bool) -> None:
    """Two arrays of every pair of dtypes: JAX's lattice, not numpy's (``int8 + uint8`` is int16,
    ``int32 + float16`` is float16, ``uint64 + int64`` is an error with x64)."""
    for right in BINARY_DTYPES:
        a, b = _values(left), _values(right)
        with jax.enable_x64(x64):
            want, want_value = _run(lambda x, lib: BINARY[op](x, lib.asarray(b)), a, jnp)
        with fg.enable_x64(x64):
            got, got_value = _run(lambda x, lib: BINARY[op](x, lib.asarray(b)), a, fnp)
        if want == ("error",):
            assert got == ("error",), f"{left} {op} {right}: JAX raises {want_value!r}, fungraph gives {got}"
            continue
        assert got == want, f"{left} {op} {right} (x64={x64}): fungraph {got} != JAX {want}"


WEAK = {
    "asarray(2.)": lambda lib, x: x * lib.asarray(2.0),
    "asarray(2.)*3": lambda lib, x: x * (lib.asarray(2.0) * 3),
    "asarray(2)+1 with int8": lambda lib, x: x.astype(lib.int8) + (lib.asarray(2) + 1),
    "weak.T": lambda lib, x: x * lib.asarray(2.0).T,
    "weak.reshape": lambda lib, x: x * lib.asarray(2.0).reshape(1),
    "weak[None]": lambda lib, x: x * lib.asarray(2.0)[None],
    "-weak": lambda lib, x: x * -lib.asarray(2.0),
    "weak.sum() is strong": lambda lib, x: x * lib.asarray(2.0).sum(),
    "weak.astype is strong": lambda lib, x: x * lib.asarray(2.0).astype(lib.float32),
    "weak > 1": lambda lib, x: lib.asarray(2.0) > 1,
    "bool + 1 is weak": lambda lib, x: (lib.asarray([True]) + 1),
    "float16 * weak": lambda lib, x: x.astype(lib.float16) * lib.asarray(3.0),
}


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
@pytest.mark.parametrize("name", sorted(WEAK))
def test_weak_types_of_eager_results_promote_as_jax(name: str, x64: bool) -> None:
    """JAX types an array made from a Python scalar, and results of weak operands alone, weakly:
    they do not widen a float32 array to float64 with x64 on, or a float16 one to float32."""
    with jax.enable_x64(x64):
        want = _describe(WEAK[name](jnp, jnp.ones(3, jnp.float32)))
    with fg.enable_x64(x64):
        got = _describe(WEAK[name](fnp, fnp.ones(3, fnp.float32)))
    assert got == want


def test_astype_of_a_64_bit_dtype_warns_as_jax_in_32_bit_mode() -> None:
    with fg.disable_x64():
        x = fnp.ones(3)
        with pytest.warns(UserWarning, match="Explicitly requested dtype float64 requested in astype"):
            y = x.astype(np.float64)
    assert y.dtype == np.float32 and isinstance(y, fg.Array)


def test_results_are_read_only_and_numpy_functions_still_take_them() -> None:
    x = fnp.arange(6.0).reshape(2, 3)
    for y in (x + 1, x.T, x.sum(0), x.astype(np.float32), -x, x > 2, x.reshape(6)):
        assert isinstance(y, fg.Array) and not np.asarray(y).flags.writeable
    np.testing.assert_array_equal(np.sort(x[::-1], axis=0), np.sort(np.arange(6.0).reshape(2, 3)[::-1], axis=0))
    np.testing.assert_allclose(np.mean(x), 2.5)
    assert float(np.sum(x)) == 15.0


@pytest.mark.parametrize("x64", [False, True], ids=_BOTH)
def test_a_weak_eager_array_is_a_weak_jit_argument(x64: bool) -> None:
    """``jnp.asarray(0.1)`` passed to a jitted function promotes as the Python scalar, a strong
    float64 array does not; the cached dispatch tells the two apart."""
    step = fg.jit(lambda x, lr: x - lr * x)
    with fg.enable_x64(x64), jax.enable_x64(x64):
        jstep = jax.jit(lambda x, lr: x - lr * x)
        for lr in (np.float64(0.1), 0.1, np.float64(0.1)):
            got = step(np.float32([1.0]), fnp.asarray(lr))
            want = jstep(np.float32([1.0]), jnp.asarray(lr))
            assert _describe(got) == _describe(want)
