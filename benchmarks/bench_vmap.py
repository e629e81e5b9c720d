"""Per-example gradients of an MLP loss, batch 128: jit(vmap(grad)) against a Python loop of
grad calls, and against JAX when installed.

    python benchmarks/bench_vmap.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import median_time, table, try_jax  # noqa: E402

import fungraph as fg  # noqa: E402
import fungraph.numpy as fnp  # noqa: E402
from fungraph import nn  # noqa: E402


def loss(params, x, y):
    h = x
    for layer in params[:-1]:
        h = fnp.tanh(h @ layer["w"] + layer["b"])
    logits = h @ params[-1]["w"] + params[-1]["b"]
    return -fnp.sum(y * nn.log_softmax(logits))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    sizes = [64, 128, 128, 10]
    batch = 32 if args.quick else 128
    params = [{"w": (rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32), "b": np.zeros(n, np.float32)}
              for m, n in zip(sizes[:-1], sizes[1:])]
    xs = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    ys = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    per_example = fg.jit(fg.vmap(fg.grad(loss), in_axes=(None, 0, 0)))
    jit_grad = fg.jit(fg.grad(loss))
    eager_grad = fg.grad(loss)
    got = per_example(params, xs, ys)
    want = [jit_grad(params, xs[i], ys[i]) for i in range(batch)]
    np.testing.assert_allclose(got[0]["w"], np.stack([w[0]["w"] for w in want]), rtol=1e-4, atol=1e-5)
    t_vmap = median_time(lambda: per_example(params, xs, ys), repeat=7)
    t_loop_jit = median_time(lambda: [jit_grad(params, xs[i], ys[i]) for i in range(batch)], repeat=3)
    t_loop = median_time(lambda: [eager_grad(params, xs[i], ys[i]) for i in range(min(batch, 16))],
                         repeat=1, warmup=0) * batch / min(batch, 16)
    rows = [["python loop of eager grad", f"{t_loop * 1e3:.1f} ms", f"{t_loop / t_vmap:.0f}x slower"],
            ["python loop of jit(grad)", f"{t_loop_jit * 1e3:.1f} ms", f"{t_loop_jit / t_vmap:.1f}x slower"],
            ["fungraph jit(vmap(grad))", f"{t_vmap * 1e3:.2f} ms", "1.0"]]
    jax = try_jax()
    if jax is not None:
        import jax.numpy as jnp

        def jloss(params, x, y):
            h = x
            for layer in params[:-1]:
                h = jnp.tanh(h @ layer["w"] + layer["b"])
            logits = h @ params[-1]["w"] + params[-1]["b"]
            return -jnp.sum(y * jax.nn.log_softmax(logits))

        jf = jax.jit(jax.vmap(jax.grad(jloss), in_axes=(None, 0, 0)))
        jp = jax.tree_util.tree_map(jnp.asarray, params)
        jax.block_until_ready(jf(jp, xs, ys))
        t_j = median_time(lambda: jax.block_until_ready(jf(jp, xs, ys)), repeat=7)
        rows.append(["jax jit(vmap(grad))", f"{t_j * 1e3:.2f} ms", f"fungraph/jax = {t_vmap / t_j:.2f}"])
    print(f"== per-example gradients, MLP {sizes}, batch {batch}, float32")
    print(table(rows, ["what", "median", "relative"]))


if __name__ == "__main__":
    main()
