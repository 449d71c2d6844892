"""Everything checked before the charge (issue #36): a query whose evaluation
would exhaust the kernel's memory or time — the huge Kronecker of three
sparse 250,000×2 factors (1.6·10¹⁶ rows, within every per-factor wire limit)
— is refused from its structure alone, before anything is charged; the
work estimate follows the structure (stacks add, Kronecker factors multiply)
and the limits are the kernel's configuration (`QueryLimits`)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from ektelo.kernel import QueryLimits
from ektelo.kernel.kernel import query_size
from ektelo.matrix import Dense, Identity, Kronecker, Prefix, Sparse, Total, VStack
from ektelo.port import protect


def tall_sparse(rows: int = 250_000) -> Sparse:
    """A sparse rows×2 factor with two non-zeros (the issue's attack)."""
    return Sparse(sp.csr_matrix((np.ones(2), ([0, rows - 1], [0, 1])), shape=(rows, 2)))


def test_the_huge_kronecker_is_refused_with_nothing_charged():
    x = protect(np.arange(8).reshape(2, 2, 2), epsilon=1.0, seed=0)
    Q = Kronecker([tall_sparse()] * 3)
    assert Q.shape == (250_000**3, 8)
    for request in (lambda: x.laplace(Q, eps=0.5), lambda: x.transform(Q)):
        with pytest.raises(ValueError, match=r"M has 1\.56e\+16 rows; .*nothing was spent"):
            request()
    assert x.budget.spent == 0 and len(x.history()) == 0


def test_the_work_estimate_refuses_a_cheap_output_with_costly_evaluation():
    """Few rows, much work: a dense 4096×4096 block costs 2²⁴ operations."""
    x = protect(np.arange(4096), epsilon=1.0, seed=0,
                query_limits=QueryLimits(max_rows=1 << 20, max_work=1 << 20))
    dense = Dense(np.ones((4096, 4096)))
    with pytest.raises(ValueError, match=r"needs about 1\.68e\+07 operations.*limit is 1\.05e\+06"):
        x.laplace(dense, eps=0.5)
    assert x.budget.spent == 0
    m = x.laplace(Prefix(4096), eps=0.5)  # O(n): well within the same limits
    assert m.answers.shape == (4096,) and x.budget.spent == pytest.approx(0.5)


def test_a_query_at_the_row_limit_is_answered_and_one_past_it_is_refused():
    limits = QueryLimits(max_rows=2 * 64, max_work=1 << 30)
    x = protect(np.arange(64), epsilon=1.0, seed=0, query_limits=limits)
    x.laplace(VStack([Identity(64), Prefix(64)]), eps=0.1)
    with pytest.raises(ValueError, match="has 129 rows; the kernel answers at most 128"):
        x.laplace(VStack([Identity(64), Prefix(64), Total(64)]), eps=0.1)
    assert x.budget.spent == pytest.approx(0.1)


def test_work_follows_the_structure():
    f = tall_sparse(1000)
    rows, work = query_size(Kronecker([f, f]))
    assert rows == 1000**2
    # each factor (1000 + 2 + 2 nnz) applied along its axis of a ≤ 1000-wide tensor
    assert work == (1000**2 + 4) + 2 * 1004 * 1000
    assert query_size(VStack([Identity(10), Dense(np.ones((3, 10)))]))[1] == 23 + 20 + (13 + 30)


def test_limits_are_typed():
    with pytest.raises(TypeError, match="limits must be a QueryLimits"):
        protect(np.arange(4), epsilon=1.0, query_limits={"max_rows": 3})  # type: ignore[arg-type]
