"""The kernel's checks survive `python -O` (no check relies on `assert`).

Two cheap guards instead of re-running the kernel suite under -O (82 s):
the syntax tree of every kernel module (and of the public records the kernel
imports) holds no `assert` statement — `-O` strips exactly those — and one
`-O` subprocess runs the budget, accounting and sensitivity tests, whose
refusals (overspend, bad ε, unknown matrices) are the checks that matter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "ektelo"
# the kernel, and the public records it imports (DESIGN.md's import contract)
CHECKED = [*sorted((SRC / "kernel").rglob("*.py")),
           *(SRC / name for name in ("budget.py", "measurement.py", "_validate.py"))]


def asserts_in(source: str) -> list[int]:
    """Line numbers of the `assert` statements in `source`."""
    return [n.lineno for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Assert)]


def test_asserts_in_tests_are_live():
    # pytest rewrites test-module asserts into explicit raises, also under -O.
    with pytest.raises(AssertionError):
        assert sys.flags.optimize < 0


def test_the_check_finds_every_assert():
    source = "x = 1; assert x\nif x:\n    assert x, 'one-line check'\nclass A:\n  def f(self):\n" \
             "    assert self\n"
    assert asserts_in(source) == [1, 3, 6]
    assert asserts_in("x = 'assert x'\n# assert x\n") == []


def test_no_assert_statements_in_the_kernel():
    assert all(path.is_file() for path in CHECKED), CHECKED
    offending = {str(p.relative_to(SRC)): lines for p in CHECKED
                 if (lines := asserts_in(p.read_text(encoding="utf-8")))}
    assert not offending, f"assert statements (stripped by python -O): {offending}"


@pytest.mark.skipif(sys.flags.optimize > 0, reason="already running under -O")
def test_the_kernel_refuses_under_python_O():
    result = subprocess.run(
        [
            sys.executable, "-O", "-m", "pytest", "tests/kernel/test_budget.py",
            "tests/kernel/test_accounting.py", "tests/kernel/test_sensitivity_rules.py",
            "-q", "-x", "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestConfigWarning",
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    tail = result.stdout[-2000:] + result.stderr[-2000:]
    assert result.returncode == 0, tail
    assert " passed" in result.stdout and " failed" not in result.stdout, tail
