"""fungraph.viz: Graphviz text, rendering through `dot`, the memory timeline SVG, the pass report."""

from __future__ import annotations

import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import viz
from fungraph.interpreters.memory import MemoryPlan, Placement
from fungraph.ir import ShapedArray, Var
from fungraph.stages import Lowered

SVG = "{http://www.w3.org/2000/svg}"


def _lowered_grad(batch: int = 32, features: int = 64, classes: int = 10) -> Lowered:
    def predict(w, x):
        return fg.numpy.tanh(x @ w).sum()

    w = fg.ShapeDtypeStruct((features, classes), "float32")
    x = fg.ShapeDtypeStruct((batch, features), "float32")
    return fg.jit(fg.grad(predict)).lower(w, x)


def _by_class(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(SVG + tag) if cls in e.get("class", "").split()]


# --- to_dot ------------------------------------------------------------------------------


def test_to_dot_labels_ops_shapes_and_dtypes() -> None:
    g = fg.make_graph(lambda x, w: fnp.tanh(x @ w) * 2.0)(np.ones((8, 4), np.float32), np.ones((4, 3), np.float32))
    dot = viz.to_dot(g)
    assert dot.startswith('digraph "fungraph" {') and dot.rstrip().endswith("}")
    assert dot.count("{") == dot.count("}")
    assert 'label="c = dot_general' in dot and "f32[8,3]" in dot
    assert 'label="d = tanh c\\nf32[8,3]"' in dot
    assert "mul d 2.0:f32[]" in dot  # literal operands are shown like the text form
    assert "input 0: a\\nf32[8,4]" in dot and "input 1: b\\nf32[4,3]" in dot
    assert dot.count(" -> ") == 2 + 1 + 1 + 1  # x, w -> dot; dot -> tanh; tanh -> mul; mul -> output
    assert "block @" not in dot  # no plan, no memory blocks


def test_to_dot_with_a_plan_colours_blocks_and_marks_pinned_values() -> None:
    low = _lowered_grad()
    dot = viz.to_dot(low.graph, low.plan)
    buffers = {p.offset for p in low.plan.placements.values() if p.kind == "buffer"}
    for offset in buffers:
        assert f"block @{offset} (buffer" in dot
    assert dot.count("peripheries=2") >= 2 + 1  # two pinned inputs and the pinned output
    assert "(inplace of " in dot
    assert low.as_dot() == dot  # Lowered.as_dot uses the same function


def test_to_dot_draws_nested_graphs_as_clusters_and_escapes_names() -> None:
    inner = fg.jit(lambda x: fnp.sin(x) * 2.0)
    g = fg.make_graph(lambda x: inner(x).sum())(np.ones(3))
    dot = viz.to_dot(g, name='my "model"')
    assert dot.startswith('digraph "my \\"model\\"" {')
    assert "subgraph cluster_e0_call {" in dot and "e0_call_e0" in dot and "lhead=cluster_e0_call" in dot
    flat = viz.to_dot(g, nested=False)
    assert "subgraph" not in flat and "call=<graph of 2 eqns>" in flat


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_render_dot_with_graphviz_writes_an_svg(tmp_path: Path) -> None:
    low = _lowered_grad()
    out = viz.render_dot(low.as_dot(), tmp_path / "g.svg")
    root = ET.parse(out).getroot()
    assert root.tag == SVG + "svg"
    assert "dot_general" in out.read_text()


# --- render_dot --------------------------------------------------------------------------


def test_render_dot_without_graphviz_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert not viz.graphviz_available()
    with pytest.raises(RuntimeError) as info:
        viz.render_dot("digraph g { a -> b; }", tmp_path / "g.svg")
    message = str(info.value)
    assert "apt-get install graphviz" in message and "brew install graphviz" in message
    assert ".dot" in message
    assert not (tmp_path / "g.svg").exists()
    # the text still works without Graphviz
    assert viz.render_dot("digraph g { a -> b; }", tmp_path / "g.dot").read_text() == "digraph g { a -> b; }\n"


def test_render_dot_rejects_unknown_suffixes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.svg, \.png or \.pdf"):
        viz.render_dot("digraph g {}", tmp_path / "g.jpg")


