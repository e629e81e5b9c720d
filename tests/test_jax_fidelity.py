"""Small points where fungraph follows JAX 0.10 rather than numpy or a plainer rule (issue #32):
the derivative of ``abs`` at 0, ``nn.celu``'s derivatives at its kink, bitwise ``reduce_and``/
``reduce_or`` of integers, ``lax``'s refusal of dtypes it does not take, and JAX's functions
taking fungraph arrays. Each compared with JAX in both dtype modes."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax as flax
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
jlax = jax.lax

MODES = ["x64", "x32"]


def _in_mode(mode: str) -> Any:
    """Both libraries in one dtype mode (fungraph's per thread, JAX's per context)."""
    class Both:
        def __enter__(self) -> None:
            self.contexts = [fg.enable_x64(mode == "x64"), jax.enable_x64(mode == "x64")]
            for c in self.contexts:
                c.__enter__()

        def __exit__(self, *exc: Any) -> None:
            for c in reversed(self.contexts):
                c.__exit__(*exc)

    return Both()


def _same(got: Any, want: Any) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("mode", MODES)
def test_derivative_of_abs_is_one_at_zero_as_jaxs(mode: str) -> None:
    xs = np.array([-2.0, -0.0, 0.0, 3.0])
    with _in_mode(mode):
        for x in xs:
            _same(fg.grad(abs)(float(x)), jax.grad(abs)(float(x)))
            _same(fg.grad(fnp.abs)(x), jax.grad(jnp.abs)(x))
        _same(fg.vmap(fg.grad(fnp.abs))(xs), jax.vmap(jax.grad(jnp.abs))(xs))
        _same(fg.jit(fg.grad(lambda v: fnp.abs(v).sum()))(xs), jax.grad(lambda v: jnp.abs(v).sum())(xs))
        _same(fg.grad(fg.grad(fnp.abs))(0.0), jax.grad(jax.grad(jnp.abs))(0.0))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("alpha", [1.0, 2.0, 0.5])
def test_celu_derivatives_at_its_kink_match_jax(alpha: float, mode: str) -> None:
    """JAX writes celu with ``maximum``/``minimum``, whose ties split the derivative in half."""
    with _in_mode(mode):
        ours = lambda x: fg.nn.celu(x, alpha)        # noqa: E731
        theirs = lambda x: jax.nn.celu(x, alpha)     # noqa: E731
        for x in (-1.5, 0.0, 2.0):
            _same(ours(x), theirs(x))
            _same(fg.grad(ours)(x), jax.grad(theirs)(x))
            _same(fg.grad(fg.grad(ours))(x), jax.grad(jax.grad(theirs))(x))
        _same(fg.grad(ours)(60.0), jax.grad(theirs)(60.0))          # no overflow in the unused branch
        _same(fg.grad(ours)(-60.0), jax.grad(theirs)(-60.0))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "uint32", "int64"])
def test_bitwise_reductions_of_integers_match_jax(dtype: str, mode: str) -> None:
    """``reduce_and``/``reduce_or`` of integers are bitwise, as JAX's (not truth values)."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, 2, (3, 4)).astype(dtype) if dtype == "bool" else rng.integers(-100, 100, (3, 4)).astype(dtype)
    with _in_mode(mode):
        for name in ("reduce_and", "reduce_or", "reduce_xor"):
            for axes in ((0,), (1,), (0, 1), ()):
                _same(getattr(flax, name)(x, axes), getattr(jlax, name)(x, axes))
            _same(fg.jit(lambda v: getattr(flax, name)(v, (1,)))(x), getattr(jlax, name)(x, (1,)))
            _same(getattr(flax, name)(x[:0], (0,)), getattr(jlax, name)(x[:0], (0,)))
            with pytest.raises(TypeError):
                getattr(jlax, name)(x.astype(np.float32), (0,))
            with pytest.raises(TypeError, match="bool or int"):
                getattr(flax, name)(x.astype(np.float32), (0,))


SAMPLES = {"bool": np.array([True, False]), "int32": np.array([1, 2], np.int32),
           "uint32": np.array([1, 2], np.uint32), "float32": np.array([0.5, 0.25], np.float32),
           "complex64": np.array([0.5, 0.25j], np.complex64)}


