"""Complex dtypes: promotion, values against numpy, derivatives against finite differences and
against JAX (its convention for complex derivatives), jit, vmap, and the text format."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import dtypes
from fungraph.ir_text import parse
from fungraph.primitives.elementwise import complex_
from fungraph.testing import arrays, check_grads, shapes
from fungraph.testing.strategies import random_array

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")

CX = (dtypes.complex64, dtypes.complex128)
ALL = (dtypes.bool_, dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64) + CX
TOL = {dtypes.complex64: 2e-5, dtypes.complex128: 1e-12}


def _z(shape: tuple[int, ...], dtype: np.dtype = dtypes.complex128, seed: int = 0, low: float = -2.0,
       high: float = 2.0) -> np.ndarray:
    return random_array(np.random.default_rng(seed), shape, dtype, low, high)


def _close(got: object, want: object, tol: float) -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)


# --- dtypes, promotion, the text format -----------------------------------------------------------


def test_dtype_names_and_predicates() -> None:
    assert dtypes.SHORT_NAMES[dtypes.complex64] == "c64"
    assert dtypes.parse_dtype("c128") == dtypes.complex128
    assert dtypes.parse_dtype("complex64") == dtypes.complex64
    assert dtypes.is_complex(dtypes.complex64) and not dtypes.is_complex(dtypes.float64)
    assert not dtypes.is_float(dtypes.complex128) and dtypes.is_inexact(dtypes.complex128)
    assert dtypes.complex_for(dtypes.float32) == dtypes.complex64
    assert dtypes.real_for(dtypes.complex128) == dtypes.float64


@pytest.mark.parametrize("a", ALL)
@pytest.mark.parametrize("b", CX)
def test_promotion_matches_jax(a: np.dtype, b: np.dtype) -> None:
    x, y = np.ones(2, a), np.ones(2, b)
    want = jnp.add(jnp.asarray(x), jnp.asarray(y)).dtype
    assert fnp.add(x, y).dtype == want
    assert dtypes.result_type(x, y) == jnp.result_type(x, y)


@pytest.mark.parametrize("d", ALL)
def test_python_complex_scalars_are_weak(d: np.dtype) -> None:
    x = np.ones(2, d)
    assert fnp.multiply(x, 2j).dtype == np.multiply(x, 2j).dtype
    assert fnp.multiply(np.ones(2, dtypes.complex64), 1.5).dtype == dtypes.complex64
    assert dtypes.result_type(1j, 2.0) == dtypes.complex128


def test_text_format_round_trips_complex_types_and_literals() -> None:
    z = _z((2, 3), dtypes.complex64)

    def f(z: object) -> object:
        w = fnp.multiply(z, 1.5 - 2j) + fnp.asarray([[1j, -0.0 - 0.0j, 2.0 + 0.5j]])
        return fnp.abs(w) + fnp.real(fnp.conj(w) * fnp.asarray(z, dtypes.complex128))

    g = fg.make_graph(f)(z)
    text = str(g)
    assert "c64[2,3]" in text and "c128" in text and "1.5-2.0j:c64[]" in text
    g2 = parse(text)
    assert str(g2) == text
    _close(fg.eval_graph(g2, z)[0], f(z), 1e-6)


# --- values against numpy -----------------------------------------------------------------------

UNARY = {
    "sin": (fnp.sin, np.sin, jnp.sin),
    "cos": (fnp.cos, np.cos, jnp.cos),
    "tan": (fnp.tan, np.tan, jnp.tan),
    "tanh": (fnp.tanh, np.tanh, jnp.tanh),
    "sinh": (fnp.sinh, np.sinh, jnp.sinh),
    "cosh": (fnp.cosh, np.cosh, jnp.cosh),
    "exp": (fnp.exp, np.exp, jnp.exp),
    "log": (fnp.log, np.log, jnp.log),
    "sqrt": (fnp.sqrt, np.sqrt, jnp.sqrt),
    "square": (fnp.square, np.square, jnp.square),
    "reciprocal": (fnp.reciprocal, np.reciprocal, jnp.reciprocal),
    "negative": (fnp.negative, np.negative, jnp.negative),
    "conj": (fnp.conj, np.conj, jnp.conj),
    "real": (fnp.real, np.real, jnp.real),
    "imag": (fnp.imag, np.imag, jnp.imag),
    "abs": (fnp.abs, np.abs, jnp.abs),
    "angle": (fnp.angle, np.angle, jnp.angle),
    "sign": (fnp.sign, np.sign, lambda z: z / jnp.abs(z)),
    "cube": (lambda z: fnp.power(z, 3), lambda z: np.power(z, 3), lambda z: z**3),
}
# functions with a branch cut on the negative real axis: derivatives are taken away from it
CUT = {"log", "sqrt", "angle"}
BINARY = {
    "add": (fnp.add, np.add, jnp.add),
    "subtract": (fnp.subtract, np.subtract, jnp.subtract),
    "multiply": (fnp.multiply, np.multiply, jnp.multiply),
    "divide": (fnp.divide, np.divide, jnp.divide),
    "power": (fnp.power, np.power, jnp.power),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@settings(max_examples=8)
@given(data=st.data())
def test_unary_values_match_numpy(name: str, data: st.DataObject) -> None:
    dtype = data.draw(st.sampled_from(CX))
    x = data.draw(arrays(dtype, shapes(max_dims=2), low=-2.0, high=2.0))
    fun, ref, _ = UNARY[name]
    out, want = np.asarray(fun(x)), ref(x)
    assert out.dtype == want.dtype and out.shape == want.shape
    _close(out, want, 20 * TOL[dtype])


@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=8)
@given(data=st.data())
def test_binary_values_match_numpy(name: str, data: st.DataObject) -> None:
    dtype = data.draw(st.sampled_from(CX))
    shape = data.draw(shapes(max_dims=2))
    x = data.draw(arrays(dtype, shape, low=0.5, high=2.0))
    y = data.draw(arrays(data.draw(st.sampled_from((dtype, dtypes.float32, dtypes.float64))), shape[1:],
                         low=0.5, high=2.0))
    fun, ref, _ = BINARY[name]
    out, want = np.asarray(fun(x, y)), ref(x, y)
    assert out.dtype == want.dtype and out.shape == want.shape
    _close(out, want, 20 * TOL[out.dtype])


@pytest.mark.parametrize("dtype", CX)
def test_more_functions_take_complex_like_numpy(dtype: np.dtype) -> None:
    a, b = _z((3, 4), dtype, 5), _z((3, 4), dtype, 6)
    tol = 50 * TOL[dtype]
    for name, args, kw in [("arccosh", (a,), {}), ("round", (a * 10,), {}), ("around", (a,), {"decimals": 1}),
                           ("float_power", (a, b), {}), ("cov", (a,), {}), ("corrcoef", (a,), {}),
                           ("cov", (a.real, b), {"rowvar": False})]:
        got, want = getattr(fnp, name)(*args, **kw), getattr(np, name)(*args, **kw)
        if name in ("float_power", "cov", "corrcoef"):
            want = want.astype(np.result_type(*args))  # JAX keeps complex64 where numpy widens to complex128
        assert got.dtype == want.dtype, name
        _close(got, want, tol)
    _close(fnp.linalg.vecdot(a, b), np.linalg.vecdot(a, b), tol)
    for ord_ in (None, 0, 1, 2, 3, np.inf, -np.inf):
        _close(fnp.linalg.norm(a[0], ord_), np.linalg.norm(a[0], ord_), tol)
    for ord_ in (None, "fro", 1, -1, np.inf, -np.inf):
        _close(fnp.linalg.norm(a, ord_), np.linalg.norm(a, ord_), tol)
    for name in ("linspace", "geomspace", "logspace"):
        got, want = getattr(fnp, name)(1 + 1j, 3 - 2j, 5), getattr(np, name)(1 + 1j, 3 - 2j, 5)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("dtype", CX)
def test_variance_family_is_real_and_matches_numpy(dtype: np.dtype) -> None:
    a = _z((3, 4), dtype, 3)
    holes = a.copy()
    holes[0, 1] = np.nan
    tol = 20 * TOL[dtype]
    for name, x, kw in [("var", a, {}), ("std", a, {"ddof": 1}), ("nanvar", holes, {}), ("nanstd", holes, {}),
                        ("nanmean", holes, {}), ("nansum", holes, {}), ("nanprod", holes, {})]:
        for axis in (None, 0, 1):
            got, want = getattr(fnp, name)(x, axis=axis, **kw), getattr(np, name)(x, axis=axis, **kw)
            assert got.dtype == want.dtype, (name, axis)
            _close(got, want, tol)
    z = a.astype(np.complex128)
    np.testing.assert_allclose(fg.grad(fnp.var)(z), jax.grad(jnp.var)(z), rtol=1e-12)


@pytest.mark.parametrize("dtype", CX)
def test_reductions_dot_and_shapes_match_numpy(dtype: np.dtype) -> None:
    a, b = _z((3, 4), dtype, 1), _z((4, 2), dtype, 2)
    tol = 20 * TOL[dtype]
    for fun, ref in [(fnp.sum, np.sum), (fnp.prod, np.prod), (fnp.mean, np.mean)]:
        for axis in (None, 0, 1):
            got = fun(a, axis=axis)
            assert got.dtype == dtype
            _close(got, ref(a, axis=axis), tol)
    _close(fnp.matmul(a, b), a @ b, tol)
    _close(fnp.dot(a, b), np.dot(a, b), tol)
    _close(fnp.vdot(a, a[::-1]), np.vdot(a, a[::-1]), tol)
    _close(fnp.vdot(a.real, a), np.vdot(a.real, a), tol)
    _close(fnp.einsum("ij,jk->ki", a, b), np.einsum("ij,jk->ki", a, b), tol)
    _close(fnp.concatenate([a, a[:, ::-1]], axis=0), np.concatenate([a, a[:, ::-1]], axis=0), 0)
    _close(fnp.transpose(fnp.reshape(a, (2, 6)))[1:, :], a.reshape(2, 6).T[1:, :], 0)
    _close(fnp.where(a.real > 0, a, 1j), np.where(a.real > 0, a, 1j), 0)
    assert np.array_equal(fnp.equal(a, a[:, ::-1]), a == a[:, ::-1])
    assert np.array_equal(fnp.not_equal(a, a[0]), a != a[0])
    assert np.array_equal(fnp.isfinite(np.array([1j, np.inf + 0j, complex(0, np.nan)], dtype)), [True, False, False])
    assert np.array_equal(fnp.iscomplex(np.array([1j, 2], dtype)), [True, False])
    assert fnp.iscomplexobj(a) and not fnp.isrealobj(a) and fnp.isrealobj(a.real)
    assert fnp.complex64 == dtypes.complex64


@pytest.mark.parametrize("name", ["floor_divide", "mod"])
def test_unordered_binary_ops_refuse_complex(name: str) -> None:
    """(``arctan2`` takes complex operands, as JAX's: tests/test_complex_lax_functions.py.)"""
    with pytest.raises(TypeError, match="complex"):
        getattr(fnp, name)(_z((2,)), _z((2,)))


@pytest.mark.parametrize("name", ["floor", "ceil"])
def test_unordered_unary_ops_refuse_complex(name: str) -> None:
    with pytest.raises(TypeError, match="complex128"):
        getattr(fnp, name)(_z((2,)))


# --- derivatives: finite differences, and JAX's convention ---------------------------------------


def _point(name: str, shape: tuple[int, ...], dtype: np.dtype, seed: int = 0) -> np.ndarray:
    z = _z(shape, dtype, seed, 0.4, 1.6)
    return z if name in CUT else z * np.exp(1j * np.arange(z.size).reshape(shape)).astype(dtype)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_derivatives_match_finite_differences(name: str) -> None:
    fun = UNARY[name][0]
    check_grads(fun, [_point(name, (3,), dtypes.complex128)], order=2)
    check_grads(fun, [_point(name, (2,), dtypes.complex64)], order=1, eps=1e-3, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_derivatives_match_finite_differences(name: str) -> None:
    fun = BINARY[name][0]
    z, w = _point("log", (3,), dtypes.complex128, 1), _point("log", (3,), dtypes.complex128, 2)
    check_grads(fun, [z, w], order=2)
    check_grads(lambda x: fun(z, x), [w.real], order=1)       # a real argument promoted to complex


def test_real_imag_complex_and_reductions_derivatives() -> None:
    x, y = _z((2, 3), dtypes.float64, 3), _z((2, 3), dtypes.float64, 4)
    check_grads(lambda x, y: complex_(x, y) * (2 - 1j), [x, y], order=2)
    check_grads(lambda x, y: fnp.abs(complex_(x, y[0])), [x, y], order=2)
    z = _z((2, 3), dtypes.complex128, 5)
    check_grads(lambda z: fnp.prod(z, axis=1), [z], order=2)
    check_grads(lambda z: fnp.mean(z * z, axis=0) @ fnp.conj(z).T, [z], order=2)
    check_grads(lambda z: fnp.sum(fnp.real(z) * fnp.imag(z)), [z], order=2)


def _real_loss(mod: object, name: str) -> object:
    table = UNARY if name in UNARY else BINARY
    f = table[name][0] if mod is fnp else table[name][2]

    def loss(*zs: object) -> object:
        out = f(*zs)
        return mod.sum(mod.abs(out) ** 2 + mod.real(out) * 0.5 - mod.imag(out) ** 3)

    return loss


@pytest.mark.parametrize("name", sorted(UNARY) + sorted(BINARY))
def test_grad_of_real_valued_functions_matches_jax(name: str) -> None:
    nargs = 2 if name in BINARY else 1
    zs = [_point("log" if nargs == 2 else name, (3,), dtypes.complex128, s) for s in range(nargs)]
    argnums = tuple(range(nargs))
    got = fg.grad(_real_loss(fnp, name), argnums=argnums)(*zs)
    want = jax.grad(_real_loss(jnp, name), argnums=argnums)(*zs)
    for g, w in zip(got, want):
        _close(g, w, 1e-10)


@pytest.mark.parametrize("name", ["sin", "exp", "log", "square", "reciprocal", "conj", "real", "abs"])
def test_jvp_and_vjp_match_jax(name: str) -> None:
    fun, _, jfun = UNARY[name]
    z, t = _point(name, (4,), dtypes.complex128, 0), _z((4,), dtypes.complex128, 9)
    out, t_out = fg.jvp(fun, (z,), (t,))
    j_out, j_t_out = jax.jvp(jfun, (z,), (t,))
    _close(out, j_out, 1e-12)
    _close(t_out, j_t_out, 1e-10)
    ct = _z(np.shape(out), np.asarray(out).dtype, 11)
    _close(fg.vjp(fun, z)[1](ct)[0], jax.vjp(jfun, z)[1](ct)[0], 1e-10)


def test_grad_convention_examples() -> None:
    z = np.complex128(1.5 - 0.5j)
    _close(fg.grad(lambda z: fnp.abs(z) ** 2)(z), 2 * np.conj(z), 1e-12)
    _close(fg.grad(lambda z: fnp.real(z))(z), 1.0, 0)
    _close(fg.grad(lambda z: fnp.imag(z))(z), -1j, 0)
    x = np.float64(0.7)
    _close(fg.grad(lambda x: fnp.abs(fnp.exp(1j * x) * 3))(x), 0.0, 1e-12)
    _close(fg.grad(lambda x: fnp.real(fnp.exp(1j * x)))(x), -np.sin(x), 1e-12)


def test_holomorphic_grad() -> None:
    z = np.complex128(0.3 + 0.8j)
    for name in ("sin", "exp", "log", "square", "reciprocal", "tanh"):
        fun, _, jfun = UNARY[name]
        _close(fg.grad(fun, holomorphic=True)(z), jax.grad(jfun, holomorphic=True)(z), 1e-12)
    with pytest.raises(TypeError, match="holomorphic=True"):
        fg.grad(fnp.sin)(z)
    with pytest.raises(TypeError, match="complex inputs"):
        fg.grad(fnp.sin, holomorphic=True)(0.5)
    with pytest.raises(TypeError, match="complex output"):
        fg.grad(fnp.abs, holomorphic=True)(z)


def test_hessian_vector_product_of_a_real_loss_matches_jax() -> None:
    z, v = _point("sin", (3,), dtypes.complex128, 1), _z((3,), dtypes.complex128, 2)

    def loss(mod: object) -> object:
        return lambda z: mod.sum(mod.abs(mod.sin(z) * z) ** 2)

    got = fg.jvp(fg.grad(loss(fnp)), (z,), (v,))[1]
    want = jax.jvp(jax.grad(loss(jnp)), (z,), (v,))[1]
    _close(got, want, 1e-10)


# --- jit and vmap ---------------------------------------------------------------------------------


def _program(z: object, w: object) -> object:
    u = fnp.exp(z) * fnp.conj(w[0]) + fnp.sqrt(z * z + 1j) / (w[1] + 2)
    v = fnp.where(fnp.real(u) > 0, u, fnp.abs(u).astype(u.dtype))
    return fnp.sum(v @ fnp.transpose(w), axis=0), fnp.angle(v) + fnp.imag(v)


@pytest.mark.parametrize("dtype", CX)
def test_jit_matches_eager(dtype: np.dtype) -> None:
    z, w = _z((3, 4), dtype, 1), _z((2, 4), dtype, 2)
    for got, want in zip(fg.jit(_program)(z, w), _program(z, w)):
        assert got.dtype == want.dtype
        _close(got, want, 100 * TOL[dtype])
    loss = lambda z, w: fnp.sum(fnp.abs(_program(z, w)[0]))  # noqa: E731
    g_jit, g_eager = fg.jit(fg.grad(loss, argnums=(0, 1)))(z, w), fg.grad(loss, argnums=(0, 1))(z, w)
    for a, b in zip(g_jit, g_eager):
        _close(a, b, 100 * TOL[dtype])


@pytest.mark.parametrize("dtype", CX)
def test_vmap_matches_a_loop(dtype: np.dtype) -> None:
    zs, w = _z((5, 3, 4), dtype, 1), _z((2, 4), dtype, 2)
    got = fg.vmap(_program, in_axes=(0, None))(zs, w)
    for i in range(5):
        for g, want in zip(got, _program(zs[i], w)):
            _close(g[i], want, 100 * TOL[dtype])
    parts = fg.vmap(lambda x, y: complex_(x, y), in_axes=(1, None))(zs.real, zs.imag[0, 0])
    _close(parts, np.moveaxis(zs.real, 1, 0) + 1j * zs.imag[0, 0], 0)


# --- fft ------------------------------------------------------------------------------------------

C2C = ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn")
R2C = ("rfft", "rfft2", "rfftn")
C2R = ("irfft", "irfft2", "irfftn")
REAL_IN = R2C + ("ihfft",)


def _fft_kwargs(name: str, ndim: int, data: st.DataObject) -> dict:
    kw: dict = {"norm": data.draw(st.sampled_from((None, "backward", "ortho", "forward")))}
    if name.endswith("fft"):                                  # one axis: n and axis
        kw["axis"] = data.draw(st.integers(-ndim, ndim - 1))
        kw["n"] = data.draw(st.sampled_from((None, 1, 3, 4, 6)))
    else:
        k = 2 if name.endswith("2") else data.draw(st.integers(1, ndim))
        axes = tuple(data.draw(st.permutations(range(ndim)))[:k])
        kw["axes"] = axes
        if data.draw(st.booleans()):
            kw["s"] = tuple(data.draw(st.integers(1, 5)) for _ in axes)
    return kw


@pytest.mark.parametrize("name", C2C + R2C + C2R)
@settings(max_examples=10)
@given(data=st.data())
def test_fft_values_match_numpy(name: str, data: st.DataObject) -> None:
    real_in = name in R2C
    dtype = data.draw(st.sampled_from((dtypes.float32, dtypes.float64) if real_in else CX))
    x = data.draw(arrays(dtype, shapes(min_dims=2 if "2" in name else 1, max_dims=3, min_side=2)))
    kw = _fft_kwargs(name, x.ndim, data)
    got, want = getattr(fnp.fft, name)(x, **kw), getattr(np.fft, name)(x, **kw)
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-4 if dtype in (dtypes.float32, dtypes.complex64) else 1e-11
    _close(got, want, tol * max(1.0, float(np.abs(want).max(initial=0))))


@pytest.mark.parametrize("name,kw", [
    ("fft", {}), ("ifft", {"n": 6, "norm": "ortho"}), ("fft2", {"s": (3, 5)}), ("ifftn", {"axes": (0, 2)}),
    ("rfft", {"n": 5}), ("rfft2", {"norm": "forward"}), ("rfftn", {"s": (2, 3, 6)}),
    ("irfft", {}), ("irfft", {"n": 7}), ("irfft2", {"s": (3, 4), "norm": "ortho"}), ("irfftn", {"axes": (2, 0)}),
    ("hfft", {}), ("hfft", {"n": 3, "axis": 1, "norm": "ortho"}), ("hfft", {"n": 9, "norm": "forward"}),
    ("ihfft", {}), ("ihfft", {"n": 3, "norm": "ortho"}), ("ihfft", {"n": 7, "axis": 0, "norm": "forward"}),
])
def test_fft_derivatives(name: str, kw: dict) -> None:
    real_in = name in REAL_IN
    x = _z((2, 3, 4), dtypes.float64 if real_in else dtypes.complex128, 7)
    x = x.real if real_in else x
    fun = lambda x: getattr(fnp.fft, name)(x, **kw)  # noqa: E731
    check_grads(fun, [x], order=2)
    loss = lambda mod: lambda x: mod.sum(mod.abs(getattr(mod.fft, name)(x, **kw) * (1 + 2j)) ** 2)  # noqa: E731
    _close(fg.grad(loss(fnp))(x), jax.grad(loss(jnp))(x), 1e-9)
    ct = _z(np.shape(fun(x)), np.asarray(fun(x)).dtype, 8)
    _close(fg.vjp(fun, x)[1](ct)[0], jax.vjp(lambda x: getattr(jnp.fft, name)(x, **kw), x)[1](ct)[0], 1e-9)


def _hermitian_n(name: str, m: int, data: st.DataObject) -> int | None:
    """``n`` below, at and above the input's length ``m`` and hfft's default ``2 * (m - 1)``."""
    choices = (None, 1, m - 1, m, m + 1, 2 * (m - 1), 2 * m + 3)
    return data.draw(st.sampled_from(tuple(n for n in choices if n is None or n >= 1)))


@pytest.mark.parametrize("name", ("hfft", "ihfft"))
@settings(max_examples=25)
@given(data=st.data())
def test_hfft_ihfft_values_match_numpy(name: str, data: st.DataObject) -> None:
    real = (dtypes.int64, dtypes.float32, dtypes.float64)
    dtype = data.draw(st.sampled_from(real if name == "ihfft" else real + CX))
    x = data.draw(arrays(dtype, shapes(min_dims=1, max_dims=3, min_side=2, max_side=5)))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    kw = {"n": _hermitian_n(name, x.shape[axis], data), "axis": axis,
          "norm": data.draw(st.sampled_from((None, "backward", "ortho", "forward")))}
    got, want = getattr(fnp.fft, name)(x, **kw), getattr(np.fft, name)(x, **kw)
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-4 if dtype in (dtypes.float32, dtypes.complex64) else 1e-11
    _close(got, want, tol * max(1.0, float(np.abs(want).max(initial=0))))


@pytest.mark.parametrize("kw", [{}, {"n": 5, "axis": 0, "norm": "ortho"}])
def test_hfft_of_real_input_derivatives(kw: dict) -> None:
    x = _z((3, 4), dtypes.float64, 9)
    check_grads(lambda x: fnp.fft.hfft(x, **kw), [x], order=2)
    loss = lambda mod: lambda x: mod.sum(mod.fft.hfft(x, **kw) ** 3)  # noqa: E731
    _close(fg.grad(loss(fnp))(x), jax.grad(loss(jnp))(x), 1e-9)


def test_hfft_ihfft_jit_vmap_and_errors() -> None:
    z = _z((4, 3, 5), dtypes.complex128, 3)

    def f(z: object) -> object:
        return fnp.fft.hfft(z, n=6, axis=0, norm="ortho"), fnp.fft.ihfft(fnp.real(z), n=4, norm="forward")

    for got, want in zip(fg.jit(f)(z), f(z)):
        _close(got, want, 1e-12)
    h, ih = fg.vmap(f, in_axes=1)(z)
    for i in range(z.shape[1]):
        _close(h[i], np.fft.hfft(z[:, i], n=6, axis=0, norm="ortho"), 1e-12)
        _close(ih[i], np.fft.ihfft(z[:, i].real, n=4, norm="forward"), 1e-12)
    for name in ("hfft", "ihfft"):
        fun = getattr(fnp.fft, name)
        with pytest.raises(ValueError, match=f"{name}: invalid number of data points \\(0\\)"):
            fun(z.real, n=0)
        with pytest.raises(fg.ShapeError, match=f"{name}: axis 3 is out of bounds"):
            fun(z.real, axis=3)
        with pytest.raises(ValueError, match=f"{name}: invalid norm 'both'"):
            fun(z.real, norm="both")
    with pytest.raises(ValueError, match="hfft: invalid number of data points"):
        fnp.fft.hfft(z[:1], axis=0)                                   # default n = 2 * (1 - 1)
    with pytest.raises(TypeError, match="ihfft needs real input"):
        fnp.fft.ihfft(z)


def test_fft_shift_jit_and_vmap() -> None:
    z = _z((4, 3, 6), dtypes.complex64, 2)

    def f(z: object) -> object:
        spec = fnp.fft.fftshift(fnp.fft.fft2(z), axes=(-2, -1))
        return fnp.fft.irfft(fnp.fft.ifftshift(spec, axes=-1), n=6), fnp.fft.rfftn(fnp.real(z), axes=(0, -1))

    for got, want in zip(fg.jit(f)(z), f(z)):
        _close(got, want, 1e-4)
    got = fg.vmap(lambda z: fnp.fft.irfft2(fnp.fft.fft(z, axis=0), s=(3, 4)), in_axes=1)(z)
    for i in range(z.shape[1]):
        _close(got[i], np.fft.irfft2(np.fft.fft(z[:, i], axis=0), s=(3, 4)), 1e-4)
    with pytest.raises(TypeError, match="real input"):
        fnp.fft.rfft(z)
    with pytest.raises(ValueError, match="norm"):
        fnp.fft.fft(z, norm="both")


# --- eig ------------------------------------------------------------------------------------------


@settings(max_examples=10)
@given(data=st.data())
def test_eig_values_and_vectors(data: st.DataObject) -> None:
    dtype = data.draw(st.sampled_from((dtypes.float32, dtypes.float64) + CX))
    n = data.draw(st.integers(1, 4))
    shape = data.draw(st.sampled_from([(n, n), (2, n, n)]))
    a = random_array(np.random.default_rng(data.draw(st.integers(0, 2**16))), shape, dtype)   # well conditioned
    w, v = fnp.linalg.eig(a)
    assert w.dtype == v.dtype == dtypes.complex_for(dtype) and v.shape == a.shape
    tol = 1e-3 if dtype in (dtypes.float32, dtypes.complex64) else 1e-9
    _close(np.sort_complex(w.reshape(-1, n)), np.sort_complex(np.linalg.eigvals(a).reshape(-1, n)), tol * 10)
    _close(a @ v, v * w[..., None, :], tol * 10)
    _close(fnp.linalg.eigvals(a), w, 0)


@pytest.mark.parametrize("dtype", [dtypes.float64, dtypes.complex128])
def test_eig_derivatives(dtype: np.dtype) -> None:
    a = _z((2, 4, 4), dtype, 3)
    a = a.real if dtype == dtypes.float64 else a
    check_grads(fnp.linalg.eigvals, [a], order=2)
    check_grads(lambda a: fnp.abs(fnp.linalg.eig(a).eigenvectors) ** 2, [a], order=1)   # phase-invariant

    def jax_loss(a: object) -> object:
        w, v = jax.lax.linalg.eig(a, compute_left_eigenvectors=False, enable_eigvec_derivs=True)
        return jnp.sum(jnp.abs(w) ** 3 + jnp.real(w)) + jnp.sum(jnp.abs(v) ** 4)

    def loss(a: object) -> object:
        w, v = fnp.linalg.eig(a)
        return fnp.sum(fnp.abs(w) ** 3 + fnp.real(w)) + fnp.sum(fnp.abs(v) ** 4)

    _close(fg.grad(loss)(a), jax.grad(jax_loss)(a), 1e-9)
    got = fg.vmap(fnp.linalg.eigvals)(a)
    _close(got, np.stack([np.linalg.eigvals(m) for m in a]), 1e-12)
    _close(fg.jit(fnp.linalg.eigvals)(a), np.linalg.eigvals(a), 1e-12)


@pytest.mark.parametrize("dtype", CX)
def test_det_and_slogdet_of_complex_matrices(dtype: np.dtype) -> None:
    """Values against numpy (the sign a unit complex number, the log real), derivatives
    against finite differences (second order) and JAX's jvp and gradient, jit and vmap."""
    a = _z((2, 3, 3), dtype, 5)
    tol = TOL[dtype] * 100
    _close(fnp.linalg.det(a), np.linalg.det(a), tol)
    sign, logdet = fnp.linalg.slogdet(a)
    want_sign, want_log = np.linalg.slogdet(a)
    assert np.asarray(sign).dtype == dtype and np.asarray(logdet).dtype == dtypes.real_for(dtype)
    _close(sign, want_sign, tol)
    _close(logdet, want_log, tol)
    _close(fg.jit(fnp.linalg.det)(a), np.linalg.det(a), tol)
    _close(fg.vmap(lambda m: fnp.linalg.slogdet(m)[1])(a), want_log, tol)
    if dtype != dtypes.complex128:
        return
    check_grads(fnp.linalg.det, [a], order=2)
    check_grads(lambda m: fnp.linalg.slogdet(m)[0], [a], order=1)
    check_grads(lambda m: fnp.linalg.slogdet(m)[1], [a], order=1)
    t = _z((2, 3, 3), dtype, 6)
    pairs = [(fnp.linalg.det, jnp.linalg.det)]
    pairs += [(lambda m, k=k: fnp.linalg.slogdet(m)[k], lambda m, k=k: jnp.linalg.slogdet(m)[k]) for k in (0, 1)]
    for f, jf in pairs:
        _close(fg.jvp(f, (a,), (t,))[1], jax.jvp(jf, (a,), (t,))[1], 1e-10)

    def loss(m: object, x: object) -> object:
        s, log = m.linalg.slogdet(x)
        return m.sum(m.abs(m.linalg.det(x)) ** 2 + m.real(s) * log + m.imag(s) ** 2)

    _close(fg.grad(lambda x: loss(fnp, x))(a), jax.grad(lambda x: loss(jnp, x))(a), 1e-10)


@pytest.mark.parametrize("dtype", CX)
def test_cholesky_and_eigh_of_hermitian_matrices(dtype: np.dtype) -> None:
    """eigh and cholesky as JAX: they decompose the Hermitian part ``(m + m^H) / 2``; eigh with
    ``symmetrize_input=False`` as numpy: only the lower triangle is read (a diagonal's imaginary
    part ignored); the eigenvalues are real;
    derivatives through a Hermitian ``B B^H + 3I`` against finite differences and JAX
    (eigenvectors through the phase-invariant ``|v|``); jit and vmap."""
    b = _z((2, 3, 3), dtype, 7, -1.0, 1.0)
    a = b @ np.conj(np.swapaxes(b, -1, -2)) + 3 * np.eye(3, dtype=dtype)
    junk = a + np.triu(_z((3, 3), dtype, 8), 1) + np.eye(3, dtype=dtype) * 0.25j
    tol = TOL[dtype] * 100
    for m in (a, junk):
        hermitian = (m + np.conj(np.swapaxes(m, -1, -2))) / 2
        _close(fnp.linalg.cholesky(m), np.linalg.cholesky(hermitian), tol)
        for kw, h in (({}, hermitian), ({"symmetrize_input": False}, a)):  # a: junk's lower triangle's
            w, v = fnp.linalg.eigh(m, **kw)
            assert np.asarray(w).dtype == dtypes.real_for(dtype) and np.asarray(v).dtype == dtype
            _close(w, np.linalg.eigvalsh(h), tol)
            _close(np.asarray(h @ v), np.asarray(v) * np.asarray(w)[..., None, :], tol * 10)
    _close(fg.jit(fnp.linalg.cholesky)(a), np.linalg.cholesky(a), tol)
    _close(fg.vmap(fnp.linalg.eigvalsh)(a), np.linalg.eigvalsh(a), tol)
    if dtype != dtypes.complex128:
        return

    def loss(m: object, x: object) -> object:
        h = x @ m.conj(m.swapaxes(x, -1, -2)) + 3 * m.eye(3)
        low = m.linalg.cholesky(h)
        w, v = m.linalg.eigh(h)
        return m.sum(m.abs(low) ** 2 + m.real(low) * m.imag(low)) + m.sum(w ** 3) + m.sum(m.abs(v) ** 4)

    check_grads(lambda x: loss(fnp, x), [b], order=1)
    _close(fg.grad(lambda x: loss(fnp, x))(b), jax.grad(lambda x: loss(jnp, x))(b), 1e-10)
    t = _z((2, 3, 3), dtype, 9)
    _close(fg.jvp(lambda x: loss(fnp, x), (b,), (t,))[1], jax.jvp(lambda x: loss(jnp, x), (b,), (t,))[1], 1e-9)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 3), (3, 5)])
