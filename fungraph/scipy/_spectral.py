"""Spectral analysis for ``fungraph.scipy.signal``, as ``jax.scipy.signal`` defines it:
``detrend``, the short-time Fourier transform and its inverse (``stft``, ``istft``) and Welch's
averaged periodograms (``welch``, ``csd``).

All are compositions of ``fungraph.numpy`` (segments are one gather, overlap-add one scatter-add,
the transforms ``fungraph.numpy.fft``), so ``grad``, ``vmap`` and ``jit`` come for free. The
lengths (``nperseg``, ``noverlap``, ``nfft``) and the window's name are static.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph import numpy as jnp
from fungraph.numpy._util import normalize_axes, promote

__all__ = ["csd", "detrend", "istft", "stft", "welch"]


# --- detrend ----------------------------------------------------------------------------------


def detrend(data: Any, axis: int = -1, type: str = "linear",  # noqa: A002 - SciPy's name
            bp: int | Sequence[int] | np.ndarray = 0, overwrite_data: None = None) -> Any:
    """``jax.scipy.signal.detrend``: ``data`` less its mean (``type="constant"``) or less its
    least-squares line along ``axis``, fitted piecewise between the breakpoints ``bp``."""
    if overwrite_data is not None:
        raise NotImplementedError("detrend: the overwrite_data argument is not implemented")
    if type not in ("constant", "linear"):
        raise ValueError(f"detrend: trend type must be 'linear' or 'constant', got {type!r}")
    x = jnp.asarray(promote(data, to_inexact=True)[0])
    if type == "constant":
        return x - x.mean(axis, keepdims=True)
    (axis,) = normalize_axes(axis, x.ndim, "detrend")
    n = x.shape[axis]
    breaks = np.sort(np.unique(np.r_[0, bp, n]))
    if breaks[0] < 0 or breaks[-1] > n:
        raise ValueError(f"detrend: breakpoints must be non-negative and at most the length of data along the "
                         f"axis ({n}), got bp={bp!r}")
    moved = jnp.moveaxis(x, axis, 0)
    flat = moved.reshape(n, -1)
    pieces = []
    for lo, hi in zip(breaks[:-1], breaks[1:]):
        points = int(hi - lo)
        ramp = jnp.arange(1, points + 1, dtype=x.dtype) / np.asarray(points).astype(x.dtype)
        design = jnp.stack([jnp.ones(points, dtype=x.dtype), ramp], axis=1)
        segment = flat[int(lo):int(hi)]
        coef = jnp.linalg.lstsq(design, segment)[0]
        pieces.append(segment - jnp.matmul(design, coef, precision="highest"))
    out = jnp.concatenate(pieces, axis=0) if pieces else flat
    return jnp.moveaxis(out.reshape(moved.shape), 0, axis)


# --- windows and segments ---------------------------------------------------------------------


def _hann(n: int) -> Any:
    """The periodic Hann window, computed as JAX does (in the default float dtype)."""
    if n == 1:
        return jnp.array([1.0])
    return jnp.sin(jnp.linspace(0, np.pi, n, endpoint=False)) ** 2


#: SciPy's cosine-sum windows: the coefficients of ``cos(k x)`` for x across [-pi, pi].
_COSINE_WINDOWS = {"hamming": (0.54, 0.46), "hamm": (0.54, 0.46), "blackman": (0.42, 0.5, 0.08),
                   "black": (0.42, 0.5, 0.08), "boxcar": (1.0,), "box": (1.0,), "ones": (1.0,),
                   "rect": (1.0,), "rectangular": (1.0,)}


def _named_window(window: str | tuple, n: int) -> Any:
    """A window by name, periodic as SciPy's ``get_window`` makes it: Hann as JAX computes it;
    Hamming, Blackman, boxcar and Bartlett in numpy (fungraph does not import SciPy)."""
    if isinstance(window, str) and window == "hann":
        return _hann(n)
    name = window if isinstance(window, str) else None
    if n == 1 and (name in _COSINE_WINDOWS or name == "bartlett"):
        return np.ones(1)
    points = np.linspace(-np.pi, np.pi, n + 1)
    if name in _COSINE_WINDOWS:
        full = sum(c * np.cos(k * points) for k, c in enumerate(_COSINE_WINDOWS[name]))
        return full[:n]
    if name == "bartlett":
        return (1 - np.abs(points / np.pi))[:n]
    raise NotImplementedError(f"window {window!r} is not implemented; use 'hann', 'hamming', 'blackman', "
                              f"'boxcar', 'bartlett' or an array of window values")


def _window(window: Any, nperseg: int | None, length: int, dtype: np.dtype) -> tuple[Any, int]:
    """(the window as an array of ``dtype``, the segment length): SciPy's ``_triage_segments``."""
    if isinstance(window, (str, tuple)):
        n = length if nperseg is None else int(nperseg)
        if n > length:
            warnings.warn(f"nperseg={n} is greater than input_length={length}, using nperseg={length}",
                          stacklevel=4)
            n = length
        return jnp.asarray(_named_window(window, n), dtype=dtype), n
    win = jnp.asarray(window, dtype=dtype)
    n = win.size if nperseg is None else int(nperseg)
    if win.ndim != 1:
        raise ValueError(f"window must be 1-D, got shape {tuple(win.shape)}")
    if length < win.size:
        raise ValueError(f"window (length {win.size}) is longer than the input signal ({length})")
    if n != win.size:
        raise ValueError(f"value specified for nperseg ({n}) is different from length of window ({win.size})")
    return win, n


