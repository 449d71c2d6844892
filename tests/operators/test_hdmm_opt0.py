"""HDMM's OPT_0 machinery (ektelo.operators._hdmm): the two ways of applying a
range Gram, the runs of cells no range splits (and the objective on them),
the interval-hierarchy start, and the optimised error on small workloads
against the figures of the previous optimiser."""

from __future__ import annotations

import numpy as np
import pytest

from ektelo.matrix import EMatrix, Prefix
from ektelo.operators import _hdmm as hd
from ektelo.workload import all_range, random_range


def dense_gram(W: EMatrix) -> np.ndarray:
    D = W.dense()
    return D.T @ D


@pytest.mark.parametrize("m", [7, 30, 200], ids=["few", "some", "many"])
def test_range_gram_rows_and_quadratic_form_match_dense(m: int) -> None:
    # m < n: through the answers (and X G Xᵀ from them); m ≥ n: through the sparse
    # core. Weighted, with repeated intervals among the 200.
    n = 40
    W = random_range(n, m, seed=m)
    a, b = W.lower[:, 0], W.upper[:, 0]
    w = np.random.default_rng(m).uniform(0.5, 2.0, size=m)
    cover = np.bincount(a, w, n + 1) - np.bincount(b + 1, w, n + 1)
    gram = hd._RangeGram(n, a, b, w, np.cumsum(cover[:n]))
    G = hd._range_gram(n, a, b, w)
    X = np.random.default_rng(m).normal(size=(6, n))
    out = np.empty((6, n))
    B, K = gram.rows_quad(X, out)
    assert B is out
    np.testing.assert_allclose(B, X @ G, rtol=1e-10, atol=1e-9 * np.abs(X @ G).max())
    if gram.w.size < n:
        assert K is not None
        np.testing.assert_allclose(K, X @ G @ X.T, rtol=1e-10, atol=1e-9 * np.abs(K).max())
    else:
        assert K is None


def test_segments_are_the_runs_no_range_splits() -> None:
    n = 300
    W = random_range(n, 40, seed=2)
    merged, first = hd._Gram.of(W).segments()
    ends = np.unique(np.concatenate([[0], W.lower[:, 0], W.upper[:, 0] + 1]))
    np.testing.assert_array_equal(first, ends[ends < n])
    E = np.zeros((n, first.size))  # cell → run indicator
    E[np.arange(n), np.searchsorted(first, np.arange(n), side="right") - 1] = 1.0
    G_r = merged.rows(np.eye(first.size))
    np.testing.assert_allclose(E @ G_r @ E.T, dense_gram(W), rtol=1e-12, atol=1e-9)
    # every cell its own run: nothing to merge
    assert hd._Gram.of(random_range(12, 200, seed=1)).segments() is None
    assert hd._Gram.of(Prefix(16)).segments() is None


def test_run_constant_objective_is_the_full_objective(rng: np.random.Generator) -> None:
    # In Z = Θ_r·diag(√s) the value is C(Θ) of the run-constant Θ and the gradient
    # is ∇C's run sums divided by √s.
    n, p = 300, 5
    W = random_range(n, 40, seed=2)
    gram = hd._Gram.of(W)
    merged, first = gram.segments()
    length = np.diff(np.append(first, n))
    Z = rng.uniform(0.0, 1.0, size=(p, first.size))
    grad = np.empty(Z.size)
    value = hd._PIdentityObjective(merged, p, length.astype(float))(Z.reshape(-1).copy(), grad)
    theta = np.repeat(Z / np.sqrt(length), length, axis=1)
    full_value, full_grad = hd._p_identity_objective(theta, gram)
    assert value == pytest.approx(full_value, rel=1e-12)
    A = np.vstack([np.eye(n), theta]) / (1.0 + theta.sum(axis=0))
    assert value == pytest.approx(np.trace(np.linalg.solve(A.T @ A, dense_gram(W))), rel=1e-9)
    expected = np.add.reduceat(full_grad, first, axis=1) / np.sqrt(length)
    np.testing.assert_allclose(grad.reshape(p, -1), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("p", "counts"), [(64, [1, 3, 12, 48]), (16, [1, 3, 12]), (5, [1, 4]),
                                           (1, [1])])
def test_interval_levels_partition_the_domain_level_by_level(p: int, counts: list[int]) -> None:
    n = 1000
    rows = hd._interval_levels(p, n)
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
    result = hd._optimise(make())
    assert result.method == "OPT_0"
    assert result.error <= previous * 1.01
