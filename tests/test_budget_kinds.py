"""Typed budgets (ektelo.budget) and the kernel's zCDP ledger through protect."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import ektelo
from ektelo.budget import (
    ZCDP,
    PureDP,
    delta_of_rho,
    describe,
    epsilon_of_rho,
    rho_of_epsilon_delta,
)
from ektelo.matrix import Dense, Identity, Partition, Total


def test_tight_conversion_matches_the_published_value() -> None:
    # CKS 2020's conversion: ρ ≈ 0.0150 gives (1, 1e-9)-DP
    rho = rho_of_epsilon_delta(1.0, 1e-9)
    assert 0.0148 < rho < 0.0152
    assert delta_of_rho(rho, 1.0) <= 1e-9  # rounded down: the stated guarantee holds
    assert delta_of_rho(rho * 1.001, 1.0) > 1e-9  # and it is tight
    # tighter than the classic ρ + 2√(ρ log 1/δ) bound
    assert epsilon_of_rho(rho, 1e-9) < rho + 2 * math.sqrt(rho * math.log(1e9))


def test_conversions_are_monotone_and_inverse() -> None:
    rhos = [rho_of_epsilon_delta(e, 1e-6) for e in (0.1, 0.5, 1.0, 4.0)]
    assert rhos == sorted(rhos)
    assert rho_of_epsilon_delta(1.0, 1e-3) > rho_of_epsilon_delta(1.0, 1e-9)
    for eps in (0.1, 1.0, 4.0):
        rho = rho_of_epsilon_delta(eps, 1e-6)
        assert epsilon_of_rho(rho, 1e-6) == pytest.approx(eps, rel=1e-6)
        assert epsilon_of_rho(rho, 1e-6) >= eps * (1 - 1e-9)


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: PureDP(0.0), ValueError),
        (lambda: PureDP(math.nan), ValueError),
        (lambda: ZCDP(-1.0), ValueError),
        (lambda: ZCDP(0.1, delta=1.0), ValueError),
        (lambda: ZCDP.from_approx(1.0, 0.0), ValueError),
        (lambda: PureDP(True), TypeError),  # type: ignore[arg-type]
    ],
)
def test_bad_budgets_are_refused(make, error) -> None:
    with pytest.raises(error):
        make()


def test_protect_states_the_budget_kind() -> None:
    x = np.arange(8)
    assert ektelo.protect(x, epsilon=1.0).budget.unit == "epsilon"
    approx = ektelo.protect(x, epsilon=1.0, delta=1e-9).budget
    assert approx.unit == "rho" and approx.total == pytest.approx(0.01497, abs=2e-4)
    assert approx.delta == 1e-9
    assert ektelo.protect(x, rho=0.5).budget.total == 0.5
    with pytest.raises(TypeError):
        ektelo.protect(x)  # no budget
    with pytest.raises(TypeError):
        ektelo.protect(x, epsilon=1.0, rho=0.5)


def test_a_zcdp_kernel_charges_pure_requests_eps_squared_over_two() -> None:
    x = ektelo.protect(np.arange(8), rho=1.0, seed=0)
    x.laplace(Identity(8), eps=0.5)
    assert Fraction(x.budget.spent) == Fraction(0.5) ** 2 / 2
    record = x.history()[-1]
    assert record.eps == 0.5 and record.charged_at_root == 0.125


def test_stability_costs_its_square_in_rho() -> None:
    x = ektelo.protect(np.arange(8), rho=1.0, seed=0)
    doubled = x.transform(Dense(2.0 * np.eye(8)))  # 2-stable
    doubled.laplace(Total(8), eps=0.5)
    assert x.budget.spent == pytest.approx(4 * 0.5**2 / 2)


def test_partitions_charge_the_max_in_rho() -> None:
    x = ektelo.protect(np.arange(8), rho=1.0, seed=0)
    left, right = x.split_by_partition(Partition([0, 0, 0, 0, 1, 1, 1, 1]))
    left.laplace(Total(4), eps=0.4)
    right.laplace(Total(4), eps=0.6)
    assert x.budget.spent == pytest.approx(0.6**2 / 2)


def test_reports_give_the_epsilon_a_rho_implies() -> None:
    x = ektelo.protect(np.arange(8), epsilon=1.0, delta=1e-9, seed=0)
    x.laplace(Identity(8), eps=0.1)
    budget = x.budget
    assert budget.epsilon() == pytest.approx(epsilon_of_rho(0.005, 1e-9), rel=1e-6)
    assert budget.epsilon() < 1.0
    assert ektelo.protect(np.arange(8), epsilon=2.0).budget.epsilon() == 0.0


def test_reports_say_spent_rho_and_the_epsilon_delta_it_implies() -> None:
    x = ektelo.protect(np.arange(8), epsilon=1.0, delta=1e-9, seed=0)
    x.gaussian(Identity(8), rho=0.005)
    line = describe(x.budget)
    assert "spent ρ = 0.005 of 0.0149731" in line and "0.005-zCDP, i.e. (" in line
    printed = float(line.split("i.e. (")[1].split(",")[0])
    assert printed == pytest.approx(epsilon_of_rho(0.005, 1e-9), rel=1e-5)
    assert delta_of_rho(0.005, printed) <= 1e-9  # what it prints holds (rounded up)
    whole = str(ZCDP.from_approx(1.0, 1e-9))
    assert whole.endswith("i.e. (1, 1e-09)-DP")  # the stated guarantee, back
    # a ρ stated without δ: reported at δ = 1e-9, and said so
    y = ektelo.protect(np.arange(8), rho=0.5, seed=0)
    y.gaussian(Identity(8), rho=0.125)
    line = describe(y.budget)
    assert "0.125-zCDP, i.e. (" in line and ", 1e-09)-DP" in line and "no δ stated" in line
    printed = float(line.split("i.e. (")[1].split(",")[0])
    assert printed == pytest.approx(epsilon_of_rho(0.125, 1e-9), rel=1e-5)
    # pure ε: the spent ε, no δ
    z = ektelo.protect(np.arange(8), epsilon=2.0, seed=0)
    z.laplace(Identity(8), eps=0.5)
    assert describe(z.budget) == "spent ε = 0.5 of 2 (remaining 1.5): 0.5-DP"
    assert str(PureDP(2.0)) == "2-DP (pure)"
    assert describe(ektelo.protect(np.arange(8), rho=0.5).budget).startswith("spent ρ = 0 of 0.5")


def test_kernel_budget_str_says_what_was_guaranteed() -> None:
    """str(handle.budget) is the report line: ρ with its (ε, δ), or ε."""
    x = ektelo.protect(np.arange(4), epsilon=1, delta=1e-9, seed=0)
    x.gaussian(Identity(4), rho=0.005)
    line = str(x.budget)
    assert line.startswith("spent ρ = 0.005 of ")
    assert "-zCDP, i.e. (" in line and "1e-09)-DP" in line
    y = ektelo.protect(np.arange(4), epsilon=1, seed=0)
    y.laplace(Identity(4), eps=0.5)
    assert str(y.budget) == "spent ε = 0.5 of 1 (remaining 0.5): 0.5-DP"
