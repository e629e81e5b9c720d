"""Snippets from JAX's API pages and guides, run on JAX and on fungraph with only the import
changed, in both dtype modes: the size-stable set and search functions (``nonzero``, ``where``,
``unique``, ``argwhere`` with ``size=``, ``searchsorted``, ``histogram``, ``bincount``),
``lax``'s reductions and cumulative ops (a variadic ``lax.reduce`` argmax), the ``jax.tree``
utilities ("Working with pytrees": ``is_leaf``, ``transpose``, paths), ``jax.random`` key
patterns and distributions, ``example_libraries.optimizers`` schedules and ``lax.map``'s
``batch_size``."""

from __future__ import annotations

import collections
import importlib
import operator
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

import fungraph.numpy as fnp
from tests.helpers import jax_or_skip
from tests.jax_programs import check_program

jax, jnp = jax_or_skip()

_QUANTILE_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _sized_searches(lib: Any, np_: Any) -> Any:
    # jax.numpy API pages: functions whose output size depends on values take ``size=`` under jit
    x = np_.array([3, 0, 2, 0, 5, 2, 7, 0])
    m = x.reshape(2, 4)

    @lib.jit
    def sized(x: Any) -> Any:
        return (np_.nonzero(x, size=5, fill_value=-1), np_.where(x > 1, size=6, fill_value=9),
                np_.unique(x, size=6, fill_value=-1), np_.argwhere(x.reshape(2, 4), size=3),
                np_.flatnonzero(x, size=4), np_.unique(x, return_counts=True, size=6),
                np_.bincount(x, length=8), np_.bincount(x, weights=np_.linspace(0., 1., 8), length=9))

    return (sized(x), np_.nonzero(m), np_.unique(x), np_.unique(x, return_index=True, return_inverse=True),
            np_.argwhere(m), np_.count_nonzero(m, axis=0), np_.where(x > 2), np_.bincount(x),
            np_.extract(x > 1, x, size=6, fill_value=-5), np_.compress(x > 1, x), np_.union1d(x, np_.arange(3)),
            np_.setdiff1d(x, np_.array([0, 2]), size=4, fill_value=-1), np_.intersect1d(x, np_.array([2, 5, 9])),
            np_.isin(x, np_.array([2, 7])))


def _sorted_searches(lib: Any, np_: Any) -> Any:
    # jax.numpy.searchsorted, histogram and digitize: binning as data-analysis code does it
    edges = np_.linspace(0., 1., 6)
    data = np_.array([0.05, 0.2, 0.2, 0.55, 0.61, 0.99, 1.0, 0.0, 0.4])
    counts, bins = np_.histogram(data, bins=5, range=(0., 1.))
    density, _ = np_.histogram(data, bins=edges, density=True)
    weighted, _ = np_.histogram(data, bins=4, weights=np_.arange(9.))
    h2, ex, ey = np_.histogram2d(data, data[::-1], bins=3)
    return (np_.searchsorted(edges, data), np_.searchsorted(edges, data, side="right"),
            [np_.searchsorted(edges, data, method=m) for m in ("scan", "sort", "compare_all", "scan_unrolled")],
            lib.jit(np_.searchsorted)(edges, 0.3), counts, bins, density, weighted, np_.digitize(data, edges),
            np_.digitize(data, edges, right=True), np_.histogram_bin_edges(data, bins=3), h2, ex, ey,
            lib.vmap(lambda v: np_.searchsorted(edges, v))(data), np_.sort(data), np_.argsort(-data, stable=True),
            np_.lexsort((data, np_.arange(9) % 3)), np_.partition(data, 3)[3], np_.argpartition(data, 2)[:2].shape)


def _lax_reductions(lib: Any, np_: Any) -> Any:
    # jax.lax API page: lax.reduce with a custom monoid and with several operands (an argmax)
    lax = lib.lax
    x = np_.array([[1., 7., 3., 7.], [-2., 0., 5., 4.], [2., 2., 2., 2.]])
    return lib.jit(partial(_reduce_all, lib, np_))(x), lax.reduce(x, 0., lax.add, (0,)), lax.cummax(x, axis=1)


