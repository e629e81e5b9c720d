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
from tests.helpers import check_eager_and_jit, jax_or_skip

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


def _check(got: Any, want: Any, what: str, tol: float = 1e-12) -> None:
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves), what
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, f"{what}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        if g.dtype.kind in "biu" or "bitcast" in what or "nextafter" in what or "precision" in what:
            np.testing.assert_array_equal(g, w, err_msg=what)
        else:
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=what)


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
    check_eager_and_jit(lambda a: _call(lax, name, a, kwargs), args, want, _check, name)


X4 = RNG.standard_normal((2, 4, 7, 6))
W4 = RNG.standard_normal((6, 4, 3, 2))
# (lhs shape, rhs shape, keyword arguments of conv_general_dilated)
CONVS: dict[str, tuple[tuple, tuple, dict]] = {
    "nchw_same": ((2, 4, 7, 6), (6, 4, 3, 2), dict(window_strides=(1, 1), padding="SAME")),
    "strided_dilated": ((2, 4, 9, 8), (6, 4, 3, 2), dict(window_strides=(2, 1), padding=[(1, 2), (0, -1)],
                                                         lhs_dilation=(1, 2), rhs_dilation=(2, 1))),
    "nhwc_hwio": ((2, 7, 6, 4), (3, 2, 4, 6), dict(window_strides=(1, 2), padding="VALID",
                                                  dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    "mixed_layouts": ((7, 2, 4, 6), (2, 6, 3, 4), dict(window_strides=(1, 1), padding="SAME_LOWER",
                                                      dimension_numbers=("HNCW", "WOHI", "CWNH"))),
    "conv1d": ((2, 3, 11), (5, 3, 4), dict(window_strides=(2,), padding="SAME", rhs_dilation=(2,))),
    "conv3d": ((1, 2, 5, 4, 6), (3, 2, 2, 3, 2), dict(window_strides=(1, 2, 1), padding=[(1, 0), (1, 1), (0, 2)],
                                                     lhs_dilation=(2, 1, 1))),
    "feature_groups": ((2, 6, 6, 5), (4, 3, 3, 3), dict(window_strides=(1, 1), padding="SAME", feature_group_count=2)),
    "depthwise": ((2, 4, 5, 5), (8, 1, 3, 3), dict(window_strides=(2, 2), padding="VALID", feature_group_count=4)),
    "batch_groups": ((4, 3, 6, 5), (6, 3, 2, 2), dict(window_strides=(1, 1), padding="VALID", batch_group_count=2)),
    "no_spatial": ((3, 4), (5, 4), dict(window_strides=(), padding=())),
}


def _conv_args(name: str) -> tuple[np.ndarray, np.ndarray, dict]:
    ls, rs, kw = CONVS[name]
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    return rng.standard_normal(ls), rng.standard_normal(rs), kw


@pytest.mark.parametrize("name", sorted(CONVS))
def test_conv_general_dilated_matches_jax(name: str) -> None:
    x, w, kw = _conv_args(name)
    want = jax.lax.conv_general_dilated(x, w, **kw)
    _check(lax.conv_general_dilated(x, w, **kw), want, name, 1e-10)
    _check(fg.jit(lambda a, b: lax.conv_general_dilated(a, b, **kw))(x, w), want, f"jit {name}", 1e-10)


def test_conv_general_dilated_gradients_match_jax() -> None:
    """One JAX compilation for several configurations (JAX's compile time dominates)."""
    names = ["mixed_layouts", "conv3d", "depthwise", "batch_groups"]
    args = [_conv_args(n) for n in names]

    def loss(lib: Any, m: Any) -> Callable[..., Any]:
        def f(*xs: Any) -> Any:
            outs = [lib.conv_general_dilated(x, w, **kw) for (x, w), (_, _, kw) in zip(zip(xs[::2], xs[1::2]), args)]
            return sum(m.sum(m.sin(o)) for o in outs)
        return f

    flat = [v for x, w, _ in args for v in (x, w)]
    got = fg.grad(loss(lax, fnp), argnums=tuple(range(len(flat))))(*flat)
    want = jax.jit(jax.grad(loss(jax.lax, jnp), argnums=tuple(range(len(flat)))))(*flat)
    for k, (g, v) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(v), rtol=1e-10, atol=1e-10, err_msg=names[k // 2])


def test_conv_second_order_and_vmap() -> None:
    x, w, kw = _conv_args("depthwise")
    check_grads(lambda a, b: lax.conv_general_dilated(a, b, **kw), (x[:1], w), order=2)
    x3, w3, kw3 = _conv_args("conv3d")
    check_grads(lambda a, b: lax.conv_general_dilated(a, b, **kw3), (x3, w3), order=1)
    xs = np.stack([x, 2 * x])
    got = fg.vmap(lambda a, b: lax.conv_general_dilated(a, b, **kw), in_axes=(0, None))(xs, w)
    want = np.stack([jax.lax.conv_general_dilated(a, w, **kw) for a in xs])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_conv_wrappers_and_dtypes_match_jax() -> None:
    x, w = X4, W4
    for call in [lambda L: L.conv(x, w, (2, 1), "SAME", precision=L.Precision.HIGHEST),
                 lambda L: L.conv_with_general_padding(x, w, (1, 2), [(1, 1), (2, 0)], (2, 1), (1, 2)),
                 lambda L: L.conv(x.astype(np.float32), w.astype(np.float32), (1, 1), "VALID",
                                  preferred_element_type=np.float64),
                 lambda L: L.conv(x.astype(np.int32), w.astype(np.int32), (1, 1), "VALID"),
                 lambda L: L.conv_general_dilated(x.astype(np.int32), w.astype(np.int32), (1, 1), "SAME",
                                                  preferred_element_type=np.float32)]:
        _check(call(lax), call(jax.lax), "conv wrapper", 1e-5)
    x = x.transpose(0, 2, 3, 1)
    dn = lax.conv_dimension_numbers(x.shape, w.shape, ("NHWC", "OIHW", "NCHW"))
    assert dn == tuple(jax.lax.conv_dimension_numbers(x.shape, w.shape, ("NHWC", "OIHW", "NCHW")))
    assert isinstance(dn, lax.ConvDimensionNumbers)
    _check(lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dn),
           jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=jax.lax.ConvDimensionNumbers(*dn)),
           "ConvDimensionNumbers", 1e-10)


TRANSPOSES = [("SAME", (1, 1), {}), ("SAME", (2, 3), {"rhs_dilation": (1, 2)}), ("VALID", (3, 1), {}),
              ("VALID", (2, 3), {"transpose_kernel": True}), ([(1, 2), (0, 1)], (2, 3), {}),
              ([(2, 2), (1, 0)], (3, 1), {"use_consistent_padding": True}),
              ("SAME", (2, 2), {"use_consistent_padding": True, "transpose_kernel": True}),
              ([(1, 0), (0, 2)], (2, 1), {"dimension_numbers": ("NCHW", "OIHW", "NCHW")})]


@pytest.mark.parametrize("padding, strides, kw", TRANSPOSES)
def test_conv_transpose_matches_jax(padding: Any, strides: tuple, kw: dict) -> None:
    x = RNG.standard_normal((2, 5, 4, 3))
    w = RNG.standard_normal((3, 2, 3, 4))
    lhs = x.transpose(0, 3, 1, 2) if "dimension_numbers" in kw else x
    rhs = w.transpose(3, 2, 0, 1) if "dimension_numbers" in kw else w
    if kw.get("transpose_kernel"):
        rhs = w[:, :, :, :2].transpose(0, 1, 3, 2)
    want = jax.lax.conv_transpose(lhs, rhs, strides, padding, **kw)
    _check(lax.conv_transpose(lhs, rhs, strides, padding, **kw), want, f"conv_transpose {kw}", 1e-10)


def test_conv_transpose_is_the_gradient_of_conv() -> None:
    """With ``transpose_kernel`` and the forward padding, ``conv_transpose`` is the vjp of ``conv``."""
    x = RNG.standard_normal((1, 6, 6, 2))
    w = RNG.standard_normal((3, 3, 2, 4))
    dn = ("NHWC", "HWIO", "NHWC")
    y, vjp = fg.vjp(lambda a: lax.conv_general_dilated(a, w, (1, 1), [(1, 1), (1, 1)], dimension_numbers=dn), x)
    ct = RNG.standard_normal(np.shape(y))
    got = lax.conv_transpose(ct, w, (1, 1), [(1, 1), (1, 1)], dimension_numbers=dn, transpose_kernel=True,
                             use_consistent_padding=True)
    np.testing.assert_allclose(got, vjp(ct)[0], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", [
    dict(filter_shape=(3, 2), window_strides=(2, 1), padding=[(0, 1), (1, 1)], rhs_dilation=(1, 2),
         lhs_dilation=(2, 1)),
    dict(filter_shape=(2, 2), window_strides=(1, 2), padding=[(1, 0), (2, 1)],
         dimension_numbers=("NHWC", "OIHW", "NCHW")),
    dict(filter_shape=(3,), window_strides=(2,), padding="SAME"),
])
def test_conv_general_dilated_patches_matches_jax(case: dict) -> None:
    rank = len(case["filter_shape"]) + 2
    x = RNG.standard_normal((2, 3, 6, 5)[:rank] if rank == 4 else (2, 3, 8))
    want = jax.lax.conv_general_dilated_patches(x, **case)
    _check(lax.conv_general_dilated_patches(x, **case), want, "patches", 1e-12)
    _check(fg.jit(lambda a: lax.conv_general_dilated_patches(a, **case))(x), want, "jit patches", 1e-12)
    check_grads(lambda a: lax.conv_general_dilated_patches(a, **case), (x,), order=1)


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


