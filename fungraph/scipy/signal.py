"""``fungraph.scipy.signal``: N-dimensional convolution and cross-correlation like
``scipy.signal`` (``method="direct"`` semantics, real floating dtypes), ``fftconvolve``, and the
spectral analysis of ``_spectral`` (``detrend``, ``stft``, ``istft``, ``welch``, ``csd``).

Everything is built from existing primitives, so ``jvp``, ``grad``, ``jit`` and ``vmap`` come
for free: the last two axes go through the 2-D ``conv`` primitive (a cross-correlation, as in
XLA) with the padding that selects the mode's window, and any leading axes become the conv's
batch and output-channel axes, combined afterwards by one ``dot_general`` per axis with a
constant 0/1 "shift" matrix.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph import numpy as jnp
from fungraph.api import vmap
from fungraph.core import Tracer
from fungraph.numpy._padding import pad
from fungraph.numpy._util import asarray, normalize_axes, promote
from fungraph.primitives import conv as _conv
from fungraph.primitives.elementwise import mul
from fungraph.primitives.linalg import dot_general
from fungraph.primitives.shape import reshape, rev
from fungraph.scipy._spectral import csd, detrend, istft, stft, welch

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "csd", "detrend", "fftconvolve", "istft", "stft",
           "welch"]

_MODES = ("full", "same", "valid")
_METHODS = ("auto", "direct", "fft")
_BOUNDARIES = {"fill": "fill", "pad": "fill", "wrap": "wrap", "circular": "wrap",
               "symm": "symmetric", "symmetric": "symmetric"}


# --- argument checks --------------------------------------------------------------------------


def _operands(name: str, in1: Any, in2: Any, mode: str) -> tuple[Any, Any]:
    """Both inputs as arrays of one real floating dtype (ints become float64), same rank."""
    if mode not in _MODES:
        raise ValueError(f"{name}: acceptable mode flags are 'valid', 'same', or 'full', got {mode!r}")
    x, w = (asarray(a) for a in promote(in1, in2, to_inexact=True))
    if not dtypes.is_float(x.dtype):
        raise TypeError(f"{name}: needs real floating inputs, got {x.dtype}")
    if x.ndim != w.ndim:
        raise ValueError(f"{name}: in1 and in2 should have the same dimensionality, got shapes "
                         f"{tuple(x.shape)} and {tuple(w.shape)}")
    if 0 in x.shape or 0 in w.shape:
        raise ValueError(f"{name}: inputs cannot be empty, got shapes {tuple(x.shape)} and {tuple(w.shape)}")
    return x, w


def _swap_needed(name: str, mode: str, s1: tuple[int, ...], s2: tuple[int, ...]) -> bool:
    """In "valid" mode the larger input (in every dimension) plays in1; mixed sizes are an error."""
    if mode != "valid":
        return False
    in1_larger = all(a >= b for a, b in zip(s1, s2))
    in2_larger = all(b >= a for a, b in zip(s1, s2))
    if not (in1_larger or in2_larger):
        raise ValueError(f"{name}: for 'valid' mode, one must be at least as large as the other in every "
                         f"dimension, got shapes {tuple(s1)} and {tuple(s2)}")
    return not in1_larger


def _check_method(name: str, method: str) -> None:
    if method not in _METHODS:
        raise ValueError(f"{name}: acceptable method flags are 'auto', 'direct', or 'fft', got {method!r}")


# --- the core: N-d cross-correlation ----------------------------------------------------------


def _window(n: int, m: int, mode: str, late: bool = False) -> tuple[int, int]:
    """(first index into the full correlation, output length) of ``mode`` along one axis, for
    an input of length ``n`` and a kernel of length ``m``. "same" is centred like SciPy: for an
    even ``m`` the window starts at ``(m - 1) // 2`` (``correlate``/``convolve``), or one later
    with ``late`` (``correlate2d``, which SciPy centres on the unflipped kernel)."""
    if mode == "full":
        return 0, n + m - 1
    if mode == "same":
        return (m // 2 if late else (m - 1) // 2), n
    return m - 1, n - m + 1


def _padding(n: int, m: int, mode: str, late: bool = False) -> tuple[int, int]:
    """(lo, hi) zero padding of the input so that a valid correlation gives ``mode``'s window."""
    start, length = _window(n, m, mode, late)
    lo = m - 1 - start
    return lo, length + m - 1 - n - lo