def _reduce_all(lib: Any, np_: Any, x: Any) -> Any:
    lax = lib.lax
    idx = lax.broadcasted_iota(np_.int32, x.shape, 1)

    def argmax_reducer(a: Any, b: Any) -> Any:
        (av, ai), (bv, bi) = a, b
        pick_a = (av > bv) | ((av == bv) & (ai < bi))
        return lax.select(pick_a, av, bv), lax.select(pick_a, ai, bi)

    values, indices = lax.reduce((x, idx), (np_.array(-np_.inf, x.dtype), np_.int32(0)), argmax_reducer, (1,))
    return (lax.reduce(x, 0., lax.add, (0,)), lax.reduce(x, -np_.inf, lax.max, (0, 1)), values, indices,
            lax.argmax(x, 1, np_.int32), lax.argmin(x, 0, np_.int32), lax.reduce_max(x, (1,)),
            lax.reduce_min(x, (0,)), lax.reduce_sum(x, (0, 1)), lax.reduce_prod(x + 3., (1,)),
            lax.reduce_and(x > 0, (1,)), lax.reduce_or(x > 6, (0,)), lax.cummax(x, axis=1),
            lax.cummin(x, axis=0, reverse=True), lax.cumlogsumexp(x, axis=1), lax.cumprod(x, axis=1),
            lax.cumsum(x, axis=0, reverse=True), lib.grad(lambda x: lax.cummax(x, axis=1).sum())(x),
            lib.grad(lambda x: lax.cumlogsumexp(x, axis=1).sum())(x), lax.reduce_precision(x / 3., 5, 10),
            lax.clamp(0., x, 4.), lax.select_n(np_.int32(1), x, -x), lax.population_count(np_.arange(8)),
            lax.clz(np_.arange(1, 5, dtype=np_.int32)), lax.shift_right_logical(np_.int32(-8), np_.int32(2)),
            lib.grad(lambda x: np_.maximum.accumulate(x, axis=1).sum())(x),
            lax.associative_scan(np_.matmul, np_.stack([x[:, :3] / 4., x[:, 1:] / 5.] * 3)))


def _tree_utilities(lib: Any, np_: Any) -> Any:
    # JAX docs, "Working with pytrees" and the jax.tree API: is_leaf, reduce, transpose, paths
    tree = {"layers": [(np_.ones(2), np_.zeros(2)), (np_.ones(3), np_.arange(3.))], "scale": 2., "none": None}
    is_pair = lambda x: isinstance(x, tuple)  # noqa: E731
    Point = collections.namedtuple("Point", ["x", "y"])
    points = [Point(1., 2.), Point(3., 4.)]
    outer = lib.tree.structure([0, 0])
    inner = lib.tree.structure(Point(0, 0))
    paths = lib.tree_util.tree_flatten_with_path(tree)[0]
    od = collections.OrderedDict([("b", 1.), ("a", 2.)])
    return (lib.tree.map(lambda p: p[0] * p[1] if is_pair(p) else p, tree, is_leaf=is_pair),
            len(lib.tree.leaves(tree, is_leaf=is_pair)), lib.tree.reduce(operator.add, [1, 2, 3], 10),
            lib.tree.reduce(lambda a, b: a + np_.sum(b), tree, 0.), lib.tree.transpose(outer, inner, points),
            [lib.tree_util.keystr(p) for p, _ in paths], lib.tree.map_with_path(lambda p, v: len(p), tree),
            lib.tree.map(lambda a, b: a - b, tree, tree), lib.tree.all([True, np_.array(True)]),
            str(lib.tree.structure(tree)), lib.tree.leaves(od), lib.tree.leaves([None, (), {}, [1]]),
            lib.tree_util.Partial(operator.mul, 3.)(4.), lib.tree.leaves(lib.tree_util.Partial(np_.add, np_.ones(2))),
            lib.tree.unflatten(lib.tree.structure(points), [5, 6, 7, 8]), lib.tree_util.tree_structure(od).num_leaves,
            lib.tree_util.all_leaves([np_.ones(2), 3.]), lib.tree.flatten({"a": 1, "b": (2, 3)})[0])


