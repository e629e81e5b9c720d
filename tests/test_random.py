"""``fungraph.random`` against ``jax.random`` (threefry2x32, x64): keys, bits and the samplers built
on them agree bit for bit; samplers through log/log1p/erfinv agree to a few ulps (XLA's CPU
transcendentals round differently from numpy's). Then jit, vmap, OpenCL and error messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
from fungraph import random as fr
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

SEEDS = (0, 1, 2**31 - 1)
SHAPES = ((), (7,), (3, 5), (2, 3, 3))  # (2, 3, 3): an odd total size
FLOATS = (np.float32, np.float64)


def _keys() -> list[tuple[Any, np.ndarray]]:
    """(jax key, fungraph key) pairs: three seeds and keys derived by split and fold_in."""
    pairs = [(jax.random.PRNGKey(s), fr.PRNGKey(s)) for s in SEEDS]
    jk, fk = pairs[1]
    pairs.append((jax.random.split(jk, 3)[2], fr.split(fk, 3)[2]))
    pairs.append((jax.random.fold_in(jk, 12345), fr.fold_in(fk, 12345)))
    return pairs


KEYS = _keys()
FEW_KEYS = KEYS[::2]  # seed 0, seed 2**31 - 1 and the fold_in-derived key, for the costlier samplers
CHEAP = ("split", "fold_in", "bits", "uniform")
X = np.arange(24.0).reshape(4, 6)
P = np.array([0.1, 0.2, 0.05, 0.3, 0.15, 0.2])
LOGITS = np.linspace(-2, 1, 20).reshape(4, 5)

Case = tuple[str, Callable[[Any, Any], Any]]  # label, sample(module, key) for module in (jax.random, fr)


def _cases() -> dict[str, list[Case]]:
    """The comparisons, grouped into one test (and one JAX compilation) per sampler. Each case costs
    JAX a compilation, so the shapes and dtypes are spread over the cases rather than crossed."""
    f32, f64, i32, i64 = np.float32, np.float64, np.int32, np.int64
    return {
        "split": [(f"split {n}", lambda m, k, n=n: m.split(k, n)) for n in (2, 5, (2, 3))],
        "fold_in": [(f"fold_in {d}", lambda m, k, d=d: m.fold_in(k, d)) for d in (0, 1, 2**31 - 1, 2**32 - 1)],
        "bits": [(f"bits {s} {d.__name__}", lambda m, k, s=s, d=d: m.bits(k, s, d))
                 for s, d in [*((s, np.uint32) for s in SHAPES), ((7,), np.uint8), ((2, 3, 3), np.uint16),
                              ((3, 5), np.uint64)]]
        + [("bits default dtype (uint64 with x64)", lambda m, k: m.bits(k, (6,)))],
        "uniform": [(f"uniform {s} {d.__name__}", lambda m, k, s=s, d=d: m.uniform(k, s, d))
                    for s, d in (((), f32), ((7,), f32), ((3, 5), f64), ((2, 3, 3), f64))]
        + [("uniform (3, 5) float32 array bounds", lambda m, k: m.uniform(k, (3, 5), f32, np.arange(5.0) - 2, 3.7))]
        + [(f"uniform (4000,) {d.__name__} bounds", lambda m, k, d=d: m.uniform(k, (4000,), d, -3.3, 7.1))
           for d in FLOATS],
        "bernoulli": [("bernoulli 0.3", lambda m, k: m.bernoulli(k, f32(0.3), (3, 5))),
                      ("bernoulli p array", lambda m, k: m.bernoulli(k, np.array([0.1, 0.5, 0.9]))),
                      ("bernoulli default", lambda m, k: m.bernoulli(k, shape=(7,)))],
        "randint": [(f"randint {s} {lo} {hi} {d.__name__}",
                     lambda m, k, s=s, lo=lo, hi=hi, d=d: m.randint(k, s, lo, hi, d))
                    for s, lo, hi, d in (((3, 5), -5, 2**31 - 1, i32), ((9,), -(2**31), 2**31, i32), ((5,), 7, 2, i32),
                                         ((), 0, 10, i64), ((9,), -(2**31), 2**31 - 1, i64),
                                         ((3,), np.array([0, 10, 100]), np.array([1, 20, 1000]), i64),
                                         ((7,), -(2**63), 2**63 - 1, i64), ((5,), -5, 2**32 + 7, i64),
                                         ((4,), 3, 2**40, i64))]
        + [(f"randint {lo} {hi} {np.dtype(d).name}", lambda m, k, lo=lo, hi=hi, d=d: m.randint(k, (9,), lo, hi, d))
           for lo, hi, d in ((0, 256, np.uint8), (-100, 100, np.int8), (-129, 300, np.int8), (3, 1000, np.int16),
                             (0, 2**16, np.uint16), (5, 2**32 - 3, np.uint32), (0, 2**63 - 1, np.uint64),
                             (7, 2**40, np.uint64))],
        "permutation": [("permutation 11", lambda m, k: m.permutation(k, 11)),
                        ("permutation X axis 1", lambda m, k: m.permutation(k, X, axis=1)),
                        ("permutation independent", lambda m, k: m.permutation(k, X, 1, True)),
                        ("permutation 2000 (two rounds)", lambda m, k: m.permutation(k, 2000))],
        "choice": [(f"choice {args[1:]} {kw}", lambda m, k, args=args, kw=kw: m.choice(k, *args, **kw))
                   for args, kw in [((10, (3, 5)), {}), ((X, (2,)), {"axis": 1}),
                                    ((X, (2, 2)), {"replace": False, "axis": 1}), ((6, (7,)), {"p": P}),
                                    ((X, (3,)), {"p": P, "axis": 1}), ((6, (4,)), {"p": P, "replace": False})]],
        "categorical": [(f"categorical {d.__name__} {kw}",
                         lambda m, k, d=d, kw=kw: m.categorical(k, LOGITS.astype(d), **kw))
                        for d, kw in ((f32, {}), (f32, {"shape": (2, 4), "replace": False}), (f64, {"axis": 0}),
                                      (f64, {"shape": (3, 4)}), (f64, {"axis": 0, "shape": (2, 5)}))],
        "gumbel float64": [(f"gumbel {s}", lambda m, k, s=s: m.gumbel(k, s)) for s in ((7,), (2, 3, 3))],
    }


CASES = _cases()

# Samplers through log, log1p, erf or erfinv, and the ulps they may differ from XLA's CPU results by.
NEAR: dict[str, tuple[Callable[..., Any], float]] = {
    "normal": (lambda m, k, s, d: m.normal(k, s, d), 8),
    "exponential": (lambda m, k, s, d: m.exponential(k, s, d), 256),
    "gumbel": (lambda m, k, s, d: m.gumbel(k, s, d), 8),
    "truncated_normal": (lambda m, k, s, d: m.truncated_normal(k, -1.5, 0.7, s, d), 512),
}


def _against_jax(cases: list[Case], keys: list[tuple[Any, Any]]) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(label, ours, JAX's) for every case and key; JAX compiles all the cases once, as one jit."""
    reference = jax.jit(lambda k: tuple(sample(jax.random, k) for _, sample in cases))
    out = []
    for i, (jk, fk) in enumerate(keys):
        for (label, sample), want in zip(cases, reference(jk)):
            out.append((f"{label} (key {i})", np.asarray(sample(fr, fk)), np.asarray(want)))
    return out


