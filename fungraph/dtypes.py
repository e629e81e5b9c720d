"""The dtypes fungraph supports, JAX's dtype modes (``jax_enable_x64``) and JAX's promotion
lattice between them.

Besides numpy's bool, signed/unsigned integers, floats and complex types, the narrow floats
of the ``ml_dtypes`` package (bfloat16 and the float8 family) are supported; numpy runs them
through ml_dtypes' ufuncs, and what those lack is computed in float32 and rounded
(:func:`compute_dtype`). With x64 off (JAX's default) the 64-bit types do not exist:
:func:`canonicalize` maps them to their 32-bit counterparts at every entry point.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from functools import cache
from typing import Any

import ml_dtypes
import numpy as np

bool_ = np.dtype(np.bool_)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
uint16 = np.dtype(np.uint16)
uint32 = np.dtype(np.uint32)
uint64 = np.dtype(np.uint64)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
complex64 = np.dtype(np.complex64)
complex128 = np.dtype(np.complex128)

#: ml_dtypes' 8-bit floats that JAX exports, by name (``jnp.float8_e4m3fn`` ...).
FLOAT8: dict[str, np.dtype] = {
    name: np.dtype(getattr(ml_dtypes, name))
    for name in ("float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
                 "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu")
    if hasattr(ml_dtypes, name)
}

SHORT_NAMES: dict[np.dtype, str] = {
    bool_: "bool",
    int8: "i8", int16: "i16", int32: "i32", int64: "i64",
    uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
    bfloat16: "bf16", float16: "f16", float32: "f32", float64: "f64",
    complex64: "c64", complex128: "c128",
    **{d: "f8" + name.removeprefix("float8") for name, d in FLOAT8.items()},
}
FROM_SHORT: dict[str, np.dtype] = {v: k for k, v in SHORT_NAMES.items()}
SUPPORTED: tuple[np.dtype, ...] = tuple(SHORT_NAMES)

#: Floats numpy has no native loops for: :func:`compute_dtype` runs what ml_dtypes lacks in float32.
EMULATED: frozenset[np.dtype] = frozenset({bfloat16, *FLOAT8.values()})

#: With x64 off, each 64-bit type is replaced by this one (JAX's ``canonicalize_dtype``).
_TO_32 = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}


# --- the x64 mode ---------------------------------------------------------------------------


def _env_flag(name: str, default: bool) -> bool:
    """A boolean environment variable read as JAX reads ``JAX_ENABLE_X64``."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    text = raw.strip().lower()
    if text in ("y", "yes", "t", "true", "on", "1"):
        return True
    if text in ("n", "no", "f", "false", "off", "0"):
        return False
    raise ValueError(f"invalid truth value {raw!r} for environment variable {name} (expected true/false, 1/0, "
                     "yes/no or on/off)")


class _X64(threading.local):
    """The per-thread override that ``enable_x64``/``disable_x64`` contexts set (None: use
    the process-wide value, which ``config.update`` sets)."""

    override: bool | None = None


_X64_GLOBAL = [_env_flag("JAX_ENABLE_X64", False)]
_X64_LOCAL = _X64()


def x64_enabled() -> bool:
    """Whether 64-bit types are on in the calling thread (JAX's ``config.enable_x64.value``)."""
    local = _X64_LOCAL.override
    return _X64_GLOBAL[0] if local is None else local


def x64_global() -> bool:
    """The process-wide mode (``config.update``'s), whatever this thread's override."""
    return _X64_GLOBAL[0]


def set_x64(value: bool) -> None:
    """Set the process-wide mode (``config.update("jax_enable_x64", value)``)."""
    _X64_GLOBAL[0] = bool(value)


def set_x64_override(value: bool | None) -> bool | None:
    """Set this thread's mode (None: follow the process-wide one); returns the previous override."""
    previous = _X64_LOCAL.override
    _X64_LOCAL.override = None if value is None else bool(value)
    return previous


def default_float() -> np.dtype:
    """The default floating dtype of the current mode (float64 with x64, else float32)."""
    return float64 if x64_enabled() else float32


def default_int() -> np.dtype:
    """The default integer dtype of the current mode (int64 with x64, else int32)."""
    return int64 if x64_enabled() else int32


def default_uint() -> np.dtype:
    return uint64 if x64_enabled() else uint32


def default_complex() -> np.dtype:
    return complex128 if x64_enabled() else complex64