def _elementwise_names() -> list[str]:
    """lax's public functions of one or two array operands (``x``, ``y``, ``operand``)."""
    names = []
    for n in sorted(set(dir(flax)) & set(dir(jlax))):
        if n.startswith("_") or not callable(getattr(jlax, n)):
            continue
        try:
            sig = inspect.signature(getattr(jlax, n))
        except (TypeError, ValueError):
            continue
        required = [p for p in sig.parameters.values()
                    if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(required) in (1, 2) and all(p.name in ("x", "y", "operand") for p in required):
            names.append(n)
    return names


def _outcome(fn: Any, args: tuple) -> str:
    try:
        return str(np.asarray(fn(*args)).dtype)
    except TypeError:
        return "TypeError"
    except Exception as err:            # JAX's own failures (cumlogsumexp of integers overflows)
        return f"failed: {type(err).__name__}"


@pytest.mark.parametrize("dtype", sorted(SAMPLES))
def test_lax_functions_take_and_refuse_the_dtypes_jax_does(dtype: str) -> None:
    """``lax.sin`` of int32 is JAX's ``TypeError`` (numpy's sin would promote it); where JAX
    takes the dtype, the result's dtype is JAX's."""
    names = _elementwise_names()
    assert {"sin", "add", "abs", "erf", "pow", "cumsum", "round", "is_finite"} <= set(names)
    arrays = SAMPLES[dtype]
    for n in names:
        arity = 2 if n in {"add", "sub", "mul", "div", "rem", "pow", "atan2", "max", "min", "eq", "ne", "lt", "le",
                           "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left",
                           "shift_right_arithmetic", "shift_right_logical", "complex", "nextafter"} else 1
        if len(inspect.signature(getattr(jlax, n)).parameters) < arity:
            continue
        args = (arrays,) * arity
        want = _outcome(getattr(jlax, n), args)
        if want.startswith("failed"):
            continue
        assert _outcome(getattr(flax, n), args) == want, n
    with pytest.raises(TypeError, match="sin does not accept dtype int32. Accepted dtypes are subtypes of floating, "
                                        "complexfloating"):
        flax.sin(SAMPLES["int32"])
    with pytest.raises(TypeError, match="add does not accept dtype bool at position 0"):
        flax.add(SAMPLES["bool"], SAMPLES["bool"])


def test_jax_functions_take_fungraph_arrays_as_numpy_arrays() -> None:
    """JAX reads ``sharding`` of every argument; a fungraph result offers JAX none, so JAX takes
    it as the numpy array it is (before: an AttributeError inside JAX's dispatch)."""
    f = fnp.arange(3.0)
    j = jnp.arange(3.0)
    want = np.arange(3.0)
    cases = [(lambda: j + f, want * 2), (lambda: j * f, want ** 2), (lambda: jnp.sin(f), np.sin(want)),
             (lambda: jax.jit(lambda v: v * 2)(f), want * 2), (lambda: jax.grad(lambda v: (v ** 2).sum())(f), 2 * want),
             (lambda: jax.vmap(jnp.cos)(f), np.cos(want)), (lambda: j[fnp.array([2, 0])], want[[2, 0]])]
    for run, expected in cases:
        out = run()
        assert isinstance(out, jax.Array)
        np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-12)
    assert isinstance(f + j, fg.Array)                 # numpy's operation on the left, as before
    assert f.sharding.device_set == {f.device} and f.sharding.is_fully_replicated


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("y", [3, 4, 5, 7, -1, -3])
def test_integer_pow_multiplies_as_xla_does(dtype: Any, y: int) -> None:
    """Repeated squaring, bit for bit as JAX's for real floats, eagerly and under jit (numpy's
    ``power`` of a negative float base rounds differently and is ~35x slower); complex products
    round as numpy's, not XLA's, so those agree to a few ulp."""
    rng = np.random.default_rng(y + 10)
    x = rng.standard_normal(257).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = (x + 1j * rng.standard_normal(257)).astype(dtype)
    expected = np.asarray(jax.jit(lambda v: jax.lax.integer_pow(v, y))(x))
    check = np.testing.assert_array_equal if np.dtype(dtype).kind == "f" else (
        lambda a, b: np.testing.assert_allclose(a, b, rtol=4e-6))
    check(np.asarray(flax.integer_pow(x, y)), expected)
    check(np.asarray(fg.jit(lambda v: flax.integer_pow(v, y))(x)), expected)


_OUT_OF_RANGE = [-3e10, -129.5, -1.5, -0.5, 0.7, 127.9, 200.0, 255.5, 256.0, 65535.9, 2.2e9, 4.3e9, 1e19, 2e19,
                 np.nan, np.inf, -np.inf]


