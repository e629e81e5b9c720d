"""lax.fft and FftType against jax.lax (issue #32): kinds, dtypes in both modes, grads, vmap, jit."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

RNG = np.random.default_rng(0)
REAL = RNG.normal(size=(3, 4, 6))
CPLX = REAL + 1j * RNG.normal(size=(3, 4, 6))


@contextlib.contextmanager
def both_modes(x64: bool) -> Iterator[None]:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        yield


def _close(got: object, want: object, tol: float) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


CASES = [("fft", CPLX, (6,)), ("FFT", CPLX, (4, 6)), ("ifft", CPLX, (3, 4, 6)), ("rfft", REAL, (6,)),
         ("RFFT", REAL, (4, 6)), ("irfft", CPLX[..., :4], (4, 6)), ("irfft", CPLX[..., :4], (4, 7)),
("fft", REAL, (6,)), ("fft", REAL.astype(np.int32), (6,)), ("rfft", REAL, ())]


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("kind, x, lengths", CASES)
def test_lax_fft_matches_jax(x64: bool, kind: str, x: np.ndarray, lengths: tuple) -> None:
    with both_modes(x64):
        for dt in ([np.float32, np.float64] if x.dtype.kind == "f" else [x.dtype]):
            arg = x.astype(dt)
            want = jax.lax.fft(arg, kind, lengths)
            _close(lax.fft(arg, kind, lengths), want, 1e-4)
            _close(lax.fft(arg, lax.FftType[kind.upper()], lengths), want, 1e-4)


def test_lax_fft_grad_vmap_jit() -> None:
    def loss(lib: object, np_: object) -> object:
        return lambda x: np_.sum(np_.abs(lib.lax.fft(x, "rfft", (4, 6))) ** 2) + np_.sum(np_.real(
            lib.lax.fft(x.astype(np.complex128), "fft", (6,)) ** 2))

    _close(fg.grad(loss(fg, fnp))(REAL), jax.grad(loss(jax, jnp))(REAL), 1e-9)
    _close(fg.jit(fg.vmap(lambda x: lax.fft(x, "irfft", (4, 6))))(CPLX[..., :4]),
           jax.vmap(lambda x: jax.lax.fft(x, "irfft", (4, 6)))(CPLX[..., :4]), 1e-9)


def test_lax_fft_errors() -> None:
    with pytest.raises(ValueError, match="Unknown FFT type"):
        lax.fft(CPLX, "Fft", (6,))
    with pytest.raises(TypeError, match="Unknown FFT type value"):
        lax.fft(CPLX, 0.5, (6,))
    with pytest.raises(fg.ShapeError, match="IRFFT"):
        lax.fft(CPLX, "irfft", (4, 6))
    with pytest.raises(ValueError, match="only real valued inputs"):
        lax.fft(CPLX, "rfft", (6,))
    assert [t.name for t in lax.FftType] == [t.name for t in jax.lax.FftType]
    assert [int(t) for t in lax.FftType] == [int(t) for t in jax.lax.FftType]
