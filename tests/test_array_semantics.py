"""Arrays behave like JAX's (issue #32, section 1; #36 items 3 and 4): every result is an
immutable ``fungraph.Array`` with JAX's attributes, printing and indexing, out-of-bounds
indices follow JAX eagerly and under ``jit``, and no result aliases another or an input.
JAX is the oracle throughout."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.array import HostArray
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

F32 = np.arange(10, dtype=np.float32)
I32 = np.arange(10, dtype=np.int32)

RESULTS: dict[str, Callable[[], Any]] = {
    "eager": lambda: fnp.sin(F32),
    "creation": lambda: fnp.zeros(3),
    "operator": lambda: fnp.sin(F32) + 1,
    "element": lambda: fnp.sin(F32)[0],
    "jit": lambda: fg.jit(lambda x: x * 2 + 1)(F32),
    "jit_identity": lambda: fg.jit(lambda x: x)(F32),
    "grad": lambda: fg.grad(lambda x: fnp.sum(x ** 2))(F32),
    "vmap": lambda: fg.vmap(lambda x: x * 2)(F32),
    "device_put": lambda: fg.device_put(F32),
}


def _same_as_jax(got: Any, want: Any) -> None:
    got_arr, want_arr = np.asarray(got), np.asarray(want)
    assert got_arr.shape == want_arr.shape and got_arr.dtype == want_arr.dtype, (got_arr, want_arr)
    np.testing.assert_array_equal(got_arr, want_arr)


# --- every result is an immutable fungraph.Array -------------------------------------------


@pytest.mark.parametrize("name", list(RESULTS))
def test_every_result_is_an_immutable_array(name: str) -> None:
    x = RESULTS[name]()
    before = np.array(x)
    assert isinstance(x, fg.Array) and isinstance(x, fnp.ndarray)
    with pytest.raises(TypeError, match=r"immutable.*x = x\.at\[idx\]\.set\(y\)"):
        x[()] = 1
    y = x
    y += 1
    assert y is not x
    np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(y, before + 1)
    view = np.asarray(x)
    assert np.shares_memory(view, x) and not view.flags.writeable
    with pytest.raises(ValueError):
        view.flags.writeable = True
    with pytest.raises(ValueError, match="read-only"):
        np.add(view, 1, out=view)
    np.testing.assert_array_equal(x, before)


def test_the_error_is_jaxs_type_and_names_the_at_method() -> None:
    with pytest.raises(TypeError) as ours:
        fnp.arange(3.0)[0] = 1.0
    with pytest.raises(TypeError) as theirs:
        jnp.arange(3.0)[0] = 1.0
    for err in (ours, theirs):
        assert "immutable" in str(err.value) and "x = x.at[idx].set(y)" in str(err.value)


def test_item_assignment_on_a_traced_value_points_to_at() -> None:
    def f(x: Any) -> Any:
        x[0] = 1.0
        return x

    with pytest.raises(TypeError, match=r"x\.at\[idx\]\.set\(y\)"):
        fg.jit(f)(F32)


@pytest.mark.parametrize("op", ["+=", "-=", "*=", "/=", "//=", "**=", "%="])
def test_inplace_operators_rebind(op: str) -> None:
    x = fnp.arange(1.0, 4.0)
    scope = {"y": x}
    exec(f"y {op} 2.0", scope)
    np.testing.assert_array_equal(x, [1.0, 2.0, 3.0])
    want = {"y": jnp.arange(1.0, 4.0)}
    exec(f"y {op} 2.0", want)
    np.testing.assert_allclose(scope["y"], want["y"])
    assert isinstance(scope["y"], fg.Array)


def test_sort_method_returns_a_sorted_copy_as_jax() -> None:
    x = fnp.asarray(np.array([3.0, 1.0, 2.0], np.float32))
    _same_as_jax(x.sort(), jnp.asarray(np.array([3.0, 1.0, 2.0], np.float32)).sort())
    np.testing.assert_array_equal(x, [3.0, 1.0, 2.0])


def test_numpys_functions_take_results() -> None:
    """numpy's functions that copy their argument (or make an array like it) and sort, partition
    or fill the copy in place."""
    v = np.array([3.0, 1.0, 2.0, 1.0])
    x = fnp.asarray(v)
    for f in (np.sort, np.unique, np.median, lambda a: np.partition(a, 1), lambda a: np.percentile(a, 30),
              np.argsort, lambda a: np.quantile(a, [0.2, 0.9]), np.nanmedian, np.gradient, lambda a: np.roll(a, 1),
              lambda a: np.piecewise(a, [a > 2], [0.0, 1.0]), lambda a: np.apply_along_axis(np.cumsum, 0, a)):
        np.testing.assert_array_equal(f(x), f(v))
    np.testing.assert_array_equal(x, v)


def test_copies_and_pickles_stay_immutable() -> None:
    x = fnp.arange(4.0)
    for other in (copy.copy(x), copy.deepcopy(x), pickle.loads(pickle.dumps(x))):
        assert type(other) is HostArray and not other.flags.writeable and not np.shares_memory(other, x)
        np.testing.assert_array_equal(other, x)
    assert np.array(x).flags.writeable  # np.array copies, as for a JAX array


# --- JAX's attributes, printing and protocols ----------------------------------------------


def test_device_and_sharding_attributes_as_jax() -> None:
    x, jx = fnp.asarray(F32), jnp.asarray(F32)
    assert repr(x.sharding) == repr(jx.sharding)
    assert repr(x.device) == repr(jx.device) and str(x.device) == str(jx.device)
    assert x.devices() == {x.device} == x.sharding.device_set
    assert x.device == fg.devices()[0]
    for attr in ("is_fully_addressable", "is_fully_replicated", "num_devices", "memory_kind"):
        assert getattr(x.sharding, attr) == getattr(jx.sharding, attr), attr
    assert x.sharding.shard_shape(x.shape) == jx.sharding.shard_shape(jx.shape)
    assert x.block_until_ready() is x
    assert x.copy_to_host_async() is None and jx.copy_to_host_async() is None


@pytest.mark.parametrize("value", [
    np.array([1.0, 2.0], np.float32), np.arange(6, dtype=np.int32).reshape(2, 3), np.array(1.5, np.float32),
    np.array(True), np.zeros((0, 2), np.float32), np.linspace(0, 1, 2000, dtype=np.float32),
    np.arange(40, dtype=np.float32).reshape(2, 20) / 7, np.array([1 + 2j], np.complex64),
], ids=["vector", "matrix", "scalar", "bool", "empty", "summarized", "wrapped_lines", "complex"])
def test_repr_and_str_as_jax(value: np.ndarray) -> None:
    ours, theirs = fnp.asarray(value), jnp.asarray(value)
    assert repr(ours) == repr(theirs)
    assert str(ours) == str(theirs)
    assert repr(fg.jit(lambda v: v)(value)) == repr(theirs)


def test_iteration_gives_the_rows_and_ends() -> None:
    rows = list(fnp.arange(6.0).reshape(3, 2))
    want = list(jnp.arange(6.0).reshape(3, 2))
    assert len(rows) == len(want) == 3 and all(isinstance(r, fg.Array) for r in rows)
    for r, w in zip(rows, want):
        _same_as_jax(r, w)
    assert [float(v) for v in fnp.arange(3.0)] == [0.0, 1.0, 2.0]
    with pytest.raises(TypeError):
        iter(fnp.asarray(1.0))


def test_array_protocols() -> None:
    x = fnp.arange(4.0)
    np.testing.assert_array_equal(np.from_dlpack(x), np.arange(4.0))
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(x)), np.arange(4.0))
    np.testing.assert_array_equal(x.__array__(), np.arange(4.0))
    assert np.asarray(x, dtype=np.float32).dtype == np.float32


def test_device_arrays_share_the_semantics(require_opencl: None) -> None:
    y = fg.jit(lambda a: a * 2, backend="opencl")(F32)
    assert isinstance(y, fg.Array)
    with pytest.raises(TypeError, match=r"x\.at\[idx\]\.set\(y\)"):
        y[0] = 1.0
    z = y
    z += 1
    np.testing.assert_array_equal(np.asarray(y), F32 * 2)
    np.testing.assert_array_equal(np.asarray(z), F32 * 2 + 1)
    assert repr(y) == repr(jnp.asarray(F32 * 2))
    assert y.device.platform == "opencl" and y.devices() == {y.device} and y.sharding.device == y.device
    assert y.block_until_ready() is y and y.copy_to_host_async() is None


# --- indexing a captured concrete array with a traced index ----------------------------------


def test_captured_array_indexed_by_a_traced_index() -> None:
    a, ja = fnp.arange(5.0), jnp.arange(5.0)
    _same_as_jax(fg.jit(lambda i: a[i])(2), jax.jit(lambda i: ja[i])(2))
    _same_as_jax(fg.jit(lambda i: a[i, None] * 2)(3), jax.jit(lambda i: ja[i, None] * 2)(3))
    _same_as_jax(fg.vmap(lambda i: a[i])(np.array([0, 4, 1])), jax.vmap(lambda i: ja[i])(np.array([0, 4, 1])))
    _same_as_jax(fg.grad(lambda x: a[(x * 2).astype(np.int64)] * x)(1.5),
                 jax.grad(lambda x: ja[(x * 2).astype(np.int64)] * x)(1.5))
    m, jm = fnp.arange(6.0).reshape(2, 3), jnp.arange(6.0).reshape(2, 3)
    _same_as_jax(fg.jit(lambda i, j: m[i, j] + m[:, j].sum())(1, 2),
                 jax.jit(lambda i, j: jm[i, j] + jm[:, j].sum())(1, 2))


# --- out-of-bounds indices, eagerly and under jit --------------------------------------------

OOB_CASES: dict[str, Callable[[Any, Any], Any]] = {
    "getitem_high": lambda x, np_: x[11],
    "getitem_low": lambda x, np_: x[-14],
    "getitem_array": lambda x, np_: x[np_.array([1, 12, -1, -30])],
    "getitem_2d": lambda x, np_: x.reshape(2, 5)[3, 7],
    "at_get": lambda x, np_: x.at[11].get(),
    "at_get_clip": lambda x, np_: x.at[np_.array([-12, 12])].get(mode="clip"),
    "at_get_fill": lambda x, np_: x.at[np_.array([1, 12, -1, -30])].get(mode="fill"),
    "at_get_fill_value": lambda x, np_: x.at[np_.array([3, 10])].get(mode="fill", fill_value=-7.0),
    "at_set_dropped": lambda x, np_: x.at[11].set(100.0),
    "at_set_array_dropped": lambda x, np_: x.at[np_.array([2, 12])].set(100.0),
    "at_add_negative_dropped": lambda x, np_: x.at[-11].add(100.0),
    "at_add_clip": lambda x, np_: x.at[np_.array([2, 12])].add(100.0, mode="clip"),
    "at_add_drop": lambda x, np_: x.at[np_.array([2, 12])].add(100.0, mode="drop"),
    "at_mul_promise_in_bounds": lambda x, np_: x.at[np_.array([2, 3])].multiply(3.0, mode="promise_in_bounds"),
    "at_set_2d_dropped": lambda x, np_: x.reshape(2, 5).at[1, 9].set(5.0),
}


@pytest.mark.parametrize("name", list(OOB_CASES))
def test_out_of_bounds_indices_follow_jax(name: str) -> None:
    case = OOB_CASES[name]
    want = case(jnp.asarray(F32), jnp)
    _same_as_jax(case(fnp.asarray(F32), np), want)
    _same_as_jax(fg.jit(lambda x: case(x, np))(F32), want)


def test_out_of_bounds_indices_follow_jax_on_opencl(require_opencl: None) -> None:
    for name in ("getitem_high", "getitem_array", "at_get_fill", "at_set_array_dropped", "at_add_clip"):
        case = OOB_CASES[name]
        _same_as_jax(fg.jit(lambda x, case=case: case(x, np), backend="opencl")(F32), case(jnp.asarray(F32), jnp))
    take = fg.jit(lambda x, i: (x[i], x.at[i].set(-5.0), fnp.take(x, i)), backend="opencl")
    for i in (3, 25, -11):
        for got, want in zip(take(F32, np.int32(i)), (F32[min(max(i + 10 if i < 0 else i, 0), 9)],
                                                       jnp.asarray(F32).at[i].set(-5.0), jnp.take(F32, i))):
            _same_as_jax(got, want)


@pytest.mark.parametrize("i", [3, 10, 25, -1, -10, -11, -40])
def test_traced_out_of_bounds_indices_follow_jax(i: int) -> None:
    for f in (lambda x, i: x[i], lambda x, i: x.at[i].get(), lambda x, i: x.at[i].set(-5.0),
              lambda x, i: x.at[i].add(-5.0), lambda x, i: x.at[i].get(mode="fill", fill_value=-1.0),
              lambda x, i: x.reshape(2, 5)[1, i]):
        _same_as_jax(fg.jit(f)(F32, i), jax.jit(f)(F32, i))


TAKE_CASES: dict[str, Callable[[Any, Any, Any], Any]] = {
    "default_fill": lambda m, x, i: m.take(x, i),
    "fill_value": lambda m, x, i: m.take(x, i, fill_value=-3.0),
    "fill_int": lambda m, x, i: m.take(x.astype(np.int32), i),
    "fill_bool": lambda m, x, i: m.take(x > 2, i),
    "clip": lambda m, x, i: m.take(x, i, mode="clip"),
    "wrap": lambda m, x, i: m.take(x, i, mode="wrap"),
    "axis": lambda m, x, i: m.take(x.reshape(2, 5), i, axis=1),
    "along_default": lambda m, x, i: m.take_along_axis(x, i, axis=0),
    "along_clip": lambda m, x, i: m.take_along_axis(x, i, axis=0, mode="clip"),
    "along_fill_value": lambda m, x, i: m.take_along_axis(x, i, axis=0, fill_value=9.0),
    "along_promise_in_bounds": lambda m, x, i: m.take_along_axis(x, i % 10, axis=0, mode="promise_in_bounds"),
    "along_2d": lambda m, x, i: m.take_along_axis(x.reshape(2, 5), i.reshape(2, 3) % 7, axis=1),
}

IDX = np.array([0, 9, 10, -1, -11, 25], np.int32)


@pytest.mark.parametrize("name", list(TAKE_CASES))
def test_take_follows_jax(name: str) -> None:
    case = TAKE_CASES[name]
    want = case(jnp, jnp.asarray(F32), jnp.asarray(IDX))
    _same_as_jax(case(fnp, fnp.asarray(F32), IDX), want)
    _same_as_jax(fg.jit(lambda x, i: case(fnp, x, i))(F32, IDX), want)


@pytest.mark.parametrize("mode", [None, "fill", "clip"])
def test_take_gradients_follow_jax(mode: str | None) -> None:
    idx = np.array([1, 12, 1, -1, -15], np.int32)
    for f in (lambda m, x: m.sum(m.take(x, idx, mode=mode) * 2.0),
              lambda m, x: m.sum(m.take_along_axis(x, idx, axis=0, mode=mode) ** 2)):
        want = jax.grad(lambda x, f=f: f(jnp, x))(F32)
        _same_as_jax(fg.grad(lambda x, f=f: f(fnp, x))(F32), want)
        _same_as_jax(fg.jit(fg.grad(lambda x, f=f: f(fnp, x)))(F32), want)


def test_take_rejects_modes_jax_rejects() -> None:
    with pytest.raises(ValueError, match="mode"):
        fnp.take(F32, IDX, mode="drop")
    with pytest.raises(NotImplementedError, match="raise"):
        fnp.take(F32, IDX, mode="raise")
    with pytest.raises(ValueError, match="mode"):
        fnp.take_along_axis(F32, IDX, axis=0, mode="wrap")


# --- no result aliases another result or an input (#36 item 3) -------------------------------


def test_gradients_of_a_sum_are_distinct_immutable_arrays() -> None:
    p = {"a": np.ones(3), "b": np.ones(3)}
    g = fg.grad(lambda p: fnp.sum((p["a"] + p["b"]) ** 2))(p)
    assert g["a"] is not g["b"]
    for leaf in (g["a"], g["b"]):
        assert isinstance(leaf, fg.Array) and not np.asarray(leaf).flags.writeable
        with pytest.raises(TypeError):
            leaf[0] = 0.0
    np.testing.assert_array_equal(g["a"], [4.0, 4.0, 4.0])
    np.testing.assert_array_equal(g["b"], [4.0, 4.0, 4.0])


def test_vjp_does_not_return_the_callers_cotangent() -> None:
    ct = np.ones(3)
    out, f_vjp = fg.vjp(lambda u, v: u + v, np.ones(3), np.full(3, 2.0))
    cu, cv = f_vjp(ct)
    assert cu is not ct and cv is not ct and cu is not cv
    assert not np.shares_memory(cu, ct) and not np.shares_memory(cv, ct)
    ct[:] = 5.0
    np.testing.assert_array_equal(cu, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(cv, [1.0, 1.0, 1.0])


@pytest.mark.parametrize("make", [
    lambda x: fnp.asarray(x), lambda x: fnp.reshape(x, (2, 2)), lambda x: fnp.ravel(x), lambda x: fg.device_put(x),
    lambda x: fg.jvp(lambda a: a, (x,), (x,))[1], lambda x: fg.vmap(lambda a: a)(x), lambda x: fg.jit(lambda a: a)(x),
    lambda x: fg.eval_graph(fg.make_graph(lambda a: a)(x), x)[0], lambda x: fg.vjp(lambda a: a, x)[0],
    lambda x: fg.linearize(lambda a: a * 1.0, x)[1](x), lambda x: fnp.transpose(x),
], ids=["asarray", "reshape", "ravel", "device_put", "jvp", "vmap", "jit", "eval_graph", "vjp_out", "linearize",
        "transpose"])
def test_results_never_alias_the_callers_arrays(make: Callable[[Any], Any]) -> None:
    x = np.arange(4.0)
    out = make(x)
    before = np.array(out)
    assert isinstance(out, fg.Array) and not np.shares_memory(out, x)
    x[:] = -1.0
    np.testing.assert_array_equal(out, before)


def test_calls_leave_inputs_and_earlier_results_alone() -> None:
    small = fg.jit(lambda x: (x * 2 + 1, fnp.sin(x)))
    big = fg.jit(lambda x: x * 3.0)
    x1, x2 = np.arange(5.0), np.arange(5.0) + 10
    a = small(x1)
    b = small(x2)
    np.testing.assert_array_equal(a[0], x1 * 2 + 1)
    np.testing.assert_array_equal(b[0], x2 * 2 + 1)
    np.testing.assert_array_equal(x1, np.arange(5.0))
    n = (1 << 20) // 8 + 1  # above the engine's recycling size
    first = big(np.ones(n))
    view = first[::2]
    second = big(np.full(n, 2.0))
    np.testing.assert_array_equal(first[:3], 3.0)
    np.testing.assert_array_equal(second[:3], 6.0)
    del first, second
    third = big(np.full(n, 4.0))  # may reuse a dropped output buffer
    np.testing.assert_array_equal(third[:3], 12.0)
    np.testing.assert_array_equal(view[:3], 3.0)
    assert not np.asarray(third).flags.writeable
