"""fgmath.h's functions in a vectorised single-thread C loop over 1M elements against numpy's
ufuncs (the numpy engine's implementation), float32 and float64, in ns per element. Each time is
the best of several runs: on a shared machine other work only ever adds time.

    python benchmarks/bench_native_math.py [--quick] [--flags "-O3 -march=native ..."]

Built as the native engine builds its regions: with its compiler (``$CC``, else ``cc`` or
``gcc``) and its flags (``--flags`` replaces them); with the engine off
(``FUNGRAPH_NATIVE_CPU=0``) or no compiler, there is nothing to measure.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from fungraph.backends.native import find_compiler, native_enabled
from fungraph.backends.native.toolchain import FLAGS as ENGINE_FLAGS
from fungraph.backends.native.toolchain import HEADER_DIR

#: the engine's flags, less the two that make a shared object (added when building)
FLAGS = " ".join(f for f in ENGINE_FLAGS if f not in ("-fPIC", "-shared"))


def _logistic(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


def _erf(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.frompyfunc(math.erf, 1, 1)(x)).astype(x.dtype)


#: name -> (numpy's function, argument range sampled uniformly)
FUNCTIONS = {
    "exp": (np.exp, (-50.0, 50.0)), "expm1": (np.expm1, (-5.0, 5.0)), "exp2": (np.exp2, (-50.0, 50.0)),
    "log": (np.log, (1e-3, 1e3)), "log1p": (np.log1p, (0.0, 10.0)), "log2": (np.log2, (1e-3, 1e3)),
    "log10": (np.log10, (1e-3, 1e3)), "tanh": (np.tanh, (-5.0, 5.0)), "sinh": (np.sinh, (-5.0, 5.0)),
    "cosh": (np.cosh, (-5.0, 5.0)), "logistic": (_logistic, (-10.0, 10.0)), "erf": (_erf, (-3.0, 3.0)),
    "sin": (np.sin, (-100.0, 100.0)), "cos": (np.cos, (-100.0, 100.0)), "tan": (np.tan, (-100.0, 100.0)),
    "sin_small": (np.sin, (-100.0, 100.0)), "cos_small": (np.cos, (-100.0, 100.0)),
    "tan_small": (np.tan, (-100.0, 100.0)), "cbrt": (np.cbrt, (-100.0, 100.0)),
    "atan": (np.arctan, (-10.0, 10.0)), "asin": (np.arcsin, (-1.0, 1.0)), "acos": (np.arccos, (-1.0, 1.0)),
    "sqrt": (np.sqrt, (0.0, 100.0)), "pow": (np.power, (0.0, 100.0)),
}
#: pow's exponents
POW_RANGE = (-3.0, 3.0)


def best_time(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` calls, after one warm-up call, in seconds."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def build(flags: str, names: list[str], build_dir: Path) -> ctypes.CDLL:
    """One exported loop per function and dtype, compiled with ``flags``."""
    lines = ['#include "fgmath.h"']
    for name in names:
        for ctype, suffix in (("double", "f64"), ("float", "f32")):
            arg = "x[i], p[i]" if name == "pow" else "x[i]"
            lines.append(f"void b_{name}_{suffix}(long n, const {ctype} *restrict x, const {ctype} *restrict p,\n"
                         f"              {ctype} *restrict y) {{\n"
                         f"#pragma omp simd\n    for (long i = 0; i < n; i++) y[i] = fg_{name}_{suffix}({arg});\n}}")
    src, lib = build_dir / "bench.c", build_dir / "libbench.so"
    src.write_text("\n".join(lines) + "\n")
    compiler = find_compiler()
    if compiler is None:
        sys.exit("no C compiler ($CC, cc or gcc)")
    subprocess.run([*compiler.command, *flags.split(), "-shared", "-fPIC", "-I", str(HEADER_DIR), str(src), "-o",
                    str(lib), "-lm"], check=True)
    return ctypes.CDLL(str(lib))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="100k elements, fewer repeats")
    ap.add_argument("--flags", default=FLAGS)
    ap.add_argument("names", nargs="*", default=list(FUNCTIONS))
    args = ap.parse_args()
    if not native_enabled():
        print("native engine off (FUNGRAPH_NATIVE_CPU=0) or no C compiler found: nothing to measure")
        return
    n = 100_000 if args.quick else 1_000_000
    repeat = 3 if args.quick else 15
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        lib = build(args.flags, args.names, Path(tmp))
        print(f"{n} elements, one thread, {' '.join(find_compiler().command)} {args.flags}, best of {repeat}")
        print("| function | dtype | fgmath ns/elem | numpy ns/elem | speedup |")
        print("|---|---|---|---|---|")
        for name in args.names:
            ref, (lo, hi) = FUNCTIONS[name]
            for dtype, suffix in ((np.float32, "f32"), (np.float64, "f64")):
                x = rng.uniform(lo, hi, n).astype(dtype)
                p = rng.uniform(*POW_RANGE, n).astype(dtype)
                args = (x, p) if name == "pow" else (x,)
                y = np.empty_like(x)
                fn = getattr(lib, f"b_{name}_{suffix}")
                fn.restype = None
                ptrs = (ctypes.c_long(n), *(ctypes.c_void_p(a.ctypes.data) for a in (x, p, y)))
                ours = best_time(lambda: fn(*ptrs), repeat)
                theirs = best_time(lambda: ref(*args), 1 if name == "erf" else repeat)
                print(f"| {name} | {suffix} | {ours / n * 1e9:.2f} | {theirs / n * 1e9:.2f} | {theirs / ours:.1f}x |")


if __name__ == "__main__":
    main()
