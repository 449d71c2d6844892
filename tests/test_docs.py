"""The documentation cannot rot: every ```python block in README.md and
docs/*.md runs, blocks of one page sharing a namespace, in order."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PAGES = [p for p in PAGES if p.name != "contracts.md"]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_examples_run(page, capsys):
    blocks = BLOCK.findall(page.read_text(encoding="utf-8"))
    assert blocks or page.name == "README.md", f"{page.name} has no runnable example"
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"{page.name}[block {i}]", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the message is the point
            pytest.fail(f"{page.name} block {i} failed: {type(exc).__name__}: {exc}")
    capsys.readouterr()


def test_readme_lists_every_plan_and_both_commands():
    from ektelo import plans

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make run" in text and "make test" in text
    missing = [n for n in plans.names() if f"`{n}`" not in text]
    assert not missing, f"README's plan list misses {missing}"
