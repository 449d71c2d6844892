"""The kernel suite passes under `python -O` (no check relies on `assert`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_asserts_in_tests_are_live():
    # pytest rewrites test-module asserts into explicit raises, also under -O.
    with pytest.raises(AssertionError):
        assert sys.flags.optimize < 0


def test_no_assert_statements_in_the_kernel():
    for path in (ROOT / "src" / "ektelo" / "kernel").glob("*.py"):
        lines = path.read_text(encoding="utf-8").splitlines()
        offending = [i + 1 for i, line in enumerate(lines) if line.lstrip().startswith("assert ")]
        assert not offending, f"{path.name}: assert at lines {offending}"


@pytest.mark.skipif(sys.flags.optimize > 0, reason="already running under -O")
def test_kernel_suite_under_python_O():
    result = subprocess.run(
        [
            sys.executable, "-O", "-m", "pytest", "tests/kernel", "tests/test_domain.py",
            "-q", "-x", "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestConfigWarning",
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    tail = result.stdout[-2000:] + result.stderr[-2000:]
    assert result.returncode == 0, tail
    assert " passed" in result.stdout and " failed" not in result.stdout, tail
