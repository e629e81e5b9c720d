"""Typed key arrays (``random.key``, dtype ``key<fry>``) against JAX's, in both dtype modes:
their shapes, dtype, printing and errors; ``key_data``/``wrap_key_data``/``key_impl``; every
sampler drawing the same numbers from a typed key as from the raw key of the same words; and
keys through indexing, ``jnp.stack``, ``vmap``, ``jit``, ``scan``/``fori_loop`` carries,
``cond``, ``eval_shape``, ``grad`` and ``jvp``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import random as fr
from tests.helpers import jax_or_skip
from tests.jax_programs import check_program

jax, jnp = jax_or_skip()

MEAN = np.array([0.5, -1.0])
COV = np.array([[2.0, 0.3], [0.3, 1.0]])

#: Every sampler of ``random`` that takes a key, called as ``sample(random, key)``.
SAMPLERS: dict[str, Callable[[Any, Any], Any]] = {
    "bits": lambda r, k: r.bits(k, (5,)),
    "uniform": lambda r, k: r.uniform(k, (3,), minval=-1.0, maxval=2.0),
    "normal": lambda r, k: r.normal(k, (4,)),
    "normal_complex": lambda r, k: r.normal(k, (2,), np.complex64),
    "truncated_normal": lambda r, k: r.truncated_normal(k, -1.0, 0.5, (3,)),
    "bernoulli": lambda r, k: r.bernoulli(k, 0.3, (6,)),
    "randint": lambda r, k: r.randint(k, (5,), 0, 100),
    "permutation": lambda r, k: r.permutation(k, 7),
    "choice": lambda r, k: r.choice(k, 9, (4,), replace=False),
    "gumbel": lambda r, k: r.gumbel(k, (3,)),
    "exponential": lambda r, k: r.exponential(k, (3,)),
    "categorical": lambda r, k: r.categorical(k, np.log(np.array([0.2, 0.3, 0.5])), shape=(5,)),
    "laplace": lambda r, k: r.laplace(k, (3,)),
    "logistic": lambda r, k: r.logistic(k, (3,)),
    "cauchy": lambda r, k: r.cauchy(k, (3,)),
    "rademacher": lambda r, k: r.rademacher(k, (6,)),
    "maxwell": lambda r, k: r.maxwell(k, (3,)),
    "double_sided_maxwell": lambda r, k: r.double_sided_maxwell(k, 1.0, 2.0, (3,)),
    "weibull_min": lambda r, k: r.weibull_min(k, 2.0, 1.5, (3,)),
    "pareto": lambda r, k: r.pareto(k, 3.0, (3,)),
    "rayleigh": lambda r, k: r.rayleigh(k, 2.0, (3,)),
    "wald": lambda r, k: r.wald(k, 1.5, (3,)),
    "geometric": lambda r, k: r.geometric(k, 0.3, (3,)),
    "triangular": lambda r, k: r.triangular(k, 0.0, 1.0, 3.0, (3,)),
    "lognormal": lambda r, k: r.lognormal(k, 0.5, (3,)),
    "gamma": lambda r, k: r.gamma(k, 2.5, (3,)),
    "loggamma": lambda r, k: r.loggamma(k, 0.5, (3,)),
    "beta": lambda r, k: r.beta(k, 2.0, 3.0, (3,)),
    "dirichlet": lambda r, k: r.dirichlet(k, np.array([1.0, 2.0, 3.0]), (2,)),
    "t": lambda r, k: r.t(k, 4.0, (3,)),
    "chisquare": lambda r, k: r.chisquare(k, 3.0, (3,)),
    "f": lambda r, k: r.f(k, 3.0, 5.0, (3,)),
    "generalized_normal": lambda r, k: r.generalized_normal(k, 1.5, (3,)),
    "ball": lambda r, k: r.ball(k, 3, shape=(2,)),
    "poisson": lambda r, k: r.poisson(k, 4.0, (4,)),
    "binomial": lambda r, k: r.binomial(k, 10.0, 0.3, (4,)),
    "multinomial": lambda r, k: r.multinomial(k, 10.0, np.array([0.2, 0.3, 0.5])),
    "multivariate_normal": lambda r, k: r.multivariate_normal(k, MEAN, COV, (2,)),
    "orthogonal": lambda r, k: r.orthogonal(k, 3),
    "split": lambda r, k: r.key_data(r.split(k, 3)),
    "fold_in": lambda r, k: r.key_data(r.fold_in(k, 7)),
    "clone": lambda r, k: r.key_data(r.clone(k)),
}


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_typed_keys_draw_what_raw_keys_draw(name: str, x64: bool) -> None:
    sample = SAMPLERS[name]
    with fg.enable_x64(x64):
        typed = fr.fold_in(fr.key(11), 3)
        raw = fr.fold_in(fr.PRNGKey(11), 3)
        ours, theirs = np.asarray(sample(fr, typed)), np.asarray(sample(fr, raw))
    assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape)
    np.testing.assert_array_equal(ours, theirs)


def _typed_keys(lib: Any, np_: Any) -> Any:
    r = lib.random
    key = r.key(42)
    keys = r.split(key, 4)
    grid = r.split(key, (2, 3))
    k1, k2 = r.split(key)
    stacked = np_.stack([k1, k2, key])
    joined = np_.concatenate([keys, keys[1:]])
    picked = np_.where(np_.array([True, False, True, False]), keys, r.split(k1, 4))
    wrapped = r.wrap_key_data(r.key_data(keys), dtype=key.dtype)
    return (keys.shape, grid.shape, key.shape, str(key.dtype), str(keys.dtype), keys.ndim, keys.size, len(keys),
            r.key_data(key), r.key_data(keys), r.key_data(grid), r.key_data(grid[1, 2]), r.key_data(grid[:, 1:]),
            r.key_data(grid[..., 0]), r.key_data(keys.reshape(2, 2)), r.key_data(grid.T), r.key_data(stacked),
            stacked.shape, joined.shape, r.key_data(picked), r.key_data(wrapped), wrapped.shape,
            r.key_data(r.fold_in(k2, 2**31 + 5)), r.key_data(r.key(9, impl="threefry2x32")),
            r.key_impl(key), r.key_impl(r.PRNGKey(0)),
            np_.issubdtype(key.dtype, lib.dtypes.prng_key), np_.issubdtype(key.dtype, lib.dtypes.extended),
            np_.issubdtype(key.dtype, np_.integer), np_.issubdtype(np_.float32, lib.dtypes.prng_key),
            isinstance(key, lib.Array), keys == keys, keys[0] == keys[1], keys[1] != keys[1],
            r.bits(k1, (3,)), r.randint(k2, (4,), 0, 50), r.permutation(k1, 5), r.uniform(k2, (2,)),
            r.normal(k1, (2,)), [r.key_data(k) for k in keys[:2]])


def _keys_through_transformations(lib: Any, np_: Any) -> Any:
    r, lax = lib.random, lib.lax
    key = r.key(7)
    keys = r.split(key, 3)

    def step(carry: Any, _: Any) -> Any:
        k, total = carry
        k, sub = r.split(k)
        return (k, total + r.uniform(sub)), r.bits(sub, (2,))

    (last, total), bits = lax.scan(step, (key, 0.0), None, length=4)
    looped, acc = lax.fori_loop(0, 3, lambda i, c: (r.fold_in(c[0], i), c[1] + r.normal(c[0])), (key, 0.0))
    scanned_keys = lax.scan(lambda c, k: (c, r.key_data(r.fold_in(k, 1))), 0, keys)[1]
    vmapped = lib.vmap(lambda k: r.uniform(k, (2,)))(keys)
    vmapped_split = lib.vmap(lambda k: r.split(k))(keys)
    jitted = lib.jit(lambda k, n: r.split(r.fold_in(k, n), 2))(key, 5)
    branch = lax.cond(True, lambda k: r.split(k)[1], lambda k: k, key)
    shapes = lib.eval_shape(lambda k: r.split(k, 5), key)
    grad = lib.grad(lambda x, k: np_.sum(x * r.normal(k, (2,))))(np_.ones(2), key)
    value, tangent = lib.jvp(lambda x, k: x * r.normal(k), (1.5, key), (1.0, np.zeros((), lib.dtypes.float0)))
    tree = lib.tree_util.tree_map(lambda x: x, {"key": keys, "n": 1})
    _, split_tangent = lib.jvp(lambda k: r.split(k, 3), (key,), (np.zeros((), lib.dtypes.float0),))
    _, f_vjp = lib.vjp(lambda x, k: (x * r.normal(k), r.split(k)), 2.0, key)
    cotangents = f_vjp((1.0, np.zeros((2,), lib.dtypes.float0)))
    return (split_tangent.shape, str(split_tangent.dtype), cotangents[0], cotangents[1].shape,
            str(cotangents[1].dtype), r.key_data(last), total, bits, r.key_data(looped), acc, scanned_keys, vmapped,
            r.key_data(vmapped_split), vmapped_split.shape, r.key_data(jitted), jitted.shape, r.key_data(branch),
            shapes.shape, str(shapes.dtype), grad, value, tangent, r.key_data(tree["key"]), tree["key"].shape)


def _printed_keys(lib: Any, np_: Any) -> Any:
    r = lib.random
    key = r.key(3)
    keys = r.split(key, 2)
    print(key, keys)
    lib.debug.print("{} {k}", keys, k=key)
    lib.jit(lambda k: lib.debug.print("{} {}", r.split(k), 1.5))(key)
    lib.vmap(lambda k: lib.debug.print("{}", k))(keys)
    return r.key_data(keys)


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("program", [_typed_keys, _keys_through_transformations, _printed_keys])
def test_typed_keys_behave_as_jax_s(program: Callable[[Any, Any], Any], x64: bool) -> None:
    check_program(jax, jnp, program, x64, rtol32=2e-6, rtol64=1e-12)


@pytest.mark.parametrize("x64", [True, False])
def test_typed_keys_print_as_jax_s(x64: bool) -> None:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        pairs = ((fr.key(0), jax.random.key(0)), (fr.split(fr.key(3), 3), jax.random.split(jax.random.key(3), 3)))
        for ours, theirs in pairs:
            assert repr(ours) == repr(theirs) and str(ours) == str(theirs)
        assert repr(fg.eval_shape(fr.split, fr.key(0))) == repr(jax.eval_shape(jax.random.split, jax.random.key(0)))


KEY_ERRORS: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda r, np_: r.key(0) + 1,
    "add reflected": lambda r, np_: 1.5 + r.key(0),
    "subtract": lambda r, np_: r.key(0) - 1,
    "bitwise_xor": lambda r, np_: r.key(0) ^ 1,
    "multiply": lambda r, np_: r.key(0) * r.key(1),
    "negative": lambda r, np_: -r.key(0),
    "less": lambda r, np_: r.key(0) < r.key(1),
    "compare with int": lambda r, np_: r.key(0) == 1,
    "to numpy": lambda r, np_: np.asarray(r.key(0)),
    "jnp.add": lambda r, np_: np_.add(r.key(0), 1),
    "split a batch": lambda r, np_: r.split(r.split(r.key(0), 3)),
    "normal of a batch": lambda r, np_: r.normal(r.split(r.key(0), 3)),
    "wrap int32": lambda r, np_: r.wrap_key_data(np.zeros(2, np.int32)),
    "wrap shape (3,)": lambda r, np_: r.wrap_key_data(np.zeros(3, np.uint32)),
    "unknown impl": lambda r, np_: r.key(0, impl="foo"),
    "item assignment": lambda r, np_: r.split(r.key(0)).__setitem__(0, r.key(1)),
}
KEY_ERROR_TYPES = {"split a batch": ValueError, "normal of a batch": ValueError, "unknown impl": ValueError}
KEY_ERROR_TEXT = {"add": "add does not accept dtypes key<fry>, int(32|64)",
                  "add reflected": "add does not accept dtypes float(32|64), key<fry>",
                  "subtract": "subtract does not accept dtypes key<fry>, int", "bitwise_xor": "bitwise_xor does not",
                  "multiply": "mul does not accept dtype key<fry> at position 0. Accepted dtypes at position 0 are "
                              "subtypes of integer, floating, complexfloating",
                  "negative": "neg does not accept dtype key<fry>", "less": "lt does not accept dtype key<fry> at",
                  "compare with int": "equal does not accept dtypes key<fry>, int(32|64)",
                  "to numpy": "PRNGKey dtype cannot be converted to a NumPy array", "jnp.add": "key",
                  "split a batch": r"accepts a single key, but was given a key array of shape \(3,\) != \(\)",
                  "normal of a batch": r"accepts a single key, but was given a key array of shape \(3,\)",
                  "wrap int32": "expected key_data.dtype = uint32; got dtype=int32",
                  "wrap shape (3,)": r"expected key_data.shape to end with \(2,\); got shape=\(3,\)",
                  "unknown impl": 'unrecognized PRNG implementation "foo"',
                  "item assignment": "arrays are immutable and do not support in-place item assignment"}


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", sorted(KEY_ERRORS))
def test_key_misuse_raises_as_jax_does(name: str, x64: bool) -> None:
    error = KEY_ERROR_TYPES.get(name, TypeError)
    messages = []
    for lib, np_ in ((fg, fnp), (jax, jnp)):
        with lib.enable_x64(x64), pytest.raises(error, match=KEY_ERROR_TEXT[name]) as caught:
            KEY_ERRORS[name](lib.random, np_)
        messages.append(str(caught.value))
    if name in ("add", "add reflected", "subtract", "compare with int"):
        assert messages[0].split(",")[-1] == messages[1].split(",")[-1], messages


def test_grad_with_respect_to_a_key_is_refused_naming_its_dtype() -> None:
    for lib in (fg, jax):
        with pytest.raises(TypeError, match="key<fry>"):
            lib.grad(lambda x, k: x * lib.random.normal(k), argnums=1)(1.0, lib.random.key(0))


def test_jitted_functions_take_and_return_typed_keys() -> None:
    step = fg.jit(lambda k: fr.split(k))
    out = step(fr.key(5))
    assert isinstance(out, fg.Array) and out.shape == (2,) and out.dtype == fr.key(0).dtype
    np.testing.assert_array_equal(fr.key_data(step(out[0])), jax.random.key_data(
        jax.random.split(jax.random.split(jax.random.key(5))[0])))


def test_typed_keys_on_opencl_match_eager(require_opencl: None) -> None:
    def f(k: Any) -> Any:
        k1, k2 = fr.split(k)
        return fr.split(k1, 3), fr.bits(k2, (4,)), fr.randint(k1, (5,), 0, 1000)

    key = fr.key(2**31 - 1)
    got, want = fg.jit(f, backend="opencl")(key), f(key)
    assert got[0].shape == want[0].shape == (3,) and got[0].dtype == want[0].dtype
    np.testing.assert_array_equal(fr.key_data(got[0]), fr.key_data(want[0]))
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
