"""The CPU engine's generated program (``CpuExecutable.run`` from its second call without
``into``): the same values and buffers as the interpreted first call, for every kind of output."""

from __future__ import annotations

import numpy as np

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from fungraph.backends.cpu import ENGINE_STATS


def _program(x, y, big):
    vals, idx = lax.top_k(x * 2.0 + y, 3)            # a primitive with several results
    s = fnp.sum(fnp.tanh(x), axis=1)
    return x, 7.0, vals, idx, s, s, big * 0.5 + 1.0  # an input, a constant, a repeated output, a large output


def test_the_generated_program_gives_the_interpreted_calls_values_and_recycles_large_outputs() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 8)).astype(np.float32)
    y = rng.standard_normal((5, 8)).astype(np.float32)
    big = rng.standard_normal(300_000).astype(np.float32)  # 1.2 MB: recycled (RECYCLE_BYTES)
    f = fg.jit(_program)
    outs = [f(x, y, big) for _ in range(3)]
    exe = f.lower(x, y, big).compiled.executable
    assert callable(exe._idle[0].run_step)
    want = [x, 7.0, *(np.asarray(a) for a in _program_numpy(x, y, big))]
    for out in outs:
        assert len(out) == 7
        for got, w in zip(out, want[:2] + want[2:4] + [want[4], want[4], want[5]]):
            np.testing.assert_allclose(np.asarray(got), np.asarray(w), rtol=1e-6, atol=1e-6)
        assert out[0] is not x and not np.shares_memory(out[4], out[5])
    del outs, out, got
    before = ENGINE_STATS["output_allocations"]
    r = f(x, y, big)
    ptr = r[6].ctypes.data
    del r
    r = f(x, y, big)
    assert r[6].ctypes.data == ptr                   # the large output's buffer came back
    assert ENGINE_STATS["output_allocations"] - before == 2 * (exe.allocations_per_call - 1)


def _program_numpy(x, y, big):
    z = x * 2.0 + y
    idx = np.argsort(-z, axis=1, kind="stable")[:, :3]
    return np.take_along_axis(z, idx, axis=1), idx, np.tanh(x).sum(axis=1), big * np.float32(0.5) + 1.0