def _shift_matrix(n: int, m: int, mode: str, late: bool, dtype: np.dtype) -> np.ndarray:
    """S[i, a, p] = 1 where output ``i`` of the correlation along one axis reads ``x[a] * w[p]``:
    ``full[i] = sum_p x[i + p - (m - 1)] w[p]``."""
    start, length = _window(n, m, mode, late)
    i = np.arange(start, start + length)[:, None, None]
    a = np.arange(n)[None, :, None]
    p = np.arange(m)[None, None, :]
    return (a - p + (m - 1) == i).astype(dtype)


def _correlate_nd(x: Any, w: Any, mode: str, late: bool = False) -> Any:
    """Cross-correlation of equal-rank (>= 1) arrays; "valid" needs ``x`` at least as large."""
    nd = x.ndim
    if nd == 1:
        out = _correlate_nd(reshape(x, (1,) + tuple(x.shape)), reshape(w, (1,) + tuple(w.shape)), mode, late)
        return reshape(out, (_window(x.shape[0], w.shape[0], mode)[1],))
    lead_x, lead_w = tuple(x.shape[:-2]), tuple(w.shape[:-2])
    pads = tuple(_padding(n, m, mode, late) for n, m in zip(x.shape[-2:], w.shape[-2:]))
    x4 = reshape(x, (math.prod(lead_x), 1) + tuple(x.shape[-2:]))
    w4 = reshape(w, (math.prod(lead_w), 1) + tuple(w.shape[-2:]))
    y = _conv.conv(x4, w4, (1, 1), pads)                            # (prod(lead_x), prod(lead_w), H', W')
    k = len(lead_x)
    y = reshape(y, lead_x + lead_w + tuple(y.shape[2:]))
    # Contract the leading axes pairwise, last first. Before step j, ``y`` is laid out as
    # (out axes j+1..k-1, x's axes 0..j, w's axes 0..j, H', W'); dot_general puts the new output
    # axis j in front, so the output axes end in order.
    for j in reversed(range(k)):
        done = k - 1 - j
        s = _shift_matrix(lead_x[j], lead_w[j], mode, late, x.dtype)
        y = dot_general(s, y, (((1, 2), (done + j, done + 2 * j + 1)), ((), ())))
    return y


def _flip(w: Any) -> Any:
    return rev(w, tuple(range(w.ndim)))


# --- public API -------------------------------------------------------------------------------


def correlate(in1: Any, in2: Any, mode: str = "full", method: str = "auto") -> Any:
    """``scipy.signal.correlate``: ``z[k] = sum_l in1[l + k - (in2.shape - 1)] * in2[l]`` over
    every dimension, with ``mode`` "full", "same" (in1's shape, centred) or "valid"."""
    _check_method("correlate", method)
    x, w = _operands("correlate", in1, in2, mode)
    if x.ndim == 0:
        return mul(x, w)
    swapped = _swap_needed("correlate", mode, tuple(x.shape), tuple(w.shape))
    if swapped:
        return _flip(_correlate_nd(w, x, mode))
    return _correlate_nd(x, w, mode)


def convolve(in1: Any, in2: Any, mode: str = "full", method: str = "auto") -> Any:
    """``scipy.signal.convolve``: ``z[k] = sum_l in1[l] * in2[k - l]`` over every dimension,
    with ``mode`` "full", "same" (in1's shape, centred like SciPy) or "valid"."""
    _check_method("convolve", method)
    x, w = _operands("convolve", in1, in2, mode)
    if x.ndim == 0:
        return mul(x, w)
    if _swap_needed("convolve", mode, tuple(x.shape), tuple(w.shape)):
        x, w = w, x
    return _correlate_nd(x, _flip(w), mode)


def _boundary_padded(x: Any, kernel_shape: tuple[int, ...], mode: str, late: bool, boundary: str,
                     fillvalue: Any) -> Any:
    """``x`` extended by the rows and columns that ``mode`` reads beyond its edges."""
    widths = [_padding(n, m, mode, late) for n, m in zip(x.shape, kernel_shape)]
    if boundary == "fill":
        return pad(x, widths, mode="constant", constant_values=fillvalue)
    return pad(x, widths, mode=boundary)


