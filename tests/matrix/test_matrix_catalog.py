"""One catalog of matrices, every operation checked against the dense form.

Each entry builds an implicit matrix *and*, independently with plain numpy,
the dense array it must equal. Every primitive and derived operation of the
`EMatrix` contract is then compared with the same computation on that array
(the HDMM conformance pattern).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable

import numpy as np
import pytest
import scipy.sparse as sp

from ektelo.matrix import (
    Dense,
    Diagonal,
    EMatrix,
    Embedding,
    Hierarchy,
    HStack,
    Identity,
    Kronecker,
    Ones,
    Partition,
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
    from_json,
    rebuild,
    to_json,
)
from ektelo.workload import all_range, marginals, random_range

# -- independent dense references ---------------------------------------------

_SEED = np.random.default_rng(20180611)
_DENSE_A = np.round(_SEED.normal(size=(2, 3)), 2)  # signed, non-integral
_DENSE_B = _SEED.integers(-3, 4, size=(4, 5)).astype(float)  # signed integers
_DENSE_12 = np.round(_SEED.normal(size=(2, 12)), 1)
_DENSE_7 = np.array([[1, 1, 0, 0, 0, 0, 1], [0, 0, 1, 1, 1, 1, 0]], dtype=float)
_SPARSE = sp.random(6, 5, density=0.4, random_state=7, format="csr")
_SPARSE.data = np.round(_SPARSE.data * 4 - 2, 2)
_SPARSE_SQ = sp.random(12, 12, density=0.2, random_state=3, format="csr")
_SPARSE_SQ.data = np.round(_SPARSE_SQ.data * 6 - 3)
_SPARSE_SQ.eliminate_zeros()


def _haar(n: int) -> np.ndarray:
    """Unnormalised Haar matrix: total, then each dyadic interval from the root."""
    rows = [np.ones(n)]
    width = n
    while width > 1:
        for start in range(0, n, width):
            r = np.zeros(n)
            r[start : start + width // 2] = 1
            r[start + width // 2 : start + width] = -1
            rows.append(r)
        width //= 2
    return np.array(rows)


def _ranges(shape: tuple[int, ...], lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    rows = []
    for lo, hi in zip(lower, upper, strict=True):
        box = np.zeros(shape)
        box[tuple(slice(a, b + 1) for a, b in zip(lo, hi, strict=True))] = 1
        rows.append(box.ravel())
    return np.array(rows)


def _kron(*arrays: np.ndarray) -> np.ndarray:
    out = np.ones((1, 1))
    for a in arrays:
        out = np.kron(out, a)
    return out


_LO1 = np.array([[1], [3], [0], [1], [6], [2]])
_HI1 = np.array([[3], [4], [3], [1], [6], [6]])
_LO2 = np.array([[0, 1], [1, 0], [2, 3], [0, 0], [1, 2]])
_HI2 = np.array([[1, 2], [2, 3], [2, 3], [2, 3], [1, 2]])
_LO3 = np.array([[0, 0, 1], [1, 1, 0], [0, 2, 0]])
_HI3 = np.array([[1, 2, 1], [1, 2, 1], [1, 2, 1]])
_GROUPS = np.array([2, 0, 0, 1, 2, 2, 1])
_HI5 = np.array([[4], [2], [4], [1]])
_LO64 = np.array([[3], [10], [10], [40], [0], [5], [33], [60], [12], [7]])
_HI64 = np.array([[20], [11], [63], [41], [9], [5], [50], [63], [30], [7]])
_W64 = np.array([1.5, -2.0, 0.5, 1.0, 0.0, 3.0, -0.25, 2.0, 1.0, 0.75])
_W7 = np.array([2.0, -1.0, 0.5, 0.0, 3.0, -2.0])
_LO34 = np.array([[0, 0], [0, 2], [2, 0], [2, 2]])
_HI34 = np.array([[1, 1], [1, 3], [2, 1], [2, 3]])


def _all_range_rows(n: int) -> np.ndarray:
    """Every range [i, j] of n cells, i ≤ j, in the order of `workload.all_range`."""
    return np.array(
        [[1.0 if i <= k <= j else 0.0 for k in range(n)] for i in range(n) for j in range(i, n)]
    )


def _partition_reduce() -> np.ndarray:
    labels = np.array([0, 1, 1, 2, 0, 0, 2])  # first-appearance relabelling of _GROUPS
    return np.array([(labels == g).astype(float) for g in range(3)])


Entry = Callable[[], tuple[EMatrix, np.ndarray]]

CATALOG: dict[str, Entry] = {
    # core matrices
    "Identity": lambda: (Identity(5), np.eye(5)),
    "Ones": lambda: (Ones(3, 4), np.ones((3, 4))),
    "Total": lambda: (Total(6), np.ones((1, 6))),
    "Prefix": lambda: (Prefix(6), np.tril(np.ones((6, 6)))),
    "Suffix": lambda: (Suffix(6), np.triu(np.ones((6, 6)))),
    "Prefix1": lambda: (Prefix(1), np.ones((1, 1))),
    "Wavelet": lambda: (Wavelet(8), _haar(8)),
    "Wavelet.T": lambda: (Wavelet(8).T, _haar(8).T),
    "Wavelet1": lambda: (Wavelet(1), np.ones((1, 1))),
    "Diagonal": lambda: (Diagonal([2.0, -1.5, 0.0, 3.0]), np.diag([2.0, -1.5, 0.0, 3.0])),
    "Embedding": lambda: (Embedding(8, 5), np.eye(8, 5)),
    "Embedding.T": lambda: (Embedding(8, 5).T, np.eye(8, 5).T),
    "Embedding.square": lambda: (Embedding(3, 3), np.eye(3)),
    "Dense": lambda: (Dense(_DENSE_A), _DENSE_A),
    "Dense.int": lambda: (Dense(_DENSE_B), _DENSE_B),
    "Dense.binary": lambda: (Dense(_DENSE_7), _DENSE_7),
    "Sparse": lambda: (Sparse(_SPARSE), _SPARSE.toarray()),
    "Sparse.square": lambda: (Sparse(_SPARSE_SQ), _SPARSE_SQ.toarray()),
    "RangeQueries1D": lambda: (RangeQueries(7, _LO1, _HI1), _ranges((7,), _LO1, _HI1)),
    "RangeQueries1D.flat": lambda: (
        RangeQueries(7, _LO1.ravel(), _HI1.ravel()),
        _ranges((7,), _LO1, _HI1),
    ),
    # 1-D ranges, one per closed form of their Gram (`RangeQueries.weighted_gram`)
    "RangeQueries1D.core": lambda: (RangeQueries(64, _LO64, _HI64), _ranges((64,), _LO64, _HI64)),
    "RangeQueries1D.prefixes": lambda: (
        RangeQueries(9, [0, 0, 0, 0], [2, 2, 5, 8]),
        _ranges((9,), np.zeros((4, 1), int), np.array([[2], [2], [5], [8]])),
    ),
    "RangeQueries1D.cells": lambda: (
        RangeQueries(6, [1, 4, 1, 0], [1, 4, 1, 0]),
        _ranges((6,), np.array([[1], [4], [1], [0]]), np.array([[1], [4], [1], [0]])),
    ),
    "RangeQueries1D.identity": lambda: (
        RangeQueries(5, [4, 3, 2, 1, 0], [4, 3, 2, 1, 0]),
        np.eye(5)[::-1],
    ),
    "Weighted(all_range)": lambda: (Weighted(all_range(6), -1.5), -1.5 * _all_range_rows(6)),
    "Product(Diagonal,all_range)": lambda: (
        Product(Diagonal(np.full(10, 0.5)), all_range(4)),
        0.5 * _all_range_rows(4),
    ),
    "Product(Diagonal,RangeQueries1D)": lambda: (
        Product(Diagonal(_W7), RangeQueries(7, _LO1, _HI1)),
        np.diag(_W7) @ _ranges((7,), _LO1, _HI1),
    ),
    "Product(Diagonal,RangeQueries1D.core)": lambda: (
        Product(Diagonal(_W64), RangeQueries(64, _LO64, _HI64)),
        np.diag(_W64) @ _ranges((64,), _LO64, _HI64),
    ),
    "RangeQueries2D": lambda: (RangeQueries((3, 4), _LO2, _HI2), _ranges((3, 4), _LO2, _HI2)),
    "RangeQueries2D.T": lambda: (
        RangeQueries((3, 4), _LO2, _HI2).T,
        _ranges((3, 4), _LO2, _HI2).T,
    ),
    "RangeQueries3D": lambda: (
        RangeQueries((2, 3, 2), _LO3, _HI3),
        _ranges((2, 3, 2), _LO3, _HI3),
    ),
    # compositions
    "Kron(VStack(Prefix,Dense),Identity)": lambda: (
        Kronecker([VStack([Prefix(3), Dense(_DENSE_A)]), Identity(2)]),
        _kron(np.vstack([np.tril(np.ones((3, 3))), _DENSE_A]), np.eye(2)),
    ),
    "Kron(VStack(Prefix,Dense),Dense)": lambda: (
        Kronecker([VStack([Prefix(3), Dense(_DENSE_A)]), Dense(_DENSE_B)]),
        _kron(np.vstack([np.tril(np.ones((3, 3))), _DENSE_A]), _DENSE_B),
    ),
    "Product(Sparse,Kron(Prefix,Suffix))": lambda: (
        Product(Sparse(_SPARSE_SQ), Kronecker([Prefix(3), Suffix(4)])),
        _SPARSE_SQ.toarray() @ _kron(np.tril(np.ones((3, 3))), np.triu(np.ones((4, 4)))),
    ),
    "Weighted": lambda: (Weighted(Prefix(4), -2.5), -2.5 * np.tril(np.ones((4, 4)))),
    "Weighted.zero": lambda: (Weighted(Dense(_DENSE_B), 0.0), np.zeros((4, 5))),
    "scalar*": lambda: (3 * Suffix(3), 3 * np.triu(np.ones((3, 3)))),
    "Sum.signed": lambda: (
        Sum([Prefix(4), Dense(_DENSE_B[:, :4])]),
        np.tril(np.ones((4, 4))) + _DENSE_B[:, :4],
    ),
    "Sum.nonneg": lambda: (
        Sum([Prefix(4), Identity(4), Ones(4, 4)]),
        np.tril(np.ones((4, 4))) + np.eye(4) + 1,
    ),
    "HStack": lambda: (
        HStack([Prefix(3), Dense(_DENSE_A.T), Identity(3)]),
        np.hstack([np.tril(np.ones((3, 3))), _DENSE_A.T, np.eye(3)]),
    ),
    "VStack(Kron,Kron)": lambda: (
        VStack([Kronecker([Identity(2), Total(3)]), Kronecker([Total(2), Prefix(3)])]),
        np.vstack(
            [_kron(np.eye(2), np.ones((1, 3))), _kron(np.ones((1, 2)), np.tril(np.ones((3, 3))))]
        ),
    ),
    "Kron(Wavelet.T,Diagonal,Sparse)": lambda: (
        Kronecker([Wavelet(4).T, Diagonal([1.0, -2.0]), Sparse(_SPARSE[:3, :2])]),
        _kron(_haar(4).T, np.diag([1.0, -2.0]), _SPARSE[:3, :2].toarray()),
    ),
    "Kron(Kron(Ones,Prefix),Weighted(Suffix))": lambda: (
        Kronecker([Kronecker([Ones(2, 3), Prefix(2)]), Weighted(Suffix(3), -1.0)]),
        _kron(np.ones((2, 3)), np.tril(np.ones((2, 2))), -np.triu(np.ones((3, 3)))),
    ),
    "Kron(Identity,Identity)": lambda: (Kronecker([Identity(3), Identity(2)]), np.eye(6)),
    "Example2.small": lambda: (
        Kronecker([Prefix(3), Prefix(2), VStack([Total(7), Identity(7), Dense(_DENSE_7)])]),
        _kron(
            np.tril(np.ones((3, 3))),
            np.tril(np.ones((2, 2))),
            np.vstack([np.ones((1, 7)), np.eye(7), _DENSE_7]),
        ),
    ),
    "Product(Dense,RangeQueries.T)": lambda: (
        Product(Dense(_DENSE_12), RangeQueries((3, 4), _LO2[:4], _HI2[:4]).T),
        _DENSE_12 @ _ranges((3, 4), _LO2[:4], _HI2[:4]).T,
    ),
    "Product(Prefix,Suffix)": lambda: (
        Product(Prefix(4), Suffix(4)),
        np.tril(np.ones((4, 4))) @ np.triu(np.ones((4, 4))),
    ),
    # Privelet's padded Haar strategy, and products with a column embedding
    # (column norms, |·| and ∘ read off the left factor's columns)
    "Product(Wavelet,Embedding)": lambda: (
        Product(Wavelet(8), Embedding(8, 5)),
        _haar(8)[:, :5],
    ),
    "Product(Dense,Embedding.T)": lambda: (
        Product(Dense(_DENSE_B[:, :3]), Embedding(5, 3).T),
        _DENSE_B[:, :3] @ np.eye(5, 3).T,
    ),
    "Kron(Product(Wavelet,Embedding),Wavelet)": lambda: (
        Kronecker([Product(Wavelet(4), Embedding(4, 3)), Wavelet(2)]),
        _kron(_haar(4)[:, :3], _haar(2)),
    ),
    "Product(Prefix,Wavelet)": lambda: (
        Product(Prefix(4), Wavelet(4)),
        np.tril(np.ones((4, 4))) @ _haar(4),
    ),
    "marginals": lambda: (
        marginals((2, 3, 2), 2),
        np.vstack(
            [
                _kron(np.eye(2), np.eye(3), np.ones((1, 2))),
                _kron(np.eye(2), np.ones((1, 3)), np.eye(2)),
                _kron(np.ones((1, 2)), np.eye(3), np.eye(2)),
            ]
        ),
    ),
    "all_range": lambda: (
        all_range(5),
        np.array(
            [[1.0 if i <= k <= j else 0.0 for k in range(5)] for i in range(5) for j in range(i, 5)]
        ),
    ),
    "random_range": lambda: _random_range_entry(),
    "Partition.reduce": lambda: (
        Partition(_GROUPS).reduce_matrix(),
        _partition_reduce(),
    ),
    "Partition.expand": lambda: (
        Partition(_GROUPS).expand_matrix(),
        np.linalg.pinv(_partition_reduce()),
    ),
    # Hierarchy rows: the cells, then the inner nodes breadth first (by hand).
    "Hierarchy1D": lambda: (
        Hierarchy(5, 2),  # 5 = 3 + 2, 3 = 2 + 1: inner nodes [0,4] [0,2] [3,4] [0,1]
        np.vstack([np.eye(5), _ranges((5,), np.array([[0], [0], [3], [0]]), _HI5)]),
    ),
    "Hierarchy2D.noroot": lambda: (
        Hierarchy((3, 4), 2, root=False),  # depth 1: rows {0,1} | {2}, columns {0,1} | {2,3}
        np.vstack([np.eye(12), _ranges((3, 4), _LO34, _HI34)]),
    ),
    "Hierarchy2D.T": lambda: (
        Hierarchy((3, 4), 2, root=False).T,
        np.vstack([np.eye(12), _ranges((3, 4), _LO34, _HI34)]).T,
    ),
    "Hierarchy.weighted": lambda: (
        Hierarchy(6, 3, level_weights=[0.5, -1.25, 2.0]),  # depth 1: {0,1} {2,3} {4,5}
        np.vstack(
            [
                2.0 * np.eye(6),
                0.5 * np.ones((1, 6)),
                -1.25 * _ranges((6,), np.array([[0], [2], [4]]), np.array([[1], [3], [5]])),
            ]
        ),
    ),
    "Hierarchy.leaf_depths": lambda: (
        # cells 0, 1 are leaves at depth 3, cells 2, 3, 4 at depth 2
        Hierarchy(5, 2, level_weights=[1, 2, 3, 4]),
        np.vstack(
            [
                np.diag([4.0, 4.0, 3.0, 3.0, 3.0]),
                _ranges((5,), np.array([[0], [0], [3], [0]]), _HI5) * [[1], [2], [2], [3]],
            ]
        ),
    ),
    "HB-like": lambda: (
        VStack([Identity(8), RangeQueries(8, [0, 0, 4, 0, 2, 4, 6], [7, 3, 7, 1, 3, 5, 7])]),
        np.vstack(
            [
                np.eye(8),
                _ranges(
                    (8,),
                    np.array([[0], [0], [4], [0], [2], [4], [6]]),
                    np.array([[7], [3], [7], [1], [3], [5], [7]]),
                ),
            ]
        ),
    ),
}


def _random_range_entry() -> tuple[EMatrix, np.ndarray]:
    W = random_range((4, 3), 6, seed=5)
    return W, _ranges((4, 3), np.asarray(W.lower), np.asarray(W.upper))


@pytest.fixture(params=sorted(CATALOG), ids=str)
def case(request: pytest.FixtureRequest) -> tuple[EMatrix, np.ndarray]:
    M, D = CATALOG[request.param]()
    assert M.shape == D.shape
    return M, D


def _close(a: object, b: object) -> None:
    np.testing.assert_allclose(
        np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=1e-10, atol=1e-10
    )


# -- application ----------------------------------------------------------------


def test_dense_and_sparse_forms(case):
    M, D = case
    _close(M.dense(), D)
    S = M.sparse()
    assert sp.issparse(S) and S.format == "csr"
    _close(S.toarray(), D)


def test_matvec_and_rmatvec(case, rng):
    M, D = case
    x = rng.normal(size=D.shape[1])
    y = rng.normal(size=D.shape[0])
    _close(M.matvec(x), D @ x)
    _close(M.rmatvec(y), D.T @ y)
    _close(M.matvec(list(x)), D @ x)  # any array-like


def test_matmat(case, rng):
    M, D = case
    X = rng.normal(size=(D.shape[1], 3))
    _close(M.matmat(X), D @ X)
    _close(M.matmat(np.asfortranarray(X)), D @ X)
    _close(M.matmat(X[:, :1]), D @ X[:, :1])


def test_matmul_operator(case, rng):
    M, D = case
    x = rng.normal(size=D.shape[1])
    X = rng.normal(size=(D.shape[1], 2))
    y = rng.normal(size=D.shape[0])
    Y = rng.normal(size=(3, D.shape[0]))
    _close(M @ x, D @ x)
    _close(M @ X, D @ X)
    _close(y @ M, y @ D)  # ndarray @ EMatrix defers to __rmatmul__
    _close(Y @ M, Y @ D)
    B = rng.normal(size=(D.shape[1], 2))
    P = M @ Dense(B)
    assert isinstance(P, EMatrix) and P.shape == (D.shape[0], 2)
    _close(P.dense(), D @ B)
    _close((M @ sp.csr_matrix(B)).dense(), D @ B)


def test_results_are_fresh_arrays(case, rng):
    M, D = case
    x = rng.normal(size=D.shape[1])
    keep = x.copy()
    out = M.matvec(x)
    out[...] = 12345.0
    np.testing.assert_array_equal(x, keep)
    X = rng.normal(size=(D.shape[1], 2))
    keep = X.copy()
    M.matmat(X)[...] = -1.0
    np.testing.assert_array_equal(X, keep)


def test_transpose(case):
    M, D = case
    assert M.T.shape == D.T.shape
    _close(M.T.dense(), D.T)
    _close(M.T.T.dense(), D)


def test_scalar_multiple_and_negation(case):
    M, D = case
    _close((M * 2.0).dense(), 2 * D)
    _close((np.float64(-0.5) * M).dense(), -0.5 * D)
    _close((-M).dense(), -D)


def test_linear_operator_adapter(case, rng):
    M, D = case
    L = M.as_linear_operator()
    assert L.shape == D.shape and L.dtype == np.float64
    x = rng.normal(size=D.shape[1])
    y = rng.normal(size=D.shape[0])
    _close(L.matvec(x), D @ x)
    _close(L.rmatvec(y), D.T @ y)
    _close(L.matmat(np.column_stack([x, 2 * x])), D @ np.column_stack([x, 2 * x]))


# -- element-wise structure and sensitivity -------------------------------------------


def test_abs_and_sqr(case):
    M, D = case
    _close(M.abs().dense(), np.abs(D))
    _close(M.sqr().dense(), D**2)


def test_column_norms(case):
    M, D = case
    _close(M.column_norms(1), np.abs(D).sum(axis=0))
    _close(M.column_norms(2), (D**2).sum(axis=0))


def test_sensitivity_exact_and_never_below(case):
    M, D = case
    l1 = np.abs(D).sum(axis=0).max()
    l2 = np.sqrt((D**2).sum(axis=0).max())
    assert M.sensitivity() == pytest.approx(l1, rel=1e-12, abs=1e-12)
    assert M.sensitivity(1) >= l1 * (1 - 1e-12)
    assert M.sensitivity(2) == pytest.approx(l2, rel=1e-12, abs=1e-12)
    assert M.sensitivity(2) >= l2 * (1 - 1e-12)
    assert isinstance(M.sensitivity(1), float)


def test_max_column_nnz_is_an_upper_bound(case):
    M, D = case
    true = int((D != 0).sum(axis=0).max())
    bound = M.max_column_nnz()
    assert isinstance(bound, int)
    assert true <= bound <= D.shape[0]


def test_is_integral(case):
    M, D = case
    integral = bool(np.all(np.round(D) == D))
    if M.is_integral():
        assert integral  # never wrongly True
    if "Dense" not in type(M).__name__ and integral:
        # every catalog entry with integer entries is recognised as such
        assert M.is_integral()


def test_sign_flags_never_wrongly_true(case):
    M, D = case
    if M.is_nonnegative:
        assert np.all(D >= 0)
        _close(M.abs().dense(), D)
    if M.is_binary:
        assert np.all((D == 0) | (D == 1))
        assert np.array_equal(M.sqr().dense(), D)


# -- derived computations ---------------------------------------------------------------


def test_gram(case, rng):
    M, D = case
    G = M.gram()
    assert G.shape == (D.shape[1], D.shape[1])
    _close(G.dense(), D.T @ D)
    X = rng.normal(size=(D.shape[1], 3))
    _close(G.matmat(X), D.T @ (D @ X))  # what the strategy optimisers apply
    _close(G.T.dense(), D.T @ D)


def _all_ranges(n: int) -> RangeQueries:
    lo, hi = np.triu_indices(n)
    return RangeQueries(n, lo, hi)


def test_range_grams_take_their_closed_forms():
    """`RangeQueries.gram` (and `Product(Diagonal, RangeQueries).gram`) pick the
    cheapest exact form; the catalog checks each against the dense Gram."""
    n = 64
    cells = RangeQueries(n, np.arange(n), np.arange(n))
    assert isinstance(cells.gram(), Identity)
    assert isinstance(RangeQueries(n, [3, 3], [3, 3]).gram(), Diagonal)
    for W in (all_range(n), _all_ranges(n)):  # every range once, in any order
        assert isinstance(W.gram(), Sum)
    G = Product(Diagonal(np.full(n * (n + 1) // 2, 2.0)), all_range(n)).gram()
    assert isinstance(G, Weighted) and isinstance(G.base, Sum) and G.weight == 4.0
    missing_one = RangeQueries(n, all_range(n).lower[1:], all_range(n).upper[1:])
    assert isinstance(missing_one.gram(), Dense)  # n ≤ 2048 and a full core
    prefixes = RangeQueries(n, np.zeros(n, int), np.arange(n))
    assert prefixes.gram() == Product(Suffix(n), Prefix(n)) == Prefix(n).gram()
    big = random_range(4096, 1000, seed=0)
    G = big.gram()
    assert isinstance(G, Product) and isinstance(G.B, Product) and isinstance(G.B.A, Sparse)
    assert G.B.A.matrix.nnz <= 4 * 1000
    assert isinstance(random_range(64, 2000, seed=0).gram(), Dense)
    assert isinstance(random_range((8, 8), 5, seed=0).gram(), Product)  # d-D: generic
    with pytest.raises(ValueError, match="1-D"):
        random_range((8, 8), 5, seed=0).weighted_gram(np.ones(5))
    with pytest.raises(ValueError, match="weights"):
        big.weighted_gram(np.ones(3))


def test_row_access(case):
    M, D = case
    m = D.shape[0]
    for i in {0, m // 2, m - 1, -1}:
        _close(M.row(i), D[i])
        _close(M[i], D[i])
    _close(M[np.int64(0)], D[0])
    with pytest.raises(IndexError, match="out of range"):
        M.row(m)
    with pytest.raises(IndexError, match="out of range"):
        M.row(-m - 1)


def test_sums(case):
    M, D = case
    assert M.sum() == pytest.approx(D.sum(), abs=1e-9)
    assert isinstance(M.sum(), float)
    _close(M.sum(axis=0), D.sum(axis=0))
    _close(M.sum(axis=1), D.sum(axis=1))


# -- value semantics and specs ---------------------------------------------------------


def test_spec_round_trip(case):
    M, _ = case
    for copy in (rebuild(M), from_json(to_json(M))):
        assert type(copy) is type(M)
        assert copy == M and hash(copy) == hash(M)
        assert copy is not M
        np.testing.assert_array_equal(copy.dense(), M.dense())
        assert copy.sensitivity(1) == M.sensitivity(1)


def test_equality_distinguishes_values(case):
    M, _ = case
    assert M != M * 2.0
    assert M != M.T or M.shape[0] == M.shape[1]
    assert (M == "not a matrix") is False


def test_pickle_round_trip(case, rng):
    M, D = case
    assert M.T.shape == D.T.shape  # a cached transpose must not leak into the pickle
    copy = pickle.loads(pickle.dumps(M))
    assert copy == M
    x = rng.normal(size=D.shape[0])
    _close(copy.rmatvec(x), D.T @ x)


def test_transpose_is_built_once(case):
    M, _ = case
    assert M.T is M.T
    assert M.T.T is M


def test_catalog_covers_every_matrix_class():
    import ektelo.matrix as m

    built = {type(CATALOG[name]()[0]) for name in CATALOG}
    nested: set[type] = set()

    def walk(M: EMatrix) -> None:
        nested.add(type(M))
        for attr in ("blocks", "terms", "factors"):
            for part in getattr(M, attr, ()):
                walk(part)
        for attr in ("A", "B", "base"):
            if isinstance(getattr(M, attr, None), EMatrix):
                walk(getattr(M, attr))

    for name in CATALOG:
        walk(CATALOG[name]()[0])
    classes = {
        getattr(m, name)
        for name in m.__all__
        if isinstance(getattr(m, name), type) and issubclass(getattr(m, name), EMatrix)
    }
    classes.discard(EMatrix)
    assert classes <= built | nested
