"""Public partition selection: workload-based (§8, Prop. 1), stripe, grid,
marginal and the Hilbert order."""

from __future__ import annotations

import itertools
import math
from typing import ClassVar

import numpy as np
import pytest

from ektelo.matrix import (
    Dense,
    Identity,
    Kronecker,
    Partition,
    Prefix,
    RangeQueries,
    Sum,
    Total,
    VStack,
    Weighted,
)
from ektelo.operators import partition as part
from ektelo.workload import builders


def distinct_columns(W) -> int:
    return int(np.unique(W.dense(), axis=1).shape[1])


def assert_lossless(W, P: Partition, rng: np.random.Generator, trials: int = 3) -> None:
    """Prop. 1: W x = (W P⁺)(P x) for random x."""
    Wr = P.reduce_workload(W)
    for _ in range(trials):
        x = rng.integers(0, 100, W.shape[1]).astype(float)
        np.testing.assert_allclose(Wr.matvec(P.reduce(x)), W.matvec(x), rtol=1e-10, atol=1e-9)


def assert_groups_are_equal_columns(W, P: Partition) -> None:
    """Cells share a group iff their columns of the dense W are equal."""
    D = W.dense()
    _, col_group = np.unique(D, axis=1, return_inverse=True)
    col_group = col_group.reshape(-1)
    assert P.num_groups == distinct_columns(W)
    # Same partition up to relabelling.
    assert Partition(col_group, P.domain_shape) == P


WORKLOADS = {
    "prefix": lambda: builders.prefix(64),
    "identity": lambda: builders.identity(20),
    "total": lambda: builders.total(30),
    "random_range": lambda: builders.random_range(200, 25, seed=3),
    "all_range": lambda: builders.all_range(24),
    "range_2d": lambda: builders.random_range((12, 9), 15, seed=4),
    "marginal_1way": lambda: builders.marginal((3, 4, 5), (1,)),
    "marginals_2way": lambda: builders.marginals((3, 4, 2), 2),
    "kron_prefix_total": lambda: Kronecker([Prefix(6), Total(5)]),
    "prefix_marginal": lambda: builders.prefix_marginal((5, 4, 3), 1),
    "stack": lambda: VStack([builders.random_range(50, 5, seed=1), Total(50)]),
}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_based_is_lossless_and_exact(name: str, rng: np.random.Generator) -> None:
    W = WORKLOADS[name]()
    P = part.workload_based(W, seed=7)
    assert P.size == W.shape[1]
    assert_lossless(W, P, rng)
    assert_groups_are_equal_columns(W, P)


@pytest.mark.parametrize("name", ["random_range", "range_2d", "marginals_2way", "stack"])
def test_select_workload_is_reduce_workload_with_the_workloads_own_entries(name: str) -> None:
    W = WORKLOADS[name]()
    P = part.workload_based(W, seed=7)
    selected = P.select_workload(W).dense()
    np.testing.assert_allclose(selected, P.reduce_workload(W).dense(), rtol=1e-12, atol=1e-12)
    assert set(np.unique(selected)) <= set(np.unique(W.dense()))  # no rounded averages
    assert P.select_workload(W).is_integral()


def test_workload_based_reduces_sparse_workloads() -> None:
    # Q1(salary ≤ 100K, sex = M), Q2(salary > 100K, sex = F): 2 cells + the rest (Example 7).
    W = RangeQueries((10, 2), np.array([[0, 0], [5, 1]]), np.array([[4, 0], [9, 1]]))
    P = part.workload_based(W, seed=1)
    assert P.num_groups == 3  # the two queried regions and the never-queried cells
    assert P.domain_shape == (10, 2)


def test_workload_based_range_queries_count_groups_by_endpoints() -> None:
    n = 1000
    W = builders.random_range(n, 30, seed=11)
    P = part.workload_based(W, seed=2)
    # Column j's pattern changes only at range endpoints: groups are the
    # distinct coverage patterns.
    cover = W.sparse().toarray().T
    assert P.num_groups == np.unique(cover, axis=0).shape[0]


