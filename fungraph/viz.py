"""Pictures of graphs and memory plans, written by the library itself (no plotting dependency).

* :func:`to_dot`: Graphviz text for any graph; with a memory plan each node also shows its
  memory block, coloured by block, with pinned values (inputs, constants, outputs) drawn
  distinctly. Sub-graphs held in parameters (``jit_call``, ``remat``, ...) become clusters.
* :func:`render_dot`: that text as an SVG/PNG/PDF picture through Graphviz's ``dot`` program.
* :func:`memory_timeline_svg`: a memory plan as a standalone SVG: one rectangle per arena
  buffer over (execution steps) x (arena bytes), with the liveness lower bound and the arena.
* :func:`pass_report`: equations and bytes before and after each optimiser pass.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

from fungraph.interpreters.memory import ALIGNMENT, MemoryPlan, Placement
from fungraph.interpreters.optimize import PassStat, format_stats
from fungraph.ir import Graph, Literal, Var, name_sequence

_PALETTE = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
            "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f")

INSTALL_HINT = "install Graphviz with `apt-get install graphviz` (Debian/Ubuntu) or `brew install graphviz` (macOS)"


def var_names(graph: Graph) -> dict[Var, str]:
    """The names ``str(graph)`` gives the top-level vars (inputs, constants, then outputs in order)."""
    gen = name_sequence()
    names: dict[Var, str] = {}
    for v in (*graph.invars, *graph.constvars, *(o for e in graph.eqns for o in e.outputs)):
        if v not in names:
            names[v] = next(gen)
    return names


# --- Graphviz text ----------------------------------------------------------------------


def _dot_quote(text: str) -> str:
    """A double-quoted DOT string; newlines in ``text`` become centred line breaks."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _param_text(key: str, value: object) -> str:
    if isinstance(value, Graph):
        return f"{key}=<graph of {len(value.eqns)} eqns>"
    if isinstance(value, str):
        return f"{key}={value!r}"
    if isinstance(value, np.dtype):
        return f"{key}={value.name}"
    if isinstance(value, (bool, int, float, tuple)) or value is None:
        return f"{key}={value}"
    return f"{key}=<{getattr(value, '__name__', type(value).__name__)}>"


def _params_text(params: Mapping[str, object], limit: int = 48) -> str:
    parts = [_param_text(k, v) for k, v in params.items()]
    text = ", ".join(parts)
    if not text:
        return ""
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"[{text}]"


