"""The OpenCL lowerings of the primitives a fused region evaluates at an index, registered with
``core.register_lowering``: one C expression per elementwise primitive (:class:`CExpression`),
and the index maps and multi-step expressions the :class:`Emitter` evaluates itself
(:class:`IndexedExpression`: views, ``pad``, ``concatenate``, ``take``, ``integer_pow``,
``adagrad``). Imported by the engine (``lowering.py``) for these registrations.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

from fungraph import dtypes
from fungraph.backends.opencl.codegen import (
    NARROW_INTS,
    CExpression,
    Emitter,
    IndexedExpression,
    Rule,
    c_literal,
    contiguous,
    ctype,
)
from fungraph.core import Primitive, register_lowering
from fungraph.ir import Eqn
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape
from fungraph.primitives.callback import stop_gradient_p
from fungraph.primitives.fused import adagrad_p, fma_p
from fungraph.primitives.indexing import take_p
from fungraph.primitives.special import maclaurin_coefficient, maclaurin_p, xlogx_p

# --- one C expression per elementwise primitive --------------------------------------------


def _is_bool(dt: np.dtype) -> bool:
    return dt == dtypes.bool_


def wrapping(dtype: np.dtype, x: str, op: str, y: str) -> str:
    """``x op y`` for ``+``, ``-``, ``*``: on signed integers through the unsigned type, so
    overflow wraps as in numpy and XLA (signed overflow is undefined in OpenCL C, and the
    compiler had folded ``x * 2**32 < 0`` to ``x < 0``); types narrower than int in uint (C
    would promote them to int, where ``ushort * ushort`` overflows), cut back to the type."""
    if not dtypes.is_int(dtype):
        return f"({x} {op} {y})"
    t = ctype(dtype)
    if dtype in NARROW_INTS:
        return f"(({t})((uint)({x}) {op} (uint)({y})))"
    if dtypes.is_unsigned(dtype):
        return f"(({t})({x}) {op} ({t})({y}))"
    return f"as_{t}(as_u{t}({x}) {op} as_u{t}({y}))"


def _neg(i: np.dtype, o: np.dtype, a: Sequence[str], p: dict) -> str:
    return wrapping(i, f"({ctype(i)})0", "-", a[0]) if dtypes.is_int(i) else f"(-{a[0]})"


def _abs(i: np.dtype, o: np.dtype, a: Sequence[str], p: dict) -> str:
    return f"fabs({a[0]})" if dtypes.is_float(i) else f"({a[0]} < 0 ? {_neg(i, o, a, p)} : {a[0]})"


def _sign(i: np.dtype, o: np.dtype, a: Sequence[str], p: dict) -> str:
    t, x = ctype(i), a[0]
    if dtypes.is_float(i):
        return f"({x} > ({t})0 ? ({t})1 : ({x} < ({t})0 ? ({t})-1 : {x}))"
    return f"(({t})({x} > 0) - ({t})({x} < 0))"


def _not(i: np.dtype, o: np.dtype, a: Sequence[str], p: dict) -> str:
    return f"(uchar)({a[0]} ^ 1)" if _is_bool(i) else f"(~{a[0]})"


def _add(i: np.dtype, o: np.dtype, a: Sequence[str], p: dict) -> str:
    return f"({a[0]} | {a[1]})" if _is_bool(i) else wrapping(i, a[0], "+", a[1])


def _sub(i: np.dtype, o: np.dtype, a: Sequence[str], p: dict) -> str:
    return wrapping(i, a[0], "-", a[1])


def _mul(i: np.dtype, o: np.dtype, a: Sequence[str], p: dict) -> str:
    return f"({a[0]} & {a[1]})" if _is_bool(i) else wrapping(i, a[0], "*", a[1])


def _extremum(op: str) -> Rule:
    def rule(i: np.dtype, o: np.dtype, a: Sequence[str], p: dict) -> str:
        x, y = a
        if dtypes.is_float(i):   # numpy propagates NaN from either side
            return f"(({x} {op} {y} || isnan({x})) ? {x} : {y})"
        return f"({x} {op} {y} ? {x} : {y})"

    return rule


def _compare(op: str) -> Rule:
    return lambda i, o, a, p: f"(uchar)({a[0]} {op} {a[1]})"


def _infix(op: str) -> Rule:
    return lambda i, o, a, p: f"({a[0]} {op} {a[1]})"


def _call(fn: str) -> Rule:
    return lambda i, o, a, p: f"{fn}({', '.join(a)})"


def _typed_call(fn: str) -> Rule:
    return lambda i, o, a, p: f"{fn}_{ctype(i)}({', '.join(a)})"


def _select(i: np.dtype, o: np.dtype, a: Sequence[str], p: dict) -> str:
    return f"({a[0]} ? {a[1]} : {a[2]})"


def _fma(i: np.dtype, o: np.dtype, a: Sequence[str], p: dict) -> str:
    if _is_bool(i):
        return f"(({a[0]} & {a[1]}) | {a[2]})"
    return wrapping(i, wrapping(i, a[0], "*", a[1]), "+", a[2])


def _convert(i: np.dtype, o: np.dtype, a: Sequence[str], p: dict) -> str:
    if _is_bool(o):
        return f"(uchar)({a[0]} != 0)"
    if dtypes.is_float(i) and dtypes.is_int(o):
        # XLA's: saturating, toward zero, NaN to 0 (spelled out: NVIDIA's ulong gives 2**63)
        return f"(isnan({a[0]}) ? ({ctype(o)})0 : convert_{ctype(o)}_sat({a[0]}))"
    return f"({ctype(o)})({a[0]})"


def integer_pow_expr(x: str, y: int, dtype: np.dtype, fresh: Callable[[str, str], str]) -> str:
    """``x ** y`` by repeated squaring at generation time (exact for integers)."""
    t = ctype(dtype)
    if y == 0:
        return f"({t})1"
    n = abs(y)
    result = None
    base = x
    while n:
        if n & 1:
            result = base if result is None else fresh(t, wrapping(dtype, result, "*", base))
        n >>= 1
        if n:
            base = fresh(t, wrapping(dtype, base, "*", base))
    return f"(({t})1 / {result})" if y < 0 else result


NATIVE = ("sin", "cos", "exp")

#: float32 functions computed by the preamble's vectorisable helpers instead of the library's
#: (unless native math is on; float64 keeps the library's functions)
FLOAT32_HELPERS = {"tanh": "fg_tanh_float", "sin": "fg_sin_float", "cos": "fg_cos_float", "log": "fg_log_float"}


def native_math() -> bool:
    """``FUNGRAPH_OPENCL_NATIVE_MATH=1`` uses ``native_sin/cos/exp`` for float32 (faster on
    PoCL, accuracy implementation-defined; ``native_log`` is not: on PoCL it was as slow as
    ``log``, 8x slower than ``fg_log_float``); read when a graph is compiled."""
    return os.environ.get("FUNGRAPH_OPENCL_NATIVE_MATH", "") not in ("", "0")


def _unary_float(fn: str) -> Rule:
    def rule(i: np.dtype, o: np.dtype, a: Sequence[str], p: dict) -> str:
        if i == dtypes.float32 and fn in NATIVE and native_math():
            return f"native_{fn}({a[0]})"
        if i == dtypes.float32 and fn in FLOAT32_HELPERS:
            return f"{FLOAT32_HELPERS[fn]}({a[0]})"
        return f"{fn}({a[0]})"

    return rule


#: The elementwise primitives with a C expression, each registered as its ``"opencl"``
#: lowering; the float functions of the first group are OpenCL's of the same name.
_UNARY_FLOAT = (ew.sin_p, ew.cos_p, ew.tan_p, ew.tanh_p, ew.exp_p, ew.log_p, ew.sqrt_p, ew.log1p_p, ew.expm1_p,
                ew.atan_p, ew.sinh_p, ew.cosh_p, ew.erf_p, ew.floor_p, ew.asin_p, ew.acos_p, ew.acosh_p, ew.atanh_p)
_EXPRESSIONS: tuple[tuple[Primitive, Rule], ...] = (
    *((p, _unary_float(p.name)) for p in _UNARY_FLOAT),
    (ew.neg_p, _neg), (ew.abs_p, _abs), (ew.sign_p, _sign), (ew.not_p, _not),
    (ew.logistic_p, _typed_call("fg_logistic")),
    (ew.add_p, _add), (ew.sub_p, _sub), (ew.mul_p, _mul), (ew.div_p, _infix("/")), (ew.pow_p, _call("pow")),
    (ew.max_p, _extremum(">")), (ew.min_p, _extremum("<")), (ew.atan2_p, _call("atan2")),
    (ew.mod_p, _typed_call("fg_mod")), (ew.floor_divide_p, _typed_call("fg_fdiv")),
    (ew.eq_p, _compare("==")), (ew.ne_p, _compare("!=")), (ew.lt_p, _compare("<")), (ew.le_p, _compare("<=")),
    (ew.gt_p, _compare(">")), (ew.ge_p, _compare(">=")),
    (ew.and_p, _infix("&")), (ew.or_p, _infix("|")), (ew.xor_p, _infix("^")),
    (ew.select_p, _select), (fma_p, _fma), (ew.convert_element_type_p, _convert),
    (xlogx_p, lambda i, o, a, p: f"({a[0]} == ({ctype(i)})0 ? ({ctype(i)})0 : {a[0]} * log({a[0]}))"),
    (maclaurin_p, lambda i, o, a, p: c_literal(maclaurin_coefficient(p["series"], p["k"]), o)),
)
for _prim, _rule in _EXPRESSIONS:
    register_lowering(_prim, "opencl", CExpression(_rule))


# --- expressions the emitter evaluates itself: index maps and multi-step values -------------


def _stop_gradient(em: Emitter, e: Eqn, k: int, idx: Sequence[str]) -> str:
    return em.value(e.inputs[0], idx)


def _transpose(em: Emitter, e: Eqn, k: int, idx: Sequence[str]) -> str:
    sub = [""] * e.inputs[0].aval.ndim
    for j, axis in enumerate(e.params["permutation"]):
        sub[axis] = idx[j]
    return em.value(e.inputs[0], sub)


def _broadcast_in_dim(em: Emitter, e: Eqn, k: int, idx: Sequence[str]) -> str:
    xs = e.inputs[0].aval.shape
    sub = tuple("0" if xs[j] == 1 else idx[d] for j, d in enumerate(e.params["broadcast_dimensions"]))
    return em.value(e.inputs[0], sub)


def _slice(em: Emitter, e: Eqn, k: int, idx: Sequence[str]) -> str:
    p = e.params
    sub = tuple(f"({lo} + {i}*{st})" if (lo or st != 1) else i
                for i, lo, st in zip(idx, p["start_indices"], p["strides"]))
    return em.value(e.inputs[0], sub)


def _rev(em: Emitter, e: Eqn, k: int, idx: Sequence[str]) -> str:
    xs = e.inputs[0].aval.shape
    sub = tuple(f"({xs[d] - 1} - {i})" if d in e.params["dimensions"] else i for d, i in enumerate(idx))
    return em.value(e.inputs[0], sub)


def _reshape(em: Emitter, e: Eqn, k: int, idx: Sequence[str]) -> str:
    out = e.outputs[0].aval
    xs = e.inputs[0].aval.shape
    if [n for n in xs if n != 1] == [n for n in out.shape if n != 1]:
        # only size-1 axes come or go: the other axes keep their index names, so a value
        # known at those names (a loop kernel's per-example carry) is found in the cache
        kept = iter([i for i, n in zip(idx, out.shape) if n != 1])
        return em.value(e.inputs[0], tuple("0" if n == 1 else next(kept) for n in xs))
    terms = [f"{i}*{s}" for i, n, s in zip(idx, out.shape, contiguous(out.shape)) if n != 1]
    flat = em.fresh(em.idx_type, " + ".join(terms) if terms else "0")
    prefix = f"r{em.counter}_"
    return em.value(e.inputs[0], em.unravel(flat, e.inputs[0].aval.shape, prefix))


def _pad(em: Emitter, e: Eqn, k: int, idx: Sequence[str]) -> str:
    x, pv = e.inputs
    xs = x.aval.shape
    it = em.idx_type
    conds, sub = [], []
    for i, n, (lo, _, interior) in zip(idx, xs, e.params["padding_config"]):
        step = interior + 1
        t = em.fresh(it, f"{i} - ({lo})")
        q = em.fresh(it, f"{t} / {step}" if step != 1 else t)
        ok = f"({t} >= 0 && {q} < {n}" + (f" && {t} % {step} == 0)" if step != 1 else ")")
        c = em.fresh("int", ok)
        conds.append(c)
        sub.append(em.fresh(it, f"{c} ? {q} : 0"))
    inside = " && ".join(conds) if conds else "1"
    v = em.value(x, sub) if x.aval.size else c_literal(0, x.aval.dtype)
    pad_v = em.value(pv, ())
    return em.fresh(ctype(x.aval.dtype), f"({inside}) ? {v} : {pad_v}")


def _concatenate(em: Emitter, e: Eqn, k: int, idx: Sequence[str]) -> str:
    axis = e.params["axis"]
    it = em.idx_type
    i = idx[axis]
    start = 0
    parts = []
    for x in e.inputs:
        n = x.aval.shape[axis]
        if n:
            local = em.fresh(it, f"clamp({i} - {start}, ({it})0, ({it}){n - 1})")
            sub = list(idx)
            sub[axis] = local
            parts.append((start + n, em.value(x, sub)))
        start += n
    expr = parts[-1][1]
    for end, v in reversed(parts[:-1]):
        expr = f"({i} < {end} ? {v} : {expr})"
    return em.fresh(ctype(e.outputs[0].aval.dtype), expr)


def _take(em: Emitter, e: Eqn, k: int, idx: Sequence[str]) -> str:
    x, ind = e.inputs
    axis = e.params["axis"]
    n = x.aval.shape[axis]
    nk = ind.aval.ndim
    raw = em.value(ind, tuple(idx[axis:axis + nk]))
    t = em.fresh("long", f"(long){raw}")
    norm = em.fresh("long", f"clamp({t} < 0 ? {t} + {n}L : {t}, 0L, {max(n - 1, 0)}L)")
    sub = tuple(idx[:axis]) + (f"({em.idx_type}){norm}",) + tuple(idx[axis + nk:])
    return em.value(x, sub)


def _integer_pow(em: Emitter, e: Eqn, k: int, idx: Sequence[str]) -> str:
    out = e.outputs[k].aval
    x = em.operand(e.inputs[0], out.shape, idx)
    return em.fresh(ctype(out.dtype), integer_pow_expr(x, e.params["y"], out.dtype, em.fresh))


def _adagrad(em: Emitter, e: Eqn, k: int, idx: Sequence[str]) -> str:
    """Output 1 the new accumulator ``acc + g * g``, output 0 the step ``w - lr * g / sqrt(acc' + eps)``."""
    out = e.outputs[k].aval
    t = ctype(out.dtype)
    w, acc, g, lr, eps = e.inputs
    acc_v = em.operand(acc, out.shape, idx)
    g_v = em.operand(g, out.shape, idx)
    new_acc = em.fresh(t, f"{acc_v} + {g_v} * {g_v}")
    if k == 1:
        return new_acc
    w_v = em.operand(w, out.shape, idx)
    lr_v = em.operand(lr, out.shape, idx)
    eps_v = em.operand(eps, out.shape, idx)
    return em.fresh(t, f"{w_v} - {lr_v} * ({g_v} / sqrt({new_acc} + {eps_v}))")


_INDEXED: tuple[tuple[Primitive, Callable[[Emitter, Eqn, int, Sequence[str]], str]], ...] = (
    (stop_gradient_p, _stop_gradient), (shape.transpose_p, _transpose), (shape.broadcast_in_dim_p, _broadcast_in_dim),
    (shape.slice_p, _slice), (shape.rev_p, _rev), (shape.reshape_p, _reshape), (shape.pad_p, _pad),
    (shape.concatenate_p, _concatenate), (take_p, _take), (ew.integer_pow_p, _integer_pow), (adagrad_p, _adagrad),
)
for _prim, _emit in _INDEXED:
    register_lowering(_prim, "opencl", IndexedExpression(_emit))
