"""Write docs/numpy_coverage.md: every public function of numpy, numpy.linalg and numpy.fft,
whether fungraph.numpy has it, its derivative status and its batching status.

The statuses come from the op-record tables (a row named after the function, or
``<function>_<variant>``, means it is tested for values, derivatives, jit and vmap); functions
without a row are classified by the lists below. Run: ``python scripts/numpy_coverage.py``.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import numpy as np

import fungraph.numpy as fnp
from fungraph.testing.numpy_records import NUMPY_RECORDS
from fungraph.testing.op_records import OP_RECORDS

OUT = Path(__file__).resolve().parent.parent / "docs" / "numpy_coverage.md"

# Functions whose results are constants of concrete arguments (shapes, dtypes, grids): no
# derivative and nothing to batch.
CONCRETE = {
    "arange", "array", "asarray", "can_cast", "diag_indices", "dtype", "empty", "empty_like", "eye", "fftfreq",
    "finfo", "full", "full_like", "geomspace", "identity", "iinfo", "indices", "iscomplexobj", "isrealobj",
    "isscalar", "logspace", "ndim", "ones", "ones_like", "result_type", "rfftfreq", "shape", "size",
    "tri", "tril_indices", "triu_indices", "zeros", "zeros_like", "bartlett", "blackman", "hamming", "hanning",
    "broadcast_shapes", "diag_indices_from", "isdtype", "issubdtype", "iterable", "ix_",
    "tril_indices_from", "triu_indices_from", "asanyarray", "ascontiguousarray",
    "promote_types", "einsum_path", "mask_indices", "trim_zeros", "array_repr", "array_str", "printoptions",
    "get_printoptions", "set_printoptions", "load", "save", "savez", "frombuffer", "from_dlpack", "fromstring",
    "fromfile", "fromiter",
}
# Integer- or bool-valued (or piecewise-constant) functions: zero derivative by convention.
NON_DIFFERENTIABLE = {
    "all", "allclose", "any", "argmax", "argmin", "argpartition", "argsort", "array_equal", "array_equiv",
    "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "ceil", "count_nonzero", "digitize", "equal",
    "fix", "floor", "floor_divide", "greater", "greater_equal", "invert", "isclose", "isfinite", "isinf",
    "isnan", "isneginf", "isposinf", "less", "less_equal", "logical_and", "logical_not", "logical_or",
    "logical_xor", "matrix_rank", "nanargmax", "nanargmin", "not_equal", "ravel_multi_index", "rint", "round",
    "around", "round_", "searchsorted", "sign", "signbit", "trunc", "unravel_index", "divmod",
    "iscomplex", "isreal", "nonzero", "flatnonzero", "argwhere",
    "gcd", "lcm", "left_shift", "right_shift", "bitwise_left_shift", "bitwise_right_shift", "lexsort",
    "nextafter", "spacing", "packbits", "unpackbits", "bitwise_count",
}
# Functions with no op-record row whose values (real and complex), derivatives, jit and vmap are
# tested in tests/test_complex.py.
COMPLEX_TESTED = {"conj", "conjugate", "imag", "angle", "eig", "hfft", "ihfft"}
# Functions with no op-record row whose values (against numpy and JAX), jit, vmap (against a loop)
# and, where differentiable, derivatives to second order are tested in tests/test_numpy_{math,polynomials,
# statistics,indexing,api}.py.
DIRECTLY_TESTED = {
    "frexp", "nextafter", "spacing", "piecewise", "polyfit", "polydiv", "poly", "roots", "fromfunction",
    "histogram2d", "histogramdd", "apply_over_axes", "place", "put", "packbits", "unpackbits", "bitwise_count",
}


def _public_functions(module: object) -> list[str]:
    names = []
    for name in dir(module):
        if name.startswith("_"):
            continue
        obj = getattr(module, name)
        if isinstance(obj, type) or inspect.ismodule(obj) or not callable(obj):
            continue
        names.append(name)
    return sorted(names)


def _records() -> dict[str, list[bool]]:
    by_name: dict[str, list[bool]] = {}
    for rec in OP_RECORDS + NUMPY_RECORDS:
        by_name.setdefault(rec.name, []).append(rec.differentiable and "no_grad" not in rec.tags)
    return by_name


def _tested(name: str, records: dict[str, list[bool]], ours: object = None) -> list[bool]:
    """The rows testing ``name``: named after it (``name`` or ``name_variant``), or, for an alias
    (the same function object under another name, e.g. ``acos`` and ``arccos``), its target's."""
    found = []
    for rec_name, diffs in records.items():
        if rec_name == name or rec_name.startswith(name + "_"):
            found.extend(diffs)
    if not found and ours is not None and hasattr(ours, name):
        target = getattr(ours, name)
        for other in dir(ours):
            if other != name and getattr(ours, other, None) is target:
                found.extend(_tested(other, records))
    return found


def _status(name: str, has: bool, records: dict[str, list[bool]], ours: object = None) -> tuple[str, str, str]:
    if not has:
        return "no", "", ""
    tested = _tested(name, records, ours)
    if name in CONCRETE:
        return "yes", "n.a. (concrete)", "n.a."
    if name in COMPLEX_TESTED:
        return "yes", "differentiable (tested, complex)", "yes (tested)"
    if name in DIRECTLY_TESTED:
        deriv = "not differentiable" if name in NON_DIFFERENTIABLE else "differentiable"
        return "yes", deriv + " (tested)", "yes (tested)"
    if tested:
        deriv = "differentiable" if any(tested) else "not differentiable"
        if name in NON_DIFFERENTIABLE:
            deriv = "not differentiable"
        return "yes", deriv + " (tested)", "yes (tested)"
    deriv = "not differentiable" if name in NON_DIFFERENTIABLE else "differentiable"
    return "yes", deriv, "yes"


