"""Least squares on trees of range queries (`ektelo.inference.tree`): the
two-pass solve of any `Hierarchy` against a direct solver (every shape,
level weights, cells held at 0), and Hay et al.'s closed form on complete
trees against `inference.least_squares` through the kernel."""

from __future__ import annotations

import numpy as np
import pytest

import ektelo
from ektelo import inference
from ektelo.inference import tree
from ektelo.matrix import Hierarchy
from ektelo.operators import selection
from tests.reference_trees import ref_dense

# -- oracles -------------------------------------------------------------------------


SHAPES_1D = [(n,) for n in [1, 2, 3, 4, 5, 7, 8, 9, 10, 13, 16, 17, 27, 31, 33, 64, 100]]
SHAPES_2D = [(1, 1), (1, 6), (5, 1), (2, 2), (3, 4), (4, 4), (3, 5), (6, 6), (7, 6), (8, 8)]
SHAPES_2D += [(3, 16), (5, 12), (9, 4), (12, 30), (16, 3), (10, 10)]
SHAPES_3D = [(2, 3, 4), (3, 3, 3), (5, 1, 7), (4, 4, 4), (1, 2, 1), (2, 2, 9)]
SHAPES = SHAPES_1D + SHAPES_2D + SHAPES_3D
CASES = [(dims, b) for dims in SHAPES for b in (2, 3, 4, 7)]




@pytest.fixture(params=CASES, ids=["x".join(map(str, d)) + f"-b{b}" for d, b in CASES])
def case(request):
    return request.param


# -- the two passes on any Hierarchy ------------------------------------------------------


@pytest.mark.parametrize("root", [True, False])
def test_tree_lstsq_equals_a_direct_solve(case, root, rng):
    """The two-pass solve is the exact least-squares minimiser on every shape,
    uneven parts and single-cell chains included."""
    dims, b = case
    H = Hierarchy(dims, b, root=root)
    y = rng.normal(scale=5.0, size=H.shape[0])
    expected = np.linalg.lstsq(ref_dense(dims, b, root), y, rcond=None)[0]
    np.testing.assert_allclose(tree.lstsq(H, y), expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    ("dims", "b", "weights"),
    [
        ((13,), 2, [0.5, 2.0, 1.0, 3.0, 0.7]),
        ((13, 7), 2, [0.0, 1.0, 0.0, 2.0, 1.0]),  # unmeasured depths
        ((30, 50), 7, [1.0, 0.3, 2.5, 1.5]),
        ((5, 3, 4), 3, [-1.0, 2.0, 0.5]),
    ],
)
def test_tree_lstsq_with_level_weights(dims, b, weights, rng):
    H = Hierarchy(dims, b, level_weights=weights)
    y = rng.normal(size=H.shape[0])
    expected = np.linalg.lstsq(H.dense(), y, rcond=None)[0]
    np.testing.assert_allclose(tree.lstsq(H, y), expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(("dims", "b"), [((17,), 2), ((100,), 4), ((13, 7), 2), ((3, 3, 5), 3)])
@pytest.mark.parametrize("fraction", [0.3, 0.9, 1.0])
def test_tree_lstsq_with_cells_held_at_zero(dims, b, fraction, rng):
    """zero=mask: the least-squares fit over the other cells (whole subtrees
    held at 0 included)."""
    H = Hierarchy(dims, b)
    A = ref_dense(dims, b)
    y = rng.normal(size=A.shape[0])
    zero = rng.random(A.shape[1]) < fraction
    expected = np.zeros(A.shape[1])
    if not zero.all():
        expected[~zero] = np.linalg.lstsq(A[:, ~zero], y, rcond=None)[0]
    got = tree.lstsq(H, y, zero=zero)
    assert np.all(got[zero] == 0)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    ("dims", "b", "weights"),
    [((100,), 3, [0.0, 2.0, 1.0, 0.5, 3.0, 1.5]), ((13, 7), 2, [1.0, 0.5, 2.0, 1.0, 3.0]),
     ((64,), 4, [1.0, 1.0, 1.0, 2.0])],
)
def test_tree_lstsq_with_cells_held_at_zero_and_level_weights(dims, b, weights, rng):
    """The mask with weighted depths: equal leaf weights (64 = 4³, the
    broadcast variance path) and leaves at several weighted depths."""
    H = Hierarchy(dims, b, level_weights=weights)
    A = H.dense()
    y = rng.normal(size=A.shape[0])
    zero = rng.random(A.shape[1]) < 0.5
    expected = np.zeros(A.shape[1])
    expected[~zero] = np.linalg.lstsq(A[:, ~zero], y, rcond=None)[0]
    got = tree.lstsq(H, y, zero=zero)
    assert np.all(got[zero] == 0)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