def test_workload_based_handles_non_integer_entries(rng: np.random.Generator) -> None:
    # Weighted ranges: hashes are not integers (tolerance grouping).
    W = Weighted(builders.random_range(60, 8, seed=5), 0.1)
    P = part.workload_based(W, seed=3)
    assert_lossless(W, P, rng)
    assert_groups_are_equal_columns(W, P)
    # Random real columns with exact duplicates.
    base = rng.normal(size=(7, 5))
    D = base[:, rng.integers(0, 5, 40)]
    W2 = Dense(D)
    P2 = part.workload_based(W2, seed=4)
    assert P2.num_groups == distinct_columns(W2)
    assert_lossless(W2, P2, rng)


def test_workload_based_merges_columns_equal_up_to_rounding(rng: np.random.Generator) -> None:
    # Column 0 is 0.1 + 0.2 (a sum of two parts), column 1 is 0.3: equal up to
    # one rounding. They must not be kept apart by last-bit differences.
    A1 = np.array([[0.1, 0.3, 1.0], [0.7, 0.7, 2.0]])
    A2 = np.array([[0.2, 0.0, 0.0], [0.0, 0.0, 0.0]])
    W = Sum([Dense(A1), Dense(A2)])
    P = part.workload_based(W, seed=0)
    assert P.num_groups == 2
    assert P.groups[0] == P.groups[1] != P.groups[2]
    x = rng.random(3)
    np.testing.assert_allclose(P.reduce_workload(W).matvec(P.reduce(x)), W.matvec(x), rtol=1e-12)


def test_workload_based_never_splits_equal_columns_across_seeds() -> None:
    W = builders.marginals((4, 3, 5), 1)
    first = part.workload_based(W, seed=0)
    for seed in range(1, 6):
        assert part.workload_based(W, seed=seed) == first
    assert part.workload_based(W, repetitions=1, seed=9) == first
    assert part.workload_based(W, repetitions=4) == first


def test_workload_based_uses_only_transpose_products() -> None:
    class Spy(Identity):
        calls: ClassVar[list[str]] = []

        def _matmat(self, X: np.ndarray) -> np.ndarray:
            Spy.calls.append("matmat")
            return super()._matmat(X)  # `_matmat`: EMatrix's documented subclass hook

        def dense(self) -> np.ndarray:  # pragma: no cover - must not be called
            raise AssertionError("workload_based materialised the workload")

        def sparse(self):  # pragma: no cover - must not be called
            raise AssertionError("workload_based materialised the workload")

    P = part.workload_based(Spy(10))
    assert P.num_groups == 10
    assert Spy.calls == ["matmat"]  # a single block product Wᵀ·V


def test_workload_based_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError):
        part.workload_based(np.eye(3))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        part.workload_based(Identity(3), repetitions=0)
    with pytest.raises(TypeError):
        part.workload_based(Identity(3), repetitions=1.5)  # type: ignore[arg-type]


def test_workload_based_large_random_range_is_exact_on_a_sample(rng) -> None:
    n = 200_000
    W = builders.random_range(n, 100, seed=21)
    P = part.workload_based(W, seed=5)
    lo, hi = W.lower[:, 0], W.upper[:, 0]
    # Distinct columns = distinct coverage patterns = segments between endpoints.
    cuts = np.unique(np.concatenate([lo, hi + 1, [0]]))
    cuts = cuts[cuts < n]
    assert P.num_groups <= cuts.size
    assert_lossless(W, P, rng, trials=2)


# ---------------------------------------------------------------------------
# stripe / grid / marginal
# ---------------------------------------------------------------------------
def test_stripe_groups_cells_along_axis(rng: np.random.Generator) -> None:
    shape = (4, 3, 5)
    x = rng.integers(0, 9, shape).astype(float)
    for axis in range(3):
        P = part.stripe(shape, axis)
        others = [s for i, s in enumerate(shape) if i != axis]
        assert P.num_groups == math.prod(others)
        assert np.all(P.sizes == shape[axis])
        np.testing.assert_array_equal(P.reduce(x.reshape(-1)), x.sum(axis=axis).reshape(-1))
        # A stripe's cells, in order, are one line along `axis`.
        cells = P.cells(0)
        coords = np.array(np.unravel_index(cells, shape))
        assert np.array_equal(coords[axis], np.arange(shape[axis]))
        assert np.all(np.delete(coords, axis, axis=0) == 0)
    assert part.stripe(shape, -1) == part.stripe(shape, 2)


