"""The mwem-variants experiment (Table 4), quick version, end to end."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import experiments
from experiments.common import shared_data_dir

pytestmark = pytest.mark.skipif(
    shared_data_dir() is None or not (shared_data_dir() / "dpbench" / "1d").exists(),
    reason="needs the shared DPBench data",
)

COLUMNS = [
    "dataset", "plan", "trials", "error", "error_sd", "seconds", "wall_seconds",
    "improvement", "time_vs_mwem",
]  # fmt: skip


def test_quick_run_writes_table_and_figure(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    table = experiments.run("mwem-variants", out=tmp_path, quick=True)
    csv = pd.read_csv(tmp_path / "mwem-variants.csv")
    assert list(csv.columns) == COLUMNS
    assert len(csv) == 2 * 4  # two datasets × four plans
    assert set(csv.plan) == {"mwem", "mwem_b", "mwem_c", "mwem_d"}
    assert csv.groupby("dataset").plan.nunique().eq(4).all()
    assert (csv.trials == 1).all()
    for col in ("error", "seconds", "improvement", "time_vs_mwem"):
        values = csv[col].to_numpy(dtype=float)
        assert np.all(np.isfinite(values)) and np.all(values > 0), col
    assert np.allclose(csv[csv.plan == "mwem"].improvement, 1.0)
    assert (tmp_path / "mwem-variants.png").stat().st_size > 0
    pd.testing.assert_frame_equal(table.reset_index(drop=True), csv, check_dtype=False)
    printed = capsys.readouterr().out
    assert "Table 4" in printed and "paper mean" in printed


def test_summary_factors_are_finite_and_positive() -> None:
    from experiments.mwem_variants import summarise

    rows = []
    for d, scale in (("A", 1.0), ("B", 2.0)):
        for plan, err, sec in (("mwem", 4.0, 1.0), ("mwem_b", 1.0, 3.0), ("mwem_c", 4.0, 1.0),
                               ("mwem_d", 2.0, 2.0)):  # fmt: skip
            rows.append({"dataset": d, "plan": plan, "error": err * scale, "seconds": sec})
    table = pd.DataFrame(rows)
    base = table[table.plan == "mwem"].set_index("dataset")
    table["improvement"] = table.dataset.map(base.error) / table.error
    summary = summarise(table).set_index("variant")
    assert summary.loc["(b) mwem_b", "mean"] == pytest.approx(4.0)
    assert summary.loc["(c) mwem_c", "max"] == pytest.approx(1.0)
    assert summary.loc["(d) mwem_d", "runtime"] == pytest.approx(2.0)
    for col in ("min", "mean", "max", "runtime"):
        assert all(math.isfinite(v) and v > 0 for v in summary[col])
