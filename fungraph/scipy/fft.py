"""``fungraph.scipy.fft``: the discrete cosine transform (type 2, the only type JAX implements) and
its inverse, in one and n dimensions, with ``norm`` None/"backward" or "ortho".

The transforms follow Makhoul's fast cosine transform (1980): the input is reordered (evens,
then the odds reversed), transformed by one FFT and turned by a quarter-sample phase, so they
are made of ``fungraph.numpy.fft`` and are differentiable and batchable like it. A complex
input is transformed part by part, as JAX does.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import dtypes, lax
from fungraph import numpy as jnp
from fungraph.numpy._util import normalize_axes, promote

__all__ = ["dct", "dctn", "idct", "idctn"]

_NORMS = (None, "backward", "ortho")


def _check(name: str, type: int, norm: str | None) -> None:  # noqa: A002 - SciPy's name
    if type != 2:
        raise NotImplementedError(f"{name}: only DCT type 2 is implemented, got type={type!r}")
    if norm not in _NORMS:
        raise ValueError(f"{name}: norm={norm!r} is not implemented; use None, 'backward' or 'ortho'")


def _along(axis: int, ndim: int, v: Any) -> Any:
    """``v`` (1-d) shaped to broadcast along ``axis`` of an ``ndim``-d array."""
    return jnp.reshape(v, [-1 if a == axis else 1 for a in range(ndim)])


def _resized(x: Any, sizes: dict[int, int]) -> Any:
    """``x`` zero-padded or truncated at the end of each axis in ``sizes`` to that length."""
    for axis, n in sizes.items():
        if n < 1:
            raise ValueError(f"invalid number of data points ({n}) specified for axis {axis}")
        if n < x.shape[axis]:
            x = lax.slice_in_dim(x, 0, n, axis=axis)
        elif n > x.shape[axis]:
            x = jnp.pad(x, [(0, n - x.shape[axis] if a == axis else 0) for a in range(x.ndim)])
    return x


def _quarter_turn(n: int, k: Any) -> Any:
    """``exp(-i pi k / (2 n))``: the phase that turns the FFT of the reordered input into the DCT."""
    return jnp.exp(-0.5j * np.pi * k / n)


def _interleave(x: Any, axis: int) -> Any:
    """The even samples, then the odd ones reversed."""
    evens = lax.slice_in_dim(x, 0, None, 2, axis)
    odds = lax.rev(lax.slice_in_dim(x, 1, None, 2, axis), (axis,))
    return lax.concatenate([evens, odds], axis)


def _deinterleave(x: Any, axis: int) -> Any:
    """The inverse of ``_interleave``."""
    n = x.shape[axis]
    half = math.ceil(n / 2)
    evens = lax.slice_in_dim(x, 0, half, axis=axis)
    odds = lax.rev(lax.slice_in_dim(x, half, n, axis=axis), (axis,))
    index = np.empty(n, np.int64)
    index[0::2] = np.arange(half)
    index[1::2] = half + np.arange(n - half)
    return jnp.take(lax.concatenate([evens, odds], axis), index, axis=axis)


def _ortho(out: Any, axis: int) -> Any:
    """Scale a DCT-II output to the orthonormal basis: ``1/sqrt(4n)`` for ``k = 0``, ``1/sqrt(2n)`` after."""
    n = out.shape[axis]
    factor = np.full(n, 2.0)
    factor[0] = 4.0
    return out / jnp.sqrt(_along(axis, out.ndim, jnp.asarray(factor * n, out.dtype)))


def _by_parts(fun: Any, x: Any) -> Any:
    return lax.complex(fun(jnp.real(x)), fun(jnp.imag(x)))


def dct(x: Any, type: int = 2, n: int | None = None, axis: int = -1,  # noqa: A002 - SciPy's name
        norm: str | None = None) -> Any:
    """``jax.scipy.fft.dct``: the type-2 DCT ``y[k] = 2 sum_j x[j] cos(pi k (2j + 1) / (2N))``
    along ``axis``, after zero-padding or truncating to ``n`` points."""
    _check("dct", type, norm)
    x = jnp.asarray(x)
    if dtypes.is_complex(x.dtype):
        return _by_parts(lambda part: dct(part, type, n, axis, norm), x)
    (axis,) = normalize_axes(axis, x.ndim, "dct")
    if n is not None:
        x = _resized(x, {axis: operator.index(n)})
    size = x.shape[axis]
    spectrum = jnp.fft.fft(_interleave(x, axis), axis=axis)
    k = _along(axis, x.ndim, jnp.arange(size, dtype=jnp.real(spectrum).dtype))
    out = 2 * jnp.real(spectrum * _quarter_turn(size, k))
    return _ortho(out, axis) if norm == "ortho" else out


def _dct2(x: Any, axes: tuple[int, int], norm: str | None) -> Any:
    """The 2-d DCT by one 2-d FFT (Makhoul's section on two dimensions)."""
    a1, a2 = axes
    n1, n2 = x.shape[a1], x.shape[a2]
    spectrum = jnp.fft.fftn(_interleave(_interleave(x, a1), a2), axes=axes)
    k1 = _along(a1, x.ndim, jnp.arange(n1, dtype=spectrum.dtype))
    k2 = _along(a2, x.ndim, jnp.arange(n2, dtype=spectrum.dtype))
    mirrored = jnp.roll(jnp.flip(spectrum, axis=a2), shift=1, axis=a2)
    out = _quarter_turn(n1, k1) * (_quarter_turn(n2, k2) * spectrum + _quarter_turn(n2, -k2) * mirrored)
    out = 2 * jnp.real(out)
    return _ortho(_ortho(out, a1), a2) if norm == "ortho" else out


def _sizes_and_axes(name: str, x: Any, s: Any, axes: Any) -> tuple[list[int] | None, tuple[int, ...]]:
    """SciPy's ``s``/``axes`` defaults: the last ``len(s)`` axes, or all of them."""
    if s is not None:
        s = [operator.index(v) for v in s] if isinstance(s, Sequence) or np.ndim(s) else [operator.index(s)]
        if len(s) > x.ndim:
            raise ValueError(f"{name}: s must have at most x.ndim ({x.ndim}) elements, got {len(s)}")
    if axes is None:
        axes = tuple(range(x.ndim - len(s), x.ndim)) if s is not None else tuple(range(x.ndim))
    else:
        axes = normalize_axes(tuple(axes), x.ndim, name)
    return s, axes


def _nd(name: str, one: Callable[..., Any], body: Callable[[Any, tuple[int, ...]], Any], x: Any,
        type: int, s: Sequence[int] | None, axes: Sequence[int] | None, norm: str | None) -> Any:  # noqa: A002
    """The front ``dctn`` and ``idctn`` share: SciPy's argument checks, a complex ``x``
    transformed by parts, one axis handed to the 1-d transform ``one``, else ``x`` resized to
    ``s`` and transformed by ``body(x, axes)``."""
    _check(name, type, norm)
    x = jnp.asarray(x)
    if dtypes.is_complex(x.dtype):
        return _by_parts(lambda part: _nd(name, one, body, part, type, s, axes, norm), x)
    s, axes = _sizes_and_axes(name, x, s, axes)
    if len(axes) == 1:
        return one(x, n=s[0] if s is not None else None, axis=axes[0], norm=norm)
    if s is not None:
        x = _resized(x, dict(zip(axes, s)))
    return body(x, axes)


def dctn(x: Any, type: int = 2, s: Sequence[int] | None = None,  # noqa: A002 - SciPy's name
         axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    """``jax.scipy.fft.dctn``: the type-2 DCT over ``axes`` (all by default), each resized to ``s``."""

    def body(x: Any, axes: tuple[int, ...]) -> Any:
        if len(axes) == 2:
            return _dct2(x, (axes[0], axes[1]), norm)
        for start in range(0, len(axes), 2):
            x = dctn(x, axes=axes[start:start + 2], norm=norm)
        return x

    return _nd("dctn", dct, body, x, type, s, axes, norm)


def idct(x: Any, type: int = 2, n: int | None = None, axis: int = -1,  # noqa: A002 - SciPy's name
         norm: str | None = None) -> Any:
    """``jax.scipy.fft.idct``: the inverse of ``dct`` with the same ``norm`` (a scaled type-3 DCT)."""
    _check("idct", type, norm)
    x = jnp.asarray(x)
    if dtypes.is_complex(x.dtype):
        return _by_parts(lambda part: idct(part, type, n, axis, norm), x)
    (axis,) = normalize_axes(axis, x.ndim, "idct")
    if n is not None:
        x = _resized(x, {axis: operator.index(n)})
    size = x.shape[axis]
    x = jnp.asarray(promote(x, to_inexact=True)[0])
    if norm is None or norm == "backward":
        x = _ortho(x, axis)
    x = _ortho(x, axis)
    k = _along(axis, x.ndim, jnp.arange(size, dtype=x.dtype))
    turn = _quarter_turn(size, k)
    x = x.astype(turn.dtype) / turn * 2 * size
    return _deinterleave(jnp.real(jnp.fft.ifft(x, axis=axis)), axis)


def idctn(x: Any, type: int = 2, s: Sequence[int] | None = None,  # noqa: A002 - SciPy's name
          axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    """``jax.scipy.fft.idctn``: ``idct`` over each of ``axes`` in turn, each resized to ``s``."""

    def body(x: Any, axes: tuple[int, ...]) -> Any:
        for axis in axes:
            x = idct(x, axis=axis, norm=norm)
        return x

    return _nd("idctn", idct, body, x, type, s, axes, norm)
