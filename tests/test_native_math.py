"""fungraph/backends/native/fgmath.h against numpy and higher-precision references.

The header is compiled at test time with gcc into a small shared library (one vectorised loop
per function and dtype), loaded with ctypes, and evaluated on random arguments spread over the
whole domain (log-uniform magnitudes) and on special values. Each function and dtype has a
stated ulp bound (the table in the header and in docs/native_math.md). Without gcc these tests
skip, except under ``CI=true`` where a missing compiler is a failure.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from fungraph.backends.native import toolchain

HEADER_DIR = Path(__file__).resolve().parents[1] / "fungraph" / "backends" / "native"
LD = np.longdouble
TINY64 = np.finfo(np.float64).smallest_subnormal
HUGE64 = np.finfo(np.float64).max
TRIG_MAX = float.fromhex("0x1.921fb5p+20")


def _logistic(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _small(trig: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """``trig`` for |x| <= TRIG_MAX and NaN beyond, as the fg_*_small functions."""
    def f(x: np.ndarray) -> np.ndarray:
        return np.where(np.abs(x) <= TRIG_MAX, trig(x), np.nan).astype(x.dtype)
    return f


def _below_one(f: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """``f`` for |x| < 1 and NaN beyond, as fg_tanh_small."""
    def g(x: np.ndarray) -> np.ndarray:
        return np.where(np.abs(x) < 1, f(x), np.nan).astype(x.dtype)
    return g


def _erf(x: np.ndarray) -> np.ndarray:
    return np.frompyfunc(math.erf, 1, 1)(np.asarray(x, np.float64)).astype(np.float64)


@dataclasses.dataclass(frozen=True)
class MathFn:
    """One header function: its references, the argument ranges to sample, and its ulp bounds.

    ``exact`` computes the true value (longdouble where numpy has it); ``numpy_ref`` is numpy's
    own function in the argument's dtype; ``ranges`` are (lo, hi) magnitude ranges sampled
    log-uniformly with both signs unless ``positive``; bounds are max ulp errors."""

    name: str
    exact: Callable[[np.ndarray], np.ndarray]
    numpy_ref: Callable[[np.ndarray], np.ndarray]
    ranges: tuple[tuple[float, float], ...]
    ulp64: float
    ulp32: float
    positive: bool = False


def _fn(name: str, ufunc: Callable[[np.ndarray], np.ndarray], ranges: tuple[tuple[float, float], ...],
        ulp64: float, ulp32: float = 1.0, positive: bool = False) -> MathFn:
    return MathFn(name, lambda x: ufunc(x.astype(LD)), ufunc, ranges, ulp64, ulp32, positive)


WHOLE = ((TINY64, HUGE64),)
FUNCTIONS = {f.name: f for f in (
    _fn("exp", np.exp, WHOLE + ((1e-3, 750.0),), 1.0),
    _fn("exp2", np.exp2, WHOLE + ((1e-3, 1100.0),), 1.5),
    _fn("expm1", np.expm1, WHOLE + ((1e-9, 750.0),), 1.5, 1.5),
    _fn("log", np.log, WHOLE + ((0.5, 2.0),), 1.0),
    _fn("log2", np.log2, WHOLE + ((0.5, 2.0),), 1.5),
    _fn("log10", np.log10, WHOLE + ((0.5, 2.0),), 1.5),
    _fn("log1p", np.log1p, WHOLE + ((1e-9, 1.0),), 1.0),
    _fn("tanh", np.tanh, WHOLE + ((1e-3, 25.0), (0.5, 2.0)), 1.5, 1.5),
    _fn("tanh_small", _below_one(np.tanh), ((TINY64, 1.0), (0.25, 1.0), (1.0, 4.0)), 1.5, 1.5),
    _fn("sinh", np.sinh, WHOLE + ((1e-3, 712.0),), 2.0, 2.0),
    _fn("cosh", np.cosh, WHOLE + ((1e-3, 712.0),), 2.0, 2.0),
    MathFn("logistic", lambda x: _logistic(x.astype(LD)), _logistic, WHOLE + ((1e-3, 750.0),), 2.0, 2.0),
    MathFn("erf", _erf, _erf, WHOLE + ((1e-3, 7.0),), 1.5, 1.0),
    _fn("sin", np.sin, WHOLE + ((0.5, 200.0), (1e6, 1e8)), 1.0),
    _fn("cos", np.cos, WHOLE + ((0.5, 200.0), (1e6, 1e8)), 1.0),
    _fn("tan", np.tan, WHOLE + ((0.5, 200.0), (1e6, 1e8)), 2.0),
    _fn("sin_small", _small(np.sin), ((TINY64, TRIG_MAX), (0.5, 200.0)), 1.0),
    _fn("cos_small", _small(np.cos), ((TINY64, TRIG_MAX), (0.5, 200.0)), 1.0),
    _fn("tan_small", _small(np.tan), ((TINY64, TRIG_MAX), (0.5, 200.0)), 2.0),
    _fn("atan", np.arctan, WHOLE + ((0.1, 10.0),), 1.0),
    _fn("asin", np.arcsin, ((TINY64, 1.0), (0.3, 1.0)), 1.0),
    _fn("acos", np.arccos, ((TINY64, 1.0), (0.3, 1.0)), 1.0),
    _fn("sqrt", np.sqrt, WHOLE, 0.5, 0.5),
    _fn("cbrt", np.cbrt, WHOLE + ((0.1, 100.0),), 1.0),
    _fn("acosh", np.arccosh, ((1.0, HUGE64), (1.0, 3.0), (1.0, 1.0 + 1e-6)), 2.0, positive=True),
    _fn("asinh", np.arcsinh, WHOLE + ((0.1, 10.0),), 2.0),
    _fn("atanh", np.arctanh, ((TINY64, 1.0), (0.3, 1.0)), 2.0),
)}

SPECIAL64 = np.array([
    0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, TINY64, -TINY64,
    np.finfo(np.float64).smallest_normal, -np.finfo(np.float64).smallest_normal, HUGE64, -HUGE64,
    709.782712893384, 709.7827128933841, 709.79, -708.3964185322641, -745.1332191019411,
    -745.1332191019412, -746.0, 710.4758600739439, -710.4758600739439, 1024.0, -1022.0, -1074.0,
    -1075.0, 1e-300, 1e-20, 1e-8, 0.84375, 2.25, 5.9, 6.0, 0.625, 0.41421356237309503, 2.414213562373095,
    1 + 2**-52, 1 - 2**-53, -1 + 2**-53, 1.5707963267948966, 3.141592653589793, 4.71238898038469,
    6.283185307179586, 1e5, 1.6e6, 22.0, 40.0, 89.0, -104.0, 88.72283935546875, 88.72284,
])


def _trig_specials() -> np.ndarray:
    """Doubles within a few ulp of multiples of pi/2 (cancellation in the reduction), both sides
    of the switch from Cody-Waite to Payne-Hanek reduction, and the double closest to a multiple
    of pi/2 (6381956970095103 * 2^797, |x mod pi/2| ~ 2^-61 |x|)."""
    k = np.concatenate([np.arange(1, 2000), np.unique(np.geomspace(2000, 2**24, 3000).astype(np.int64))])
    near = (k.astype(LD) * (np.pi / LD(2))).astype(np.float64)
    near = np.concatenate([near + np.spacing(near) * d for d in (-2, -1, 0, 1, 2)])
    edge = np.array([TRIG_MAX, np.nextafter(TRIG_MAX, np.inf), 2.0**20, 2.0**52, 2.0**53, 2.0**1023])
    hard = np.array([6381956970095103.0 * 2.0**797])
    return np.concatenate([near, -near, edge, -edge, hard, -hard])


def _compiler() -> str:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but no C compiler (gcc or cc) on PATH")
        pytest.skip("no C compiler (gcc or cc) on PATH")
    return cc


def _wrapper_source() -> str:
    lines = ['#include "fgmath.h"']
    for name in FUNCTIONS:
        for ctype, suffix in (("double", "f64"), ("float", "f32")):
            lines.append(
                f"void t_{name}_{suffix}(long n, const {ctype} *restrict x, {ctype} *restrict y) {{\n"
                f"#pragma omp simd\n    for (long i = 0; i < n; i++) y[i] = fg_{name}_{suffix}(x[i]);\n}}")
    for ctype, suffix in (("double", "f64"), ("float", "f32")):
        for check in ("trig", "tanh"):
            lines.append(
                f"void t_{check}_small_ok_{suffix}(long n, const {ctype} *restrict x, {ctype} *restrict y) {{\n"
                f"#pragma omp simd\n    for (long i = 0; i < n; i++) y[i] = fg_{check}_small_ok_{suffix}(x[i]);\n}}")
        lines.append(
            f"void t_pow_{suffix}(long n, const {ctype} *restrict x, const {ctype} *restrict p,\n"
            f"                    {ctype} *restrict y) {{\n"
            f"#pragma omp simd\n    for (long i = 0; i < n; i++) y[i] = fg_pow_{suffix}(x[i], p[i]);\n}}")
        lines.append(
            f"void t_atan2_{suffix}(long n, const {ctype} *restrict x, const {ctype} *restrict p,\n"
            f"                      {ctype} *restrict y) {{\n"
            f"#pragma omp simd\n    for (long i = 0; i < n; i++) y[i] = fg_atan2_{suffix}(x[i], p[i]);\n}}")
    return "\n".join(lines) + "\n"


# Native flags with gcc's default FMA contraction; the native engine's own flags (without
# contraction: fgmath.h's polynomials still fuse where the target has FMA, the rest rounds
# each operation); and a plain build without FMA contraction (nor AVX on x86-64).
NATIVE_FLAGS = ["-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fopenmp-simd"]
FLAG_SETS = {
    "native": NATIVE_FLAGS,
    "engine": list(toolchain.FLAGS),
    "baseline": ["-O2", "-fno-math-errno", "-fopenmp-simd", "-ffp-contract=off"],
}


def _build(cc: str, flags: list[str], build: Path) -> ctypes.CDLL:
    src = build / "fgmath_test.c"
    src.write_text(_wrapper_source())
    lib = build / "libfgmath_test.so"
    cmd = [cc, *flags, "-shared", "-fPIC", "-I", str(HEADER_DIR), str(src), "-o", str(lib)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(lib))


@pytest.fixture(scope="module")
def native_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[ctypes.CDLL, Path]:
    """The library built with the native engine's flags, and gcc's report of the loops it
    vectorised (written next to the source)."""
    build = tmp_path_factory.mktemp("fgmath_native")
    report = build / "vectorised.txt"
    return _build(_compiler(), [*NATIVE_FLAGS, f"-fopt-info-vec-optimized={report}"], build), report


@pytest.fixture(scope="module", params=sorted(FLAG_SETS))
def library(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    if request.param == "native":
        return request.getfixturevalue("native_build")[0]
    return _build(_compiler(), FLAG_SETS[request.param], tmp_path_factory.mktemp(f"fgmath_{request.param}"))


def call(lib: ctypes.CDLL, name: str, x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    y = np.empty_like(x)
    suffix = "f64" if x.dtype == np.float64 else "f32"
    fn = getattr(lib, f"t_{name}_{suffix}")
    fn.restype = None
    fn(ctypes.c_long(x.size), ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data))
    return y


def ulp_error(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units of the last place of ``want`` rounded to got's dtype; NaN and Inf
    must match exactly (0 or inf error), and zeros must match in sign."""
    dt = got.dtype
    with np.errstate(all="ignore"):
        want_r = want.astype(dt)
        same_special = (np.isnan(got) & np.isnan(want_r)) | ((got == want_r) & np.isinf(want_r))
        err = np.abs(got.astype(LD) - want.astype(LD)) / np.spacing(np.abs(want_r)).astype(LD)
        err = np.where(np.isnan(err), np.inf, err)
        err = np.where(same_special, 0.0, err)
        zero = want_r == 0
        err = np.where(zero & (np.signbit(got) != np.signbit(want_r)), np.inf, err)
    return err.astype(np.float64)