@pytest.mark.parametrize("src", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("dst", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"])
def test_float_to_integer_conversion_saturates_as_jax_s(src: str, dst: str) -> None:
    """XLA clamps a float outside the integer type's range to its bounds and sends NaN to 0
    (``jnp.arange(254., 258.).astype('uint8')`` is ``[254, 255, 255, 255]``, from the sharp
    bits); numpy's cast wraps or is undefined there. Eagerly, by ``astype`` and under ``jit``."""
    with _in_mode("x64"):
        x = np.asarray(fnp.asarray(np.array(_OUT_OF_RANGE, np.float64)).astype(getattr(fnp, src)))
        want = jnp.asarray(x).astype(dst)
        for got in (fnp.asarray(x).astype(dst), flax.convert_element_type(x, dst),
                    fg.jit(lambda v: v.astype(dst))(x), fg.jit(lambda v: flax.convert_element_type(v * 1, dst))(x)):
            assert np.asarray(got).dtype == want.dtype
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("mode", MODES)
def test_linspace_matches_jax_s_with_traced_and_array_endpoints(mode: str) -> None:
    """``linspace`` as JAX's: computed in the mode's float (float32 with x64 off, not float64
    rounded), endpoints that are traced (under ``jit``, ``grad``, ``vmap``) or arrays, ``axis``,
    ``retstep``, integer dtypes and ``num`` 0 and 1; values within an ulp of XLA's."""
    def cases(lib: Any, np_: Any) -> list[Any]:
        return [np_.linspace(-1.2, 1.2, 7), np_.linspace(0, 10, 100), np_.linspace(0., 1., 8, endpoint=False),
                lib.jit(lambda t: np_.linspace(0., t, 5))(2.5), lib.grad(lambda t: np_.linspace(1., t, 4)[2])(3.),
                lib.vmap(lambda t: np_.linspace(t, 2 * t, 3))(np_.arange(1., 3.)),
                np_.linspace(np_.zeros(2), np_.array([1., 2.]), 4, axis=-1), np_.linspace(0., 1., 5, retstep=True)[1],
                np_.linspace(0, 10, 4, dtype=np_.int32), np_.linspace(2., 3., 1), np_.linspace(2., 3., 0),
                np_.linspace(1, 2 + 1j, 3)]

    with _in_mode(mode):
        for got, want in zip(cases(fg, fnp), cases(jax, jnp)):
            assert (got.shape, got.dtype, repr(got).endswith("weak_type=True)")) == \
                (want.shape, want.dtype, repr(want).endswith("weak_type=True)"))
            eps = np.finfo(want.dtype).eps if np.issubdtype(want.dtype, np.inexact) else 0
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2 * eps, atol=4 * eps)


_ARANGES = [((5,), None), ((5.,), None), ((0., 1., 0.1), None), ((-1., 1., 0.3), None), ((0.5, 10., 0.7), None),
            ((1e-3, 2., 0.013), None), ((2, 9, 3), None), ((9, 2, -2), None), ((0.5, 4), None),
            ((np.float32(0), 3), None), ((0, 5, 0.5), "int32"), ((0, 3, 1), "float16"), ((3, 1), None),
            ((0, 1, 0.1), "bfloat16"), ((np.int16(2), np.int16(7)), None)]


@pytest.mark.parametrize("mode", MODES)
def test_arange_matches_jax_s_bit_for_bit(mode: str) -> None:
    """``arange`` computes ``start + step * i`` in the result dtype as JAX does (numpy's float64
    values rounded to float32 differ in the last bit: ``arange(0., 1., 0.1)[9]``), with JAX's
    dtypes (an integer dtype truncates the step first)."""
    with _in_mode(mode):
        for args, dt in _ARANGES:
            kw = {} if dt is None else {"dtype": dt}
            got, want = fnp.arange(*args, **kw), jnp.arange(*args, **kw)
            assert (got.dtype, got.shape) == (want.dtype, want.shape), (args, dt)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=str((args, dt)))