def _segments(x: Any, nperseg: int, noverlap: int) -> Any:
    """The overlapping segments of the last axis: shape (..., segments, nperseg)."""
    step = nperseg - noverlap
    starts = np.arange(0, x.shape[-1] - nperseg + 1, step)
    return x[..., starts[:, None] + np.arange(nperseg)[None, :]]


def _windowed_fft(x: Any, win: Any, detrend_func: Callable[[Any], Any], nperseg: int, noverlap: int,
                  nfft: int, sides: str) -> Any:
    """The FFT of each detrended, windowed segment (SciPy's ``_fft_helper``)."""
    batch = x.ndim - 1
    segments = detrend_func(_segments(x, nperseg, noverlap))
    if jnp.iscomplexobj(win):
        segments = segments.astype(dtypes.complex_for(segments.dtype))
    segments = win.reshape((1,) * batch + (1, nperseg)) * segments
    if sides == "twosided":
        return jnp.fft.fft(segments, n=nfft)
    return jnp.fft.rfft(jnp.real(segments), n=nfft)


def _odd_extension(x: Any, n: int) -> Any:
    """``x`` extended by ``n`` points at each end of its last axis by point reflection."""
    if n < 1:
        return x
    if n > x.shape[-1] - 1:
        raise ValueError(f"the extension length n ({n}) is too big: it must not exceed x.shape[axis]-1, "
                         f"which is {x.shape[-1] - 1}")
    left = 2 * x[..., :1] - jnp.flip(x[..., 1:n + 1], axis=-1)
    right = 2 * x[..., -1:] - jnp.flip(x[..., -(n + 1):-1], axis=-1)
    return jnp.concatenate((left, x, right), axis=-1)


def _padder(mode: str, **kwargs: Any) -> Callable[[Any, int], Any]:
    return lambda x, n: jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(n, n)], mode, **kwargs)


_BOUNDARIES: dict[Any, Callable[[Any, int], Any]] = {
    "even": _padder("reflect"),
    "odd": _odd_extension,
    "constant": _padder("edge"),
    "zeros": _padder("constant", constant_values=0.0),
    None: lambda x, n: x,
}


def _static_int(value: Any, what: str) -> int:
    try:
        return operator.index(value) if not isinstance(value, (float, np.floating)) else int(value)
    except TypeError as err:
        raise TypeError(f"{what} must be a concrete integer, got {value!r}") from err


def _detrender(detrend_type: Any) -> Callable[[Any], Any]:
    if isinstance(detrend_type, str):
        return lambda d: detrend(d, axis=-1, type=detrend_type)
    if callable(detrend_type):
        return detrend_type
    if not detrend_type:
        return lambda d: d
    raise ValueError(f"unsupported detrend type: {detrend_type!r}")


def _zero_padded_to(x: Any, length: int) -> Any:
    return jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, length - x.shape[-1])])