def _table(title: str, module: object, ours: object, records: dict[str, list[bool]]) -> tuple[list[str], int, int]:
    names = _public_functions(module)
    lines = [f"## {title}", "", "| function | fungraph | derivative | vmap |", "|---|---|---|---|"]
    have = 0
    for name in names:
        has = hasattr(ours, name)
        have += has
        present, deriv, batch = _status(name, has, records, ours)
        lines.append(f"| `{name}` | {present} | {deriv} | {batch} |")
    lines.append("")
    return lines, have, len(names)


def main() -> int:
    records = _records()
    sections = [("numpy", np, fnp), ("numpy.linalg", np.linalg, fnp.linalg), ("numpy.fft", np.fft, fnp.fft)]
    body: list[str] = []
    summary = ["| namespace | numpy functions | in fungraph | share |", "|---|---|---|---|"]
    for title, module, ours in sections:
        lines, have, total = _table(title, module, ours, records)
        body.extend(lines)
        summary.append(f"| `{title}` | {total} | {have} | {100 * have / max(total, 1):.0f}% |")
    head = [
        "# numpy coverage of `fungraph.numpy`",
        "",
        f"Generated by `scripts/numpy_coverage.py` against numpy {np.__version__}; do not edit by hand.",
        "",
        "*derivative*: `differentiable` (jvp, and vjp by transposition), `not differentiable` (integer,",
        "boolean or piecewise-constant results: zero tangents), `n.a.` (results do not depend on array",
        "values). *(tested)*: an op-record row checks values against numpy eagerly and staged, derivatives",
        "to second order against finite differences, jit, and vmap against a loop. Every function is built",
        "from primitives with batching rules, so *vmap* is `yes` wherever the function exists. An alias",
        "(`acos` for `arccos`, the same function object) shares its target's row.",
        "",
        "*(tested, complex)*: tested in `tests/test_complex.py` (values against numpy for complex64 and",
        "complex128, derivatives against finite differences and JAX, jit, vmap against a loop).",
        "The functions without a row that the family tests cover (`tests/test_numpy_math.py`, `_polynomials.py`,",
        "`_statistics.py`, `_indexing.py`, `_api.py`: `frexp`, `polyfit`, `roots`, `histogramdd`, `put`,",
        "`packbits`, ...) are marked *(tested)* on the same terms, their values checked against numpy and JAX.",
        "",
        "Complex dtypes (complex64, complex128) work in the arithmetic, exponential, logarithmic,",
        "trigonometric and hyperbolic functions, powers, `abs`, `sign`, `where`, `equal`/`not_equal`,",
        "`sum`/`prod`/`mean`, `dot`/`matmul`/`einsum`, the shape functions, `linalg.solve`, `det`,",
        "`slogdet`, `cholesky`, `eigh`, `svd`, `qr`, `linalg.eig` and `fft`, and in the ordering functions",
        "(`less`, `greater`, ..., `maximum`/`minimum`, `fmax`/`fmin`, `max`/`min`/`ptp`, `clip`,",
        "`sort`/`argsort`, `argmax`/`argmin`, `searchsorted`) in numpy's lexicographic order (real part,",
        "then imaginary part, a NaN propagating as numpy's does); derivatives follow JAX's convention (see",
        "docs/autodiff.md). `floor`, `ceil`, `mod`, `floor_divide` and `arctan2` refuse complex operands",
        "with a TypeError naming the dtype, as numpy does. Differences from numpy: `linalg.eig`/`eigvals`",
        "always return complex arrays, as in JAX (numpy returns real ones when every eigenvalue of a real",
        "matrix is real); the other `linalg` routines and most of the remaining functions take real",
        "operands only; the real transforms (`rfft*`, `ihfft`) refuse complex input and the n-dimensional",
        "transforms refuse repeated axes.",
        "",
        "The reductions take numpy's keywords: `where=` in `sum`, `prod`, `max`, `min`, `mean`, `var`,",
        "`std`, `all`, `any` and their `nan*` forms, `initial=` in `sum`, `prod`, `max` and `min` and",
        "theirs (`max`/`min` with `where=` need `initial=`, as in numpy), `out=None` only, and JAX's",
        "`correction=` (`var`, `std`) and `promote_integers=` (`sum`, `prod`); `nn.softmax`,",
        "`nn.log_softmax` and both `logsumexp`s take `where=` as in JAX (`tests/test_array_methods.py`,",
        "against numpy and JAX, gradients included). Traced values",
        "and device arrays have `jax.Array`'s methods (`x.cumsum()`, `x.sort()` returning a sorted copy,",
        "`x.real`, `x.nbytes`, `x << 1`, `divmod(x, y)`, ...); an eager result is a numpy array, so its",
        "methods are numpy's. JAX's ufuncs (`add`, `subtract`, `multiply`, `maximum`, `minimum`, the",
        "logical and bitwise ones, `logaddexp`, `logaddexp2`, `negative`) are `ufunc` objects with",
        "`outer`, `reduce`, `accumulate`, `at` (`inplace=False`, as in JAX) and `reduceat`, and",
        "`frompyfunc` makes one from any scalar function (`tests/test_ufunc.py`).",
        "",
        "## Summary",
        "",
        *summary,
        "",
    ]
    OUT.write_text("\n".join(head + body))
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
