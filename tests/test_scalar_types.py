"""``fungraph.numpy.float32`` and the other scalar types against ``jax.numpy``'s: called they
give a strongly typed ``fungraph.Array`` (JAX's ``asarray(x, dtype)``), named they are dtypes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

NAMES = ["bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bfloat16",
         "float16", "float32", "float64", "complex64", "complex128"]
VALUES = [1.0, 7, True, 0, [1.5, 2.5], (3, 4)]


def _call(mod: object, name: str, value: object) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = getattr(mod, name)(value)
    return out, [str(w.message) for w in caught]


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_called_gives_a_strong_array_as_jax(name: str, x64: bool) -> None:
    for value in VALUES:
        with fg.enable_x64(x64), jax.enable_x64(x64):
            got, got_warnings = _call(fnp, name, value)
            want, want_warnings = _call(jnp, name, value)
        assert isinstance(got, fg.Array), (name, value, type(got))
        assert got.dtype == want.dtype and got.shape == want.shape, (name, value, got, want)
        assert got.weak_type == want.weak_type is False
        np.testing.assert_array_equal(np.asarray(got, dtype=np.float64 if name == "bfloat16" else None),
                                      np.asarray(want, dtype=np.float64 if name == "bfloat16" else None))
        assert len(got_warnings) == len(want_warnings), (name, value, got_warnings, want_warnings)
        assert all("Explicitly requested dtype" in w for w in got_warnings)


@pytest.mark.parametrize("x64", [False, True])
def test_called_on_arrays_and_traced_values(x64: bool) -> None:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for make in (lambda m: m.float32(m.arange(3)), lambda m: m.int32(m.asarray([1.7, -2.5])),
                     lambda m: m.uint8(np.arange(3, dtype=np.int64)), lambda m: m.complex64(m.ones(2))):
            got, want = make(fnp), make(jnp)
            assert isinstance(got, fg.Array) and got.dtype == want.dtype and got.weak_type == want.weak_type
            np.testing.assert_array_equal(got, want)
        got = fg.jit(lambda x: fnp.float32(x) * 2)(3)
        want = jax.jit(lambda x: jnp.float32(x) * 2)(3)
        assert got.dtype == want.dtype and got.weak_type == want.weak_type and float(got) == float(want)


@pytest.mark.parametrize("x64", [False, True])
def test_called_on_text_parses_as_jax(x64: bool) -> None:
    for name, value in [("float32", "1.5"), ("float32", ["1.5", "2"]), ("float64", b"2.25"),
                        ("int32", "7"), ("complex64", "1+2j"), ("bool_", "x"), ("float32", np.str_("2.5"))]:
        with fg.enable_x64(x64), jax.enable_x64(x64), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got, want = getattr(fnp, name)(value), getattr(jnp, name)(value)
        assert isinstance(got, fg.Array) and got.dtype == want.dtype, (name, value)
        np.testing.assert_array_equal(got, want)
    for name, value in [("float32", "abc"), ("int32", "1.5")]:
        with pytest.raises(ValueError):
            getattr(jnp, name)(value)
        with pytest.raises(ValueError):
            getattr(fnp, name)(value)


def test_needs_an_argument_as_jax() -> None:
    with pytest.raises(TypeError):
        jnp.float32()
    with pytest.raises(TypeError):
        fnp.float32()


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_names_still_work_as_dtypes(name: str, x64: bool) -> None:
    f, j = getattr(fnp, name), getattr(jnp, name)
    with fg.enable_x64(x64), jax.enable_x64(x64), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert f.dtype == j.dtype and np.dtype(f) == np.dtype(j)
        assert fnp.zeros(3, f).dtype == jnp.zeros(3, j).dtype
        assert fnp.arange(3).astype(f).dtype == jnp.arange(3).astype(j).dtype
        for kind in ("floating", "integer", "complexfloating", "inexact", "number", "unsignedinteger"):
            assert fnp.issubdtype(f, getattr(fnp, kind)) == jnp.issubdtype(j, getattr(jnp, kind)), (name, kind)
            assert fnp.issubdtype(fnp.zeros(1, f).dtype, getattr(fnp, kind)) == \
                jnp.issubdtype(jnp.zeros(1, j).dtype, getattr(jnp, kind)), (name, kind)
        assert isinstance(np.dtype(f).type(0), f) and isinstance(np.dtype(j).type(0), j)
        assert not isinstance(f(1), f) and not isinstance(j(1), j)
        assert f == np.dtype(j).type and hash(f) == hash(f.dtype)
