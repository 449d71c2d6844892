"""Expected error (matrix mechanism): formula vs dense pseudo-inverse, vs the
empirical error of repeated least-squares runs, and the §5.5 theorem."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ektelo import inference as inf
from ektelo.matrix import (
    Dense,
    EMatrix,
    Identity,
    Kronecker,
    Prefix,
    RangeQueries,
    Total,
    VStack,
    Weighted,
)
from ektelo.measurement import Measurement
from ektelo.operators import error
from ektelo.workload import builders


def h2(n: int) -> EMatrix:
    """Binary hierarchy of ranges (H2, Hay et al. 2010), leaves included."""
    lo, hi = [], []
    size = n
    while size >= 1:
        starts = np.arange(0, n, size)
        lo.append(starts)
        hi.append(np.minimum(starts + size, n) - 1)
        size //= 2
    return RangeQueries(n, np.concatenate(lo), np.concatenate(hi))


def reference(W: EMatrix, A: EMatrix, eps: float) -> tuple[float, np.ndarray]:
    """2 (Δ/ε)² ‖W A⁺‖_F² and its per-row terms, densely."""
    WA = W.dense() @ np.linalg.pinv(A.dense())
    factor = 2 * (np.abs(A.dense()).sum(axis=0).max() / eps) ** 2
    rows = factor * np.sum(WA**2, axis=1)
    return float(rows.sum()), rows


CASES = {
    "identity/identity": (lambda: Identity(16), lambda: Identity(16)),
    "prefix/identity": (lambda: Prefix(16), lambda: Identity(16)),
    "prefix/h2": (lambda: Prefix(16), lambda: h2(16)),
    "identity/h2": (lambda: Identity(16), lambda: h2(16)),
    "h2/h2": (lambda: h2(16), lambda: h2(16)),
    "range/prefix": (lambda: builders.random_range(12, 20, seed=1), lambda: Prefix(12)),
    "allrange/stack": (
        lambda: builders.all_range(10),
        lambda: VStack([Identity(10), Total(10), Prefix(10)]),
    ),
    "weighted": (lambda: Weighted(Prefix(8), 3.0), lambda: Weighted(h2(8), 0.5)),
    "kron": (
        lambda: Kronecker([Prefix(4), Identity(3)]),
        lambda: Kronecker([h2(4), VStack([Identity(3), Total(3)])]),
    ),
    "marginals/kron": (
        lambda: builders.marginals((3, 4, 2), 2),
        lambda: Kronecker([Identity(3), h2(4), Identity(2)]),
    ),
    "kron-total": (
        lambda: Kronecker([Total(5), Prefix(4)]),
        lambda: Kronecker([Total(5), Identity(4)]),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_expected_error_matches_dense_pseudo_inverse(name: str) -> None:
    W, A = CASES[name][0](), CASES[name][1]()
    total, rows = reference(W, A, 0.7)
    assert error.expected_error(W, A, 0.7) == pytest.approx(total, rel=1e-9)
    per_query = error.expected_error(W, A, 0.7, per_query=True)
    assert per_query.shape == (W.shape[0],)
    np.testing.assert_allclose(per_query, rows, rtol=1e-8, atol=1e-9 * rows.max())


def test_kronecker_structure_scales_without_materialising() -> None:
    # A 10^6-cell domain: only the 400x400 factor is ever dense.
    W = Kronecker([Prefix(400), Identity(2500)])
    A = Kronecker([h2(400), Identity(2500)])
    got = error.expected_error(W, A, 1.0)
    small = error.expected_error(Prefix(400), h2(400), 1.0)
    # Δ and ‖WA⁺‖² both factorise; the identity factor contributes ‖I‖_F² = 2500.
    assert got == pytest.approx(small * 2500, rel=1e-9)
    v = error.expected_error(W, A, 1.0, per_query=True)
    assert v.shape == (10**6,)
    assert v.sum() == pytest.approx(got, rel=1e-9)


def test_identity_strategy_uses_column_norms_only() -> None:
    n = 10**6
    W = builders.random_range(n, 50, seed=3)
    sizes = (W.upper - W.lower + 1).sum()
    assert error.expected_error(W, Identity(n), 2.0) == pytest.approx(2 * sizes / 4.0)


def test_refuses_unsupported_workloads() -> None:
    with pytest.raises(ValueError, match="does not support"):
        error.expected_error(Prefix(8), Total(8), 1.0)
    with pytest.raises(ValueError, match="does not support"):
        error.expected_error(Identity(6), Dense(np.eye(6)[:5]), 1.0)


def test_refuses_large_unstructured_domains_with_a_reason() -> None:
    n = 5000
    with pytest.raises(ValueError, match="max_dense"):
        error.expected_error(Prefix(n), h2(n), 1.0)
    # The limit is a parameter.
    n = 64
    assert error.expected_error(Prefix(n), h2(n), 1.0, max_dense=64) > 0
    with pytest.raises(ValueError, match="max_dense"):
        error.expected_error(Prefix(n), h2(n), 1.0, max_dense=32)


def test_argument_checks() -> None:
    with pytest.raises(ValueError, match="eps"):
        error.expected_error(Identity(4), Identity(4), 0.0)
    with pytest.raises(TypeError, match="eps"):
        error.expected_error(Identity(4), Identity(4), "1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="columns"):
        error.expected_error(Identity(4), Identity(5), 1.0)
    with pytest.raises(TypeError):
        error.expected_error(np.eye(4), Identity(4), 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="noise scale"):
        error.ls_error(Identity(4), [(Identity(4), 0.0)])
    with pytest.raises(ValueError, match="at least one"):
        error.ls_error(Identity(4), [])


def test_rootmse_and_scaled_error() -> None:
    W, A = Prefix(16), h2(16)
    total = error.expected_error(W, A, 0.5)
    assert error.rootmse(W, A, 0.5) == pytest.approx(math.sqrt(total / 16))
    assert error.scaled_error(W, A, 0.5, 1000) == pytest.approx(math.sqrt(total) / (16 * 1000))
    with pytest.raises(ValueError):
        error.scaled_error(W, A, 0.5, 0)


def test_ls_error_is_expected_error_for_one_measurement() -> None:
    W, A, eps = Prefix(16), h2(16), 0.5
    b = A.sensitivity(1) / eps
    assert error.ls_error(W, [(A, b)]) == pytest.approx(error.expected_error(W, A, eps))


# ---------------------------------------------------------------------------
# Against the empirical error of least squares (≥ 200 runs)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("W", "A"),
    [
        (Identity(16), Identity(16)),
        (Identity(16), h2(16)),
        (h2(16), h2(16)),
        (Prefix(16), h2(16)),
        (Prefix(16), Identity(16)),
    ],
    ids=["identity/identity", "identity/h2", "h2/h2", "prefix/h2", "prefix/identity"],
)
def test_expected_error_matches_repeated_least_squares(W: EMatrix, A: EMatrix) -> None:
    rng = np.random.default_rng(2024)
    eps, runs = 0.5, 400
    n = A.shape[1]
    x = rng.integers(0, 100, n).astype(float)
    b = A.sensitivity(1) / eps
    truth = W.matvec(x)
    errors = np.empty(runs)
    per_query = np.zeros(W.shape[0])
    for k in range(runs):
        y = A.matvec(x) + rng.laplace(0.0, b, A.shape[0])
        m = Measurement(y, A, A, b, eps, "root", (n,))
        diff = W.matvec(inf.least_squares([m]).x) - truth
        errors[k] = diff @ diff
        per_query += diff**2
    expected = error.expected_error(W, A, eps)
    # Statistical tolerance: 4 standard errors of the mean.
    assert abs(errors.mean() - expected) <= 4 * errors.std(ddof=1) / math.sqrt(runs)
    # Per-query variances are right on average too (loosely: fewer samples each).
    v = error.expected_error(W, A, eps, per_query=True)
    assert np.mean(per_query / runs / v) == pytest.approx(1.0, abs=0.15)


def test_ls_error_matches_weighted_least_squares_with_unequal_noise() -> None:
    rng = np.random.default_rng(7)
    n, runs = 8, 300
    W = Prefix(n)
    measured = [(Identity(n), 1.0), (Prefix(n), 4.0), (Total(n), 0.5)]
    x = rng.integers(0, 50, n).astype(float)
    errors = np.empty(runs)
    for k in range(runs):
        ms = [
            Measurement(Q.matvec(x) + rng.laplace(0.0, s, Q.shape[0]), Q, Q, s, 1.0, "r", (n,))
            for Q, s in measured
        ]
        diff = W.matvec(inf.least_squares(ms).x) - W.matvec(x)
        errors[k] = diff @ diff
    expected = error.ls_error(W, measured)
    assert abs(errors.mean() - expected) <= 4 * errors.std(ddof=1) / math.sqrt(runs)


# ---------------------------------------------------------------------------
# §5.5 theorem: adding a measurement never increases LS expected error
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(10))
def test_adding_a_measurement_never_increases_error(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 12))
    A = Dense(rng.normal(size=(n + 2, n)))  # full column rank (almost surely)
    B = Dense(rng.normal(size=(int(rng.integers(1, 4)), n)))
    W = Dense(rng.normal(size=(5, n)))
    before = error.ls_error(W, [(A, 1.0)], per_query=True)
    after = error.ls_error(W, [(A, 1.0), (B, float(rng.uniform(0.1, 10)))], per_query=True)
    assert np.all(after <= before * (1 + 1e-10))
    assert after.sum() < before.sum()


def test_adding_a_range_hierarchy_to_identity_helps_prefix_queries() -> None:
    n = 32
    W = Prefix(n)
    base = error.ls_error(W, [(Identity(n), 1.0)], per_query=True)
    more = error.ls_error(W, [(Identity(n), 1.0), (h2(n), 1.0)], per_query=True)
    assert np.all(more <= base * (1 + 1e-10))


def test_a_sum_of_kronecker_terms_under_a_kronecker_strategy_is_exact() -> None:
    """An OR filter's answers are sums of Kronecker terms (ektelo.sql): their
    per-query variance under a Kronecker strategy factorises per attribute and
    equals the dense computation; a factor the strategy does not support is
    refused as for a single product."""
    from ektelo.matrix import Dense, Kronecker, Sum, Weighted
    from ektelo.operators.error import expected_error

    rng = np.random.default_rng(0)
    A = Kronecker([Dense(rng.random((6, 4))), Dense(rng.random((5, 3)))])
    terms = [Kronecker([Dense(rng.random((2, 4))), Dense(rng.random((3, 3)))]) for _ in range(3)]
    W = Sum([terms[0], Weighted(terms[1], 0.5), terms[2]])
    fast = expected_error(W, A, 1.0, per_query=True)
    dense = expected_error(Dense(W.dense()), Dense(A.dense()), 1.0, per_query=True)
    np.testing.assert_allclose(fast, dense, rtol=1e-10)
    assert expected_error(W, A, 1.0) == pytest.approx(float(dense.sum()), rel=1e-10)
    low_rank = Kronecker([Dense(np.ones((1, 4))), Dense(rng.random((5, 3)))])
    with pytest.raises(ValueError, match="does not support"):
        expected_error(W, low_rank, 1.0, per_query=True)
