"""MST (ektelo.plans.mst) on small synthetic tables: exact ρ spend, the
private spanning tree finds the strongly dependent pairs at large ρ, the
fitted model reproduces the data's pair marginals, and bad input is refused
before anything is spent.  Also the kernel's `select_marginal` as MST calls it."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import ektelo
from ektelo import Domain, plans
from ektelo.budget import ZCDP, PureDP
from ektelo.inference import GraphicalModel

DOMAIN = Domain.from_json({"a": 4, "b": 4, "c": 3, "d": 5, "e": 2})


def chain_table(rows: int = 4000, seed: int = 0) -> pd.DataFrame:
    """A tree-structured table: b copies a (90%), d copies c (90%), e depends
    on b; c is independent of the rest."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, rows)
    b = np.where(rng.random(rows) < 0.9, a, rng.integers(0, 4, rows))
    c = rng.integers(0, 3, rows)
    d = np.where(rng.random(rows) < 0.9, c, rng.integers(0, 5, rows))
    e = np.where(rng.random(rows) < 0.8, b % 2, rng.integers(0, 2, rows))
    return pd.DataFrame({"a": a, "b": b, "c": c, "d": d, "e": e})


def _spent(table: ektelo.ProtectedTable) -> Fraction:
    return sum((Fraction(r.charged_at_root) for r in table.history()), Fraction(0))


def _pairs(model: GraphicalModel) -> set[frozenset[str]]:
    return {frozenset(c) for c in model.cliques if len(c) == 2}


def test_mst_spends_exactly_its_budget_and_returns_a_model() -> None:
    table = ektelo.protect(chain_table(), DOMAIN, rho=1.0, seed=3)
    model = plans.run("mst", table, None, 0.25)
    assert isinstance(model, GraphicalModel)
    assert abs(_spent(table) - Fraction(0.25)) <= Fraction(0.25) * Fraction(1, 10**9)
    ops = [r.operation for r in table.history()]
    assert ops.count("select_marginal") == 4  # r − 1 = 4 tree edges
    assert ops.count("gaussian") == 5 + 4  # 1-way marginals, then the tree's pairs
    assert len(_pairs(model)) == 4
    assert model.marginal(["a", "b"]).shape == (4, 4)


def test_mst_spends_a_zcdp_budget_stated_as_epsilon_delta() -> None:
    table = ektelo.protect(chain_table(), DOMAIN, epsilon=1.0, delta=1e-9, seed=4)
    plans.mst(table, None, ZCDP(table.budget.total))
    assert table.budget.remaining <= 1e-12 * table.budget.total


def test_mst_finds_the_dependent_pairs_at_large_rho() -> None:
    """The maximum spanning tree of the data holds a–b, c–d and b–e; at a
    large ρ the private tree is that tree in every run (a random choice of
    edges would hold all three with probability < 1/10)."""
    df = chain_table()
    for seed in range(5):
        table = ektelo.protect(df, DOMAIN, rho=50.0, seed=seed)
        model = plans.mst(table, None, 50.0)
        assert {frozenset("ab"), frozenset("cd"), frozenset("be")} <= _pairs(model), seed


def test_mst_model_reproduces_pair_marginals() -> None:
    df = chain_table()
    table = ektelo.protect(df, DOMAIN, rho=50.0, seed=9)
    model = plans.mst(table, None, 50.0)
    true = pd.crosstab(df["a"], df["b"]).to_numpy() / len(df)
    fitted = model.marginal(["a", "b"]) / model.total
    assert 0.5 * np.abs(true - fitted).sum() < 0.02
    synthetic = model.synthetic(len(df), seed=0)
    synth = pd.crosstab(synthetic["a"], synthetic["b"]).to_numpy() / len(df)
    assert 0.5 * np.abs(true - synth).sum() < 0.03


def test_select_marginal_picks_the_correlated_pair() -> None:
    """The kernel operator alone, scored against the independence model (the
    product of the true 1-way marginals): a–b is chosen at large ρ."""
    df = chain_table()
    pairs = [("a", "b"), ("a", "c"), ("b", "c"), ("c", "e"), ("a", "e")]
    one = {n: np.bincount(df[n], minlength=DOMAIN[n].size) / len(df) for n in "abcde"}
    estimates = [len(df) * np.outer(one[x], one[y]) for x, y in pairs]
    table = ektelo.protect(df, DOMAIN, rho=100.0, seed=1)
    picks = [table.select_marginal(pairs, estimates, rho=1.0) for _ in range(30)]
    assert picks.count(("a", "b")) == 30
    assert table.budget.spent == pytest.approx(30.0)


def test_mst_refuses_pure_dp_before_spending() -> None:
    pure = ektelo.protect(chain_table(), DOMAIN, epsilon=1.0, seed=0)
    with pytest.raises(ValueError, match="pure ε-DP budget"):
        plans.mst(pure, None, 0.5)
    zcdp = ektelo.protect(chain_table(), DOMAIN, rho=1.0, seed=0)
    with pytest.raises(TypeError, match="PureDP"):
        plans.mst(zcdp, None, PureDP(0.5))
    with pytest.raises(ValueError, match="positive ρ"):
        plans.mst(zcdp, None, -1.0)
    assert pure.budget.spent == 0 and zcdp.budget.spent == 0


def test_mst_needs_two_attributes() -> None:
    table = ektelo.protect(chain_table(), DOMAIN, rho=1.0, seed=0)
    with pytest.raises(ValueError, match="at least 2 attributes"):
        plans.mst(table.select(["a"]), None, 0.5)
    assert table.budget.spent == 0


def test_mst_on_a_projection_uses_its_attributes() -> None:
    table = ektelo.protect(chain_table(), DOMAIN, rho=1.0, seed=2)
    model = plans.mst(table.select(["a", "b", "c"]), None, 1.0)
    assert set(model.domain.names) == {"a", "b", "c"}
    assert abs(_spent(table) - Fraction(1.0)) <= Fraction(1, 10**9)