def test_linspace_is_jax_s_within_an_ulp() -> None:
    """Scalar bounds give XLA's CPU values, in both modes, eagerly and under ``jit``: the short
    unrolled ramps (lane 1 of those up to 33 entries contracts differently), the medium ones and
    the looped long ones (1408 bytes and up, with an unrolled remainder). Bit for bit on the
    machines measured; the check allows 1 ulp, because XLA's contractions follow the CPU it
    compiles for."""
    cases = [(-3.7, 11.2, 13), (0., 1., 50), (2., -5., 33), (1e-3, 7., 180), (-7.43, -9.21, 400)]
    for mode in MODES:
        with _in_mode(mode):
            for start, stop, num in cases:
                for endpoint in (True, False):
                    want = np.asarray(jnp.linspace(start, stop, num, endpoint=endpoint))
                    got = np.asarray(fnp.linspace(start, stop, num, endpoint=endpoint))
                    assert got.dtype == want.dtype
                    np.testing.assert_array_max_ulp(got, want, 1)
                    assert got[0] == want[0] and got[-1] == want[-1], (mode, start, stop, num, endpoint)
            ramp = fg.jit(lambda a, b: fnp.linspace(a, b, 200))
            for start, stop, _ in cases[:3]:
                jitted = np.asarray(ramp(start, stop))
                np.testing.assert_array_equal(jitted, np.asarray(fnp.linspace(start, stop, 200)))
                np.testing.assert_array_max_ulp(jitted, np.asarray(jnp.linspace(start, stop, 200)), 1)


def _pad_cases(lib: Any, x: Any) -> list[Any]:
    widths = ((2, 1), (0, 3))
    cases = [lib.pad(x, widths, "linear_ramp", end_values=((1, 2), (3, -4))),
             lib.pad(x, widths, "mean", stat_length=((1, 2), (3, 1))), lib.pad(x, 2, "median", stat_length=(2, 3)),
             lib.pad(x, ((5, 1), (2, 9)), "reflect", reflect_type="odd")]
    if np.issubdtype(x.dtype, np.floating):
        cases += [lib.pad(x, 2, "linear_ramp"), lib.pad(x, widths, "maximum"),
                  lib.pad(x, widths, "minimum", stat_length=2), lib.pad(x, widths, "mean"), lib.pad(x, widths, "empty")]
    return cases


def test_pad_modes_match_jax_s_with_their_derivatives() -> None:
    """``linear_ramp`` (``end_values``), the statistics ``maximum``/``minimum``/``mean``/``median``
    (``stat_length``, rounded for integers), ``empty``, odd reflection and a callable mode, values and dtypes as
    JAX's in both modes, differentiable as JAX's, and JAX's errors for options a mode lacks."""
    rng = np.random.default_rng(0)
    xf = rng.normal(size=(3, 4)).astype(np.float32)
    xi = rng.integers(-9, 9, size=(3, 5)).astype(np.int32)
    weights = np.arange(42.0).reshape(6, 7)

    def loss(lib: Any, mode: str, kw: dict) -> Any:
        return lambda v: (lib.pad(v, ((2, 1), (1, 2)), mode, **kw) * weights).sum()

    for mode in MODES:
        with _in_mode(mode):
            for x in (xf, xi):     # JAX's cases in one jit: one compilation instead of one per case
                for got, want in zip(_pad_cases(fnp, x), jax.jit(lambda v: _pad_cases(jnp, v))(x), strict=True):
                    assert (got.dtype, got.shape) == (want.dtype, want.shape)
                    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)
            if mode == "x32":      # the derivatives' structure is the same in both modes
                continue
            grads = [("linear_ramp", {"end_values": 1.0}), ("median", {"stat_length": 2})]
            wants = jax.jit(lambda v: [jax.grad(loss(jnp, pad_mode, kw))(v) for pad_mode, kw in grads])(xf)
            for (pad_mode, kw), want in zip(grads, wants):
                np.testing.assert_allclose(fg.grad(loss(fnp, pad_mode, kw))(xf), want, rtol=1e-5)
            np.testing.assert_allclose(fg.jit(fg.grad(loss(fnp, *grads[1])))(xf), wants[1], rtol=1e-5)
    def first_entries(row: Any, width: tuple[int, int], axis: int, kw: dict) -> Any:
        row[:width[0]] = kw["v"] + axis
        return row

    np.testing.assert_array_equal(fnp.pad(xi, (1, 2), lambda row, w, axis, kw: row.at[:w[0]].set(kw["v"] + axis), v=7),
                                  np.pad(xi, (1, 2), first_entries, v=7))
    for pad_mode, kw, error in [("edge", {"constant_values": 1}, ValueError), ("mean", {"stat_length": 0}, ValueError),
                                ("foo", {}, NotImplementedError)]:
        for lib in (jnp, fnp):
            with pytest.raises(error):
                lib.pad(xf, 1, pad_mode, **kw)


