"""GreedyH on a partition's groups (`selection.greedy_h_on_partition`, DAWA's
second step) and stripe by stripe (`stripe_workloads`, `stripe_union`,
`greedy_h_stripes`: DAWA-Striped, εktelo §9.2), against the definitions:
W P⁺ on the groups (in the curve's order in 2-D), the restricted Gram per
stripe, the union's rows on each stripe's cells."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from ektelo import workload as wl
from ektelo.kernel.dawa import dawa_partition
from ektelo.kernel.noise import RandomSource
from ektelo.matrix import (
    Diagonal,
    Identity,
    Kronecker,
    Partition,
    Prefix,
    Product,
    RangeQueries,
    Sparse,
    Total,
    VStack,
)
from ektelo.operators import partition, selection


def _skewed(shape: tuple[int, int], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.poisson(0.3, size=shape)
    x[: shape[0] // 4, : shape[1] // 3] += rng.poisson(40, size=(shape[0] // 4, shape[1] // 3))
    return x


def _curve_order(P: Partition) -> tuple[np.ndarray, Sparse]:
    """The groups in Hilbert-curve order, and the permutation C to it."""
    k = P.num_groups
    along = P.groups[partition.hilbert_order(P.domain_shape)]
    first = np.full(k, along.size)
    np.minimum.at(first, along, np.arange(along.size))
    order = np.argsort(first)
    rank = np.argsort(order)
    return order, Sparse(sp.csr_matrix((np.ones(k), (rank, np.arange(k))), shape=(k, k)))


# -- one domain -----------------------------------------------------------------------
def test_on_a_1d_partition_it_is_greedy_h_on_the_reduced_workload():
    P = Partition(np.repeat(np.arange(6), [3, 1, 5, 2, 4, 1]))
    W = wl.random_range(16, 12, seed=3)
    M = selection.greedy_h_on_partition(P, W)
    assert selection.greedy_h(P.num_groups, P.reduce_workload(W)) == M
    assert M.sensitivity(1) == pytest.approx(1.0)


def test_on_a_2d_partition_the_tree_follows_the_hilbert_curve():
    """M = G·C, G GreedyH's strategy for W P⁺ Cᵀ (the groups along the curve)."""
    x = _skewed((16, 16), 1)
    P = dawa_partition(x, 0.5, RandomSource(2))
    W = wl.random_range((16, 16), 20, seed=4)
    _, C = _curve_order(P)
    M = selection.greedy_h_on_partition(P, W)
    G = selection.greedy_h(P.num_groups, P.reduce_workload(W) @ C.T)
    np.testing.assert_allclose(M.dense(), (G @ C).dense(), rtol=1e-12, atol=1e-12)
    assert M.shape[1] == P.num_groups
    assert M.sensitivity(1) == pytest.approx(1.0)


def test_dense_reduced_ranges_match_the_implicit_product():
    # dyadic Hilbert buckets are rectangles: greedy_h_on_partition forms W P⁺ Cᵀ
    # densely from the overlaps per axis; GreedyH on the implicit product must
    # weigh the same tree alike
    x = _skewed((64, 64), 1)  # 4096 cells: the dyadic (approximate) partition
    W = wl.random_range((64, 64), 50, seed=4)
    for seed in range(3):
        P = dawa_partition(x, 0.5, RandomSource(seed))
        _, C = _curve_order(P)
        implicit = P.reduce_workload(W) @ C.T
        M = selection.greedy_h_on_partition(P, W)
        G = selection.greedy_h(P.num_groups, implicit)
        np.testing.assert_allclose(M.dense(), (G @ C).dense(), rtol=1e-12, atol=1e-12)


