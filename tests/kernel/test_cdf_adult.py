"""Algorithm 1 (the CDF estimator, §2.1) end to end through the kernel on UCI
Adult, with a public uniform partition in place of AHP.

Adult is integer-coded: age code = age − 16 (codes 14..23 are ages 30–39),
sex code 1 = Male (32,650 of 48,842 rows), hours-per-week code = hours − 1.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import nnls

import ektelo
from ektelo import Domain, col
from ektelo.matrix import Identity, Partition, Prefix

ADULT = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "adult"
pytestmark = pytest.mark.skipif(
    not (ADULT / "adult.csv").exists(), reason="shared data ../shared/data/adult is missing"
)


def test_cdf_estimator_on_adult():
    eps = 0.5
    domain = Domain.from_json(ADULT / "adult-domain.json")
    frame = domain.read_csv(ADULT / "adult.csv")
    D = ektelo.protect(frame, domain, epsilon=eps, seed=2024)  # Protected
    D = D.where((col("sex") == 1) & col("age").between(14, 23))  # Where
    D = D.select(["hours-per-week"])  # Select
    x = D.vectorize()  # T-Vectorize
    n = x.size
    P = Partition(np.arange(n) // 11)  # public, in place of AHP
    x_bar = x.reduce_by_partition(P)  # Reduce
    M = Identity(P.num_groups)  # Query select
    y = x_bar.laplace(M, eps=eps)  # Vector Laplace
    z, _ = nnls(y.query.dense(), y.answers)  # NNLS on the reduced vector …
    x_hat = P.expand(z)  # … spread uniformly within groups
    cdf = Prefix(n) @ x_hat  # Prefix

    assert x.budget.spent == eps and x.ledger()[0].spent == Fraction(eps)
    assert x.budget.remaining == 0.0
    np.testing.assert_array_equal(y.query_on_root.dense(), P.reduce_matrix().dense())
    assert y.root_shape == (99,) and y.seed == 2024

    chosen = frame[(frame["sex"] == 1) & frame["age"].between(14, 23)]
    truth = np.bincount(chosen["hours-per-week"], minlength=n).astype(float)
    true_cdf = np.cumsum(truth)
    # At group boundaries only the noise matters: a sum of ≤ 9 Laplace(2) draws.
    ends = np.cumsum(P.sizes) - 1
    assert np.max(np.abs(cdf[ends] - true_cdf[ends])) < 60
    assert abs(cdf[-1] - len(chosen)) < 60
    # Everywhere: the estimate tracks the group-smoothed truth.
    smoothed = np.cumsum(P.expand(P.reduce(truth)))
    assert np.max(np.abs(cdf - smoothed)) < 60
    assert np.all(np.diff(cdf) >= 0) and 5000 < len(chosen) < 10000
