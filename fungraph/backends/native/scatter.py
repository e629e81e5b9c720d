"""The CPU engine's ``scatter_add`` as native loops (fgscatter.h): the transpose of every gather
(an embedding's gradient, ``x[idx]``'s), ``.at[idx].add``, ``segment_sum`` and BCOO products.

numpy's ``np.add.at`` with trailing dimensions handles one update row at a time through its
generic ufunc machinery (about 25 ns an element, 140-190 ms for 200,000 rows of 32 float32
values). The C loop adds each row with a vector loop in index order, so every output element
receives its updates in the order ``np.add.at`` adds them: the same bits for every dtype.
One shared object holds the loops of every value and index type; it is built once and then
loaded from the disk cache, whatever the graph (no build per shape).

A scatter whose dtype has no loop (float16, bfloat16, float8) keeps the primitive's numpy rule.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph.backends.native.regions import native_enabled, returned
from fungraph.backends.native.toolchain import build
from fungraph.ir import Eqn, Graph

Lowering = Callable[..., Any]

#: Scatters run natively (``runs``); the tests read it to see the path taken.
NATIVE_SCATTER_STATS = {"runs": 0}

#: numpy value dtype -> (the loop's type suffix, C type, accumulation, elements per value).
#: Signed integers add in their unsigned type (wrapping as numpy's, without C's signed
#: overflow); bool ORs, as numpy's bool add; a complex number is two floats.
VALUE_TYPES: dict[np.dtype, tuple[str, str, str, int]] = {
    np.dtype(np.bool_): ("b", "uint8_t", "FG_SCATTER_OR", 1),
    np.dtype(np.int8): ("u8", "uint8_t", "FG_SCATTER_ADD", 1),
    np.dtype(np.uint8): ("u8", "uint8_t", "FG_SCATTER_ADD", 1),
    np.dtype(np.int16): ("u16", "uint16_t", "FG_SCATTER_ADD", 1),
    np.dtype(np.uint16): ("u16", "uint16_t", "FG_SCATTER_ADD", 1),
    np.dtype(np.int32): ("u32", "uint32_t", "FG_SCATTER_ADD", 1),
    np.dtype(np.uint32): ("u32", "uint32_t", "FG_SCATTER_ADD", 1),
    np.dtype(np.int64): ("u64", "uint64_t", "FG_SCATTER_ADD", 1),
    np.dtype(np.uint64): ("u64", "uint64_t", "FG_SCATTER_ADD", 1),
    np.dtype(np.float32): ("f32", "float", "FG_SCATTER_ADD", 1),
    np.dtype(np.float64): ("f64", "double", "FG_SCATTER_ADD", 1),
    np.dtype(np.complex64): ("f32", "float", "FG_SCATTER_ADD", 2),
    np.dtype(np.complex128): ("f64", "double", "FG_SCATTER_ADD", 2),
}

#: Index dtypes with loops of their own; other integer indices are converted to int64 first.
INDEX_TYPES = {np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}

def scatter_source() -> str:
    """The shared object's source: one loop per value type and index type."""
    kinds = sorted({(suffix, ct, acc) for suffix, ct, acc, _ in VALUE_TYPES.values()})
    lines = ['#include "fgscatter.h"']
    lines += [f"FG_SCATTER_TYPE({suffix}, {ct}, {acc})" for suffix, ct, acc in kinds]
    return "\n".join(lines) + "\n"


@functools.cache
def _library() -> ctypes.CDLL | None:
    """The loops, built once per process (from the disk cache after the first build); None
    when they cannot be built."""
    lib = build(scatter_source(), ("fgscatter.h",))
    if lib is None:
        return None
    for suffix, _, _, _ in VALUE_TYPES.values():
        for isuffix in INDEX_TYPES.values():
            fn = getattr(lib, f"fg_scatter_{suffix}_{isuffix}")
            fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 4
            fn.restype = None
    return lib


def runs_natively(eqn: Eqn) -> bool:
    """Whether the native engine runs ``eqn`` (a ``scatter_add``): a dtype with a loop."""
    return (eqn.primitive.name == "scatter_add" and np.dtype(eqn.outputs[0].aval.dtype) in VALUE_TYPES
            and native_enabled())


def native_scatters(graph: Graph) -> dict[int, Lowering]:
    """The lowering of each ``scatter_add`` of ``graph`` the native engine runs, by equation
    index; empty when the engine is off or the loops did not build."""
    found = [i for i, e in enumerate(graph.eqns) if runs_natively(e)]
    if not found:
        return {}
    lib = _library()
    if lib is None:
        return {}
    return {i: _lowering(lib, graph.eqns[i]) for i in found}


def _indices(idx: Any, dim: int) -> np.ndarray:
    """``idx`` as a contiguous int32 or int64 array; unsigned or narrow indices become int64,
    an unsigned one clamped to ``dim - 1`` first (so a huge one does not wrap negative)."""
    idx = np.asarray(idx)
    if idx.dtype in INDEX_TYPES:
        return np.ascontiguousarray(idx)
    if idx.dtype.kind == "u":
        idx = np.minimum(idx, max(dim - 1, 0))
    return np.ascontiguousarray(idx, dtype=np.int64)


def _lowering(lib: ctypes.CDLL, eqn: Eqn) -> Lowering:
    """The CPU rule ``run(out, upd, idx, axis=, shape=)`` calling the loop of ``eqn``'s types
    with the output seen as ``(outer, dim, inner)`` around the scattered axis."""
    dt = np.dtype(eqn.outputs[0].aval.dtype)
    suffix, _, _, width = VALUE_TYPES[dt]
    shape, axis = eqn.params["shape"], eqn.params["axis"]
    n = eqn.inputs[1].aval.size
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    dim = shape[axis]
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64)) * width
    loops = {isuffix: getattr(lib, f"fg_scatter_{suffix}_{isuffix}") for isuffix in INDEX_TYPES.values()}

    def run(out: np.ndarray | None, upd: Any, idx: Any, **_: Any) -> np.ndarray:
        index = _indices(idx, dim)
        values = upd if type(upd) is np.ndarray and upd.flags.c_contiguous and upd.dtype == dt else (
            np.ascontiguousarray(upd, dtype=dt))
        target = out if out is not None and out.flags.c_contiguous else np.empty(shape, dt)
        loops[INDEX_TYPES[index.dtype]](target.ctypes.data, values.ctypes.data, index.ctypes.data,
                                        outer, n, dim, inner)
        NATIVE_SCATTER_STATS["runs"] += 1
        return returned([out], [target])[0]

    return run
