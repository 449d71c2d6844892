"""`Session.sql` and `ektelo sql` (issue #39): statements answered jointly
with one charge, answers near pandas' at a large ε, EXPLAIN spends nothing
and states the errors the answers then carry, ORDER BY / LIMIT on released
answers, refused SQL spends nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from ektelo.cli import main
from ektelo.errors import SqlError
from ektelo.session import Session

DOMAIN = {"sex": {"values": ["F", "M"]}, "race": 4, "age": 12,
          "hours": {"values": [0, 10, 20, 40, 60]}}
TEXT = ("SELECT sex, COUNT(*) AS n, SUM(hours) AS h, AVG(hours) AS m FROM t "
        "WHERE age BETWEEN 2 AND 9 GROUP BY sex; "
        "SELECT race, COUNT(*) FROM t WHERE sex = 'M' OR age < 3 GROUP BY race "
        "ORDER BY COUNT(*) DESC LIMIT 2; "
        "SELECT FLOOR(age / 4) * 4 AS band, COUNT(*) FROM t GROUP BY band")


def _table(rows: int = 3000, seed: int = 11) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"sex": rng.choice(["F", "M"], rows, p=[0.4, 0.6]),
                         "race": rng.choice(4, rows, p=[0.5, 0.3, 0.15, 0.05]),
                         "age": rng.integers(0, 12, rows),
                         "hours": rng.choice([0, 10, 20, 40, 60], rows)})


def test_statements_are_answered_jointly_with_one_charge() -> None:
    df = _table()
    s = Session(df, DOMAIN, epsilon=1e6, seed=3, progress=False)
    first, second, third = s.sql(TEXT, epsilon=1e5)
    assert s.spent == pytest.approx(1e5)
    assert len(s.history) == 1  # one workload, one charge
    kept = df[df.age.between(2, 9)]
    g = kept.groupby("sex")["hours"]
    by_select = {k: v.reset_index(drop=True) for k, v in first.groupby("select", sort=False)}
    np.testing.assert_allclose(by_select["n"]["answer"], g.size().to_numpy(), atol=0.5)
    np.testing.assert_allclose(by_select["h"]["answer"], g.sum().to_numpy(), atol=5)
    np.testing.assert_allclose(by_select["m"]["answer"], g.mean().to_numpy(), atol=0.05)
    # the mean's Fieller interval from the joint noise covariance of its sum and count
    assert np.isfinite(by_select["m"]["std_error"]).all()
    assert (by_select["m"]["ci_low"] <= by_select["m"]["answer"]).all()
    assert (by_select["m"]["answer"] <= by_select["m"]["ci_high"]).all()
    assert list(first.columns[:2]) == ["select", "sex"]
    assert {"std_error", "ci_low", "ci_high", "ci_method"} <= set(first.columns)
    # ORDER BY COUNT(*) DESC LIMIT 2: the two largest races, largest first
    counts = df[(df.sex == "M") | (df.age < 3)].groupby("race").size()
    assert list(second["race"]) == list(counts.sort_values(ascending=False).index[:2])
    np.testing.assert_allclose(second["answer"], counts.sort_values(ascending=False)[:2],
                               atol=0.5)
    bands = df.groupby(df.age // 4 * 4).size()
    assert list(third["band"]) == [0, 4, 8]
    np.testing.assert_allclose(third["answer"], bands.to_numpy(), atol=0.5)


def test_explain_spends_nothing_and_states_the_errors_answers_carry() -> None:
    s = Session(_table(), DOMAIN, epsilon=3.0, seed=4, progress=False)
    text = "SELECT sex, race, COUNT(*) FROM t GROUP BY sex, race; SELECT SUM(hours) FROM t"
    explained = s.sql("EXPLAIN " + text.replace("; ", "; EXPLAIN "), epsilon=1.0)
    assert s.spent == 0 and len(s.history) == 0
    same = s.sql(text, epsilon=1.0, explain=True)
    assert s.spent == 0
    answered = s.sql(text, epsilon=1.0)
    assert s.spent == pytest.approx(1.0)
    for e, x, a in zip(explained, same, answered, strict=True):
        np.testing.assert_allclose(e["expected_std_error"], x["expected_std_error"])
        np.testing.assert_allclose(e["expected_std_error"], a["std_error"], rtol=1e-9)
        assert e.attrs["plan"] == a.attrs["plan"]


def test_joint_noise_is_smaller_than_one_at_a_time() -> None:
    """The planner's joint strategy against each statement alone at ε/k:
    the expected total squared error, from EXPLAIN (nothing spent)."""
    s = Session(_table(), DOMAIN, epsilon=3.0, seed=4, progress=False)
    statements = ["SELECT sex, race, COUNT(*) FROM t GROUP BY sex, race",
                  "SELECT sex, COUNT(*) FROM t GROUP BY sex",
                  "SELECT race, COUNT(*) FROM t GROUP BY race",
                  "SELECT COUNT(*) FROM t"]
    joint = s.sql("; ".join(statements), epsilon=1.0, explain=True)
    total_joint = sum(float((f["expected_std_error"] ** 2).sum()) for f in joint)
    total_alone = sum(float((s.sql(t, epsilon=1.0 / len(statements), explain=True)[0]
                             ["expected_std_error"] ** 2).sum()) for t in statements)
    assert total_joint < total_alone / 2
    # EXPLAIN states both figures
    assert joint[0].attrs["expected_total"] == pytest.approx(total_joint)
    assert joint[0].attrs["one_at_a_time_total"] == pytest.approx(total_alone)


def test_sql_under_zcdp_has_gaussian_intervals() -> None:
    df = _table()
    s = Session(df, DOMAIN, epsilon=4.0, delta=1e-6, seed=6, progress=False)
    (frame,) = s.sql("SELECT sex, COUNT(*), AVG(hours) FROM t WHERE age < 6 GROUP BY sex",
                     epsilon=1.0)
    assert s.budget.unit == "rho" and len(s.history) == 1
    assert frame["ci_method"].astype(str).str.contains("Gaussian").all()
    means = frame[frame["select"] == "AVG(hours)"]
    assert np.isfinite(means["std_error"]).all()
    truth = df[df.age < 6].groupby("sex")["hours"].mean().to_numpy()
    assert (np.abs(means["answer"].to_numpy() - truth) < 6 * means["std_error"]).all()


def test_an_empty_filter_and_a_bare_count() -> None:
    """A filter no cell satisfies answers 0 exactly (no noise reaches it) and
    its means are stated NaN; COUNT(*) without keys is one row."""
    df = _table()
    s = Session(df, DOMAIN, epsilon=5.0, seed=2, progress=False)
    empty, total = s.sql("SELECT sex, COUNT(*), AVG(hours) FROM t WHERE age < 0 GROUP BY sex; "
                         "SELECT COUNT(*) FROM t", epsilon=1.0)
    counts = empty[empty["select"] == "COUNT(*)"]
    assert list(counts["answer"]) == [0.0, 0.0] and list(counts["std_error"]) == [0.0, 0.0]
    assert empty.loc[empty["select"] == "AVG(hours)", "answer"].isna().all()
    assert list(total.columns[:2]) == ["select", "answer"] and len(total) == 1
    assert abs(float(total["answer"].iloc[0]) - len(df)) < 5 * float(total["std_error"].iloc[0])


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(DISTINCT age) FROM t",
    "SELECT sex, COUNT(*) FROM t GROUP BY sex; SELECT a.age, COUNT(*) FROM t a JOIN u b ON "
    "a.x = b.x GROUP BY a.age",
    "SELECT race, COUNT(*) OVER (PARTITION BY sex) FROM t",
    "SELECT COUNT(*) FROM t WHERE age IN (SELECT age FROM t)",
])
def test_refused_sql_spends_nothing(sql: str) -> None:
    s = Session(_table(), DOMAIN, epsilon=2.0, seed=1, progress=False)
    before = s.remaining
    with pytest.raises(SqlError):
        s.sql(sql, epsilon=1.0)
    assert s.remaining == before and s.spent == 0 and len(s.history) == 0


def test_cli_sql_explain_answers_and_refusal(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "t.csv"
    _table(500).to_csv(data, index=False)
    domain = tmp_path / "d.json"
    domain.write_text(json.dumps(DOMAIN))
    base = ["sql", "--data", str(data), "--domain", str(domain), "--epsilon", "1",
            "--no-ledger", "--seed", "2", "--engine", "memory"]
    text = "SELECT sex, COUNT(*) FROM t GROUP BY sex; SELECT AVG(hours) FROM t"
    assert main([*base, "--explain", text]) == 0
    out = capsys.readouterr().out
    assert "nothing spent" in out and "expected_std_error" in out and "plan:" in out
    target = tmp_path / "ans.csv"
    assert main([*base, "--out", str(target), text]) == 0
    one, two = pd.read_csv(tmp_path / "ans-1.csv"), pd.read_csv(tmp_path / "ans-2.csv")
    assert list(one["sex"]) == ["F", "M"] and len(two) == 1
    assert {"answer", "std_error", "ci_low", "ci_high", "ci_method"} <= set(one.columns)
    assert main([*base, "--out", str(tmp_path / "x.json"), "SELECT MAX(age) FROM t"]) == 2
    err = capsys.readouterr().err
    assert "MAX(age)" in err and "nothing was spent" in err
    assert not (tmp_path / "x.json").exists()


def test_an_or_filter_carries_its_exact_standard_error() -> None:
    """WHERE a OR b is a sum of disjoint mask terms; the answer's standard error
    is that of the summed rows (exact), not the terms' Minkowski bound. Identity
    at ε = 1: race r's count sums 12 + 3 = 15 Laplace(1) cells, std √30 = 5.48
    (the bound said √24 + √6 = 7.35); 100 seeded draws × 4 races agree within 12 %."""
    from ektelo.sql.run import TERMS_BOUND

    df = _table()
    text = "SELECT race, COUNT(*) FROM t WHERE sex = 'M' OR age < 3 GROUP BY race"
    s = Session(df, DOMAIN, epsilon=1e6, seed=21, progress=False)
    (expected,) = s.sql(text, epsilon=1.0, plan="identity", explain=True)
    np.testing.assert_allclose(expected["expected_std_error"], np.sqrt(30.0), rtol=1e-9)
    assert not expected["ci_method"].astype(str).str.contains(TERMS_BOUND, regex=False).any()
    truth = df[(df.sex == "M") | (df.age < 3)].groupby("race").size().to_numpy()
    errors = []
    for _ in range(100):
        (f,) = s.sql(text, epsilon=1.0, plan="identity")
        np.testing.assert_allclose(f["std_error"], np.sqrt(30.0), rtol=1e-9)
        errors.append(f["answer"].to_numpy() - truth)
    empirical = float(np.std(np.concatenate(errors)))
    assert abs(empirical / np.sqrt(30.0) - 1) < 0.12, empirical


def test_an_or_filter_after_a_data_dependent_plan_is_exact_too() -> None:
    """A least-squares data-dependent plan (DAWA) has its noise-only standard
    error after measuring: the OR count's comes from the summed rows (no
    bound named in `ci_method`)."""
    from ektelo.sql.run import TERMS_BOUND

    s = Session(_table(), DOMAIN, epsilon=10.0, seed=5, progress=False)
    (f,) = s.sql("SELECT COUNT(*) FROM t WHERE sex = 'M' OR age < 3", epsilon=1.0, plan="dawa")
    assert f.attrs["plan"] == "dawa"
    assert not f["ci_method"].astype(str).str.contains(TERMS_BOUND, regex=False).any()
    assert np.isfinite(f["std_error"]).all() and (f["std_error"] > 0).all()


MIX_APART = ("SELECT sex, COUNT(*) FROM t GROUP BY sex; "
             "SELECT race, COUNT(*) FROM t WHERE age >= 3 GROUP BY race")
MIX_JOINT = ("SELECT age, COUNT(*) FROM t GROUP BY age; "
             "SELECT race, sex, COUNT(*) FROM t GROUP BY race, sex")


def _session(epsilon: float, seed: int, **budget: float) -> tuple[Session, Any]:
    """A session over a table protected here, and its handle (the kernel's history)."""
    from ektelo import Domain, protect

    table = protect(_table(), Domain.from_dict(DOMAIN), epsilon=epsilon, seed=seed, **budget)
    return Session.over(table), table


def _root_charges(table: Any) -> list[float]:
    return [r.charged_at_root for r in table.history() if r.charged_at_root > 0]


def test_where_joint_loses_each_statement_is_answered_alone_still_charged_once() -> None:
    """One product strategy over the union serves this mix badly (expected
    total 80 jointly vs 48 apart at ε = 1): `auto` answers each statement by
    its own plan with ε/2 inside one envelope — one charge at the root —
    and EXPLAIN states the errors the answers then carry."""
    from ektelo.sql.run import explain_text

    s, table = _session(10.0, 5)
    explained = s.sql(MIX_APART, epsilon=1.0, explain=True)
    assert s.spent == 0
    a = explained[0].attrs
    assert a["mode"] == "one at a time"
    assert a["one_at_a_time_total"] < a["expected_total"]
    assert "one charge" in explain_text(explained)
    answered = s.sql(MIX_APART, epsilon=1.0)
    assert s.spent == pytest.approx(1.0)
    assert _root_charges(table) == [pytest.approx(1.0)]  # one envelope, nothing else at the root
    assert len(s.history) == 1 and s.history["plan"].iloc[0].startswith("one at a time")
    for e, x in zip(explained, answered, strict=True):
        assert x.attrs["mode"] == "one at a time"
        assert e.attrs["plan"] == x.attrs["plan"]
        np.testing.assert_allclose(e["expected_std_error"], x["std_error"], rtol=1e-9)
    total = sum(float(np.sum(x["std_error"].to_numpy() ** 2)) for x in answered)
    assert total == pytest.approx(a["one_at_a_time_total"], rel=1e-9)
    # a named plan is the caller's choice: answered jointly
    (named, _) = s.sql(MIX_APART, epsilon=1.0, plan="hdmm")
    assert named.attrs["mode"] == "joint"


def test_answering_apart_is_all_or_nothing() -> None:
    """The envelope is checked whole before any statement runs: a budget
    that covers one share but not both spends nothing."""
    from ektelo.kernel import BudgetExceeded

    s, table = _session(1.5, 6)
    s.sql(MIX_APART, epsilon=1.0)
    with pytest.raises(BudgetExceeded):
        s.sql(MIX_APART, epsilon=1.0)
    assert s.spent == pytest.approx(1.0)
    assert len(_root_charges(table)) == 1


def test_where_joint_wins_it_stays_joint_and_zcdp_shares_rho() -> None:
    s = Session(_table(), DOMAIN, epsilon=10.0, seed=7, progress=False)
    frames = s.sql(MIX_JOINT, epsilon=1.0)
    a = frames[0].attrs
    assert a["mode"] == "joint"
    z, table = _session(10.0, 8, delta=1e-6)
    frames = z.sql(MIX_APART, epsilon=1.0)
    if frames[0].attrs["mode"] == "one at a time":  # k shares of ρ add up to the question's ρ
        from ektelo.budget import rho_of_epsilon_delta

        assert _root_charges(table) == [pytest.approx(rho_of_epsilon_delta(1.0, 1e-6))]
    assert len(_root_charges(table)) == 1
