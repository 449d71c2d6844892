"""The exception tree drawn in `ektelo.errors` is the real one, and no code
tells exceptions (or any class) apart by its name string."""

from __future__ import annotations

import builtins
import re
import subprocess
import sys
from pathlib import Path

import ektelo.errors as errors

SRC = Path(__file__).resolve().parents[2] / "src" / "ektelo"


def _drawn_tree() -> dict[str, str]:
    """name -> its drawn parent, read from the module docstring's tree (a
    name's parent is the nearest line above it that starts further left)."""
    doc = errors.__doc__ or ""
    block = doc[doc.index("::") + 2 : doc.index("The leaves")]
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in block.splitlines():
        m = re.search(r"[A-Za-z]+", line)
        if m is None:
            continue
        while stack and stack[-1][0] >= m.start():
            stack.pop()
        if stack:
            parents[m.group()] = stack[-1][1]
        stack.append((m.start(), m.group()))
    return parents


def test_the_drawn_tree_lists_every_exported_name_under_its_real_base():
    drawn = _drawn_tree()
    assert set(drawn) - {"ValueError", "RuntimeError"} == set(errors.__all__)
    for name, parent in drawn.items():
        cls = getattr(builtins, name, None) or getattr(errors, name)
        base = getattr(builtins, parent, None) or getattr(errors, parent)
        assert issubclass(cls, base), f"{name} is drawn under {parent}"


def test_each_name_is_the_class_its_module_raises():
    from ektelo import client, where, wire
    from ektelo.cli import CLIError
    from ektelo.engines import EngineError
    from ektelo.inference.graphical_model import ModelTooLarge
    from ektelo.kernel import BudgetExceeded, RequestConflict
    from ektelo.ledger_store import StoreError

    assert errors.BudgetExceeded is BudgetExceeded and errors.EngineError is EngineError
    assert errors.RequestConflict is RequestConflict and errors.StoreError is StoreError
    assert errors.WireError is wire.WireError and errors.WhereError is where.WhereError
    assert errors.ServerError is client.ServerError and errors.CLIError is CLIError
    assert errors.ModelTooLarge is ModelTooLarge


def test_importing_errors_loads_nothing_heavy():
    code = (
        "import sys, ektelo.errors; "
        "print(sorted(m for m in ('numpy', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_class_is_told_apart_by_its_name_string():
    pattern = re.compile(r"__name__\s*(==|!=|in\b)|(==|!=)\s*type\([^)]*\)\.__name__")
    offenders = [
        f"{path.relative_to(SRC)}:{i}"
        for path in SRC.rglob("*.py")
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line) and "__main__" not in line
    ]
    assert offenders == []