def test_svd_and_qr_of_complex_matrices(shape: tuple[int, ...]) -> None:
    """Values against numpy (real singular values), derivatives of gauge-invariant functions
    (|U|, |V^H|, U V^H, s, Q and R) against finite differences and JAX, jit and vmap."""
    a = _z(shape, dtypes.complex128, 12)
    u, s, vt = fnp.linalg.svd(a, full_matrices=False)
    assert np.asarray(s).dtype == np.float64
    _close(s, np.linalg.svd(a, compute_uv=False), 1e-12)
    _close(np.asarray(u) * np.asarray(s)[..., None, :] @ np.asarray(vt), a, 1e-12)
    tall = shape[-2] >= shape[-1]
    if tall:
        for got, want in zip(fnp.linalg.qr(a), np.linalg.qr(a)):
            _close(got, want, 1e-12)
    _close(fg.jit(fnp.linalg.svdvals)(a), np.linalg.svd(a, compute_uv=False), 1e-12)

    def loss(m: object, x: object) -> object:
        u, s, vt = m.linalg.svd(x, full_matrices=False)
        uv = u @ vt
        out = m.sum(s ** 3) + m.sum(m.abs(u) ** 4) + m.sum(m.abs(vt) ** 4) + m.sum(m.abs(uv) ** 2 * m.real(uv))
        if tall:
            q, r = m.linalg.qr(x)
            out = out + m.sum(m.abs(q) ** 2 * m.real(q)) + m.sum(m.real(r) * m.imag(r) + m.abs(r) ** 3)
        return out

    check_grads(lambda x: loss(fnp, x), [a], order=1)
    _close(fg.grad(lambda x: loss(fnp, x))(a), jax.grad(lambda x: loss(jnp, x))(a), 1e-10)
    if len(shape) == 3:
        _close(fg.vmap(lambda x: loss(fnp, x))(a), jax.vmap(lambda x: loss(jnp, x))(a), 1e-10)