def enabled() -> frozenset[np.dtype]:
    """The dtypes that exist in the current mode."""
    return ENABLED_IN_MODE[x64_enabled()]


#: The dtypes that exist with x64 on (True) and off (False).
ENABLED_IN_MODE = {True: frozenset(SUPPORTED), False: frozenset(SUPPORTED) - frozenset(_TO_32)}


# --- validation and canonicalisation -----------------------------------------------------------


def check(dtype: Any) -> np.dtype:
    """``dtype`` as a numpy dtype if fungraph supports it (in any mode), else a TypeError naming it."""
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype {dtype!r} not understood") from None
    if d in SHORT_NAMES:
        return d
    if d.byteorder not in "=|" and d.newbyteorder("=") in SHORT_NAMES:
        return d.newbyteorder("=")
    raise TypeError(f"fungraph does not support dtype {d}; supported dtypes are "
                    + ", ".join(str(s) for s in SUPPORTED))


_WARNING = ("Explicitly requested dtype {}{} is not available, and will be truncated to dtype {}. To enable more "
            "dtypes, set the jax_enable_x64 configuration option or the JAX_ENABLE_X64 shell environment variable. "
            "See https://github.com/jax-ml/jax#current-gotchas for more.")


#: Python's scalar types, which name the mode's default dtype of their kind: JAX truncates a
#: request for them without a warning (``zeros(3, float)`` is float32 with x64 off).
_PYTHON_TYPES = (int, float, complex)


def canonicalize(dtype: Any, requested_in: str | None = None, depth: int = 2) -> np.dtype:
    """The dtype the current mode uses for ``dtype``: the dtype itself with x64 on; with it off
    a 64-bit type becomes its 32-bit counterpart. ``requested_in`` (the function name, or ""
    for an unnamed request) marks an explicit request, which warns with JAX's text when
    truncated if the function was called from outside fungraph (``depth`` frames above this
    one); values converted implicitly (arrays passed in, Python scalars) do not warn."""
    d = check(dtype)
    if d in _TO_32 and not x64_enabled():
        narrow = _TO_32[d]
        python_type = any(dtype is t for t in _PYTHON_TYPES)
        if requested_in is not None and not python_type and not _called_from_fungraph(depth):
            where = f" requested in {requested_in}" if requested_in else ""
            warnings.warn(_WARNING.format(d.name, where, narrow.name), UserWarning, stacklevel=depth + 1)
        return narrow
    return d


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep

#: Code of wrappers that only pass a call on (``fungraph.numpy``'s result wrapper): the caller
#: of a requested dtype is looked for above them.
TRANSPARENT_CODE: set[Any] = set()


def _called_from_fungraph(depth: int) -> bool:
    """Whether the frame ``depth`` levels above the caller (past transparent wrappers) is
    fungraph's own code."""
    try:
        frame = sys._getframe(depth + 1)
    except ValueError:
        return False
    while frame is not None and frame.f_code in TRANSPARENT_CODE:
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith(_PACKAGE)


def parse_dtype(name: str) -> np.dtype:
    """Accept a short name (``f32``) or a numpy name (``float32``)."""
    if name in FROM_SHORT:
        return FROM_SHORT[name]
    return check(name)


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a numpy implementation computes ``dtype`` in when ml_dtypes has no loop for
    it: float32 for the emulated floats, ``dtype`` itself otherwise."""
    return float32 if dtype in EMULATED else dtype


# --- kinds -------------------------------------------------------------------------------------


def is_float(dtype: np.dtype) -> bool:
    d = np.dtype(dtype)
    return d.kind == "f" or d in EMULATED


def is_complex(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "c"


def is_inexact(dtype: np.dtype) -> bool:
    """Float or complex: the dtypes that carry tangents."""
    return is_float(dtype) or is_complex(dtype)


def is_int(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind in "iu"


def is_unsigned(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "u"


def is_bool(dtype: np.dtype) -> bool:
    return dtype == bool_


def finfo(dtype: Any) -> Any:
    """``numpy.finfo``, also for ml_dtypes' floats (``jnp.finfo``)."""
    return ml_dtypes.finfo(getattr(dtype, "dtype", dtype))


def complex_for(dtype: np.dtype) -> np.dtype:
    """The complex dtype with at least ``dtype``'s precision (float32 and narrower -> complex64)."""
    d = np.dtype(dtype)
    return complex128 if d in (float64, complex128) else complex64


