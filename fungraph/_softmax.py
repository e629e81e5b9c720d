"""``logsumexp`` and the softmax family, shared by ``fungraph.nn`` and ``fungraph.scipy.special``
(JAX's ``jax.nn.logsumexp`` is ``jax.scipy.special.logsumexp``): below both, so neither imports
the other."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.numpy._util import normalize_axes, promote
from fungraph.primitives import elementwise as ew
from fungraph.primitives import reductions as red
from fungraph.primitives.callback import stop_gradient


def _c(value: float, x: Any) -> np.ndarray:
    return np.asarray(value, dtype=x.dtype)


def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False, return_sign: bool = False,
              where: Any = None) -> Any:
    """log(sum(b * exp(a))) over ``axis``, shifted by the maximum so it neither overflows nor
    underflows. A negative sum gives nan unless ``return_sign``, which returns ``(log|sum|, sign)``;
    ``where`` leaves elements out (-inf where it leaves out all). ``nn.logsumexp`` and
    ``scipy.special.logsumexp`` are this function, as in JAX."""
    if b is not None or return_sign or where is not None:
        return _general_logsumexp(a, axis, b, keepdims, return_sign, where)
    (x,) = promote(a, to_inexact=True)
    axes = normalize_axes(axis, x.ndim, "logsumexp")
    m = stop_gradient(fnp.max(x, axis=axes, keepdims=True))
    m = ew.select(fnp.isfinite(m), m, np.zeros((), x.dtype))
    s = red.reduce_sum(fnp.exp(ew.sub(x, m)), axes)
    out = ew.add(ew.log_p.bind(s), fnp.reshape(m, s.shape))
    if keepdims:
        out = fnp.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
    return out


def _general_logsumexp(a: Any, axis: Any, b: Any, keepdims: bool, return_sign: bool, where: Any) -> Any:
    """:func:`logsumexp` with weights ``b``, a sign or ``where``."""
    if b is None:
        (a,) = promote(a, to_inexact=True)
    else:
        a, b = promote(a, b, to_inexact=True)
        shape = np.broadcast_shapes(a.shape, b.shape)
        a, b = fnp.broadcast_to(a, shape), fnp.broadcast_to(b, shape)
    if where is not None:
        mask = fnp.broadcast_to(fnp.asarray(where, dtype=bool), a.shape)
        a = fnp.where(mask, a, _c(-np.inf, a))
    axes = normalize_axes(axis, a.ndim, "logsumexp")
    live = a if b is None else fnp.where(fnp.not_equal(b, _c(0, b)), a, _c(-np.inf, a))
    m = stop_gradient(fnp.max(live, axis=axes, keepdims=True))
    m = fnp.where(fnp.isfinite(m), m, _c(0, m))
    terms = ew.exp(ew.sub(a, m))
    if b is not None:
        terms = fnp.where(fnp.not_equal(b, _c(0, b)), ew.mul(b, terms), _c(0, terms))
    total = fnp.sum(terms, axis=axes, keepdims=True)
    sign = fnp.sign(total)
    out = ew.add(ew.log(fnp.abs(total)), m)
    if not keepdims:
        out = fnp.squeeze(out, axis=axes)
        sign = fnp.squeeze(sign, axis=axes)
    if return_sign:
        return out, sign
    return fnp.where(sign < 0, _c(np.nan, out), out)


def _left_out(x: Any, where: Any, value: float) -> tuple[Any, Any]:
    """``x`` with the elements ``where`` leaves out set to ``value``, and the mask (None without
    ``where``): a left-out element then adds nothing, to the value or to the gradient."""
    if where is None:
        return x, None
    mask = fnp.broadcast_to(fnp.asarray(where, dtype=bool), x.shape)
    return fnp.where(mask, x, np.asarray(value, x.dtype)), mask


def _shifted(x: Any, axis: Any) -> Any:
    """``x`` less its (finite) maximum along ``axis``, which carries no gradient."""
    m = stop_gradient(fnp.max(x, axis=axis, keepdims=True))
    return ew.sub(x, ew.select(fnp.isfinite(m), m, np.zeros((), x.dtype)))


def log_softmax(x: Any, axis: Any = -1, where: Any = None) -> Any:
    """``x`` less its logsumexp along ``axis``; ``where`` leaves elements out (their result is
    -inf), as in JAX."""
    (x,) = promote(x, to_inexact=True)
    x, mask = _left_out(x, where, -np.inf)
    shifted = _shifted(x, axis)
    # shifted's maximum is 0 (or x had no finite one, where logsumexp would shift by 0 too), so
    # logsumexp(shifted) is log(sum(exp(shifted))) without a second maximum (as JAX's)
    out = ew.sub(shifted, ew.log_p.bind(fnp.sum(fnp.exp(shifted), axis=axis, keepdims=True)))
    return out if mask is None else fnp.where(mask, out, np.asarray(-np.inf, x.dtype))


def softmax(x: Any, axis: Any = -1, where: Any = None) -> Any:
    """exp(x) normalised along ``axis``; ``where`` leaves elements out (their result is 0), as in JAX."""
    (x,) = promote(x, to_inexact=True)
    x, mask = _left_out(x, where, -np.inf)
    unnormalized = fnp.exp(_shifted(x, axis))
    out = ew.div(unnormalized, fnp.sum(unnormalized, axis=axis, keepdims=True))
    return out if mask is None else fnp.where(mask, out, np.zeros((), x.dtype))
