"""Iterative solvers through `as_linear_operator()` recover a known vector
(the way inference uses measurement matrices, paper §7.6)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse.linalg import LinearOperator, cg, lsmr

from ektelo.matrix import Identity, Kronecker, Prefix, RangeQueries, VStack, Wavelet


def hierarchy(n: int, branching: int) -> RangeQueries:
    """Every node above the leaves of a `branching`-ary tree over [0, n)."""
    lower, upper = [], []
    width = branching
    while True:
        starts = np.arange(0, n, width)
        lower.append(starts)
        upper.append(np.minimum(starts + width, n) - 1)
        if width >= n:
            break
        width *= branching
    return RangeQueries(n, np.concatenate(lower), np.concatenate(upper))


def test_lsmr_recovers_x_from_identity_and_prefix(rng):
    n = 300
    x = rng.integers(0, 50, size=n).astype(float)
    M = VStack([Identity(n), Prefix(n)])
    L = M.as_linear_operator()
    assert isinstance(L, LinearOperator) and L.shape == (2 * n, n)
    result = lsmr(L, M.matvec(x), atol=1e-14, btol=1e-14, maxiter=10 * n)
    np.testing.assert_allclose(result[0], x, atol=1e-6)


@pytest.mark.parametrize("branching", [2, 16])
def test_lsmr_recovers_x_from_a_range_query_hierarchy(rng, branching):
    n = 512
    x = rng.poisson(20, size=n).astype(float)
    M = VStack([Identity(n), hierarchy(n, branching)])  # H2 / Hb-like
    result = lsmr(M.as_linear_operator(), M.matvec(x), atol=1e-14, btol=1e-14)
    np.testing.assert_allclose(result[0], x, atol=1e-6)


def test_lsmr_least_squares_matches_dense_solution(rng):
    """With noisy answers lsmr returns the least-squares estimate of the dense problem."""
    n = 64
    M = VStack([Identity(n), hierarchy(n, 4), Wavelet(n)])
    y = M.matvec(rng.normal(size=n)) + rng.normal(size=M.shape[0])
    expected = np.linalg.lstsq(M.dense(), y, rcond=None)[0]
    result = lsmr(M.as_linear_operator(), y, atol=1e-14, btol=1e-14)
    np.testing.assert_allclose(result[0], expected, atol=1e-8)


def test_lsmr_on_a_two_dimensional_kronecker_measurement(rng):
    shape = (12, 9)
    x = rng.integers(0, 9, size=shape).astype(float).ravel()
    M = VStack([Identity(108), Kronecker([Prefix(12), Prefix(9)])])
    result = lsmr(M.as_linear_operator(), M.matvec(x), atol=1e-14, btol=1e-14)
    np.testing.assert_allclose(result[0], x, atol=1e-6)


def test_conjugate_gradient_on_the_gram_matrix(rng):
    n = 100
    x = rng.normal(size=n)
    M = VStack([Identity(n), Prefix(n)])
    G = M.gram()
    solution, info = cg(G.as_linear_operator(), G.matvec(x), rtol=1e-12, maxiter=20 * n)
    assert info == 0
    np.testing.assert_allclose(solution, x, atol=1e-6)


def test_linear_operator_matmat_and_rmatmat(rng):
    M = VStack([Identity(7), Prefix(7)])
    L = M.as_linear_operator()
    X = rng.normal(size=(7, 3))
    Y = rng.normal(size=(14, 2))
    np.testing.assert_allclose(L.matmat(X), M.dense() @ X)
    np.testing.assert_allclose(L.rmatmat(Y), M.dense().T @ Y)
    np.testing.assert_allclose(L.H.matvec(Y[:, 0]), M.dense().T @ Y[:, 0])
