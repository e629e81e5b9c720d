"""A tiny function to look at with the command line (see docs/cli.md):

    python -m fungraph show examples/show_me.py:predict --arg f32[784,10] --arg f32[256,784] --grad --jit
"""

from __future__ import annotations

import fungraph as fg


def predict(w, x):
    """The summed ReLU activations of one dense layer: ``x`` is a batch of images, ``w`` the weights."""
    return fg.nn.relu(x @ w).sum()


if __name__ == "__main__":
    w = fg.ShapeDtypeStruct((784, 10), "float32")
    x = fg.ShapeDtypeStruct((256, 784), "float32")
    print(fg.make_graph(fg.grad(predict))(w, x))
