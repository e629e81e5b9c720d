"""Snippets from JAX's tutorials, run on JAX and on fungraph with only the import changed, in
both dtype modes: "Thinking in JAX", "JAX - The Sharp Bits", "Automatic vectorization",
"Just-in-time compilation", "Control flow and logical operators with JIT", "Pseudorandom
numbers", "Generalized convolutions", "Type promotion semantics" and the "jax.Array
migration" guide. Each program is written as the page writes it, on small inputs."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest

from tests.helpers import jax_or_skip
from tests.jax_programs import check_program

jax, jnp = jax_or_skip()


def _thinking_in_jax(lib: Any, np_: Any) -> Any:
    # JAX docs, "Thinking in JAX": numpy-like arrays, immutability, lax's strictness, jit's rules
    lax = lib.lax
    x_jnp = np_.linspace(0, 10, 100)
    y_jnp = 2 * np_.sin(x_jnp) * np_.cos(x_jnp)
    x = np_.arange(10)
    y = x.at[0].set(10)
    conv = np_.convolve(np_.array([1, 2, 1]), np_.ones(10))
    a = np_.array([1, 2, 1], dtype=np_.float32)
    b = np_.ones(10, dtype=np_.float32)
    general = lax.conv_general_dilated(a.reshape(1, 1, 3), b.reshape(1, 1, 10), window_strides=(1,),
                                       padding=[(len(b) - 1, len(b) - 1)])

    def norm(X: Any) -> Any:
        X = X - X.mean(0)
        return X / X.std(0)

    X = np_.array(np.random.RandomState(0).rand(50, 4))

    @partial(lib.jit, static_argnums=(1,))
    def f(x: Any, neg: bool) -> Any:
        return -x if neg else x

    @lib.jit
    def g(x: Any) -> Any:
        return x.reshape((np.prod(x.shape),))

    return (y_jnp, x, y, np_.add(1, 1.0), lax.add(np_.float32(1), np_.float32(2.0)), conv, general,
            lib.jit(norm)(X), norm(X), f(1, True), g(np_.ones((2, 3))))


def _sharp_bits(lib: Any, np_: Any) -> Any:
    # JAX docs, "JAX - The Sharp Bits": pure functions, in-place updates, out-of-bounds indexing,
    # dynamic shapes, NaNs and dtypes
    g = 0.

    def impure_uses_globals(x: Any) -> Any:
        return x + g

    print("First call: ", lib.jit(impure_uses_globals)(4.))
    g = 10.
    print("Second call: ", lib.jit(impure_uses_globals)(5.))
    print("Third call, different type: ", lib.jit(impure_uses_globals)(np_.array([4.])))

    def pure_uses_internal_state(x: Any) -> Any:
        state = dict(even=0, odd=0)
        for i in range(10):
            state["even" if i % 2 == 0 else "odd"] += x
        return state["even"] + state["odd"]

    array = np_.arange(10)
    print(lib.lax.fori_loop(0, 10, lambda i, x: x + array[i], 0))
    jax_array = np_.zeros((3, 3), dtype=np_.float32)
    updated = jax_array.at[1, :].set(1.0)
    print("updated array:\n", updated)
    new_add = updated.at[::2, 1:].add(7.)
    new_mul = new_add.at[:, 2].multiply(2.)

    def nansum(x: Any) -> Any:
        mask = ~np_.isnan(x)
        return np_.where(mask, x, 0).sum()

    x = np_.array([1, 2, np.nan, 3, 4])
    return (lib.jit(pure_uses_internal_state)(5.), updated, new_add, new_mul, np_.arange(10.0).at[11].get(),
            np_.arange(10.0).at[11].get(mode="fill", fill_value=np_.nan), np_.arange(10)[11],
            nansum(x), lib.jit(nansum)(x), np_.divide(0., 0.), np_.arange(254.0, 258.0).astype("uint8"),
            np_.sum(np_.array([1, 2, 3])), np_.sum(np_.array(list(range(5)))),
            lib.random.uniform(lib.random.PRNGKey(0), (3,), dtype=np_.float64), np_.array([1, 2, 3]) / 2)


def _vectorization(lib: Any, np_: Any) -> Any:
    # JAX docs, "Automatic vectorization": a hand-written convolution batched by hand and by vmap
    x = np_.arange(5)
    w = np_.array([2., 3., 4.])

    def convolve(x: Any, w: Any) -> Any:
        output = []
        for i in range(1, len(x) - 1):
            output.append(np_.dot(x[i - 1:i + 2], w))
        return np_.array(output)

    xs = np_.stack([x, x])
    ws = np_.stack([w, w])

    def manually_batched_convolve(xs: Any, ws: Any) -> Any:
        output = []
        for i in range(xs.shape[0]):
            output.append(convolve(xs[i], ws[i]))
        return np_.stack(output)

    def manually_vectorized_convolve(xs: Any, ws: Any) -> Any:
        output = []
        for i in range(1, xs.shape[-1] - 1):
            output.append(np_.sum(xs[:, i - 1:i + 2] * ws, axis=1))
        return np_.stack(output, axis=1)

    auto_batch_convolve = lib.vmap(convolve)
    auto_batch_convolve_v2 = lib.vmap(convolve, in_axes=1, out_axes=1)
    batch_convolve_v3 = lib.vmap(convolve, in_axes=[0, None])
    return (convolve(x, w), manually_batched_convolve(xs, ws), manually_vectorized_convolve(xs, ws),
            auto_batch_convolve(xs, ws), auto_batch_convolve_v2(np_.transpose(xs), np_.transpose(ws)),
            batch_convolve_v3(xs, w), lib.jit(auto_batch_convolve)(xs, ws))


def _jit_compilation(lib: Any, np_: Any) -> Any:
    # JAX docs, "Just-in-time compilation": selu, static arguments, and what is traced when
    def selu(x: Any, alpha: float = 1.67, lambda_: float = 1.05) -> Any:
        return lambda_ * np_.where(x > 0, x, alpha * np_.exp(x) - alpha)

    def f(x: Any, y: Any) -> Any:
        print("Running f():")
        return np_.dot(x + 1, y + 1)

    f_jit = lib.jit(f)
    x, y = np_.arange(6.).reshape(2, 3) / 6, np_.arange(12.).reshape(3, 4) / 12
    outs = [f_jit(x, y), f_jit(x * 2, y), f_jit(x[:, :2], y[:2])]

    def cond_f(x: Any) -> Any:
        if x > 0:
            return x
        return 2 * x

    def g(x: Any, n: int) -> Any:
        i = 0
        while i < n:
            i += 1
        return x + i

    def loop_body(prev_i: Any) -> Any:
        return prev_i + 1

    def g_inner_jitted_normal(x: Any, n: int) -> Any:
        i = 0
        while i < n:
            i = lib.jit(loop_body)(i)
        return x + i

    @partial(lib.jit, static_argnames=["n"])
    def g_jit_decorated(x: Any, n: int) -> Any:
        i = 0
        while i < n:
            i += 1
        return x + i

    return (selu(np_.arange(-3., 3.)), lib.jit(selu)(np_.arange(-3., 3.)), outs,
            lib.jit(cond_f, static_argnames=["x"])(10.), lib.jit(cond_f, static_argnums=0)(-2.),
            lib.jit(g, static_argnames=["n"])(10, 20), g_inner_jitted_normal(10, 20), g_jit_decorated(10, 20))


def _logical_operators(lib: Any, np_: Any) -> Any:
    # JAX docs, "Control flow and logical operators with JIT"
    lax = lib.lax

    def f(x: Any) -> Any:
        if x < 3:
            return 3. * x ** 2
        return -4 * x

    def g(x: Any) -> Any:
        y = 0.
        for i in range(x.shape[0]):
            y = y + x[i]
        return y

    def f_loop(x: Any) -> Any:
        for _ in range(3):
            x = 2 * x
        return x

    def python_check_positive_even(x: Any) -> Any:
        is_even = x % 2 == 0
        return lax.cond(np_.logical_and(x > 0, is_even), lambda: 1, lambda: 0)

    def where_positive_even(x: Any) -> Any:
        return np_.where((x > 0) & (x % 2 == 0), x, -x)

    operand = np_.array([0.])
    xs = np_.arange(-3, 5)
    return (lib.grad(f)(2.), lib.grad(f)(4.), lib.jit(f_loop)(3), lib.jit(g)(np_.array([1., 2., 3.])),
            lib.jit(f, static_argnums=0)(2.), lax.cond(True, lambda x: x + 1, lambda x: x - 1, operand),
            lax.cond(False, lambda x: x + 1, lambda x: x - 1, operand),
            lib.jit(python_check_positive_even)(4), lib.vmap(python_check_positive_even)(xs),
            lib.jit(where_positive_even)(xs), lax.select(xs > 0, xs, -xs),
            np_.logical_or(xs > 2, xs < -1), np_.logical_not(xs > 0), ~(xs > 0), np_.logical_xor(xs > 0, xs < 3),
            lax.while_loop(lambda x: x < 10, lambda x: x + 1, 0), lax.fori_loop(0, 10, lambda i, x: x + i, 0))


def _pseudorandom_numbers(lib: Any, np_: Any) -> Any:
    # JAX docs, "Pseudorandom numbers": explicit keys, split, and sequential equivalence
    random = lib.random
    key = random.PRNGKey(42)
    print(random.normal(key))
    print(random.normal(key))
    for i in range(3):
        key, subkey = random.split(key)
        val = random.normal(subkey)
        print(f"number {i}: {val}")
    key, *forty_two_subkeys = random.split(key, num=43)
    key = random.PRNGKey(42)
    subkeys = random.split(key, 3)
    sequence = np.stack([random.normal(subkey) for subkey in subkeys])
    print("individually:", sequence)
    print("all at once: ", random.normal(key, shape=(3,)))
    return (len(forty_two_subkeys), forty_two_subkeys[-1], random.uniform(key, (2, 2)),
            random.randint(key, (4,), 0, 10), random.bernoulli(key, 0.3, (5,)), random.truncated_normal(key, -1., 1.))


def _convolutions(lib: Any, np_: Any) -> Any:
    # JAX docs, "Generalized convolutions in JAX": smoothing, scipy.signal, and lax's general
    # dilated convolutions with dimension numbers, strides and dilations
    lax, jsp = lib.lax, lib.scipy
    key = lib.random.PRNGKey(1701)
    x = np_.linspace(0, 10, 50)
    y = np_.sin(x) + 0.2 * lib.random.normal(key, shape=(50,))
    window = np_.ones(10) / 10
    y_smooth = np_.convolve(y, window, mode="same")
    image = np_.outer(np_.linspace(0., 1., 12), np_.linspace(1., 0., 10))
    noisy_image = image + 0.1 * lib.random.normal(key, image.shape)
    gx = np_.linspace(-3, 3, 7)
    window2 = jsp.stats.norm.pdf(gx) * jsp.stats.norm.pdf(gx[:, None])
    smooth_image = jsp.signal.convolve(noisy_image, window2, mode="same")
    kernel = np_.zeros((3, 3, 3, 3), dtype=np_.float32)
    kernel += np_.array([[1, 1, 0], [1, 0, -1], [0, -1, -1]])[:, :, np_.newaxis, np_.newaxis]
    img = np_.zeros((1, 20, 18, 3), dtype=np_.float32)
    for k in range(3):
        x0, y0 = 3 + 5 * k, 2 + 5 * k
        img = img.at[0, x0:x0 + 3, y0:y0 + 3, k].set(1.0)
    out_nchw = lax.conv(np_.transpose(img, [0, 3, 1, 2]), np_.transpose(kernel, [3, 2, 0, 1]), (1, 1), "SAME")
    out_pad = lax.conv_with_general_padding(np_.transpose(img, [0, 3, 1, 2]), np_.transpose(kernel, [2, 3, 0, 1]),
                                            (1, 1), ((2, 2), (2, 2)), (1, 1), (1, 1))
    dn = lax.conv_dimension_numbers(img.shape, kernel.shape, ("NHWC", "HWIO", "NHWC"))
    out_nhwc = lax.conv_general_dilated(img, kernel, (1, 1), "SAME", (1, 1), (1, 1), dn)
    out_strided = lax.conv_general_dilated(img, kernel, (2, 2), "VALID", (1, 1), (1, 1), dn)
    out_dilated = lax.conv_general_dilated(img, kernel, (1, 1), "VALID", (1, 1), (3, 3), dn)
    out_transposed = lax.conv_general_dilated(img, kernel, (1, 1), ((0, 0), (0, 0)), (2, 2), (1, 1), dn)
    k1 = np_.array([[[1, 0, -1], [-1, 0, 1]], [[1, 1, 1], [-1, -1, -1]]], dtype=np_.float32).transpose([2, 1, 0])
    data1 = np_.zeros((1, 20, 2), dtype=np_.float32)
    data1 = data1.at[0, 4:8, 0].set(1.0).at[0, 10:14, 1].set(1.0)
    dn1 = lax.conv_dimension_numbers(data1.shape, k1.shape, ("NWC", "WIO", "NWC"))
    out1 = lax.conv_general_dilated(data1, k1, (1,), "SAME", (1,), (1,), dn1)
    k3 = np_.ones((2, 2, 2, 1, 1), dtype=np_.float32)
    data3 = np_.arange(64., dtype=np_.float32).reshape(1, 4, 4, 4, 1)
    dn3 = lax.conv_dimension_numbers(data3.shape, k3.shape, ("NHWDC", "HWDIO", "NHWDC"))
    out3 = lax.conv_general_dilated(data3, k3, (1, 1, 1), "SAME", (1, 1, 1), (1, 1, 1), dn3)
    return (y_smooth, smooth_image, jsp.signal.convolve2d(image, np_.ones((3, 3)) / 9, mode="valid"), out_nchw,
            out_pad, out_nhwc, out_strided, out_dilated, out_transposed, out1, out3, dn)


def _type_promotion(lib: Any, np_: Any) -> Any:
    # JAX docs, "Type promotion semantics": the promotion table, with arrays and Python scalars
    types = [np_.bool_, np_.uint8, np_.uint16, np_.uint32, np_.int8, np_.int16, np_.int32, np_.int64,
             np_.float16, np_.bfloat16, np_.float32, np_.float64, np_.complex64]
    scalars = [True, 1, 1.0, 1j]
    table = [[str((np_.zeros(1, a) + np_.zeros(1, b)).dtype) for b in types] for a in types]
    weak = [[repr(np_.zeros(1, a) * s) for s in scalars] for a in types]
    return (table, weak, [str(np_.promote_types(a, b)) for a in types for b in types[:4]],
            repr(np_.int8(1) + 1), repr(np_.float16(1) * 2.5), repr(np_.array(3) * 1.5), repr(np_.asarray(2.0) + 1))


def _array_migration(lib: Any, np_: Any) -> Any:
    # JAX docs, "jax.Array migration": one array type, its device and sharding
    x = np_.arange(8.).reshape(2, 4)
    y = lib.device_put(x, lib.devices()[0])
    z = lib.jit(lambda a: a * 2)(y)
    return (isinstance(x, lib.Array), isinstance(z, lib.Array), x.is_fully_addressable,
            x.sharding.is_fully_replicated, len(x.sharding.device_set), x.devices() == {lib.devices()[0]},
            np.asarray(z), z.sharding.shard_shape(z.shape), repr(z), str(z))


PROGRAMS: dict[str, Callable[[Any, Any], Any]] = {
    "thinking_in_jax": _thinking_in_jax, "sharp_bits": _sharp_bits, "vectorization": _vectorization,
    "jit_compilation": _jit_compilation, "logical_operators": _logical_operators,
    "pseudorandom_numbers": _pseudorandom_numbers, "convolutions": _convolutions, "type_promotion": _type_promotion,
    "array_migration": _array_migration,
}


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_tutorial_program_matches_jax(name: str, x64: bool) -> None:
    check_program(jax, jnp, PROGRAMS[name], x64, rtol32=2e-5, rtol64=1e-10)
