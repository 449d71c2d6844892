"""`ektelo.session.Session`: tidy answers, intervals labelled, preview that
spends nothing, budgets that carry over (in memory and in a ledger file), the
data holder's cleaning, and the frictions of issue #27."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from ektelo import BudgetExceeded
from ektelo.matrix import Prefix
from ektelo.session import LargeVectorWarning, Session

DOMAIN = {
    "age": {"range": [18, 27], "width": 1},            # integer labels 18..27
    "sex": {"values": ["F", "M"]},
    "income": {"bins": [0, 10, 20, 50, 100]},           # binned
    "rate": 5,                                          # integer codes 0..4
}


def table(rows: int = 2000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.integers(18, 28, rows),
        "sex": rng.choice(["F", "M"], rows),
        "income": rng.uniform(0, 99.9, rows),
        "rate": rng.integers(0, 5, rows),
    })


def session(**kw) -> Session:
    kw.setdefault("epsilon", 10.0)
    return Session(table(), DOMAIN, seed=kw.pop("seed", 1), **kw)


def test_tidy_columns_per_question():
    s = session()
    h = s.histogram(["sex", "income"], epsilon=0.5)
    assert list(h.columns) == ["sex", "income_lo", "income_hi", "answer", "std_error",
                               "ci_low", "ci_high", "ci_method"]
    assert list(h["sex"]) == ["F"] * 4 + ["M"] * 4 and h["income_hi"].iloc[0] == 10
    c = s.cdf("age", by="sex", epsilon=0.5)
    assert list(c.columns[:2]) == ["age_at_most", "sex"] and len(c) == 10 * 3
    assert c["sex"].isna().sum() == 10  # the "all sexes" rows
    r = s.ranges("income", [(0, 20), (20, 100)], epsilon=0.5)
    assert r[["income_lo", "income_hi"]].values.tolist() == [[0, 20], [20, 100]]
    m = s.marginals(["sex", "rate"], k=1, epsilon=0.5)
    assert list(m["marginal"].unique()) == ["sex", "rate"]
    assert m.loc[m["marginal"] == "sex", "rate"].isna().all()
    assert str(m["rate"].dtype) == "Int8"  # codes stay integers beside NA (the narrowest)
    w = s.workload(Prefix(5), "rate", epsilon=0.5)
    assert list(w["query"]) == [0, 1, 2, 3, 4]
    for frame in (h, c, r, m, w):
        assert frame["ci_method"].str.len().gt(0).all()
        assert frame["std_error"].notna().all()


def test_small_histogram_gets_a_closed_form_plan_and_intervals():
    """Issue #27: auto picked DAWA for a 5-cell histogram and error bars vanished."""
    s = session()
    h = s.histogram("rate", epsilon=0.5)
    assert h.attrs["plan"] != "dawa" and "expected error" in h.attrs["why"]
    assert h["std_error"].gt(0).all() and (h["ci_high"] > h["ci_low"]).all()
    assert (h["ci_method"] == "exact Laplace").all()


def test_preview_spends_nothing_and_matches_the_answer():
    s = session()
    p = s.preview("cdf", "age", epsilon=0.5)
    assert s.spent == 0
    answer = s.cdf("age", epsilon=0.5, plan=p.plan)
    np.testing.assert_allclose(answer["std_error"], p.std_error)
    np.testing.assert_allclose(answer["ci_high"] - answer["answer"], p.ci_half_width)
    assert s.spent == pytest.approx(0.5)
    assert "plan" in str(p) and set(p.candidates["plan"]) >= {"identity", "hb", "hdmm"}
    assert s.preview("cdf:age by sex", epsilon=0.5).rmse > 0


def test_budget_accumulates_and_refuses_at_the_cap():
    s = session(epsilon=1.0)
    s.histogram("sex", epsilon=0.6)
    assert s.spent == pytest.approx(0.6) and s.remaining == pytest.approx(0.4)
    with pytest.raises(BudgetExceeded):
        s.histogram("sex", epsilon=0.5)
    assert s.spent == pytest.approx(0.6)  # the refusal changed nothing
    assert list(s.history["plan"]) == [s.history["plan"].iloc[0]] and len(s.history) == 1


