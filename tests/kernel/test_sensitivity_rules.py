"""The kernel's own structural rules (kernel/sensitivity.py) against the dense
truth, and the trusted copy's shape: ruled parts stay implicit, the rest is
materialised in place."""

from __future__ import annotations

import numpy as np
import pytest

import ektelo
from ektelo.kernel.kernel import trusted_matrix
from ektelo.kernel.sensitivity import facts, has_rules, max_abs_entry
from ektelo.matrix import (
    Dense,
    Diagonal,
    EMatrix,
    Hierarchy,
    HStack,
    Identity,
    Kronecker,
    Ones,
    Prefix,
    Product,
    RangeQueries,
    Sparse,
    Suffix,
    Sum,
    Total,
    VStack,
    Wavelet,
    Weighted,
)

CATALOG: list[EMatrix] = [
    Identity(5),
    Ones(3, 5),
    Total(5),
    Prefix(6),
    Suffix(6),
    Wavelet(8),
    Wavelet(8, transposed=True),
    RangeQueries(10, np.array([0, 3, 2]), np.array([5, 9, 2])),
    RangeQueries((4, 5), np.array([[0, 0], [1, 2]]), np.array([[3, 4], [2, 3]])),
    Dense(np.array([[1.0, -7.5, 0.0], [2.0, 3.0, 4.0]])),
    Sparse(np.array([[0.0, -3.0], [0.5, 0.0]])),
    Diagonal(np.array([1.0, -4.0, 2.0])),
    Hierarchy(16, 4),
    Hierarchy(13, 2, root=False),
    Hierarchy((4, 6), 2, level_weights=[1.0, 2.0, 0.5, 3.0]),
    Weighted(Prefix(4), -2.5),
    VStack([Prefix(3), Dense(np.array([[0.0, 9.0, -1.0]]))]),
    VStack([Identity(4), Total(4), Prefix(4)]),
    HStack([Identity(2), Dense(np.array([[1.0, 2.0], [3.0, 4.0]]))]),
    Kronecker([Dense(np.array([[1.0, -2.0]])), Weighted(Identity(3), 3.0)]),
    Kronecker([Prefix(3), Wavelet(4)]),
    Sum([Weighted(Identity(4), 0.1), Weighted(Identity(4), 0.9)]),
]


@pytest.mark.parametrize("M", CATALOG, ids=lambda M: type(M).__name__)
def test_facts_are_never_below_the_truth(M: EMatrix) -> None:
    assert has_rules(M)
    dense = M.dense()
    f = facts(M)
    true_l1 = np.abs(dense).sum(axis=0).max()
    true_l2 = np.sqrt((dense**2).sum(axis=0).max())
    assert f.l1 >= true_l1 * (1 - 1e-12) and f.l1 <= true_l1 * (1 + 1e-9) + 1e-12
    assert f.l2 >= true_l2 * (1 - 1e-12)
    assert f.max_column_nnz >= (dense != 0).sum(axis=0).max()
    assert max_abs_entry(M) >= np.abs(dense).max()
    if f.integral:
        assert np.array_equal(dense, np.round(dense))


def test_a_sum_is_integral_only_when_every_term_is() -> None:
    # 0.1·I + 0.9·I equals I densely, but its answers are computed as the sum
    assert not facts(Sum([Weighted(Identity(4), 0.1), Weighted(Identity(4), 0.9)])).integral


def test_unruled_parts_are_materialised_in_place() -> None:
    P = Product(Dense(np.array([[1.0, 1.0], [0.0, 1.0]])), Prefix(2))
    Q = trusted_matrix(Kronecker([P, Identity(3)]))
    assert type(Q) is Kronecker and type(Q.factors[0]) is Sparse
    assert type(Q.factors[1]) is Identity
    np.testing.assert_array_equal(Q.dense(), np.kron(P.dense(), np.eye(3)))
    x = ektelo.protect(np.arange(6), epsilon=1.0, seed=0)
    m = x.laplace(Kronecker([P, Identity(3)]), eps=1.0)
    assert type(m.query) is Kronecker  # structure kept for inference


def _random_expression(draw_seed: int, depth: int = 2) -> EMatrix:
    rng = np.random.default_rng(draw_seed)

    def leaf(n: int) -> EMatrix:
        kind = rng.integers(4)
        if kind == 0:
            return Dense(rng.normal(size=(int(rng.integers(1, 4)), n)).round(2))
        if kind == 1:
            return Diagonal(rng.integers(-3, 4, size=n).astype(float))
        return Prefix(n) if kind == 2 else Identity(n)

    def build(n: int, d: int) -> EMatrix:
        if d == 0:
            return leaf(n)
        kind = rng.integers(4)
        if kind == 0:
            return VStack([build(n, d - 1) for _ in range(int(rng.integers(1, 3)))])
        if kind == 1:
            a = build(n, d - 1)
            return Sum([a, Weighted(Dense(rng.normal(size=a.shape).round(2)), float(rng.normal()))])
        if kind == 2:
            return Weighted(build(n, d - 1), float(rng.integers(-3, 4) or 1) / 2)
        return Kronecker([build(2, d - 1), build(n // 2, d - 1)]) if n % 2 == 0 else leaf(n)

    return build(6, depth)


@pytest.mark.parametrize("seed", range(60))
def test_random_expressions_are_bounded_above(seed: int) -> None:
    M = _random_expression(seed)
    dense = M.dense()
    f = facts(M)
    tol = 1 + 1e-12
    assert f.l1 * tol >= np.abs(dense).sum(axis=0).max()
    assert f.l2 * tol >= np.sqrt((dense**2).sum(axis=0).max())
    assert f.max_column_nnz >= (dense != 0).sum(axis=0).max()
