"""Kernels that differ only in their slots and integer constants share one compiled function
(``fungraph/backends/opencl/sharing.py``): which literals become arguments, which keep kernels
apart, and that shared functions compute bit for bit what separate kernels did.
"""

from __future__ import annotations

import numpy as np
import pytest

import fungraph as fg
from fungraph.backends.opencl import building
from fungraph.backends.opencl.kernels.spec import KernelSpec
from fungraph.backends.opencl.program import ENGINE_STATS
from fungraph.backends.opencl.sharing import Function, share_functions
from fungraph.jit import clear_caches


def kernel(name: str, slots: tuple[int, ...], body: str, dtype: str = "float") -> KernelSpec:
    params = ", ".join(f"__global {dtype}* p{s}, long o{s}" for s in slots)
    source = f"__kernel void {name}({params}) {{\n{body}\n}}\n"
    return KernelSpec(name, source, [(s, np.dtype(np.float32 if dtype == "float" else np.int32)) for s in slots], [])


def loop(bound: int, p: str = "p3", o: str = "o3") -> str:
    return f"  for (int i = 0; i < {bound}; ++i) {p}[{o} + i * 2] = 1.0f;"


def test_kernels_differing_in_slots_and_constants_share_a_function() -> None:
    a = kernel("k1_fill", (3,), loop(784))
    b = kernel("k5_fill", (7,), loop(1024, "p7", "o7"))
    c = kernel("k9_fill", (2,), loop(784, "p2", "o2"))
    sources, functions = share_functions([a, b, c])
    assert len(sources) == 1
    assert functions == {"k1_fill": Function("k1_fill", (("int", 784),)),
                         "k5_fill": Function("k1_fill", (("int", 1024),)),
                         "k9_fill": Function("k1_fill", (("int", 784),))}
    assert "const int fg_lit0)" in sources[0] and "i < fg_lit0" in sources[0] and "i * 2]" in sources[0]


def test_identical_kernels_share_without_arguments() -> None:
    first, second = kernel("k1_fill", (3,), loop(8)), kernel("k2_fill", (4,), loop(8, "p4", "o4"))
    sources, functions = share_functions([first, second])
    assert sources == [kernel("k1_fill", (3,), loop(8)).source]
    assert functions["k2_fill"] == Function("k1_fill")


def test_equal_literals_take_one_argument_and_large_ones_a_long() -> None:
    body = "  p3[o3 + {0}] = p3[o3 + {0} + 1];\n  p3[o3 + {1}] = 0.0f;"
    sources, functions = share_functions([kernel("k1", (3,), body.format(10, 3_000_000_000)),
                                          kernel("k2", (3,), body.format(20, 4_000_000_000))])
    assert functions["k2"] == Function("k1", (("int", 20), ("long", 4_000_000_000)))
    assert sources[0].count("fg_lit0") == 3 and "const long fg_lit1" in sources[0]


def test_local_arrays_take_the_largest_size() -> None:
    body = "  __local float bl[{0}];\n  for (int i = 0; i < {0}; ++i) bl[i] = p3[o3 + i];\n  p3[o3] = bl[1];"
    sources, functions = share_functions([kernel("k1", (3,), body.format(784)), kernel("k2", (3,), body.format(1024))])
    assert len(sources) == 1 and "__local float bl[1024];" in sources[0] and "i < fg_lit0" in sources[0]
    assert functions["k2"].args == (("int", 1024),)


@pytest.mark.parametrize("body", [
    "  #pragma unroll {0}\n  for (int i = 0; i < 64; ++i) p3[o3 + i] = 1.0f;",      # a pragma needs a constant
    "  p3[o3] = p3[o3 + get_global_id(0) / {0}];",                                    # a divisor stays one
    "  p3[o3] = p3[o3 + (get_global_id(0) << {0})];",
    "  p3[o3] = {0}.5f;",                                                            # floats are not lifted
    "  p3[o3 + get_global_id({0})] = 1.0f;",                          # PoCL vectorises along a known dimension
])
def test_literals_that_must_stay_constant_keep_kernels_apart(body: str) -> None:
    sources, functions = share_functions([kernel("k1", (3,), body.format(2)), kernel("k2", (3,), body.format(4))])
    assert len(sources) == 2 and functions["k2"] == Function("k2")


def test_kernels_of_other_types_stay_apart() -> None:
    sources, _ = share_functions([kernel("k1", (3,), loop(8)), kernel("k2", (3,), loop(8), dtype="int")])
    assert len(sources) == 2


def two_layers(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, z: np.ndarray, w2: np.ndarray,
               b2: np.ndarray) -> tuple:
    return fg.nn.relu(x @ w1 + b1), fg.nn.relu(z @ w2 + b2)


def unshared(specs: list) -> tuple[list[str], dict[str, Function]]:
    return [s.source for s in specs], {s.name: Function(s.name) for s in specs}


@pytest.mark.usefixtures("require_opencl")
def test_shared_products_compute_what_separate_kernels_did(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two dense layers of different input widths (the MLP's 784 and 1024): one product
    function with the bias and ReLU epilogue, bit for bit the two kernels' results."""
    rng = np.random.default_rng(2)
    args = (rng.standard_normal((24, 40)), rng.standard_normal((40, 32)), rng.standard_normal(32),
            rng.standard_normal((24, 56)), rng.standard_normal((56, 32)), rng.standard_normal(32))
    args = tuple(a.astype(np.float32) for a in args)
    clear_caches()
    shared = ENGINE_STATS["kernels_shared"]
    f = fg.jit(two_layers, backend="opencl")
    got = [np.asarray(o) for o in f(*args)]
    assert ENGINE_STATS["kernels_shared"] > shared
    assert "fg_lit0" in f.lower(*args).compiled.executable.source
    want = two_layers(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=1e-5)
    clear_caches()
    monkeypatch.setattr(building, "share_functions", unshared)
    apart = [np.asarray(o) for o in fg.jit(two_layers, backend="opencl")(*args)]
    for g, a in zip(got, apart):
        np.testing.assert_array_equal(g, a)
    clear_caches()