def _spectral_helper(x: Any, y: Any, fs: Any = 1.0, window: Any = "hann", nperseg: int | None = None,
                     noverlap: int | None = None, nfft: int | None = None, detrend_type: Any = "constant",
                     return_onesided: bool = True, scaling: str = "density", axis: int = -1, mode: str = "psd",
                     boundary: str | None = None, padded: bool = False) -> tuple[Any, Any, Any]:
    """(frequencies, segment times, per-segment spectra) of ``x`` (and ``y``): SciPy's
    ``_spectral_helper``, with ``y=None`` for the auto-spectrum."""
    if mode not in ("psd", "stft"):
        raise ValueError(f"unknown value for mode {mode!r}, must be one of: ('psd', 'stft')")
    if boundary not in _BOUNDARIES:
        raise ValueError(f"unknown boundary option {boundary!r}, must be one of: {list(_BOUNDARIES)}")
    x = jnp.asarray(x)
    (axis,) = normalize_axes(_static_int(axis, "axis of windowed-FFT"), x.ndim, "spectral analysis")
    if y is None:
        x = jnp.asarray(promote(x, to_inexact=True)[0])
        ys = x
        outer = tuple(s for a, s in enumerate(x.shape) if a != axis)
    else:
        if mode != "psd":
            raise ValueError("two-argument mode is available only when mode=='psd'")
        x, ys = (jnp.asarray(a) for a in promote(x, y, to_inexact=True))
        if x.ndim != ys.ndim:
            raise ValueError(f"x and y must have the same rank ({x.ndim} vs {ys.ndim})")
        try:
            outer = jnp.broadcast_shapes(tuple(s for a, s in enumerate(x.shape) if a != axis),
                                         tuple(s for a, s in enumerate(ys.shape) if a != axis))
        except ValueError as err:
            raise ValueError(f"x and y cannot be broadcast together: shapes {tuple(x.shape)} and "
                             f"{tuple(ys.shape)}") from err
    result_dtype = dtypes.complex_for(x.dtype)
    freq_dtype = dtypes.real_for(result_dtype)
    nperseg_int = None
    if nperseg is not None:
        nperseg_int = _static_int(nperseg, "nperseg of windowed-FFT")
        if nperseg_int < 1:
            raise ValueError(f"nperseg must be a positive integer, got {nperseg_int}")
    win, nperseg_int = _window(window, nperseg_int, x.shape[axis], x.dtype)
    noverlap_int = nperseg_int // 2 if noverlap is None else _static_int(noverlap, "noverlap of windowed-FFT")
    nfft_int = nperseg_int if nfft is None else _static_int(nfft, "nfft of windowed-FFT")
    if x.size == 0 or ys.size == 0:
        shape = x.shape if y is None else outer[:axis] + (min(x.shape[axis], ys.shape[axis]),) + outer[axis:]
        return jnp.zeros(shape, freq_dtype), jnp.zeros(shape, freq_dtype), jnp.zeros(shape, result_dtype)
    x = jnp.moveaxis(x, axis, -1)
    if y is not None:
        if ys.ndim > 1:
            ys = jnp.moveaxis(ys, axis, -1)
        length = max(x.shape[-1], ys.shape[-1])
        x, ys = _zero_padded_to(x, length), _zero_padded_to(ys, length)
    if nfft_int < nperseg_int:
        raise ValueError(f"nfft ({nfft_int}) must be greater than or equal to nperseg ({nperseg_int})")
    if noverlap_int >= nperseg_int:
        raise ValueError(f"noverlap ({noverlap_int}) must be less than nperseg ({nperseg_int})")
    nstep = nperseg_int - noverlap_int
    extend = _BOUNDARIES[boundary]
    x = extend(x, nperseg_int // 2)
    if y is not None:
        ys = extend(ys, nperseg_int // 2)
    if padded:
        extra = (-(x.shape[-1] - nperseg_int) % nstep) % nperseg_int
        x = _zero_padded_to(x, x.shape[-1] + extra)
        if y is not None:
            ys = _zero_padded_to(ys, ys.shape[-1] + extra)
    detrend_func = _detrender(detrend_type)
    if scaling == "density":
        scale = 1.0 / (fs * (win * win).sum())
    elif scaling == "spectrum":
        scale = 1.0 / win.sum() ** 2
    else:
        raise ValueError(f"unknown scaling: {scaling!r}")
    if mode == "stft":
        scale = jnp.sqrt(scale)
    scale = jnp.asarray(scale)
    scale = scale.astype(dtypes.complex_for(dtypes.float_dtype_for(scale.dtype)))
    sides = "onesided" if return_onesided else "twosided"
    if return_onesided and (jnp.iscomplexobj(x) or (y is not None and jnp.iscomplexobj(ys))):
        sides = "twosided"
        warnings.warn("Input data is complex, switching to return_onesided=False", stacklevel=3)
    grid = jnp.fft.fftfreq if sides == "twosided" else jnp.fft.rfftfreq
    freqs = grid(nfft_int, 1 / fs, dtype=freq_dtype)
    result = _windowed_fft(x, win, detrend_func, nperseg_int, noverlap_int, nfft_int, sides)
    if y is not None:
        result = jnp.conjugate(result) * _windowed_fft(ys, win, detrend_func, nperseg_int, noverlap_int, nfft_int,
                                                       sides)
    elif mode == "psd":
        result = jnp.conjugate(result) * result
    result = result * scale
    if sides == "onesided" and mode == "psd":
        end = None if nfft_int % 2 else -1
        result = result.at[..., 1:end].multiply(2)
    time = jnp.arange(nperseg_int / 2, x.shape[-1] - nperseg_int / 2 + 1, nstep, dtype=freq_dtype) / fs
    if boundary is not None:
        time = time - (nperseg_int / 2) / fs
    result = result.astype(result_dtype)
    if y is None and mode != "stft":
        result = jnp.real(result)
    return freqs, time, jnp.moveaxis(result, -1, axis)


# --- public API -------------------------------------------------------------------------------


def stft(x: Any, fs: Any = 1.0, window: Any = "hann", nperseg: int = 256, noverlap: int | None = None,
         nfft: int | None = None, detrend: Any = False, return_onesided: bool = True,
         boundary: str | None = "zeros", padded: bool = True, axis: int = -1) -> tuple[Any, Any, Any]:
    """``jax.scipy.signal.stft``: (frequencies, segment times, ``Zxx``), the FFTs of ``x``'s
    windowed, overlapping segments along ``axis`` ("spectrum" scaling)."""
    return _spectral_helper(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                            scaling="spectrum", axis=axis, mode="stft", boundary=boundary, padded=padded)


def _median_bias(n: int) -> Any:
    """The bias of the median of ``n`` periodograms relative to their mean (Allen et al. 2012, app. B)."""
    even = jnp.arange(2.0, n, 2)
    return 1 + jnp.sum(1.0 / (even + 1) - 1.0 / even)


def csd(x: Any, y: Any, fs: Any = 1.0, window: Any = "hann", nperseg: int | None = None,
        noverlap: int | None = None, nfft: int | None = None, detrend: Any = "constant",
        return_onesided: bool = True, scaling: str = "density", axis: int = -1,
        average: str = "mean") -> tuple[Any, Any]:
    """``jax.scipy.signal.csd``: (frequencies, the cross spectral density of ``x`` and ``y``) by
    Welch's method; ``y=None`` gives ``x``'s power spectral density."""
    freqs, _, pxy = _spectral_helper(x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                                     scaling, axis, mode="psd")
    if y is not None:
        pxy = pxy + 0j
    if pxy.ndim >= 2 and pxy.size > 0:
        if pxy.shape[-1] > 1:
            if average == "median":
                bias = _median_bias(pxy.shape[-1]).astype(pxy.dtype)
                if jnp.iscomplexobj(pxy):
                    pxy = jnp.median(jnp.real(pxy), axis=-1) + 1j * jnp.median(jnp.imag(pxy), axis=-1)
                else:
                    pxy = jnp.median(pxy, axis=-1)
                pxy = pxy / bias
            elif average == "mean":
                pxy = pxy.mean(axis=-1)
            else:
                raise ValueError(f"average must be 'median' or 'mean', got {average!r}")
        else:
            pxy = jnp.reshape(pxy, pxy.shape[:-1])
    return freqs, pxy


def welch(x: Any, fs: Any = 1.0, window: Any = "hann", nperseg: int | None = None, noverlap: int | None = None,
          nfft: int | None = None, detrend: Any = "constant", return_onesided: bool = True,
          scaling: str = "density", axis: int = -1, average: str = "mean") -> tuple[Any, Any]:
    """``jax.scipy.signal.welch``: (frequencies, ``x``'s power spectral density) by Welch's method."""
    freqs, pxx = csd(x, None, fs=fs, window=window, nperseg=nperseg, noverlap=noverlap, nfft=nfft,
                     detrend=detrend, return_onesided=return_onesided, scaling=scaling, axis=axis,
                     average=average)
    return freqs, jnp.real(pxx)


def _overlap_and_add(frames: Any, step: int) -> Any:
    """Frames (..., count, length) summed at offsets ``step`` apart: shape (..., step * (count - 1) + length)."""
    count, length = frames.shape[-2:]
    out = jnp.zeros(frames.shape[:-2] + (step * (count - 1) + length,), frames.dtype)
    index = np.arange(count)[:, None] * step + np.arange(length)[None, :]
    return out.at[..., index].add(frames)


def istft(Zxx: Any, fs: Any = 1.0, window: Any = "hann", nperseg: int | None = None,  # noqa: N803 - SciPy's name
          noverlap: int | None = None, nfft: int | None = None, input_onesided: bool = True,
          boundary: bool = True, time_axis: int = -1, freq_axis: int = -2) -> tuple[Any, Any]:
    """``jax.scipy.signal.istft``: (times, the signal) whose ``stft`` is ``Zxx``, by windowed
    overlap-add of the inverse FFTs of its segments."""
    z = jnp.asarray(Zxx)
    if z.ndim < 2:
        raise ValueError(f"istft: input stft must be at least 2-d, got shape {tuple(z.shape)}")
    (freq_axis,) = normalize_axes(freq_axis, z.ndim, "istft")
    (time_axis,) = normalize_axes(time_axis, z.ndim, "istft")
    if freq_axis == time_axis:
        raise ValueError("istft: must specify differing time and frequency axes")
    z = z.astype(dtypes.complex_for(dtypes.float_dtype_for(z.dtype)))
    n_default = 2 * (z.shape[freq_axis] - 1) if input_onesided else z.shape[freq_axis]
    nperseg_int = _static_int(nperseg or n_default, "nperseg: segment length of STFT")
    if nperseg_int < 1:
        raise ValueError(f"istft: nperseg must be a positive integer, got {nperseg_int}")
    if nfft is None:
        nfft_int = n_default + 1 if input_onesided and nperseg_int == n_default + 1 else n_default
    else:
        nfft_int = _static_int(nfft, "nfft of STFT")
    if nfft_int < nperseg_int:
        raise ValueError(f"istft: FFT length ({nfft_int}) must be longer than nperseg ({nperseg_int})")
    noverlap_int = _static_int(noverlap or nperseg_int // 2, "noverlap of STFT")
    if noverlap_int >= nperseg_int:
        raise ValueError(f"istft: noverlap ({noverlap_int}) must be less than nperseg ({nperseg_int})")
    nstep = nperseg_int - noverlap_int
    if time_axis != z.ndim - 1 or freq_axis != z.ndim - 2:
        outer = tuple(a for a in range(z.ndim) if a not in (time_axis, freq_axis))
        z = jnp.transpose(z, outer + (freq_axis, time_axis))
    inverse = jnp.fft.irfft if input_onesided else jnp.fft.ifft
    xsubs = inverse(z, axis=-2, n=nfft)[..., :nperseg_int, :]
    if isinstance(window, (str, tuple)):
        win = jnp.asarray(_named_window(window, nperseg_int)).astype(xsubs.dtype)
    else:
        win = jnp.asarray(window)
        if win.ndim != 1:
            raise ValueError(f"istft: window must be 1-D, got shape {tuple(win.shape)}")
        if win.shape[0] != nperseg_int:
            raise ValueError(f"istft: window must have length of {nperseg_int}, got {win.shape[0]}")
    xsubs = xsubs * win.sum()
    win = win.reshape((1,) * (xsubs.ndim - 2) + (nperseg_int, 1))
    x = _overlap_and_add(jnp.swapaxes(xsubs * win, -2, -1), nstep)
    norm = _overlap_and_add(jnp.swapaxes(jnp.repeat(win * win, xsubs.shape[-1], axis=-1), -2, -1), nstep)
    if boundary:
        cut = slice(nperseg_int // 2, -(nperseg_int // 2))
        x, norm = x[..., cut], norm[..., cut]
    x = x / jnp.where(norm > 1e-10, norm, 1.0)
    if x.ndim > 1 and time_axis != z.ndim - 1:
        if freq_axis < time_axis:
            time_axis -= 1
        x = jnp.moveaxis(x, -1, time_axis)
    time = jnp.arange(x.shape[0], dtype=dtypes.real_for(x.dtype)) / fs
    return time, x