def _conv2d(name: str, in1: Any, in2: Any, mode: str, boundary: str, fillvalue: Any, flip: bool) -> Any:
    if boundary not in _BOUNDARIES:
        raise ValueError(f"{name}: acceptable boundary flags are 'fill', 'wrap' and 'symm', got {boundary!r}")
    x, w = _operands(name, in1, in2, mode)
    if x.ndim != 2:
        raise ValueError(f"{name}: inputs must both be 2-D arrays, got shapes {tuple(x.shape)} and {tuple(w.shape)}")
    if np.ndim(fillvalue) != 0:
        raise ValueError(f"{name}: fillvalue must be a scalar, got shape {np.shape(fillvalue)}")
    swapped = _swap_needed(name, mode, tuple(x.shape), tuple(w.shape))
    if swapped:
        x, w = w, x
    if flip:
        w = _flip(w)
    kind = _BOUNDARIES[boundary]
    late = not flip
    if mode == "valid" or (kind == "fill" and _is_zero(fillvalue)):
        out = _correlate_nd(x, w, mode, late)
    else:
        out = _correlate_nd(_boundary_padded(x, tuple(w.shape), mode, late, kind, fillvalue), w, "valid")
    return _flip(out) if swapped and not flip else out


def _is_zero(v: Any) -> bool:
    return not isinstance(v, Tracer) and float(np.asarray(v)) == 0.0


def convolve2d(in1: Any, in2: Any, mode: str = "full", boundary: str = "fill", fillvalue: Any = 0) -> Any:
    """``scipy.signal.convolve2d``; ``boundary`` is "fill" (with ``fillvalue``), "wrap" or "symm"."""
    return _conv2d("convolve2d", in1, in2, mode, boundary, fillvalue, flip=True)


def correlate2d(in1: Any, in2: Any, mode: str = "full", boundary: str = "fill", fillvalue: Any = 0) -> Any:
    """``scipy.signal.correlate2d``; ``boundary`` is "fill" (with ``fillvalue``), "wrap" or "symm"."""
    return _conv2d("correlate2d", in1, in2, mode, boundary, fillvalue, flip=False)



def fftconvolve(in1: Any, in2: Any, mode: str = "full", axes: Any = None) -> Any:
    """``jax.scipy.signal.fftconvolve``: ``convolve`` by the FFT, over ``axes`` (all by default);
    the other axes must agree and are mapped over."""
    x, w = (asarray(a) for a in promote(in1, in2, to_inexact=True))
    if x.ndim != w.ndim:
        raise ValueError(f"fftconvolve: in1 and in2 should have the same dimensionality, got shapes "
                         f"{tuple(x.shape)} and {tuple(w.shape)}")
    if mode not in _MODES:
        raise ValueError(f"fftconvolve: mode must be one of ['same', 'full', 'valid'], got {mode!r}")
    convolve_fft = functools.partial(_fftconvolve, mode=mode)
    if axes is None:
        return convolve_fft(x, w)
    axes = (axes,) if np.ndim(axes) == 0 else tuple(axes)
    axes = tuple(normalize_axes(tuple(int(a) for a in axes), x.ndim, "fftconvolve"))
    mapped = sorted(set(range(x.ndim)) - set(axes))
    if any(x.shape[a] != w.shape[a] for a in mapped):
        raise ValueError(f"fftconvolve: mapped axes must have the same shape; got in1.shape={tuple(x.shape)} "
                         f"in2.shape={tuple(w.shape)} axes={axes}")
    for a in mapped:
        convolve_fft = vmap(convolve_fft, in_axes=a, out_axes=a)
    return convolve_fft(x, w)


def _fftconvolve(in1: Any, in2: Any, mode: str) -> Any:
    """The full convolution as the inverse FFT of the product of FFTs, cut to ``mode``'s window."""
    full = tuple(s1 + s2 - 1 for s1, s2 in zip(in1.shape, in2.shape))
    if mode == "valid":
        if all(s1 <= s2 for s1, s2 in zip(in1.shape, in2.shape)):
            in1, in2 = in2, in1
        elif not all(s1 >= s2 for s1, s2 in zip(in1.shape, in2.shape)):
            raise ValueError(f"fftconvolve: for 'valid' mode, one input must be at least as large as the other "
                             f"in every dimension, got shapes {tuple(in1.shape)} and {tuple(in2.shape)}")
    if all(s1 == 1 or s2 == 1 for s1, s2 in zip(in1.shape, in2.shape)):
        conv = in1 * in2
    elif jnp.iscomplexobj(in1):
        conv = jnp.fft.ifftn(jnp.fft.fftn(in1, full) * jnp.fft.fftn(in2, full), full)
    else:
        conv = jnp.fft.irfftn(jnp.fft.rfftn(in1, full) * jnp.fft.rfftn(in2, full), full)
    if mode == "full":
        out = full
    elif mode == "same":
        out = tuple(in1.shape)
    else:
        out = tuple(s1 - s2 + 1 for s1, s2 in zip(in1.shape, in2.shape))
    return conv[tuple(slice((f - o) // 2, (f - o) // 2 + o) for f, o in zip(full, out))]
