"""The test tree's layout: pytest imports test modules by basename (the test
directories are not packages), so two test files with one name in different
directories stop the whole run at collection. Fail here, by name, instead."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_test_modules_have_unique_basenames() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    clashes = sorted(name for name, n in names.items() if n > 1)
    assert not clashes, f"test files share a basename (rename one of each): {clashes}"
