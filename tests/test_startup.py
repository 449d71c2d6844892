"""Start-up cost (#27): `import ektelo` and `ektelo --help` load no NumPy,
SciPy or pandas — the package's names load on first use (PEP 562)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("numpy", "scipy", "pandas")


def _loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    last = out.strip().splitlines()[-1] if out.strip() else ""
    return [m for m in last.split(",") if m in HEAVY]


def test_import_ektelo_loads_nothing_heavy() -> None:
    assert _loaded_after("import ektelo") == []


def test_cli_help_loads_nothing_heavy() -> None:
    code = "import ektelo.cli\ntry:\n    ektelo.cli.main(['--help'])\nexcept SystemExit:\n    pass"
    assert _loaded_after(code) == []


def test_lazy_names_resolve_to_their_modules() -> None:
    import ektelo
    from ektelo import port

    assert ektelo.protect is port.protect
    assert set(ektelo.__all__) <= set(dir(ektelo))
    try:
        ektelo.no_such_name  # noqa: B018
    except AttributeError as err:
        assert "no_such_name" in str(err)
    else:
        raise AssertionError("an unknown name must raise AttributeError")
