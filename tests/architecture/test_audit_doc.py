"""docs/audit.md stays true: every kernel file is on the reading list, with its
current line count, and the total is the kernel's size (issue #35)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "src" / "ektelo" / "kernel"
ROW = re.compile(r"^\| (\d+) \| (`[^|]+`) \| (\d+) \| (?:`(\w+)\.md`|—) \| (\d+|—) \|", re.M)


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_the_reading_list_matches_the_kernel() -> None:
    text = (ROOT / "docs" / "audit.md").read_text()
    listed: set[str] = set()
    total = 0
    for _, files, count, note, note_count in ROW.findall(text):
        names = re.findall(r"`([\w.]+)`", files)
        listed |= set(names)
        actual = sum(_lines(KERNEL / n) for n in names)
        assert int(count) == actual, f"audit.md: {names} has {actual} lines, not {count}"
        if note:
            assert int(note_count) == _lines(KERNEL / "proofs" / f"{note}.md"), note
        total += actual
    assert listed == {p.name for p in KERNEL.glob("*.py")}, "a kernel file is not on the list"
    stated = re.search(r"\*\*total\*\* \| \*\*([\d,]+)\*\*", text)
    assert stated and int(stated.group(1).replace(",", "")) == total
