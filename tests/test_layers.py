"""The import graph (scripts/import_graph.py): it sees imports inside functions, and below the
libraries no cycle spans two folders (docs/architecture.md, Layers)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
import_graph = sys.modules.setdefault("import_graph", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(import_graph)

#: The libraries are one layer for now (lax and numpy import each other, and so do nn and
#: scipy.special); every other cycle must stay inside one folder.
LIBRARIES = ("fungraph.lax", "fungraph._lax", "fungraph.numpy", "fungraph.nn", "fungraph._attention",
             "fungraph.initializers", "fungraph.random", "fungraph._random", "fungraph._threefry", "fungraph.scipy")


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_cycle_closed_inside_a_function_is_found(tmp_path: Path) -> None:
    _write(tmp_path, {
        "fungraph/__init__.py": "",
        "fungraph/low.py": "from fungraph.high import f\n",
        "fungraph/high.py": "def f():\n    from fungraph import low\n    return low\n",
        "fungraph/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fungraph import low\n",
    })
    modules = import_graph.module_names(tmp_path)
    edges = import_graph.edges(modules)
    assert {(e.source, e.target, e.local) for e in edges} == {
        ("fungraph.low", "fungraph.high", False), ("fungraph.high", "fungraph.low", True)}
    graph = {name: {e.target for e in edges if e.source == name} for name in modules}
    assert import_graph.cycles(sorted(modules), graph) == [["fungraph.high", "fungraph.low"]]


def test_below_the_libraries_no_cycle_spans_two_folders() -> None:
    modules = import_graph.module_names(ROOT)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for edge in import_graph.edges(modules):
        graph[edge.source].add(edge.target)
    for component in import_graph.cycles(sorted(modules), graph):
        lower = [name for name in component if not name.startswith(LIBRARIES)]
        folders = {import_graph.folder(modules[name], ROOT) for name in lower}
        assert len(folders) <= 1, f"a cycle spans {sorted(folders)}: {lower}"
        if len(folders) == 1 and len(lower) < len(component):
            raise AssertionError(f"a cycle joins the libraries and {lower}")