def _same(got: Any, want: Any, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != JAX's {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != JAX's {want.dtype}"
    np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=what)


def _close(got: Any, want: Any, what: str, ulps: float = 64) -> None:
    """Equal up to ``ulps`` units in the last place (absolute near zero, where they are tiny)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {got.dtype}{got.shape} vs {want.dtype}"
    eps = np.finfo(got.dtype).eps
    np.testing.assert_allclose(got, want, rtol=ulps * eps, atol=ulps * eps, err_msg=what)


def test_keys_from_seeds_match_jax() -> None:
    for seed in (*SEEDS, -1, -(2**40), 2**40 + 5, 2**63 - 1, np.int32(-7), np.int64(9)):
        _same(fr.PRNGKey(seed), jax.random.PRNGKey(seed), f"PRNGKey({seed!r})")
        _same(fr.key_data(fr.key(seed)), jax.random.key_data(jax.random.key(seed)), f"key({seed!r})")


def test_jax_keys_and_negative_data_are_accepted() -> None:
    jk = jax.random.PRNGKey(5)
    _same(fr.split(np.asarray(jk)), jax.random.split(jk), "split(uint32 key from JAX)")
    _same(fr.fold_in(fr.PRNGKey(5), np.int32(-5)), jax.random.fold_in(jk, np.int32(-5)), "fold_in(key, int32 -5)")


@pytest.mark.parametrize("group", list(CASES))
def test_bit_exact_with_jax(group: str) -> None:
    for what, got, want in _against_jax(CASES[group], KEYS if group in CHEAP else FEW_KEYS):
        _same(got, want, what)


@pytest.mark.parametrize("name", list(NEAR))
def test_transcendental_samplers_match_jax_to_a_few_ulps(name: str) -> None:
    sample, ulps = NEAR[name]
    cases = [(f"{name} {s} {d.__name__}", lambda m, k, s=s, d=d: sample(m, k, s, d))
             for s, d in (((3, 5), np.float32), ((7,), np.float64))]
    for what, got, want in _against_jax(cases, FEW_KEYS):
        _close(got, want, what, ulps)
    assert np.asarray(sample(fr, fr.PRNGKey(0), (500,), np.float64)).std() > 0.3


def test_normal_complex_matches_jax_to_a_few_ulps() -> None:
    for dtype in (np.complex64, np.complex128):
        jk, fk = KEYS[0]
        got, want = np.asarray(fr.normal(fk, (7,), dtype)), np.asarray(jax.random.normal(jk, (7,), dtype))
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"normal complex {dtype}")


def test_empty_choice_and_bits() -> None:
    _same(fr.choice(fr.PRNGKey(0), 5, (0,)), jax.random.choice(jax.random.PRNGKey(0), 5, (0,)), "choice of none")
    assert fr.bits(fr.PRNGKey(0), (0, 3)).shape == (0, 3)


def test_truncated_normal_stays_inside_bounds() -> None:
    out = fr.truncated_normal(fr.PRNGKey(3), np.array([-0.1, 2.0]), np.array([0.1, 2.5]), (500, 2), np.float32)
    assert (out[:, 0] > -0.1).all() and (out[:, 0] < 0.1).all() and (out[:, 1] > 2).all() and (out[:, 1] < 2.5).all()


SAMPLERS: dict[str, Callable[[Any], Any]] = {
    "split": lambda k: fr.split(k, 3),
    "fold_in": lambda k: fr.fold_in(k, 7),
    "bits": lambda k: fr.bits(k, (3, 2)),
    "uniform": lambda k: fr.uniform(k, (5,), np.float32, -1.0, 2.0),
    "normal": lambda k: fr.normal(k, (3,)),
    "randint": lambda k: fr.randint(k, (4,), -3, 50, np.int32),
    "randint64": lambda k: fr.randint(k, (4,), 0, 1000),
    "bernoulli": lambda k: fr.bernoulli(k, 0.3, (6,)),
    "permutation": lambda k: fr.permutation(k, 6),
    "choice_p": lambda k: fr.choice(k, 4, (3,), p=np.array([0.1, 0.2, 0.3, 0.4])),
    "categorical": lambda k: fr.categorical(k, np.zeros((2, 5))),
    "truncated_normal": lambda k: fr.truncated_normal(k, -1.0, 1.0, (3,)),
}


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_jit_and_vmap_over_keys_match_eager(name: str) -> None:
    f = SAMPLERS[name]
    keys = fr.split(fr.PRNGKey(11), 4)
    eager = np.stack([np.asarray(f(k)) for k in keys])
    np.testing.assert_array_equal(fg.jit(f)(keys[2]), eager[2], err_msg=f"jit({name})")
    np.testing.assert_array_equal(fg.vmap(f)(keys), eager, err_msg=f"vmap({name})")
    np.testing.assert_array_equal(fg.jit(fg.vmap(f))(keys), eager, err_msg=f"jit(vmap({name}))")


def test_vmap_of_normal_over_split_keys_matches_jax() -> None:
    want = jax.vmap(lambda k: jax.random.normal(k, (3,)))(jax.random.split(jax.random.PRNGKey(0), 4))
    got = fg.vmap(lambda k: fr.normal(k, (3,)))(fr.split(fr.PRNGKey(0), 4))
    _close(got, want, "vmap(normal) over split keys")


def test_traced_seeds_and_data() -> None:
    seeds = np.array([0, 5, -3, 2**40], np.int64)
    _same(fg.vmap(fr.PRNGKey)(seeds), np.stack([jax.random.PRNGKey(int(s)) for s in seeds]), "vmap(PRNGKey)")
    key = fr.PRNGKey(1)
    got = fg.jit(fg.vmap(lambda d: fr.fold_in(key, d)))(np.arange(4))
    _same(got, np.stack([jax.random.fold_in(jax.random.PRNGKey(1), d) for d in range(4)]), "vmap(fold_in)")


def test_on_opencl_matches_eager(require_opencl: None) -> None:
    def f(k: Any) -> Any:
        k1, k2 = fr.split(k)
        return fr.bits(k1, (3, 5)), fr.uniform(k2, (7,), np.float32, -1.0, 2.0), \
            fr.randint(k2, (9,), -4, 2**62 + 12345), fr.normal(k1, (2, 3))

    key = fr.PRNGKey(2**31 - 1)
    got = [np.asarray(x) for x in fg.jit(f, backend="opencl")(key)]
    want = f(key)
    for g, w, what in zip(got[:3], want[:3], ("bits", "uniform", "randint")):
        np.testing.assert_array_equal(g, w, err_msg=f"opencl {what}")
    _close(got[3], want[3], "opencl normal")


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: fr.uniform(np.zeros(3, np.int64)), fg.ShapeError, r"key has shape \(2,\), got shape \(3,\)"),
    (lambda: fr.normal(fr.split(fr.PRNGKey(0), 2)), fg.ShapeError, r"shape \(2, 2\); map over a batch"),
    (lambda: fr.split(np.zeros(2, np.float32)), TypeError, r"integer array of shape \(2,\).*float32"),
    (lambda: fr.PRNGKey(1.5), TypeError, "seed is an integer scalar, got float"),
    (lambda: fr.PRNGKey(np.arange(2)), TypeError, r"integer scalar, got i64\[2\]|integer scalar"),
    (lambda: fr.PRNGKey(2**63), ValueError, "does not fit in int64"),
    (lambda: fr.fold_in(fr.PRNGKey(0), np.arange(3)), TypeError, "data is an integer scalar"),
    (lambda: fr.uniform(fr.PRNGKey(0), (3,), np.int32), TypeError, "float32 or float64, got int32"),
    (lambda: fr.uniform(fr.PRNGKey(0), (3,), np.float32, np.zeros(4)), fg.ShapeError,
     r"broadcast to the shape argument \(3,\)"),
    (lambda: fr.uniform(fr.PRNGKey(0), (-1,)), ValueError, "non-negative ints"),
    (lambda: fr.uniform(fr.PRNGKey(0), 3), TypeError, "sequence of ints"),
    (lambda: fr.bits(fr.PRNGKey(0), (2,), np.int32), TypeError, "unsigned integer dtype.*got int32"),
    (lambda: fr.randint(fr.PRNGKey(0), (2,), 0, 10, np.float32), TypeError, "integer dtype, got float32"),
    (lambda: fr.randint(fr.PRNGKey(0), (2,), np.zeros(3, np.int64), 5), fg.ShapeError, r"minval \(3,\)"),
    (lambda: fr.bernoulli(fr.PRNGKey(0), 1), TypeError, "p must have a float dtype"),
    (lambda: fr.choice(fr.PRNGKey(0), 3, (5,), replace=False), ValueError, "cannot take 5 samples"),
    (lambda: fr.choice(fr.PRNGKey(0), 3, (2,), p=np.ones(4) / 4), fg.ShapeError, r"population size \(3,\)"),
    (lambda: fr.choice(fr.PRNGKey(0), 3, 2), TypeError, "shape must be a sequence"),
    (lambda: fr.categorical(fr.PRNGKey(0), np.zeros((2, 3)), shape=(4,)), fg.ShapeError, "batch shape"),
    (lambda: fr.permutation(fr.PRNGKey(0), np.zeros((2, 3)), axis=2), ValueError, "axis 2 is out of bounds"),
])
def test_errors_name_shapes_and_dtypes(call: Callable[[], Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        call()
