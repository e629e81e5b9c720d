"""Polynomial coefficients for fungraph/backends/native/fgmath.h, from Chebyshev-node interpolation.

Each kernel polynomial is interpolated at Chebyshev nodes in 60-digit decimal arithmetic (close
to the minimax polynomial), its coefficients are rounded to the target format, and the error of
the rounded polynomial is measured on a dense grid. Run: python scripts/fit_fgmath.py [name...]
(float64 kernels), ``f32 [name...]`` (float32 kernels, ``FITS32``), ``erfc``, ``tanh_rational`` or
``twoverpi``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from decimal import Decimal, getcontext

import numpy as np

getcontext().prec = 130
D = Decimal


def _pi() -> Decimal:
    """pi by Machin's formula, 16*atan(1/5) - 4*atan(1/239)."""
    def atan_inv(n: int) -> Decimal:
        x, total, k, term = D(1) / n, D(0), 0, D(1) / n
        while abs(term) > D(10) ** -(getcontext().prec + 5):
            total += term / (2 * k + 1) * (-1) ** k
            k += 1
            term = x ** (2 * k + 1)
        return total
    return 16 * atan_inv(5) - 4 * atan_inv(239)


PI = _pi()


def _series(x: Decimal, terms: Callable[[int, Decimal], Decimal]) -> Decimal:
    total, k = D(0), 0
    while True:
        t = terms(k, x)
        total += t
        if t == 0 or abs(t) < D(10) ** -75 * max(abs(total), D(10) ** -300):
            return total
        k += 1


def _fact(n: int) -> int:
    out = 1
    for i in range(2, n + 1):
        out *= i
    return out


def sin(x: Decimal) -> Decimal:
    return _series(x, lambda k, x: (-1) ** k * x ** (2 * k + 1) / _fact(2 * k + 1))


def cos(x: Decimal) -> Decimal:
    return _series(x, lambda k, x: (-1) ** k * x ** (2 * k) / _fact(2 * k))


def atan(x: Decimal) -> Decimal:
    if abs(x) > D("0.25"):
        return 2 * atan(x / (1 + (1 + x * x).sqrt()))
    return _series(x, lambda k, x: (-1) ** k * x ** (2 * k + 1) / (2 * k + 1))


def asin(x: Decimal) -> Decimal:
    return atan(x / (1 - x * x).sqrt())


def erf(x: Decimal) -> Decimal:
    getcontext().prec = 200
    s = _series(x, lambda k, x: (-1) ** k * x ** (2 * k + 1) / (_fact(k) * (2 * k + 1)))
    out = 2 / PI.sqrt() * s
    getcontext().prec = 130
    return +out


def tanh(x: Decimal) -> Decimal:
    e = (2 * x).exp()
    return (e - 1) / (e + 1)


def sinh(x: Decimal) -> Decimal:
    return _series(x, lambda k, x: x ** (2 * k + 1) / _fact(2 * k + 1))


def tan(x: Decimal) -> Decimal:
    return sin(x) / cos(x)


def fit(g: Callable[[Decimal], Decimal], a: float, b: float, deg: int, fmt: type = float,
        grid: int = 800) -> tuple[list[float], float]:
    """Interpolate g at deg+1 Chebyshev nodes of [a, b]; return rounded coefficients and the
    max relative error of the rounded polynomial on a grid."""
    da, db = D(repr(a)), D(repr(b))
    n = deg + 1
    nodes = [(da + db) / 2 + (db - da) / 2 * cos(PI * (2 * i + 1) / (2 * n)) for i in range(n)]
    vals = [g(t) for t in nodes]
    coef = list(vals)
    for j in range(1, n):
        for i in range(n - 1, j - 1, -1):
            coef[i] = (coef[i] - coef[i - 1]) / (nodes[i] - nodes[i - j])
    poly = [D(0)] * n
    for i in range(n - 1, -1, -1):
        poly = [D(0)] + poly[:-1]
        for k in range(n - 1):
            poly[k] -= nodes[i] * poly[k + 1]
        poly[0] += coef[i]
    rounded = [float(fmt(float(c))) for c in poly]
    worst = 0.0
    for i in range(grid + 1):
        t = da + (db - da) * i / grid
        exact = g(t)
        approx = D(0)
        for c in reversed(rounded):
            approx = approx * t + D(c)
        if exact != 0:
            worst = max(worst, float(abs((approx - exact) / exact)))
    return rounded, worst


