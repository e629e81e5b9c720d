"""fungraph.image against jax.image: values, dtypes in both modes, grad, vmap and jit (issue #32)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

MODES = [True, False]
METHODS = ["nearest", "linear", "bilinear", "cubic", "tricubic", "lanczos3", "lanczos5", "cubic-pytorch", "area"]
SHAPES = [(2, 9, 4, 3), (1, 3, 13, 2), (2, 1, 1, 3)]


@contextlib.contextmanager
def both_modes(x64: bool) -> Iterator[None]:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        yield


def _image(dtype: type = np.float32) -> np.ndarray:
    return np.random.default_rng(0).normal(size=(2, 5, 7, 3)).astype(dtype)


def _close(got: object, want: object, tol: float = 1e-5) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("x64", MODES)
@pytest.mark.parametrize("method", [m for m in METHODS if m not in ("bilinear", "tricubic")])
@pytest.mark.parametrize("antialias", [True, False])
def test_resize_matches_jax(x64: bool, method: str, antialias: bool) -> None:
    img = _image()
    with both_modes(x64):
        for shape in SHAPES:
            want = jax.jit(lambda x: jax.image.resize(x, shape, method, antialias=antialias))(img)  # noqa: B023
            _close(fg.image.resize(img, shape, method, antialias=antialias), want)
        if antialias:
            _close(fg.jit(lambda x: fg.image.resize(x, (2, 8, 3, 3), method, antialias))(img),
                   jax.image.resize(img, (2, 8, 3, 3), method, antialias))


@pytest.mark.parametrize("x64", MODES)
@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64, np.float16, np.float64])
def test_resize_dtypes(x64: bool, dtype: type) -> None:
    img = (np.abs(_image()) * 40).astype(dtype)
    with both_modes(x64):
        for method in ("nearest", "linear", "lanczos3"):
            tol = 2e-2 if dtype == np.float16 else 1e-4
            _close(fg.image.resize(img, (2, 8, 3, 3), method), jax.image.resize(img, (2, 8, 3, 3), method), tol)


def test_resize_method_names() -> None:
    for name in METHODS:
        assert fg.image.ResizeMethod.from_string(name).name == jax.image.ResizeMethod.from_string(name).name
    assert [m.name for m in fg.image.ResizeMethod] == [m.name for m in jax.image.ResizeMethod]
    img = _image()
    _close(fg.image.resize(img, (2, 8, 3, 3), fg.image.ResizeMethod.LANCZOS3),
           jax.image.resize(img, (2, 8, 3, 3), jax.image.ResizeMethod.LANCZOS3))
    with pytest.raises(ValueError, match="Unknown resize method"):
        fg.image.resize(img, (2, 8, 3, 3), "bogus")
    with pytest.raises(ValueError, match="number of dimensions"):
        fg.image.resize(img, (8, 3), "linear")


@pytest.mark.parametrize("x64", MODES)
@pytest.mark.parametrize("method", ["linear", "cubic", "lanczos3", "lanczos5", "area", "cubic-pytorch"])
@pytest.mark.parametrize("antialias", [True, False])
def test_scale_and_translate_values_and_grads(x64: bool, method: str, antialias: bool) -> None:
    img = _image()
    scale, trans = np.array([1.7, 0.6], np.float32), np.array([0.3, -1.2], np.float32)
    shape, dims = (2, 8, 5, 3), (1, 2)

    def loss(lib: object, np_: object) -> object:
        return lambda x, s, t: np_.sum(lib.image.scale_and_translate(x, shape, dims, s, t, method, antialias) ** 2)

    with both_modes(x64):
        js, jt = jnp.asarray(scale), jnp.asarray(trans)
        # JAX under one jit per case: its eager form compiles each of its ~100 operations
        want = jax.jit(lambda x, s, t: jax.image.scale_and_translate(x, shape, dims, s, t, method, antialias))(
            img, js, jt)
        _close(fg.image.scale_and_translate(img, shape, dims, scale, trans, method, antialias), want)
        gwant = jax.jit(jax.grad(loss(jax, jnp), argnums=(0, 1, 2)))(img, js, jt)
        ggot = fg.grad(loss(fg, fnp), argnums=(0, 1, 2))(img, scale, trans)
        for g, w in zip(ggot, gwant):
            _close(g, w, 2e-3)
        ggot = fg.jit(fg.grad(loss(fg, fnp), argnums=(1, 2)))(img, scale, trans)
        for g, w in zip(ggot, gwant[1:]):
            _close(g, w, 2e-3)


def test_scale_and_translate_errors() -> None:
    img = _image()
    with pytest.raises(ValueError, match="Nearest neighbor"):
        fg.image.scale_and_translate(img, img.shape, (1,), np.ones(1), np.zeros(1), "nearest")
    with pytest.raises(ValueError, match="one entry per spatial dimension"):
        fg.image.scale_and_translate(img, img.shape, (1, 2), np.ones(1), np.zeros(1), "linear")


@pytest.mark.parametrize("method", ["nearest", "linear", "cubic", "lanczos3"])
def test_resize_grad_and_vmap(method: str) -> None:
    img = _image(np.float64)
    loss_j = lambda x: jnp.sum(jnp.sin(jax.image.resize(x, (2, 9, 4, 3), method)))
    loss_f = lambda x: fnp.sum(fnp.sin(fg.image.resize(x, (2, 9, 4, 3), method)))
    _close(fg.grad(loss_f)(img), jax.grad(loss_j)(img), 1e-9)
    batched = lambda lib: lib.vmap(lambda x: lib.image.resize(x, (11, 2), method), in_axes=2, out_axes=0)
    _close(batched(fg)(img[0]), batched(jax)(img[0]), 1e-9)
    scales = np.array([[1.5, 0.5], [0.7, 2.0], [1.0, 1.0]])
    trans = lambda lib: lib.vmap(lambda s: lib.image.scale_and_translate(img, (2, 6, 6, 3), (1, 2), s, s * 0.0 + 0.25,
                                                                           "linear"))
    _close(trans(fg)(scales), trans(jax)(jnp.asarray(scales)), 1e-9)
