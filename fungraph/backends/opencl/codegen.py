"""OpenCL C from the IR: types, literals, the forms of an expression lowering
(:class:`CExpression`, :class:`IndexedExpression`; ``expressions.py`` registers them), and
the :class:`Emitter` that evaluates a fused region at a multi-index.

Values are read through an :class:`Access`: a storage slot plus an affine map (element
offset and one stride per axis), so reshape/transpose/broadcast/slice/rev of a stored value
are free. Inside a fused region an equation's value at index ``idx`` is a C temporary; the
emitter caches ``(var, idx)`` pairs so each distinct evaluation happens once per work-item.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from fungraph import dtypes
from fungraph.core import Primitive
from fungraph.ir import Eqn, Literal, ShapedArray, Var

CTYPES = {dtypes.bool_: "uchar", dtypes.int8: "char", dtypes.int16: "short", dtypes.int32: "int",
          dtypes.int64: "long", dtypes.uint8: "uchar", dtypes.uint16: "ushort", dtypes.uint32: "uint",
          dtypes.uint64: "ulong", dtypes.float32: "float", dtypes.float64: "double"}

#: integer types narrower than C's int: OpenCL C computes on them as int (integer promotion)
NARROW_INTS = frozenset({dtypes.int8, dtypes.int16, dtypes.uint8, dtypes.uint16})

VIEW_OPS = frozenset({"reshape", "transpose", "broadcast_in_dim", "slice", "rev", "stop_gradient"})
INDEX_OPS = VIEW_OPS | {"pad", "concatenate", "take"}


def ctype(dtype: np.dtype) -> str:
    return CTYPES[dtypes.check(dtype)]


def c_literal(value: object, dtype: np.dtype) -> str:
    """An exact C literal of ``dtype`` (hex floats round-trip every bit)."""
    dtype = dtypes.check(dtype)
    if dtype == dtypes.bool_:
        return "(uchar)1" if bool(value) else "(uchar)0"
    if dtypes.is_int(dtype):
        v = int(np.asarray(value).astype(dtype))
        if dtype in NARROW_INTS:
            return f"(({ctype(dtype)}){v})"
        if dtypes.is_unsigned(dtype):
            return f"{v}UL" if dtype == dtypes.uint64 else f"{v}u"
        suffix = "L" if dtype == dtypes.int64 else ""
        if v == np.iinfo(dtype).min:
            return f"({v + 1}{suffix}-1{suffix})"
        return f"({v}{suffix})" if v < 0 else f"{v}{suffix}"
    v = float(np.asarray(value).astype(dtype))
    cast = "(double)" if dtype == dtypes.float64 else ""
    if math.isnan(v):
        return f"{cast}NAN"
    if math.isinf(v):
        return f"({'-' if v < 0 else ''}{cast}INFINITY)"
    text = v.hex()
    return f"({text})" if dtype == dtypes.float64 else f"({text}f)"


# --- preamble: JAX's integer and numpy's float division semantics ------------------------------


_FLOAT_HELPERS = """
static inline T fg_mod_T(T a, T b) {
  T mod = fmod(a, b);
  if (b == (T)0) return mod;
  if (mod != (T)0) { if ((b < (T)0) != (mod < (T)0)) mod += b; }
  else mod = copysign((T)0, b);
  return mod;
}
static inline T fg_fdiv_T(T a, T b) {
  if (b == (T)0) return a / b;
  T mod = fmod(a, b);
  T div = (a - mod) / b;
  if (mod != (T)0) { if ((b < (T)0) != (mod < (T)0)) div -= (T)1; }
  T fd;
  if (div != (T)0) { fd = floor(div); if (div - fd > (T)0.5) fd += (T)1; }
  else fd = copysign((T)0, a / b);
  return fd;
}
static inline T fg_tanh_T(T x) {
  /* Cephes tanhf: a polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above; PoCL's tanh is
     ~10x slower than its exp. Both branches are computed so the code stays vectorisable. */
  T z = fabs(x);
  T s = x * x;
  T small = (((((T)-5.70498872745e-3 * s + (T)2.06390887954e-2) * s - (T)5.37397155531e-2) * s
              + (T)1.33314422036e-1) * s - (T)3.33332819422e-1) * s * x + x;
  T big = copysign((T)1 - (T)2 / (exp((T)2 * z) + (T)1), x);
  return z < (T)0.625 ? small : big;
}
static inline T fg_logistic_T(T x) {
  T e = exp(-fabs(x));
  return x >= (T)0 ? (T)1 / ((T)1 + e) : e / ((T)1 + e);
}
"""

_FLOAT32_MATH = """
/* float32 sin, cos and log as straight-line double-precision code, so PoCL vectorises them
   across work-items (its sin/cos/log are scalar library calls: ~30 ns per element). Selects
   only: a branch or a library call in the work-item loop stops PoCL's vectoriser. On targets
   without doubles, or that are not CPUs (slow doubles), the library's functions. */