class _DotWriter:
    """Writes one graph (and, recursively, the graphs in its parameters) as DOT statements."""

    def __init__(self, plan: MemoryPlan | None, nested: bool) -> None:
        self.plan = plan
        self.nested = nested
        self.lines: list[str] = []
        self.block_colours: dict[int, str] = {}

    def block_attrs(self, v: Var) -> str:
        p = self._placement(v)
        if p is None:
            return ""
        if p.kind == "pinned":
            return ', style="filled,bold", fillcolor="#ffffff", peripheries=2'
        colour = self.block_colours.setdefault(p.offset, _PALETTE[len(self.block_colours) % len(_PALETTE)])
        style = '"filled,dashed"' if p.kind == "view" else "filled"
        return f', style={style}, fillcolor="{colour}"'

    def block_label(self, v: Var, names: dict[Var, str]) -> str:
        p = self._placement(v)
        if p is None:
            return ""
        if p.kind == "pinned":
            return "\npinned"
        if p.kind in ("inplace", "view") and p.origin is not None:
            of = names.get(p.origin, "its input")
            return f"\nblock @{p.offset} ({p.kind} of {of})"
        return f"\nblock @{p.offset} ({p.kind}, {p.size} B)"

    def _placement(self, v: Var) -> Placement | None:
        if self.plan is None:
            return None
        return self.plan.placements.get(v)

    def graph(self, graph: Graph, prefix: str, indent: str) -> list[str]:
        """Write ``graph``'s nodes and edges; returns the node ids it wrote (first one first)."""
        names = var_names(graph)
        ids: dict[Var, str] = {}
        written: list[str] = []

        def node(node_id: str, attrs: str) -> None:
            self.lines.append(f"{indent}{node_id} [{attrs}];")
            written.append(node_id)

        for i, v in enumerate(graph.invars):
            ids[v] = f"{prefix}in{i}"
            label = f"input {i}: {names[v]}\n{v.aval}{self.block_label(v, names)}"
            node(ids[v], f"shape=invhouse, label={_dot_quote(label)}{self.block_attrs(v)}")
        for i, v in enumerate(graph.constvars):
            ids[v] = f"{prefix}const{i}"
            label = f"const {i}: {names[v]}\n{v.aval}{self.block_label(v, names)}"
            node(ids[v], f"shape=box3d, label={_dot_quote(label)}{self.block_attrs(v)}")
        for i, e in enumerate(graph.eqns):
            node_id = f"{prefix}e{i}"
            operands = " ".join(str(a) if isinstance(a, Literal) else names.get(a, "?") for a in e.inputs)
            outs = ", ".join(names[o] for o in e.outputs)
            head = (f"{outs} = " if outs else "") + f"{e.primitive.name}{_params_text(e.params)} {operands}".rstrip()
            if e.outputs:
                out = e.outputs[0]
                types = ", ".join(str(o.aval) for o in e.outputs)
                label = f"{head}\n{types}{self.block_label(out, names)}"
                node(node_id, f"shape=box, label={_dot_quote(label)}{self.block_attrs(out)}")
            else:
                node(node_id, f"shape=note, label={_dot_quote(head)}")
            for o in e.outputs:
                ids[o] = node_id
            for a in dict.fromkeys(a for a in e.inputs if isinstance(a, Var)):
                if a in ids:
                    self.lines.append(f"{indent}{ids[a]} -> {node_id};")
            if self.nested:
                self._clusters(e.params, node_id, indent)
        for i, a in enumerate(graph.outvars):
            out_id = f"{prefix}out{i}"
            label = f"output {i}" if isinstance(a, Var) else f"output {i} = {a}"
            node(out_id, f"shape=house, label={_dot_quote(label)}, peripheries=2")
            if isinstance(a, Var) and a in ids:
                self.lines.append(f"{indent}{ids[a]} -> {out_id};")
        return written

    def _clusters(self, params: Mapping[str, object], owner: str, indent: str) -> None:
        for key, value in params.items():
            if not isinstance(value, Graph):
                continue
            cluster = f"cluster_{owner}_{key}"
            self.lines.append(f"{indent}subgraph {cluster} {{")
            inner = indent + "  "
            count = len(value.eqns)
            label = _dot_quote(f"{owner}.{key}: {count} equation{'' if count == 1 else 's'}")
            self.lines.append(f'{inner}label={label}; style=dashed; color="#888888"; fontname="monospace";')
            saved, self.plan = self.plan, None  # a plan covers only the top-level graph
            written = self.graph(value, f"{owner}_{key}_", inner)
            self.plan = saved
            self.lines.append(f"{indent}}}")
            if written:
                self.lines.append(f'{indent}{owner} -> {written[0]} [lhead={cluster}, style=dashed, '
                                  f'arrowhead=odot, color="#888888"];')


def to_dot(graph: Graph, plan: MemoryPlan | None = None, name: str = "fungraph", *, nested: bool = True) -> str:
    """Graphviz text of ``graph``: one node per input, constant, equation and output, labelled
    like the text form with its types. With ``plan`` (``jit(f).lower(...).plan``) each node
    shows its memory block, coloured by arena offset so reused memory shares a colour; pinned
    values get a double border and views a dashed one. ``nested`` draws parameter graphs as
    clusters."""
    writer = _DotWriter(plan, nested)
    writer.lines += [f"digraph {_dot_quote(name)} {{", "  rankdir=TB;", "  compound=true;",
                     '  node [fontname="monospace", fontsize=10];']
    if plan is not None:
        writer.lines.append(f'  labelloc=t; fontname="monospace"; label={_dot_quote(plan.summary())};')
    writer.graph(graph, "", "  ")
    writer.lines.append("}")
    return "\n".join(writer.lines)


_RENDER_FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf"}
_TEXT_SUFFIXES = (".dot", ".gv")


def graphviz_available() -> bool:
    """Whether Graphviz's ``dot`` program is on PATH (needed for pictures, not for DOT text)."""
    return shutil.which("dot") is not None