def _newton_sqrt(lib: Any, m: Any) -> Callable[[Any], Any]:
    """sqrt(a) as the root of x^2 - a, by 20 Newton steps, differentiated implicitly."""
    def sqrt(a: Any) -> Any:
        def solve(f: Any, x0: Any) -> Any:
            return lib.fori_loop(0, 20, lambda i, x: x - f(x) / (2 * x), x0)

        return lib.custom_root(lambda x: x * x - a, m.ones_like(a), solve, lambda g, y: y / g(m.ones_like(y)))
    return sqrt


def test_custom_root_differentiates_implicitly() -> None:
    a = np.array([2.0, 9.0, 0.25])
    got_f, want_f = _newton_sqrt(lax, fnp), _newton_sqrt(jax.lax, jnp)
    np.testing.assert_allclose(got_f(a), np.sqrt(a), rtol=1e-12)
    loss = lambda f, m: lambda a: m.sum(m.sin(f(a)) * a)  # noqa: E731
    np.testing.assert_allclose(fg.grad(loss(got_f, fnp))(a), jax.jit(jax.grad(loss(want_f, jnp)))(a), rtol=1e-10)
    np.testing.assert_allclose(fg.jvp(got_f, (a,), (np.ones(3),))[1], 0.5 / np.sqrt(a), rtol=1e-10)
    np.testing.assert_allclose(fg.grad(lambda a: fg.grad(lambda b: fnp.sum(got_f(b)))(a).sum())(a),
                               jax.jit(jax.grad(lambda a: jax.grad(lambda b: jnp.sum(want_f(b)))(a).sum()))(a),
                               rtol=1e-9)
    np.testing.assert_allclose(fg.jit(fg.vmap(fg.grad(lambda s: got_f(s))))(a), 0.5 / np.sqrt(a), rtol=1e-10)


