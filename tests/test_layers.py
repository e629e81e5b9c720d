"""The import graph (scripts/import_graph.py): it sees imports inside functions, and no cycle
spans two folders, lax and numpy's included: lax sits below numpy (docs/architecture.md, Layers)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

import fungraph as fg
import fungraph.numpy as fnp

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
import_graph = sys.modules.setdefault("import_graph", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(import_graph)

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


def test_no_cycle_spans_two_folders() -> None:
    modules = import_graph.module_names(ROOT)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for edge in import_graph.edges(modules):
        graph[edge.source].add(edge.target)
    for component in import_graph.cycles(sorted(modules), graph):
        folders = {import_graph.folder(modules[name], ROOT) for name in component}
        assert len(folders) <= 1, f"a cycle spans {sorted(folders)}: {component}"


def test_numpy_i0_binds_the_bessel_primitive_itself() -> None:
    """fungraph.numpy.i0 sits below scipy.special and binds the primitive scipy.special.i0 binds."""
    x = np.linspace(-6.0, 6.0, 13)
    np.testing.assert_allclose(fnp.i0(x), np.i0(x), rtol=1e-13)
    assert [e.primitive.name for e in fg.make_graph(fnp.i0)(x).eqns] == ["bessel_i0"]
    assert np.issubdtype(fnp.i0(np.arange(3)).dtype, np.floating)
