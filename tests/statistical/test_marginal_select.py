"""Statistical tests of the kernel's marginal selection (ektelo.kernel.marginal_select).

`ProtectedTable.select_marginal` must choose candidate r with probability ∝
exp(ε·q_r/(2Δ)), q_r = w_r·(‖M_r(D) − est_r‖₁ − p_r) and Δ = max w_r; on a
zCDP kernel a request of ρ runs with ε = √(8ρ) (the bounded-range bound MST
and AIM use).  The test knows the table, so it sets each estimate to the true
marginal moved by d_r in one cell (‖M_r − est_r‖₁ = d_r exactly).  Observed
frequencies are tested against that softmax with a chi-square test, and the
same sample must reject wrong ε (0.7x, 1.3x, the ε²/2 conversion's √(2ρ)) and,
with weights, the softmax that assumes Δ = 1 — a power check.  Research-mode
seeds make the tests deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import ektelo
from ektelo import Domain

DRAWS = 2500
DOMAIN = Domain.from_json({"a": 3, "b": 3, "c": 2})
CANDIDATES = [("a",), ("b",), ("c",), ("a", "b"), ("c", "b")]
L1 = np.arange(5.0)  # ‖M_r(D) − est_r‖₁ per candidate


def _table() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame(
        {"a": rng.integers(0, 3, 60), "b": rng.integers(0, 3, 60), "c": rng.integers(0, 2, 60)}
    )


def _estimates(df: pd.DataFrame) -> list[np.ndarray]:
    """The true marginals (C order over each tuple as given), cell 0 moved by L1[r]."""
    out = []
    for r, d in zip(CANDIDATES, L1, strict=True):
        shape = tuple(DOMAIN[n].size for n in r)
        idx = np.ravel_multi_index(tuple(df[n].to_numpy() for n in r), shape)
        m = np.bincount(idx, minlength=math.prod(shape)).astype(float)
        m[0] += d
        out.append(m)
    return out


def _softmax(q: np.ndarray, eps: float, delta: float) -> np.ndarray:
    w = np.exp(eps * (q - q.max()) / (2 * delta))
    return w / w.sum()


def _sample(seed: int, **kw: object) -> tuple[np.ndarray, ektelo.ProtectedTable]:
    df = _table()
    budget = {"epsilon": 1e4} if "eps" in kw else {"rho": 1e4}
    t = ektelo.protect(df, DOMAIN, seed=seed, **budget)
    assert isinstance(t, ektelo.ProtectedTable)
    est = _estimates(df)
    picks = [CANDIDATES.index(t.select_marginal(CANDIDATES, est, **kw)) for _ in range(DRAWS)]
    return np.bincount(picks, minlength=len(CANDIDATES)), t


def _pvalue(observed: np.ndarray, probabilities: np.ndarray) -> float:
    return float(stats.chisquare(observed, probabilities * observed.sum()).pvalue)


@pytest.fixture(scope="module")
def pure_sample() -> np.ndarray:
    return _sample(2024, eps=1.0)[0]


def test_frequencies_match_the_softmax(pure_sample: np.ndarray) -> None:
    assert _pvalue(pure_sample, _softmax(L1, 1.0, 1.0)) > 1e-3


@pytest.mark.parametrize("factor", [0.7, 1.3, 2.0])
def test_power_a_wrong_epsilon_is_detected(pure_sample: np.ndarray, factor: float) -> None:
    assert _pvalue(pure_sample, _softmax(L1, factor, 1.0)) < 1e-6


def test_zcdp_request_runs_with_the_bounded_range_epsilon() -> None:
    """ρ = 0.125 → ε = √(8ρ) = 1; the ε²/2 reading would give ε = 0.5; exactly
    DRAWS·ρ is charged."""
    rho = 0.125
    sample, t = _sample(99, rho=rho)
    assert _pvalue(sample, _softmax(L1, math.sqrt(8 * rho), 1.0)) > 1e-3
    assert _pvalue(sample, _softmax(L1, math.sqrt(2 * rho), 1.0)) < 1e-6
    assert t.budget.spent == pytest.approx(DRAWS * rho, rel=1e-12)


def test_weights_and_penalties_set_scores_and_sensitivity() -> None:
    """q_r = w_r·(L1_r − p_r), Δ = max w = 3; a mechanism using Δ = 1 (or
    ignoring the penalties) is rejected by the same sample."""
    weights, penalties = [1, 3, 2, 1, 3], [0.0, 1.5, 0.25, 2.0, 3.0]
    sample, _ = _sample(7, eps=2.0, weights=weights, penalties=penalties)
    q = np.array(weights) * (L1 - np.array(penalties))
    assert _pvalue(sample, _softmax(q, 2.0, 3.0)) > 1e-3
    assert _pvalue(sample, _softmax(q, 2.0, 1.0)) < 1e-6
    assert _pvalue(sample, _softmax(np.array(weights) * L1, 2.0, 3.0)) < 1e-6