def test_custom_root_of_a_pytree_with_aux() -> None:
    """The cube root of ``a`` as a dict, the solver's iteration count as an (integer) aux output."""
    def cbrt(a: Any) -> Any:
        def solve(f: Any, x: Any) -> Any:
            y = lax.fori_loop(0, 30, lambda i, y: {"p": y["p"] - f(y)["p"] / (3 * y["p"] ** 2)}, x)
            return y, np.int32(30)

        return lax.custom_root(lambda x: {"p": x["p"] ** 3 - a}, {"p": fnp.ones_like(a)}, solve,
                               lambda g, y: {"p": y["p"] / g({"p": fnp.ones_like(y["p"])})["p"]}, has_aux=True)

    a = np.array([8.0, 27.0])
    (root, steps) = cbrt(a)
    np.testing.assert_allclose(root["p"], [2.0, 3.0], rtol=1e-12)
    assert int(steps) == 30
    np.testing.assert_allclose(fg.grad(lambda a: cbrt(a)[0]["p"].sum())(a), a ** (-2 / 3) / 3, rtol=1e-12)


def _linear_solve(lib: Any, m: Any, symmetric: bool) -> Callable[[Any, Any], Any]:
    """A(theta) x = b with A = theta theta^T + 3 I (symmetric) or theta + 3 I, solved by
    numpy's solve on the materialised matrix; the aux output counts calls."""
    def run(theta: Any, b: Any) -> Any:
        mat = theta @ theta.T + 3 * m.eye(3) if symmetric else theta + 3 * m.eye(3)

        def solve(matvec: Any, rhs: Any) -> Any:
            dense = m.stack([matvec(e) for e in m.eye(3)], axis=1)
            return m.linalg.solve(dense, rhs), m.array(1)

        def transpose_solve(vecmat: Any, rhs: Any) -> Any:
            dense = m.stack([vecmat(e) for e in m.eye(3)], axis=1)
            return m.linalg.solve(dense, rhs), m.array(2)

        x, count = lib.custom_linear_solve(lambda v: mat @ v, b, lambda f, r: solve(f, r),
                                           None if symmetric else transpose_solve, symmetric=symmetric,
                                           has_aux=True)
        return x * count
    return run