def test_ledger_file_carries_the_budget_across_sessions(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    first = Session(table(), DOMAIN, epsilon=1.0, ledger=ledger, dataset="survey")
    first.histogram("sex", epsilon=0.4)
    second = Session(table(), DOMAIN, epsilon=1.0, ledger=ledger, dataset="survey")
    assert second.spent == pytest.approx(0.4)
    second.histogram("rate", epsilon=0.4)
    third = Session(table(), DOMAIN, epsilon=1.0, ledger=ledger, dataset="survey")
    with pytest.raises(BudgetExceeded):
        third.histogram("sex", epsilon=0.4)
    assert third.remaining == pytest.approx(0.2)
    with pytest.raises(ValueError, match="cap never changes"):
        Session(table(), DOMAIN, epsilon=2.0, ledger=ledger, dataset="survey")


def test_post_processing_never_spends():
    s = session()
    raw = s.cdf("age", epsilon=0.05, plan="identity")
    spent = s.spent
    s2 = session()
    clean = s2.cdf("age", epsilon=0.05, plan="identity", nonnegative=True, consistent=True,
                   round=True)
    assert s2.spent == pytest.approx(spent)
    values = clean["answer"].to_numpy()
    assert (values >= 0).all() and (np.diff(values) >= 0).all()
    assert np.array_equal(values, np.round(values))
    assert (clean["ci_low"] >= 0).all()
    # the same seed: the unprocessed answers are the same draws
    np.testing.assert_allclose(raw["std_error"], clean["std_error"])


def test_on_invalid_drop_and_clamp():
    dirty = table().astype({"rate": object, "age": float})
    dirty.loc[0, "rate"] = ""          # a blank cell
    dirty.loc[1, "age"] = 95           # out of range: clamped to 27
    with pytest.raises(ValueError, match="on_invalid='drop' or 'clamp'"):
        Session(dirty, DOMAIN, epsilon=1.0)
    dropped = Session(dirty, DOMAIN, epsilon=1e4, seed=0, on_invalid="drop")
    total = dropped.histogram("sex", epsilon=1e4, plan="identity")["answer"].sum()
    assert total == pytest.approx(len(dirty) - 2, abs=1)
    with pytest.raises(ValueError, match="cannot be clamped"):
        Session(dirty, DOMAIN, epsilon=1.0, on_invalid="clamp")  # a blank has no nearest value
    dirty.loc[0, "rate"] = 7
    clamped = Session(dirty, DOMAIN, epsilon=1e4, seed=0, on_invalid="clamp")
    ages = clamped.histogram("age", epsilon=1e4, plan="identity")
    assert ages["answer"].sum() == pytest.approx(len(dirty), abs=1)


def test_where_text_checked_against_the_domain_in_its_own_syntax():
    s = session()
    f = s.histogram("sex", where="age >= 20 and income >= 20", epsilon=0.5)
    assert len(f) == 2
    with pytest.raises(ValueError, match=r"`income > 20`.*use < or >= at a bin edge"):
        s.histogram("sex", where="income > 20", epsilon=0.5)
    with pytest.raises(ValueError, match=r"not a bin edge \(nearest: 20 and 50\)"):
        s.histogram("sex", where="income >= 30", epsilon=0.5)
    assert s.spent == pytest.approx(0.5)  # refused before spending


def test_binned_range_bounds_are_edges():
    s = session()
    with pytest.raises(ValueError, match=r"upper bound 19 is not a bin edge \(nearest edges: 10 "
                                         r"and 20\)"):
        s.ranges("income", [(0, 19)], epsilon=0.5)
    assert s.spent == 0


def test_a_nonlinear_plan_says_it_has_no_interval():
    s = session()
    f = s.histogram("rate", epsilon=1.0, plan="mwem", params={"rounds": 2})
    assert f["ci_low"].isna().all() and f["ci_method"].str.startswith("none:").all()


def test_a_huge_vector_warns_and_names_the_alternative():
    big = {f"a{i}": 40 for i in range(4)}  # 2.56 million cells
    frame = pd.DataFrame({f"a{i}": [0, 1, 2] for i in range(4)})
    s = Session(frame, big, epsilon=1.0, seed=0)
    with pytest.warns(LargeVectorWarning, match="marginals_direct"), \
            pytest.raises(TypeError, match="no parameter"):  # warned before anything runs
        s.histogram(list(big), epsilon=0.1, plan="identity", params={"nosuch": 1})
    assert s.spent == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = s.marginals(list(big), k=2, epsilon=0.1)  # one by one: no warning
    assert m.attrs["plan"] == "marginals_direct" and (m["ci_method"] == "exact Laplace").all()


def test_zcdp_session_uses_gaussian_plans():
    s = Session(table(), DOMAIN, epsilon=1.0, delta=1e-9, seed=2)
    f = s.cdf("age", epsilon=0.5)
    assert (f["ci_method"] == "exact Gaussian").all()
    assert s.unit == "rho" and 0 < s.spent < s.budget.total
    with pytest.raises(ValueError, match="zCDP"):
        session().histogram("sex", rho=0.1)


def test_a_plan_is_refused_whole_not_half_way():
    """DAWA charges its partition, then its measurement: a question the budget
    cannot cover is refused before the first step."""
    s = session(epsilon=1.0)
    s.histogram("age", epsilon=0.7, plan="identity")
    with pytest.raises(BudgetExceeded, match="nothing was spent"):
        s.cdf("age", epsilon=0.5, plan="dawa")
    assert s.spent == pytest.approx(0.7) and len(s.history) == 1
