"""DAWA on 2-D data: the dense reduced workload over rectangular buckets, and
least squares on the group totals (same workload answers as on the cells)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

import ektelo
from ektelo import inference
from ektelo import workload as wl
from ektelo.kernel.dawa import dawa_partition
from ektelo.kernel.noise import RandomSource
from ektelo.matrix import Partition, Sparse
from ektelo.operators import partition as partition_ops
from ektelo.plans import data_dependent as dd


def _skewed(shape: tuple[int, int], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.poisson(0.3, size=shape)
    x[: shape[0] // 4, : shape[1] // 3] += rng.poisson(40, size=(shape[0] // 4, shape[1] // 3))
    return x


def _curve_order(P: Partition) -> tuple[np.ndarray, Sparse]:
    k = P.num_groups
    along = P.groups[partition_ops.hilbert_order(P.domain_shape)]
    first = np.full(k, along.size)
    np.minimum.at(first, along, np.arange(along.size))
    order = np.argsort(first)
    rank = np.argsort(order)
    return order, Sparse(sp.csr_matrix((np.ones(k), (rank, np.arange(k))), shape=(k, k)))


def test_dense_reduced_ranges_match_the_implicit_product():
    x = _skewed((64, 64), 1)  # 4096 cells: the dyadic (approximate) partition
    W = wl.random_range((64, 64), 50, seed=4)
    for seed in range(3):
        P = dawa_partition(x, 0.5, RandomSource(seed))
        order, C = _curve_order(P)
        dense = dd._dense_reduced_ranges(P, W, order)
        assert dense is not None, "dyadic Hilbert buckets are rectangles"
        implicit = (P.reduce_workload(W) @ C.T).dense()
        np.testing.assert_allclose(dense.dense(), implicit, rtol=1e-12, atol=1e-12)


def test_dense_reduced_ranges_decline_non_rectangular_groups():
    groups = np.ones((8, 8), dtype=int)
    groups[0, :2] = 0  # an L-shaped group: (0, 0), (0, 1), (1, 0)
    groups[1, 0] = 0
    P = Partition(groups)
    W = wl.random_range((8, 8), 5, seed=1)
    order, _ = _curve_order(P)
    assert dd._dense_reduced_ranges(P, W, order) is None


def test_group_space_least_squares_answers_the_workload_like_the_cells():
    x = _skewed((64, 64), 2)
    W = wl.random_range((64, 64), 60, seed=5)
    X = ektelo.protect(x, epsilon=1.0, seed=3)
    P = X.dawa_partition(eps=0.25, ratio=0.25)
    M = dd._greedy_h_along_order(P, W)
    m = X.reduce_by_partition(P).laplace(M, eps=0.75)
    on_cells = inference.least_squares([m]).x.reshape(-1)
    on_groups = inference.least_squares([m], groups=P).x.reshape(-1)
    np.testing.assert_allclose(W @ on_groups, W @ on_cells, rtol=1e-6, atol=1e-6 * x.sum())
    assert abs(on_groups.sum() - on_cells.sum()) <= 1e-6 * x.sum()


def test_dawa_on_a_derived_vector_estimates_the_root():
    # x handed to the plan is a transform of the root: the group-space shortcut
    # does not apply, and the plan still returns an estimate of the root.
    from ektelo import plans
    from ektelo.matrix import Identity, Kronecker, Ones

    x = _skewed((16, 16), 3).reshape(16, 16)
    root = ektelo.protect(np.repeat(x[:, :, None], 2, axis=2).reshape(-1), epsilon=1.0, seed=2)
    derived = root.transform(Kronecker([Identity(256), Ones(1, 2)]))  # sums pairs of cells
    W = wl.random_range((256,), 20, seed=1)
    out = plans.run("dawa", derived, W, 1.0)
    assert out.shape == (512,)
    assert abs(root.budget.spent - 1.0) <= 1e-9


def test_group_space_shortcut_only_for_groups_of_the_root():
    n = 64
    rng = np.random.default_rng(4)
    x = rng.poisson(5, size=n)
    P = Partition(np.arange(n) // 8)
    M = wl.prefix(P.num_groups)
    root = ektelo.protect(x, epsilon=2.0, seed=1)
    assert dd._measures_root_groups(root.reduce_by_partition(P).laplace(M, eps=1.0), [P])
    perm = Sparse(sp.csr_matrix((np.ones(n), (np.arange(n), rng.permutation(n))), shape=(n, n)))
    shuffled = root.transform(perm)  # same shape as the root, not the root
    m = shuffled.reduce_by_partition(P).laplace(M, eps=1.0)
    assert not dd._measures_root_groups(m, [P])