# --- order: numpy's lexicographic order of complex numbers ------------------------------------------------


def _lattice(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype, nan: bool = False) -> np.ndarray:
    """Complex values on a small integer lattice, so equal real parts (the order's second key)
    are common; with ``nan``, a few NaN real or imaginary parts."""
    z = (rng.integers(-2, 3, shape) + 1j * rng.integers(-2, 3, shape)).astype(dtype)
    if nan and z.size:
        flat = z.reshape(-1)
        hit = rng.random(flat.size) < 0.15
        flat[hit & (rng.random(flat.size) < 0.5)] += np.nan
        flat[hit] += 1j * np.where(rng.random(flat.size) < 0.5, np.nan, 0)[hit]
    return z


ORDER_BINARY = ("less", "less_equal", "greater", "greater_equal", "maximum", "minimum", "fmax", "fmin")


@pytest.mark.parametrize("name", ORDER_BINARY)
@settings(max_examples=15, deadline=None)
@given(shape=shapes(max_dims=3, min_side=0, max_side=4), dtype=st.sampled_from(CX), nan=st.booleans(),
       seed=st.integers(0, 99))
def test_comparisons_and_extremes_follow_numpy_order(name: str, shape: tuple[int, ...], dtype: np.dtype,
                                                     nan: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = _lattice(rng, shape, dtype, nan), _lattice(rng, shape, dtype, nan)
    with np.errstate(invalid="ignore"):
        want = getattr(np, name)(x, y)
    np.testing.assert_array_equal(np.asarray(getattr(fnp, name)(x, y)), want)
    np.testing.assert_array_equal(np.asarray(fg.jit(getattr(fnp, name))(x, y)), want)
    if name.startswith(("less", "greater")):
        op = {"less": "__lt__", "less_equal": "__le__", "greater": "__gt__", "greater_equal": "__ge__"}[name]
        np.testing.assert_array_equal(np.asarray(fg.jit(lambda a, b: getattr(a, op)(b))(x, y)), want)


@pytest.mark.parametrize("name", ("max", "min", "ptp"))
@settings(max_examples=15, deadline=None)
@given(shape=shapes(min_dims=1, max_dims=3), nan=st.booleans(), seed=st.integers(0, 99),
       data=st.data())
def test_complex_max_min_ptp_match_numpy(name: str, shape: tuple[int, ...], nan: bool, seed: int,
                                         data: st.DataObject) -> None:
    z = _lattice(np.random.default_rng(seed), shape, dtypes.complex128, nan)
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
    axis = None if not axes else tuple(axes) if len(axes) > 1 else axes[0]
    keep = data.draw(st.booleans())
    want = getattr(np, name)(z, axis=axis, keepdims=keep)
    np.testing.assert_array_equal(np.asarray(getattr(fnp, name)(z, axis=axis, keepdims=keep)), want)
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda a: getattr(fnp, name)(a, axis=axis, keepdims=keep))(z)),
                                  want)