def render_dot(dot_text: str, path: str | Path) -> Path:
    """Write ``dot_text`` to ``path``: as text for a ``.dot``/``.gv`` suffix, else as the picture
    its suffix names (``.svg``, ``.png``, ``.pdf``) rendered by Graphviz's ``dot``. Raises
    RuntimeError when ``dot`` is not installed, ValueError for another suffix."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in _TEXT_SUFFIXES:
        path.write_text(dot_text + "\n", encoding="utf-8")
        return path
    fmt = _RENDER_FORMATS.get(suffix)
    if fmt is None:
        raise ValueError(f"cannot write a graph to {path.name!r}: use a .svg, .png or .pdf suffix for a "
                         f"picture, or .dot for the Graphviz text")
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError(f"rendering {path.name} needs Graphviz's `dot` program, which is not on PATH: "
                           f"{INSTALL_HINT}; or write the Graphviz text instead with a .dot suffix "
                           f"({path.with_suffix('.dot').name})")
    result = subprocess.run([exe, f"-T{fmt}", "-o", str(path)], input=dot_text.encode("utf-8"),
                            capture_output=True, check=False)
    if result.returncode != 0:
        detail = " ".join(result.stderr.decode("utf-8", "replace").split()) or f"exit status {result.returncode}"
        raise RuntimeError(f"`dot -T{fmt}` failed to render {path.name}: {detail}")
    return path


# --- the memory timeline ----------------------------------------------------------------


def _aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def _buffers(plan: MemoryPlan) -> list[tuple[Var, Placement]]:
    return [(v, p) for v, p in plan.placements.items() if p.kind == "buffer" and p.offset >= 0]


def live_bytes(plan: MemoryPlan) -> list[int]:
    """Arena bytes live at each execution step (sizes 64-byte aligned, as the planner packs
    them); its maximum is the plan's liveness lower bound."""
    buffers = _buffers(plan)
    steps = max((p.end for _, p in buffers), default=0)
    live = [0] * steps
    for _, p in buffers:
        for s in range(max(p.start, 0), p.end):
            live[s] += _aligned(p.size)
    return live


