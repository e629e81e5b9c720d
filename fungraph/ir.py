"""The IR: abstract values, vars, literals, equations and graphs, plus the verifier and the text printer.

Everything here is immutable. A :class:`Graph` is closed: its constants travel with it.
Graphs compare and hash *structurally* (up to renaming of vars), which is what caches need.
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from fungraph import dtypes
from fungraph._caches import on_clear
from fungraph._config import CACHE_LIMITS

if TYPE_CHECKING:
    from fungraph.core import Primitive


_NO_AXES: frozenset = frozenset()


@dataclass(frozen=True)
class ShapedArray:
    """The abstract value of an array: its shape and dtype. Inside ``shard_map`` also the mesh
    axes the value varies over (``vma``, JAX's name), which types ignore when they compare."""

    shape: tuple[int, ...]
    dtype: np.dtype
    vma: frozenset = field(default=frozenset(), compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", dtypes.check(self.dtype))

    @classmethod
    def of_result(cls, shape: tuple[int, ...], dtype: np.dtype) -> ShapedArray:
        """The aval of an array: its numpy shape (a tuple of ints) and a dtype fungraph supports
        (a key of ``dtypes.SHORT_NAMES``), taken as they are (an eager operand's aval is read
        several times per operation)."""
        aval = object.__new__(cls)
        aval.__dict__.update(shape=shape, dtype=dtype, vma=_NO_AXES)
        return aval

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @cached_property
    def size(self) -> int:
        return math.prod(self.shape)

    @cached_property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __str__(self) -> str:
        return f"{dtypes.SHORT_NAMES[self.dtype]}[{','.join(map(str, self.shape))}]"

    __repr__ = __str__


class HasAval:
    """``shape``, ``dtype``, ``ndim``, ``size``, ``itemsize`` and ``nbytes`` of anything that has
    an ``aval``."""

    __slots__ = ()

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self.aval.dtype

    @property
    def ndim(self) -> int:
        return self.aval.ndim

    @property
    def size(self) -> int:
        return self.aval.size

    @property
    def itemsize(self) -> int:
        return self.aval.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.aval.nbytes


def aval_of(x: Any) -> ShapedArray:
    """The abstract value of a concrete array, Python scalar or anything with ``.aval``."""
    if hasattr(x, "aval"):
        return x.aval
    arr = np.asarray(x)
    return ShapedArray(arr.shape, dtypes.check(arr.dtype))


@dataclass(frozen=True, eq=False)
class Var:
    """A value defined exactly once in a graph; identity is the name."""

    aval: ShapedArray

    def __repr__(self) -> str:
        return f"Var({self.aval})"


@dataclass(frozen=True)
class Literal:
    """A scalar constant written inline in an equation."""

    value: bool | int | float | complex
    aval: ShapedArray

    def __str__(self) -> str:
        return f"{format_scalar(self.value)}:{self.aval}"

    @property
    def val(self) -> np.ndarray:
        """The value under JAX's name (``jax.extend.core.Literal.val``): the typed 0-d
        :attr:`array`, so that binding it gives the equation's types (a Python scalar would be
        a float64 operand)."""
        return self.array

    @cached_property
    def array(self) -> np.ndarray:
        """The value as a 0-d numpy array of the literal's dtype."""
        return np.asarray(self.value, dtype=self.aval.dtype)


Atom = Var | Literal


def format_scalar(value: bool | int | float | complex) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, complex):
        sign = "-" if math.copysign(1.0, value.imag) < 0 else "+"
        return f"{value.real!r}{sign}{abs(value.imag)!r}j"
    return repr(float(value))


class Params(Mapping[str, Any]):
    """A read-only, hashable mapping of an equation's static parameters."""

    __slots__ = ("_d", "_hash")

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._d: dict[str, Any] = dict(sorted((items or {}).items()))
        self._hash: int | None = None

    def __getitem__(self, key: str) -> Any:
        return self._d[key]

    def kwargs(self) -> dict[str, Any]:
        """The parameters as a plain dict for ``**`` unpacking (do not mutate)."""
        return self._d

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self._d.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Params) and self._d == other._d

    def __repr__(self) -> str:
        return f"Params({self._d!r})"