@pytest.mark.parametrize("symmetric", [False, True])
def test_custom_linear_solve_matches_jax(symmetric: bool) -> None:
    theta, b = RNG.standard_normal((3, 3)), RNG.standard_normal(3)
    got_f, want_f = _linear_solve(lax, fnp, symmetric), _linear_solve(jax.lax, jnp, symmetric)
    loss = lambda f, m: lambda t, b: m.sum(m.sin(f(t, b)))  # noqa: E731
    want_all = jax.jit(lambda t, b: (want_f(t, b), jax.grad(loss(want_f, jnp), argnums=(0, 1))(t, b)))
    value, grads = want_all(theta, b)
    np.testing.assert_allclose(got_f(theta, b), value, rtol=1e-12)
    for g, w in zip(fg.grad(loss(got_f, fnp), argnums=(0, 1))(theta, b), grads):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    check_grads(got_f, (theta, b), order=2)
    thetas = np.stack([theta, theta.T, 2 * theta])
    got = fg.jit(fg.vmap(fg.grad(loss(got_f, fnp)), in_axes=(0, None)))(thetas, b)
    want = np.stack([want_all(t, b)[1][0] for t in thetas])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_custom_linear_solve_without_transpose_refuses_reverse_mode() -> None:
    mat = np.diag([2.0, 4.0])
    f = lambda b: lax.custom_linear_solve(lambda v: mat @ v, b, lambda mv, r: r / np.diag(mat))  # noqa: E731
    np.testing.assert_allclose(f(np.ones(2)), [0.5, 0.25])
    np.testing.assert_allclose(fg.jvp(f, (np.ones(2),), (np.ones(2),))[1], [0.5, 0.25])
    with pytest.raises(TypeError, match="transpose_solve"):
        fg.grad(lambda b: f(b).sum())(np.ones(2))


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
    _check(lax.empty((2, 3), np.float32), jax.lax.empty((2, 3), np.float32), "empty")
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
    x, w, kw = _conv_args("depthwise")
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


OP3 = np.arange(60.0).reshape(3, 4, 5) / 7
GI = np.array([[[0, 1], [2, 3]], [[1, 0], [2, 4]]])
IDX1 = np.array([[0], [8], [-1], [20]])


def _gathers(L: Any) -> list[tuple[tuple, dict]]:
    """(arguments, keywords) of gathers: clipping and filling, collapsed and batching axes."""
    G = L.GatherDimensionNumbers
    return [((np.arange(10.0), IDX1, G(offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,)), (3,)),
             {"mode": m}) for m in (None, "clip", "fill")] + [
        ((OP3, GI, G(offset_dims=(2,), collapsed_slice_dims=(0, 2), start_index_map=(0, 2)), (1, 3, 1)), {}),
        ((OP3, GI, G(offset_dims=(0, 3), collapsed_slice_dims=(1,), start_index_map=(1, 2)), (2, 1, 2)),
         {"mode": "fill", "fill_value": -1.0}),
        ((OP3, np.array([[1], [3], [0]]), G(offset_dims=(1,), collapsed_slice_dims=(1,), start_index_map=(1,),
                                            operand_batching_dims=(0,), start_indices_batching_dims=(0,)),
          (1, 1, 5)), {})]


@pytest.mark.parametrize("k", range(6))
def test_gather_matches_jax(k: int) -> None:
    (args, kw), (jargs, jkw) = _gathers(lax)[k], _gathers(jax.lax)[k]
    want = jax.lax.gather(*jargs, **jkw)
    _check(lax.gather(*args, **kw), want, "gather")
    _check(fg.jit(lambda x: lax.gather(x, *args[1:], **kw))(args[0]), want, "jit gather")
    loss = lambda L, m, a: lambda x: m.sum(m.sin(L.gather(x, *a[1:], **kw)) ** 2)  # noqa: E731
    if k > 0 and kw.get("mode") != "fill":  # case 0 breaks JAX's default promise of in-bounds windows
        np.testing.assert_allclose(fg.grad(loss(lax, fnp, args))(args[0]),
                                   jax.jit(jax.grad(loss(jax.lax, jnp, jargs)))(args[0]), rtol=1e-12)