def test_stripe_and_marginal_reject_bad_axes() -> None:
    with pytest.raises(ValueError):
        part.stripe((3, 4), 2)
    with pytest.raises(TypeError):
        part.stripe((3, 4), 0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        part.marginal((3, 4), (0, 0))
    with pytest.raises(ValueError):
        part.marginal((0, 4), (0,))


def test_grid_blocks_with_smaller_edges(rng: np.random.Generator) -> None:
    shape = (5, 7)
    P = part.grid(shape, (2, 3))
    assert P.num_groups == 3 * 3
    x = rng.integers(0, 9, shape).astype(float)
    expected = [x[i : i + 2, j : j + 3].sum() for i in range(0, 5, 2) for j in range(0, 7, 3)]
    np.testing.assert_array_equal(P.reduce(x.reshape(-1)), expected)
    assert sorted(P.sizes.tolist()) == sorted([6, 6, 3, 6, 6, 3, 2, 2, 1])
    assert part.grid((6,), (6,)).num_groups == 1
    assert part.grid((6,), (1,)) == Partition(np.arange(6))
    with pytest.raises(ValueError):
        part.grid((5, 7), (2,))


@pytest.mark.parametrize("attrs", [(), (0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)])
def test_marginal_partition_reduces_to_the_marginal(attrs, rng: np.random.Generator) -> None:
    shape = (3, 4, 2)
    x = rng.integers(0, 9, math.prod(shape)).astype(float)
    P = part.marginal(shape, attrs)
    np.testing.assert_array_equal(P.reduce(x), builders.marginal(shape, attrs).matvec(x))


def test_marginal_equals_workload_based_on_the_marginal() -> None:
    shape = (3, 4, 2)
    W = builders.marginal(shape, (0, 2))
    assert part.marginal(shape, (2, 0)) == Partition(part.workload_based(W).groups, shape)


# ---------------------------------------------------------------------------
# Hilbert order
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (8, 8), (16, 16)])
def test_hilbert_order_is_a_continuous_curve_on_squares(shape) -> None:
    order = part.hilbert_order(shape)
    assert np.array_equal(np.sort(order), np.arange(math.prod(shape)))
    r, c = np.unravel_index(order, shape)
    assert r[0] == 0 and c[0] == 0
    steps = np.abs(np.diff(r)) + np.abs(np.diff(c))
    assert np.all(steps == 1)


@pytest.mark.parametrize("shape", [(3, 5), (7, 2), (1, 9), (10, 10), (33, 17)])
def test_hilbert_order_skips_absent_cells(shape) -> None:
    order = part.hilbert_order(shape)
    assert np.array_equal(np.sort(order), np.arange(math.prod(shape)))
    # It is the enclosing square's curve restricted to the domain.
    side = 1 << (max(shape) - 1).bit_length()
    full = part.hilbert_order((side, side))
    r, c = np.unravel_index(full, (side, side))
    inside = (r < shape[0]) & (c < shape[1])
    assert np.array_equal(order, r[inside] * shape[1] + c[inside])


def test_hilbert_order_matches_the_kernel_dawa_order() -> None:
    dawa = pytest.importorskip("ektelo.kernel.dawa")
    for shape in [(4, 4), (5, 3), (16, 9)]:
        assert np.array_equal(part.hilbert_order(shape), dawa.hilbert_order(shape))


def test_hilbert_order_rejects_non_2d() -> None:
    with pytest.raises(ValueError):
        part.hilbert_order((4,))
    with pytest.raises(ValueError):
        part.hilbert_order((2, 2, 2))


def test_hilbert_partition_maps_intervals_back(rng: np.random.Generator) -> None:
    shape = (6, 5)
    order = part.hilbert_order(shape)
    bounds = [0, 4, 11, 12, 30]
    labels = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
    P = part.hilbert_partition(shape, Partition(labels))
    assert P.domain_shape == shape
    assert P.num_groups == 4
    x = rng.integers(0, 9, 30).astype(float)
    seq = x[order]
    np.testing.assert_array_equal(
        np.sort(P.reduce(x)), np.sort([seq[a:b].sum() for a, b in itertools.pairwise(bounds)])
    )
    assert part.hilbert_partition(shape, labels) == P
    with pytest.raises(ValueError):
        part.hilbert_partition(shape, labels[:-1])