def _key_patterns(lib: Any, np_: Any) -> Any:
    # JAX docs, "Pseudorandom numbers": fold_in per step, splitting in loops, keys under jit and vmap
    r = lib.random
    key = r.key(42)

    @lib.jit
    def noisy_step(key: Any, step: Any, x: Any) -> Any:
        k = r.fold_in(key, step)
        return x + 0.1 * r.normal(k, x.shape)

    def body(i: Any, carry: Any) -> Any:
        key, x = carry
        key, sub = r.split(key)
        return key, x + r.uniform(sub, x.shape, minval=-1.)

    x = np_.zeros(3)
    for step in range(3):
        x = noisy_step(key, step, x)
    _, y = lib.lax.fori_loop(0, 4, body, (r.PRNGKey(1), np_.zeros(2)))
    grid = r.split(r.PRNGKey(5), (2, 3))
    return (x, y, grid.shape, lib.vmap(lib.vmap(lambda k: r.bits(k, (), np_.uint32)))(grid),
            r.key_data(r.split(key, (2, 2))), r.bits(r.PRNGKey(0), (3,), np_.uint8),
            lib.jit(partial(_samplers, lib, np_))())


def _samplers(lib: Any, np_: Any) -> Any:
    r = lib.random
    return (r.truncated_normal(r.PRNGKey(2), -1., 1., (4,)), r.bernoulli(r.PRNGKey(3), 0.3, (6,)),
            r.choice(r.PRNGKey(4), 5, (3,), replace=False),
            r.choice(r.PRNGKey(4), 4, (6,), p=np_.array([.1, .2, .3, .4])),
            r.gumbel(r.PRNGKey(6), (3,)), r.laplace(r.PRNGKey(7), (3,)), r.logistic(r.PRNGKey(8), (2,)),
            r.cauchy(r.PRNGKey(9), (2,)), r.multivariate_normal(r.PRNGKey(10), np_.zeros(2), np_.eye(2) * 2., (3,)),
            r.permutation(r.PRNGKey(11), np_.arange(12).reshape(4, 3), axis=1, independent=True),
            r.randint(r.PRNGKey(12), (2, 3), -5, 5), r.normal(r.PRNGKey(14), (2,), dtype=np_.float16),
            r.uniform(r.fold_in(r.PRNGKey(15), 2 ** 31 + 5), (2,)))


def _optimizer_schedules(lib: Any, np_: Any) -> Any:
    # jax.example_libraries.optimizers: a least-squares fit with each step size schedule
    optimizers = importlib.import_module(lib.__name__ + ".example_libraries.optimizers")
    A = np_.array([[1., 2.], [3., 4.], [5., 7.]])
    b = np_.array([1., 0., 2.])
    loss = lambda w: np_.sum((A @ w - b) ** 2)  # noqa: E731
    schedules = [optimizers.constant(0.01), optimizers.exponential_decay(0.02, 2, 0.5),
                 optimizers.polynomial_decay(0.02, 5, 0.001, power=2.), optimizers.inverse_time_decay(0.02, 2, 1.)]
    results = []
    for schedule in schedules:
        opt_init, opt_update, get_params = optimizers.adam(schedule)
        state = opt_init(np_.zeros(2))

        @lib.jit
        def step(i: Any, state: Any) -> Any:
            value, g = lib.value_and_grad(loss)(get_params(state))
            return value, opt_update(i, g, state)

        for i in range(4):
            value, state = step(i, state)
        results.append((value, get_params(state), [schedule(i) for i in range(3)]))
    return results, optimizers.l2_norm({"a": np_.ones(3), "b": [np_.arange(2.)]})


def _batched_maps(lib: Any, np_: Any) -> Any:
    # jax.lax.map API page: batch_size runs vmap over chunks, the remainder separately
    lax = lib.lax
    xs = np_.arange(14.).reshape(7, 2)
    f = lambda x: {"norm": np_.sqrt(np_.sum(x ** 2)), "scaled": x / (1. + x[0])}  # noqa: E731
    return (lax.map(f, xs, batch_size=3), lax.map(f, xs), lib.jit(lambda xs: lax.map(f, xs, batch_size=4))(xs),
            lax.map(lambda ab: ab[0] * ab[1], (xs, xs[::-1]), batch_size=2),
            lib.grad(lambda xs: lax.map(lambda x: np_.sum(np_.sin(x)), xs, batch_size=5).sum())(xs),
            lib.vmap(lambda x: lax.map(np_.cumsum, x.reshape(2, 1)), in_axes=1)(xs[:2]))