def real_for(dtype: np.dtype) -> np.dtype:
    """The real dtype of a complex dtype's parts (complex64 -> float32); others unchanged."""
    d = np.dtype(dtype)
    return {complex64: float32, complex128: float64}.get(d, d)


def float_dtype_for(dtype: np.dtype) -> np.dtype:
    """The inexact dtype JAX gives transcendental functions, true division and means of
    ``dtype`` (its ``to_inexact_dtype``): inexact dtypes are kept, bool and integers of up to 32
    bits take float32 in both modes, 64-bit integers float64 (float32 with x64 off)."""
    if is_inexact(dtype):
        return dtype
    return float64 if dtype.itemsize == 8 and x64_enabled() else float32


def convert_values(x: Any, dtype: np.dtype) -> np.ndarray:
    """``x`` converted to ``dtype`` as XLA converts (``convert_element_type``): a complex value
    keeps its real part, and a float outside an integer dtype's range saturates to the nearer
    bound, NaN becoming 0 (numpy's cast is undefined there: ``256.`` as ``uint8`` gives 0)."""
    x = np.asarray(x)
    dtype = np.dtype(dtype)
    if is_complex(x.dtype) and not is_complex(dtype):
        x = x.real
    if not (is_float(x.dtype) and is_int(dtype)):
        with np.errstate(over="ignore"):
            return x.astype(dtype)
    if x.dtype.itemsize < 4:
        x = x.astype(float32)                                            # exactly, and wide enough for the bounds
    info = np.iinfo(dtype)
    above = x >= 2.0 ** (info.bits - (info.min < 0))
    below = x < float(info.min)
    inside = (x == x) & ~above & ~below
    if inside.all():
        return x.astype(dtype)
    out = np.where(inside, x, 0).astype(dtype)
    out[above] = info.max
    out[below] = info.min
    return out


# --- JAX's promotion lattice ----------------------------------------------------------------------

#: Weak types: Python scalars (and jit arguments passed as Python scalars) join at these nodes.
_WEAK = ("int*", "float*", "complex*")


class TypePromotionError(ValueError, TypeError):
    """Dtypes with no implicit promotion path (JAX's ``TypePromotionError``)."""


class _Promotion(threading.local):
    """``jax_numpy_dtype_promotion`` in the calling thread: "standard" (JAX's lattice) or
    "strict" (only weak types promote implicitly). The class attribute is the process-wide mode,
    an instance attribute a ``numpy_dtype_promotion`` context's (:mod:`fungraph._config` sets both)."""

    mode = "standard"


PROMOTION = _Promotion()


def promotion_mode() -> str:
    return PROMOTION.mode


def _lattice(x64: bool, strict: bool) -> dict[Any, tuple[Any, ...]]:
    """JAX's type promotion lattice (``jax._src.dtypes._type_promotion_lattice``): each node
    and the nodes directly above it."""
    i_, f_, c_ = _WEAK
    if strict:
        ints = (uint8, uint16, uint32, uint64, int8, int16, int32, int64)
        strong = (bool_, *ints, *FLOAT8.values(), bfloat16, float16, float32, float64, complex64, complex128)
        return {i_: (f_, *ints), f_: (c_, *FLOAT8.values(), bfloat16, float16, float32, float64),
                c_: (complex64, complex128), **{d: () for d in strong}}
    return {
        bool_: (i_,),
        i_: (uint8, int8),
        uint8: (int16, uint16), uint16: (int32, uint32),
        uint32: (int64, uint64) if x64 else (int32, uint64), uint64: (f_,),
        int8: (int16,), int16: (int32,), int32: (int64,), int64: (f_,),
        f_: (*FLOAT8.values(), bfloat16, float16, c_),
        **{d: () for d in FLOAT8.values()},
        bfloat16: (float32,), float16: (float32,), float32: (float64, complex64), float64: (complex128,),
        c_: (complex64,), complex64: (complex128,), complex128: (),
    }


@cache
def _upper_bounds(x64: bool, strict: bool) -> dict[Any, frozenset[Any]]:
    lattice = _lattice(x64, strict)
    bounds: dict[Any, frozenset[Any]] = {}

    def up(node: Any) -> frozenset[Any]:
        if node not in bounds:
            bounds[node] = frozenset({node}).union(*(up(n) for n in lattice[node]))
        return bounds[node]

    for node in lattice:
        up(node)
    return bounds