#if defined(cl_khr_fp64) && (defined(__x86_64__) || defined(__aarch64__))
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
static inline double fg_sinpi_reduced(float x, double shift) {
  /* sin(pi * (x / pi + shift)): shift is 1/2 for cos, -0.0 (it folds away) for sin.
     x / pi = k + f (k an integer, |f| <= 1/2) is reduced exactly for every float, in double:
     x = m * 2^s with m < 2^24, and for large x the leading bits of 1/pi times x make an even
     integer, so the band of |x| (2^50, 2^76, 2^102) picks the 106 bits of 1/pi that matter as
     two 53-bit windows c0, c1. x * c0 = p0 + e0 exactly (fma) with p0 < 2^50, so r0 = p0 mod 2
     is exact (rounding to an even integer by adding and subtracting 1.5 * 2^53); the rest,
     lo = e0 + x * c1 (|lo| < 2^-2), is rounded once. Every float32 x / pi lies at least
     2^-30.9 from an integer (x = 16367173 * 2^72), so f keeps 26 good bits or more. Measured
     on 10M elements (2 cores, best of 25): 13 ms; 9 ms with band 0 only (exact below 2^50
     only), native_sin 6 ms, PoCL's sin 190 ms. One product of two exact parts on purpose:
     independent look-alike chains (a product per piece of 1/pi) are paired by LLVM's SLP
     vectoriser, and PoCL then leaves the work-item loop scalar. sin(pi f) is f times a
     degree-5 polynomial in f^2 (our Chebyshev fit, relative error 2^-35), negated for odd k.
     Checked on all 2^32 floats: within 1 ulp of float64 numpy rounded to float32 (0.01% off
     by 1), and of numpy's float32 sin and cos. */
  double xd = (double)x;
  double ax = fabs(xd);
  double c0 = 0x1.45f306dc9c882p-2;                   /* bits 1-53 of 1/pi */
  double c1 = 0x1.4a7f09d5f47d4p-55;                  /* bits 54-106 */
  c0 = ax >= 0x1p50 ? 0x1.b9391054a7f09p-27 : c0;     /* bits 27-79 */
  c1 = ax >= 0x1p50 ? 0x1.abe8fa9a6ee06p-80 : c1;
  c0 = ax >= 0x1p76 ? 0x1.529fc2757d1f5p-53 : c0;     /* bits 53-105 */
  c1 = ax >= 0x1p76 ? 0x1.a6ee06db14accp-108 : c1;
  c0 = ax >= 0x1p102 ? 0x1.d5f47d4d37703p-79 : c0;    /* bits 79-131 */
  c1 = ax >= 0x1p102 ? 0x1.b6295993c4390p-133 : c1;
  double p0 = xd * c0;
  double e0 = fma(xd, c0, -p0);
  double lo = fma(xd, c1, e0);
  double r0 = p0 - ((p0 + 0x1.8p53) - 0x1.8p53);
  double k = (((r0 + shift) + lo) + 0x1.8p52) - 0x1.8p52;
  double f = ((r0 - k) + shift) + lo;
  double s = f * f;
  double y = f * fma(fma(fma(fma(fma(-0x1.cc99205182fe0p-8, s, 0x1.5013f2f324926p-4), s, -0x1.32d12e40850b5p-1),
                                 s, 0x1.466bc0668a9b3p+1), s, -0x1.4abbce51baabdp+2), s, 0x1.921fb544253f5p+1);
  return ((int)k & 1) ? -y : y;
}
static inline float fg_sin_float(float x) {
  float y = (float)fg_sinpi_reduced(x, -0.0);
  return x == 0.0f ? x : y;
}
static inline float fg_cos_float(float x) {
  return (float)fg_sinpi_reduced(x, 0.5);
}
static inline float fg_log_float(float x) {
  /* log x = e log 2 + log m with m in [sqrt(1/2), sqrt(2)) from the bits of x as a double
     (subnormal floats are normal doubles); log m = 2 atanh(t), t = (m - 1) / (m + 1),
     |t| <= 0.172, is t times a degree-4 polynomial in t^2 (our Chebyshev fit, relative error
     2^-37). Checked on all 2^31 non-negative floats: within 1 ulp of float64 numpy rounded
     to float32 (numpy's float32 log is up to 4 ulp from it). */
  long b = as_long((double)x);
  int e = (int)(b >> 52) - 1023;
  double m = as_double((b & 0x000fffffffffffffL) | 0x3ff0000000000000L);
  int big = m > 0x1.6a09e667f3bcdp+0;
  m = big ? m * 0.5 : m;
  e = big ? e + 1 : e;
  double t = (m - 1.0) / (m + 1.0);
  double s = t * t;
  double p = fma(fma(fma(fma(0x1.e3aa7f87ec3e2p-3, s, 0x1.2432e793be597p-2), s, 0x1.999a9bd409d19p-2), s,
                     0x1.555554db60926p-1), s, 0x1.0000000004991p+1);
  float r = (float)fma(t, p, (double)e * 0x1.62e42fefa39efp-1);
  r = x == INFINITY ? x : r;
  return x > 0.0f ? r : (x == 0.0f ? -INFINITY : NAN);
}
#else
static inline float fg_sin_float(float x) { return sin(x); }
static inline float fg_cos_float(float x) { return cos(x); }
static inline float fg_log_float(float x) { return log(x); }
#endif
"""

_UINT_HELPERS = """
static inline T fg_mod_T(T a, T b) { return b == 0 ? (T)0 : (T)(a % b); }
static inline T fg_fdiv_T(T a, T b) { return b == 0 ? (T)~(T)0 : (T)(a / b); }
"""

_INT_HELPERS = """
static inline T fg_mod_T(T a, T b) {
  if (b == 0 || b == -1) return 0;
  T r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
static inline T fg_fdiv_T(T a, T b) {
  if (b == 0) return a == 0 ? (T)-1 : (T)-2;
  if (b == -1) return a == MINV ? a : -a;
  T q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
  return q;
}
"""


def preamble(used: set[np.dtype]) -> str:
    parts = ["#pragma OPENCL FP_CONTRACT OFF"]
    if dtypes.float64 in used:
        parts.insert(0, "#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
    for dt in (dtypes.float32, dtypes.float64):
        if dt in used:
            parts.append(_FLOAT_HELPERS.replace("T", ctype(dt)))
    if dtypes.float32 in used:
        parts.append(_FLOAT32_MATH)
    for dt, minv in ((dtypes.int8, "CHAR_MIN"), (dtypes.int16, "SHRT_MIN"), (dtypes.int32, "INT_MIN"),
                     (dtypes.int64, "LONG_MIN")):
        if dt in used:
            parts.append(_INT_HELPERS.replace("T", ctype(dt)).replace("MINV", minv))
    for dt in (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64):
        if dt in used:
            parts.append(_UINT_HELPERS.replace("T", ctype(dt)))
    return "\n".join(parts)


# --- one C expression per elementwise primitive --------------------------------------------

Rule = Callable[[np.dtype, np.dtype, Sequence[str], dict], str]


@dataclass(frozen=True)
class CExpression:
    """The OpenCL lowering of an elementwise primitive: ``emit(in_dtype, out_dtype, args,
    params)`` is its value at one index as a C expression of its operands' values ``args``,
    which the :class:`Emitter` evaluates inside a fused region."""

    emit: Rule


@dataclass(frozen=True)
class IndexedExpression:
    """The OpenCL lowering of a primitive the :class:`Emitter` evaluates at an index through
    its own operands' indices (views, ``pad``, ``concatenate``, ``take``) or temporaries
    (``integer_pow``, ``adagrad``): ``emit(emitter, eqn, k, idx)`` is output ``k`` at ``idx``."""

    emit: Callable[[Emitter, Eqn, int, Sequence[str]], str]


def expression_rule(prim: Primitive) -> Rule | None:
    """``prim``'s C expression rule, or None when it has none."""
    lowering = prim.lowerings.get("opencl")
    rule = lowering.rule if lowering is not None else None
    return rule.emit if isinstance(rule, CExpression) else None


#: Rough cost of one evaluation in byte-equivalents of memory traffic (the fusion cost model).
OP_COST = {name: 16.0 for name in ("sin", "cos", "tan", "log", "log1p", "expm1", "atan", "sinh", "cosh", "erf",
                                   "pow", "atan2", "mod", "floor_divide", "asin", "acos", "acosh", "atanh")}
OP_COST.update({name: 4.0 for name in ("exp", "tanh", "sqrt", "logistic", "div", "integer_pow", "adagrad")})


def op_cost(name: str) -> float:
    if name in VIEW_OPS:
        return 0.0
    return OP_COST.get(name, 0.5)


def is_fusible(e: Eqn) -> bool:
    """Elementwise and index-map equations a fused kernel can evaluate at any index: those
    whose ``"opencl"`` lowering is an expression (registered in ``expressions.py``)."""
    lowering = e.primitive.lowerings.get("opencl")
    rule = lowering.rule if lowering is not None else None
    return isinstance(rule, IndexedExpression) or (e.primitive.elementwise and isinstance(rule, CExpression))


# --- accesses: affine views of stored values -----------------------------------------------


@dataclass(frozen=True)
class Access:
    """Element ``idx`` of the value lives at ``base(slot) + offset + sum(idx[k] * strides[k])``."""

    slot: int
    aval: ShapedArray
    offset: int
    strides: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    def is_contiguous(self) -> bool:
        return _compact(self.shape, self.strides) == _compact(self.shape, contiguous(self.shape))


def contiguous(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major element strides of ``shape``."""
    out = []
    acc = 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def _compact(shape: Sequence[int], strides: Sequence[int]) -> tuple:
    return tuple((n, s) for n, s in zip(shape, strides) if n != 1)


def merged_stride(a: Access, dims: Sequence[int]) -> int | None:
    """One stride for the axes ``dims`` (in that order) when they merge in memory, else None."""
    live = [d for d in dims if a.shape[d] != 1]
    if not live:
        return 0
    for d0, d1 in zip(live, live[1:]):
        if a.strides[d0] != a.strides[d1] * a.shape[d1]:
            return None
    return a.strides[live[-1]]


def view_access(e: Eqn, a: Access) -> Access | None:
    """The access of a view equation's output given its input's access, or None when the
    view is not affine in memory (a reshape of a non-contiguous value)."""
    name, p = e.primitive.name, e.params
    out = e.outputs[0].aval
    if name == "stop_gradient":
        return Access(a.slot, out, a.offset, a.strides)
    if name == "transpose":
        perm = p["permutation"]
        return Access(a.slot, out, a.offset, tuple(a.strides[k] for k in perm))
    if name == "broadcast_in_dim":
        strides = [0] * len(p["shape"])
        for j, d in enumerate(p["broadcast_dimensions"]):
            strides[d] = a.strides[j] if a.shape[j] != 1 else 0
        return Access(a.slot, out, a.offset, tuple(strides))
    if name == "slice":
        off = a.offset + sum(lo * s for lo, s in zip(p["start_indices"], a.strides))
        return Access(a.slot, out, off, tuple(s * st for s, st in zip(a.strides, p["strides"])))
    if name == "rev":
        off = a.offset
        strides = list(a.strides)
        for d in p["dimensions"]:
            off += (a.shape[d] - 1) * strides[d]
            strides[d] = -strides[d]
        return Access(a.slot, out, off, tuple(strides))
    if name == "reshape":
        if a.is_contiguous():
            return Access(a.slot, out, a.offset, contiguous(out.shape))
        inner = [s for n, s in zip(a.shape, a.strides) if n != 1]
        outer = [n for n in out.shape if n != 1]
        if [n for n in a.shape if n != 1] == outer:      # only size-1 axes added or removed
            it = iter(inner)
            return Access(a.slot, out, a.offset, tuple(next(it) if n != 1 else 0 for n in out.shape))
        return None
    return None


# --- the emitter ----------------------------------------------------------------------------


class Emitter:
    """Builds the body of one kernel. ``value(var, idx)`` returns a C expression for ``var``
    at the multi-index ``idx`` (C integer expressions), emitting temporaries as needed.
    ``region`` maps a var to the equation computing it inside this kernel; any other var is
    read through ``access_of(var)`` (the engine's storage), a literal or a constant."""

    def __init__(self, idx_type: str, region: dict[Var, Eqn], access_of: Callable[[Var], Access | None],
                 param_of: Callable[[int, np.dtype], tuple[str, str]]) -> None:
        self.idx_type = idx_type
        self.region = region
        self.access_of = access_of
        self.param_of = param_of
        self.lines: list[str] = []
        self.cache: dict[tuple, str] = {}
        self.counter = 0
        self.flat = "gid"
        #: the multi-index ``flat`` unravels to, once :meth:`set_base` names it; until then no
        #: load is addressed by ``flat`` (a kernel over rows or runs has no such base, and a
        #: scalar read there through ``gid`` would read past its one element)
        self.base: tuple[str, ...] | None = None
        self.base_shape: tuple[int, ...] = ()
        #: slot -> whether every load of it so far reads element ``gid`` (what donation asks)
        self.own_loads: dict[int, bool] = {}

    def fresh(self, ctype_: str, expr: str) -> str:
        name = f"t{self.counter}"
        self.counter += 1
        self.lines.append(f"  {ctype_} {name} = {expr};")
        return name

    def unravel(self, flat: str, shape: Sequence[int], prefix: str = "i") -> tuple[str, ...]:
        """Index names for each axis of ``shape`` from the flat index ``flat`` (row-major)."""
        names = []
        rest = flat
        it = self.idx_type
        for k in range(len(shape) - 1, -1, -1):
            n = shape[k]
            name = f"{prefix}{k}"
            if n == 1:
                self.lines.append(f"  const {it} {name} = 0;")
            elif k == 0:
                self.lines.append(f"  const {it} {name} = {rest};")
            else:
                self.lines.append(f"  const {it} {name} = {rest} % {n};")
                rest_name = f"{prefix}r{k}"
                self.lines.append(f"  const {it} {rest_name} = {rest} / {n};")
                rest = rest_name
            names.append(name)
        return tuple(reversed(names))

    def set_base(self, flat: str, shape: Sequence[int]) -> tuple[str, ...]:
        self.flat = flat
        self.base_shape = tuple(shape)
        self.base = self.unravel(flat, shape)
        return self.base

    # loads ---------------------------------------------------------------------------

    def address(self, a: Access, idx: Sequence[str]) -> str:
        _, off_name = self.param_of(a.slot, a.aval.dtype)
        if tuple(idx) == self.base and a.shape == self.base_shape and a.is_contiguous():
            terms = [self.flat]
        else:
            terms = [f"{i}*{s}" if s != 1 else i for i, n, s in zip(idx, a.shape, a.strides) if n != 1 and s != 0]
        if a.offset:
            terms.append(str(a.offset))
        return " + ".join([off_name] + terms)

    def load(self, a: Access, idx: Sequence[str]) -> str:
        key = ("load", a, tuple(idx))
        hit = self.cache.get(key)
        if hit is None:
            ptr, off_name = self.param_of(a.slot, a.aval.dtype)
            address = self.address(a, idx)
            own = self.flat == "gid" and address == f"{off_name} + gid"
            self.own_loads[a.slot] = self.own_loads.get(a.slot, True) and own
            hit = self.fresh(ctype(a.aval.dtype), f"{ptr}[{address}]")
            self.cache[key] = hit
        return hit

    def value(self, atom: Var | Literal, idx: Sequence[str]) -> str:
        if isinstance(atom, Literal):
            return c_literal(atom.value, atom.aval.dtype)
        key = (atom, tuple(idx))
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        a = self.access_of(atom)
        if a is not None:
            out = self.load(a, idx)
        else:
            e = self.region[atom]
            out = self.emit_eqn(e, e.outputs.index(atom), idx)
        self.cache[key] = out
        return out

    # equations -------------------------------------------------------------------------

    def operand(self, x: Var | Literal, out_shape: Sequence[int], idx: Sequence[str]) -> str:
        """``x`` at ``idx`` of the output, with numpy broadcasting."""
        xs = x.aval.shape
        lead = len(out_shape) - len(xs)
        sub = tuple("0" if n == 1 else idx[lead + j] for j, n in enumerate(xs))
        return self.value(x, sub)

    def emit_eqn(self, e: Eqn, k: int, idx: Sequence[str]) -> str:
        """Output ``k`` of ``e`` at ``idx``, by the primitive's ``"opencl"`` expression."""
        rule = e.primitive.lowering("opencl").rule
        if isinstance(rule, IndexedExpression):
            return rule.emit(self, e, k, idx)
        out = e.outputs[k].aval
        args = [self.operand(a, out.shape, idx) for a in e.inputs]
        return self.fresh(ctype(out.dtype), rule.emit(e.inputs[-1].aval.dtype, out.dtype, args, e.params))