@dataclass(frozen=True, eq=False)
class Eqn:
    """``outputs = primitive[params](*inputs)``; ``source`` is the user's file:line."""

    primitive: Primitive
    inputs: tuple[Atom, ...]
    outputs: tuple[Var, ...]
    params: Params
    source: str | None = field(default=None, compare=False)

    @property
    def invars(self) -> tuple[Atom, ...]:
        """The inputs, under JAX's name (``JaxprEqn.invars``)."""
        return self.inputs

    @property
    def outvars(self) -> tuple[Var, ...]:
        """The outputs, under JAX's name (``JaxprEqn.outvars``)."""
        return self.outputs

    @cached_property
    def signature(self) -> int:
        """A small int naming (primitive, output types, params): equal for equal equations. The
        primitive takes part as an object, so two users' primitives of one name stay apart."""
        return intern_signature((self.primitive, tuple([o.aval for o in self.outputs]), self.params))

    @cached_property
    def subgraphs(self) -> tuple[Graph, ...]:
        """The sub-graphs this equation carries as parameters (branches, loop bodies, conditions)."""
        out: list[Graph] = []
        for v in self.params.values():
            if isinstance(v, Graph):
                out.append(v)
            elif isinstance(v, tuple):
                out.extend(g for g in v if isinstance(g, Graph))
        return tuple(out)

    @cached_property
    def effectful(self) -> bool:
        """Whether running this equation does more than compute its outputs (a debug print):
        its primitive's flag, or an effect inside a sub-graph it carries. The optimiser never
        removes, merges, folds or reorders such equations."""
        return self.primitive.effectful or any(q.effectful for g in self.subgraphs for q in g.eqns)

    @cached_property
    def kept_when_dead(self) -> bool:
        """Whether dead-code elimination must keep this equation although no output is read:
        an effect other than one observed through its outputs, here or in a sub-graph."""
        own = self.primitive.effectful and not self.primitive.effect_in_outputs
        return own or any(q.kept_when_dead for g in self.subgraphs for q in g.eqns)


# Structural keys refer to atoms by small ints: eqn outputs count up from 0 in order, graph
# inputs are -1, -2, ..., constants start at CONST_REF, literals at LITERAL_REF.
CONST_REF = -(1 << 40)
LITERAL_REF = -(1 << 50)
#: Interned equation signatures. Their keys hold params, sub-graphs among them, so the table
#: is emptied by ``clear_caches`` and when it outgrows its bound; ids come from a counter that
#: never restarts, so equal ids still mean equal keys (an emptied table costs cache misses only).
_SIGNATURES: dict[Any, int] = {}
_SIGNATURES_LOCK = threading.Lock()
_SIGNATURE_IDS = itertools.count()
#: Entries per ``fungraph_cache_size`` the intern table holds before it is emptied.
SIGNATURES_PER_CACHE_ENTRY = 16


def intern_signature(key: Any) -> int:
    """The process-wide id of ``key``; ids are never reused, so equal ids mean equal keys."""
    sid = _SIGNATURES.get(key)
    if sid is None:
        with _SIGNATURES_LOCK:
            sid = _SIGNATURES.get(key)
            if sid is None:
                if len(_SIGNATURES) >= CACHE_LIMITS.size * SIGNATURES_PER_CACHE_ENTRY:
                    _SIGNATURES.clear()
                sid = _SIGNATURES[key] = next(_SIGNATURE_IDS)
    return sid


@on_clear
def clear_signatures() -> None:
    with _SIGNATURES_LOCK:
        _SIGNATURES.clear()


def literal_ref(lit: Literal) -> int:
    return LITERAL_REF - intern_signature(("lit", format_scalar(lit.value), lit.aval))