@cache
def _join(nodes: frozenset[Any], x64: bool, strict: bool = False) -> Any:
    """The least upper bound of ``nodes`` on the lattice, or a TypePromotionError when there is none."""
    bounds = _upper_bounds(x64, strict)
    common = frozenset.intersection(*(bounds[n] for n in nodes))
    least = [c for c in common if common <= bounds[c]]
    if len(least) != 1:
        names = ", ".join(sorted(n if isinstance(n, str) else n.name for n in nodes))
        if strict:
            raise TypePromotionError(
                f"Input dtypes ({names}) have no available implicit dtype promotion path when "
                "jax_numpy_dtype_promotion=strict. Try explicitly casting inputs to the desired output type, or set "
                "jax_numpy_dtype_promotion=standard.")
        raise TypePromotionError(f"dtypes {names} have no common type to promote to: JAX's promotion lattice does "
                                 "not join them (cast one explicitly, e.g. with .astype(jnp.float32))")
    return least[0]


def _node(dtype: np.dtype, weak: bool) -> Any:
    """``dtype``'s node on the lattice: a weak one's kind, except bool (JAX's weak bool is bool)."""
    if not weak or dtype.kind == "b":
        return dtype
    return _WEAK[0] if dtype.kind in "iu" else _WEAK[2] if dtype.kind == "c" else _WEAK[1]


def _weak_default(node: Any) -> np.dtype:
    if node == _WEAK[0]:
        return default_int()
    return default_complex() if node == _WEAK[2] else default_float()


def join(dtypes: Any, weak: Any = None) -> tuple[np.dtype, bool]:
    """JAX's promotion of ``dtypes`` (``weak[i]`` marks a weak type) in the current mode: the
    result dtype and whether it is weak (all inputs weak)."""
    dts = [check(d) for d in dtypes]
    weak = [False] * len(dts) if weak is None else list(weak)
    x64 = x64_enabled()
    nodes = frozenset(_node(d, w) for d, w in zip(dts, weak))
    if len(nodes) == 1 and not any(weak):
        return canonicalize(dts[0]), False
    top = _join(nodes, x64, promotion_mode() == "strict")
    if top in _WEAK:
        return _weak_default(top), True
    return canonicalize(top), False


def promote_types(a: Any, b: Any) -> np.dtype:
    """``jnp.promote_types``: both dtypes strong; like JAX's, the result is not canonicalised
    (``bool`` with ``int64`` is int64 in either mode)."""
    top = _join(frozenset(_PY_WEAK[t] if t is int or t is float or t is complex else check(t) for t in (a, b)),
                x64_enabled(), promotion_mode() == "strict")
    return _WEAK_WIDE[top] if top in _WEAK else top


_PY_WEAK = {int: _WEAK[0], float: _WEAK[1], complex: _WEAK[2]}
_WEAK_WIDE = {_WEAK[0]: int64, _WEAK[1]: float64, _WEAK[2]: complex128}


def is_weak(x: Any) -> bool:
    """A Python scalar (not a numpy scalar, not bool), or an array or traced value marked weak
    (a jit argument passed as a Python scalar, a host array JAX would type weakly)."""
    t = type(x)
    if t is int or t is float or t is complex:
        return True
    return getattr(x, "weak_type", False) is True


def _dtype_of(a: Any) -> np.dtype:
    if isinstance(a, bool):
        return bool_
    if isinstance(a, int):
        return int64
    if isinstance(a, float):
        return float64
    if isinstance(a, complex):
        return complex128
    d = getattr(a, "dtype", None)
    return d if isinstance(d, np.dtype) else np.asarray(a).dtype


def result_type(*args: Any) -> np.dtype:
    """JAX's ``result_type`` of arrays, tracers and Python scalars: Python scalars (and weak
    tracers) are weak, so they never widen an array's dtype."""
    first = getattr(args[0], "dtype", None) if args else None
    if first is not None and first in SHORT_NAMES and all(
            getattr(a, "dtype", None) == first and not is_weak(a) for a in args):
        return canonicalize(first)
    return join([_dtype_of(a) for a in args], [is_weak(a) for a in args])[0]


#: JAX's dtype of tangents and cotangents for integer and boolean values (a zero-size numpy
#: void type, ``jax.dtypes.float0``): ``jvp`` and ``vjp`` accept arrays of it where JAX gives or takes them.
float0 = np.dtype([("float0", np.void, 0)])


