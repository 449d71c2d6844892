"""DAWA on 2-D data: the dense reduced workload over rectangular buckets, and
least squares on the group totals (same workload answers as on the cells)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

import ektelo
from ektelo import workload as wl
from ektelo.kernel.dawa import dawa_partition
from ektelo.kernel.noise import RandomSource
from ektelo.matrix import Partition, Sparse
from ektelo.operators import inference
from ektelo.operators import partition as partition_ops
from ektelo.plans import data_dependent as dd


def _skewed(shape: tuple[int, int], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.poisson(0.3, size=shape).astype(float)
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
    on_cells = inference.least_squares([m])
    on_groups = P.expand(inference.least_squares([dd._on_groups(m, P)]))
    np.testing.assert_allclose(W @ on_groups, W @ on_cells, rtol=1e-6, atol=1e-6 * x.sum())
    assert abs(on_groups.sum() - on_cells.sum()) <= 1e-6 * x.sum()
