"""The API pieces JAX programs call around their maths, run on JAX and on fungraph with only
the import changed, in both dtype modes: ``jax.debug.print`` inside ``jit`` and ``vmap``,
``eval_shape`` with ``ShapeDtypeStruct``, ``make_jaxpr``, ``block_until_ready``/``device_put``/
``device_get``, the "sharp bits" dtype and indexing rules, the SPMD example's ``pmap`` training
step with ``psum``, ``vmap``'s and ``jit``'s argument forms, ``jit(...).lower().compile()`` and
``pure_callback`` with ``vmap_method``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from tests.helpers import jax_or_skip
from tests.jax_programs import check_program

jax, jnp = jax_or_skip()


def _debug_print(lib: Any, np_: Any) -> Any:
    @lib.jit
    def f(x: Any) -> Any:
        lib.debug.print("x = {}", x)
        y = x * 2
        lib.debug.print("y = {y}, sum={s}", y=y, s=np_.sum(y))
        return np_.sin(y)

    out = f(np_.arange(3.))
    lib.vmap(lambda x: lib.debug.print("v {}", x))(np_.arange(2.))
    lib.debug.print("eager {x}", x=np_.float32(1.5))
    return out


def _eval_shape(lib: Any, np_: Any) -> Any:
    def f(x: Any, y: Any) -> Any:
        return {"a": np_.dot(x, y), "b": np_.tanh(x)}

    out = lib.eval_shape(f, lib.ShapeDtypeStruct((2, 3), np_.float32), lib.ShapeDtypeStruct((3, 4), np_.float32))
    sums = lib.eval_shape(lambda p: lib.tree.map(lambda t: t.sum(0), p),
                          {"w": np_.ones((5, 2)), "b": np_.ones(5, np_.int32)})
    sds = lib.ShapeDtypeStruct((3,), np_.float32)
    return ([(o.shape, str(o.dtype)) for o in lib.tree.leaves(out)],
            [(o.shape, str(o.dtype)) for o in lib.tree.leaves(sums)],
            sds.shape, str(sds.dtype), sds.ndim, sds.size, len(sds), sds.weak_type, sds.update(shape=(2, 2)).shape,
            lib.eval_shape(lambda k: lib.random.split(k, 3), lib.random.PRNGKey(0)).shape)


def _make_jaxpr(lib: Any, np_: Any) -> Any:
    printed = str(lib.make_jaxpr(lambda x: np_.sin(x) * 2)(np_.ones(3)))
    printed_grad = str(lib.make_jaxpr(lib.grad(lambda x: np_.sum(x ** 2)))(np_.ones(3)))
    return "sin" in printed, "mul" in printed_grad


def _devices(lib: Any, np_: Any) -> Any:
    x = lib.device_put(np_.arange(3.))
    y = lib.block_until_ready({"a": x * 2, "b": [x]})
    z = lib.device_put(np.ones(2), lib.devices()[0])
    host = lib.device_get({"z": z})
    return (y, z, host, len(lib.devices()) >= 1, lib.local_device_count(), lib.device_count(),
            type(host["z"]).__name__, x.block_until_ready())


def _sharp_bits(lib: Any, np_: Any) -> Any:
    x = np_.arange(10)
    return (str(np_.array([1, 2, 3]).dtype), str(np_.arange(3.).dtype), np_.array(1.0),
            np_.zeros(3, dtype=np_.int8) + 1,
            np_.array([250, 3], dtype=np_.uint8) + np_.uint8(10), np_.array([1, 2], np_.int16) * 2.5,
            np_.sum(np_.array([True, True])), np_.ones(3, np_.float16) * 2,
            np_.array(3) // 2, np_.linspace(0, 1, 5), np_.array([1.5]).astype(np_.int32),
            x[11], x.at[11].get(mode="fill", fill_value=-1), np_.arange(5.).at[10].set(1.),
            np_.arange(5).at[np_.array([1, 1])].add(1), np_.array([1, 2, 3]).at[1].multiply(5),
            str(np_.result_type(np_.int32, np_.float16)), str(np_.promote_types(np_.uint8, np_.int8)),
            np_.where(np_.array([True, False]), 1., 0), lib.grad(lambda x: np_.where(x > 0., np_.sqrt(x), 0.))(0.),
            lib.grad(lambda x: np_.sqrt(np_.where(x > 0., x, 1.)))(0.), lib.jit(lambda i: x[i])(20),
            lib.jit(lambda i: lib.lax.dynamic_slice(x, (i,), (3,)))(8), np_.cumsum(np_.arange(4)))


def _spmd_training_step(lib: Any, np_: Any) -> Any:
    lax = lib.lax
    ndev = lib.local_device_count()

    def loss(params: Any, batch: Any) -> Any:
        inputs, targets = batch
        preds = np_.tanh(inputs @ params[0] + params[1])
        return -np_.mean(np_.sum(preds * targets, axis=1))

    @partial(lib.pmap, axis_name="batch")
    def spmd_update(params: Any, batch: Any) -> Any:
        grads = [lax.psum(g, "batch") for g in lib.grad(loss)(params, batch)]
        return [p - 0.1 * g for p, g in zip(params, grads)]

    params = [np_.ones((3, 2)) * 0.1, np_.zeros(2)]
    replicated = lib.tree.map(lambda x: np_.broadcast_to(x, (ndev,) + x.shape), params)
    inputs = np_.arange(12.).reshape(ndev, 4, 3) / 12
    targets = np_.tile(np_.eye(2)[np_.array([0, 1, 1, 0])], (ndev, 1, 1))
    for _ in range(2):
        replicated = spmd_update(replicated, (inputs, targets))
    return (replicated, lib.pmap(lambda x: x * 2)(np_.arange(ndev * 3.).reshape(ndev, 3)),
            lib.pmap(lambda x: lax.pmean(x, "i"), axis_name="i")(np_.ones((ndev, 2))),
            lib.pmap(lambda x: lax.axis_index("i") + x, axis_name="i")(np_.zeros(ndev, np_.int32)))


def _transformation_arguments(lib: Any, np_: Any) -> Any:
    @partial(lib.jit, static_argnames=["n"])
    def power(x: Any, n: int) -> Any:
        return x ** n

    @partial(lib.jit, static_argnums=(1,))
    def reshape(x: Any, shape: tuple[int, ...]) -> Any:
        return np_.reshape(x, shape)

    class Scale:
        def __init__(self, s: float) -> None:
            self.s = s

        @partial(lib.jit, static_argnums=0)
        def __call__(self, x: Any) -> Any:
            return x * self.s

        def __hash__(self) -> int:
            return hash(self.s)

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Scale) and self.s == other.s

    x, y = np_.arange(6.).reshape(2, 3), np_.arange(12.).reshape(3, 4)
    compiled = lib.jit(lambda x: x + 1).lower(np_.ones(2)).compile()
    return (power(np_.arange(3.), n=3), reshape(np_.arange(6.), (2, 3)), Scale(3.)(np_.ones(2)), compiled(np_.ones(2)),
            lib.vmap(np_.dot, in_axes=(0, None))(x, y), lib.vmap(np_.dot, in_axes=(None, 1))(x[0], y),
            lib.vmap(lambda d: d["a"] * d["b"], in_axes=({"a": 0, "b": None},))({"a": x, "b": 2.}),
            lib.vmap(lib.vmap(lambda a, b: a * b))(x, x), lib.vmap(lambda x: (x, x.sum()))(x),
            lib.vmap(np_.sum, in_axes=1)(x), lib.vmap(lambda a: a * 2, out_axes=1)(x))


def _host_callbacks(lib: Any, np_: Any) -> Any:
    def host_sin(x: Any, *, scale: float) -> Any:
        return np.sin(np.asarray(x)) * scale

    def call(x: Any, method: Any = None) -> Any:
        return lib.pure_callback(host_sin, lib.ShapeDtypeStruct(x.shape, x.dtype), x, scale=2.0, vmap_method=method)

    return (lib.jit(lambda x: call(x) + 1)(np_.arange(3.)),
            lib.vmap(partial(call, method="sequential"))(np_.ones((2, 3))),
            lib.jit(lib.vmap(partial(call, method="expand_dims")))(np_.arange(6.).reshape(3, 2)))


PROGRAMS: dict[str, Callable[[Any, Any], Any]] = {
    "debug_print": _debug_print, "eval_shape": _eval_shape, "make_jaxpr": _make_jaxpr, "devices": _devices,
    "sharp_bits": _sharp_bits, "spmd_training_step": _spmd_training_step,
    "transformation_arguments": _transformation_arguments, "host_callbacks": _host_callbacks,
}


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_api_program_matches_jax(name: str, x64: bool) -> None:
    check_program(jax, jnp, PROGRAMS[name], x64, rtol32=2e-6, rtol64=1e-12)


@pytest.mark.parametrize("method, unbatched_shape", [("expand_dims", (1, 2)), ("broadcast_all", (3, 2)),
                                                     ("sequential", (2,))])
def test_pure_callback_sees_the_batch_as_its_vmap_method_says(method: str, unbatched_shape: tuple) -> None:
    for lib, np_ in ((fg, fnp), (jax, jnp)):
        seen: list[tuple] = []

        def host(x: Any, y: Any) -> Any:
            seen.append(np.shape(y))
            return np.asarray(x) * np.asarray(y)

        def f(x: Any, y: Any, lib: Any = lib) -> Any:
            return lib.pure_callback(host, lib.ShapeDtypeStruct(x.shape, x.dtype), x, y, vmap_method=method)

        out = lib.vmap(f, in_axes=(0, None))(np_.arange(6.).reshape(3, 2), np_.array([1., 2.]))
        np.testing.assert_allclose(out, np.arange(6.).reshape(3, 2) * [1., 2.])
        assert set(seen) == {unbatched_shape}, (lib.__name__, seen)


def test_pure_callback_refuses_an_unknown_vmap_method() -> None:
    with pytest.raises(ValueError, match="vmap_method must be one of"):
        fg.pure_callback(np.sin, fg.ShapeDtypeStruct((), fnp.float32), 1.0, vmap_method="vectorized")


def test_shape_dtype_struct_reads_as_jax_s() -> None:
    ours = fg.ShapeDtypeStruct((2, 3), np.float32, weak_type=True)
    theirs = jax.ShapeDtypeStruct((2, 3), np.float32, weak_type=True)
    assert (ours.ndim, ours.size, len(ours), ours.weak_type, ours.sharding) == (2, 6, 2, True, None)
    assert (theirs.ndim, theirs.size, len(theirs), theirs.weak_type) == (2, 6, 2, True)
    assert repr(ours) == repr(theirs)
    assert ours.update(dtype=np.int32) == fg.ShapeDtypeStruct((2, 3), np.int32, weak_type=True)
    with pytest.raises(TypeError, match="len"):
        len(fg.ShapeDtypeStruct((), np.float32))


@pytest.mark.parametrize("x64", [True, False])
def test_weak_bools_combine_as_bools_as_jax_s(x64: bool) -> None:
    """A comparison of weak values is a weak bool; combining it with ``|``, ``+`` or Python's
    ``True`` stays bool (JAX's lattice has no weak bool node), where it used to become int32."""
    def program(lib: Any, np_: Any) -> Any:
        a = np_.isnan(np_.asarray(1.0))
        b = np_.asarray(2.0) < 0.
        return a | b, a + b, a | True, a & (np_.ones(2) > 0), a * 2, np_.ones(2, np_.int8) + a

    check_program(jax, jnp, program, x64)


@pytest.mark.parametrize("staged", [False, True])
def test_pure_callback_without_a_vmap_method_refuses_vmap_as_jax_s(staged: bool) -> None:
    """JAX 0.10's default ``vmap_method=None`` cannot be batched: ``NotImplementedError`` naming
    the methods (fungraph called the function once per example); an explicit method works, and
    a call whose arguments are not batched needs none."""
    errors = []
    for lib, np_ in ((fg, fnp), (jax, jnp)):
        def f(x: Any, lib: Any = lib) -> Any:
            return lib.pure_callback(np.sin, lib.ShapeDtypeStruct(x.shape, x.dtype), x)

        mapped = lib.jit(lib.vmap(f)) if staged else lib.vmap(f)
        with pytest.raises(NotImplementedError) as info:
            mapped(np_.ones((3, 2)))
        errors.append(str(info.value))
        unbatched = lib.vmap(lambda x, lib=lib, f=f: f(np_.ones(2)) + x)(np_.ones(3))
        np.testing.assert_allclose(np.asarray(unbatched), np.sin(1.) + 1, rtol=1e-6)
    assert errors[0] == errors[1]
    assert "Got vmap_method=None" in errors[0]
