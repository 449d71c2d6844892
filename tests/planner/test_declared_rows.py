"""The planner with a row count the custodian declared public (issue #29):
the decision table's `declared` trees split on public facts only, nothing is
spent on features, the plan runs with the whole ε, and `auto_plan` (free)
chooses exactly what `plan_auto` runs."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import ektelo
from ektelo import plans
from ektelo.matrix import Prefix
from ektelo.planner import PUBLIC_FEATURES, DecisionTable, Features, auto_plan, plan_auto, table
from tests.planner.test_plan_auto import N, data, spent  # the same 256-cell counts

# Below 10³ rows·ε the identity's Tier 0 pick, above it DAWA: public facts only.
DECLARED = {"feature": "log10_signal", "threshold": 3.0,
            "below": {"plan": "tier0"}, "above": {"plan": "dawa"}}
# The bought-features tree always names privelet: a run that walks it is told apart.
BOUGHT = {"plan": "privelet"}


@pytest.fixture(autouse=True)
def no_shipped_table(monkeypatch, tmp_path):
    monkeypatch.setattr(table, "DEFAULT_PATH", tmp_path / "absent.json")


def hand_table(declared=None, trees=None):
    return DecisionTable.from_dict({
        "version": 1, "share": 0.1, "trained_on": "test",
        "trees": {"1d-prefix": BOUGHT} if trees is None else trees,
        "declared": {"1d-prefix": DECLARED} if declared is None else declared})


def test_declared_rows_spend_nothing_on_features_and_follow_the_tree():
    x = ektelo.protect(data(10**5), epsilon=1.0, seed=2)
    est, choice = plan_auto(x, Prefix(N), 0.8, kind="prefix", table=hand_table(), rows=10**5)
    assert choice.plan == "dawa" and choice.feature_budget == 0.0
    assert choice.plan_budget == pytest.approx(0.8)
    assert choice.path == ("log10_signal=4.9 ≥ 3",)
    assert "declared public, nothing spent on features" in choice.why
    ops = [r.operation for r in x.history()]
    assert ops[0] == "dawa_partition"  # no feature measurement before the plan
    assert abs(spent(x) - Fraction(0.8)) <= Fraction(0.8) * Fraction(1, 10**9)
    assert est.shape == (N,) and np.all(np.isfinite(est))
    assert choice.features is not None and choice.features.declared


def test_a_small_declared_signal_takes_tier0s_plan_with_the_whole_eps():
    x = ektelo.protect(data(50), epsilon=1.0, seed=2)
    _, choice = plan_auto(x, Prefix(N), 1.0, kind="prefix", table=hand_table(), rows=50)
    best = min((c for c in choice.candidates if c.rmse is not None), key=lambda c: c.rmse)
    assert choice.plan == best.plan and "→ tier0" in choice.why
    assert [r.eps for r in x.history()] == [1.0]  # one measurement, all of ε


def test_the_declared_count_is_what_the_tree_sees_not_the_data():
    # the same data, two declarations: the choice follows the declaration
    x = ektelo.protect(data(10**5), epsilon=2.0, seed=2)
    _, low = plan_auto(x, Prefix(N), 1.0, kind="prefix", table=hand_table(), rows=100)
    _, high = plan_auto(x, Prefix(N), 1.0, kind="prefix", table=hand_table(), rows=10**4)
    assert low.plan != "dawa" and high.plan == "dawa"


def test_auto_plan_is_free_and_chooses_what_plan_auto_runs():
    t = hand_table()
    for rows in (50, 10**5):
        free = auto_plan(Prefix(N), "prefix", (N,), eps=1.0, rows=rows, table=t)
        x = ektelo.protect(data(rows), epsilon=1.0, seed=3)
        _, ran = plan_auto(x, Prefix(N), 1.0, kind="prefix", table=t, rows=rows)
        assert free.plan == ran.plan and free.path == ran.path
    # without rows auto_plan keeps its Tier 0 + rules behaviour
    assert "declared" not in auto_plan(Prefix(N), "prefix", (N,), eps=1.0, table=t).why


def test_without_a_declared_tree_the_features_are_bought():
    x = ektelo.protect(data(10**5), epsilon=1.0, seed=2)
    _, choice = plan_auto(x, Prefix(N), 1.0, kind="prefix", table=hand_table(declared={}),
                          rows=10**5)
    assert choice.plan == "privelet" and choice.feature_budget == pytest.approx(0.1)


def test_the_registered_plan_passes_rows_and_spends_exactly_eps():
    x = ektelo.protect(data(10**5), epsilon=1.0, seed=2)
    est = plans.run("auto", x, Prefix(N), 1.0, kind="prefix", table=hand_table(), rows=10**5)
    assert x.history()[0].operation == "dawa_partition"
    assert abs(spent(x) - Fraction(1)) <= Fraction(1, 10**9)
    assert est.shape == (N,)


@pytest.mark.parametrize("rows", [0, -5, float("nan"), float("inf"), "many"])
def test_a_bad_declared_count_is_refused_before_anything_is_spent(rows):
    x = ektelo.protect(data(1000), epsilon=1.0, seed=2)
    with pytest.raises((TypeError, ValueError), match="rows"):
        plan_auto(x, Prefix(N), 1.0, kind="prefix", table=hand_table(), rows=rows)
    assert x.history() == () and x.budget.spent == 0
    with pytest.raises((TypeError, ValueError), match="rows"):
        auto_plan(Prefix(N), "prefix", (N,), eps=1.0, rows=rows, table=hand_table())


def test_a_declared_tree_may_split_only_on_public_facts():
    for noisy in ("top_share", "empty_share"):
        tree = {"feature": noisy, "threshold": 0.5, "below": {"plan": "hb"},
                "above": {"plan": "dawa"}}
        with pytest.raises(ValueError, match=rf"declared\['1d-prefix'\]: unknown feature "
                                             rf"'{noisy}'"):
            hand_table(declared={"1d-prefix": tree})
    assert set(PUBLIC_FEATURES) == {"dims", "log10_cells", "is_prefix", "log10_eps",
                                    "log10_total", "log10_signal"}
    t = hand_table()
    assert DecisionTable.from_dict(t.to_dict()) == t and t.to_dict()["declared"]


def test_declared_features_are_the_public_facts():
    f = Features.from_declared_rows(dims=2, cells=65536, kind="ranges", eps=0.1, rows=48842)
    named = f.named()
    assert named["log10_total"] == pytest.approx(np.log10(48842))
    assert named["log10_signal"] == pytest.approx(np.log10(4884.2))
    assert named["dims"] == 2 and named["is_prefix"] == 0
    with pytest.raises(ValueError, match="rows"):
        Features.from_declared_rows(dims=1, cells=8, kind="prefix", eps=1.0, rows=0)


def test_under_zcdp_rows_change_nothing():
    x = ektelo.protect(data(1000), rho=0.5, seed=2)
    _, choice = plan_auto(x, Prefix(N), None, kind="prefix", rho=0.5, table=hand_table(),
                          rows=1000)
    assert choice.features is None and "zCDP" in choice.why