def format_bytes(n: float) -> str:
    """``512 B``, ``22.5 KiB``, ``3 MiB``: a short human-readable byte count."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n:g} B"


def _nice_ticks(limit: float, count: int = 6) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten) from 0 up to ``limit``."""
    if limit <= 0:
        return [0.0]
    raw = limit / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(limit // step) + 1)]


def _byte_ticks(limit: float) -> list[float]:
    """Ticks that are round numbers in the unit the labels use (B, KiB, MiB, GiB)."""
    scale = next((s for s in (1 << 30, 1 << 20, 1 << 10) if limit >= 2 * s), 1)
    return [t * scale for t in _nice_ticks(limit / scale)]


def _alias_root(plan: MemoryPlan, v: Var) -> Var | None:
    """The var whose buffer an in-place or view value shares (None if it is pinned)."""
    seen: set[Var] = set()
    p = plan.placements.get(v)
    while p is not None and p.kind in ("inplace", "view") and p.origin is not None and v not in seen:
        seen.add(v)
        v = p.origin
        p = plan.placements.get(v)
    return v if p is not None and p.kind == "buffer" else None


def memory_timeline_svg(plan: MemoryPlan, graph: Graph | None = None, title: str = "memory plan", *,
                        width: int = 960, height: int = 540) -> str:
    """A standalone SVG of ``plan``: each arena buffer is a rectangle over the execution steps
    ``[start, end)`` and the bytes ``[offset, offset + size)``; lines mark the liveness lower
    bound and the arena size, a grey step line the bytes live at each step. With ``graph``
    (the planned graph, ``lowered.graph``) buffers are named as in ``str(graph)`` and in-place
    and view values are marked where they are produced."""
    left, right, top, bottom = 88, 24, 100, 56
    plot_w, plot_h = width - left - right, height - top - bottom
    buffers = _buffers(plan)
    producer: dict[Var, tuple[int, str]] = {}
    names: dict[Var, str] = {}
    if graph is not None:
        names = var_names(graph)
        producer = {o: (i, e.primitive.name) for i, e in enumerate(graph.eqns) for o in e.outputs}
    steps = max([p.end for _, p in buffers] + [len(graph.eqns) if graph is not None else 0, 1])
    top_bytes = max([plan.arena_bytes, plan.lower_bound_bytes] + [p.offset + p.size for _, p in buffers])
    y_limit = max(top_bytes * 1.08, 1.0)

    def x(step: float) -> float:
        return left + step / steps * plot_w

    def y(nbytes: float) -> float:
        return top + plot_h - nbytes / y_limit * plot_h

    def describe(v: Var) -> str:
        name = names.get(v)
        made = producer.get(v)
        head = f"{name}: {v.aval}" if name else str(v.aval)
        return f"{head} = {made[1]} (step {made[0]})" if made else head

    kinds: dict[str, int] = {}
    for p in plan.placements.values():
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    subtitle = (f"arena {plan.arena_bytes:,} B, liveness lower bound {plan.lower_bound_bytes:,} B, "
                f"unplanned intermediates {plan.unplanned_bytes:,} B, pinned {plan.pinned_bytes:,} B")
    counts = (f"{kinds.get('buffer', 0)} buffers, {kinds.get('inplace', 0)} in place, "
              f"{kinds.get('view', 0)} views; strategy {plan.strategy}")
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f"<title>{escape(title)}</title>",
           f'<rect class="background" x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
           f'<text class="title" x="{left}" y="24" font-size="16" font-weight="bold">{escape(title)}</text>',
           f'<text class="subtitle" x="{left}" y="44">{escape(subtitle)}</text>',
           f'<text class="subtitle" x="{left}" y="60">{escape(counts)}</text>']
    out += _axes(steps, y_limit, x, y, left, top, plot_w, plot_h)
    for k, (v, p) in enumerate(buffers):
        x0, x1 = x(max(p.start, 0)), x(p.end)
        y0, y1 = y(p.offset), y(p.offset + p.size)
        h = max(y0 - y1, 1.0)
        tip = f"{describe(v)}; steps [{p.start}, {p.end}); bytes [{p.offset}, {p.offset + p.size})"
        out.append(f'<rect class="buffer" x="{x0:.2f}" y="{y0 - h:.2f}" width="{max(x1 - x0, 1.0):.2f}" '
                   f'height="{h:.2f}" fill="{_PALETTE[k % len(_PALETTE)]}" fill-opacity="0.9" '
                   f'stroke="#333333" stroke-width="0.6"><title>{escape(tip)}</title></rect>')
        if v in names and x1 - x0 >= 24 and h >= 13:
            out.append(f'<text class="buffer-label" x="{(x0 + x1) / 2:.2f}" y="{y0 - h / 2 + 4:.2f}" '
                       f'text-anchor="middle">{escape(names[v])}</text>')
    for v, p in plan.placements.items():
        root = _alias_root(plan, v) if p.kind in ("inplace", "view") else None
        if root is None or v not in producer:
            continue
        xs = x(producer[v][0] + 0.5)
        origin = names.get(p.origin, "?") if p.origin is not None else "?"
        tip = f"{describe(v)}: {'in place of' if p.kind == 'inplace' else 'a view of'} {origin}"
        out.append(f'<line class="alias {p.kind}" x1="{xs:.2f}" x2="{xs:.2f}" y1="{y(p.offset):.2f}" '
                   f'y2="{y(p.offset + p.size):.2f}" stroke="#222222" stroke-width="1.5" '
                   f'stroke-dasharray="{"2,2" if p.kind == "view" else "5,2"}"><title>{escape(tip)}</title></line>')
    live = live_bytes(plan)
    if live:
        points = " ".join(f"{x(s):.2f},{y(b):.2f} {x(s + 1):.2f},{y(b):.2f}" for s, b in enumerate(live))
        out.append(f'<polyline class="live" points="{points}" fill="none" stroke="#777777" stroke-width="1"/>')
    else:
        out.append(f'<text class="empty" x="{left + plot_w / 2}" y="{top + plot_h / 2}" text-anchor="middle">'
                   f"no arena buffers: every value is pinned, in place or a view</text>")
    out += _limit_lines(plan, x, y, steps)
    out += _legend(left, 78)
    out.append("</svg>")
    return "\n".join(out)


Scale = Callable[[float], float]


