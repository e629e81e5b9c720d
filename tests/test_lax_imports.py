"""lax sits below numpy in the layer order (docs/architecture.md, issue #33): the lax modules
listed here bind primitives (through ``primitives.operands`` for argument handling) and import
nothing of ``fungraph.numpy``, at module level or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LAX = Path(__file__).resolve().parent.parent / "fungraph" / "lax"
CLEAN = ["_bits", "_control_flow", "_convolution", "_elementwise", "_implicit", "_linalg", "_reductions", "_shapes",
         "_slicing", "_special", "_window_shapes", "_windows"]


def _imported_modules(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return names


@pytest.mark.parametrize("module", CLEAN)
def test_clean_lax_modules_do_not_import_numpy(module: str) -> None:
    tree = ast.parse((LAX / f"{module}.py").read_text())
    bad = [m for m in _imported_modules(tree) if m == "fungraph.numpy" or m.startswith("fungraph.numpy.")]
    assert not bad, f"fungraph.lax.{module} imports {bad}"
    assert "namespace()" not in ast.unparse(tree), f"fungraph.lax.{module} looks numpy up through namespace()"
