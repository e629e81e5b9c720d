"""``hessenberg``: ``A = Q H Q^H`` with ``H`` zero below its first subdiagonal, by Householder
reflections chosen as LAPACK's ``larfg`` chooses them (so ``H`` and ``Q`` are the ones
``gehrd``/``orghr``, and JAX, return); not differentiable, as JAX's."""

from __future__ import annotations

from typing import Any

import fungraph.numpy as fnp
from fungraph.custom_derivatives import custom_jvp


def _reflector(x: Any) -> tuple[Any, Any]:
    """``(v, tau)`` with ``(I - tau v v^H)^H x = beta e_1``, ``v[0] = 1`` and the real ``beta`` of
    the sign opposite to ``Re x[0]`` (``tau = 0`` when ``x`` is already such a multiple)."""
    alpha, rest = x[0], x[1:]
    rest_norm = fnp.sqrt(fnp.sum(fnp.real(rest * fnp.conj(rest))))
    alpha_re, alpha_im = fnp.real(alpha), fnp.imag(alpha)
    size = fnp.sqrt(alpha_re ** 2 + alpha_im ** 2 + rest_norm ** 2)
    beta = fnp.where(alpha_re >= 0, -size, size)
    trivial = (rest_norm == 0) & (alpha_im == 0)
    safe_beta = fnp.where(trivial, 1.0, beta).astype(x.dtype)
    tau = fnp.where(trivial, 0, (safe_beta - alpha) / safe_beta)
    scale = fnp.where(trivial, 0, 1 / fnp.where(trivial, 1, alpha - safe_beta))
    v = fnp.concatenate([fnp.ones(1, x.dtype), rest * scale])
    return v, tau


def _hessenberg_2d(a: Any) -> tuple[Any, Any]:
    n = a.shape[-1]
    q = fnp.eye(n, dtype=a.dtype)
    for k in range(n - 1):
        v, tau = _reflector(a[k + 1:, k])
        a = a.at[k + 1:, :].add(-fnp.conj(tau) * v[:, None] * (fnp.conj(v) @ a[k + 1:, :])[None, :])
        a = a.at[:, k + 1:].add(-tau * (a[:, k + 1:] @ v)[:, None] * fnp.conj(v)[None, :])
        q = q.at[:, k + 1:].add(-tau * (q[:, k + 1:] @ v)[:, None] * fnp.conj(v)[None, :])
    return fnp.triu(a, -1), q


def _refuse(primals: tuple, tangents: tuple) -> Any:
    raise NotImplementedError("Differentiation rule for 'hessenberg' not implemented")


def hessenberg(a: Any, *, calc_q: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The Hessenberg form ``H`` of the square ``a`` (leading axes a batch), and with
    ``calc_q`` the unitary ``Q`` with ``a = Q H Q^H``."""
    x = fnp.asarray(a)
    if not fnp.issubdtype(x.dtype, fnp.inexact):
        raise TypeError(f"hessenberg does not accept dtype {x.dtype}: it takes floating or complex matrices, as JAX's")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"hessenberg: expected a square matrix (or a stack of them), got shape {x.shape}")
    if x.shape[-1] == 0:
        return (fnp.zeros_like(x), fnp.zeros_like(x)) if calc_q else fnp.zeros_like(x)
    reduce = custom_jvp(lambda m: fnp.vectorize(_hessenberg_2d, signature="(n,n)->(n,n),(n,n)")(m))
    reduce.defjvp(_refuse)
    h, q = reduce(x)
    return (h, q) if calc_q else h
