"""JAX's ahead-of-time stages of a jitted function: ``jit(f).trace(*args)`` is a
:class:`Traced` (the staged graph, the shapes of the arguments and results), its ``lower()`` a
:class:`Lowered` (the optimised graph, pass statistics, memory plan) and that one's
``compile()`` a :class:`Compiled`, which runs on arguments shaped like the traced ones only.
``Wrapped`` is what ``jit`` returns, for type annotations as ``jax.stages.Wrapped``."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from fungraph.interpreters.memory import MemoryPlan
from fungraph.interpreters.optimize import PassStat, format_stats
from fungraph.ir import Graph, ShapedArray
from fungraph.viz import to_dot

if TYPE_CHECKING:
    from fungraph.jit import Compiled as Executable


@runtime_checkable
class Wrapped(Protocol):
    """A function ready to be traced, lowered and compiled: what ``jit`` returns."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    def trace(self, *args: Any, **kwargs: Any) -> Traced: ...

    def lower(self, *args: Any, **kwargs: Any) -> Lowered: ...


@dataclass(frozen=True)
class ArgInfo:
    """One array argument of a traced function: its type and whether it is donated."""

    aval: ShapedArray
    donated: bool

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self.aval.dtype


@dataclass(frozen=True)
class Traced:
    """``jit(f).trace(*args)``: the staged graph (JAX's ``jaxpr``), the arguments' ``args_info``
    and the results' ``out_info`` (pytrees of :class:`ArgInfo` and ``ShapeDtypeStruct``)."""

    jaxpr: Graph
    args_info: Any
    out_info: Any
    fun_name: str
    lowering: Callable[[], Lowered] = field(compare=False, repr=False)

    @property
    def in_avals(self) -> tuple[ShapedArray, ...]:
        return self.jaxpr.in_avals

    @property
    def out_avals(self) -> tuple[ShapedArray, ...]:
        return self.jaxpr.out_avals

    def lower(self) -> Lowered:
        return self.lowering()


@dataclass(frozen=True)
class Lowered:
    """What ``jit(f).lower(*args)`` shows: the optimised graph, pass statistics, memory plan;
    :meth:`compile` makes it callable (JAX's ahead-of-time API)."""

    compiled: Executable
    jitted: Any = field(default=None, compare=False, repr=False)
    signature: Hashable = field(default=None, compare=False, repr=False)
    args_info: Any = field(default=None, compare=False, repr=False)
    out_info: Any = field(default=None, compare=False, repr=False)

    @property
    def graph(self) -> Graph:
        """The graph the executable runs, its fusion regions as ``fusion`` equations: the
        optimised graph, or the engine's when it chooses its regions itself (OpenCL)."""
        return getattr(self.compiled.executable, "graph", self.compiled.graph)

    @property
    def staged(self) -> Graph:
        return self.compiled.staged

    @property
    def stats(self) -> tuple[PassStat, ...]:
        return self.compiled.stats

    @property
    def plan(self) -> MemoryPlan:
        return self.compiled.plan

    @property
    def in_avals(self) -> tuple[ShapedArray, ...]:
        return self.compiled.staged.in_avals

    @property
    def text(self) -> str:
        text = f"{self.graph}\n\n{format_stats(self.stats)}\n\nmemory plan: {self.plan.summary()}"
        describe = getattr(self.compiled.executable, "describe", None)
        return text + (f"\n\n{describe()}" if describe is not None else "")

    def as_dot(self) -> str:
        return to_dot(self.graph, self.plan)

    def as_text(self) -> str:
        """:attr:`text` (JAX's gives StableHLO; ours is the optimised graph and its plan)."""
        return self.text

    def compile(self) -> Compiled:
        """A callable for arguments shaped like the lowered ones, as ``jax.jit(f).lower(x).compile()``."""
        if self.jitted is None:
            raise ValueError("compile() needs a Lowered made by jit(f).lower(*args)")
        return Compiled(self)


def _shapes(signature: Hashable) -> tuple:
    in_tree, static_key, avals = signature[:3]  # type: ignore[index]
    return in_tree, static_key, tuple((a.shape, a.dtype) for a in avals)


def _show(signature: Hashable) -> str:
    _, static, avals = _shapes(signature)
    return ", ".join(f"{dt.name}{list(shape)}" for shape, dt in avals) + (f"; static {dict(static)}" if static else "")


class Compiled:
    """``jit(f).lower(*args).compile()``: runs the lowered executable on arguments with the
    lowered shapes, dtypes and structure, and refuses others (it never traces again)."""

    def __init__(self, lowered: Lowered) -> None:
        self.lowered = lowered

    @property
    def args_info(self) -> Any:
        return self.lowered.args_info

    @property
    def out_info(self) -> Any:
        return self.lowered.out_info

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        jitted = self.lowered.jitted
        if kwargs:
            args = (jitted.parent or jitted)._positional_call(args, kwargs)[1]
        key = jitted._signature(args)[3]
        if _shapes(key) != _shapes(self.lowered.signature):
            raise TypeError(f"jit({jitted.__name__}) was compiled for arguments ({_show(self.lowered.signature)}) "
                            f"but called with ({_show(key)})")
        return jitted(*args)

    def as_text(self) -> str:
        return self.lowered.text

    def __repr__(self) -> str:
        return f"Compiled({self.lowered.jitted.__name__})"
