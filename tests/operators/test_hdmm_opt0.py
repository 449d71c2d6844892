"""HDMM's OPT_0 machinery (ektelo.operators.hdmm_opt0): the two ways it
applies a workload's Gram (the library's `gram()`, or the workload's own rows
when it has fewer rows than columns), the runs of cells no range splits (and
the objective on them), the interval-hierarchy start, and the optimised
error on small workloads against the figures of the previous optimiser."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ektelo.matrix import Diagonal, EMatrix, Prefix, Product, RangeQueries

# OPT_0's documented building blocks (its view of W, its objective on runs,
# its start) against dense formulas
from ektelo.operators import hdmm_opt0 as opt0
from ektelo.operators.error import expected_error
from ektelo.operators.selection import hdmm
from ektelo.workload import all_range, random_range


def dense_gram(W: EMatrix) -> np.ndarray:
    D = W.dense()
    return D.T @ D


def p_identity_error(theta: np.ndarray, G: np.ndarray) -> float:
    n = theta.shape[1]
    A = np.vstack([np.eye(n), theta]) / (1.0 + theta.sum(axis=0))
    return float(np.trace(np.linalg.solve(A.T @ A, G)))


@pytest.mark.parametrize("m", [7, 30, 200], ids=["few", "some", "many"])
def test_weighted_ranges_through_their_rows_or_their_gram(m: int) -> None:
    # m < n: through the rows (U = W·X, Wᵀ·U, and X G Xᵀ = UᵀU); m ≥ n: through
    # the library's closed-form Gram. Weighted, with repeated intervals among
    # the 200, which OPT_0 merges into one row each.
    n = 40
    R = random_range(n, m, seed=m)
    w = np.random.default_rng(m).uniform(0.5, 2.0, size=m)
    W = Product(Diagonal(w), R)
    target = opt0.gram_target(W)
    distinct = np.unique(R.lower[:, 0] * n + R.upper[:, 0]).size
    assert (target.factor is not None) == (distinct < n)
    assert (target.gram is None) == (distinct < n)
    theta = np.random.default_rng(m).uniform(0.0, 1.0, size=(6, n))
    value, _ = opt0.p_identity_objective(theta, target)
    assert value == pytest.approx(p_identity_error(theta, dense_gram(W)), rel=1e-10)


def test_runs_are_those_no_range_splits() -> None:
    n = 300
    W = random_range(n, 40, seed=2)
    merged, first = opt0.merged_runs(opt0.gram_target(W))
    ends = np.unique(np.concatenate([[0], W.lower[:, 0], W.upper[:, 0] + 1]))
    np.testing.assert_array_equal(first, ends[ends < n])
    E = np.zeros((n, first.size))  # cell → run indicator
    E[np.arange(n), np.searchsorted(first, np.arange(n), side="right") - 1] = 1.0
    rows = merged.factor  # 40 ranges over the runs: fewer rows than runs
    assert rows is not None
    G_r = rows.dense().T @ rows.dense()
    np.testing.assert_allclose(E @ G_r @ E.T, dense_gram(W), rtol=1e-12, atol=1e-9)
    # every cell its own run: nothing to merge
    assert opt0.merged_runs(opt0.gram_target(random_range(12, 200, seed=1))) is None
    assert opt0.merged_runs(opt0.gram_target(Prefix(16))) is None
    assert opt0.merged_runs(opt0.gram_target(all_range(16))) is None


def test_run_constant_objective_is_the_full_objective(rng: np.random.Generator) -> None:
    # In Z = Θ_r·diag(√s) the value is C(Θ) of the run-constant Θ and the gradient
    # is ∇C's run sums divided by √s. The optimiser's variables are Zᵀ.
    n, p = 300, 5
    W = random_range(n, 40, seed=2)
    target = opt0.gram_target(W)
    merged, first = opt0.merged_runs(target)
    length = np.diff(np.append(first, n))
    Z = rng.uniform(0.0, 1.0, size=(p, first.size))
    grad = np.empty(Z.size)
    objective = opt0.PIdentityObjective(merged, p, length.astype(float))
    value = objective(np.ascontiguousarray(Z.T).reshape(-1), grad)
    theta = np.repeat(Z / np.sqrt(length), length, axis=1)
    full_value, full_grad = opt0.p_identity_objective(theta, target)
    assert value == pytest.approx(full_value, rel=1e-12)
    assert value == pytest.approx(p_identity_error(theta, dense_gram(W)), rel=1e-9)
    expected = np.add.reduceat(full_grad, first, axis=1) / np.sqrt(length)
    np.testing.assert_allclose(grad.reshape(-1, p).T, expected, rtol=1e-10, atol=1e-12)


def test_many_rows_per_column_are_materialised() -> None:
    # No range form and more than 8 rows per column: the dense Gram, once.
    R = RangeQueries((4, 5), np.zeros((200, 2), np.int64), np.tile([3, 4], (200, 1)))
    target = opt0.gram_target(R)
    assert target.factor is None and type(target.gram).__name__ == "Dense"
    np.testing.assert_allclose(target.gram.dense(), dense_gram(R))


@pytest.mark.parametrize(
    ("p", "counts"), [(64, [1, 3, 12, 48]), (16, [1, 3, 12]), (5, [1, 4]), (1, [1])]
)
def test_interval_levels_partition_the_domain_level_by_level(p: int, counts: list[int]) -> None:
    n = 1000
    rows = opt0.interval_levels(p, n)
    assert rows.shape == (p, n) and set(np.unique(rows)) <= {0.0, 1.0}
    r = 0
    for k in counts:
        level = rows[r : r + k]
        np.testing.assert_array_equal(level.sum(axis=0), np.ones(n))  # a partition of [0, n)
        for row in level:  # each row one interval, of about n/k cells
            cells = np.flatnonzero(row)
            assert cells[-1] - cells[0] + 1 == cells.size
            assert abs(cells.size - n / k) <= 1
        r += k
    assert r == p


# Errors tr((AᵀA)⁻¹WᵀW) of the previous OPT_0 (random start, two-loop L-BFGS) at
# its defaults (p = n/16, one start, seed 0). The run-constant optimisation from
# the interval hierarchy must stay within 1 % of them.
PREVIOUS_ERRORS = {
    "prefix256": (lambda: Prefix(256), 7077.8407),
    "random_range512": (lambda: random_range(512, 100, seed=5), 3987.4310),
    "all_range128": (lambda: all_range(128), 186772.2667),
}


@pytest.mark.parametrize("name", sorted(PREVIOUS_ERRORS))
def test_opt0_error_within_one_percent_of_the_previous_optimiser(name: str) -> None:
    make, previous = PREVIOUS_ERRORS[name]
    W = make()  # 1-D: OPT_0 is HDMM's only method
    A = hdmm(W)
    # at ε = √2, 2(‖A‖₁/ε)² = ‖A‖₁² (= 1: HDMM's strategies have sensitivity 1)
    assert expected_error(W, A, math.sqrt(2)) <= previous * 1.01