def test_cov_weights_and_inverted_cdf_quantiles_match_jax() -> None:
    """``cov`` with ``fweights``/``aweights`` (their absolute values), ``ddof``/``bias`` and
    ``dtype``; ``quantile``/``percentile`` (and their NaN-skipping forms, which take every method
    too) with ``method="inverted_cdf"``, unweighted or with
    ``weights`` of ``a``'s shape or of the reduced axes, NaN rows and negative weights giving
    NaN, and both differentiated as JAX's (the derivatives with x64 on only: they have the same
    structure in both modes, and each JAX gradient costs a compilation)."""
    rng = np.random.default_rng(1)
    m = rng.normal(size=(3, 6)).astype(np.float32)
    fw = np.array([1, 2, -1, 3, 1, 2], np.int32)
    aw = rng.uniform(size=6).astype(np.float32)
    x = rng.normal(size=(4, 7)).astype(np.float32)
    w = rng.uniform(size=(4, 7)).astype(np.float32)
    w[2, 3] = -1.0
    xn = x.copy()
    xn[1, 2] = np.nan

    cov_weights = np.arange(9.0).reshape(3, 3)

    def covs(lib: Any) -> list[Any]:
        return [lib.cov(m, fweights=fw, aweights=aw), lib.cov(m.T, aweights=aw, rowvar=False, bias=True),
                lib.cov(m[0], m[1], fweights=fw, ddof=0)]

    def quantiles(lib: Any, v: Any, vn: Any, wv: Any) -> list[Any]:
        kw = {"method": "inverted_cdf"}
        return [lib.quantile(vn, np.array([0.0, 0.25, 0.5, 1.0], v.dtype), axis=1, weights=wv, keepdims=True, **kw),
                lib.percentile(v, np.array([10, 90], v.dtype), axis=1, **kw)]

    def quantile_loss(lib: Any) -> Any:
        return lambda v, wr: (lib.quantile(v, np.array([0.2, 0.8], v.dtype), axis=1, method="inverted_cdf",
                                           weights=wr) * np.arange(8.0).reshape(2, 4)).sum()

    for mode in MODES:
        with _in_mode(mode):
            for got, want in zip(covs(fnp), covs(jnp)):
                assert (got.dtype, got.shape) == (want.dtype, want.shape)
                np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-6, atol=1e-6)
            if mode == "x64":      # the derivatives' structure is the same in both modes
                grads = [lib_grad(lambda v, f=lib.cov: (f(v, aweights=aw, fweights=fw) * cov_weights).sum())(m)
                         for lib, lib_grad in ((fnp, fg.grad), (jnp, jax.grad))]
                np.testing.assert_allclose(grads[0], grads[1], rtol=1e-4, atol=1e-5)
            # JAX multiplies q and the weights' total with lax.mul: with x64, its operands must be float64
            xs, ws, wr = (v.astype(np.float64) if mode == "x64" else v for v in (x, w, np.abs(w[0])))
            xns = xn.astype(xs.dtype)
            gots, wants = ([*quantiles(lib, xs, xns, ws),
                            lib.nanquantile(xns, np.array([0.3, 0.5], xs.dtype), axis=1, method="midpoint"),
                            lib.nanpercentile(xns, xs.dtype.type(40), axis=1, method="inverted_cdf", weights=ws)]
                           for lib in (fnp, jnp))
            for got, want in zip(gots, wants, strict=True):
                assert (got.dtype, got.shape) == (want.dtype, want.shape)
                np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
            if mode == "x64":
                np.testing.assert_array_equal(fg.grad(quantile_loss(fnp))(xs, wr), jax.grad(quantile_loss(jnp))(xs, wr))
    with pytest.raises(TypeError, match="fweights must be integer"):
        fnp.cov(m, fweights=aw)
    with pytest.raises(NotImplementedError, match="only 'inverted_cdf'"):
        fnp.quantile(x, 0.5, weights=w)


def _outcomes(lib: Any, calls: list[Any]) -> list[str]:
    """Each call's result dtypes, or the kind of error it raised."""
    out = []
    for call in calls:
        try:
            res = call(lib)
        except (TypeError, ValueError, AttributeError) as e:
            out.append("TypeError" if isinstance(e, AttributeError) else type(e).__name__)
        else:
            out.append(" ".join(str(np.asarray(r).dtype) for r in (res if isinstance(res, (tuple, list)) else [res])))
    return out


