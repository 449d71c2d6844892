"""`plan_auto` and the plan "auto" (issue #29): exactly ε in all (features
share·ε + the plan the rest), exactly ρ under zCDP with no features,
refusals before anything is spent, and the tree walk choosing what the
table says."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import ektelo
from ektelo import plans
from ektelo import workload as wl
from ektelo.budget import ZCDP
from ektelo.matrix import Prefix
from ektelo.planner import DecisionTable, plan_auto, table

N = 256


@pytest.fixture(autouse=True)
def no_shipped_table(monkeypatch, tmp_path):
    """These tests build their tables by hand: the shipped one (trained
    elsewhere) must not leak in."""
    monkeypatch.setattr(table, "DEFAULT_PATH", tmp_path / "absent.json")


def hand_table(tree, share=0.1, group="1d-prefix"):
    return DecisionTable.from_dict({"version": 1, "share": share, "trained_on": "test",
                                    "trees": {group: tree}})


SIGNAL = {"feature": "log10_signal", "threshold": 3.0,
          "below": {"plan": "tier0"}, "above": {"plan": "dawa"}}


def data(total):
    rng = np.random.default_rng(0)
    x = np.zeros(N, dtype=np.int64)
    x[:32] = rng.multinomial(total, np.full(32, 1 / 32))
    return x


def spent(handle):
    return sum((Fraction(r.charged_at_root) for r in handle.history()), Fraction(0))


def test_features_and_plan_spend_exactly_eps():
    x = ektelo.protect(data(10**5), epsilon=1.0, seed=2)
    est, choice = plan_auto(x, Prefix(N), 0.8, kind="prefix", table=hand_table(SIGNAL))
    records = x.history()
    assert records[0].operation == "laplace" and records[0].eps == pytest.approx(0.08)
    assert abs(spent(x) - Fraction(0.8)) <= Fraction(0.8) * Fraction(1, 10**9)
    assert choice.feature_budget == pytest.approx(0.08)
    assert choice.plan_budget == pytest.approx(0.72)
    assert choice.features is not None and choice.features.eps == pytest.approx(0.72)
    assert est.shape == (N,) and np.all(np.isfinite(est))


def test_the_walk_runs_the_plan_the_table_names():
    big = ektelo.protect(data(10**5), epsilon=1.0, seed=2)  # signal ≈ 10^4.9 ≥ 10^3
    _, choice = plan_auto(big, Prefix(N), 1.0, kind="prefix", table=hand_table(SIGNAL))
    assert choice.plan == "dawa" and choice.path[0].startswith("log10_signal=4.")
    assert "≥ 3" in choice.path[0] and "→ dawa" in choice.why
    assert [r.operation for r in big.history()][:2] == ["laplace", "dawa_partition"]
    small = ektelo.protect(data(50), epsilon=1.0, seed=2)  # signal ≈ 10^1.7 < 10^3
    _, choice = plan_auto(small, Prefix(N), 1.0, kind="prefix", table=hand_table(SIGNAL))
    assert choice.path[0].startswith("log10_signal=") and "< 3" in choice.path[0]
    best = min((c for c in choice.candidates if c.rmse is not None), key=lambda c: c.rmse)
    assert choice.plan == best.plan == "hdmm"  # Tier 0's best for a prefix over 256 cells
    assert "→ tier0" in choice.why and "Tier 0's lowest expected error" in choice.why
    ops = [r.operation for r in small.history()]
    assert ops == ["laplace", "laplace"]  # the features, then HDMM's one measurement
    rows = plans.strategy_for("hdmm", (N,), Prefix(N)).shape[0]  # HDMM's p-Identity strategy
    assert small.history()[1].query == f"Sparse({rows}x{N})"


def test_a_single_leaf_and_a_named_data_independent_plan():
    x = ektelo.protect(data(1000), epsilon=1.0, seed=2)
    _, choice = plan_auto(x, Prefix(N), 1.0, kind="prefix",
                          table=hand_table({"plan": "privelet"}, share=0.2))
    assert choice.plan == "privelet" and choice.path == () and "a single leaf" in choice.why
    assert x.history()[0].eps == pytest.approx(0.2) and x.history()[1].eps == pytest.approx(0.8)


def test_without_a_table_tier0_gets_everything():
    x = ektelo.protect(data(1000), epsilon=1.0, seed=2)
    _, choice = plan_auto(x, Prefix(N), 0.5, kind="prefix")
    assert choice.features is None and "no decision table shipped yet" in choice.why
    assert [r.eps for r in x.history()] == [0.5]  # no features: one measurement at ε
    ranked = [c for c in choice.candidates if c.rmse is not None]
    assert choice.plan == ranked[0].plan and "lowest expected error" in choice.why


def test_no_tree_for_the_group_means_no_features():
    x = ektelo.protect(np.ones((8, 8, 4)), epsilon=1.0, seed=2)
    W = wl.random_range((8, 8, 4), 20, 0)
    _, choice = plan_auto(x, W, 0.5, kind="ranges", table=hand_table(SIGNAL))
    assert choice.features is None and "no decision-table group for ranges over 3-D" in choice.why
    assert spent(x) == Fraction(0.5)


def test_zcdp_spends_exactly_rho_without_features():
    x = ektelo.protect(data(1000), rho=1.0, seed=2)
    est = plans.run("auto", x, Prefix(N), ZCDP(0.3), kind="prefix", table=hand_table(SIGNAL))
    assert x.budget.spent == pytest.approx(0.3, rel=1e-9)
    (record,) = x.history()
    assert record.rho == pytest.approx(0.3) and record.eps is None  # one Gaussian measurement
    assert est.shape == (N,)
    _, choice = plan_auto(ektelo.protect(data(1000), rho=1.0, seed=2), Prefix(N), None,
                          rho=0.3, kind="prefix", table=hand_table(SIGNAL))
    assert "zCDP" in choice.why and choice.features is None


def test_rho_on_pure_eps_data_is_refused_before_anything():
    x = ektelo.protect(data(1000), epsilon=1.0, seed=2)
    with pytest.raises(ValueError, match="pure ε-DP budget: give eps instead"):
        plan_auto(x, Prefix(N), None, rho=0.1, kind="prefix")
    assert x.history() == ()


def test_the_registered_plan_spends_exactly_eps_and_infers_the_kind():
    x = ektelo.protect(data(10**5), epsilon=1.0, seed=4)
    est = plans.run("auto", x, Prefix(N), 0.6, table=hand_table(SIGNAL, share=0.05))
    assert abs(spent(x) - Fraction(0.6)) <= Fraction(0.6) * Fraction(1, 10**9)
    assert x.history()[0].eps == pytest.approx(0.03)  # a tree for 1d-prefix: features first
    assert est.shape == (N,)
    assert plans.get("auto").data_dependent


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"share": 0.0}, ValueError, "share must lie strictly between 0 and 1"),
    ({"share": 1.0}, ValueError, "share must lie strictly between 0 and 1"),
    ({"share": -0.2}, ValueError, "share must lie strictly between 0 and 1"),
    ({"share": "0.1"}, TypeError, "share must be a number"),
    ({"kind": "nonsense"}, ValueError, "unknown workload kind 'nonsense'"),
    ({"table": {"version": 1}}, TypeError, "table must be a DecisionTable"),
    ({"eps": 0.0}, ValueError, "eps must be a finite positive number"),
    ({"W": Prefix(N + 1)}, ValueError, "257 columns but the data vector has 256 cells"),
    ({"W": wl.prefix_marginal((16, 16), 1), "kind": None}, ValueError, "pass kind="),
])
def test_bad_requests_are_refused_before_spending(kwargs, error, match):
    x = ektelo.protect(data(1000), epsilon=1.0, seed=2)
    args = {"W": Prefix(N), "eps": 0.5, "kind": "prefix", "table": hand_table(SIGNAL)}
    args.update(kwargs)
    if "W" in kwargs and kwargs["W"].shape[1] == N:
        x = ektelo.protect(data(1000).reshape(16, 16), epsilon=1.0, seed=2)
    W, eps = args.pop("W"), args.pop("eps")
    with pytest.raises(error, match=match):
        plan_auto(x, W, eps, **args)
    assert x.budget.spent == 0 and x.history() == ()


def test_a_tree_that_may_choose_a_plan_unfit_for_x_is_refused_before_spending():
    floats = ektelo.protect(data(1000).astype(float), epsilon=1.0, seed=2)  # not integral
    with pytest.raises(ValueError, match="dawa, a data-dependent plan that needs a vector of"):
        plan_auto(floats, Prefix(N), 0.5, kind="prefix", table=hand_table(SIGNAL))
    assert floats.history() == ()
    x = ektelo.protect(data(1000), epsilon=1.0, seed=2)
    with pytest.raises(ValueError, match="may choose quadtree, which needs a 2-D domain"):
        plan_auto(x, Prefix(N), 0.5, kind="prefix", table=hand_table({"plan": "quadtree"}))
    assert x.history() == ()


def test_a_table_naming_an_unknown_plan_or_feature_never_reaches_the_data():
    bad_plan = {"version": 1, "share": 0.1, "trees": {"1d-prefix": {"plan": "dawa2"}}}
    bad_feature = {"version": 1, "share": 0.1, "trees": {"1d-prefix": {
        "feature": "true_total", "threshold": 1, "below": {"plan": "hb"},
        "above": {"plan": "hb"}}}}
    with pytest.raises(ValueError, match="unknown plan 'dawa2'"):
        DecisionTable.from_dict(bad_plan)
    with pytest.raises(ValueError, match="unknown feature 'true_total'"):
        DecisionTable.from_dict(bad_feature)


def test_more_than_the_remaining_budget_is_refused_and_changes_nothing():
    x = ektelo.protect(data(1000), epsilon=0.5, seed=2)
    with pytest.raises(ektelo.BudgetExceeded):
        plan_auto(x, Prefix(N), 0.8, kind="prefix", table=hand_table(SIGNAL))
    assert x.budget.spent == 0 and x.history() == ()


def test_the_choice_explains_the_features_and_the_path():
    from ektelo.planner import format_choice

    x = ektelo.protect(data(10**5), epsilon=1.0, seed=2)
    _, choice = plan_auto(x, Prefix(N), 1.0, kind="prefix", table=hand_table(SIGNAL))
    text = format_choice(choice, preview=False)
    assert text.startswith("ranking (Tier 0):") and "charges no Tier 1" not in text
    features = next(line for line in text.splitlines() if line.startswith("features"))
    assert "paid ε=0.1" in features and "log10_signal=4." in features
    assert f"decision table: {choice.path[0]}" in text and "choice: dawa" in text
    assert "data-dependent" in text  # DAWA listed after the priced candidates
