"""Kernels that differ only in their slots and integer constants share one compiled function.

A CPU driver (PoCL) compiles every kernel function of a program at its first launch, 0.05-0.5 s
each, and kernel sources carry their shapes as constants, so the two forward products of an MLP
(784 and 1024 inputs, the same epilogue) or the updates of its two hidden weights were compiled
twice. Here kernels whose sources are equal once their slot parameters are renamed in order and
their integer literals masked become one function: the literals that differ become ``int`` (or
``long``) arguments the launches pass, ``__local`` array sizes take the largest, and kernels that
differ in a literal that must stay a constant (a ``#pragma``, a ``__constant`` table, the
dimension of ``get_global_id``, a divisor, whose runtime division would cost more than the
compile it saves) stay apart. Literal
arithmetic is exact in C, so a shared function computes what each kernel did.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from fungraph.backends.opencl.kernels.spec import KernelSpec

#: A C preprocessing number (``784``, ``0x1.8p+0f``, ``1e-3``); the plain decimal ones are the
#: integer literals a function may take as arguments.
_NUMBER = re.compile(r"(?<![\w.])\.?\d(?:[eEpP][+-]|[\w.])*")
#: A call whose argument must stay a constant: PoCL's work-group vectoriser reads the
#: dimension of ``get_global_id(0)`` and its kin.
_BUILTIN_CALL = re.compile(r"\b(?:get_\w+|barrier|mem_fence)\s*\(\s*$")
#: The line before a literal that sizes an array in a declaration (``__local float bl[``).
_DECLARED_SIZE = re.compile(r"^\s*(?:(?:__local|__private|const|volatile)\s+)*"
                            r"[A-Za-z_]\w*\s+\**\s*[A-Za-z_]\w*\s*\[\s*$")
_ARG = "fg_lit"


@dataclass(frozen=True)
class Function:
    """The kernel function ``name`` a spec launches, and the integer arguments it passes after
    its slots: ``(C type, value)`` each."""

    name: str
    args: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class _Parsed:
    skeleton: str                        # the source, slots renamed in order, integer literals masked
    values: tuple[int, ...]              # its integer literals
    spans: tuple[tuple[int, int], ...]   # where each lies in the source


def _parse(spec: KernelSpec) -> _Parsed:
    rename = {spec.name: "KERNEL"}
    for i, (slot, _) in enumerate(spec.slots):
        rename[f"p{slot}"], rename[f"o{slot}"] = f"p{i}", f"o{i}"
    src = spec.source
    ints = [m for m in _NUMBER.finditer(src) if m.group(0).isdigit()]
    masked, last = [], 0
    for m in ints:
        masked += [src[last:m.start()], "#"]
        last = m.end()
    masked.append(src[last:])
    names = re.compile(r"\b(?:" + "|".join(map(re.escape, rename)) + r")\b")
    skeleton = names.sub(lambda m: rename[m.group(0)], "".join(masked))
    return _Parsed(skeleton, tuple(int(m.group(0)) for m in ints), tuple(m.span() for m in ints))


def _kind(src: str, at: int) -> str:
    """What the literal at ``at`` may become: an argument, an array size (the largest of the
    kernels sharing the function), or nothing (it must be the same)."""
    line_start = src.rfind("\n", 0, at) + 1
    line_end = src.find("\n", at)
    line = src[line_start:line_end if line_end >= 0 else len(src)]
    before = src[line_start:at]
    if line.lstrip().startswith("#") or "__constant" in line or "__attribute__" in line or "case " in before:
        return "fixed"
    if _DECLARED_SIZE.match(before):
        return "size"
    if before.rstrip().endswith(("/", "%", "/=", "%=", "<<", ">>", "<<=", ">>=")) or _BUILTIN_CALL.search(before):
        return "fixed"
    return "lift"


def share_functions(specs: Sequence[KernelSpec]) -> tuple[list[str], dict[str, Function]]:
    """The sources of the distinct kernel functions of ``specs`` (in order) and the function
    each spec launches, by spec name."""
    parsed = [_parse(spec) for spec in specs]
    alike: dict[str, list[int]] = {}
    for i, p in enumerate(parsed):
        alike.setdefault(p.skeleton, []).append(i)
    groups: list[tuple[list[int], tuple[str, ...]]] = []
    for members in alike.values():
        kinds = tuple(_kind(specs[members[0]].source, start) for start, _ in parsed[members[0]].spans) \
            if len(members) > 1 else ()
        split: dict[tuple[int, ...], list[int]] = {}
        for i in members:
            split.setdefault(tuple(v for v, k in zip(parsed[i].values, kinds) if k == "fixed"), []).append(i)
        groups.extend((group, kinds) for group in split.values())
    sources: list[str] = []
    functions: dict[str, Function] = {}
    for members, kinds in sorted(groups, key=lambda g: g[0][0]):
        first = specs[members[0]]
        shared = None
        if len(members) > 1 and _ARG not in first.source:
            shared = _shared_source(first, parsed[members[0]], kinds, [parsed[i].values for i in members])
        if shared is None:
            for i in members:
                sources.append(specs[i].source)
                functions[specs[i].name] = Function(specs[i].name)
            continue
        source, lifted = shared
        sources.append(source)
        for i in members:
            args = tuple((ctype, parsed[i].values[j]) for j, ctype in lifted)
            functions[specs[i].name] = Function(first.name, args)
    return sources, functions


def _shared_source(first: KernelSpec, parsed: _Parsed, kinds: tuple[str, ...],
                   values: list[tuple[int, ...]]) -> tuple[str, list[tuple[int, str]]] | None:
    """``first``'s source with the literals that differ among ``values`` (one row per kernel)
    made arguments or sized to the largest, and the lifted ``(literal index, C type)``; None
    when its signature is not where it should be."""
    src = first.source
    out, last, lifted = [], 0, []
    columns: dict[tuple[int, ...], int] = {}      # literals equal in every kernel share an argument
    for j, (kind, (start, end)) in enumerate(zip(kinds, parsed.spans)):
        column = [row[j] for row in values]
        if len(set(column)) == 1:
            continue
        out.append(src[last:start])
        if kind == "size":
            out.append(str(max(column)))
        else:
            arg = columns.setdefault(tuple(column), len(columns))
            if arg == len(lifted):
                lifted.append((j, "int" if max(abs(v) for v in column) < 2**31 else "long"))
            out.append(f"{_ARG}{arg}")
        last = end
    out.append(src[last:])
    source = "".join(out)
    signature = re.search(rf"__kernel\s+void\s+{re.escape(first.name)}\s*\(", source)
    if signature is None:
        return None
    if lifted:
        head = source.index(")", signature.end())
        params = ", ".join(f"const {ctype} {_ARG}{a}" for a, (_, ctype) in enumerate(lifted))
        sep = "" if source[head - 1] == "(" else ", "
        source = source[:head] + sep + params + source[head:]
    return source, lifted