def sample(fn: MathFn, dtype: type, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    finfo = np.finfo(dtype)
    parts = []
    for lo, hi in fn.ranges:
        lo_c, hi_c = max(lo, float(finfo.smallest_subnormal)), min(hi, float(finfo.max))
        mag = np.exp(rng.uniform(np.log(lo_c), np.log(hi_c), n))
        sign = 1.0 if fn.positive else rng.choice([-1.0, 1.0], n)
        parts.append((mag * sign).astype(dtype))
    return np.concatenate(parts)


def specials(name: str, dtype: type) -> np.ndarray:
    vals = SPECIAL64
    if dtype == np.float32:
        f32 = np.finfo(np.float32)
        vals = np.concatenate([vals, [f32.smallest_subnormal, f32.smallest_normal, f32.max, -f32.max]])
    if name.split("_")[0] in ("sin", "cos", "tan"):
        vals = np.concatenate([vals, _trig_specials()])
        if dtype == np.float32:
            # the floats nearest k pi/2 for 2^20 <= k <= 2^40 (float32 Payne-Hanek's hard cases)
            k = np.unique(np.geomspace(2.0**20, 2.0**40, 20_000).round())
            near = (k.astype(LD) * (np.pi / LD(2))).astype(np.float32).astype(np.float64)
            vals = np.concatenate([vals, near, -near])
    with np.errstate(over="ignore"):
        return vals.astype(dtype)


def check(lib: ctypes.CDLL, fn: MathFn, x: np.ndarray) -> None:
    got = call(lib, fn.name, x)
    with np.errstate(all="ignore"):
        if x.dtype == np.float64:
            exact, bound = fn.exact(x), fn.ulp64
        else:
            exact, bound = fn.exact(x.astype(np.float64)), fn.ulp32
        theirs = fn.numpy_ref(x).astype(x.dtype)
        err = ulp_error(got, exact)
        err_np = ulp_error(got, theirs.astype(LD))
    worst = int(np.argmax(err))
    assert err[worst] <= bound, (
        f"fg_{fn.name} {x.dtype}: {err[worst]:.3g} ulp > {bound} at x={x[worst]!r} "
        f"(got {got[worst]!r}, want {exact[worst]!r})")
    # numpy's own float64 functions are not always within an ulp (its cos near multiples of
    # pi/2, for one): compare where they are
    fair = ulp_error(theirs, exact) <= 1.0
    worst_np = int(np.argmax(np.where(fair, err_np, 0.0)))
    assert not fair[worst_np] or err_np[worst_np] <= 1.0 + bound, (
        f"fg_{fn.name} {x.dtype}: {err_np[worst_np]:.3g} ulp from numpy at x={x[worst_np]!r} "
        f"(got {got[worst_np]!r}, numpy {theirs[worst_np]!r})")


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_random_arguments(library: ctypes.CDLL, name: str, dtype: type) -> None:
    check(library, FUNCTIONS[name], sample(FUNCTIONS[name], dtype, 100_000, seed=len(name)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_special_values(library: ctypes.CDLL, name: str, dtype: type) -> None:
    x = specials(name, dtype)
    check(library, FUNCTIONS[name], x)
    got = call(library, name, x)
    with np.errstate(all="ignore"):
        want = FUNCTIONS[name].numpy_ref(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"fg_{name}: NaN where numpy has none")
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf], err_msg=f"fg_{name}: infinities differ from numpy")
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]), err_msg=f"fg_{name}: signed zero")