def test_lax_argument_checks_and_product_dtypes_are_jax_s() -> None:
    """``top_k`` takes an integer ``k`` only, ``sort_key_val`` arrays only (JAX's AttributeError
    for a Python scalar is a TypeError here), ``integer_pow`` the float exponents JAX's lowering
    has a case for; ``dot_general``/``batch_matmul`` of mixed dtypes give XLA's more precise
    operand dtype (int32 x uint32 is int32, int8 x uint8 int8, float32 x int32 float32), and
    attention lengths must be int32 (int64 refused with x64 on)."""
    a, b = np.arange(12.0).reshape(3, 4), np.arange(20.0).reshape(4, 5)
    dims = (((1,), (0,)), ((), ()))
    calls = [lambda L: L.top_k(np.arange(5.0), 1.0), lambda L: L.top_k(np.arange(5.0), np.int64(2)),
             lambda L: L.sort_key_val(1.0, 2.0), lambda L: L.sort_key_val([3.0, 1.0], np.arange(2.0)),
             lambda L: L.sort_key_val(np.array([3.0, 1.0]), np.arange(2)),
             *[lambda L, y=y: L.integer_pow(np.arange(1.0, 4.0), y) for y in (0.0, 2.0, -1.0, 1.5)],
             lambda L: L.integer_pow(np.arange(3), -1.0),
             *[lambda L, p=p, q=q: L.dot_general(a.astype(p), b.astype(q), dims)
               for p, q in [("int32", "uint32"), ("int8", "uint8"), ("float16", "float32"), ("complex64", "float64")]],
             lambda L: L.batch_matmul(a[None].astype(np.float32), b[None].astype(np.int32)),
             lambda L: L.batch_matmul(a[None].astype(np.float32), b[None])]
    q = np.ones((2, 3, 2, 4), np.float32)
    lengths = [lambda nn, d=d: nn.dot_product_attention(q, q, q, query_seq_lengths=np.array([2, 3], d),
                                                        key_value_seq_lengths=np.array([1, 3], d))
               for d in (np.int64,)]
    for mode in MODES:
        with _in_mode(mode):
            assert _outcomes(flax, calls) == _outcomes(jlax, calls)
            assert _outcomes(fg.nn, lengths) == _outcomes(jax.nn, lengths)
            # JAX's lowering refuses y=4.0 unless its cache holds an integer_pow of y=4 (4.0 == 4
            # as a key), so its outcome depends on what ran before; fungraph refuses it always
            with pytest.raises(TypeError):
                flax.integer_pow(np.arange(1.0, 4.0), 4.0)
            got = flax.dot_general(np.full((2, 3), -1, np.int32), np.full((3, 2), 3_000_000_000, np.uint32), dims)
            want = jlax.dot_general(np.full((2, 3), -1, np.int32), np.full((3, 2), 3_000_000_000, np.uint32), dims)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
            assert fg.grad(lambda v: flax.integer_pow(v, 3.0))(2.0) == jax.grad(lambda v: jlax.integer_pow(v, 3.0))(2.0)


def test_random_bcoo_warns_of_its_float64_default_as_jax_s() -> None:
    """JAX's ``random_bcoo`` asks for float64 values by default, so with x64 off it warns that
    they are truncated (and for int64 indices), and with x64 on it does not (JAX's own call is
    compared in the 32-bit mode only: each costs about a second of compilation)."""
    import warnings

    from jax.experimental import sparse as jsparse

    from fungraph.experimental import sparse as fsparse

    def messages(sparse: Any, random: Any, **kw: Any) -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mat = sparse.random_bcoo(random.PRNGKey(0), (3, 4), nse=0.5, **kw)
        return [str(np.asarray(mat.data).dtype), str(np.asarray(mat.indices).dtype)] + sorted(
            str(w.message).split(".")[0] for w in caught)

    with _in_mode("x32"):
        for kw in ({}, {"indices_dtype": np.int64}):
            assert messages(fsparse, fg.random, **kw) == messages(jsparse, jax.random, **kw), kw
    with _in_mode("x64"):      # JAX's float64 default is no longer truncated: no warning
        assert messages(fsparse, fg.random) == ["float64", "int64"]