def _solve(rows: list[list[Decimal]], rhs: list[Decimal]) -> list[Decimal]:
    """Gaussian elimination with partial pivoting in decimal arithmetic."""
    n = len(rhs)
    m = [row[:] + [b] for row, b in zip(rows, rhs)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c and m[r][c] != 0:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit_rational(g: Callable[[Decimal], Decimal], a: float, b: float, m: int, n: int, unit_num: bool = False,
                 grid: int = 600) -> tuple[list[float], list[float], float]:
    """Interpolate g by N(z)/D(z) (degrees m and n, D(0) = 1, and N(0) = 1 with ``unit_num``)
    at Chebyshev nodes of [a, b]; return the rounded coefficients of N and D (lowest first) and
    the max relative error of the rounded rational on a grid."""
    da, db = D(repr(a)), D(repr(b))
    k = m + n + (0 if unit_num else 1)
    nodes = [(da + db) / 2 + (db - da) / 2 * cos(PI * (2 * i + 1) / (2 * k)) for i in range(k)]
    first = 1 if unit_num else 0
    rows, rhs = [], []
    for z in nodes:
        gz = g(z)
        rows.append([z ** j if j else D(1) for j in range(first, m + 1)] + [-gz * z ** j for j in range(1, n + 1)])
        rhs.append(gz - 1 if unit_num else gz)
    sol = _solve(rows, rhs)
    num = [1.0] * first + [float(c) for c in sol[:m + 1 - first]]
    den = [1.0] + [float(c) for c in sol[m + 1 - first:]]
    worst = 0.0
    for i in range(grid + 1):
        z = da + (db - da) * i / grid
        p, q = D(0), D(0)
        for c in reversed(num):
            p = p * z + D(c)
        for c in reversed(den):
            q = q * z + D(c)
        exact = g(z)
        worst = max(worst, float(abs((p / q - exact) / exact)))
    return num, den, worst


def _tiny(t: Decimal) -> Decimal:
    return t if t != 0 else D("1e-30")


FITS: dict[str, tuple[Callable[[Decimal], Decimal], float, float, int]] = {
    # expm1(r) = r + r^2 E(r), |r| <= ln2/2
    "exp": (lambda r: ((_tiny(r)).exp() - 1 - _tiny(r)) / _tiny(r) ** 2, -0.3466, 0.3466, 11),
    # log(1+f) = 2s + s z Q(z), s = f/(2+f), z = s^2 <= (3-2sqrt2)^2
    "log": (lambda z: (2 * atan_h(_tiny(z).sqrt()) - 2 * _tiny(z).sqrt()) / (_tiny(z).sqrt() * _tiny(z)),
            0.0, 0.02944, 7),
    # tanh(x) = x + x^3 T(x^2), |x| <= 0.625
    "tanh": (lambda z: (tanh(_tiny(z).sqrt()) - _tiny(z).sqrt()) / _tiny(z).sqrt() ** 3, 0.0, 0.390625, 11),
    # sin(x) = x + x^3 S(x^2), cos(x) = 1 - x^2/2 + x^4 C(x^2), |x| <= pi/4 (+ margin)
    "sin": (lambda z: (sin(_tiny(z).sqrt()) - _tiny(z).sqrt()) / _tiny(z).sqrt() ** 3, 0.0, 0.6169, 6),
    "cos": (lambda z: (cos(_tiny(z).sqrt()) - 1 + _tiny(z) / 2) / _tiny(z) ** 2, 0.0, 0.6169, 5),
    "tan": (lambda z: (tan(_tiny(z).sqrt()) - _tiny(z).sqrt()) / _tiny(z).sqrt() ** 3, 0.0, 0.6169, 16),
    # erf(x) = x + x R(x^2), |x| <= 0.84375
    "erf": (lambda z: erf(_tiny(z).sqrt()) / _tiny(z).sqrt() - 1, 0.0, 0.7119140625, 11),
    # sinh(x) = x + x^3 H(x^2), |x| <= 1
    "sinh": (lambda z: (sinh(_tiny(z).sqrt()) - _tiny(z).sqrt()) / _tiny(z).sqrt() ** 3, 0.0, 1.0, 8),
    "atan": (lambda z: (atan(_tiny(z).sqrt()) - _tiny(z).sqrt()) / _tiny(z).sqrt() ** 3, 0.0, 0.19141, 11),
    "asin": (lambda z: (asin(_tiny(z).sqrt()) - _tiny(z).sqrt()) / _tiny(z).sqrt() ** 3, 0.0, 0.25, 12),
}


def atan_h(s: Decimal) -> Decimal:
    return ((1 + s) / (1 - s)).ln() / 2


def erfc_scaled(x: Decimal) -> Decimal:
    """erfc(x) exp(x^2), smooth and ~ 1/(x sqrt(pi)) for large x."""
    return (1 - erf(x)) * (x * x).exp()


ERF_MID = 1.546875  # the middle of [0.84375, 2.25]
FITS["erfc_mid"] = (lambda t: erfc_scaled(t + D(repr(ERF_MID))), 0.84375 - ERF_MID, 2.25 - ERF_MID, 18)
ERF_TAIL = 0.30555555555555558  # the middle of [1/6, 1/2.25]
FITS["erfc_tail"] = (lambda u: erfc_scaled(1 / (u + D(repr(ERF_TAIL)))), 1 / 6.0 - ERF_TAIL, 1 / 2.25 - ERF_TAIL, 18)


def horner_c(name: str, coefs: list[float], comment: str, single: bool = False) -> str:
    """A C function evaluating the polynomial by Horner's rule with fused multiply-adds where the
    target has them (fgmath.h's FG__MLA), coefficients as exact hex floats."""
    ctype, suffix, lit, mla = ("float", "f32", "f", "FG__MLAF") if single else ("double", "f64", "", "FG__MLA")
    expr = coefs[-1].hex() + lit
    for c in reversed(coefs[:-1]):
        expr = f"{mla}(z, {expr}, {c.hex()}{lit})"
    return f"/* {comment} */\nFG_INLINE {ctype} fg__poly_{name}_{suffix}({ctype} z) {{\n    return {expr};\n}}\n"


#: float32 kernels: name -> (the float64 fit's function and interval, degree)
FITS32 = {"exp": 5, "log": 3, "sin": 4, "cos": 4, "erf": 5}


def blended_c(name: str, first: list[float], second: list[float], comment: str) -> str:
    """A C function evaluating one of two same-degree polynomials, chosen per element by selects."""
    def coef(i: int) -> str:
        return f"(second ? {second[i].hex()} : {first[i].hex()})"
    expr = coef(len(first) - 1)
    for i in range(len(first) - 2, -1, -1):
        expr = f"{coef(i)}\n        + z * ({expr})"
    return (f"/* {comment} */\nFG_INLINE double fg__poly_{name}_f64(double z, int64_t second) {{\n"
            f"    return {expr};\n}}\n")


def tanh_rational_c() -> str:
    """tanh's two rationals: (tanh(x) - x) / x^3 for x^2 <= 1, and tanh(s) / s for |s| <= ln2/4
    (with margin), both in z = x^2 (w = s^2); float64 degrees 3/3 and 2/2, float32 1/2 and 1/1."""
    def over_cube(z: Decimal) -> Decimal:
        z = _tiny(z)
        return (tanh(z.sqrt()) - z.sqrt()) / (z.sqrt() * z)

    def over_s(w: Decimal) -> Decimal:
        w = _tiny(w)
        return tanh(w.sqrt()) / w.sqrt()

    w_max = (float(D(2).ln()) / 4 * 1.01) ** 2
    out = []
    for single, (m, n), (pm, pn) in ((False, (3, 3), (2, 2)), (True, (1, 2), (1, 1))):
        num, den, err = fit_rational(over_cube, 0.0, 1.0, m, n)
        pnum, pden, perr = fit_rational(over_s, 0.0, w_max, pm, pn, unit_num=True)
        if single:
            num, den, pnum, pden = ([float(np.float32(c)) for c in cs] for cs in (num, den, pnum, pden))
        out += [horner_c("tanh_num", num, f"(tanh(x) - x) / x^3 = num(z) / den(z), z = x^2 <= 1: max relative "
                         f"error {err:.2g} (before rounding the coefficients)", single),
                horner_c("tanh_den", den, "its denominator", single),
                horner_c("tanh_pnum", pnum[1:], f"tanh(s) / s = (1 + w pnum(w)) / pden(w), w = s^2 <= {w_max:.5g}: "
                         f"max relative error {perr:.2g}", single),
                horner_c("tanh_pden", pden, "its denominator", single)]
    return "\n".join(out)


def two_over_pi_words(pad_bits: int = 64, words: int = 40) -> list[int]:
    """The bits of 2/pi after the binary point as 32-bit words, after ``pad_bits`` zero bits."""
    getcontext().prec = 500
    bits = int(2 / _pi() * 2 ** (32 * words - pad_bits))
    getcontext().prec = 130
    return [(bits >> (32 * (words - 1 - i))) & 0xFFFFFFFF for i in range(words)]


def main(names: list[str]) -> None:
    if names == ["twoverpi"]:
        w32 = two_over_pi_words()
        ws = [f"0x{w32[i]:08x}{w32[i + 1]:08x}ULL" for i in range(len(w32) - 1)]
        print(f"static const uint64_t fg__two_over_pi_bits[{len(ws)}] = {{")
        for i in range(0, len(ws), 4):
            print("    " + ", ".join(ws[i:i + 4]) + ",")
        print("};")
        return
    if names == ["erfc"]:
        mid, err_mid = fit(*FITS["erfc_mid"])
        tail, err_tail = fit(*FITS["erfc_tail"])
        print(blended_c("erfc", mid, tail, f"erfc(x) exp(x^2): at x - {ERF_MID} on [0.84375, 2.25] "
                        f"(error {err_mid:.2g}), at 1/x - {ERF_TAIL} on [2.25, 6] (error {err_tail:.2g})"))
        return
    if names == ["tanh_rational"]:
        print(tanh_rational_c())
        return
    if names[:1] == ["f32"]:
        for name in names[1:] or list(FITS32):
            g, a, b, _ = FITS[name]
            coefs, err = fit(g, a, b, FITS32[name], fmt=np.float32)
            print(horner_c(name, coefs, f"degree {FITS32[name]} on [{a:.6g}, {b:.6g}], max relative error "
                                        f"{err:.2g}", single=True))
        return
    for name in names or list(FITS):
        g, a, b, deg = FITS[name]
        coefs, err = fit(g, a, b, deg)
        print(horner_c(name, coefs, f"degree {deg} on [{a:.6g}, {b:.6g}], max relative error {err:.2g}"))


if __name__ == "__main__":
    np.seterr(all="raise")
    main(sys.argv[1:])
