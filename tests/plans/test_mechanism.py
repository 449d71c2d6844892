"""The mechanism choice of the data-independent plans (issue 24): Laplace
spends an ε, Gaussian a ρ of zCDP, exactly; typed budgets; mismatches are
refused before anything is spent; the Gaussian plans' noise is Gaussian and
its error is the one computed before spending."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import ektelo
from ektelo import plans
from ektelo import workload as wl
from ektelo.budget import ZCDP, PureDP
from ektelo.matrix import Prefix
from ektelo.operators import error

# the vector plans (hdmm_pgm, a table plan with the same choice, has its own tests)
MECHANISM_PLANS = [n for n in plans.mechanism_plans() if plans.get(n).input_kind == "vector"]
SHAPE_3D = (4, 3, 8)


def _setting(name: str) -> tuple[np.ndarray, object]:
    rng = np.random.default_rng(3)
    if name == "quadtree":
        return rng.poisson(5, size=(16, 16)), wl.random_range((16, 16), 20, 1)
    if name in ("hb_striped", "hb_striped_kron"):
        return rng.poisson(3, size=SHAPE_3D), wl.prefix_marginal(SHAPE_3D, 2)
    if name.startswith("nb_"):
        return rng.poisson(3, size=SHAPE_3D), wl.marginal(SHAPE_3D, (0, 2))
    return rng.poisson(20, size=64), wl.prefix(64)


def _charged(handle: ektelo.ProtectedVector) -> Fraction:
    """B(root), exact (the ledger's Fraction; `budget.spent` is its float)."""
    return handle.ledger()[0].spent


def test_the_data_independent_plans_offer_the_choice() -> None:
    expected = {
        "identity", "privelet", "h2", "hb", "quadtree", "greedy_h", "hdmm",
        "hb_striped", "hb_striped_kron", "nb_workload", "nb_workload_ls",
    }  # fmt: skip
    assert set(MECHANISM_PLANS) == expected
    for name in MECHANISM_PLANS:
        info = plans.get(name)
        assert not info.data_dependent and info.parameters["mechanism"] == "laplace", name


@pytest.mark.parametrize("name", MECHANISM_PLANS)
def test_gaussian_spends_exactly_rho_on_a_zcdp_kernel(name: str) -> None:
    x, W = _setting(name)
    rho = 0.3
    handle = ektelo.protect(x, rho=1.0, seed=5)
    out = plans.run(name, handle, W, rho, mechanism="gaussian")
    assert np.all(np.isfinite(out))
    assert _charged(handle) == Fraction(rho)  # exactly, not approximately
    assert handle.budget.spent == rho
    records = handle.history()
    assert records and all(r.eps is None and r.rho is not None for r in records)


@pytest.mark.parametrize("name", MECHANISM_PLANS)
def test_laplace_spends_exactly_eps_squared_over_two_on_a_zcdp_kernel(name: str) -> None:
    x, W = _setting(name)
    eps = 0.5
    handle = ektelo.protect(x, rho=1.0, seed=5)
    plans.run(name, handle, W, eps, mechanism="laplace")
    assert _charged(handle) == Fraction(eps) ** 2 / 2
    assert all(r.eps is not None and r.rho is None for r in handle.history())


@pytest.mark.parametrize("name", ["identity", "hb", "hdmm", "hb_striped", "nb_workload_ls"])
def test_typed_budgets_are_the_numbers_they_hold(name: str) -> None:
    x, W = _setting(name)
    runs = {}
    for label, budget, mechanism in (
        ("rho", 0.2, "gaussian"),
        ("ZCDP", ZCDP(0.2), "gaussian"),
        ("ZCDP(eps, delta)", ZCDP.from_approx(1.0, 1e-9), "gaussian"),
        ("eps", 0.7, "laplace"),
        ("PureDP", PureDP(0.7), "laplace"),
    ):
        handle = ektelo.protect(x, rho=1.0, seed=9)
        runs[label] = plans.run(name, handle, W, budget, mechanism=mechanism)
        spent = _charged(handle)
        if mechanism == "gaussian":
            rho = budget.rho if isinstance(budget, ZCDP) else budget
            assert spent == Fraction(rho)
        else:  # a pure-ε charge counts ε²/2 on a zCDP kernel
            assert spent == Fraction(0.7) ** 2 / 2
    assert np.array_equal(runs["rho"], runs["ZCDP"])  # same seed, same request
    assert np.array_equal(runs["eps"], runs["PureDP"])
    assert not np.array_equal(runs["rho"], runs["eps"])


def test_the_default_is_laplace_with_eps_as_before() -> None:
    x, W = _setting("hb")
    a = plans.hb(ektelo.protect(x, epsilon=1.0, seed=2), W, 0.5)
    b = plans.hb(ektelo.protect(x, epsilon=1.0, seed=2), W, 0.5, mechanism="laplace")
    assert np.array_equal(a, b)


def _refused(call, handle, kind: type[Exception], *words: str) -> None:
    before = handle.budget
    with pytest.raises(kind) as info:
        call()
    message = str(info.value)
    for word in words:
        assert word in message, message
    assert handle.budget == before and handle.history() == ()  # nothing spent


def test_mismatches_are_refused_before_anything_is_spent() -> None:
    x, W = _setting("hb")
    pure = ektelo.protect(x, epsilon=1.0, seed=1)
    _refused(
        lambda: plans.hb(pure, W, 0.1, mechanism="gaussian"), pure, ValueError,
        "pure ε-DP", "rho=", "delta=",
    )  # fmt: skip
    _refused(
        lambda: plans.run("identity", pure, W, ZCDP(0.1), mechanism="gaussian"), pure,
        ValueError, "pure ε-DP",
    )  # fmt: skip
    zcdp = ektelo.protect(x, rho=1.0, seed=1)
    _refused(
        lambda: plans.hb(zcdp, W, PureDP(0.5), mechanism="gaussian"), zcdp, TypeError,
        "PureDP", "ρ",
    )  # fmt: skip
    _refused(lambda: plans.hb(zcdp, W, ZCDP(0.5)), zcdp, TypeError, "ZCDP", "gaussian")
    _refused(
        lambda: plans.hb(zcdp, W, 0.5, mechanism="normal"), zcdp, ValueError, "'normal'"
    )  # fmt: skip
    for bad in (0.0, -1.0, math.nan, "0.5", True):
        _refused(
            lambda b=bad: plans.hb(zcdp, W, b, mechanism="gaussian"), zcdp, (TypeError, ValueError)
        )  # fmt: skip
    # a Laplace-only plan: ρ budgets and mechanism= are refused by name
    _refused(lambda: plans.dawa(zcdp, W, ZCDP(0.5)), zcdp, TypeError, "ZCDP", "mechanism")
    _refused(
        lambda: plans.run("dawa", zcdp, W, 0.5, mechanism="gaussian"), zcdp, TypeError,
        "'dawa'", "hb",
    )  # fmt: skip


def test_the_gaussian_plans_noise_is_gaussian_at_the_stated_variance() -> None:
    # Identity at ρ = 0.5: σ² = Δ₂²/(2ρ) = 1 per cell; Laplace at ε = 1 would
    # give variance 2 and kurtosis 6. 40,000 cells: the variance's relative
    # sd is 0.7 %, so both checks have power (a 0.8σ or 1.2σ fails them).
    n = 40_000
    x = np.random.default_rng(4).poisson(30, size=n)
    W = wl.identity(n)
    gauss = plans.identity(ektelo.protect(x, rho=0.5, seed=13), W, 0.5, mechanism="gaussian")
    lap = plans.identity(ektelo.protect(x, epsilon=1.0, seed=13), W, 1.0)
    for noise, variance, kurtosis in ((gauss - x, 1.0, 3.0), (lap - x, 2.0, 6.0)):
        assert abs(noise.mean()) < 5 * math.sqrt(variance / n)
        assert noise.var() == pytest.approx(variance, rel=0.04)
        # the sample kurtosis' sd: ~0.025 for the Gaussian, ~0.25 for Laplace
        assert stats.kurtosis(noise, fisher=False) == pytest.approx(kurtosis, abs=0.2 * kurtosis)


def test_the_expected_error_before_spending_is_the_measured_one() -> None:
    # HB over 256 cells, Gaussian at ρ: the mean total squared error of the
    # cells over 16 runs matches error.expected_error(W, A, rho=ρ), the exact
    # LS error computed before spending. One run's total is a sum of many
    # weakly dependent squares (relative sd ~10 %), so the mean of 24 is
    # within ±8 % (~4 sd); a σ off by 10 % would move it by 21 %.
    n, rho, trials = 256, 0.05, 24
    x = np.random.default_rng(8).poisson(40, size=n)
    W = wl.identity(n)
    A = plans.strategy_for("hb", (n,), W)
    assert A is not None
    expected = error.expected_error(W, A, rho=rho)
    measured = [
        float(np.sum((plans.hb(ektelo.protect(x, rho=rho, seed=s), W, rho, mechanism="gaussian")
                      - x) ** 2))
        for s in range(trials)
    ]  # fmt: skip
    assert np.mean(measured) == pytest.approx(expected, rel=0.08)
    # Laplace noise of the same ρ-zCDP cost (ε = √(2ρ)) would err 4× more here
    assert error.expected_error(W, A, eps=math.sqrt(2 * rho)) > 3.5 * expected


@pytest.mark.parametrize("name", ["identity", "hb", "privelet", "h2", "greedy_h", "quadtree"])
def test_workload_of_the_wrong_size_is_refused_before_spending(name: str) -> None:
    """A workload over another domain is an error naming both sizes (#27),
    with nothing spent — not an estimate that cannot answer it."""
    data = np.arange(64).reshape(8, 8) if name == "quadtree" else np.arange(64)
    x = ektelo.protect(data, epsilon=1.0, seed=0)
    with pytest.raises(ValueError, match="63 columns but the data vector has 64 cells"):
        plans.run(name, x, Prefix(63), 0.5)
    assert x.budget.spent == 0 and len(x.history()) == 0
