"""Tier 0 of the planner (issue #29): every data-independent candidate
ranked by expected error — the exact closed form where reachable, a
data-free Monte-Carlo estimate marked as such otherwise."""

from __future__ import annotations

import math

import pytest

from ektelo import plans
from ektelo import workload as wl
from ektelo.matrix import Prefix
from ektelo.operators import error
from ektelo.planner import monte_carlo, price, range_kron_error, rank, tier0_best
from ektelo.planner.tier0 import clear_cache


def test_the_ranking_is_the_closed_form_in_order():
    W = Prefix(64)
    ranked = rank(W, "prefix", (64,), eps=0.5)
    assert [c.plan for c in ranked][:1] and all(c.method == "exact" for c in ranked)
    assert {c.plan for c in ranked} == {"identity", "hb", "h2", "privelet", "greedy_h", "hdmm"}
    for c in ranked:
        A = plans.strategy_for(c.plan, (64,), W)
        truth = math.sqrt(error.expected_error(W, A, 0.5) / 64)
        assert c.rmse == pytest.approx(truth, rel=1e-9), c.plan
    rmses = [c.rmse for c in ranked]
    assert rmses == sorted(rmses)
    assert tier0_best(ranked) is ranked[0] or ranked[0].rmse <= tier0_best(ranked).rmse * 1.01


def test_the_gaussian_ranking_uses_rho_and_the_gaussian_plans_only():
    W = Prefix(64)
    ranked = rank(W, "prefix", (64,), rho=0.2)
    for c in ranked:
        A = plans.strategy_for(c.plan, (64,), W)
        assert c.rmse == pytest.approx(math.sqrt(error.expected_error(W, A, rho=0.2) / 64))
        assert "mechanism" in plans.get(c.plan).parameters
    assert [c.rmse for c in ranked] == sorted(c.rmse for c in ranked)


def test_errors_scale_as_one_over_eps():
    W = Prefix(64)
    at1 = {c.plan: c.rmse for c in rank(W, "prefix", (64,), eps=1.0)}
    at01 = {c.plan: c.rmse for c in rank(W, "prefix", (64,), eps=0.1)}
    for name, rmse in at1.items():
        assert at01[name] == pytest.approx(10 * rmse)


@pytest.mark.parametrize("name", ["hb", "h2"])
def test_monte_carlo_agrees_with_the_closed_form(name):
    """On 1-D 256 both exist: the data-free estimate (the plan on zeros,
    32 fixed seeds) is within 15% of the exact RMSE."""
    W = Prefix(256)
    A = plans.strategy_for(name, (256,), W)
    exact = error.expected_error(W, A, 1.0) / 256
    mc = monte_carlo(name, (256,), W, seeds=32)
    assert mc.method == "monte-carlo" and mc.seeds == 32 and "32 seeds" in mc.note
    assert math.sqrt(mc.mse) == pytest.approx(math.sqrt(exact), rel=0.15)
    gauss = monte_carlo(name, (256,), W, gaussian=True, seeds=32)
    exact_g = error.expected_error(W, A, rho=1.0) / 256
    assert math.sqrt(gauss.mse) == pytest.approx(math.sqrt(exact_g), rel=0.15)


def test_large_domains_are_priced_by_monte_carlo_and_marked():
    W = wl.random_range((64, 64), 200, 3)
    ranked = rank(W, "random-ranges", (64, 64), eps=1.0, mc_seeds=6)
    methods = {c.plan: c.method for c in ranked}
    assert methods["identity"] == "exact"  # Identity factorises
    assert methods["hb"] == methods["quadtree"] == "monte-carlo"
    assert methods["hdmm"] == "exact"  # ranges ⊗ per attribute
    assert all(c.rmse is not None and c.rmse > 0 for c in ranked)
    qt = next(c for c in ranked if c.plan == "quadtree")
    assert "Monte-Carlo" in qt.note and "6 seeds" in qt.note


def test_ranges_against_a_kronecker_strategy_in_closed_form():
    W = wl.random_range((16, 12), 150, 1)
    A = plans.strategy_for("hdmm", (16, 12), W)
    assert range_kron_error(W, A) == pytest.approx(error.expected_error(W, A, 1.0), rel=1e-9)
    assert range_kron_error(W, A, gaussian=True) == pytest.approx(
        error.expected_error(W, A, rho=1.0), rel=1e-9)
    assert range_kron_error(Prefix(16), plans.strategy_for("hb", (16,), Prefix(16))) is None


def test_prices_are_cached_per_workload():
    W = wl.random_range((2048,), 50, 2)
    first = price("hb", (2048,), W)
    assert first.method == "monte-carlo"
    assert price("hb", (2048,), W) is first
    assert price("hb", (2048,), wl.random_range((2048,), 50, 2)) is first  # equal by value
    other = wl.random_range((2048,), 50, 3)
    assert price("hb", (2048,), other) is not first


def test_a_strategy_that_does_not_support_the_workload_is_left_out(monkeypatch):
    from ektelo.matrix import Total
    from ektelo.plans import data_independent

    real = data_independent.strategy_for
    monkeypatch.setattr(data_independent, "strategy_for",
                        lambda name, shape, W, **kw: Total(16) if name == "h2"
                        else real(name, shape, W, **kw))
    clear_cache()  # prices are cached by workload value
    ranked = rank(Prefix(16), "prefix", (16,), eps=1.0)
    h2 = next(c for c in ranked if c.plan == "h2")
    assert h2.rmse is None and h2.method is None and "does not support" in h2.note
    assert ranked[-1].plan == "h2"  # unpriced last


def test_monte_carlo_prices_do_not_depend_on_the_machines_speed(monkeypatch):
    """By default every Monte-Carlo price runs all `MC_SEEDS` fixed seeds:
    the same price (and so the same choice) on an idle or a busy machine —
    simulated here by a clock that jumps a minute at every reading."""
    import time

    from ektelo.planner import tier0

    W = Prefix(64)
    monkeypatch.setattr(tier0, "MC_SEEDS", 5)
    first = monte_carlo("hb", (64,), W)
    ticks = iter(range(0, 10**6, 60))
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(ticks)))
    monkeypatch.setattr(time, "monotonic", lambda: float(next(ticks)))
    again = monte_carlo("hb", (64,), W)
    assert first.seeds == again.seeds == 5
    assert first.mse == again.mse


@pytest.mark.parametrize("gaussian", [False, True])
def test_greedy_h_is_priced_exactly_by_its_recursion_above_the_dense_limit(monkeypatch, gaussian):
    """Above `MAX_DENSE` GreedyH is priced by `greedy_h_error` (exact, no n×n
    matrix), not by Monte-Carlo: equal to the dense closed form."""
    from ektelo.planner import tier0

    W = wl.random_range((256,), 100, 1)
    A = plans.strategy_for("greedy_h", (256,), W)
    budget = {"rho": 1.0} if gaussian else {"eps": 1.0}
    exact = error.expected_error(W, A, **budget) / W.shape[0]
    monkeypatch.setattr(tier0, "MAX_DENSE", 16)
    clear_cache()
    p = price("greedy_h", (256,), W, gaussian=gaussian)
    clear_cache()
    assert p.method == "exact" and "GreedyH" in p.note
    assert p.mse == pytest.approx(exact, rel=1e-9)