def test_tree_lstsq_refuses_what_it_cannot_solve(rng):
    H = Hierarchy(8, 2)
    with pytest.raises(ValueError, match="transpose"):
        tree.lstsq(H.T, np.zeros(8))
    with pytest.raises(ValueError, match="15 answers"):
        tree.lstsq(H, np.zeros(14))
    with pytest.raises(ValueError, match="finite"):
        tree.lstsq(H, np.full(15, np.nan))
    with pytest.raises(ValueError, match="boolean mask of 8 cells"):
        tree.lstsq(H, np.zeros(15), zero=np.zeros(7, dtype=bool))
    rank_deficient = Hierarchy(8, 2, level_weights=[1, 1, 1, 0])
    assert not rank_deficient.leaves_measured and H.leaves_measured
    with pytest.raises(ValueError, match="leaf weights"):
        tree.lstsq(rank_deficient, np.zeros(rank_deficient.shape[0]))


# -- Hay et al.'s closed form on complete trees -----------------------------------------


@pytest.mark.parametrize(("n", "branching"), [(2, 2), (16, 2), (1024, 2), (81, 3), (256, 4)])
def test_agrees_with_least_squares_through_the_kernel(n, branching, rng):
    x = rng.poisson(20.0, size=n).astype(np.float64)
    h = ektelo.protect(x, epsilon=1.0, seed=7)
    m = h.laplace(selection.hierarchy((n,), branching), eps=1.0)
    closed = tree.solve_levels(tree.levels(m.answers, n, branching), branching)
    lsmr = inference.least_squares([m], method="lsmr").x
    assert closed.shape == (n,)
    np.testing.assert_allclose(closed, lsmr, rtol=1e-7, atol=1e-7 * np.abs(lsmr).max())


def test_h2_is_the_binary_case(rng):
    n = 64
    x = rng.poisson(5.0, size=n).astype(np.float64)
    m = ektelo.protect(x, epsilon=2.0, seed=3).laplace(selection.h2((n,)), eps=2.0)
    np.testing.assert_allclose(
        tree.solve_levels(tree.levels(m.answers, n, 2), 2),
        inference.least_squares([m]).x,
        rtol=1e-7,
        atol=1e-6,
    )


def test_matches_a_direct_solver_on_arbitrary_counts(rng):
    n, b = 27, 3
    Q = selection.hierarchy((n,), b)
    y = rng.normal(size=Q.shape[0]) * 10
    direct, *_ = np.linalg.lstsq(Q.dense(), y, rcond=None)
    closed = tree.solve_levels(tree.levels(y, n, b), b)
    np.testing.assert_allclose(closed, direct, rtol=1e-10, atol=1e-10)


def test_consistent_counts_are_returned_unchanged(rng):
    x = rng.integers(0, 50, size=32).astype(np.float64)
    y = selection.h2((32,)).matvec(x)
    np.testing.assert_allclose(tree.solve_levels(tree.levels(y, 32, 2), 2), x)


def test_levels_split_root_first_and_inputs_are_not_modified():
    y = np.arange(7.0)  # cells 0..3, root 4, depth-1 nodes 5, 6
    parts = tree.levels(y, 4, 2)
    assert [p.tolist() for p in parts] == [[4.0], [5.0, 6.0], [0.0, 1.0, 2.0, 3.0]]
    before = [p.copy() for p in parts]
    tree.solve_levels(parts, 2)
    for p, q in zip(parts, before, strict=True):
        np.testing.assert_array_equal(p, q)


def test_a_single_cell_is_its_own_tree():
    np.testing.assert_array_equal(tree.solve_levels([[5.0]], 2), [5.0])


@pytest.mark.parametrize(
    ("levels", "message"),
    [([[1.0], [1.0, 2.0, 3.0]], "complete 2-ary tree"), ([], "at least the root")],
)
def test_malformed_levels_are_refused(levels, message):
    with pytest.raises(ValueError, match=message):
        tree.solve_levels(levels, 2)


def test_non_finite_counts_and_bad_branching_are_refused():
    with pytest.raises(ValueError, match="non-finite"):
        tree.solve_levels([[np.nan], [1.0, 2.0]], 2)
    with pytest.raises(ValueError, match="branching must be an integer ≥ 2"):
        tree.solve_levels([[1.0]], 1)
    with pytest.raises(TypeError, match="integer"):
        tree.solve_levels([[1.0]], 2.0)


def test_incomplete_trees_and_other_queries_are_refused(rng):
    with pytest.raises(ValueError, match="not a power of 2"):
        tree.levels(np.zeros(19), 10, 2)
    with pytest.raises(ValueError, match="nodes"):
        tree.levels(np.zeros(6), 4, 2)


