"""``fungraph.config``: ``jax.config``'s interface (``update(name, value)``, attribute reads) over
the options that mean something here. Each option either does what JAX's does, is accepted
with no effect because fungraph already behaves that way, or refuses the values fungraph
cannot honour with the reason."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from fungraph import dtypes

_UNSET: Any = object()


class ThreadOption:
    """An option kept as attribute ``attr`` of ``holder``, a ``threading.local``: the class
    attribute is the process-wide value (``config.update``), an instance attribute the calling
    thread's override (a config context), as JAX's thread-local config states. Readers on hot
    paths read ``holder.attr`` directly: one attribute lookup."""

    def __init__(self, holder: threading.local, attr: str) -> None:
        self.holder, self.attr = holder, attr

    def get(self) -> Any:
        return getattr(self.holder, self.attr)

    @property
    def global_value(self) -> Any:
        return getattr(type(self.holder), self.attr)

    @global_value.setter
    def global_value(self, value: Any) -> None:
        setattr(type(self.holder), self.attr, value)

    def override(self, value: Any) -> Any:
        """Set this thread's value (``_UNSET``: follow the process-wide one); returns the previous
        override, for :meth:`override` to restore."""
        own = self.holder.__dict__
        previous = own.get(self.attr, _UNSET)
        if value is _UNSET:
            own.pop(self.attr, None)
        else:
            own[self.attr] = value
        return previous


#: The backends' names, registered by ``fungraph.backends`` (a layer above) when it is imported.
_PLATFORMS: list[str] = []


def register_platforms(names: tuple[str, ...]) -> None:
    _PLATFORMS[:] = names


def known_backends() -> tuple[str, ...]:
    return tuple(_PLATFORMS)


def _platforms(value: Any) -> str | None:
    """A comma-separated list of fungraph's backends (JAX's ``jax_platforms``)."""
    if value is None or value == "":
        return None
    names = [p.strip() for p in str(value).split(",")]
    unknown = [p for p in names if p not in known_backends()]
    if unknown:
        raise ValueError(f"jax_platforms={value!r}: fungraph has no platform {', '.join(map(repr, unknown))}; "
                         f"its backends are {', '.join(known_backends())} (chosen per function with "
                         "jit(..., backend=...))")
    return ",".join(names)


def _platform_name(value: Any) -> str | None:
    if value is not None and "," in str(value):
        raise ValueError(f"jax_platform_name takes one platform, got {value!r}")
    return _platforms(value)


def _one_of(option: str, allowed: tuple[Any, ...], why: str) -> Callable[[Any], Any]:
    """A checker accepting ``allowed`` values only; ``why`` says why the others are refused."""

    def check(value: Any) -> Any:
        if value not in allowed:
            raise NotImplementedError(f"{option}={value!r}: {why} (accepted: {', '.join(map(repr, allowed))})")
        return value

    return check


_PRECISIONS = (None, "default", "high", "highest", "fastest", "bfloat16", "tensorfloat32", "float32",
               "bfloat16_3x", "tensorfloat32_3x")


def _precision(value: Any) -> str | None:
    if value not in _PRECISIONS:
        raise ValueError(f"jax_default_matmul_precision={value!r}: expected one of {_PRECISIONS}")
    return value


class _FloatChecks(threading.local):
    """``jax_debug_nans``/``jax_debug_infs`` in the calling thread: which non-finite values an
    eager primitive's or a jitted function's output may not hold (read by
    :func:`fungraph.core.check_finite`)."""

    nans = False
    infs = False


FLOAT_CHECKS = _FloatChecks()


class _JitDisabled(threading.local):
    """``jax_disable_jit`` in the calling thread (``fungraph.disable_jit`` sets it for a block)."""

    on = False


JIT_DISABLED = _JitDisabled()
DISABLE_JIT = ThreadOption(JIT_DISABLED, "on")


class _CacheLimits:
    """``fungraph_cache_size``: how many entries each bounded cache keeps (compiled graphs,
    transformed graphs, a function's signatures) before it drops the least recently used."""

    size = 4096


CACHE_LIMITS = _CacheLimits()


class _NativeCpu:
    """``fungraph_native_cpu``: whether the CPU engine runs fused elementwise regions as native
    code built with the system C compiler (``fungraph.backends.native``; the numpy engine runs
    them when there is no compiler). The default comes from ``FUNGRAPH_NATIVE_CPU`` (``0``/``1``),
    else on."""

    on = os.environ.get("FUNGRAPH_NATIVE_CPU", "1").strip().lower() not in ("0", "false", "no", "off", "")


NATIVE_CPU = _NativeCpu()

#: Called when an option that compiled or traced graphs depend on changes (the native engine,
#: the promotion rules): ``jit`` registers its cache clearing here.
ON_TRACING_CHANGE: list[Callable[[], None]] = []


def _tracing_changed() -> None:
    for callback in ON_TRACING_CHANGE:
        callback()


def _native_cpu(value: Any) -> bool:
    if not isinstance(value, (bool, int)):
        raise ValueError(f"fungraph_native_cpu={value!r}: expected True or False")
    return bool(value)


class _ProcessWide:
    """A :class:`ThreadOption`'s interface over a fungraph option with no config context, kept
    as attribute ``name`` of ``holder`` (read there on hot paths)."""

    def __init__(self, holder: Any, name: str) -> None:
        self._holder, self._name = holder, name

    def get(self) -> Any:
        return getattr(self._holder, self._name)

    @property
    def global_value(self) -> Any:
        return self.get()

    @global_value.setter
    def global_value(self, value: Any) -> None:
        setattr(self._holder, self._name, value)

    def override(self, value: Any) -> Any:
        raise TypeError(f"{self._name} is set process-wide only, with fungraph.config.update")


class _RankPromotion(threading.local):
    """``jax_numpy_rank_promotion`` in the calling thread: "allow" broadcasts operands of
    different ranks as numpy does; "warn" and "raise" warn or refuse (read by the broadcasting
    shape rule)."""

    mode = "allow"


RANK_PROMOTION = _RankPromotion()


def _rank_promotion(value: Any) -> str:
    if value not in ("allow", "warn", "raise"):
        raise ValueError(f"jax_numpy_rank_promotion={value!r}: expected 'allow', 'warn' or 'raise'")
    return value


def _dtype_promotion(value: Any) -> str:
    if value not in ("standard", "strict"):
        raise ValueError(f"jax_numpy_dtype_promotion={value!r}: expected 'standard' or 'strict'")
    return value


def tracing_settings() -> tuple[Any, ...]:
    """The options in the calling thread that tracing a function depends on (beyond the x64
    mode): jit's caches key on them, so a thread in another mode never reuses a trace."""
    return RANK_PROMOTION.mode, dtypes.PROMOTION.mode


def _as_bool(value: Any) -> bool:
    return bool(value)


def _cache_size(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"fungraph_cache_size={value!r}: expected a positive int (entries per cache)")
    return value


#: JAX's debugging and placement options that fungraph accepts and records with no effect:
#: compiles are not logged, tracer leaks are found when a leaked value is used
#: (``UnexpectedTracerError``), there are no internal checks to enable, every transfer is allowed
#: (arrays live in host memory), the default device is the one CPU device, and compiled code
#: has its own caches (``FUNGRAPH_NATIVE_CACHE``, ``FUNGRAPH_OPENCL_CACHE_DIR``).
_RECORDED: dict[str, Any] = {
    "jax_log_compiles": False, "jax_check_tracer_leaks": False, "jax_enable_checks": False,
    "jax_explain_cache_misses": False, "jax_default_device": None, "jax_transfer_guard": None,
    "jax_transfer_guard_host_to_device": None, "jax_transfer_guard_device_to_host": None,
    "jax_transfer_guard_device_to_device": None, "jax_compilation_cache_dir": None,
    "jax_persistent_cache_min_compile_time_secs": 1.0, "jax_persistent_cache_min_entry_size_bytes": 0,
}
_GUARDS = (None, "allow", "log", "disallow", "log_explicit", "disallow_explicit")


def _recorded(name: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if name.startswith("jax_transfer_guard") and value not in _GUARDS:
            raise ValueError(f"{name}={value!r}: expected one of {_GUARDS}")
        return value

    return check


class _X64Option:
    """A :class:`ThreadOption`'s interface over the x64 mode, which :mod:`fungraph.dtypes`
    keeps with its own per-thread override."""

    get = staticmethod(dtypes.x64_enabled)

    @property
    def global_value(self) -> bool:
        return dtypes.x64_global()

    @global_value.setter
    def global_value(self, value: bool) -> None:
        dtypes.set_x64(value)

    def override(self, value: Any) -> Any:
        previous = dtypes.set_x64_override(None if value is _UNSET else value)
        return _UNSET if previous is None else previous


class _Values(threading.local):
    """The options fungraph only records (their values per thread, class attributes process-wide)."""


_VALUES = _Values()


@dataclass
class _Option:
    """One option: ``check`` validates and normalises a new value (raising when fungraph cannot
    honour it); ``setting`` holds it, process-wide and per thread; ``changes_tracing``: a new
    process-wide value empties the compiled-function caches."""

    check: Callable[[Any], Any]
    setting: ThreadOption | _X64Option | _ProcessWide
    changes_tracing: bool = False


def _plain(name: str, default: Any, check: Callable[[Any], Any]) -> tuple[str, _Option]:
    setattr(_Values, name, default)
    return name, _Option(check, ThreadOption(_VALUES, name))


def _options() -> dict[str, _Option]:
    recorded = [_plain(name, default, _recorded(name)) for name, default in _RECORDED.items()]
    return dict([
        ("jax_enable_x64", _Option(_as_bool, _X64Option())),
        _plain("jax_platforms", None, _platforms),
        _plain("jax_platform_name", None, _platform_name),
        _plain("jax_default_matmul_precision", None, _precision),
        ("jax_disable_jit", _Option(_as_bool, DISABLE_JIT)),
        ("jax_debug_nans", _Option(_as_bool, ThreadOption(FLOAT_CHECKS, "nans"))),
        ("jax_debug_infs", _Option(_as_bool, ThreadOption(FLOAT_CHECKS, "infs"))),
        ("jax_numpy_rank_promotion", _Option(_rank_promotion, ThreadOption(RANK_PROMOTION, "mode"), True)),
        ("jax_numpy_dtype_promotion", _Option(_dtype_promotion, ThreadOption(dtypes.PROMOTION, "mode"), True)),
        _plain("jax_default_prng_impl", "threefry2x32", _one_of(
            "jax_default_prng_impl", ("threefry2x32",), "fungraph.random implements threefry2x32 only")),
        _plain("jax_threefry_partitionable", True, _one_of(
            "jax_threefry_partitionable", (True,), "fungraph.random uses the partitionable counter layout only")),
        _plain("jax_traceback_filtering", "auto", _one_of(
            "jax_traceback_filtering", ("auto", "off", "tracebackhide", "remove_frames", "quiet_remove_frames"),
            "not a traceback filtering mode")),
        *recorded,
        ("fungraph_cache_size", _Option(_cache_size, _ProcessWide(CACHE_LIMITS, "size"))),
        ("fungraph_native_cpu", _Option(_native_cpu, _ProcessWide(NATIVE_CPU, "on"), True)),
    ])


class Config:
    """``jax.config`` for fungraph: ``config.update("jax_enable_x64", True)``, ``config.jax_enable_x64``,
    ``config.values``. Unknown names raise ``AttributeError`` listing the known ones.

    ``jax_enable_x64`` is JAX's dtype mode (default off, or the ``JAX_ENABLE_X64`` environment
    variable); ``update`` sets an option process-wide, and the config contexts (``enable_x64``,
    ``disable_jit``, ``debug_nans``, ...) set one for a block in the calling thread, as JAX's;
    ``jax_disable_jit`` is ``fungraph.disable_jit``; ``jax_numpy_rank_promotion`` ("allow",
    "warn", "raise") and ``jax_numpy_dtype_promotion`` ("standard", "strict") act as JAX's;
    ``jax_debug_nans``/``jax_debug_infs`` make every eager primitive and every jitted call check
    its outputs, as JAX's do. ``jax_platforms``/``jax_platform_name`` take fungraph's backend
    names and, like ``jax_default_matmul_precision``, ``jax_traceback_filtering`` and the options
    in ``_RECORDED``, are recorded with no effect (``jit(..., backend=)`` picks the backend,
    products use the operands' precision, tracebacks are never filtered). ``fungraph_cache_size``
    bounds each cache (compiled graphs, transformed graphs, each function's signatures; least
    recently used dropped first); ``fungraph_native_cpu`` switches the CPU engine's native code
    for fused regions (see docs/native.md); the others accept only the behaviour fungraph has.
    """

    _options: dict[str, _Option]

    def __init__(self) -> None:
        object.__setattr__(self, "_options", _options())

    def _option(self, name: str) -> _Option:
        options: dict[str, _Option] = self._options
        if name not in options:
            raise AttributeError(f"fungraph.config has no option {name!r} (unknown, or a JAX option fungraph does "
                                 f"not model); its options are: {', '.join(options)}")
        return options[name]

    def update(self, name: str, value: Any) -> None:
        """Set option ``name`` process-wide; raises when fungraph cannot honour ``value``."""
        option = self._option(name)
        value = option.check(value)
        changed = option.setting.global_value != value
        option.setting.global_value = value
        if changed and option.changes_tracing:
            _tracing_changed()

    def override(self, name: str, value: Any) -> Any:
        """Set option ``name`` in the calling thread only (a config context); returns the
        previous override, which ``override(name, previous)`` restores."""
        option = self._option(name)
        return option.setting.override(value if value is _UNSET else option.check(value))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._option(name).setting.get()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"set options with fungraph.config.update({name!r}, value)")

    @property
    def values(self) -> dict[str, Any]:
        """Every option's current value."""
        return {name: getattr(self, name) for name in self._options}

    def __dir__(self) -> list[str]:
        return ["update", "values", *self._options]

    def __repr__(self) -> str:
        return f"fungraph.config({self.values})"


config = Config()


@contextlib.contextmanager
def enable_x64(new_val: bool = True) -> Iterator[None]:
    """``jax.enable_x64``: the dtype mode for the block, in the calling thread only (other
    threads keep theirs, as JAX's thread-local config contexts do)."""
    previous = config.override("jax_enable_x64", new_val)
    try:
        yield
    finally:
        config.override("jax_enable_x64", previous)


@contextlib.contextmanager
def disable_x64() -> Iterator[None]:
    """``jax.experimental.disable_x64``: 32-bit mode for the block, in the calling thread."""
    with enable_x64(False):
        yield


class OptionContext:
    """One of JAX's config states as a context manager (``with jax.debug_nans(True):``): sets
    the option for the block in the calling thread and restores it after, as JAX's do (other
    threads keep theirs); ``.value`` reads the option. A boolean option called without a value
    is turned on."""

    def __init__(self, name: str, on_by_default: bool = False) -> None:
        self.name = name
        self.on_by_default = on_by_default

    @property
    def value(self) -> Any:
        return getattr(config, self.name)

    @contextlib.contextmanager
    def __call__(self, new_val: Any = None) -> Iterator[None]:
        value = True if new_val is None and self.on_by_default else new_val
        previous = config.override(self.name, value)
        try:
            yield
        finally:
            config.override(self.name, previous)

    def __repr__(self) -> str:
        return f"OptionContext({self.name!r})"


default_matmul_precision = OptionContext("jax_default_matmul_precision")
numpy_rank_promotion = OptionContext("jax_numpy_rank_promotion")
numpy_dtype_promotion = OptionContext("jax_numpy_dtype_promotion")
debug_nans = OptionContext("jax_debug_nans", on_by_default=True)
debug_infs = OptionContext("jax_debug_infs", on_by_default=True)
log_compiles = OptionContext("jax_log_compiles", on_by_default=True)
check_tracer_leaks = OptionContext("jax_check_tracer_leaks", on_by_default=True)
checking_leaks = check_tracer_leaks
enable_checks = OptionContext("jax_enable_checks", on_by_default=True)
explain_cache_misses = OptionContext("jax_explain_cache_misses", on_by_default=True)
default_device = OptionContext("jax_default_device")
default_prng_impl = OptionContext("jax_default_prng_impl")
threefry_partitionable = OptionContext("jax_threefry_partitionable", on_by_default=True)
transfer_guard = OptionContext("jax_transfer_guard")
transfer_guard_host_to_device = OptionContext("jax_transfer_guard_host_to_device")
transfer_guard_device_to_host = OptionContext("jax_transfer_guard_device_to_host")
transfer_guard_device_to_device = OptionContext("jax_transfer_guard_device_to_device")