def test_every_function_vectorises(native_build: tuple[ctypes.CDLL, Path]) -> None:
    """gcc vectorises the loop around every function (no branch or call left in them)."""
    report = native_build[1]
    src = report.parent / "fgmath_test.c"
    vectorised = {int(line.split(":")[1]) for line in report.read_text().splitlines() if "loop vectorized" in line}
    loops = {i + 1: line for i, line in enumerate(src.read_text().splitlines()) if line.lstrip().startswith("for")}
    missing = [line.strip() for i, line in loops.items() if i not in vectorised]
    assert not missing, f"gcc did not vectorise: {missing}"


POW_ULP = {np.float64: 1.5, np.float32: 1.0}


def call_pow(lib: ctypes.CDLL, x: np.ndarray, p: np.ndarray, name: str = "pow") -> np.ndarray:
    x, p = np.ascontiguousarray(x), np.ascontiguousarray(p, x.dtype)
    y = np.empty_like(x)
    fn = getattr(lib, f"t_{name}_f64" if x.dtype == np.float64 else f"t_{name}_f32")
    fn.restype = None
    fn(ctypes.c_long(x.size), *(ctypes.c_void_p(a.ctypes.data) for a in (x, p, y)))
    return y


def pow_arguments(dtype: type, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Bases log-uniform over the whole range, exponents mostly chosen so x**y lands anywhere
    from underflow to overflow, some plain, and negative bases with integer exponents."""
    rng = np.random.default_rng(7)
    finfo = np.finfo(dtype)
    lo, hi = np.log(float(finfo.smallest_subnormal)), np.log(float(finfo.max))
    x = np.exp(rng.uniform(lo, hi, n))
    target = rng.uniform(lo - 5, hi + 5, n)
    y = target / np.log(x)
    y[: n // 4] = rng.uniform(-30, 30, n // 4)
    near_one = slice(n // 4, n // 2)
    x[near_one] = 1 + rng.uniform(0.01, 0.5, n // 4) * rng.choice([-1, 1], n // 4) * 10.0 ** rng.uniform(-13, 0, n // 4)
    y[near_one] = target[near_one] / np.log(x[near_one])
    neg = slice(n // 2, 3 * n // 4)
    x[neg] = -x[neg]
    y[neg] = np.round(np.clip(y[neg], -2e9, 2e9))
    with np.errstate(all="ignore"):
        return x.astype(dtype), y.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_pow_random_arguments(library: ctypes.CDLL, dtype: type) -> None:
    x, y = pow_arguments(dtype, 200_000)
    got = call_pow(library, x, y)
    with np.errstate(all="ignore"):
        exact = np.power(x.astype(LD), y.astype(LD)) if dtype == np.float64 else np.power(
            x.astype(np.float64).astype(LD), y.astype(np.float64).astype(LD))
        err = ulp_error(got, exact)
    worst = int(np.argmax(err))
    assert err[worst] <= POW_ULP[dtype], (
        f"fg_pow {np.dtype(dtype)}: {err[worst]:.3g} ulp at x={x[worst]!r}, y={y[worst]!r} "
        f"(got {got[worst]!r}, want {exact[worst]!r})")


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_pow_special_values(library: ctypes.CDLL, dtype: type) -> None:
    vals = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5,
                     -2.5, 1e-310, 1e300, -1e300, 2.0**53, 2.0**53 + 2, 2.0**52 + 1, -(2.0**52 + 1), 1e-30])
    with np.errstate(over="ignore"):
        x, y = (a.ravel().astype(dtype) for a in np.meshgrid(vals, vals))
    got = call_pow(library, x, y)
    with np.errstate(all="ignore"):
        want = np.power(x, y)
        exact = np.power(x.astype(np.float64).astype(LD), y.astype(np.float64).astype(LD))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg="fg_pow: NaN where numpy has none")
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf], err_msg="fg_pow: infinities differ from numpy")
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]), err_msg="fg_pow: signed zero")
    finite = np.isfinite(want)
    assert np.max(ulp_error(got[finite], exact[finite])) <= POW_ULP[dtype]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_small_trig_agrees_where_its_check_passes(library: ctypes.CDLL, dtype: type) -> None:
    """fg_trig_small_ok says exactly where fg_{sin,cos,tan}_small agree with the full-range
    functions (bit for bit in float64; float32 sin and cos small have their own polynomials)."""
    x = np.concatenate([specials("sin", dtype), sample(FUNCTIONS["sin"], dtype, 20_000, seed=3)])
    ok = call(library, "trig_small_ok", x) != 0
    np.testing.assert_array_equal(ok, ~(np.abs(x) > TRIG_MAX) | np.isinf(x))
    for name in ("sin", "cos", "tan"):
        small, full = call(library, f"{name}_small", x), call(library, name, x)
        if dtype == np.float64:
            np.testing.assert_array_equal(small[ok], full[ok], err_msg=f"fg_{name}_small")
        else:
            assert ulp_error(small[ok], full[ok].astype(LD)).max() <= 2.0, f"fg_{name}_small"
        assert np.isnan(small[~ok]).all(), f"fg_{name}_small is not NaN beyond FG_TRIG_SMALL_MAX"


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_small_tanh_agrees_where_its_check_passes(library: ctypes.CDLL, dtype: type) -> None:
    """fg_tanh_small_ok says exactly where |x| < 1 (not NaN), and there fg_tanh_small is
    fg_tanh bit for bit (a loop picks either per iteration); NaN beyond."""
    edges = [1.0, -1.0, np.nextafter(dtype(1), dtype(0)), -np.nextafter(dtype(1), dtype(0)), 2.0**-27, 2.0**-13]
    x = np.concatenate([specials("tanh", dtype), np.array(edges).astype(dtype),
                        sample(FUNCTIONS["tanh"], dtype, 20_000, seed=5)])
    ok = call(library, "tanh_small_ok", x) != 0
    np.testing.assert_array_equal(ok, np.abs(x) < 1)
    small, full = call(library, "tanh_small", x), call(library, "tanh", x)
    np.testing.assert_array_equal(small[ok], full[ok])
    np.testing.assert_array_equal(np.signbit(small[ok]), np.signbit(full[ok]))
    assert np.isnan(small[~ok]).all(), "fg_tanh_small is not NaN from 1 on"


ATAN2_ULP = 2.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_atan2(library: ctypes.CDLL, dtype: type) -> None:
    """Random (y, x) over all magnitudes and signs, and every pair of special values."""
    rng = np.random.default_rng(11)
    finfo = np.finfo(dtype)
    lo, hi = np.log(float(finfo.smallest_subnormal)), np.log(float(finfo.max))
    n = 100_000
    y = np.exp(rng.uniform(lo, hi, n)) * rng.choice([-1.0, 1.0], n)
    x = np.exp(rng.uniform(lo, hi, n)) * rng.choice([-1.0, 1.0], n)
    y[: n // 2] = rng.uniform(-10, 10, n // 2)
    x[: n // 2] = rng.uniform(-10, 10, n // 2)
    vals = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-310, -1e-310, 1e300, -1e300])
    sy, sx = np.meshgrid(vals, vals)
    with np.errstate(over="ignore"):
        y = np.concatenate([y, sy.ravel()]).astype(dtype)
        x = np.concatenate([x, sx.ravel()]).astype(dtype)
    got = call_pow(library, y, x, "atan2")
    with np.errstate(all="ignore"):
        exact = np.arctan2(y.astype(np.float64).astype(LD), x.astype(np.float64).astype(LD))
        err = ulp_error(got, exact)
    worst = int(np.argmax(err))
    bound = ATAN2_ULP if dtype == np.float64 else 1.0
    assert err[worst] <= bound, (f"fg_atan2 {np.dtype(dtype)}: {err[worst]:.3g} ulp at y={y[worst]!r}, "
                                 f"x={x[worst]!r} (got {got[worst]!r}, want {exact[worst]!r})")
    want = np.arctan2(y, x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg="fg_atan2: NaN where numpy has none")
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]), err_msg="fg_atan2: signed zero")


def test_the_fit_script_reproduces_the_float32_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    """``scripts/fit_fgmath.py f32 NAME...`` prints the float32 polynomials fgmath.h holds."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_fit_fgmath", HEADER_DIR.parents[2] / "scripts" / "fit_fgmath.py")
    fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit)
    header = (HEADER_DIR / "fgmath.h").read_text()
    names = [n for n in fit.FITS32 if f"fg__poly_{n}_f32(float z)" in header]
    assert {"exp", "log", "sin", "cos"} <= set(names), names
    fit.main(["f32", *names])
    printed = capsys.readouterr().out
    returns = [line.strip() for line in printed.splitlines() if line.strip().startswith("return ")]
    assert len(returns) == len(names) and all(f"fg__poly_{n}_f32(float z)" in printed for n in names), printed
    for line in returns:
        assert line in header, line
