"""Graphviz text for any graph; for a planned graph each node also shows its memory block,
coloured by block, with pinned values (inputs, constants, outputs) drawn distinctly."""

from __future__ import annotations

from fungraph.interpreters.memory import MemoryPlan
from fungraph.ir import Graph, Literal, Var

_PALETTE = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
            "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f")


def to_dot(graph: Graph, plan: MemoryPlan | None = None, name: str = "fungraph") -> str:
    ids: dict[Var, str] = {}
    lines = [f'digraph "{name}" {{', "  rankdir=TB;", '  node [fontname="monospace", fontsize=10];']
    blocks: dict[int, int] = {}

    def block_attrs(v: Var) -> str:
        if plan is None or v not in plan.placements:
            return ""
        p = plan.placements[v]
        if p.kind == "pinned":
            return ', style="filled,bold", fillcolor="#ffffff", peripheries=2'
        color = _PALETTE[blocks.setdefault(p.offset, len(blocks)) % len(_PALETTE)]
        return f', style=filled, fillcolor="{color}"'

    def block_label(v: Var) -> str:
        if plan is None or v not in plan.placements:
            return ""
        p = plan.placements[v]
        return "\\npinned" if p.kind == "pinned" else f"\\nblock @{p.offset} ({p.kind})"

    for i, v in enumerate(graph.invars):
        ids[v] = f"in{i}"
        lines.append(f'  in{i} [shape=invhouse, label="input {i}\\n{v.aval}"{block_attrs(v)}];')
    for i, v in enumerate(graph.constvars):
        ids[v] = f"const{i}"
        lines.append(f'  const{i} [shape=box3d, label="const {i}\\n{v.aval}"{block_attrs(v)}];')
    for i, e in enumerate(graph.eqns):
        node = f"e{i}"
        out = e.outputs[0]
        for o in e.outputs:
            ids[o] = node
        types = ", ".join(str(o.aval) for o in e.outputs)
        lines.append(f'  {node} [shape=box, label="{e.primitive.name}\\n{types}{block_label(out)}"'
                     f"{block_attrs(out)}];")
        for a in e.inputs:
            if isinstance(a, Literal):
                continue
            lines.append(f"  {ids[a]} -> {node};")
    for i, a in enumerate(graph.outvars):
        lines.append(f'  out{i} [shape=house, label="output {i}", peripheries=2];')
        if isinstance(a, Var):
            lines.append(f"  {ids[a]} -> out{i};")
    lines.append("}")
    return "\n".join(lines)
