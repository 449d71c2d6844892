"""Start-up cost (#27): `import ektelo` and `ektelo --help` load no NumPy,
SciPy or pandas — the package's names load on first use (PEP 562); a small
question (#41) loads neither the plans it does not run nor SciPy's solvers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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


# -- a small question (#41): only the modules it uses -------------------------------
# Loaded by a histogram with --plan identity or auto: none of these. SciPy's
# optimiser and dense/iterative solvers, the model plans (AIM, MST, PGM,
# PrivBayes) and their graphical models, plotting, statistics, HDMM's OPT_0.
NOT_FOR_A_SMALL_QUESTION = (
    "scipy.optimize", "scipy.sparse.linalg", "scipy.linalg", "scipy.stats", "matplotlib",
    "statsmodels", "ektelo.plans.aim", "ektelo.plans.mst", "ektelo.plans.pgm",
    "ektelo.plans.privbayes", "ektelo.plans.mwem", "ektelo.plans.striped",
    "ektelo.inference.graphical_model", "ektelo.inference.nonneg", "ektelo.plotting",
)


def _small_question_loads(tmp_path: Path, plan: str, *extra: str) -> set[str]:
    (tmp_path / "small.csv").write_text(
        "age,sex\n" + "".join(f"{(7 * i) % 100},{'MF'[i % 2]}\n" for i in range(300)))
    (tmp_path / "small.domain.json").write_text(
        json.dumps({"age": {"range": [0, 99]}, "sex": {"values": ["M", "F"]}}))
    code = (
        "import sys\nfrom ektelo.cli import main\n"
        f"code = main(['run', '--no-ledger', '--data', 'small.csv', '--domain', "
        f"'small.domain.json', '--workload', 'histogram:age', '--plan', {plan!r}, "
        f"'--epsilon', '1', '--seed', '1', *{list(extra)!r}])\n"
        "print('LOADED', ' '.join(sorted(sys.modules)))\nsys.exit(code)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=tmp_path).stdout
    assert out.startswith(f"plan: {plan if plan != 'auto' else 'identity'} (")
    return set(out.split("LOADED", 1)[1].split())


@pytest.mark.parametrize("plan", ["identity", "auto"])
def test_a_small_question_loads_no_heavy_module(tmp_path: Path, plan: str) -> None:
    loaded = _small_question_loads(tmp_path, plan)
    assert "ektelo.plans.data_independent" in loaded  # the probe saw the plan run
    heavy = sorted(m for m in NOT_FOR_A_SMALL_QUESTION if m in loaded)
    assert heavy == [], f"--plan {plan} loaded {heavy}"


def test_protecting_a_vector_loads_no_pandas() -> None:
    """A NumPy vector through the port and a plan: no pandas (nor pyarrow,
    which pandas imports), no SciPy solvers (#41)."""
    code = ("import numpy as np, ektelo\nfrom ektelo import plans\nfrom ektelo.matrix import "
            "Identity\nx = ektelo.protect(np.arange(8.0), epsilon=1.0, seed=0)\n"
            "assert plans.run('identity', x, Identity(8), 1.0).shape == (8,)\n"
            "import sys\nprint(','.join(m for m in ('pandas', 'pyarrow', 'scipy.linalg', "
            "'scipy.sparse.linalg', 'ektelo.engines') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out.split(",") == ["ektelo.engines"]  # the port ran, and loaded none of the rest


@pytest.mark.parametrize("plan", ["identity", "auto"])
def test_a_small_question_loads_no_pandas(tmp_path: Path, plan: str) -> None:
    """The answers are printed from NumPy columns (`ektelo.columns`): no
    pandas, nor the pyarrow it imports (#41: ~0.25 s of CPU)."""
    loaded = _small_question_loads(tmp_path, plan)
    assert "ektelo.columns" in loaded
    assert sorted(m for m in ("pandas", "pyarrow") if m in loaded) == []


@pytest.mark.parametrize("plan", ["identity", "auto"])
def test_a_small_histogram_loads_no_scipy(tmp_path: Path, plan: str) -> None:
    """Its matrices are never materialised: scipy.sparse is imported on first
    use (`ektelo.matrix.lazy`), and here there is none — auto's pricing
    included: Privelet's strategy for 100 cells, padded to 128, is
    Wavelet(128)·Embedding(128, 100), whose sensitivity is read off the
    structure (it was a SciPy product, ~90 ms of CPU with the import)."""
    loaded = _small_question_loads(tmp_path, plan)
    assert sorted(m for m in loaded if m == "scipy" or m.startswith("scipy.")) == []


def test_the_memory_engine_loads_no_duckdb(tmp_path: Path) -> None:
    loaded = _small_question_loads(tmp_path, "identity", "--engine", "memory")
    assert "ektelo.engines.memory" in loaded
    assert sorted(m for m in loaded if m == "duckdb" or m.startswith("duckdb.")) == []
