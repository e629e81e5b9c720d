"""Training loops written against ``jax.example_libraries`` (``stax`` networks trained with
``optimizers``, as JAX's mnist_classifier and the optimizers' docs do), run on JAX and on
``fungraph.example_libraries`` with only the import changed, in both dtype modes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.example_libraries import optimizers as fg_optimizers
from fungraph.example_libraries import stax as fg_stax
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
from jax.example_libraries import optimizers as jax_optimizers  # noqa: E402
from jax.example_libraries import stax as jax_stax  # noqa: E402

LIBS = {"fungraph": (fg, fnp, fg_stax, fg_optimizers), "jax": (jax, jnp, jax_stax, jax_optimizers)}


def _both_modes(program: Callable[..., Any], x64: bool) -> tuple[list[Any], list[Any]]:
    with fg.enable_x64(x64):
        ours = fg.tree_util.tree_leaves(program(*LIBS["fungraph"]))
    with jax.enable_x64(x64):
        theirs = jax.tree_util.tree_leaves(program(*LIBS["jax"]))
    return ours, theirs


def _assert_same(ours: list[Any], theirs: list[Any], x64: bool) -> None:
    assert len(ours) == len(theirs)
    for got, want in zip(ours, theirs):
        got, want = np.asarray(got), np.asarray(want)
        assert (got.shape, got.dtype) == (want.shape, want.dtype)
        np.testing.assert_allclose(got, want, rtol=1e-9 if x64 else 2e-5, atol=1e-9 if x64 else 2e-6)


def _classifier(lib: Any, np_: Any, stax: Any, optimizers: Any) -> Any:
    init, apply = stax.serial(stax.Conv(4, (3, 3), padding="SAME"), stax.Relu, stax.BatchNorm(),
                              stax.AvgPool((2, 2), strides=(2, 2)), stax.Flatten, stax.Dense(8), stax.Gelu,
                              stax.Dropout(0.9), stax.Dense(3), stax.LogSoftmax)
    out_shape, params = init(lib.random.PRNGKey(0), (-1, 4, 4, 2))
    images = lib.random.normal(lib.random.PRNGKey(1), (5, 4, 4, 2))
    labels = lib.nn.one_hot(np_.arange(5) % 3, 3)

    def loss(p: Any, key: Any) -> Any:
        return -np_.mean(np_.sum(apply(p, images, rng=key) * labels, axis=1))

    opt_init, opt_update, get_params = optimizers.adam(optimizers.exponential_decay(0.01, 2, 0.5))

    @lib.jit
    def step(i: Any, state: Any, key: Any) -> Any:
        return opt_update(i, lib.grad(loss)(get_params(state), key), state)

    state = opt_init(params)
    for i in range(2):
        state = step(i, state, lib.random.PRNGKey(10 + i))
    return list(out_shape[1:]), get_params(state), loss(get_params(state), lib.random.PRNGKey(3))


def _branches(lib: Any, np_: Any, stax: Any, optimizers: Any) -> Any:
    init, apply = stax.serial(stax.FanOut(2), stax.parallel(stax.Dense(4), stax.serial(stax.Dense(4), stax.Tanh)),
                              stax.FanInConcat(), stax.Elu, stax.Dense(2), stax.Softplus, stax.FanOut(2),
                              stax.parallel(stax.Selu, stax.LeakyRelu), stax.FanInSum, stax.Softmax)
    _, params = init(lib.random.PRNGKey(4), (3, 5))
    x = np_.linspace(-1.0, 1.0, 15).reshape(3, 5)
    conv_init, conv_apply = stax.serial(stax.ConvTranspose(2, (2, 2), strides=(2, 2)), stax.MaxPool((2, 2)),
                                        stax.SumPool((2, 2), padding="SAME"), stax.Sigmoid, stax.Exp)
    conv_shape, conv_params = conv_init(lib.random.PRNGKey(5), (1, 3, 3, 2))
    return apply(params, x), list(conv_shape), conv_apply(conv_params, np_.ones((1, 3, 3, 2)))


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("program", [_classifier, _branches])
def test_stax_networks_match_jax(program: Callable[..., Any], x64: bool) -> None:
    _assert_same(*_both_modes(program, x64), x64)


OPTIMIZERS = {
    "sgd": lambda o: o.sgd(0.1), "momentum": lambda o: o.momentum(0.1, 0.9),
    "nesterov": lambda o: o.nesterov(0.1, 0.9), "adagrad": lambda o: o.adagrad(0.1),
    "rmsprop": lambda o: o.rmsprop(0.1), "rmsprop_momentum": lambda o: o.rmsprop_momentum(0.1),
    "adam": lambda o: o.adam(0.1), "adamax": lambda o: o.adamax(0.1), "sm3": lambda o: o.sm3(0.1),
    "piecewise": lambda o: o.sgd(o.piecewise_constant([1, 2], [0.1, 0.01, 0.001])),
    "inverse_time": lambda o: o.momentum(o.inverse_time_decay(0.1, 1, 0.5, staircase=True), 0.5),
}


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizers_match_jax(name: str, x64: bool) -> None:
    def program(lib: Any, np_: Any, stax: Any, optimizers: Any) -> Any:
        opt_init, opt_update, get_params = OPTIMIZERS[name](optimizers)
        x = np_.arange(3.0)
        state = opt_init({"w": np_.ones((2, 3)), "b": np_.zeros(3), "s": np_.asarray(0.5)})
        loss = lambda p: np_.sum(np_.sin(p["w"] * x + p["b"])) * p["s"]  # noqa: E731
        for i in range(3):
            state = lib.jit(opt_update)(i, lib.grad(loss)(get_params(state)), state)
        unpacked = optimizers.unpack_optimizer_state(state)
        return get_params(optimizers.pack_optimizer_state(unpacked)), optimizers.clip_grads(get_params(state), 1.0)

    _assert_same(*_both_modes(program, x64), x64)


def test_optimizer_refuses_a_gradient_of_another_structure() -> None:
    opt_init, opt_update, _ = fg_optimizers.sgd(0.1)
    with pytest.raises(TypeError, match="did not match the parameter tree"):
        opt_update(0, [fnp.ones(2)], opt_init({"a": fnp.ones(2)}))


def test_dropout_needs_a_key_as_jax_s() -> None:
    _, apply = fg_stax.Dropout(0.5)
    with pytest.raises(ValueError, match="requires apply_fun to be called with a PRNG key"):
        apply((), fnp.ones(2))


def test_pytree_with_unhashable_aux_data_flattens_as_jax_s() -> None:
    class Box:
        def __init__(self, x: Any, tags: list) -> None:
            self.x, self.tags = x, tags

    for tu in (fg.tree_util, jax.tree_util):
        tu.register_pytree_node(Box, lambda b: ((b.x,), list(b.tags)), lambda tags, xs: Box(xs[0], tags))
    ours = fg.tree_util.tree_flatten(Box(1.0, ["a"]))
    theirs = jax.tree_util.tree_flatten(Box(1.0, ["a"]))
    assert ours[0] == theirs[0]
    assert ours[1] == fg.tree_util.tree_flatten(Box(2.0, ["a"]))[1]
    assert ours[1] != fg.tree_util.tree_flatten(Box(2.0, ["b"]))[1]
    assert hash(ours[1]) == hash(fg.tree_util.tree_flatten(Box(3.0, ["a"]))[1])
    assert fg.tree_util.tree_unflatten(ours[1], [5.0]).tags == ["a"]