SCATTER_CASES = [  # operand, indices, updates, dimension numbers (as keywords), mode
    (np.arange(10.0), IDX1, np.arange(12.0).reshape(4, 3) - 5,
     dict(update_window_dims=(1,), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,)), None),
    (np.arange(10.0), np.array([[1], [2], [1], [5]]), np.arange(12.0).reshape(4, 3) - 5,
     dict(update_window_dims=(1,), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,)), "clip"),
    (OP3, GI, np.arange(16.0).reshape(4, 2, 2) / 3,
     dict(update_window_dims=(0,), inserted_window_dims=(0, 2), scatter_dims_to_operand_dims=(0, 2)), None),
    (np.array([1, 5, 2, 9]), np.array([[1], [5], [1]]), np.array([7, 8, -3]),
     dict(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,)), None),
]


@pytest.mark.parametrize("name", ["scatter", "scatter_add", "scatter_sub", "scatter_mul", "scatter_min",
                                  "scatter_max"])
def test_scatters_match_jax(name: str) -> None:
    for x, idx, upd, dn, mode in SCATTER_CASES:
        want = getattr(jax.lax, name)(x, idx, upd, jax.lax.ScatterDimensionNumbers(**dn), mode=mode)
        got = getattr(lax, name)(x, idx, upd, lax.ScatterDimensionNumbers(**dn), mode=mode)
        _check(got, want, f"{name} {dn}")
    x, idx, upd, dn, mode = SCATTER_CASES[2]
    f = fg.jit(lambda x, i, u: getattr(lax, name)(x, i, u, lax.ScatterDimensionNumbers(**dn), mode=mode))
    _check(f(x, idx, upd), getattr(jax.lax, name)(x, idx, upd, jax.lax.ScatterDimensionNumbers(**dn)), f"jit {name}")
    got = fg.vmap(f, in_axes=(None, 0, 0))(x, np.stack([idx, idx[::-1]]), np.stack([upd, 2 * upd]))
    for b, (i, u) in enumerate([(idx, upd), (idx[::-1], 2 * upd)]):
        np.testing.assert_allclose(got[b], f(x, i, u), rtol=1e-14, err_msg=f"vmap {name}")


def test_scatter_gradients_and_apply_match_jax() -> None:
    D = dict(update_window_dims=(1,), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,))
    x, u = np.arange(10.0) / 3, np.arange(9.0).reshape(3, 3) / 7
    for name, idx in [("scatter", np.array([[1], [2], [1]])), ("scatter_add", np.array([[1], [2], [1]])),
                      ("scatter_mul", np.array([[0], [3], [6]])), ("scatter_max", np.array([[0], [3], [6]]))]:
        def loss(L: Any, m: Any, name: str = name, idx: Any = idx) -> Callable[..., Any]:
            return lambda x, u: m.sum(m.sin(getattr(L, name)(x, idx, u, L.ScatterDimensionNumbers(**D),
                                                            unique_indices=name in ("scatter_mul", "scatter_max"))))
        for g, w in zip(fg.grad(loss(lax, fnp), (0, 1))(x, u), jax.jit(jax.grad(loss(jax.lax, jnp), (0, 1)))(x, u)):
            np.testing.assert_allclose(g, w, rtol=1e-12, err_msg=name)
    D0 = dict(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    idx = np.array([[1], [1], [3], [9]])
    want = jax.lax.scatter_apply(x, idx, jnp.sin, jax.lax.ScatterDimensionNumbers(**D0), update_shape=(4,))
    _check(lax.scatter_apply(x, idx, fnp.sin, lax.ScatterDimensionNumbers(**D0), update_shape=(4,)), want, "apply")
    got = fg.jit(lambda x, i: lax.scatter_apply(x, i, fnp.sin, lax.ScatterDimensionNumbers(**D0), update_shape=(4,)))
    _check(got(x, idx), want, "jit apply")
    assert lax.GatherScatterMode.from_any("fill") is lax.GatherScatterMode.FILL_OR_DROP
    with pytest.raises(ValueError, match="unknown gather/scatter mode 'wrap'"):
        lax.GatherScatterMode.from_any("wrap")
    with pytest.raises(ValueError, match=r"lax.gather: indices i64\[4,1\] .* do not fit the operand f64\[10\]"):
        lax.gather(np.arange(10.0), IDX1, lax.GatherDimensionNumbers((1,), (), (0,)), (11,))


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