def _fake_dot(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "fake-dot"
    script.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    script.chmod(0o755)
    return script


def test_render_dot_passes_format_and_text_to_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_dot(tmp_path, "out = sys.argv[sys.argv.index('-o') + 1]\n"
                               "open(out, 'w').write(' '.join(sys.argv[1:]) + '|' + sys.stdin.read())")
    monkeypatch.setattr(shutil, "which", lambda name: str(fake) if name == "dot" else None)
    out = viz.render_dot("digraph g { a -> b; }", tmp_path / "pic.PNG")
    args, text = out.read_text().split("|")
    assert args.split()[0] == "-Tpng" and text == "digraph g { a -> b; }"


def test_render_dot_reports_dot_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_dot(tmp_path, "sys.stderr.write('Error: syntax error in line 1\\n'); sys.exit(1)")
    monkeypatch.setattr(shutil, "which", lambda name: str(fake))
    with pytest.raises(RuntimeError, match="syntax error in line 1"):
        viz.render_dot("digraph {", tmp_path / "g.svg")


# --- memory_timeline_svg -----------------------------------------------------------------


def test_timeline_has_one_rect_per_buffer_and_parses() -> None:
    low = _lowered_grad()
    svg = viz.memory_timeline_svg(low.plan, low.graph, title="grad <predict> & co")
    root = ET.fromstring(svg)
    kinds = [p.kind for p in low.plan.placements.values()]
    assert len(_by_class(root, "rect", "buffer")) == kinds.count("buffer") > 0
    assert root.find(SVG + "title").text == "grad <predict> & co"
    assert len(_by_class(root, "line", "arena")) == 1 and len(_by_class(root, "line", "lower-bound")) == 1
    # in-place values of arena buffers are marked where they are produced
    aliases = _by_class(root, "line", "alias")
    assert len(aliases) == kinds.count("inplace") + kinds.count("view") > 0
    text = " ".join(t.text or "" for t in root.iter(SVG + "text"))
    assert f"arena {low.plan.arena_bytes:,} B" in text
    assert f"liveness lower bound {low.plan.lower_bound_bytes:,} B" in text
    assert f"unplanned intermediates {low.plan.unplanned_bytes:,} B" in text
    assert "execution step" in text and "arena offset (bytes)" in text


def test_timeline_without_a_graph_still_draws_buffers_but_no_alias_marks() -> None:
    low = _lowered_grad()
    root = ET.fromstring(viz.memory_timeline_svg(low.plan))
    assert len(_by_class(root, "rect", "buffer")) == sum(p.kind == "buffer" for p in low.plan.placements.values())
    assert _by_class(root, "line", "alias") == []


def _plan(placements: dict[Var, Placement], arena: int, bound: int) -> MemoryPlan:
    return MemoryPlan(arena, bound, 4096, 0, "test", placements, 0.0)


def test_timeline_geometry_follows_steps_and_offsets() -> None:
    a, b, c = (Var(ShapedArray((16,), np.float64)) for _ in range(3))
    plan = _plan({a: Placement("buffer", 0, 128, 0, 4, None),
                  b: Placement("buffer", 128, 128, 1, 2, None),
                  c: Placement("buffer", 128, 128, 2, 4, None)}, arena=256, bound=256)
    root = ET.fromstring(viz.memory_timeline_svg(plan, width=600, height=400))
    ra, rb, rc = ({k: float(r.get(k)) for k in ("x", "y", "width", "height")}
                  for r in _by_class(root, "rect", "buffer"))
    assert ra["width"] == pytest.approx(4 * rb["width"]) and rc["width"] == pytest.approx(2 * rb["width"])
    assert ra["x"] < rb["x"] < rc["x"] and rb["x"] + rb["width"] == pytest.approx(rc["x"])
    assert ra["height"] == pytest.approx(rb["height"])
    assert rb["y"] + rb["height"] == pytest.approx(ra["y"], abs=0.02)  # b sits right above a (y grows downwards)
    arena_y = float(_by_class(root, "line", "arena")[0].get("y1"))
    assert arena_y == pytest.approx(rb["y"], abs=0.02)


def test_timeline_of_a_plan_without_buffers_is_valid() -> None:
    low = fg.jit(lambda x: x + 1.0).lower(np.ones(3))
    root = ET.fromstring(viz.memory_timeline_svg(low.plan, low.graph))
    assert _by_class(root, "rect", "buffer") == []
    assert any("no arena buffers" in (t.text or "") for t in root.iter(SVG + "text"))


@pytest.mark.parametrize("sizes", [(32, 64, 10), (3, 7, 5)])  # the second has buffers of 60 B (not aligned)
def test_live_bytes_peaks_at_the_lower_bound(sizes: tuple[int, int, int]) -> None:
    low = _lowered_grad(*sizes)
    live = viz.live_bytes(low.plan)
    assert max(live) == low.plan.lower_bound_bytes
    assert len(live) == max(p.end for p in low.plan.placements.values() if p.kind == "buffer")


@pytest.mark.parametrize(("n", "text"), [(0, "0 B"), (512, "512 B"), (23040, "22.5 KiB"), (3 << 20, "3 MiB")])
def test_format_bytes(n: int, text: str) -> None:
    assert viz.format_bytes(n) == text


# --- pass_report -------------------------------------------------------------------------


def test_pass_report_lists_each_pass_and_the_total() -> None:
    low = _lowered_grad()
    report = viz.pass_report(low.stats)
    for s in low.stats:
        assert s.name in report
    first, last = low.stats[0], low.stats[-1]
    total = report.splitlines()[-1].split()
    assert total[:4] == ["total", str(first.eqns_before), "->", str(last.eqns_after)]
    assert total[4:7] == [str(first.bytes_before), "->", str(last.bytes_after)]
    assert viz.pass_report(()) == "no optimiser passes ran"