def _linalg_variants(lib: Any, np_: Any) -> Any:
    # jax.numpy.linalg API pages: norms of each order, least squares, powers, conditioning, QR modes
    la = np_.linalg
    A = np_.array([[4., 1., 2.], [1., 3., 0.5], [2., 0.5, 5.], [1., 1., 1.]])
    S = A.T @ A
    v = np_.array([3., -4., 1.])
    return ([la.norm(A, ord=o) for o in ("fro", "nuc", 1, -1, 2, -2, np_.inf, -np_.inf)],
            [la.norm(v, ord=o) for o in (0, 1, 2, 3, np_.inf, -np_.inf)], la.norm(A, axis=1, keepdims=True),
            la.vector_norm(A, ord=1, axis=0), la.matrix_norm(S, ord="nuc"), la.cond(S), la.cond(S, p="fro"),
            la.lstsq(A, np_.arange(4.))[0], la.lstsq(A, np_.arange(8.).reshape(4, 2), rcond=None)[1],
            la.matrix_power(S, -2), la.matrix_power(S, 0), la.pinv(A, rtol=1e-3), la.eigvalsh(S, UPLO="U"),
            la.qr(A, mode="r"), np_.abs(la.qr(A, mode="complete")[0]).shape, la.slogdet(-S), la.tensorsolve(S, v),
            la.vecdot(A, A), la.matmul(A, v), la.trace(S, offset=1), la.diagonal(S), la.outer(v, v)[0],
            la.cross(v, v[::-1]), lib.grad(lambda S: la.norm(S, ord="nuc"))(S),
            lib.grad(lambda A: la.lstsq(A, np_.arange(4.))[0].sum())(A),
            lib.jacrev(lambda S: la.matrix_power(S, 3))(S[:2, :2]), lib.grad(lambda S: la.cond(S))(S))


def _attention_variants(lib: Any, np_: Any) -> Any:
    # jax.nn.dot_product_attention with bias, masks, scale, grouped heads and sequence lengths
    nn = lib.nn
    k1, k2, k3 = lib.random.split(lib.random.PRNGKey(0), 3)
    B, T, S, N, K, H = 2, 3, 4, 4, 2, 5
    q = lib.random.normal(k1, (B, T, N, H))
    k = lib.random.normal(k2, (B, S, K, H))
    val = lib.random.normal(k3, (B, S, K, H))
    bias = np_.linspace(-1., 1., T * S).reshape(1, 1, T, S)
    mask = np_.tril(np_.ones((T, S), bool), 1)[None, None]

    @lib.jit
    def attend(q: Any, k: Any, val: Any) -> Any:
        return (nn.dot_product_attention(q, k, val, bias=bias, scale=0.3),
                nn.dot_product_attention(q, k, val, mask=mask), nn.dot_product_attention(q, k, val, is_causal=True),
                nn.dot_product_attention(q, k, val, key_value_seq_lengths=np_.array([2, 4], np_.int32)),
                lib.grad(lambda q: nn.dot_product_attention(q, k, val, bias=bias).sum())(q),
                nn.dot_product_attention(q[0], k[0], val[0]),
                lib.scipy.special.logsumexp(q[0, 0], b=np_.array([1., -2., 0.5, 1., 1.]), axis=1, return_sign=True))

    return (nn.dot_product_attention(q, k, val), attend(q, k, val),
            nn.one_hot(np_.array([[0, 3], [1, -1]]), 4, axis=0), nn.one_hot(np_.array([2.7, 1.]), 3),
            nn.logsumexp(np_.arange(6.).reshape(2, 3), axis=0, where=np_.array([[True, False, True]] * 2)),
            nn.softmax(np_.array([1., 2., -np_.inf])), nn.log_softmax(np_.array([[0., 1.], [2., 4.]]), axis=0),
            nn.sparse_plus(np_.linspace(-2., 2., 5)), nn.squareplus(np_.linspace(-2., 2., 5)),
            nn.mish(np_.linspace(-2., 2., 5)), nn.celu(np_.linspace(-2., 2., 5), 0.5),
            nn.hard_tanh(np_.arange(-2., 3.)),
            nn.relu6(np_.arange(-2., 9., 2.)), nn.log_sigmoid(np_.array([-30., 0., 30.])))


