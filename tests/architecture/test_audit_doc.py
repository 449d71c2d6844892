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


def _update() -> None:
    """Rewrite docs/audit.md's line counts from the tree (after a kernel change)."""
    path = ROOT / "docs" / "audit.md"
    text = path.read_text()
    totals = [0, 0]

    def row(m: re.Match[str]) -> str:
        files = re.findall(r"`([\w.]+)`", m.group(2))
        count = sum(_lines(KERNEL / n) for n in files)
        totals[0] += count
        note_count = m.group(5)
        if m.group(4):
            note_count = str(_lines(KERNEL / "proofs" / f"{m.group(4)}.md"))
            totals[1] += int(note_count)
        return f"| {m.group(1)} | {m.group(2)} | {count} | {m.group(3)} | {note_count} |"

    text = re.sub(
        r"^\| (\d+) \| (`[^|]+`) \| \d+ \| ((?:`(\w+)\.md`)|—) \| (\d+|—) \|", row, text,
        flags=re.M,
    )
    text = re.sub(r"\| \| \*\*total\*\* \| \*\*[\d,]+\*\* \| \| \*\*[\d,]+\*\* \|",
                  f"| | **total** | **{totals[0]:,}** | | **{totals[1]:,}** |", text)
    code, notes = f"{totals[0]:,}", f"{totals[1]:,}"
    text = re.sub(r"It is [\d,]+ lines of\nPython", f"It is {code} lines of\nPython", text)
    text = re.sub(r"plus [\d,]+\nlines of proof", f"plus {notes}\nlines of proof", text)
    path.write_text(text)
    print(f"docs/audit.md: kernel {totals[0]:,} lines, proof notes {totals[1]:,}")


if __name__ == "__main__":
    _update()
