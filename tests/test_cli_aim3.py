"""AIM for 3-way marginals through the front door (issue #25): `ektelo run
--workload marginals:3:… --plan aim` on a census-like table that `ektelo
generate` writes (the project's own data, no shared files): every 3-way
marginal's cells in order with decoded labels, answers read off AIM's model,
AIM's progress on stderr, and the ledger charged exactly the question's ρ."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ektelo import ledger_store as store
from ektelo.budget import rho_of_epsilon_delta
from ektelo.cli import main
from ektelo.datasets import MARITAL, RACE

ATTRS = ["age", "sex", "race", "marital"]  # domain order of census_like
SIZES = {"age": 72, "sex": 2, "race": 4, "marital": 7}


@pytest.fixture(scope="module")
def census(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("census")
    data = folder / "census.csv"
    assert main(["generate", "--rows", "3000", "--seed", "5", "--out", str(data)]) == 0
    return data, data.with_suffix(".domain.json")


def test_run_answers_three_way_marginals_through_aim(census, tmp_path, capsys) -> None:
    data, domain = census
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "triples.csv"
    code = main(["run", "--data", str(data), "--domain", str(domain),
                 "--workload", "marginals:3:" + ",".join(ATTRS), "--plan", "aim",
                 "--epsilon", "0.8", "--delta", "1e-9", "--total", "1",
                 "--ledger", str(ledger), "--param", "rounds=8", "--param", "maxiter=50",
                 "--out", str(out)])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "plan: aim" in captured.out
    assert "aim round 1:" in captured.err  # AIM's progress, one line per round
    frame = pd.read_csv(out, keep_default_na=False)
    triples = list(itertools.combinations(ATTRS, 3))
    assert list(frame["marginal"].unique()) == ["×".join(t) for t in triples]
    sizes = frame.groupby("marginal", sort=False).size()
    assert list(sizes) == [math.prod(SIZES[a] for a in t) for t in triples]
    assert len(frame) == 56 * 1 + 576 + 1008 + 2016
    assert frame["ci_method"].str.startswith("none: graphical-model estimate (aim").all()
    # labels: the cells of each marginal in C order of its attributes, decoded
    first = frame[frame["marginal"] == "age×sex×race"]
    expected = list(itertools.product(range(18, 90), ["F", "M"], RACE))  # age: bins
    ages = first["age_lo"].astype(float).astype(int)
    got = list(zip(ages, first["sex"], first["race"], strict=True))
    assert got == expected
    assert (first["marital"] == "").all()  # the attribute summed over is NA
    assert set(frame.loc[frame["marital"] != "", "marital"]) <= set(MARITAL)
    # one model answers all four: every marginal sums to its total
    sums = frame.groupby("marginal", sort=False)["answer"].sum()
    assert np.allclose(sums, sums.iloc[0], rtol=1e-6) and abs(sums.iloc[0] - 3000) < 300
    # the ledger: exactly the question's ρ, charged once
    (record,) = store.open_store(str(ledger)).datasets()
    assert float(record.spent) == pytest.approx(rho_of_epsilon_delta(0.8, 1e-9), rel=1e-12)