def _debug_callbacks(lib: Any, np_: Any) -> Any:
    # JAX docs, "Introduction to debugging": jax.debug.print inside jit, scan, cond, vmap and grad
    def f(x: Any) -> Any:
        lib.debug.print("x = {x}", x=x)
        y = x * x / 4
        lib.debug.print("y = {}, sum = {s}", y, s=y.sum())
        return y

    def loop(c: Any, x: Any) -> Any:
        lib.debug.print("step carry={c} x={x}", c=c, x=x)
        return c + x, c * x

    lib.jit(f)(np_.arange(3.))
    f(np_.float32(0.5))
    lib.lax.scan(loop, 0., np_.arange(3.))
    lib.lax.cond(True, lambda x: lib.debug.print("true branch {}", x), lambda x: None, 2)
    lib.jit(lambda x: lib.debug.print("{a} and {b}", a=x, b=x.astype(np_.int32) + 1, ordered=True))(np_.array(1.5))
    lib.vmap(f)(np_.arange(2.))
    lib.jit(lib.vmap(lambda x, y: lib.debug.print("pair {} {}", x, y), (0, None)))(np_.arange(2), 7)
    return lib.grad(lambda x: f(x).sum())(np_.arange(2.)), lib.jit(lib.vmap(f))(np_.ones((2, 2)))

def _array_api_helpers(lib: Any, np_: Any) -> Any:
    # jax.numpy API pages: index helpers, triangular masks and the Array API's unique_* results
    x = np_.array([3, 1, 3, 2, 1])
    m = np_.arange(9.).reshape(3, 3)
    rows, cols = np_.tril_indices(3, -1)
    return (np_.tril_indices(3, -1), np_.triu_indices_from(m, 1), np_.diag_indices(2), np_.mask_indices(3, np_.triu),
            np_.tri(3, 4, 1), np_.tri(2, dtype=np_.int32), m[rows, cols], m.at[np_.diag_indices(3)].set(0.),
            np_.unique_values(x), np_.unique_counts(x), np_.unique_inverse(x), np_.unique_all(x))

def _order_statistics(lib: Any, np_: Any) -> Any:
    # jax.numpy.quantile and percentile with each interpolation method, and their gradients
    x = np_.array([[3., 1., 4., 1., 5., 9.], [2., 6., 5., 3., 5., 8.]])
    qs = np_.array([0., 0.3, 0.5, 0.75, 1.])
    return [(np_.quantile(x, qs, method=m), np_.quantile(np_.arange(4.), 0.5, method=m),
             np_.percentile(x, 40., axis=1, method=m, keepdims=True),
             lib.grad(lambda v: np_.quantile(v, 0.4, method=m))(x[0])) for m in _QUANTILE_METHODS]


PROGRAMS: dict[str, Callable[[Any, Any], Any]] = {
    "sized_searches": _sized_searches, "sorted_searches": _sorted_searches, "lax_reductions": _lax_reductions,
    "tree_utilities": _tree_utilities, "key_patterns": _key_patterns, "optimizer_schedules": _optimizer_schedules,
    "batched_maps": _batched_maps, "linalg_variants": _linalg_variants, "attention_variants": _attention_variants,
    "debug_callbacks": _debug_callbacks, "array_api_helpers": _array_api_helpers,
    "order_statistics": _order_statistics,
}


#: JAX's attention takes its softmax in float32 whatever the inputs' dtype.
TOL64 = {"attention_variants": 1e-6}


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_docs_program_matches_jax(name: str, x64: bool) -> None:
    check_program(jax, jnp, PROGRAMS[name], x64, rtol32=1e-4, rtol64=TOL64.get(name, 1e-9))



@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_narrow_float_samples_match_jax_bit_for_bit(dtype: str, x64: bool) -> None:
    """Random floats of 16 bits take JAX's bits (the low 8 of a word when the mantissa has fewer
    than 8 bits) and round after each operation, as XLA's CPU backend does."""
    def program(lib: Any, np_: Any) -> Any:
        r, dt = lib.random, getattr(np_, dtype)
        key = r.PRNGKey(3)
        return (r.uniform(key, (64,), dt), r.uniform(key, (64,), dt, -3., 2.), r.normal(key, (64,), dt),
                r.truncated_normal(key, -1., 1., (64,), dt), r.exponential(key, (64,), dt))

    check_program(jax, jnp, program, x64, rtol32=0., rtol64=0.)


@pytest.mark.parametrize("lib", [jnp, fnp])
def test_quantile_refuses_an_unknown_method_as_jax_does(lib: Any) -> None:
    with pytest.raises(ValueError, match="method"):
        lib.quantile(lib.arange(4.), 0.5, method="closest")
