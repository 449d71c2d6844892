"""The Gaussian mechanism through the kernel: zCDP accounting, the kernel's L2
sensitivity, refusals before the charge, and the expected error before spending."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ektelo
from ektelo.matrix import Dense, Identity, Prefix, Total, VStack
from ektelo.operators import error


def zcdp(values=None, rho: float = 1.0, seed: int = 0):
    data = np.arange(16) if values is None else values
    return ektelo.protect(data, rho=rho, seed=seed)


def test_a_pure_kernel_refuses_gaussian_requests_before_anything() -> None:
    x = ektelo.protect(np.arange(16), epsilon=1.0, seed=0)
    with pytest.raises(ValueError, match="pure ε-DP"):
        x.gaussian(Identity(16), rho=0.1)
    assert x.budget.spent == 0 and x.history() == ()


def test_gaussian_charges_rho_and_records_it() -> None:
    x = zcdp()
    m = x.gaussian(Identity(16), rho=0.125)
    assert x.budget.spent == 0.125 and x.budget.unit == "rho"
    assert m.mechanism == "gaussian" and m.rho == 0.125 and m.epsilon == 0.0
    record = x.history()[-1]
    assert record.operation == "gaussian" and record.rho == 0.125 and record.eps is None
    assert record.noise_scale == m.noise.sigma


def test_sigma_follows_the_kernels_l2_sensitivity() -> None:
    # VStack(I, I): L1 sensitivity 2, L2 √2 — the Gaussian pays only √2
    x = zcdp()
    m = x.gaussian(VStack([Identity(16), Identity(16)]), rho=0.5)
    ideal = math.sqrt(2) / math.sqrt(2 * 0.5)
    assert ideal <= m.noise.sigma <= ideal * (1 + 1e-3)
    prefix = zcdp().gaussian(Prefix(16), rho=0.5)  # column norms √16 … √1
    assert prefix.noise.sigma >= 4.0 / math.sqrt(2 * 0.5)


def test_stability_costs_its_square() -> None:
    x = zcdp()
    doubled = x.transform(Dense(2.0 * np.eye(16)))
    doubled.gaussian(Total(16), rho=0.01)
    assert x.budget.spent == pytest.approx(0.04)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, 1e-300, True, "0.1"])
def test_bad_rho_is_refused_before_the_charge(bad) -> None:
    x = zcdp()
    with pytest.raises((TypeError, ValueError)):
        x.gaussian(Identity(16), rho=bad)
    assert x.budget.spent == 0


def test_patched_l2_sensitivity_changes_nothing(monkeypatch) -> None:
    honest = zcdp(seed=5).gaussian(Prefix(16), rho=0.2)
    monkeypatch.setattr(Prefix, "sensitivity", lambda self, p=1: 1e-9)
    monkeypatch.setattr(Prefix, "column_norms", lambda self, p=1: np.full(16, 1e-9))
    patched = zcdp(seed=5).gaussian(Prefix(16), rho=0.2)
    assert patched.noise == honest.noise
    np.testing.assert_array_equal(patched.answers, honest.answers)


def test_measured_error_matches_the_expected_error() -> None:
    """error.expected_error(rho=) predicts the squared error of a Gaussian
    measurement read back by least squares (here: the identity)."""
    n, rho = 20_000, 0.02
    x = zcdp(np.full(n, 7), rho=1.0, seed=3)
    m = x.gaussian(Identity(n), rho=rho)
    measured = float(np.sum((m.answers - 7.0) ** 2))
    expected = error.expected_error(Identity(n), Identity(n), rho=rho)
    assert expected == pytest.approx(n / (2 * rho))
    assert measured == pytest.approx(expected, rel=0.05)
    # and it tells a wrong scale apart: 0.8σ or 1.2σ would miss by ≥ 30%
    assert abs(measured / expected - 1) < 0.3
    assert error.ls_error(Identity(n), [m]) == pytest.approx(n * m.noise.sigma**2)