def _axes(steps: int, y_limit: float, x: Scale, y: Scale, left: int, top: int, plot_w: int,
          plot_h: int) -> list[str]:
    bottom_y = top + plot_h
    out = [f'<g class="axes" stroke="#000000" stroke-width="1">'
           f'<line x1="{left}" y1="{bottom_y}" x2="{left + plot_w}" y2="{bottom_y}"/>'
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom_y}"/></g>']
    for t in _nice_ticks(steps, 10):
        if t != int(t):
            continue
        xt = x(t)
        out.append(f'<line class="tick" x1="{xt:.2f}" y1="{bottom_y}" x2="{xt:.2f}" y2="{bottom_y + 4}" '
                   f'stroke="#000000"/><text x="{xt:.2f}" y="{bottom_y + 16}" text-anchor="middle">{int(t)}</text>')
    for t in _byte_ticks(y_limit):
        yt = y(t)
        out.append(f'<line class="grid" x1="{left}" y1="{yt:.2f}" x2="{left + plot_w}" y2="{yt:.2f}" '
                   f'stroke="#eeeeee"/><text x="{left - 6}" y="{yt + 4:.2f}" text-anchor="end">'
                   f"{escape(format_bytes(t))}</text>")
    out.append(f'<text class="axis-label" x="{left + plot_w / 2}" y="{bottom_y + 36}" text-anchor="middle">'
               f"execution step (equation index)</text>")
    cy = top + plot_h / 2
    out.append(f'<text class="axis-label" x="18" y="{cy}" text-anchor="middle" '
               f'transform="rotate(-90 18 {cy})">arena offset (bytes)</text>')
    return out


def _limit_lines(plan: MemoryPlan, x: Scale, y: Scale, steps: int) -> list[str]:
    x0, x1 = x(0), x(steps)
    ya, yb = y(plan.arena_bytes), y(plan.lower_bound_bytes)
    arena_label = f"arena {format_bytes(plan.arena_bytes)}"
    bound_label = f"liveness lower bound {format_bytes(plan.lower_bound_bytes)}"
    return [f'<line class="arena" x1="{x0:.2f}" x2="{x1:.2f}" y1="{ya:.2f}" y2="{ya:.2f}" stroke="#000000" '
            f'stroke-width="1.5"/>',
            f'<text x="{x1 - 4:.2f}" y="{ya - 4:.2f}" text-anchor="end">{escape(arena_label)}</text>',
            f'<line class="lower-bound" x1="{x0:.2f}" x2="{x1:.2f}" y1="{yb:.2f}" y2="{yb:.2f}" '
            f'stroke="#d62728" stroke-width="1.5" stroke-dasharray="6,3"/>',
            f'<text x="{x1 - 4:.2f}" y="{yb + 13:.2f}" text-anchor="end" fill="#d62728">'
            f"{escape(bound_label)}</text>"]


def _legend(x0: float, y0: float) -> list[str]:
    entries = (("#000000", "", "arena size"), ("#d62728", "6,3", "liveness lower bound"),
               ("#777777", "", "bytes live at each step"), ("#222222", "5,2", "in-place / view value"))
    out = ['<g class="legend">']
    for label_colour, dashes, label in entries:
        dash = f' stroke-dasharray="{dashes}"' if dashes else ""
        out.append(f'<line x1="{x0}" x2="{x0 + 22}" y1="{y0}" y2="{y0}" stroke="{label_colour}"{dash} '
                   f'stroke-width="1.5"/><text x="{x0 + 28}" y="{y0 + 4}">{escape(label)}</text>')
        x0 += 40 + 6.5 * len(label)
    out.append("</g>")
    return out


# --- optimiser passes -------------------------------------------------------------------


def pass_report(stats: Sequence[PassStat]) -> str:
    """The optimiser's table (equations and intermediate bytes before -> after each pass, and
    its time) with a total line."""
    if not stats:
        return "no optimiser passes ran"
    first, last = stats[0], stats[-1]
    ms = sum(s.seconds for s in stats) * 1e3
    total = (f"{'total':<14}{first.eqns_before:>6} -> {last.eqns_after:<6}{first.bytes_before:>12} -> "
             f"{last.bytes_after:<10}{ms:>9.2f}")
    table = format_stats(stats)
    rule = "-" * max(len(line) for line in table.splitlines())
    return f"{table}\n{rule}\n{total}"


__all__ = ["format_bytes", "graphviz_available", "live_bytes", "memory_timeline_svg", "pass_report",
           "render_dot", "to_dot", "var_names"]
