"""``fungraph.numpy.ufunc``: JAX's ufuncs (``add``, ``maximum``, ``subtract``, ...) and
``frompyfunc``, with numpy's ``outer``/``reduce``/``accumulate``/``at``/``reduceat``, each
against numpy eagerly and under jit, with gradients through the left folds."""

from __future__ import annotations

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.testing import check_grads

X = np.arange(1.0, 13.0).reshape(3, 4) / 3
N = np.array([[3, 1, 2, 7], [5, 4, 7, 1], [2, 2, 9, 0]])
WHERE_ROWS = np.array([[True], [False], [True]])

CALLS = [
    "add.outer(x[0], x[1])", "add.reduce(x)", "add.reduce(x, axis=None)", "add.reduce(x, axis=1, keepdims=True)",
    "multiply.reduce(x, axis=1, initial=2.0)", "maximum.reduce(x, axis=0)", "minimum.accumulate(x, axis=1)",
    "add.accumulate(x)", "multiply.accumulate(x, axis=1)", "subtract.reduce(x, axis=1)",
    "subtract.accumulate(x, axis=1)", "subtract.outer(x[0], x[1])", "logical_and.reduce(x > 1, axis=0)",
    "logical_or.accumulate(x > 2, axis=1)", "bitwise_xor.reduce(n, axis=1)", "bitwise_or.accumulate(n, axis=0)",
    "logaddexp.reduce(x, axis=1)", "logaddexp2.accumulate(x, axis=0)", "add.reduceat(x, [0, 2, 1], axis=1)",
    "maximum.reduceat(x[0], [0, 3])", "subtract.reduceat(x[0], [1, 3])",
    "add.reduce(x, axis=1, where=np.array([True, False, True, True]))",
    "subtract.reduce(x, axis=0, where=w, initial=1.0)", "add.reduce(n)", "add.accumulate(n.astype(np.int32))",
    "multiply.outer(n[0], n[1])", "maximum.reduce(n, axis=1, dtype=np.float64)", "logical_xor.reduce(n > 2, axis=None)",
    "bitwise_and.reduce(n, axis=(0, 1))", "add.at(x, np.array([0, 0, 2]), 1.0, inplace=False)",
    "subtract.at(x, (np.array([0, 0]), np.array([1, 1])), np.array([1.0, 2.0]), inplace=False)",
    "negative.at(x[0], np.array([1, 1, 2]), inplace=False)",
    "maximum.at(x[0], np.array([1, 3]), np.array([9.0, 0.0]), inplace=False)",
    "logaddexp.at(x[0], np.array([1, 1]), np.array([0.0, 1.0]), inplace=False)",
]


def _numpy(call: str) -> np.ndarray:
    """numpy's result: its ``at`` updates in place, so run it on a copy and return that."""
    env = {"np": np, "x": X.copy(), "n": N, "w": WHERE_ROWS}
    if ".at(" not in call:
        return eval(f"np.{call}", env)
    name, rest = call.split(".at(")
    target = env["x"][0] if rest.startswith("x[0]") else env["x"]
    args = eval("(" + rest.replace(", inplace=False)", ",)"), env)
    getattr(np, name).at(target, *args[1:])
    return target


#: where JAX's dtype is not numpy's: JAX accumulates int32 in int32 (numpy widens to int64)
JAX_DTYPES = {"add.accumulate(n.astype(np.int32))": np.int32}


@pytest.mark.parametrize("call", CALLS)
def test_ufunc_methods_match_numpy_eagerly_and_under_jit(call: str) -> None:
    want = _numpy(call)
    if call in JAX_DTYPES:
        want = want.astype(JAX_DTYPES[call])
    env = {"fnp": fnp, "np": np, "x": X, "n": N, "w": WHERE_ROWS}
    for got in (eval(f"fnp.{call}", env), fg.jit(lambda: eval(f"fnp.{call}", env))()):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
        assert np.asarray(got).dtype == np.asarray(want).dtype and np.shape(got) == np.shape(want)
    np.testing.assert_array_equal(X, np.arange(1.0, 13.0).reshape(3, 4) / 3)


def test_frompyfunc_folds_from_the_left_as_numpy_does() -> None:
    f = fnp.frompyfunc(lambda a, b: a * 2 + b, 2, 1, identity=0)
    g = np.frompyfunc(lambda a, b: a * 2 + b, 2, 1)
    assert isinstance(f, fnp.ufunc) and isinstance(fnp.add, fnp.ufunc) and (f.nin, f.nout, f.nargs) == (2, 1, 3)
    np.testing.assert_allclose(f(X[0], 1.0), (g(X[0], 1.0)).astype(float))
    np.testing.assert_allclose(f.accumulate(X, axis=1), g.accumulate(X, axis=1).astype(float))
    np.testing.assert_allclose(fg.jit(lambda v: f.reduce(v, axis=0))(X), g.reduce(X, axis=0).astype(float))
    np.testing.assert_allclose(f.outer(X[0], X[1]), g.outer(X[0], X[1]).astype(float))


def test_folds_differentiate() -> None:
    check_grads(lambda v: fnp.subtract.accumulate(fnp.sin(v), axis=1), (X,), order=2)
    check_grads(lambda v: fnp.logaddexp.reduce(v, axis=0), (X,), order=2)
    check_grads(lambda v: fnp.frompyfunc(lambda a, b: a * b + b, 2, 1).reduce(v, axis=1), (X,), order=2)
    check_grads(lambda v: fnp.maximum.at(v[0], np.array([1, 1]), v[1, :2] * 3, inplace=False), (X,), order=1)


def test_ufunc_errors_name_the_problem() -> None:
    with pytest.raises(NotImplementedError, match="inplace=False"):
        fnp.add.at(X, 0, 1.0)
    with pytest.raises(ValueError, match="two inputs and one output"):
        fnp.negative.reduce(X)
    with pytest.raises(ValueError, match="needs initial="):
        fnp.subtract.reduce(np.zeros((0, 2)))
    with pytest.raises(TypeError, match="traced index"):
        fg.jit(lambda i: fnp.subtract.at(X, i, 1.0, inplace=False))(1)
    with pytest.raises(IndexError, match="out of range"):
        fnp.add.reduceat(X[0], [0, 7])
