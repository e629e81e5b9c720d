"""Eager and CPU-jitted results are ``HostArray``s: read-only numpy arrays with JAX's ``.at`` and
``.block_until_ready()``, so JAX code that updates or waits on results runs unchanged."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.array import HostArray

X = np.arange(6.0).reshape(2, 3)


@pytest.mark.parametrize("make", [
    lambda: fnp.sin(X), lambda: fnp.zeros(3), lambda: fnp.arange(4), lambda: fnp.linspace(0, 1, 5),
    lambda: fnp.eye(2), lambda: fnp.sum(X), lambda: fnp.linalg.inv(np.eye(2) * 2), lambda: fnp.fft.fft(X[0]),
    lambda: fg.grad(lambda x: (x ** 2).sum())(X), lambda: fg.vmap(lambda r: r * 2)(X),
    lambda: fg.jit(lambda x: x * 2 + 1)(X), lambda: fg.jit(lambda x: x)(X),
    lambda: fg.random.normal(fg.random.key(0), (2,)),
    lambda: fnp.split(X, 2)[1], lambda: fnp.linalg.eigh(np.eye(2))[0], lambda: fg.jit(lambda x: (x, x.sum()))(X)[1],
], ids=["sin", "zeros", "arange", "linspace", "eye", "sum", "inv", "fft", "grad", "vmap", "jit", "jit_identity",
        "random", "split", "eigh", "jit_tuple"])
def test_results_have_jax_methods(make: Any) -> None:
    x = make()
    assert type(x) is HostArray and isinstance(x, np.ndarray) and isinstance(x, fg.Array)
    assert x.block_until_ready() is x
    before = np.array(x)
    if x.ndim:
        updated = x.at[0].set(7)
        assert type(updated) is HostArray and (updated[0] == 7).all() and updated.dtype == x.dtype
        np.testing.assert_array_equal(updated[1:], before[1:])
    np.testing.assert_array_equal(x, before)
    assert repr(x) == f"Array({np.array2string(before, prefix='Array(', separator=', ')}, dtype={x.dtype.name})" \
        or "\n" in repr(x)


def test_the_jax_idioms_run_unchanged() -> None:
    f = fg.jit(lambda w, x: fnp.tanh(x @ w))
    out = f(np.ones((3, 2)), X).block_until_ready()
    grads = fg.grad(lambda w: f(w, X).sum())(np.ones((3, 2)))
    step = grads.at[0, 0].add(1.0).at[:, 1].multiply(0.0)
    np.testing.assert_allclose(step[:, 1], 0.0)
    np.testing.assert_allclose(step[0, 0], grads[0, 0] + 1.0)
    assert fg.block_until_ready({"o": out, "g": grads})["o"] is out
    assert out.at[0].get().shape == (2,)


def test_numpy_keeps_numpy_semantics_and_the_library_sees_plain_arrays() -> None:
    x = fnp.ones(3)
    assert type(x + 1) is HostArray and type(np.sin(x)) is HostArray
    seen = []
    fg.pure_callback(lambda a: seen.append(type(a)) or a, fg.ShapeDtypeStruct((3,), np.float64), x)
    assert seen and all(t in (np.ndarray, HostArray) for t in seen)
    assert float(fnp.sum(x)) == 3.0 and int(fnp.argmax(x)) == 0


def test_device_arrays_have_at_too(require_opencl: None) -> None:
    y = fg.jit(lambda a: a * 2, backend="opencl")(np.ones(3, np.float32))
    np.testing.assert_array_equal(np.asarray(y.at[1].set(5.0)), [2.0, 5.0, 2.0])
    np.testing.assert_array_equal(np.asarray(y), [2.0, 2.0, 2.0])


def test_result_aval_is_taken_as_it_is_and_odd_dtypes_are_still_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """An eager operand's aval is read several times per operation: a result's shape and
    supported dtype make it directly (normalising them again was a sixth of a small eager
    step); a dtype fungraph does not support still gets the error naming it."""
    from fungraph import ir

    a = fnp.ones((2, 3), dtype=np.float32)
    want = ir.ShapedArray((2, 3), np.float32)

    def normalised(self: Any) -> None:
        raise AssertionError("a result's aval was normalised again")

    monkeypatch.setattr(ir.ShapedArray, "__post_init__", normalised)
    got = a.aval
    assert got == want and hash(got) == hash(want) and got.vma == frozenset()
    assert (got.size, got.nbytes, str(got)) == (6, 24, "f32[2,3]")
    monkeypatch.undo()
    with pytest.raises(TypeError, match="does not support dtype object"):
        _ = a.astype(object).aval


def test_numpy_functions_that_call_methods_with_numpys_defaults_work_on_results() -> None:
    """``np.take`` calls ``a.take(i, axis=, out=None, mode='raise')``: numpy's method answers it."""
    x = fg.jit(lambda a: a * 2)(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(np.take(x, np.arange(2), axis=1), np.arange(6.0).reshape(2, 3)[:, :2] * 2)
    np.testing.assert_array_equal(np.compress([True, False], x, axis=0), [[0.0, 2.0, 4.0]])