def readonly(c: Any) -> np.ndarray:
    """``c`` as a read-only array: itself when it already is one, else a read-only copy (a
    graph's constants must not change under it)."""
    if _is_readonly(c):
        return c
    arr = np.array(c, copy=True)
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True, eq=False)
class Graph:
    """A closed, typed program in SSA form: ``outvars = eqns(invars, consts)``."""

    invars: tuple[Var, ...]
    constvars: tuple[Var, ...]
    consts: tuple[np.ndarray, ...]
    eqns: tuple[Eqn, ...]
    outvars: tuple[Atom, ...]

    def __post_init__(self) -> None:
        for name in ("invars", "constvars", "eqns", "outvars"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        consts = tuple(readonly(c) for c in self.consts)
        object.__setattr__(self, "consts", consts)
        if len(self.constvars) != len(self.consts):
            raise ValueError(f"{len(self.constvars)} constvars but {len(self.consts)} consts")

    @property
    def in_avals(self) -> tuple[ShapedArray, ...]:
        return tuple(v.aval for v in self.invars)

    @property
    def jaxpr(self) -> Graph:
        """The graph itself: a graph is closed, so it is both JAX's ``ClosedJaxpr`` and the
        ``Jaxpr`` that ``closed_jaxpr.jaxpr`` names (its ``constvars`` and ``consts`` together)."""
        return self

    @property
    def literals(self) -> tuple[np.ndarray, ...]:
        """The constants, under ``ClosedJaxpr.literals`` (JAX's other name for ``consts``)."""
        return self.consts

    @property
    def out_avals(self) -> tuple[ShapedArray, ...]:
        return tuple(v.aval for v in self.outvars)

    @cached_property
    def has_64bit_values(self) -> bool:
        """Whether a value of this graph (not of its sub-graphs) has a 64-bit type: one staged in
        x64 mode, or by the random samplers, which compute in 64-bit words in either mode."""
        wide = {"int64", "uint64", "float64", "complex128"}
        values = [*self.invars, *self.constvars, *(o for e in self.eqns for o in e.outputs)]
        return any(np.dtype(v.aval.dtype).name in wide for v in values)

    @cached_property
    def structural_key(self) -> tuple:
        """A key equal for two graphs exactly when they are equal up to renaming vars.

        Equations appear as ``(signature, *input refs)`` tuples of ints, so hashing and
        comparing keys runs at C speed; staging builds the key while it traces."""
        ids: dict[Atom, int] = {v: -1 - i for i, v in enumerate(self.invars)}
        ids.update({v: CONST_REF - k for k, v in enumerate(self.constvars)})
        rows = []
        n = 0
        for e in self.eqns:
            row = [e.signature]
            for a in e.inputs:
                r = ids.get(a)
                row.append(literal_ref(a) if r is None else r)
            rows.append(tuple(row))
            for o in e.outputs:
                ids[o] = n
                n += 1
        outs = tuple(literal_ref(a) if isinstance(a, Literal) else ids[a] for a in self.outvars)
        return self.key_from_rows(tuple(rows), outs)

    def key_from_rows(self, rows: tuple[tuple[int, ...], ...], outs: tuple[int, ...]) -> tuple:
        consts = tuple((c.dtype.str, c.shape, c.tobytes()) for c in self.consts)
        return (tuple(v.aval for v in self.invars), tuple(v.aval for v in self.constvars), consts, rows, outs)

    @cached_property
    def _hash(self) -> int:
        return hash(self.structural_key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Graph) or hash(self) != hash(other):
            return False
        return self.structural_key == other.structural_key

    def __str__(self) -> str:
        return format_graph(self)

    def pretty(self, source: bool = False) -> str:
        """The text form; with ``source=True`` each equation ends with its user source line."""
        return format_graph(self, source=source)

    def verify(self) -> None:
        verify(self)


def _is_readonly(c: Any) -> bool:
    return isinstance(c, np.ndarray) and not c.flags.writeable


class VerificationError(ValueError):
    """The graph breaks an IR invariant; the message names the equation."""


def _eqn_text(graph: Graph, index: int) -> str:
    return format_eqn_in(graph, index)


def _eqn_where(graph: Graph, index: int) -> str:
    return f"eqn {index} `{_eqn_text(graph, index)}`"


def verify(graph: Graph) -> None:
    """Check SSA, arity, literal shapes and that every output type follows the shape rule.
    Linear in the graph's size: an error's text (which names the equation) is made only when
    a check fails."""
    defined: set[Var] = set()

    def define(v: Any, where: Callable[[], str]) -> None:
        if not isinstance(v, Var):
            raise VerificationError(f"{where()}: expected a Var, got {v!r}")
        if v in defined:
            raise VerificationError(f"{where()}: var {v} is defined twice (SSA)")
        defined.add(v)

    def use(a: Any, where: Callable[[], str]) -> None:
        if isinstance(a, Literal):
            if a.aval.shape != ():
                raise VerificationError(f"{where()}: literal {a} is not a scalar")
            return
        if not isinstance(a, Var):
            raise VerificationError(f"{where()}: {a!r} is neither a Var nor a Literal")
        if a not in defined:
            raise VerificationError(f"{where()}: var used before it is defined")

    for v in graph.invars:
        define(v, lambda: "graph inputs")
    for v, c in zip(graph.constvars, graph.consts):
        define(v, lambda: "graph constants")
        if aval_of(c) != v.aval:
            raise VerificationError(f"constant of type {aval_of(c)} bound to var of type {v.aval}")
    for i, eqn in enumerate(graph.eqns):
        where = functools.partial(_eqn_where, graph, i)
        for a in eqn.inputs:
            use(a, where)
        prim = eqn.primitive
        if prim.arity is not None and len(eqn.inputs) != prim.arity:
            raise VerificationError(f"{where()}: {prim.name} takes {prim.arity} inputs, got {len(eqn.inputs)}")
        try:
            expected = prim.abstract_eval_tuple([a.aval for a in eqn.inputs], eqn.params)
        except Exception as err:
            raise VerificationError(f"{where()}: shape rule rejects the inputs: {err}") from err
        got = tuple(o.aval for o in eqn.outputs)
        if expected != got:
            raise VerificationError(
                f"{where()}: outputs have types {', '.join(map(str, got))} but {prim.name}'s "
                f"shape rule gives {', '.join(map(str, expected))}"
            )
        for sub in eqn.subgraphs:
            verify(sub)
        for o in eqn.outputs:
            define(o, where)
    for a in graph.outvars:
        use(a, lambda: "graph outputs")


# --- the text form (docs/ir.md); ir_text.parse reads it back ------------------------------

_RESERVED = {"in", "let", "lambda", "const", "inf", "nan", "if", "of", "is", "as", "or", "and", "not"}


def name_sequence() -> Iterator[str]:
    n = 0
    while True:
        s = ""
        k = n
        while True:
            s = chr(ord("a") + k % 26) + s
            k = k // 26 - 1
            if k < 0:
                break
        n += 1
        if s not in _RESERVED:
            yield s


class Namer:
    def __init__(self) -> None:
        self.names: dict[Var, str] = {}
        self.gen = name_sequence()

    def __call__(self, v: Var) -> str:
        if v not in self.names:
            self.names[v] = next(self.gen)
        return self.names[v]


def _format_value(v: Any, indent: int) -> str:
    if isinstance(v, Graph):
        return _format_graph(v, indent + 4, source=False)
    if isinstance(v, np.dtype):
        return v.name
    if isinstance(v, (bool, int, float)) or v is None:
        return "None" if v is None else format_scalar(v)
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, tuple):
        inner = ", ".join(_format_value(x, indent) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, ShapedArray):
        return str(v)
    name = getattr(v, "__name__", type(v).__name__)
    return f"<{name}>"


