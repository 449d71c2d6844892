"""Tree-based least squares (Hay et al. 2010) against the general LSMR
least squares and a direct solver, on the same hierarchy measurements."""

from __future__ import annotations

import numpy as np
import pytest

import ektelo
from ektelo.measurement import Measurement
from ektelo.operators import hierarchical, inference, selection


@pytest.mark.parametrize(("n", "branching"), [(2, 2), (16, 2), (1024, 2), (81, 3), (256, 4)])
def test_agrees_with_least_squares_through_the_kernel(n, branching, rng):
    x = rng.poisson(20.0, size=n).astype(np.float64)
    h = ektelo.protect(x, epsilon=1.0, seed=7)
    m = h.laplace(selection.hierarchy((n,), branching), eps=1.0)
    tree = hierarchical.least_squares([m], branching=branching)
    lsmr = inference.least_squares([m])
    assert tree.shape == (n,)
    np.testing.assert_allclose(tree, lsmr, rtol=1e-7, atol=1e-7 * np.abs(lsmr).max())


def test_h2_is_the_binary_case(rng):
    n = 64
    x = rng.poisson(5.0, size=n).astype(np.float64)
    m = ektelo.protect(x, epsilon=2.0, seed=3).laplace(selection.h2((n,)), eps=2.0)
    np.testing.assert_allclose(
        hierarchical.least_squares([m]), inference.least_squares([m]), rtol=1e-7, atol=1e-6
    )


def test_matches_a_direct_solver_on_arbitrary_counts(rng):
    n, b = 27, 3
    Q = selection.hierarchy((n,), b)
    y = rng.normal(size=Q.shape[0]) * 10
    direct, *_ = np.linalg.lstsq(Q.dense(), y, rcond=None)
    tree = hierarchical.solve_levels(hierarchical.levels(y, n, b), b)
    np.testing.assert_allclose(tree, direct, rtol=1e-10, atol=1e-10)


def test_consistent_counts_are_returned_unchanged(rng):
    x = rng.integers(0, 50, size=32).astype(np.float64)
    y = selection.h2((32,)).matvec(x)
    np.testing.assert_allclose(hierarchical.solve_levels(hierarchical.levels(y, 32, 2), 2), x)


def test_levels_split_root_first_and_inputs_are_not_modified():
    y = np.arange(7.0)  # cells 0..3, root 4, depth-1 nodes 5, 6
    parts = hierarchical.levels(y, 4, 2)
    assert [p.tolist() for p in parts] == [[4.0], [5.0, 6.0], [0.0, 1.0, 2.0, 3.0]]
    before = [p.copy() for p in parts]
    hierarchical.solve_levels(parts, 2)
    for p, q in zip(parts, before, strict=True):
        np.testing.assert_array_equal(p, q)


def test_a_single_cell_is_its_own_tree():
    np.testing.assert_array_equal(hierarchical.solve_levels([[5.0]], 2), [5.0])


@pytest.mark.parametrize(
    ("levels", "message"),
    [([[1.0], [1.0, 2.0, 3.0]], "complete 2-ary tree"), ([], "at least the root")],
)
def test_malformed_levels_are_refused(levels, message):
    with pytest.raises(ValueError, match=message):
        hierarchical.solve_levels(levels, 2)


def test_non_finite_counts_and_bad_branching_are_refused():
    with pytest.raises(ValueError, match="non-finite"):
        hierarchical.solve_levels([[np.nan], [1.0, 2.0]], 2)
    with pytest.raises(ValueError, match="at least 2"):
        hierarchical.solve_levels([[1.0]], 1)
    with pytest.raises(TypeError, match="integer"):
        hierarchical.solve_levels([[1.0]], 2.0)


def test_incomplete_trees_and_other_queries_are_refused(rng):
    with pytest.raises(ValueError, match="not a power of 2"):
        hierarchical.levels(np.zeros(19), 10, 2)
    with pytest.raises(ValueError, match="nodes"):
        hierarchical.levels(np.zeros(6), 4, 2)
    x = rng.poisson(5.0, size=16).astype(np.float64)
    h = ektelo.protect(x, epsilon=2.0, seed=1)
    hb = h.laplace(selection.hb((16,)), eps=1.0)  # HB leaves out the root
    with pytest.raises(ValueError, match="not the complete"):
        hierarchical.least_squares([hb], branching=2)
    m = h.laplace(selection.h2((16,)), eps=1.0)
    with pytest.raises(ValueError, match="exactly one"):
        hierarchical.least_squares([m, m])
    with pytest.raises(ValueError, match="exactly one"):
        hierarchical.least_squares(m)  # type: ignore[arg-type]


def test_two_dimensional_roots_are_refused(rng):
    Q = selection.h2((4, 4))
    m = Measurement(Q.matvec(np.ones(16)), Q, Q, 1.0, 1.0, "r", (4, 4))
    with pytest.raises(ValueError, match="1-D"):
        hierarchical.least_squares([m])
