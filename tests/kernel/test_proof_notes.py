"""Each proof note names the version of the code it was checked against (issue #35).

`src/ektelo/kernel/proofs/<module>.md` holds the argument for `kernel/<module>.py`
and, on its second line, the SHA-256 of the file it was checked against. When
the file changes, this test fails until someone re-reads the note against the
new code (and mends it) and stamps the new hash:

    python tests/kernel/test_proof_notes.py --stamp <module> [<module> ...]

(OpenDP's `proven` attribute does the same with a commit id.)
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

import pytest

KERNEL = Path(__file__).resolve().parents[2] / "src" / "ektelo" / "kernel"
PROOFS = KERNEL / "proofs"
STAMP = re.compile(r"^Checked against: sha256 `([0-9a-f]{64})`", re.M)
# every kernel module that decides something about privacy has a note
NEEDS_A_NOTE = (
    "kernel", "ledger", "sensitivity", "evaluate", "noise", "gaussian", "dawa", "mwem",
    "privbayes", "marginal_select", "contracts",
)  # fmt: skip


def _digest(module: str) -> str:
    return hashlib.sha256((KERNEL / f"{module}.py").read_bytes()).hexdigest()


@pytest.mark.parametrize("module", NEEDS_A_NOTE)
def test_the_note_was_checked_against_this_version(module: str) -> None:
    note = PROOFS / f"{module}.md"
    assert note.is_file(), f"kernel/{module}.py has no proof note at {note}"
    found = STAMP.search(note.read_text())
    assert found, f"{note.name} does not name the code version it was checked against"
    assert found.group(1) == _digest(module), (
        f"kernel/{module}.py changed after its proof note was checked: re-read "
        f"proofs/{module}.md against the code, mend it, then run "
        f"`python tests/kernel/test_proof_notes.py --stamp {module}`"
    )


def test_every_kernel_module_is_covered_or_plainly_public() -> None:
    """A new kernel module needs a proof note, or a place on this short list of
    modules that hold only public records and names."""
    plain = {"__init__", "records"}
    modules = {p.stem for p in KERNEL.glob("*.py")}
    assert modules - plain == set(NEEDS_A_NOTE)


def _stamp(modules: list[str]) -> None:
    for module in modules:
        note = PROOFS / f"{module}.md"
        text = note.read_text()
        line = f"Checked against: sha256 `{_digest(module)}`"
        if STAMP.search(text):
            text = STAMP.sub(line, text, count=1)
        else:
            title, _, rest = text.partition("\n")
            text = f"{title}\n{line} (the file's bytes; restamp when it changes)\n{rest}"
        note.write_text(text)
        print(f"stamped proofs/{module}.md")


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "--stamp":
        raise SystemExit("usage: python tests/kernel/test_proof_notes.py --stamp <module> ...")
    _stamp(sys.argv[2:])