def test_complex_order_in_clip_searchsorted_vmap_and_errors() -> None:
    rng = np.random.default_rng(3)
    z = _lattice(rng, (4, 6), dtypes.complex64)
    np.testing.assert_array_equal(np.asarray(fnp.clip(z, -1 + 1j, 1 - 1j)), np.clip(z, -1 + 1j, 1 - 1j))
    s = np.sort(z.reshape(-1))
    for side in ("left", "right"):
        np.testing.assert_array_equal(np.asarray(fnp.searchsorted(s, z, side=side)), np.searchsorted(s, z, side=side))
    np.testing.assert_array_equal(np.asarray(fg.vmap(fnp.max)(z)), np.max(z, axis=1))
    np.testing.assert_array_equal(np.asarray(fg.vmap(fnp.minimum)(z, z[::-1])), np.minimum(z, z[::-1]))
    with pytest.raises(fg.ShapeError, match=r"max: zero-size reduction .*complex64\[4, 0\]"):
        fnp.max(np.zeros((4, 0), np.complex64), axis=1)


def test_complex_order_derivatives_match_jax() -> None:
    z = _z((3, 4), seed=5)
    w = _z((3, 4), seed=6)
    for f, jf in ((lambda a: fnp.real(fnp.max(a * a, axis=1)).sum(), lambda a: jnp.real(jnp.max(a * a, axis=1)).sum()),
                  (lambda a: fnp.abs(fnp.min(a)), lambda a: jnp.abs(jnp.min(a))),
                  (lambda a: fnp.real(fnp.sum(fnp.maximum(a, w) ** 2)),
                   lambda a: jnp.real(jnp.sum(jnp.maximum(a, w) ** 2)))):
        _close(fg.grad(f)(z), jax.grad(jf)(z), 1e-12)
        _close(fg.jit(fg.grad(f))(z), jax.grad(jf)(z), 1e-12)
    check_grads(lambda a: fnp.clip(a, -1 - 1j, 1 + 1j) * a, (z,))     # JAX refuses complex clip; numpy has it
    check_grads(lambda a: fnp.max(a * w, axis=0), (z,))
