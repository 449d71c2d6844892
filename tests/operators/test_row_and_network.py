"""Two small selections plans use: `workload_row` (MWEM measures the query it
selected) and `network_marginals` (the marginals a Bayesian network needs:
PrivBayes, PrivBayesLS)."""

from __future__ import annotations

import numpy as np
import pytest

from ektelo import workload as wl
from ektelo.matrix import Dense, Prefix, RangeQueries, VStack
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
