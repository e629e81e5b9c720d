"""The tutorial runs as written, and the docs mention the modules and numbers they claim."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_tutorial_runs(capsys) -> None:
    text = (DOCS / "tutorial.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 6
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/tutorial.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert "(5, 3, 2)" in out and "{ lambda" in out


def test_architecture_lists_existing_modules() -> None:
    text = (DOCS / "architecture.md").read_text()
    root = DOCS.parent
    for path in re.findall(r"^(fungraph/[\w/]+\.py)", text, flags=re.M):
        assert (root / path).exists(), path
