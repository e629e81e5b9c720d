"""Measure fungraph's import graph: modules, edges, imports inside functions, and cycles.

Every `import` statement counts, at module level or inside a function (the ones inside functions
are how a cycle hides), so the strongly connected components printed here are the cycles that
the import contract in pyproject.toml (`lint-imports`) must not allow.

    python scripts/import_graph.py            # summary and every cycle
    python scripts/import_graph.py --local    # also list each import inside a function
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "fungraph"


@dataclass(frozen=True)
class Edge:
    """One import statement from `source` of module `target`; `local` when inside a function."""

    source: str
    target: str
    line: int
    local: bool


def module_names(root: Path, package: str = PACKAGE) -> dict[str, Path]:
    """Map every module of the package to its file (`pkg/__init__.py` is the module `pkg`)."""
    names = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name a `from ... import` statement refers to."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _type_checking(node: ast.AST) -> bool:
    """An ``if TYPE_CHECKING:`` block: its imports never run (the contract skips them too)."""
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _walk(tree: ast.AST) -> Iterator[tuple[ast.AST, bool]]:
    """Every node with whether it sits inside a function body."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, local = stack.pop()
        if _type_checking(node):
            continue
        yield node, local
        inner = local or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The longest package module that `name` names or lies in, if any."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def edges(modules: dict[str, Path]) -> list[Edge]:
    """Every import of a package module by a package module."""
    found = []
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        for node, local in _walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, is_package, node)
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                known = _known(target, modules)
                if known is not None and known != module:
                    found.append(Edge(module, known, node.lineno, local))
    return found


def cycles(nodes: list[str], graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found = []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found, key=len, reverse=True)


def folder(path: Path, root: Path = ROOT) -> str:
    """The folder a module's file lies in, dotted (`fungraph/numpy/_at.py` -> `fungraph.numpy`)."""
    return ".".join(path.parent.relative_to(root).parts)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local", action="store_true", help="list every import inside a function")
    args = parser.parse_args(argv)
    modules = module_names(ROOT)
    found = edges(modules)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for edge in found:
        graph[edge.source].add(edge.target)
    local = [edge for edge in found if edge.local]
    components = cycles(sorted(modules), graph)
    print(f"modules: {len(modules)}")
    print(f"import statements of package modules: {len(found)} ({len(local)} inside functions)")
    print(f"module edges: {sum(len(targets) for targets in graph.values())}")
    print(f"cycles (strongly connected components): {len(components)}")
    for component in components:
        folders = sorted({folder(modules[name]) for name in component})
        print(f"\n{len(component)} modules over {len(folders)} folders ({', '.join(folders)}):")
        print("  " + " ".join(component))
    if args.local:
        print("\nimports inside functions:")
        for edge in sorted(local, key=lambda edge: (edge.source, edge.line)):
            print(f"  {edge.source}:{edge.line} -> {edge.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