def test_dense_reduced_ranges_decline_non_rectangular_groups():
    groups = np.ones((8, 8), dtype=int)
    groups[0, :2] = 0  # an L-shaped group: (0, 0), (0, 1), (1, 0)
    groups[1, 0] = 0
    P = Partition(groups)
    W = wl.random_range((8, 8), 5, seed=1)
    _, C = _curve_order(P)
    M = selection.greedy_h_on_partition(P, W)  # through the implicit product instead
    assert M.shape == (M.shape[0], 2)
    G = selection.greedy_h(P.num_groups, P.reduce_workload(W) @ C.T)
    np.testing.assert_allclose(M.dense(), (G @ C).dense(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_counted_reduction_equals_the_dense_product(seed):
    """After workload-based reduction (§8) DAWA partitions a 1-D vector of
    workload groups: W·S (S the groups' first cells) reduced by intervals.
    The counted W·S·P⁺ (`interval_reduced_ranges`), and so its Gram, equal
    the old densification of the implicit product on random inputs."""
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(3, 20)), int(rng.integers(3, 20)))
    W = wl.random_range(shape, int(rng.integers(5, 40)), seed=seed)
    Ws = partition.workload_based(W).select_workload(W)
    K = Ws.shape[1]
    cuts = rng.choice(np.arange(1, K), size=int(rng.integers(0, K - 1)), replace=False)
    flags = np.zeros(K, dtype=int)
    flags[cuts] = 1
    P = Partition(np.cumsum(flags))
    counted = selection.interval_reduced_ranges(P, Ws)
    assert counted is not None
    old = P.reduce_workload(Ws)
    np.testing.assert_allclose(counted.dense(), old.dense(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(counted.gram().dense(), old.gram().dense(), rtol=1e-12,
                               atol=1e-12)  # fmt: skip
    # on the ranges themselves (every cell a column) too
    flags = (rng.random(W.shape[1]) < 0.3).astype(int)
    flags[0] = 0
    P_cells = Partition(np.cumsum(flags))
    direct = selection.interval_reduced_ranges(P_cells, W)
    assert direct is not None
    np.testing.assert_allclose(direct.dense(), P_cells.reduce_workload(W).dense(),
                               rtol=1e-13, atol=1e-15)  # fmt: skip


def test_counted_reduction_declines_other_inputs():
    W = wl.random_range((6, 7), 10, seed=1)
    Ws = partition.workload_based(W).select_workload(W)
    scattered = Partition(np.arange(Ws.shape[1]) % 3)  # groups that are not intervals
    assert selection.interval_reduced_ranges(scattered, Ws) is None
    ranges_1d = wl.random_range(42, 10, seed=1)
    assert selection.interval_reduced_ranges(Partition(np.arange(42) // 6), ranges_1d) is None
    P = Partition(np.arange(Ws.shape[1]) // 4)
    assert selection.interval_reduced_ranges(P, Product(Ws, Identity(Ws.shape[1]))) is None


def test_dawa_after_workload_reduction_uses_the_counted_reduction():
    """The plan's strategy is GreedyH on the counted W·S·P⁺: equal to GreedyH
    on the implicit product (the matrix it replaces)."""
    x = _skewed((16, 16), 3)
    W = wl.random_range((16, 16), 30, seed=2)
    Pw = partition.workload_based(W)
    Ws = Pw.select_workload(W)
    xr = Pw.reduce(x.reshape(-1))
    P = dawa_partition(xr, 0.5, RandomSource(1))
    M = selection.greedy_h_on_partition(P, Ws)
    G = selection.greedy_h(P.num_groups, P.reduce_workload(Ws))
    np.testing.assert_allclose(M.dense(), G.dense(), rtol=1e-9, atol=1e-12)


def test_greedy_h_on_partition_checks_its_arguments():
    with pytest.raises(TypeError):
        selection.greedy_h_on_partition(np.zeros(4, dtype=int), Identity(4))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        selection.greedy_h_on_partition(Partition(np.arange(4) // 2), Identity(5))


# -- stripe by stripe -----------------------------------------------------------------
@pytest.mark.parametrize(
    "W",
    [
        Kronecker([VStack([Identity(3), Total(3)]), VStack([Identity(2), Total(2)]), Prefix(6)]),
        wl.marginals((3, 2, 6), 2),
        Identity(36),
        wl.random_range((3, 2, 6), 7, seed=4),
        Sparse(sp.random(9, 36, density=0.3, random_state=2, format="csr")),
    ],
)
@pytest.mark.parametrize("axis", [2, 0, -1])
def test_stripe_workloads_have_the_restricted_gram(W, axis):
    shape = (3, 2, 6)
    R = partition.stripe(shape, axis)
    Wd = W.dense()
    stripes = selection.stripe_workloads(W, shape, axis)
    assert len(stripes) == R.num_groups
    for g, Ws in enumerate(stripes):
        cols = Wd[:, R.cells(g)]
        np.testing.assert_allclose(Ws.dense().T @ Ws.dense(), cols.T @ cols, atol=1e-12)


def test_stripe_workloads_share_equal_restrictions():
    shape = (4, 8)
    stripes = selection.stripe_workloads(Kronecker([Identity(4), Prefix(8)]), shape, 1)
    assert len({id(W) for W in stripes}) == 1


def test_stripe_union_measures_every_stripe_on_its_groups():
    """Row block g reads stripe g's cells only, as A_g·(group sums of P_g)."""
    rng = np.random.default_rng(4)
    shape, axis = (3, 10, 4), 1
    R = partition.stripe(shape, axis)
    partitions, strategies = [], []
    for _ in range(R.num_groups):
        cuts = np.sort(rng.choice(np.arange(1, 10), size=3, replace=False))
        P = Partition(np.searchsorted(cuts, np.arange(10), side="right"))
        lo = np.array([0, 1, 0])
        hi = np.array([P.num_groups - 1, 2, 0])
        A = Product(Diagonal(rng.random(3) + 0.1), RangeQueries(P.num_groups, lo, hi))
        strategies.append(A)
        partitions.append(P)
    D = selection.stripe_union(shape, axis, partitions, strategies).dense()
    offsets = np.cumsum([0] + [A.shape[0] for A in strategies])
    for g, (P, A) in enumerate(zip(partitions, strategies, strict=True)):
        expected = np.zeros((A.shape[0], D.shape[1]))
        expected[:, R.cells(g)] = A.dense() @ P.reduce_matrix().dense()
        np.testing.assert_allclose(D[offsets[g] : offsets[g + 1]], expected, rtol=1e-15)


def test_stripe_union_refuses_what_is_not_intervals_of_weighted_ranges():
    P = Partition(np.array([0, 1, 0, 1]))  # not intervals
    A = Product(Diagonal([1.0]), RangeQueries(2, [0], [1]))
    with pytest.raises(ValueError, match="intervals"):
        selection.stripe_union((2, 4), 1, [P, P], [A, A])
    with pytest.raises(TypeError, match="weighted ranges"):
        selection.stripe_union((2, 4), 1, [Partition(np.arange(4) // 2)] * 2, [Identity(2)] * 2)
    with pytest.raises(ValueError, match="stripes"):
        selection.stripe_union((2, 4), 1, [Partition(np.arange(4) // 2)], [A])


def test_greedy_h_stripes_is_greedy_h_on_each_stripe():
    """Each stripe's rows: GreedyH for the stripe's workload on its groups."""
    shape, axis = (3, 12), 1
    rng = np.random.default_rng(1)
    W = wl.random_range(shape, 9, seed=6)
    workloads = selection.stripe_workloads(W, shape, axis)
    partitions = [Partition(np.sort(rng.integers(0, 4, 12))) for _ in range(3)]
    partitions = [Partition(np.unique(P.groups, return_inverse=True)[1]) for P in partitions]
    M = selection.greedy_h_stripes(shape, axis, partitions, workloads)
    each = [selection.greedy_h(P.num_groups, P.reduce_workload(Ws))
            for P, Ws in zip(partitions, workloads, strict=True)]  # fmt: skip
    expected = selection.stripe_union(shape, axis, partitions, each)
    np.testing.assert_allclose(M.dense(), expected.dense(), rtol=1e-12, atol=1e-12)
    assert M.sensitivity(1) == pytest.approx(1.0)
