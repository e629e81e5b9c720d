"""The rest of ``jax.lax`` in ``fungraph.lax`` against JAX: ``Precision`` and the products
and convolutions that take it (any layout, rank, dilation and grouping; transposed
convolutions and patches), selection, complex parts, exact bit operations, shape helpers,
special functions with JAX's derivatives, and ``custom_root``/``custom_linear_solve``
differentiated implicitly. Values eagerly and under jit, gradients against JAX's, vmap
against a loop, and a spot check on the OpenCL backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from fungraph.testing import check_grads
from tests.helpers import check_eager_and_jit, check_like_jax, jax_or_skip
from tests.test_lax_convolution import W4, X4, conv_args

jax, jnp = jax_or_skip()

RNG = np.random.default_rng(1)
A = RNG.uniform(0.5, 2.0, (3, 4))
B = RNG.standard_normal((3, 4))
Z = (RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))).astype(np.complex128)
I32 = np.array([-9, -1, 0, 1, 5, 2**31 - 1, -2**31, 77777], np.int32)
S32 = np.array([-1, 0, 1, 3, 31, 32, 33, 7], np.int32)
I64 = np.array([-9, -1, 0, 1, 5, 2**63 - 1, -2**63, 123456789012], np.int64)
S64 = np.array([-1, 0, 1, 3, 63, 64, 65, 40], np.int64)
EDGES = np.array([1.0, 1 + 2**-20, 3.14159, 1e-40, 1e40, 65520.0, np.nan, -np.inf, -0.0, 3 * 2.0**-1074, -2.5,
                  1.5 * 2.0**-1022, np.finfo(np.float64).max, 7.0e-45])
F32 = np.array([1.0, 1 + 2**-20, 3.14159, 1e-30, 1e30, 65520.0, np.nan, -np.inf, -0.0, 0.0, -2.5, 3e38],
               np.float32)
TOWARD = np.array([2.0, 0.0, -1.0, 1e-40, np.inf, 65520.0, 1.0, 0.0, 0.0, -1.0, np.nan, 1.0, np.inf, 0.0])

# igamma's arguments, edges included (one shape, so JAX compiles its kernels once)
IGA_A = np.array([[0.5, 1.0, 2.0, 5.0], [10.0, 0.0, 1.0, 100.0], [0.1, 3.0, 0.7, 25.0]])
IGA_X = np.array([[0.3, 1.0, 3.0, 2.0], [12.0, 1.0, 0.0, 90.0], [50.0, np.inf, 0.2, 31.0]])
# JAX compiles these for seconds; their values are checked against SciPy's, their dtypes against JAX's
SCIPY_REFS = {"igammac": "gammaincc", "betainc": "betainc"}

# name -> (arguments, keyword arguments), the same call on both libraries
CASES: dict[str, tuple[tuple, dict]] = {
    "select_n": ((A > 1.0, A, B), {}),
    "select_n_int": ((np.array([[0, 2, 1, 1]] * 3, np.int32), A, B, A * B), {}),
    "select_n_clamped": ((np.array([[0, 2, -1, 5]] * 3, np.int32), A, B, A * B), {}),
    "select_n_scalar": ((np.int32(1), A, B), {}),
    "complex": ((A, B), {}),
    "real": ((Z,), {}), "imag": ((Z,), {}), "conj": ((Z,), {}), "conj_float": ((B,), {}),
    "reciprocal": ((A,), {}),
    "split": ((RNG.standard_normal((4, 10)), (3, 0, 7), 1), {}),
    "tile": ((B, (2, 3)), {}),
    "broadcast_to_rank": ((B, 4), {}),
    "sort_key_val": ((np.array([[3, 1, 2, 1], [0, 5, 5, -1]]), B[:2]), {"dimension": 1}),
    "reduce_xor": ((np.array([[1, 2, 3], [4, 5, 6], [7, 9, 11]]), (0,)), {}),
    "reduce_xor_bool": ((A > 1.0, (0, 1)), {}),
    "shift_left": ((I32, S32), {}), "shift_left64": ((I64, S64), {}),
    "shift_right_logical": ((I32, S32), {}), "shift_right_logical64": ((I64, S64), {}),
    "shift_right_arithmetic": ((I32, S32), {}), "shift_right_arithmetic64": ((I64, S64), {}),
    "population_count": ((I32,), {}), "population_count64": ((I64,), {}),
    "clz": ((I32,), {}), "clz64": ((I64,), {}),
    "nextafter": ((EDGES, TOWARD), {}),
    "nextafter32": ((F32, F32[::-1].copy()), {}),
    "reduce_precision": ((EDGES, 5, 10), {}),
    "reduce_precision_bf16": ((EDGES, 8, 7), {}),
    "reduce_precision_m0": ((EDGES, 11, 0), {}),
    "reduce_precision_tiny": ((EDGES, 2, 3), {}),
    "reduce_precision32": ((F32, 5, 2), {}),
    "bitcast_convert_type": ((EDGES, np.int64), {}),
    "bitcast_convert_type_narrow": ((EDGES, np.int32), {}),
    "bitcast_convert_type_wide": ((I32.reshape(4, 2), np.float64), {}),
    "index_take": ((RNG.standard_normal((2, 3, 4)), (np.array([0, 1, 1, 3]), np.array([1, 2, -1, 7])), (0, 2)), {}),
    "zeta": ((np.array([2.0, 2.5, 1.0, 0.5, 3.0, 3.0, 2.0, 4.0, 3.0, 4.0, 6.5]),
              np.array([1.0, 0.3, 1.0, 1.0, -1.0, -1.5, 0.0, 1e8, 0.0, -3.0, 40.0])), {}),
    "polygamma": ((np.array([0.0, 1.0, 2.0, 3.0]), np.array([2.0, 0.7, 3.5, 10.0])), {}),
    "igamma": ((IGA_A, IGA_X), {}), "igammac": ((IGA_A, IGA_X), {}), "igamma_grad_a": ((IGA_A, IGA_X), {}),
    "betainc": ((A, A + 1.0, np.full((3, 4), 0.3)), {}),
    "bessel_i0e": ((B * 4,), {}), "bessel_i1e": ((B * 4,), {}),
    "dot_preferred": ((I32[:4].reshape(2, 2), I32[4:].reshape(2, 2) % 100), {"preferred_element_type": np.float64}),
    "dot_general_preferred": ((A.astype(np.float32), B.astype(np.float32)),
                              {"dimension_numbers": (((1,), (1,)), ((), ())), "preferred_element_type": np.float64,
                               "precision": "highest"}),
    "batch_matmul": ((RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 4, 2))), {"precision": "high"}),
    "stack": (([A, B, A],), {"axis": 1}), "unstack": ((B,), {"axis": 1}),
    "approx_max_k": ((np.array([[3.0, 1, 2, 5], [0, -1, 7, 7]]), 2), {}),
    "approx_min_k": ((np.array([[3.0, 1, 2, 5], [0, -1, 7, 7]]), 1), {"reduction_dimension": 0}),
}
ALIASES = {"select_n_int": "select_n", "select_n_clamped": "select_n", "select_n_scalar": "select_n",
           "conj_float": "conj", "reduce_xor_bool": "reduce_xor",
           "dot_preferred": "dot", "dot_general_preferred": "dot", "nextafter32": "nextafter",
           "bitcast_convert_type_narrow": "bitcast_convert_type", "bitcast_convert_type_wide": "bitcast_convert_type"}
ALIASES.update({n: n[:-2] for n in CASES if n.endswith("64")})
ALIASES.update({n: "reduce_precision" for n in CASES if n.startswith("reduce_precision_") or n == "reduce_precision32"})


def _call(lib: Any, name: str, args: tuple, kwargs: dict) -> Any:
    return getattr(lib, ALIASES.get(name, name))(*args, **kwargs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_jax_eagerly_and_under_jit(name: str) -> None:
    args, kwargs = CASES[name]
    if name in SCIPY_REFS:
        import scipy.special

        dtype = jax.eval_shape(lambda *a: _call(jax.lax, name, a, kwargs), *args).dtype
        want = getattr(scipy.special, SCIPY_REFS[name])(*args).astype(dtype)
    else:
        with np.errstate(all="ignore"):
            want = _call(jax.lax, name, args, kwargs)
    check_eager_and_jit(lambda a: _call(lax, name, a, kwargs), args, want, check_like_jax, name)


# (lhs shape, rhs shape, keyword arguments of conv_general_dilated)


def _loss(lib: Any, m: Any, name: str, args: tuple, kwargs: dict, pos: list[int]) -> Callable[..., Any]:
    def f(*xs: Any) -> Any:
        full = list(args)
        for i, x in zip(pos, xs):
            full[i] = x
        outs = jax.tree_util.tree_leaves(_call(lib, name, tuple(full), kwargs))
        total = 0.0
        for k, out in enumerate(outs):
            if out.dtype.kind == "c":
                out = m.real(out) + 2 * m.imag(out)
            if out.dtype.kind == "f":
                total = total + m.sum(m.sin(out) * m.arange(1, out.size + 1).reshape(out.shape)) * (k + 1)
        return total
    return f


# name -> positions of the arguments to differentiate
GRADS = {"unstack": [0], "approx_max_k": [0], "select_n": [1, 2], "select_n_int": [1, 2, 3], "complex": [0, 1],
         "real": [0], "imag": [0], "conj": [0],
         "conj_float": [0], "reciprocal": [0], "split": [0], "tile": [0], "broadcast_to_rank": [0],
         "sort_key_val": [1], "index_take": [0], "polygamma": [1], "bessel_i0e": [0], "bessel_i1e": [0],
         "batch_matmul": [0, 1]}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients_match_jax(name: str) -> None:
    args, kwargs = CASES[name]
    pos = GRADS[name]
    xs = [args[i] for i in pos]
    got = fg.grad(_loss(lax, fnp, name, args, kwargs, pos), argnums=tuple(range(len(pos))))(*xs)
    want = jax.jit(jax.grad(_loss(jax.lax, jnp, name, args, kwargs, pos), argnums=tuple(range(len(pos)))))(*xs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-9, atol=1e-11, err_msg=name)


def test_igamma_derivatives_are_jaxs() -> None:
    """In ``a`` by ``igamma_grad_a``, in ``x`` the density: JAX's jvp, evaluated eagerly at the
    values test's shapes so that JAX's kernels are compiled once; igammac's are their negation."""
    a, x = A, A + B * B
    got = fg.grad(lambda a, x: fnp.sum(lax.igamma(a, x)), argnums=(0, 1))(a, x)
    ones, zeros = np.ones_like(a), np.zeros_like(a)
    want = (jax.jvp(jax.lax.igamma, (a, x), (ones, zeros))[1], jax.jvp(jax.lax.igamma, (a, x), (zeros, ones))[1])
    upper = fg.grad(lambda a, x: fnp.sum(lax.igammac(a, x)), argnums=(0, 1))(a, x)
    for g, u, w in zip(got, upper, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(u, -np.asarray(w), rtol=1e-10, atol=1e-14)


def test_second_order_derivatives() -> None:
    check_grads(lambda a, b: lax.select_n(np.array([0, 1, 1, 0]), a, b), (A[0], B[0]), order=2)
    check_grads(lambda x: lax.reciprocal(lax.complex(x, x * x)), (A,), order=2)
    check_grads(lambda x: lax.split(x, (1, 3), 1)[1], (B,), order=2)
    check_grads(lambda x: lax.index_take(x, (np.array([0, 2]),), (1,)), (B,), order=2)
    check_grads(lambda q: lax.zeta(np.full(4, 3.0), q), (A[0],), order=2, rtol=1e-5)
    check_grads(lambda a, x: lax.igamma(a, x), (A[0], A[1]), order=1, rtol=1e-5)
    check_grads(lambda x: lax.igamma_grad_a(A[0], x), (A[1],), order=1, rtol=1e-5)


def test_zeta_derivative_in_q() -> None:
    """JAX has no derivative for zeta; d/dq zeta(x, q) = -x zeta(x + 1, q)."""
    x, q = np.array([2.0, 3.5, 5.0]), np.array([0.5, 1.0, 7.0])
    got = fg.grad(lambda q: fnp.sum(lax.zeta(x, q)))(q)
    np.testing.assert_allclose(got, -x * np.asarray(jax.lax.zeta(x + 1, q)), rtol=1e-12)
    with pytest.raises(NotImplementedError, match="zeta.*`x`"):
        fg.grad(lambda x: fnp.sum(lax.zeta(x, q)))(x)


VMAPPED = ["select_n_int", "complex", "conj", "split", "tile", "sort_key_val", "reduce_xor", "shift_right_logical",
           "population_count", "clz", "nextafter", "reduce_precision", "bitcast_convert_type", "index_take", "zeta",
           "igamma", "igamma_grad_a", "dot_general_preferred"]


@pytest.mark.parametrize("name", VMAPPED)
def test_vmap_matches_a_loop(name: str) -> None:
    args, kwargs = CASES[name]
    first = next(i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.ndim)
    batch = np.stack([args[first], args[first][::-1].copy()])

    def one(x: Any) -> Any:
        full = list(args)
        full[first] = x
        return _call(lax, name, tuple(full), kwargs)

    with np.errstate(all="ignore"):
        got = fg.vmap(one)(batch)
        want = [one(b) for b in batch]
    for k, leaf in enumerate(jax.tree_util.tree_leaves(got)):
        expect = np.stack([np.asarray(jax.tree_util.tree_leaves(w)[k]) for w in want])
        np.testing.assert_allclose(np.asarray(leaf), expect, rtol=1e-14, atol=0, err_msg=name)


def test_precision_is_jaxs_enum_and_accepted_everywhere() -> None:
    P = lax.Precision
    for s in ["default", "high", "highest", "bfloat16", "tensorfloat32", "float32"]:
        assert P(s).name == jax.lax.Precision(s).name and P(s).value == jax.lax.Precision(s).value
    assert repr(P.HIGH) == "Precision.HIGH" and str(P.HIGHEST) == "HIGHEST"
    with pytest.raises(ValueError, match="'fast'"):
        P("fast")
    with pytest.raises(ValueError, match="precision must be"):
        lax.dot(A, B.T, precision="fast")
    x, w = X4, W4
    for p in [None, P.DEFAULT, "highest", (P.HIGH, "high")]:
        np.testing.assert_allclose(lax.dot(A, B.T, precision=p), A @ B.T)
        np.testing.assert_allclose(lax.dot_general(A, B, (((1,), (1,)), ((), ())), p), A @ B.T)
        np.testing.assert_allclose(lax.conv(x, w, (1, 1), "SAME", p), jax.lax.conv(x, w, (1, 1), "SAME"), atol=1e-12)


def test_bad_inputs_name_shapes_and_dtypes() -> None:
    assert lax.broadcast_shapes((2, 1), (3,)) == jax.lax.broadcast_shapes((2, 1), (3,)) == (2, 3)
    with pytest.raises(ValueError, match=r"incompatible shapes \[\(2,\), \(3,\)\]"):
        lax.broadcast_shapes((2,), (3,))
    check_like_jax(lax.empty((2, 3), np.float32), jax.lax.empty((2, 3), np.float32), "empty")
    with pytest.raises(TypeError, match=r"lax.select_n: a bool which selects between at most 2 cases"):
        lax.select_n(A > 1, A, B, A)
    with pytest.raises(ValueError, match=r"which bool\[2\] and cases"):
        lax.select_n(np.array([True, False]), A, B)
    with pytest.raises(TypeError, match=r"lax.complex needs float operands, got i64\[2\]"):
        lax.complex(np.arange(2), np.arange(2))
    with pytest.raises(TypeError, match=r"lax.real needs a complex operand, got f64\[3,4\]"):
        lax.real(A)
    with pytest.raises(TypeError, match=r"lax.shift_left needs integer operands"):
        lax.shift_left(A, A)
    with pytest.raises(TypeError, match=r"lax.zeta requires arguments to have the same dtypes"):
        lax.zeta(np.float32(2), 1.0 * np.ones(2))
    with pytest.raises(ValueError, match=r"lax.split: sizes \[3, 6\] must be >= 0 and sum to axis 0 of f64\[10\]"):
        lax.split(np.arange(10.0), (3, 6))
    with pytest.raises(TypeError, match=r"lax.tile: reps \(2,\) needs one non-negative entry per axis of f64\[3,4\]"):
        lax.tile(A, (2,))
    with pytest.raises(ValueError, match=r"input \(N=2, C=4\) and kernel \(O=6, I=3\)"):
        lax.conv(X4, W4[:, :3], (1, 1), "SAME")
    with pytest.raises(ValueError, match="dimension_numbers .* same spatial letters"):
        lax.conv_general_dilated(X4, W4, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHX", "NCHW"))
    with pytest.raises(ValueError, match="bitcast_convert_type: i32\\[3\\] to the wider"):
        lax.bitcast_convert_type(np.ones(3, np.int32), np.float64)


@pytest.mark.usefixtures("require_opencl")
def test_opencl_spot_check() -> None:
    x, w, kw = conv_args("depthwise")
    fns: list[tuple[Callable[..., Any], tuple]] = [
        (lambda a, b: lax.conv_general_dilated(a, b, **kw), (x, w)),
        (lambda a, b: lax.conv_transpose(a, b, (2, 1), "SAME"), (X4.transpose(0, 2, 3, 1), W4.transpose(2, 3, 1, 0))),
        (lambda a, q: (lax.zeta(a, q), lax.igamma(a, q), lax.reduce_precision(q, 5, 10)), (A + 1, A)),
        (lambda i, s: (lax.shift_right_logical(i, s), lax.population_count(i), lax.clz(i)), (I32, S32)),
        (lambda a, b: lax.select_n(np.array([[0, 2, 1, 1]] * 3, np.int32), a, b, a * b), (A, B)),
    ]
    for f, args in fns:
        for got, want in zip(jax.tree_util.tree_leaves(fg.jit(f, backend="opencl")(*args)),
                             jax.tree_util.tree_leaves(f(*args))):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9, atol=1e-12)


def test_optimization_barrier_keeps_cse_from_merging_across_it() -> None:
    """``sin(x)`` and ``sin(barrier(x))`` stay two equations under jit; values, gradients and
    batching pass through unchanged, and the engines never see the barrier."""
    def f(x: Any) -> Any:
        y = lax.optimization_barrier({"a": x})["a"]
        return fg.numpy.sin(x) + fg.numpy.sin(y)

    x = np.linspace(-1.0, 1.0, 5)
    lowered = fg.jit(f).lower(x)
    assert [e.primitive.name for e in lowered.graph.eqns].count("sin") == 2
    assert all(e.primitive.name != "optimization_barrier" for e in lowered.graph.eqns)
    np.testing.assert_allclose(fg.jit(f)(x), 2 * np.sin(x))
    np.testing.assert_allclose(fg.grad(lambda v: fg.numpy.sum(f(v)))(x), 2 * np.cos(x))
    np.testing.assert_allclose(fg.vmap(f)(x), 2 * np.sin(x))


def test_sort_of_several_operands_under_jit_with_x64_off(x32: None) -> None:
    """``sort_key_val`` and ``sort`` of a tuple gather with argsort's positions; with x64 off
    those positions and the row offsets agree in dtype (an add of i64 and i32 failed to trace)."""
    keys = np.array([[3.0, 1.0, 2.0, 1.0], [0.0, 5.0, 5.0, -1.0]], dtype=np.float32)
    values = np.arange(8, dtype=np.int32).reshape(2, 4)
    pairs = [(lambda k, v: lax.sort_key_val(k, v), lambda k, v: jax.lax.sort_key_val(k, v)),
             (lambda k, v: lax.sort((k, v), num_keys=1), lambda k, v: jax.lax.sort((k, v), num_keys=1))]
    with jax.enable_x64(False):
        for ours, theirs in pairs:
            for g, w in zip(fg.jit(ours)(keys, values), theirs(keys, values)):
                assert np.asarray(g).dtype == np.asarray(w).dtype
                np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
