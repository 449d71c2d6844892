"""DAWA on 2-D data and on derived vectors: least squares on the group totals
(``groups="measured"``) answers the workload like least squares on the cells,
and a plan handed a vector derived from the root still estimates the root.
(GreedyH along the Hilbert order: tests/operators/test_greedy_h_groups.py.)"""

from __future__ import annotations

import numpy as np

import ektelo
from ektelo import inference, plans
from ektelo import workload as wl
from ektelo.matrix import Identity, Kronecker, Ones
from ektelo.operators import selection


def _skewed(shape: tuple[int, int], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.poisson(0.3, size=shape)
    x[: shape[0] // 4, : shape[1] // 3] += rng.poisson(40, size=(shape[0] // 4, shape[1] // 3))
    return x


def test_group_space_least_squares_answers_the_workload_like_the_cells():
    x = _skewed((64, 64), 2)
    W = wl.random_range((64, 64), 60, seed=5)
    X = ektelo.protect(x, epsilon=1.0, seed=3)
    P = X.dawa_partition(eps=0.25, ratio=0.25)
    M = selection.greedy_h_on_partition(P, W)
    m = X.reduce_by_partition(P).laplace(M, eps=0.75)
    on_cells = inference.least_squares([m]).x.reshape(-1)
    on_groups = inference.least_squares([m], groups="measured").x.reshape(-1)
    np.testing.assert_allclose(W @ on_groups, W @ on_cells, rtol=1e-6, atol=1e-6 * x.sum())
    assert abs(on_groups.sum() - on_cells.sum()) <= 1e-6 * x.sum()
    same = inference.least_squares([m], groups=P).x.reshape(-1)
    np.testing.assert_array_equal(on_groups, same)  # the groups read from m's record are P's


def test_dawa_on_a_derived_vector_estimates_the_root():
    # x handed to the plan is a transform of the root: no partition of the
    # root in the measurement's record, and the plan still returns an
    # estimate of the root
    x = _skewed((16, 16), 3).reshape(16, 16)
    root = ektelo.protect(np.repeat(x[:, :, None], 2, axis=2).reshape(-1), epsilon=1.0, seed=2)
    derived = root.transform(Kronecker([Identity(256), Ones(1, 2)]))  # sums pairs of cells
    W = wl.random_range((256,), 20, seed=1)
    out = plans.run("dawa", derived, W, 1.0)
    assert out.shape == (512,)
    assert abs(root.budget.spent - 1.0) <= 1e-9


def test_dawa_plan_is_least_squares_on_its_groups():
    """The estimate is uniform within each of DAWA's groups and answers the
    workload as the cells' least squares on the same measurement would."""
    x = _skewed((32, 32), 4)
    W = wl.random_range((32, 32), 30, seed=2)
    out = plans.dawa(ektelo.protect(x, epsilon=1.0, seed=5), W, 1.0)
    X = ektelo.protect(x, epsilon=1.0, seed=5)  # the same random bits, step by step
    P = X.dawa_partition(eps=0.25, approximate=None, ratio=0.25)
    m = X.reduce_by_partition(P).laplace(selection.greedy_h_on_partition(P, W), eps=0.75)
    np.testing.assert_allclose(out, P.expand(P.reduce(out)), rtol=1e-12, atol=1e-12)
    on_cells = inference.least_squares([m]).x.reshape(-1)
    np.testing.assert_allclose(W @ out, W @ on_cells, rtol=1e-6, atol=1e-6 * x.sum())
