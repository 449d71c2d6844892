"""Small selections plans use: `workload_row` (MWEM measures the query it
selected), `augmented_row` (that query plus the free dyadic ranges: εktelo's
augmented MWEM, §9.1) and `network_marginals` (the marginals a Bayesian network needs:
PrivBayes, PrivBayesLS)."""

from __future__ import annotations

import numpy as np
import pytest

from ektelo import workload as wl
from ektelo.matrix import Dense, Identity, Prefix, RangeQueries, VStack
from ektelo.operators import selection


def test_workload_row_is_the_query_and_keeps_ranges_implicit():
    W = wl.random_range((6, 7), 5, seed=1)
    for i in range(5):
        row = selection.workload_row(W, i)
        assert type(row) is RangeQueries and row.shape == (1, 42)
        np.testing.assert_array_equal(row.dense()[0], W.dense()[i])
    P = Prefix(9)
    row = selection.workload_row(P, 4)
    assert type(row) is Dense
    np.testing.assert_array_equal(row.dense()[0], P.dense()[4])
    with pytest.raises(IndexError):
        selection.workload_row(P, 9)
    with pytest.raises(TypeError):
        selection.workload_row(P, 1.0)  # type: ignore[arg-type]


AUG_W = RangeQueries(64, np.array([3, 20, 0, 33]), np.array([9, 40, 63, 34]))


@pytest.mark.parametrize("round_index", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("i", [0, 1, 2, 3])
def test_augmented_rows_are_disjoint_from_the_choice_and_each_other(round_index, i):
    dense = selection.augmented_row(AUG_W, i, round_index).dense()
    np.testing.assert_array_equal(dense[0], AUG_W.row(i))  # the chosen query first
    assert dense.sum(axis=0).max() <= 1  # pairwise disjoint rows
    length = 2 ** (round_index - 1)
    for row in dense[1:]:
        cells = np.flatnonzero(row)
        assert cells[0] % length == 0 and cells.size == min(length, 64 - cells[0])
    # every aligned block of that length clear of the choice is included
    clear = [s for s in range(0, 64, length) if not dense[0, s : s + length].any()]
    assert dense.shape[0] - 1 == len(clear)


def test_augmented_row_alone_when_no_range_fits():
    assert selection.augmented_row(AUG_W, 1, 9).shape == (1, 64)  # 2^8 > 64 cells
    M = selection.augmented_row(Identity(4), 0, 1)  # a unit range: the others are free
    assert type(M) is VStack and type(M.blocks[0]) is RangeQueries
    np.testing.assert_array_equal(M.dense(), np.eye(4))
    assert type(selection.augmented_row(Prefix(4), 3, 1)) is RangeQueries  # covers every cell


def test_augmented_non_range_row_stays_exact():
    W = Dense(np.array([[0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]]))
    dense = selection.augmented_row(W, 0, 2).dense()
    np.testing.assert_array_equal(dense[0], W.dense()[0])
    np.testing.assert_array_equal(dense[1:].sum(axis=0), [0, 0, 1, 1, 1, 1, 0, 0])


@pytest.mark.parametrize(
    ("i", "round_index", "error"),
    [(0, 0, ValueError), (0, 1.0, TypeError), (0, True, TypeError), (64, 1, IndexError)],
)
def test_augmented_row_refuses_bad_arguments(i, round_index, error):
    with pytest.raises(error):
        selection.augmented_row(Identity(64), i, round_index)


def test_network_marginals_are_those_of_the_maximal_cliques():
    shape = (3, 4, 2, 5)
    cliques = [(1, 0), (2, 0, 1), (3, 2, 1)]  # (1, 0) lies inside (2, 0, 1)
    M = selection.network_marginals(shape, cliques)
    assert isinstance(M, VStack) and len(M.blocks) == 2
    expected = np.vstack([wl.marginal(shape, c).dense() for c in cliques[1:]])
    np.testing.assert_array_equal(M.dense(), expected)
    assert M.sensitivity(1) == 2  # one per maximal clique
    with pytest.raises(ValueError):
        selection.network_marginals(shape, [(0, 4)])
    with pytest.raises(ValueError):
        selection.network_marginals(shape, [])
