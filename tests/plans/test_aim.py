"""AIM (ektelo.plans.aim) on small synthetic tables: exact ρ spend with the
last round taking the remainder, the round schedule (0.1/0.9 split, budget
×4 on annealing), selection of the dependent pairs at large ρ, the
model-size guard, workload-restricted candidates, progress, and bad input
refused before anything is spent."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import ektelo
from ektelo import Domain, plans
from ektelo.budget import PureDP
from ektelo.inference import GraphicalModel
from ektelo.plans.aim import downward_closure

DOMAIN = Domain.from_json({"a": 4, "b": 4, "c": 3, "d": 3, "x": 40, "y": 40})


def table_frame(rows: int = 3000, seed: int = 0) -> pd.DataFrame:
    """b copies a (90%), d copies c (90%), y copies x (95%): three dependent pairs."""
    rng = np.random.default_rng(seed)
    a, c, x = rng.integers(0, 4, rows), rng.integers(0, 3, rows), rng.integers(0, 40, rows)
    b = np.where(rng.random(rows) < 0.9, a, rng.integers(0, 4, rows))
    d = np.where(rng.random(rows) < 0.9, c, rng.integers(0, 3, rows))
    y = np.where(rng.random(rows) < 0.95, x, rng.integers(0, 40, rows))
    return pd.DataFrame({"a": a, "b": b, "c": c, "d": d, "x": x, "y": y})


def _pairs(model: GraphicalModel) -> set[frozenset[str]]:
    return {frozenset(c) for c in model.cliques if len(c) >= 2}


def test_downward_closure() -> None:
    assert downward_closure([("a", "b"), ("b", "c")]) == [
        ("a",), ("b",), ("c",), ("a", "b"), ("b", "c"),
    ]  # fmt: skip


def test_aim_spends_exactly_its_budget_on_schedule() -> None:
    table = ektelo.protect(table_frame(), DOMAIN, rho=1.0, seed=3)
    lines: list[str] = []
    rho, T = 0.4, 40
    model = plans.run("aim", table, None, rho, rounds=T, maxiter=200, progress=lines.append)
    assert isinstance(model, GraphicalModel)
    history = table.history()
    spent = sum((Fraction(r.charged_at_root) for r in history), Fraction(0))
    assert abs(spent - Fraction(rho)) <= Fraction(rho) * Fraction(1, 10**9)
    gauss = [r.rho for r in history if r.operation == "gaussian"]
    select = [r.rho for r in history if r.operation == "select_marginal"]
    assert gauss[:6] == [pytest.approx(0.9 * rho / T)] * 6  # 1-way marginals first
    rounds = list(zip(select, gauss[6:], strict=True))
    assert len(lines) == len(rounds) >= 1
    regular = [g for s, g in rounds[:-1]]
    assert all(g == pytest.approx(9 * s) for s, g in rounds[:-1])  # ε/σ split 0.1 / 0.9
    ratios = [after / before for before, after in itertools.pairwise(regular)]
    assert all(r == pytest.approx(1.0) or r == pytest.approx(4.0) for r in ratios)
    assert any(r == pytest.approx(4.0) for r in ratios)  # annealed at least once (here: x)
    assert rounds[-1][1] == pytest.approx(9 * rounds[-1][0])  # the remainder, split the same


def test_aim_selects_the_dependent_pairs_at_large_rho() -> None:
    table = ektelo.protect(table_frame(), DOMAIN, rho=100.0, seed=5)
    model = plans.aim(table, None, 100.0, rounds=12, maxiter=200)
    assert {frozenset("ab"), frozenset("cd"), frozenset("xy")} <= _pairs(model)
    df = table_frame()
    true = pd.crosstab(df["x"], df["y"]).to_numpy() / len(df)
    assert 0.5 * np.abs(true - model.marginal(["x", "y"]) / model.total).sum() < 0.1


def test_model_size_guard_keeps_large_cliques_out() -> None:
    """x–y (1,600 cells) is the most dependent pair and is chosen without the
    guard; a limit of ~1,000 cells (in MB, as AIM states it) keeps it out
    while the small pairs still fit; a tiny limit leaves only free cliques."""
    df = table_frame()
    free = plans.aim(ektelo.protect(df, DOMAIN, rho=100.0, seed=7), None, 100.0,
                     rounds=12, maxiter=100)  # fmt: skip
    assert frozenset("xy") in _pairs(free)
    limit = 1000 * 8 / 2**20
    guarded = plans.aim(ektelo.protect(df, DOMAIN, rho=100.0, seed=7), None, 100.0,
                        rounds=12, maxiter=100, max_model_size=limit)  # fmt: skip
    assert not any({"x", "y"} <= p for p in _pairs(guarded))
    assert frozenset("ab") in _pairs(guarded)
    assert guarded.size * 8 / 2**20 <= limit
    tiny = plans.aim(ektelo.protect(df, DOMAIN, rho=100.0, seed=7), None, 100.0,
                     rounds=12, maxiter=50, max_model_size=1e-9)  # fmt: skip
    assert _pairs(tiny) == set()


def test_candidates_come_from_the_workload() -> None:
    table = ektelo.protect(table_frame(), DOMAIN, rho=10.0, seed=2)
    model = plans.aim(table, [("c", "d"), ("b", "a")], 10.0, rounds=6, maxiter=100)
    assert _pairs(model) <= {frozenset("ab"), frozenset("cd")}


@pytest.mark.parametrize(
    ("workload", "options", "error", "match"),
    [
        ([("a", "zz")], {}, ValueError, "unknown attribute 'zz'"),
        ([], {}, ValueError, "workload is empty"),
        ("ab", {}, TypeError, "list of attribute tuples"),
        (None, {"rounds": 3}, ValueError, "rounds must be an int"),
        (None, {"max_model_size": 0}, ValueError, "max_model_size"),
    ],
)
def test_bad_input_is_refused_before_spending(workload, options, error, match) -> None:
    table = ektelo.protect(table_frame(), DOMAIN, rho=1.0, seed=0)
    with pytest.raises(error, match=match):
        plans.aim(table, workload, 0.5, **options)
    assert table.budget.spent == 0


def test_pure_dp_is_refused() -> None:
    pure = ektelo.protect(table_frame(), DOMAIN, epsilon=1.0, seed=0)
    with pytest.raises(ValueError, match="pure ε-DP budget"):
        plans.aim(pure, None, 0.5)
    zcdp = ektelo.protect(table_frame(), DOMAIN, rho=1.0, seed=0)
    with pytest.raises(TypeError, match="PureDP"):
        plans.aim(zcdp, None, PureDP(0.5))
    assert pure.budget.spent == 0 and zcdp.budget.spent == 0


def test_discrepancy_refits_the_same_measurements_from_the_uniform_model() -> None:
    """`discrepancy=τ` (opt-in, issue #43) changes only the last fit: the same
    seed spends the same requests, and the returned model stops at the
    discrepancy level instead of converging."""
    runs = {}
    for tau in (None, 0.8):
        table = ektelo.protect(table_frame(), DOMAIN, rho=1.0, seed=3)
        model = plans.run("aim", table, None, 0.05, rounds=20, maxiter=300, discrepancy=tau)
        runs[tau] = ([(r.operation, r.rho) for r in table.history()], model)
    assert runs[None][0] == runs[0.8][0]
    assert runs[0.8][1].info.message == "loss reached the discrepancy level"
    assert runs[0.8][1].cliques == runs[None][1].cliques
    assert runs[0.8][1].info.loss > runs[None][1].info.loss
    table = ektelo.protect(table_frame(), DOMAIN, rho=1.0, seed=3)
    with pytest.raises(ValueError, match="discrepancy"):
        plans.run("aim", table, None, 0.05, discrepancy=0.0)
    assert table.budget.spent == 0
