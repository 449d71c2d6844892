"""`ektelo run --plan auto --explain` and `Session.preview` show the
planner's Tier 0 ranking (issue #29): each candidate with its expected error
and how it was found, the choice and why — free, no features charged."""

from __future__ import annotations

from pathlib import Path

import pytest

from ektelo.cli import main


@pytest.fixture(scope="module")
def census(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    csv = tmp_path_factory.mktemp("census") / "census.csv"
    assert main(["generate", "--out", str(csv), "--rows", "2000"]) == 0
    return csv, csv.with_suffix(".domain.json")


def _rows(out):
    """The ranking's lines by plan name (" * 1. hdmm  ±11 (exact)  note")."""
    rows = {}
    for line in out.splitlines():
        parts = line.replace("*", " ").split()
        if len(parts) > 2 and parts[0].endswith(".") and parts[0][:-1].isdigit():
            rows[parts[1]] = line
    return rows


def _explain(census, capsys, *extra):
    data, domain = census
    code = main(["run", "--no-ledger", "--data", str(data), "--domain", str(domain),
                 "--epsilon", "0.5", "--explain", *extra])
    return code, capsys.readouterr().out


def test_explain_prints_the_ranking_and_the_choice(census, capsys):
    code, out = _explain(census, capsys, "--workload", "cdf:age")
    assert code == 0
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Tier 0 ranking"))
    assert "free" in lines[head] and "charges no Tier 1 features" in lines[head]
    ranked = _rows(out)
    assert {"identity", "hb", "privelet", "hdmm"} <= set(ranked)
    chosen = [name for name, r in ranked.items() if r.lstrip().startswith("*")]
    choice_line = next(line for line in lines if line.startswith("choice: "))
    assert chosen == [choice_line.split()[1]]
    errors = [float(r.split("RMSE ")[1].split()[0]) for r in ranked.values() if "RMSE " in r]
    assert errors and "±" not in "".join(ranked.values())  # one word per error figure
    assert errors == sorted(errors) and "(exact)" in out  # best first, method shown
    assert "nothing spent" in out


def test_explain_marks_monte_carlo_and_data_dependent(tmp_path, capsys):
    """2048 cells: the hierarchies' errors need a dense 2048×2048 inverse, so
    they are priced by Monte-Carlo and marked so; DAWA is data-dependent (and not
    chosen without a row count: `planner.evidence`)."""
    import json

    import numpy as np
    import pandas as pd

    (tmp_path / "d.json").write_text(json.dumps({"v": {"range": [0, 2047]}}))
    rng = np.random.default_rng(0)
    pd.DataFrame({"v": rng.integers(0, 2048, 3000)}).to_csv(tmp_path / "t.csv", index=False)
    code = main(["run", "--no-ledger", "--data", str(tmp_path / "t.csv"), "--domain",
                 str(tmp_path / "d.json"), "--epsilon", "1", "--explain", "--workload", "cdf:v"])
    out = capsys.readouterr().out
    assert code == 0
    rows = _rows(out)
    for name in ("hb", "h2", "privelet"):
        assert "(Monte-Carlo)" in rows[name] and "seeds" in rows[name], rows[name]
    assert "(exact)" in rows["identity"]
    # DAWA is listed, data-dependent, and not chosen blind: on the training
    # grid it errs more than the best data-independent plan at some scale
    assert "data-dependent" in rows["dawa"] and not rows["dawa"].lstrip().startswith("*")
    assert "training grid" in rows["dawa"] and "choice: dawa" not in out


def test_preview_shows_the_ranking_for_free(census):
    from ektelo.session import Session

    data, domain = census
    s = Session(str(data), str(domain), epsilon=1.0)
    p = s.preview("cdf", "age", epsilon=0.5)
    assert s.budget.spent == 0
    assert p.ranking.startswith("Tier 0 ranking") and f"choice: {p.plan}" in p.ranking
    assert {"plan", "expected_rmse", "method", "note"} <= set(p.candidates.columns)
    exact = p.candidates.dropna(subset=["expected_rmse"])
    assert list(exact["expected_rmse"]) == sorted(exact["expected_rmse"])
    assert set(exact["method"]) <= {"exact", "monte-carlo"}
    assert s.preview("histogram", "sex", epsilon=0.5, plan="identity").ranking == ""