def _format_array(arr: np.ndarray) -> str:
    if arr.ndim == 0:
        return format_scalar(arr.item())
    return "[" + ", ".join(_format_array(x) for x in arr) + "]"


def format_eqn(eqn: Eqn, name: Namer, indent: int, source: bool) -> str:
    def atom(a: Atom) -> str:
        return str(a) if isinstance(a, Literal) else name(a)

    outs = " ".join(f"{name(o)}:{o.aval}" for o in eqn.outputs)
    params = ""
    if eqn.params:
        params = "[" + ", ".join(f"{k}={_format_value(v, indent)}" for k, v in eqn.params.items()) + "]"
    ins = " ".join(atom(a) for a in eqn.inputs)
    line = (f"{outs} = " if outs else "") + f"{eqn.primitive.name}{params} {ins}".rstrip()
    if source and eqn.source:
        line += f"    # {eqn.source}"
    return line


def _format_graph(g: Graph, indent: int, source: bool) -> str:
    name = Namer()
    pad = " " * indent
    ins = " ".join(f"{name(v)}:{v.aval}" for v in g.invars)
    consts = "".join(
        f"const {name(v)}:{v.aval} = {_format_array(np.asarray(c))} ; " for v, c in zip(g.constvars, g.consts)
    )
    lines = [f"{{ lambda {ins} ; {consts}let".replace("lambda  ;", "lambda ;")]
    lines += [f"{pad}    {format_eqn(e, name, indent + 4, source)}" for e in g.eqns]
    outs = ", ".join(str(a) if isinstance(a, Literal) else name(a) for a in g.outvars)
    lines.append(f"{pad}  in ({outs}{',' if len(g.outvars) == 1 else ''}) }}")
    return "\n".join(lines)


def format_graph(g: Graph, source: bool = False) -> str:
    return _format_graph(g, 0, source)


def format_eqn_in(g: Graph, index: int) -> str:
    """One equation of ``g`` printed with the names ``str(g)`` would give it."""
    name = Namer()
    for v in g.invars + g.constvars:
        name(v)
    for e in g.eqns[:index]:
        for o in e.outputs:
            name(o)
    return format_eqn(g.eqns[index], name, 0, False)
