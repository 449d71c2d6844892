"""Every plan of the library: runs on tiny data, spends exactly ε on the
kernel's ledger, holds no state, and errs within the expected range."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import ektelo
from ektelo import plans
from ektelo import workload as wl
from ektelo.datasets import census_like
from ektelo.matrix import VStack
from ektelo.operators import error

EPS = 1.0
SHAPE_3D = (4, 3, 8)


def _setting(name: str) -> tuple[np.ndarray, object]:
    rng = np.random.default_rng(7)
    if name in ("quadtree", "uniform_grid", "adaptive_grid"):
        return rng.poisson(5, size=(16, 16)), wl.random_range((16, 16), 20, 1)
    if name.startswith("nb_"):
        x = rng.poisson(3, size=SHAPE_3D)
        W = VStack([wl.marginal(SHAPE_3D, (2,)), wl.marginal(SHAPE_3D, (0, 2)),
                    wl.marginal(SHAPE_3D, (1, 2))])
        return x, W
    if name in ("hb_striped", "hb_striped_kron", "dawa_striped"):
        return rng.poisson(3, size=SHAPE_3D), wl.prefix_marginal(SHAPE_3D, 2)
    return rng.poisson(20, size=64), wl.prefix(64)


VECTOR_PLANS = [n for n in plans.names() if plans.get(n).input_kind == "vector"]
# table plans returning a histogram (the "model" plans MST, AIM: tests/plans/test_mst/aim.py)
TABLE_PLANS = [
    n for n in plans.names()
    if plans.get(n).input_kind == "table" and plans.get(n).returns != "model"
]  # fmt: skip


def test_registry_lists_every_plan_of_the_issue():
    expected = {
        "identity", "privelet", "h2", "hb", "quadtree", "uniform_grid", "hdmm", "greedy_h",
        "uniform", "mwem", "ahp", "dawa", "adaptive_grid", "mwem_b", "mwem_c", "mwem_d",
        "hb_striped", "dawa_striped", "hb_striped_kron", "privbayes", "privbayes_ls",
        "cdf_estimator", "nb_workload", "nb_workload_ls", "nb_select_ls",
    }
    assert expected <= set(plans.names())
    for name in plans.names():
        info = plans.get(name)
        doc = info.function.__doc__ or ""
        assert info.citation and info.summary, name
        assert "udget" in doc or "ε" in doc, f"{name}: docstring must state the budget split"


@pytest.mark.parametrize("name", VECTOR_PLANS)
def test_vector_plan_spends_exactly_eps(name):
    x, W = _setting(name)
    handle = ektelo.protect(x, epsilon=EPS, seed=11)
    out = plans.run(name, handle, W, EPS)
    spent = sum((Fraction(r.charged_at_root) for r in handle.history()), Fraction(0))
    assert abs(spent - Fraction(EPS)) <= Fraction(EPS) * Fraction(1, 10**9)
    assert handle.budget.remaining <= 1e-9
    expected_len = W.shape[0] if plans.get(name).returns == "answers" else x.size
    assert np.asarray(out).shape == (expected_len,)
    assert np.all(np.isfinite(out))


@pytest.mark.parametrize("name", VECTOR_PLANS)
def test_plans_hold_no_state(name):
    x, W = _setting(name)
    first = plans.run(name, ektelo.protect(x, epsilon=EPS, seed=5), W, EPS)
    second = plans.run(name, ektelo.protect(x, epsilon=EPS, seed=5), W, EPS)
    np.testing.assert_array_equal(first, second)


def test_unknown_plan_and_unknown_parameter_are_refused():
    x = ektelo.protect(np.ones(8), epsilon=1.0)
    with pytest.raises(KeyError, match="unknown plan"):
        plans.run("no_such_plan", x, wl.prefix(8), 1.0)
    with pytest.raises(TypeError, match="no parameter"):
        plans.run("identity", x, wl.prefix(8), 1.0, ratio=0.5)
    assert x.budget.spent == 0


@pytest.mark.parametrize("eps", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_eps_is_refused_before_spending(eps):
    x = ektelo.protect(np.ones(8), epsilon=1.0)
    with pytest.raises(ValueError):
        plans.run("hb", x, wl.prefix(8), eps)
    assert x.budget.spent == 0


@pytest.mark.parametrize("name", ["identity", "privelet", "h2", "hb", "greedy_h", "hdmm"])
def test_data_independent_error_matches_expectation(name):
    """Mean squared workload error over repeated runs vs the exact LS expectation."""
    x, W = _setting(name)
    A = plans.strategy_for(name, x.shape, W)
    expected = error.expected_error(W, A, EPS)
    trials = 200  # the squared error of a prefix workload is heavy-tailed
    sq = [
        float(np.sum((W @ plans.run(name, ektelo.protect(x, epsilon=EPS, seed=s), W, EPS)
                      - W @ x.ravel()) ** 2))
        for s in range(trials)
    ]
    ratio = np.mean(sq) / expected
    assert 0.6 < ratio < 1.5, f"{name}: empirical/expected squared error = {ratio:.2f}"


@pytest.mark.parametrize("name", ["ahp", "dawa", "uniform_grid", "adaptive_grid", "mwem_c"])
def test_data_dependent_plans_beat_uniform_on_skewed_data(name):
    x, W = _setting(name)
    x = x.copy()
    x.reshape(-1)[: x.size // 4] *= 20  # a skew that a uniform estimate misses
    def err(plan: str) -> float:
        runs = [plans.run(plan, ektelo.protect(x, epsilon=EPS, seed=s), W, EPS)
                for s in range(5)]
        return float(np.mean([wl.scaled_l2_error(W, x, r) for r in runs]))
    assert err(name) < err("uniform")


@pytest.mark.parametrize("name", TABLE_PLANS)
def test_table_plans_spend_exactly_eps(name):
    frame, domain = census_like(3000, seed=2)
    table = ektelo.protect(frame, domain, epsilon=EPS, seed=4)
    if name == "cdf_estimator":
        out = plans.cdf_estimator(table, None, EPS, attribute="salary",
                                  where=ektelo.col("sex") == "M")
        assert out.shape == (domain["salary"].size,)
        assert np.all(np.diff(out) >= -1e-6), "a CDF from NNLS is non-decreasing"
    else:
        sub = table.select(["age", "sex", "race", "marital"])
        out = plans.run(name, sub, None, EPS)
        assert out.shape == (72 * 2 * 4 * 7,)
        assert abs(out.sum() - 3000) < 300
    assert abs(table.budget.spent - EPS) <= 1e-9


def test_workload_reduction_option_keeps_exact_spend_and_domain():
    x, _ = _setting("hb")
    W = wl.range_queries(64, np.array([[0], [16], [32]]), np.array([[15], [31], [63]]))
    for name in ("identity", "privelet", "h2", "hb", "greedy_h", "ahp", "dawa", "hdmm",
                 "mwem", "mwem_b", "mwem_c", "mwem_d"):  # fmt: skip
        handle = ektelo.protect(x, epsilon=EPS, seed=3)
        out = plans.run(name, handle, W, EPS, workload_reduction=True)
        assert out.shape == (64,)
        assert abs(handle.budget.spent - EPS) <= 1e-9
        # the workload cannot tell a group's cells apart, nor can the estimate
        spread = np.ptp(out.reshape(4, 16), axis=1)
        assert np.all(spread <= 1e-9 * max(1.0, float(np.abs(out).max()))), name
