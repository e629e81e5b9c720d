"""Model zoo for the memory-planner benchmark: ResNet-50, InceptionV3, MobileNetV2 and a
small MNIST CNN training step, written with ``fungraph.numpy``, ``fungraph.nn`` and
``fungraph.lax`` only.

Every model is inference at batch 1, float32, NCHW, with random weights drawn by numpy
from a seed. Batch norm is folded into a per-channel affine ``x * scale + shift`` after
each convolution. Weights are *arguments* (a pytree of numpy arrays), not closed-over
constants, so eager and jit see the same inputs and the weights never enter the arena.

``make_<name>(seed, **config) -> (fn, args)``; ``MODELS`` lists each model with its full
configuration (the published resolution and width) and a reduced one for tests. At full size
the parameter counts equal torchvision's (InceptionV3 without its aux head).

MobileNetV2's depthwise 3x3 convolution has no primitive in fungraph; ``depthwise_conv``
sums the nine taps ``x[:, :, i::s, j::s] * w[i, j]`` of the zero-padded input (strided
slices are views, so each tap costs one multiply and one add).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax, nn

__all__ = [
    "MODELS",
    "ModelSpec",
    "depthwise_conv",
    "make_inception_v3",
    "make_mnist_cnn",
    "make_mnist_train_step",
    "make_mobilenet_v2",
    "make_resnet50",
]

Params = Any
Pad = tuple[tuple[int, int], tuple[int, int]]


# --------------------------------------------------------------------------- weights


class _Init:
    """Random float32 weights: He-normal kernels, batch norm folded to scale and shift."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def kernel(self, out_ch: int, in_ch: int, kh: int, kw: int) -> np.ndarray:
        std = np.sqrt(2.0 / (in_ch * kh * kw))
        return (self.rng.standard_normal((out_ch, in_ch, kh, kw)) * std).astype(np.float32)

    def affine(self, ch: int, gain: float = 1.0) -> dict[str, np.ndarray]:
        """A folded batch norm: ``scale`` and ``shift`` of shape (C, 1, 1)."""
        scale = self.rng.uniform(0.5, 1.0, (ch, 1, 1)) * gain
        shift = self.rng.normal(0.0, 0.1, (ch, 1, 1))
        return {"scale": scale.astype(np.float32), "shift": shift.astype(np.float32)}

    def conv_bn(self, out_ch: int, in_ch: int, kh: int, kw: int | None = None, gain: float = 1.0) -> dict:
        return {"w": self.kernel(out_ch, in_ch, kh, kh if kw is None else kw), **self.affine(out_ch, gain)}

    def dense(self, n_in: int, n_out: int) -> dict[str, np.ndarray]:
        w = self.rng.standard_normal((n_in, n_out)) * np.sqrt(1.0 / n_in)
        return {"w": w.astype(np.float32), "b": np.zeros(n_out, np.float32)}

    def image(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.rng.standard_normal(shape).astype(np.float32)


def _ch(n: int, width: float) -> int:
    """A channel count scaled by ``width``, at least 4."""
    return max(4, int(round(n * width)))


# ------------------------------------------------------------------------ layers


def relu6(x: Any) -> Any:
    return fnp.clip(x, 0.0, 6.0)


def conv_bn(p: dict, x: Any, stride: int = 1, padding: Any = None, act: Callable | None = nn.relu) -> Any:
    """Convolution, folded batch norm, activation. Default padding keeps the size at stride 1
    (``k // 2`` on each side, torchvision's choice for odd kernels)."""
    kh, kw = p["w"].shape[2:]
    if padding is None:
        padding = ((kh // 2, kh // 2), (kw // 2, kw // 2))
    y = lax.conv(x, p["w"], (stride, stride), padding)
    y = y * p["scale"] + p["shift"]
    return act(y) if act is not None else y


def dense(p: dict, x: Any) -> Any:
    return x @ p["w"] + p["b"]


def depthwise_conv(x: Any, w: Any, stride: int = 1, padding: int = 1) -> Any:
    """Depthwise convolution of ``x`` (N, C, H, W) with ``w`` (KH, KW, C, 1, 1), one kernel
    per channel: the sum over taps of strided slices of the zero-padded input times the tap's
    per-channel weight. Exact, and cheap for 3x3 (nine multiply-adds)."""
    n, c, h, wd = x.shape
    kh, kw = w.shape[:2]
    if padding:
        zr = fnp.zeros((n, c, padding, wd), x.dtype)
        x = fnp.concatenate([zr, x, zr], axis=2)
        zc = fnp.zeros((n, c, h + 2 * padding, padding), x.dtype)
        x = fnp.concatenate([zc, x, zc], axis=3)
    hp, wp = h + 2 * padding, wd + 2 * padding
    oh, ow = (hp - kh) // stride + 1, (wp - kw) // stride + 1
    out = None
    for i in range(kh):
        for j in range(kw):
            tap = x[:, :, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride] * w[i, j]
            out = tap if out is None else out + tap
    return out


def global_avg_pool(x: Any) -> Any:
    return fnp.mean(x, axis=(2, 3))


# ----------------------------------------------------------------------- ResNet-50


def _resnet_params(init: _Init, blocks: tuple[int, ...], width: float, classes: int) -> dict:
    stem = _ch(64, width)
    params: dict[str, Any] = {"stem": init.conv_bn(stem, 3, 7), "stages": []}
    in_ch = stem
    for stage, n in enumerate(blocks):
        mid = _ch(64 * 2**stage, width)
        out = 4 * mid
        layers = []
        for b in range(n):
            block = {"c1": init.conv_bn(mid, in_ch, 1), "c2": init.conv_bn(mid, mid, 3),
                     "c3": init.conv_bn(out, mid, 1, gain=0.2)}
            if b == 0:
                block["proj"] = init.conv_bn(out, in_ch, 1)
            layers.append(block)
            in_ch = out
        params["stages"].append(layers)
    params["fc"] = init.dense(in_ch, classes)
    return params


def resnet50(params: dict, x: Any) -> Any:
    """ResNet-50 v1.5 (the stride on the 3x3 conv of each stage's first block)."""
    h = conv_bn(params["stem"], x, stride=2, padding=((3, 3), (3, 3)))
    h = nn.max_pool(h, (3, 3), (2, 2), "SAME")
    for stage, layers in enumerate(params["stages"]):
        for b, p in enumerate(layers):
            stride = 2 if stage > 0 and b == 0 else 1
            y = conv_bn(p["c1"], h)
            y = conv_bn(p["c2"], y, stride=stride)
            y = conv_bn(p["c3"], y, act=None)
            short = conv_bn(p["proj"], h, stride=stride, act=None) if "proj" in p else h
            h = nn.relu(y + short)
    return dense(params["fc"], global_avg_pool(h))


def make_resnet50(seed: int = 0, image: int = 299, width: float = 1.0, blocks: tuple[int, ...] = (3, 4, 6, 3),
                  classes: int = 1000) -> tuple[Callable, tuple]:
    init = _Init(seed)
    params = _resnet_params(init, tuple(blocks), width, classes)
    return resnet50, (params, init.image((1, 3, image, image)))


# ----------------------------------------------------------------------- InceptionV3


def _inception_params(init: _Init, width: float, classes: int) -> dict:
    c = lambda n: _ch(n, width)  # noqa: E731
    cb = init.conv_bn
    p: dict[str, Any] = {}
    p["stem"] = [cb(c(32), 3, 3), cb(c(32), c(32), 3), cb(c(64), c(32), 3), cb(c(80), c(64), 1),
                 cb(c(192), c(80), 3)]
    ch = c(192)
    blocks: list[tuple[str, dict]] = []
    for pool_features in (32, 64, 64):  # Mixed_5b, 5c, 5d
        blocks.append(("A", {"b1": cb(c(64), ch, 1),
                             "b5": [cb(c(48), ch, 1), cb(c(64), c(48), 5)],
                             "b3": [cb(c(64), ch, 1), cb(c(96), c(64), 3), cb(c(96), c(96), 3)],
                             "pool": cb(c(pool_features), ch, 1)}))
        ch = c(64) + c(64) + c(96) + c(pool_features)
    blocks.append(("B", {"b3": cb(c(384), ch, 3),  # Mixed_6a
                         "b3dbl": [cb(c(64), ch, 1), cb(c(96), c(64), 3), cb(c(96), c(96), 3)]}))
    ch = c(384) + c(96) + ch
    for c7 in (128, 160, 160, 192):  # Mixed_6b .. 6e
        m = c(c7)
        blocks.append(("C", {"b1": cb(c(192), ch, 1),
                             "b7": [cb(m, ch, 1), cb(m, m, 1, 7), cb(c(192), m, 7, 1)],
                             "b7dbl": [cb(m, ch, 1), cb(m, m, 7, 1), cb(m, m, 1, 7), cb(m, m, 7, 1),
                                       cb(c(192), m, 1, 7)],
                             "pool": cb(c(192), ch, 1)}))
        ch = 4 * c(192)
    blocks.append(("D", {"b3": [cb(c(192), ch, 1), cb(c(320), c(192), 3)],  # Mixed_7a
                         "b7x3": [cb(c(192), ch, 1), cb(c(192), c(192), 1, 7), cb(c(192), c(192), 7, 1),
                                  cb(c(192), c(192), 3)]}))
    ch = c(320) + c(192) + ch
    for _ in range(2):  # Mixed_7b, 7c
        blocks.append(("E", {"b1": cb(c(320), ch, 1),
                             "b3": [cb(c(384), ch, 1), cb(c(384), c(384), 1, 3), cb(c(384), c(384), 3, 1)],
                             "b3dbl": [cb(c(448), ch, 1), cb(c(384), c(448), 3), cb(c(384), c(384), 1, 3),
                                       cb(c(384), c(384), 3, 1)],
                             "pool": cb(c(192), ch, 1)}))
        ch = c(320) + 4 * c(384) + c(192)
    p["kinds"] = tuple(k for k, _ in blocks)
    p["blocks"] = [b for _, b in blocks]
    p["fc"] = init.dense(ch, classes)
    return p


_VALID = ((0, 0), (0, 0))


def _avg3(x: Any) -> Any:
    return nn.avg_pool(x, (3, 3), (1, 1), ((1, 1), (1, 1)))


def _max3s2(x: Any) -> Any:
    return nn.max_pool(x, (3, 3), (2, 2), "VALID")


def _cat(*xs: Any) -> Any:
    return fnp.concatenate(list(xs), axis=1)


def _chain(ps: list[dict], x: Any, last_stride: int = 1, last_padding: Any = None) -> Any:
    for p in ps[:-1]:
        x = conv_bn(p, x)
    return conv_bn(ps[-1], x, stride=last_stride, padding=last_padding)


def _inception_block(kind: str, p: dict, x: Any) -> Any:
    if kind == "A":
        return _cat(conv_bn(p["b1"], x), _chain(p["b5"], x), _chain(p["b3"], x), conv_bn(p["pool"], _avg3(x)))
    if kind == "B":
        return _cat(conv_bn(p["b3"], x, stride=2, padding=_VALID), _chain(p["b3dbl"], x, 2, _VALID), _max3s2(x))
    if kind == "C":
        return _cat(conv_bn(p["b1"], x), _chain(p["b7"], x), _chain(p["b7dbl"], x), conv_bn(p["pool"], _avg3(x)))
    if kind == "D":
        return _cat(_chain(p["b3"], x, 2, _VALID), _chain(p["b7x3"], x, 2, _VALID), _max3s2(x))
    # E: the 3x3 branches split into parallel 1x3 and 3x1 convs
    b3 = conv_bn(p["b3"][0], x)
    b3 = _cat(conv_bn(p["b3"][1], b3), conv_bn(p["b3"][2], b3))
    d = conv_bn(p["b3dbl"][1], conv_bn(p["b3dbl"][0], x))
    d = _cat(conv_bn(p["b3dbl"][2], d), conv_bn(p["b3dbl"][3], d))
    return _cat(conv_bn(p["b1"], x), b3, d, conv_bn(p["pool"], _avg3(x)))


def inception_v3(params: dict, x: Any) -> Any:
    """InceptionV3 in torchvision's layout (Mixed_5b .. Mixed_7c), without the aux head."""
    s = params["stem"]
    h = conv_bn(s[0], x, stride=2, padding=_VALID)
    h = conv_bn(s[1], h, padding=_VALID)
    h = conv_bn(s[2], h)
    h = _max3s2(h)
    h = conv_bn(s[3], h)
    h = conv_bn(s[4], h, padding=_VALID)
    h = _max3s2(h)
    for kind, p in zip(params["kinds"], params["blocks"]):
        h = _inception_block(kind, p, h)
    return dense(params["fc"], global_avg_pool(h))


def make_inception_v3(seed: int = 0, image: int = 299, width: float = 1.0,
                      classes: int = 1000) -> tuple[Callable, tuple]:
    """``image`` must be at least 75 (the smallest size the stride pattern allows)."""
    init = _Init(seed)
    params = _inception_params(init, width, classes)
    kinds = params.pop("kinds")
    return (lambda p, x: inception_v3({**p, "kinds": kinds}, x)), (params, init.image((1, 3, image, image)))


# ----------------------------------------------------------------------- MobileNetV2

#: (expansion t, output channels c, repeats n, first stride s), from the paper's Table 2.
MOBILENET_V2_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                         (6, 160, 3, 2), (6, 320, 1, 1))


def _mobilenet_params(init: _Init, width: float, classes: int) -> tuple[dict, tuple]:
    c = lambda n: _ch(n, width)  # noqa: E731
    params: dict[str, Any] = {"stem": init.conv_bn(c(32), 3, 3), "blocks": []}
    strides = []
    in_ch = c(32)
    for t, out, n, s in MOBILENET_V2_SETTINGS:
        for i in range(n):
            hidden = in_ch * t
            std = np.sqrt(2.0 / 9)
            dw = (init.rng.standard_normal((3, 3, hidden, 1, 1)) * std).astype(np.float32)
            block = {"dw": dw, "dw_bn": init.affine(hidden), "project": init.conv_bn(c(out), hidden, 1, gain=0.5)}
            if t != 1:
                block["expand"] = init.conv_bn(hidden, in_ch, 1)
            params["blocks"].append(block)
            strides.append(s if i == 0 else 1)
            in_ch = c(out)
    last = c(1280)
    params["head"] = init.conv_bn(last, in_ch, 1)
    params["fc"] = init.dense(last, classes)
    return params, tuple(strides)


def mobilenet_v2(params: dict, x: Any, strides: tuple[int, ...]) -> Any:
    h = conv_bn(params["stem"], x, stride=2, act=relu6)
    for p, s in zip(params["blocks"], strides):
        y = conv_bn(p["expand"], h, act=relu6) if "expand" in p else h
        y = depthwise_conv(y, p["dw"], stride=s)
        y = relu6(y * p["dw_bn"]["scale"] + p["dw_bn"]["shift"])
        y = conv_bn(p["project"], y, act=None)
        h = h + y if s == 1 and y.shape == h.shape else y
    h = conv_bn(params["head"], h, act=relu6)
    return dense(params["fc"], global_avg_pool(h))


def make_mobilenet_v2(seed: int = 0, image: int = 224, width: float = 1.0,
                      classes: int = 1000) -> tuple[Callable, tuple]:
    init = _Init(seed)
    params, strides = _mobilenet_params(init, width, classes)
    return (lambda p, x: mobilenet_v2(p, x, strides)), (params, init.image((1, 3, image, image)))


# --------------------------------------------------------------------- MNIST CNN


def _cnn_params(init: _Init) -> dict:
    def conv(o: int, i: int) -> dict:
        return {"w": init.kernel(o, i, 3, 3), "b": np.zeros((o, 1, 1), np.float32)}

    return {"conv1": conv(32, 1), "conv2": conv(64, 32), "fc1": init.dense(64 * 5 * 5, 128),
            "fc2": init.dense(128, 10)}


def mnist_cnn(params: dict, x: Any) -> Any:
    """conv 3x3x32 relu, max_pool 2, conv 3x3x64 relu, max_pool 2, dense 128 relu, dense 10
    (VALID convs as in Keras' MNIST example: 28 -> 26 -> 13 -> 11 -> 5)."""
    h = nn.relu(lax.conv(x, params["conv1"]["w"], (1, 1), "VALID") + params["conv1"]["b"])
    h = nn.max_pool(h, (2, 2))
    h = nn.relu(lax.conv(h, params["conv2"]["w"], (1, 1), "VALID") + params["conv2"]["b"])
    h = nn.max_pool(h, (2, 2))
    h = fnp.reshape(h, (h.shape[0], -1))
    h = nn.relu(dense(params["fc1"], h))
    return dense(params["fc2"], h)


def cross_entropy(params: dict, x: Any, labels: Any) -> Any:
    """Mean softmax cross-entropy against one-hot ``labels``."""
    return -fnp.mean(fnp.sum(labels * nn.log_softmax(mnist_cnn(params, x)), axis=-1))


def sgd_step(params: dict, x: Any, labels: Any, lr: float = 0.01) -> tuple[dict, Any]:
    loss, grads = fg.value_and_grad(cross_entropy)(params, x, labels)
    return fg.tree_map(lambda p, g: p - lr * g, params, grads), loss


def _mnist_data(init: _Init, batch: int) -> tuple[np.ndarray, np.ndarray]:
    x = init.rng.uniform(0.0, 1.0, (batch, 1, 28, 28)).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[init.rng.integers(0, 10, batch)]
    return x, labels


def make_mnist_cnn(seed: int = 0, batch: int = 32) -> tuple[Callable, tuple]:
    init = _Init(seed)
    params = _cnn_params(init)
    return mnist_cnn, (params, _mnist_data(init, batch)[0])


def make_mnist_train_step(seed: int = 0, batch: int = 32) -> tuple[Callable, tuple]:
    """One SGD step ``(params, x, labels) -> (new_params, loss)``; jit it with ``donate_argnums=0``."""
    init = _Init(seed)
    params = _cnn_params(init)
    return sgd_step, (params, *_mnist_data(init, batch))


# ----------------------------------------------------------------------- registry


@dataclass(frozen=True)
class ModelSpec:
    """A model of the benchmark table: its builder, full and reduced configurations."""

    name: str
    make: Callable[..., tuple[Callable, tuple]]
    full: dict[str, Any] = field(default_factory=dict)
    reduced: dict[str, Any] = field(default_factory=dict)
    donate_argnums: tuple[int, ...] = ()

    def build(self, seed: int = 0, reduced: bool = False) -> tuple[Callable, tuple]:
        return self.make(seed, **(self.reduced if reduced else self.full))


MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("resnet50", make_resnet50, {"image": 299}, {"image": 64, "width": 0.25, "classes": 10}),
    ModelSpec("inception_v3", make_inception_v3, {"image": 299}, {"image": 75, "width": 0.25, "classes": 10}),
    ModelSpec("mobilenet_v2", make_mobilenet_v2, {"image": 224}, {"image": 64, "width": 0.5, "classes": 10}),
    ModelSpec("mnist_cnn_step", make_mnist_train_step, {"batch": 64}, {"batch": 8}, donate_argnums=(0,)),
)
