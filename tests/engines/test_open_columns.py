"""Open columns and partition selection (issue #39; proofs/kernel.md K10).

A domain may declare a column `{"open": true}`: its values are not known in
advance. `select_keys` releases the keys whose noisy count (exact discrete
Gaussian, σ for ρ) reaches τ = c + σ·√(2 ln(c/δₛ)), and `recode` makes the
column an attribute of released keys plus `OTHER_KEY`. Tested here:
* the three engines count the same keys, release the same keys under one
  research seed and recode to the same vectors;
* release probabilities with power: a key at τ + 3σ is (almost) always
  released, one at τ − 3σ (almost) never, one at τ about half the time,
  and a key held by one person (one row, or k rows under a unit bound k)
  never in hundreds of trials; a wrong σ or a τ without c fails them;
* the accounting: ρ charged at the source (c²ρ at the root), δₛ the
  kernel's key_delta·c²ρ/ρ_total, reported in the budget;
* refusals before anything is spent, replays, a durable ledger;
* `Session.release_keys`, SQL grouped by an open column, `ektelo sql`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import ektelo
from ektelo.budget import ZCDP
from ektelo.domain import OTHER_KEY, Domain
from ektelo.engines import DuckDBEngine, MemoryEngine, SparkEngine, open_table
from ektelo.kernel import BudgetExceeded, Kernel
from ektelo.port import protect
from ektelo.session import Session

DOMAIN = Domain.from_dict({"age": 10, "city": {"open": True}})


def towns(rows: int = 6000, seed: int = 0) -> pd.DataFrame:
    """Cities with Zipf-like sizes (the largest ~1,600 rows, the smallest a few)."""
    rng = np.random.default_rng(seed)
    names = np.array([f"town{i:02d}" for i in range(40)])
    p = 1 / np.arange(1, 41)
    frame = pd.DataFrame({"age": rng.integers(0, 10, rows),
                          "city": rng.choice(names, rows, p=p / p.sum())})
    frame.loc[0, "city"] = "a person alone"
    return frame


def test_the_domain_declares_open_columns_and_round_trips() -> None:
    assert DOMAIN.names == ("age",) and DOMAIN.open == ("city",)
    assert Domain.from_dict(DOMAIN.to_dict()) == DOMAIN
    recoded = DOMAIN.with_keys("city", ["b", "a"])
    assert recoded.names == ("age", "city") and recoded.open == ()
    assert recoded["city"].values == ("b", "a", OTHER_KEY)
    with pytest.raises(ValueError, match="open column is"):
        Domain.from_dict({"age": 10, "city": {"open": True, "values": ["x"]}})
    with pytest.raises(ValueError, match="not an open column"):
        DOMAIN.with_keys("age", [])


def _engines(spark: Any) -> dict[str, Any]:
    frame = towns()
    out = {name: open_table(frame, DOMAIN, engine=engine)
           for name, engine in (("memory", MemoryEngine()), ("duckdb", DuckDBEngine()))}
    records = [(int(a), str(c)) for a, c in zip(frame.age, frame.city, strict=True)]
    engine = SparkEngine(session=spark)
    out["spark"] = (engine, engine.open_source(
        spark.createDataFrame(records, "age long, city string"), DOMAIN))
    return out


def test_the_three_engines_agree_on_counts_keys_and_recoding(spark: Any) -> None:
    frame = towns()
    truth = frame[frame.age < 6].city.value_counts()
    released = {}
    for name, (engine, table) in _engines(spark).items():
        member = engine.where(table, ektelo.col("age") < 6, DOMAIN)
        if name != "spark":  # (Spark's counts are read by select_keys below: one job less)
            keys, counts = engine.key_counts(member, "city")
            assert dict(zip(keys, counts.tolist(), strict=True)) == truth.to_dict(), name
        kernel = Kernel(ZCDP(1.0, 1e-6), seed=5, key_delta=1e-6)
        root = kernel.add_engine_table(engine, table, DOMAIN)
        node = kernel.where(root, ektelo.col("age") < 6)
        released[name] = kernel.select_keys(node, "city", rho=0.05)
        recoded = engine.recode(member, "city", list(released[name]))
        x = engine.vectorize(recoded, [1], (len(released[name]) + 1,))
        expected = [int(truth.get(k, 0)) for k in released[name]]
        expected.append(int(truth.sum()) - sum(expected))  # OTHER_KEY: every other key
        np.testing.assert_array_equal(x, expected)
    assert released["memory"] == released["duckdb"] == released["spark"]
    assert "a person alone" not in released["memory"]


def _threshold_table(sigma: float, tau: float) -> tuple[pd.DataFrame, dict[str, int]]:
    sizes = {"high": round(tau + 3 * sigma), "middle": round(tau), "low": round(tau - 3 * sigma),
             "alone": 1}
    rows = [("k", key) for key, n in sizes.items() for _ in range(n)]
    return pd.DataFrame({"age": 0, "city": [r[1] for r in rows]}), sizes


def test_release_probabilities_follow_the_threshold() -> None:
    """300 kernels, one selection each (ρ = 0.02 of 0.08, key_delta 1e-6):
    the key at τ + 3σ released ≥ 297 times, at τ − 3σ ≤ 3, at τ within a 99.9 %
    binomial interval of its exact probability, the lone key never. With σ
    doubled the first two fail; with τ set without c or δₛ the middle one does."""
    rho, total, key_delta = 0.02, 0.08, 1e-6
    sigma = 1 / math.sqrt(2 * rho)  # (the exact sampler's σ is this, on an integer grid)
    share = key_delta * rho / total
    tau = 1 + sigma * math.sqrt(2 * math.log(1 / share))
    frame, sizes = _threshold_table(sigma, tau)
    hits = dict.fromkeys(sizes, 0)
    trials = 300
    for seed in range(trials):
        kernel = Kernel(ZCDP(total, 1e-6), seed=seed, key_delta=key_delta)
        engine, table = open_table(frame, DOMAIN, engine=MemoryEngine())
        root = kernel.add_engine_table(engine, table, DOMAIN)
        for key in kernel.select_keys(root, "city", rho=rho):
            hits[key] += 1
        assert kernel.history[-1].noise_scale == pytest.approx(sigma, rel=0.02)
    assert hits["high"] >= trials - 3 and hits["low"] <= 3 and hits["alone"] == 0
    p_middle = stats.norm.sf((tau - sizes["middle"]) / sigma)
    lo, hi = stats.binom.interval(0.999, trials, p_middle)
    assert lo <= hits["middle"] <= hi, (hits, p_middle)


def test_a_unit_bound_raises_the_threshold_and_the_charge() -> None:
    """Under max_rows_per_unit=k the table is k-stable from the units: the
    threshold starts at c = k (a person's k rows of one key are never
    released), and the root pays k²ρ."""
    k = 4
    rows = [(p, 0, f"town{p % 3}") for p in range(3000)]
    rows += [(99_999, 0, "my own key")] * k
    frame = pd.DataFrame(rows, columns=["person", "age", "city"])
    for seed in range(60):
        table = protect(frame, DOMAIN, epsilon=4.0, delta=1e-6, seed=seed,
                        privacy_unit="person", max_rows_per_unit=k)
        keys = table.select_keys("city", rho=0.01)
        assert keys == ("town0", "town1", "town2")
    (record,) = table.history()
    assert record.charged_at_root == pytest.approx(k * k * 0.01)


def test_the_budget_states_the_keys_delta_and_protect_splits_delta() -> None:
    table = protect(towns(), DOMAIN, epsilon=1.0, delta=1e-6, seed=1)
    budget = table.budget
    assert budget.key_delta == pytest.approx(5e-7) and budget.delta == pytest.approx(5e-7)
    assert "for keys of open columns" in str(budget)
    with pytest.raises(ValueError, match="need an \\(ε, δ\\) budget"):
        protect(towns(), DOMAIN, epsilon=1.0)


def test_refusals_change_nothing() -> None:
    table = protect(towns(), DOMAIN, epsilon=1.0, delta=1e-6, seed=2)
    before = table.budget.spent
    with pytest.raises(ValueError, match="not an open column"):
        table.select_keys("age", rho=0.01)
    with pytest.raises(BudgetExceeded):
        table.select_keys("city", rho=10.0)
    with pytest.raises(TypeError, match="keys must be str"):
        table.recode("city", [1, 2])
    with pytest.raises(ValueError, match="distinct"):
        table.recode("city", ["a", "a"])
    with pytest.raises(ValueError, match="cannot be a key"):
        table.recode("city", [OTHER_KEY])
    with pytest.raises(ValueError, match="not an open column"):
        table.select(["age"]).select_keys("city", rho=0.01)
    assert table.budget.spent == before and table.history() == ()
    pure = Kernel(ektelo.budget.PureDP(1.0), seed=1)
    engine, rows = open_table(towns(), DOMAIN, engine=MemoryEngine())
    root = pure.add_engine_table(engine, rows, DOMAIN)
    with pytest.raises(ValueError, match="key_delta"):
        pure.select_keys(root, "city", rho=0.01)
    with pytest.raises(ValueError, match="zCDP budget"):
        Kernel(ektelo.budget.PureDP(1.0), key_delta=1e-6)


def test_a_durable_ledger_charges_keys_and_replays_them(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    table = protect(towns(), DOMAIN, epsilon=1.0, delta=1e-6, seed=3, ledger=ledger,
                    dataset="towns")
    port = table.port
    from ektelo.port import requests as msg

    first = port.submit(msg.SelectKeys(table.node, "city", 0.01, request_id="keys-1"))
    again = port.submit(msg.SelectKeys(table.node, "city", 0.01, request_id="keys-1"))
    assert first == again and len(first) > 20
    assert table.budget.spent == pytest.approx(0.01)  # the replay charged nothing
    other = protect(towns(), DOMAIN, epsilon=1.0, delta=1e-6, seed=4, ledger=ledger,
                    dataset="towns")
    assert other.budget.spent == pytest.approx(0.01)  # one dataset, one budget


def test_session_release_keys_then_questions_use_them() -> None:
    s = Session(towns(), {"age": 10, "city": {"open": True}}, epsilon=2.0, delta=1e-6,
                seed=6, progress=False)
    keys = s.release_keys("city", epsilon=0.5)
    assert "a person alone" not in keys and "town00" in keys
    assert s.domain["city"].values == (*keys, OTHER_KEY)
    frame = s.histogram("city", epsilon=0.5)
    truth = towns().city.value_counts()
    top = frame.set_index("city").loc["town00", "answer"]
    assert abs(top - truth["town00"]) < 60
    assert len(s.history) == 2


def test_sql_groups_by_an_open_column_with_one_charge() -> None:
    table = protect(towns(), DOMAIN, epsilon=2.0, delta=1e-6, seed=7)
    s = Session.over(table)
    spent = s.spent
    from ektelo.errors import SqlError

    with pytest.raises(SqlError, match="WHERE on open column"):
        s.sql("SELECT COUNT(*) FROM t WHERE city = 'town00'", epsilon=1.0)
    with pytest.raises(SqlError, match="EXPLAIN"):
        s.sql("EXPLAIN SELECT city, COUNT(*) FROM t GROUP BY city", epsilon=1.0)
    assert s.spent == spent
    by_city, by_age = s.sql("SELECT city, COUNT(*) AS n FROM t GROUP BY city "
                            "ORDER BY n DESC LIMIT 3; SELECT age, COUNT(*) FROM t GROUP BY age",
                            epsilon=1.0)
    assert list(by_city["city"]) == ["town00", "town01", "town02"]  # (other) is no group
    assert list(by_age["age"]) == list(range(10))
    assert by_city.attrs["released_keys"]["city"] > 20
    assert len(s.history) == 1
    root_charges = [r for r in table.history() if r.charged_at_root > 0]
    assert len(root_charges) == 1  # keys and answers inside one envelope
    # the keys are public now: a later call groups by them without selecting again
    (again,) = s.sql("SELECT city, COUNT(*) FROM t WHERE age < 3 GROUP BY city", epsilon=0.2)
    assert set(again["city"]) <= {*s.domain["city"].values}
    assert [r.operation for r in table.history()].count("select_keys") == 1


def test_ektelo_sql_on_a_csv_with_an_open_column(tmp_path: Path, capsys: Any) -> None:
    from ektelo.cli import main

    towns().to_csv(tmp_path / "towns.csv", index=False)
    (tmp_path / "towns.json").write_text('{"age": 10, "city": {"open": true}}')
    code = main(["sql", "--data", str(tmp_path / "towns.csv"), "--domain",
                 str(tmp_path / "towns.json"), "--epsilon", "1", "--delta", "1e-6",
                 "--no-ledger", "--seed", "1",
                 "SELECT city, COUNT(*) FROM towns GROUP BY city ORDER BY COUNT(*) DESC LIMIT 2"])
    out = capsys.readouterr().out
    assert code == 0 and "town00" in out and "a person alone" not in out
    # with a durable ledger: the record keeps the half of δ not kept for keys, and
    # a later run stating the same --delta is the same budget
    ledger = ["--ledger", str(tmp_path / "l.db"), "--total", "3"]
    for _ in range(2):
        code = main(["sql", "--data", str(tmp_path / "towns.csv"), "--domain",
                     str(tmp_path / "towns.json"), "--epsilon", "1", "--delta", "1e-6",
                     *ledger, "SELECT city, COUNT(*) FROM towns GROUP BY city"])
        assert code == 0
    assert "plus δ ≤ 5e-07 for keys of open columns" in capsys.readouterr().out


def test_a_key_spelled_like_other_is_never_released() -> None:
    """`(other)` stands for every key not released: a data value spelled so is
    left out before the charge, so the released keys always recode."""
    frame = towns()
    frame.loc[frame.city == "town00", "city"] = OTHER_KEY
    table = protect(frame, DOMAIN, epsilon=1.0, delta=1e-6, seed=8)
    keys = table.select_keys("city", rho=0.01)
    assert OTHER_KEY not in keys and "town01" in keys
    recoded = table.recode("city", keys)  # (never refused after the charge)
    assert recoded.domain["city"].values[-1] == OTHER_KEY


def test_the_threshold_starts_at_the_contribution_bound() -> None:
    """Under max_rows_per_unit=k=4, τ = 4 + σ·√(2 ln(4/δₛ)): a key held by
    exactly τ rows (one per person) is released about half the time — within
    a 99.9 % binomial interval of its exact probability over 100 kernels.
    With τ started at 1 instead of c (the per-row threshold) it would be
    released 2σ more often (≈ 98 %), and the test fails."""
    k, rho, total, key_delta = 4, 0.125, 4.0, 5e-7
    sigma = 1 / math.sqrt(2 * rho)  # 2
    share = key_delta * k * k * rho / total
    tau = k + sigma * math.sqrt(2 * math.log(k / share))
    middle = round(tau)
    frame = pd.DataFrame({"person": range(middle + 500), "age": 0,
                          "city": ["middle"] * middle + ["big"] * 500})
    hits, trials = 0, 100
    for seed in range(trials):
        table = protect(frame, DOMAIN, rho=total, delta=2 * key_delta, seed=seed,
                        privacy_unit="person", max_rows_per_unit=k)
        hits += "middle" in table.select_keys("city", rho=rho)
    p = stats.norm.sf((tau - middle) / sigma)
    lo, hi = stats.binom.interval(0.999, trials, p)
    assert lo <= hits <= hi, (hits, p)