class extended(np.generic):  # noqa: N801  (jax.dtypes' name)
    """JAX's base of the dtypes numpy does not know (``jax.dtypes.extended``): only key dtypes here."""


class prng_key(extended):  # noqa: N801  (jax.dtypes' name)
    """The scalar type of every key dtype (``jax.dtypes.prng_key``): ``issubdtype(k.dtype, prng_key)``."""


class KeyDType:
    """The dtype of a typed key array (JAX's ``key<fry>``): each key is ``key_shape`` uint32 words
    of the ``impl`` generator. Not a numpy dtype: no primitive or backend sees it, since a key array
    is its uint32 words with a trailing axis (``fungraph._key_array``)."""

    type = prng_key
    kind = "V"

    def __init__(self, impl: str = "threefry2x32", tag: str = "fry", key_shape: tuple[int, ...] = (2,)) -> None:
        self.impl, self.tag, self.key_shape = impl, tag, key_shape

    @property
    def name(self) -> str:
        return f"key<{self.tag}>"

    @property
    def itemsize(self) -> int:
        return 4 * int(np.prod(self.key_shape))

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyDType) and other.impl == self.impl

    def __hash__(self) -> int:
        return hash(("KeyDType", self.impl))


#: The dtype of ``random.key``'s keys: threefry2x32, two uint32 words a key.
THREEFRY_KEY = KeyDType()


def canonicalize_dtype(dtype: Any, allow_extended_dtype: bool = False) -> Any:
    """``dtype`` as the current mode has it (``jax.dtypes.canonicalize_dtype``: float64 is
    float32 with x64 off); a key dtype only with ``allow_extended_dtype``."""
    if isinstance(dtype, KeyDType):
        if not allow_extended_dtype:
            raise ValueError(f"canonicalize_dtype: {dtype} is an extended dtype; pass allow_extended_dtype=True")
        return dtype
    return canonicalize(dtype)


def iinfo(int_type: Any) -> Any:
    """``ml_dtypes.iinfo`` of a dtype, type or array (``jax.dtypes.iinfo``)."""
    return ml_dtypes.iinfo(_dtype_of(int_type))


def _dtype_of(x: Any) -> np.dtype:
    """The dtype a dtype-like, a scalar type, an array or a Python scalar names."""
    if isinstance(x, (type, str, np.dtype)):
        return np.dtype(x)
    dtype = getattr(x, "dtype", None)
    return np.dtype(dtype) if dtype is not None else np.result_type(x)


def itemsize_bits(dtype: Any) -> int:
    """The bits of one element of ``dtype`` (``jax.dtypes.itemsize_bits``)."""
    return 8 * np.dtype(dtype).itemsize


def scalar_type_of(x: Any) -> type:
    """The Python scalar type of ``x``'s dtype: bool, int, float or complex."""
    kind = _dtype_of(x).kind
    return {"b": bool, "i": int, "u": int, "f": float, "c": complex, "V": float}[kind]


def issubdtype(arg1: Any, arg2: Any) -> bool:
    """``numpy.issubdtype`` that also knows the key dtypes and JAX's ``extended``/``prng_key``
    (``jnp.issubdtype(k.dtype, jax.dtypes.prng_key)``), and, as JAX's, counts bfloat16 and the
    float8 types as floating (their ml_dtypes scalar types sit outside numpy's hierarchy)."""
    if isinstance(arg1, KeyDType) or _is_extended_type(arg1):
        scalar = arg1.type if isinstance(arg1, KeyDType) else arg1
        if isinstance(arg2, KeyDType):
            return arg1 == arg2
        return isinstance(arg2, type) and issubclass(scalar, arg2)
    if isinstance(arg2, KeyDType) or _is_extended_type(arg2):
        return False
    scalar = _scalar_type(arg1)
    if scalar in _EMULATED_SCALARS:
        return _scalar_type(arg2) in {scalar, np.floating, np.inexact, np.number, np.generic}
    return bool(np.issubdtype(arg1, arg2))


_EMULATED_SCALARS = frozenset(d.type for d in EMULATED)


def _scalar_type(t: Any) -> type:
    """The numpy scalar type ``t`` names: an abstract one (``np.floating``) as it is."""
    return t if isinstance(t, type) and issubclass(t, np.generic) else np.dtype(t).type


def _is_extended_type(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, extended)
