"""planner (issue 29): the tree learner recovers a planted rule, the regret
arithmetic on a hand-made example, the training cases' costs, and the quick
run end to end (grid → noisy features → leave-one-dataset-out trees →
plans.run("auto") → regret tables → a written table that loads and chooses
valid plans)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from experiments import planner_regret as pr
from experiments import planner_train as pt
from experiments.common import shared_data_dir

HAVE_DATA = shared_data_dir() is not None and (shared_data_dir() / "dpbench").exists()


def _cases(values: np.ndarray, cost: np.ndarray, names=("a", "b"),
           choices=("tier0", "p", "q")) -> pt.Cases:
    keys = pd.DataFrame({"group": "g", "dataset": [f"d{i % 4}" for i in range(len(values))],
                         "scale": "own", "eps": 1.0, "seed": 0})
    return pt.Cases(values, tuple(names), cost, tuple(choices), keys)


def test_learner_recovers_a_planted_rule():
    rng = np.random.default_rng(0)
    n = 400
    a, b = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    # planted: p is right below a = 0.3, q above; tier0 is never best
    cost = np.column_stack([np.full(n, 0.5),
                            np.where(a < 0.3, 0.0, 1.0) + rng.uniform(0, 0.05, n),
                            np.where(a < 0.3, 1.0, 0.0) + rng.uniform(0, 0.05, n)])
    tree = pt.fit_tree(_cases(np.column_stack([a, b]), cost), min_leaf=10)
    assert tree["feature"] == "a"
    assert tree["threshold"] == pytest.approx(0.3, abs=0.02)
    assert tree["below"] == {"plan": "p"} and tree["above"] == {"plan": "q"}
    got = pt.predict(tree, ("a", "b"), np.array([[0.1, 0.9], [0.8, 0.1]]))
    assert got == ["p", "q"]


def test_learner_respects_depth_min_leaf_and_prefers_tier0_on_ties():
    rng = np.random.default_rng(1)
    n = 200
    values = rng.uniform(0, 1, (n, 2))
    cost = rng.uniform(0, 1, (n, 3))  # noise only: a split needs min_leaf a side
    tree = pt.fit_tree(_cases(values, cost), max_depth=2, min_leaf=60)

    def depth(node):
        return 0 if "plan" in node else 1 + max(depth(node["below"]), depth(node["above"]))

    assert depth(tree) <= 2
    flat = pt.fit_tree(_cases(values, np.zeros((n, 3))), min_leaf=10)
    assert flat == {"plan": "tier0"}  # nothing to gain: one leaf, the first choice


def test_regret_arithmetic_on_a_hand_made_example():
    keys = {"group": "1d-prefix", "dataset": "D", "eps": 1.0}
    # two cases; two seeds each; plans hb and dawa at the full ε
    full = pd.DataFrame([
        {**keys, "scale": "1e3", "seed": 0, "plan": "hb", "error": 2.0},
        {**keys, "scale": "1e3", "seed": 1, "plan": "hb", "error": 4.0},  # mean 3
        {**keys, "scale": "1e3", "seed": 0, "plan": "dawa", "error": 1.0},
        {**keys, "scale": "1e3", "seed": 1, "plan": "dawa", "error": 1.0},  # mean 1: best
        {**keys, "scale": "1e4", "seed": 0, "plan": "hb", "error": 1.0},
        {**keys, "scale": "1e4", "seed": 1, "plan": "hb", "error": 1.0},  # mean 1: best
        {**keys, "scale": "1e4", "seed": 0, "plan": "dawa", "error": 8.0},
        {**keys, "scale": "1e4", "seed": 1, "plan": "dawa", "error": math.inf},  # failed
    ])
    auto = pd.DataFrame([
        {**keys, "scale": "1e3", "seed": 0, "error": 1.0},
        {**keys, "scale": "1e3", "seed": 1, "error": 3.0},  # mean 2 → regret 2
        {**keys, "scale": "1e4", "seed": 0, "error": 0.5},
        {**keys, "scale": "1e4", "seed": 1, "error": 1.5},  # mean 1 → regret 1
    ])
    # the fixed choices' own runs (run afresh with auto's noise draws)
    hb = pd.DataFrame([{**keys, "scale": s, "seed": t, "error": e}
                       for s, t, e in (("1e3", 0, 2.5), ("1e3", 1, 3.5), ("1e4", 0, 1.0),
                                       ("1e4", 1, 1.0))])  # means 3 and 1
    dawa = pd.DataFrame([{**keys, "scale": s, "seed": t, "error": e}
                         for s, t, e in (("1e3", 0, 1.0), ("1e3", 1, 1.0), ("1e4", 0, 8.0),
                                         ("1e4", 1, math.inf))])  # 1 and a failure
    rows = pr.regret_table(auto, full, {"HB": hb, "rules": dawa}).set_index("scale")
    assert rows.loc["1e3", "best_plan"] == "dawa" and rows.loc["1e4", "best_plan"] == "hb"
    assert rows.loc["1e3", "regret"] == pytest.approx(2.0)
    assert rows.loc["1e4", "regret"] == pytest.approx(1.0)
    assert rows.loc["1e3", "HB_regret"] == pytest.approx(3.0)
    assert rows.loc["1e4", "rules_regret"] == math.inf
    summary = pr.summarise(rows.reset_index(), ["group"], ["HB", "rules"]).iloc[0]
    assert summary["auto_gmean"] == pytest.approx(math.sqrt(2.0))
    assert summary["HB_gmean"] == pytest.approx(math.sqrt(3.0))
    assert summary["auto_p90"] == pytest.approx(1.9)  # numpy's linear interpolation
    assert summary["win_vs_HB"] == pytest.approx(0.5)  # 2 < 3; 1 = 1 is no win
    assert summary["win_vs_rules"] == pytest.approx(0.5)  # 2 > 1; 1 < inf
    assert not summary["met"]  # √2 > 1.2


def test_training_costs_price_tier0_and_drop_failing_plans():
    keys = {"group": "2d-ranges", "dataset": "D", "scale": "own", "eps": 0.1}
    full = pd.DataFrame([{**keys, "seed": 0, "plan": p, "error": e}
                         for p, e in (("hb", 2.0), ("dawa", 1.0), ("mwem", 4.0))])
    part = pd.DataFrame([{**keys, "seed": 0, "plan": p, "error": e}
                         for p, e in (("hb", 4.0), ("dawa", 1.0), ("mwem", math.inf))])
    feats = pd.DataFrame([{**keys, "seed": s, "log10_total": 3.0 + s} for s in range(2)])
    cases = pt.build_cases("2d-ranges", feats, part, full, {0.1: "hb"})
    assert cases.choices == ("tier0", "dawa", "hb")  # mwem gave no answer: no choice
    assert cases.names == ("log10_total",)
    np.testing.assert_allclose(cases.cost[0], [math.log(4), 0.0, math.log(4)])
    # Tier 0's plan failing is priced at FAIL_COST (it stays a choice)
    cases = pt.build_cases("2d-ranges", feats, part, full, {0.1: "mwem"})
    np.testing.assert_allclose(cases.cost[0], [pt.FAIL_COST, 0.0, math.log(4)])
    np.testing.assert_allclose(cases.values[:, 0], [3.0, 4.0])


@pytest.mark.slow  # ~20 s of CPU: Tier 0's Monte-Carlo prices, HDMM's strategy, 36 auto runs
@pytest.mark.skipif(not HAVE_DATA, reason="SKIPPED LOUDLY: needs the shared DPBench data "
                    "(../shared/data/dpbench)")
def test_quick_run_end_to_end(tmp_path):
    from ektelo import plans
    from ektelo.planner import DecisionTable, Features

    table_path = tmp_path / "table.json"
    rows = pr.run_experiment(tmp_path, quick=True, write_table=True, table_path=table_path)
    # leave-one-dataset-out regret for every quick case, finite and ≥ ~the best
    assert set(rows["group"]) == {"1d-prefix", "1d-ranges", "2d-ranges"}
    assert len(rows) == 3 * 3 * 2  # groups × datasets × scales (ε = 1)
    assert np.all(np.isfinite(rows["regret"])) and rows["regret"].min() > 0.3
    # fixed choices run afresh (their own noise, not the grid's): finite, near the best
    assert np.all(np.isfinite(rows["HB_regret"])) and rows["HB_regret"].min() > 0.3
    by_eps = pd.read_csv(tmp_path / "planner_by_eps.csv")
    assert {"auto_gmean", "auto_p90", "HB_gmean", "win_vs_HB", "rules_gmean"} <= set(by_eps)
    declared = pd.read_csv(tmp_path / "planner_declared.csv")
    assert len(declared) == len(rows) and np.all(np.isfinite(declared["regret"]))
    assert (tmp_path / "planner.png").stat().st_size > 0
    # the written table loads and chooses a valid plan for every group
    table = DecisionTable.load(table_path)
    assert table.share == pytest.approx(0.05)
    known = set(plans.names())
    for group, dims, cells, kind in (("1d-prefix", 1, 4096, "prefix"),
                                     ("1d-ranges", 1, 4096, "random-ranges"),
                                     ("2d-ranges", 2, 65536, "random-ranges")):
        for total in (10.0, 1e4, 1e7):
            f = Features(dims=dims, cells=cells, kind=kind, eps=0.95, total=total,
                         coarse=(total / 16,) * 16, coarse_scale=20.0)
            choice = table.choose(group, f)
            assert choice == "tier0" or choice in known
            public = Features.from_declared_rows(dims=dims, cells=cells, kind=kind, eps=0.95,
                                                 rows=total)
            choice = table.choose(group, public)  # the declared tree
            assert choice == "tier0" or choice in known
