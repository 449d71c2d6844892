"""Closed-form least squares where the measurements' rows have disjoint
supports (`structured.disjoint_of` / `solve_disjoint`, issue #42): Identity,
Total, grids of ranges, a partition's groups measured once or several times
with their own noise scales. Each against LSMR (the iterative solver the
closed form replaces) and a direct minimum-norm solve."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from inference_helpers import measure, stacked

import ektelo
from ektelo import inference as inf
from ektelo.inference import structured
from ektelo.matrix import (
    Diagonal,
    EMatrix,
    Identity,
    Product,
    RangeQueries,
    Sparse,
    Total,
    VStack,
    Weighted,
)
from ektelo.operators import selection


def _group_rows(groups: list[np.ndarray], n: int, values: list[np.ndarray]) -> Sparse:
    """One row per group: `values[g]` on the cells of `groups[g]`."""
    rows = np.concatenate([np.full(g.size, i) for i, g in enumerate(groups)])
    cols = np.concatenate(groups)
    return Sparse(sp.csr_matrix((np.concatenate(values), (rows, cols)), shape=(len(groups), n)))


def _random_partition(n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Random groups of a random permutation of the cells; a few cells left out."""
    cells = rng.permutation(n)[: n - int(rng.integers(0, 4))]
    count = int(rng.integers(1, 8))
    cuts = np.sort(rng.choice(np.arange(1, cells.size), size=count, replace=False))
    return [g for g in np.split(cells, cuts) if g.size]


def _check(ms: list, *, closed: bool = True) -> np.ndarray:
    est = inf.least_squares(ms)
    # closed forms: "disjoint", or "identity" for one identity measurement (#41)
    assert (est.info.method in {"disjoint", "identity"}) is closed
    iterative = inf.least_squares(ms, method="lsmr", tol=1e-14)
    A, b = stacked(ms)
    direct = np.linalg.lstsq(A, b, rcond=None)[0]  # the minimum-norm solution
    scale = max(1.0, float(np.abs(direct).max()))
    np.testing.assert_allclose(est.x.reshape(-1), direct, rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(est.x.reshape(-1), iterative.x.reshape(-1), rtol=0,
                               atol=1e-9 * scale)  # fmt: skip
    assert est.info.residual == pytest.approx(iterative.info.residual, rel=1e-9, abs=1e-9 * scale)
    return np.asarray(est.x).reshape(-1)


@pytest.mark.parametrize("seed", range(8))
def test_random_partitions_measured_with_random_weights(seed: int) -> None:
    """Every group measured by a 0/1 row, some again by 2.5 times it, with
    their own noise scales: per group the inverse-variance weighted mean of
    its totals spread uniformly over its cells; cells of no group 0 (as
    LSMR's minimum-norm solution)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(12, 60))
    x = rng.integers(0, 40, n).astype(float)
    groups = _random_partition(n, rng)
    again = [g for g in groups if rng.random() < 0.5] or groups[:1]
    ms = [
        measure(_group_rows(groups, n, [np.ones(g.size) for g in groups]), x,
                float(rng.uniform(0.5, 4)), rng),
        measure(_group_rows(again, n, [np.full(g.size, 2.5) for g in again]), x,
                float(rng.uniform(0.5, 4)), rng),
    ]  # fmt: skip
    est = _check(ms)
    assert np.all(est[np.setdiff1d(np.arange(n), np.concatenate(groups))] == 0)
    for g in groups:
        np.testing.assert_allclose(est[g], est[g][0], rtol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_random_partitions_with_non_uniform_rows(seed: int) -> None:
    """Rows with any positive entries on disjoint groups: x = t·a/‖a‖²."""
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(12, 60))
    x = rng.integers(0, 40, n).astype(float)
    groups = _random_partition(n, rng)
    _check([measure(_group_rows(groups, n, [rng.random(g.size) + 0.5 for g in groups]), x,
                    2.0, rng)])  # fmt: skip


def test_the_weighted_mean_of_a_group_measured_twice(rng: np.random.Generator) -> None:
    """Total measured with scales 1 and 3: the estimate of the total is the
    inverse-variance weighted mean (9·y₁ + y₂)/10, spread uniformly."""
    n = 10
    x = rng.integers(0, 20, n).astype(float)
    a, b = measure(Total(n), x, 1.0, rng), measure(Total(n), x, 3.0, rng)
    est = _check([a, b])
    total = (9 * a.answers[0] + b.answers[0]) / 10
    np.testing.assert_allclose(est, np.full(n, total / n), rtol=1e-12)


@pytest.mark.parametrize(
    "Q",
    [
        Identity(30),
        Total(30),
        Weighted(Identity(30), 2.0),
        RangeQueries((5, 6), [[0, 0], [0, 3], [2, 0], [4, 4]], [[1, 2], [1, 5], [3, 5], [4, 5]]),
        RangeQueries((6, 4), [[3, 0], [0, 0], [0, 2]], [[5, 1], [2, 1], [2, 3]]),  # a grid, a hole
        Product(Diagonal([1.0, 0.5, 2.0]), RangeQueries(30, [0, 4, 20], [3, 19, 25])),
        Sparse(sp.csr_matrix(RangeQueries(30, [0, 4, 20], [3, 19, 25]).dense())),
        VStack([RangeQueries(30, [0, 10], [9, 19]), RangeQueries(30, [20], [29])]),
    ],
    ids=["identity", "total", "weighted", "tiles-2d", "grid-2d", "diag-ranges", "sparse", "vstack"],
)
def test_disjoint_structures_are_solved_in_closed_form(Q: EMatrix, rng) -> None:
    x = rng.integers(0, 30, Q.shape[1]).astype(float)
    _check([measure(Q, x, 2.0, rng)])


@pytest.mark.parametrize(
    "Q",
    [
        RangeQueries(12, [0, 3], [5, 8]),  # two ranges share cells 3..5
        # a group's two rows are not multiples of each other
        Sparse(sp.csr_matrix(np.array([[1.0, 1, 0, 0], [1, 2, 0, 0], [0, 0, 1, 1]]))),
        Sparse(sp.csr_matrix(np.array([[1.0, 1, 0, 0], [0, 1, 1, 0]]))),  # overlapping supports
        VStack([Identity(8), Total(8)]),  # the total overlaps every cell
    ],
)
def test_what_is_not_disjoint_is_left_to_the_other_solvers(Q: EMatrix, rng) -> None:
    assert structured.disjoint_of(Q) is None
    x = rng.integers(0, 30, Q.shape[1]).astype(float)
    _check([measure(Q, x, 1.5, rng)], closed=False)


def test_kernel_measurements_of_the_uniform_grid(rng: np.random.Generator) -> None:
    """UniformGrid's grid (ranges that tile the domain) measured through the
    kernel, with and without a known total (a total couples the cells: LSMR)."""
    x = rng.poisson(3.0, (32, 32))
    X = ektelo.protect(x, epsilon=1.0, seed=4)
    M = selection.uniform_grid(x.shape, float(x.sum()), 0.5)
    m = X.laplace(M, eps=0.5)
    est = _check([m])
    cells = np.flatnonzero(M.dense()[0])  # the first grid cell: the uniform spread
    np.testing.assert_allclose(est[cells], m.answers[0] / cells.size, rtol=1e-12)
    assert inf.least_squares([m], total=float(x.sum())).info.method == "lsmr"
