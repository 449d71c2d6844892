"""Property-based tests (hypothesis) of the algebra of implicit matrices.

Random small matrices and random nested compositions are compared with their
dense forms (`dense()` of the leaves is pinned by the catalog test). The most
important property is privacy-critical: the kernel charges ε with
`sensitivity()`, so it must never be below the true maximum column norm.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from ektelo.matrix import (
    Dense,
    Diagonal,
    EMatrix,
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
    from_json,
    rebuild,
    to_json,
)

SETTINGS = settings(max_examples=60, deadline=None)
MANY = settings(max_examples=300, deadline=None)
SIZES = st.integers(1, 5)
# Small integers and a few halves: exact in floating point, signed, with zeros.
ENTRIES = st.sampled_from([-2.0, -1.0, -0.5, 0.0, 0.0, 0.0, 0.5, 1.0, 1.0, 3.0])


@st.composite
def arrays(draw: st.DrawFn, m: int, n: int) -> np.ndarray:
    return np.array(draw(st.lists(ENTRIES, min_size=m * n, max_size=m * n))).reshape(m, n)


@st.composite
def ranges_1d(draw: st.DrawFn, n: int, transposed: bool = False) -> RangeQueries:
    count = draw(st.integers(1, 5))
    pairs = [
        sorted(draw(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)))) for _ in range(count)
    ]
    lower = np.array([p[0] for p in pairs])
    upper = np.array([p[1] for p in pairs])
    return RangeQueries(n, lower, upper, transposed=transposed)


@st.composite
def leaf(draw: st.DrawFn, n: int | None = None) -> EMatrix:
    """A core matrix with `n` columns (any number of columns if None)."""
    if n is None:
        n = draw(SIZES)
    m = draw(SIZES)
    kinds = [
        "identity",
        "ones",
        "total",
        "prefix",
        "suffix",
        "diagonal",
        "dense",
        "sparse",
        "ranges",
        "ranges_t",
    ]
    if n & (n - 1) == 0:
        kinds += ["wavelet", "wavelet_t"]
    kind = draw(st.sampled_from(kinds))
    if kind == "identity":
        return Identity(n)
    if kind == "ones":
        return Ones(m, n)
    if kind == "total":
        return Total(n)
    if kind == "prefix":
        return Prefix(n)
    if kind == "suffix":
        return Suffix(n)
    if kind == "wavelet":
        return Wavelet(n)
    if kind == "wavelet_t":
        return Wavelet(n).T
    if kind == "diagonal":
        return Diagonal(draw(arrays(1, n)).ravel())
    if kind == "dense":
        return Dense(draw(arrays(m, n)))
    if kind == "sparse":
        return Sparse(sp.csr_matrix(draw(arrays(m, n))))
    if kind == "ranges":
        return draw(ranges_1d(n))
    # the transpose of m' ranges over a domain of size d has n = m' columns
    d = draw(SIZES)
    lower = np.array(draw(st.lists(st.integers(0, d - 1), min_size=n, max_size=n)))
    upper = np.array([draw(st.integers(int(lo), d - 1)) for lo in lower])
    return RangeQueries(d, lower, upper, transposed=True)


CAP = 400  # entries of any generated matrix: keeps the dense checks cheap


@st.composite
def matrices(draw: st.DrawFn, n: int | None = None, depth: int = 2) -> EMatrix:
    """A random composition of depth ≤ `depth` with `n` columns (any if None);
    anything larger than CAP entries is replaced by a core matrix."""
    if depth == 0:
        return draw(leaf(n))
    M = draw(_composite(n, depth))
    return M if M.shape[0] * M.shape[1] <= CAP else draw(leaf(n))


def _small_dense(draw: st.DrawFn, shape: tuple[int, int]) -> EMatrix:
    if shape[0] * shape[1] <= 40:
        return Dense(draw(arrays(*shape)))
    return Ones(*shape) * draw(ENTRIES)


@st.composite
def _composite(draw: st.DrawFn, n: int | None, depth: int) -> EMatrix:
    ops = ["leaf", "vstack", "hstack", "product", "weighted", "sum", "transpose_leaf"]
    if n is None:
        ops += ["kronecker", "kronecker"]
    op = draw(st.sampled_from(ops))
    if op == "leaf":
        return draw(leaf(n))
    if op == "kronecker":
        return Kronecker(draw(st.lists(matrices(None, depth - 1), min_size=2, max_size=3)))
    if op == "vstack":
        first = draw(matrices(n, depth - 1))
        rest = draw(st.lists(matrices(first.shape[1], depth - 1), min_size=1, max_size=2))
        return VStack([first, *rest])
    if op == "hstack":
        if n is None:  # transposes of matrices with m columns all have m rows
            m = draw(SIZES)
            return HStack([draw(matrices(m, depth - 1)).T for _ in range(draw(st.integers(2, 3)))])
        width = draw(st.integers(1, n))
        first = draw(matrices(width, depth - 1))
        if width == n:
            return HStack([first])
        return HStack([first, _small_dense(draw, (first.shape[0], n - width))])
    if op == "product":
        B = draw(matrices(n, depth - 1))
        A = draw(matrices(B.shape[0], depth - 1))
        return Product(A, B)
    if op == "weighted":
        return Weighted(draw(matrices(n, depth - 1)), draw(ENTRIES))
    if op == "sum":
        A = draw(matrices(n, depth - 1))
        return Sum([A, _small_dense(draw, A.shape)])
    # the transpose of a core matrix with n rows
    if n is None:
        return draw(leaf(None)).T
    lower = np.array(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))
    upper = np.array([draw(st.integers(int(lo), 3)) for lo in lower])
    return draw(st.sampled_from([Ones(n, draw(SIZES)), RangeQueries(4, lower, upper)])).T


def true_norms(D: np.ndarray, p: int) -> np.ndarray:
    return np.abs(D).sum(axis=0) if p == 1 else (D**2).sum(axis=0)


def true_sensitivity(D: np.ndarray, p: int) -> float:
    top = float(true_norms(D, p).max())
    return top if p == 1 else float(np.sqrt(top))


# -- identities of the Kronecker product ---------------------------------------------


@SETTINGS
@given(st.lists(matrices(None, 1), min_size=2, max_size=3))
def test_kronecker_transpose_is_kronecker_of_transposes(factors):
    K = Kronecker(factors)
    expected = Kronecker([f.T for f in factors]).dense()
    np.testing.assert_allclose(K.T.dense(), expected)
    np.testing.assert_allclose(K.dense().T, expected)


@SETTINGS
@given(st.lists(matrices(None, 1), min_size=2, max_size=3))
def test_abs_and_sqr_distribute_over_kronecker(factors):
    K = Kronecker(factors)
    abs_kron = Kronecker([f.abs() for f in factors]).dense()
    np.testing.assert_allclose(K.abs().dense(), abs_kron)
    np.testing.assert_allclose(abs_kron, np.abs(K.dense()))
    np.testing.assert_allclose(K.sqr().dense(), K.dense() ** 2)


@SETTINGS
@given(st.lists(matrices(None, 1), min_size=2, max_size=3), st.sampled_from([1, 2]))
def test_kronecker_sensitivity_is_product(factors, p):
    K = Kronecker(factors)
    product = float(np.prod([f.sensitivity(p) for f in factors]))
    assert np.isclose(K.sensitivity(p), product, rtol=1e-12)
    assert np.isclose(K.sensitivity(p), true_sensitivity(K.dense(), p), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(K.column_norms(p), true_norms(K.dense(), p))


@SETTINGS
@given(st.data())
def test_kronecker_matvec_matches_kron(data):
    factors = data.draw(st.lists(matrices(None, 1), min_size=1, max_size=3))
    K = Kronecker(factors)
    D = np.ones((1, 1))
    for f in factors:
        D = np.kron(D, f.dense())
    x = np.arange(K.shape[1], dtype=float) - 2.0
    X = np.column_stack([x, x**2])
    np.testing.assert_allclose(K.matvec(x), D @ x)
    np.testing.assert_allclose(K.matmat(X), D @ X)
    y = np.arange(K.shape[0], dtype=float)
    np.testing.assert_allclose(K.rmatvec(y), D.T @ y)


# -- stacks and products ---------------------------------------------------------------


@SETTINGS
@given(st.data(), st.sampled_from([1, 2]))
def test_column_norms_of_a_stack_add(data, p):
    first = data.draw(matrices(None, 1))
    rest = data.draw(st.lists(matrices(first.shape[1], 1), min_size=1, max_size=3))
    S = VStack([first, *rest])
    parts = sum(b.column_norms(p) for b in S.blocks)
    np.testing.assert_allclose(S.column_norms(p), parts)
    np.testing.assert_allclose(S.column_norms(p), true_norms(S.dense(), p))


@SETTINGS
@given(st.data())
def test_product_transpose_reverses(data):
    B = data.draw(matrices(None, 1))
    A = data.draw(matrices(B.shape[0], 1))
    AB = Product(A, B)
    expected = (A.dense() @ B.dense()).T
    np.testing.assert_allclose(AB.T.dense(), expected)
    np.testing.assert_allclose(Product(B.T, A.T).dense(), expected)
    np.testing.assert_allclose((A @ B).dense(), expected.T)


@SETTINGS
@given(matrices(None, 2))
def test_gram_is_transpose_times_self(M):
    D = M.dense()
    np.testing.assert_allclose(M.gram().dense(), D.T @ D, atol=1e-9)


@st.composite
def weighted_ranges_1d(draw: st.DrawFn) -> EMatrix:
    """diag(w)·R for 1-D ranges R of each kind `RangeQueries.weighted_gram`
    tells apart: single cells, prefixes, every range once, any (repeats too)."""
    n = draw(st.integers(1, 70))
    kind = draw(st.sampled_from(["cells", "prefixes", "all", "any"]))
    if kind == "all":
        lower, upper = np.triu_indices(n)
        order = np.random.default_rng(draw(st.integers(0, 9))).permutation(lower.size)
        lower, upper = lower[order], upper[order]
    else:
        m = draw(st.integers(1, 3 * n if kind == "any" else n))
        ends = st.lists(st.integers(0, n - 1), min_size=m, max_size=m)
        upper = np.array(draw(ends))
        if kind == "cells":
            lower = upper
        elif kind == "prefixes":
            lower = np.zeros(m, dtype=np.int64)
        else:
            lower = np.array([draw(st.integers(0, int(b))) for b in upper])
    R = RangeQueries(n, lower, upper)
    weights = draw(st.sampled_from(["ones", "uniform", "any"]))
    if weights == "ones":
        return R
    if weights == "uniform":
        return Product(Diagonal(np.full(lower.size, draw(ENTRIES))), R)
    d = draw(st.lists(ENTRIES, min_size=lower.size, max_size=lower.size))
    return Product(Diagonal(d), R)


@SETTINGS
@given(weighted_ranges_1d(), st.integers(1, 3))
def test_weighted_range_gram_closed_forms(M, k):
    D = M.dense()
    G = M.gram()
    np.testing.assert_allclose(G.dense(), D.T @ D, atol=1e-9)
    X = np.random.default_rng(M.shape[1] + k).normal(size=(M.shape[1], k))
    np.testing.assert_allclose(G.matmat(X), D.T @ (D @ X), atol=1e-9)


@SETTINGS
@given(matrices(None, 2))
def test_adjoint_identity(M):
    """⟨Mx, y⟩ = ⟨x, Mᵀy⟩ and both agree with the dense form."""
    rng = np.random.default_rng(M.shape[0] * 31 + M.shape[1])
    x = rng.normal(size=M.shape[1])
    y = rng.normal(size=M.shape[0])
    D = M.dense()
    np.testing.assert_allclose(M.matvec(x), D @ x, atol=1e-9)
    np.testing.assert_allclose(M.rmatvec(y), D.T @ y, atol=1e-9)
    assert np.isclose(M.matvec(x) @ y, x @ M.rmatvec(y))


# -- privacy-critical: sensitivity never below the truth ----------------------------------


@MANY
@given(matrices(None, 3))
def test_sensitivity_never_below_dense_truth(M):
    D = M.dense()
    for p in (1, 2):
        truth = true_sensitivity(D, p)
        got = M.sensitivity(p)
        # Equal up to floating-point rounding; never below it.
        assert got >= truth * (1 - 1e-12) - 1e-12, (p, got, truth)
        assert np.isclose(got, truth, rtol=1e-9, atol=1e-12)
        assert np.all(M.column_norms(p) >= true_norms(D, p) * (1 - 1e-12) - 1e-12)
    assert M.max_column_nnz() >= int((D != 0).sum(axis=0).max())


@MANY
@given(matrices(None, 3))
def test_structure_flags_never_wrongly_true(M):
    D = M.dense()
    if M.is_nonnegative:
        assert np.all(D >= 0)
    if M.is_binary:
        assert np.all((D == 0) | (D == 1))
    if M.is_integral():
        assert np.all(np.round(D) == D)
    np.testing.assert_allclose(M.abs().dense(), np.abs(D), atol=1e-12)
    np.testing.assert_allclose(M.sqr().dense(), D**2, atol=1e-12)


@SETTINGS
@given(matrices(None, 3))
def test_spec_round_trip_of_compositions(M):
    for copy in (rebuild(M), from_json(to_json(M))):
        assert copy == M
        np.testing.assert_array_equal(copy.dense(), M.dense())
        assert copy.sensitivity(1) == M.sensitivity(1)


# -- weighted ranges (GreedyH strategies and their striped unions, §5.2) -------------------

WEIGHTS = st.sampled_from([-2.0, -0.5, 0.0, 0.1, 1 / 3, 0.5, 1.0, 2.0, 3.0, 0.7071067811865476])


@st.composite
def weighted_ranges(draw: st.DrawFn) -> Product:
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    count = draw(st.integers(1, 6))
    lower, upper = [], []
    for _ in range(count):
        pairs = [sorted(draw(st.tuples(st.integers(0, s - 1), st.integers(0, s - 1))))
                 for s in shape]  # fmt: skip
        lower.append([p[0] for p in pairs])
        upper.append([p[1] for p in pairs])
    d = np.array(draw(st.lists(WEIGHTS, min_size=count, max_size=count)))
    return Product(Diagonal(d), RangeQueries(shape, np.array(lower), np.array(upper)))


@MANY
@given(weighted_ranges())
def test_weighted_ranges_norms_and_integrality_are_exact(M):
    D = M.dense()
    assert M.is_integral() == bool(np.all(np.round(D) == D))
    for p in (1, 2):
        np.testing.assert_allclose(M.column_norms(p), true_norms(D, p), rtol=1e-15, atol=0)
        assert M.sensitivity(p) >= true_sensitivity(D, p) * (1 - 1e-15)


@MANY
@given(weighted_ranges())
def test_weighted_ranges_norms_agree_across_their_evaluation_routes(M):
    """The direct sums in one batch, one range per batch, every range as a
    slice (the routes large matrices take) and the generic prefix form agree."""
    import ektelo.matrix.ranges as ranges
    from ektelo.matrix import EMatrix

    direct = M.column_norms(1)
    # private size thresholds: each route is reached on small matrices only so
    saved = ranges._MAX_DIRECT_ENTRIES, ranges._LARGE_RANGE
    try:
        for cap, large in ((0, saved[1]), (saved[0], 0)):
            ranges._MAX_DIRECT_ENTRIES, ranges._LARGE_RANGE = cap, large
            np.testing.assert_allclose(M.column_norms(1), direct, rtol=1e-15, atol=0)
    finally:
        ranges._MAX_DIRECT_ENTRIES, ranges._LARGE_RANGE = saved
    generic = EMatrix.column_norms(M, 1)
    np.testing.assert_allclose(direct, generic, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("cap", "large"), [(None, None), (0, None), (None, 0), (50, 20)])
def test_weighted_coverage_is_within_the_recursive_summation_bound(cap, large, monkeypatch):
    """The kernel pads a non-integral sensitivity by (max_column_nnz + 16)·2⁻⁵²
    (`kernel.sensitivity_of`); the direct column sums of weighted ranges must be
    within (c − 1)·2⁻⁵³ of the exact sums of their c terms (checked in exact
    rational arithmetic), whatever the sizes of the partial sums elsewhere —
    on every route: one batch, one range per batch, slices, and a mix."""
    from fractions import Fraction

    import ektelo.matrix.ranges as ranges

    if cap is not None:  # (the private thresholds as above)
        monkeypatch.setattr(ranges, "_MAX_DIRECT_ENTRIES", cap)
    if large is not None:
        monkeypatch.setattr(ranges, "_LARGE_RANGE", large)
    rng = np.random.default_rng(0)
    shape = (6, 50)
    m = 400
    lo = np.column_stack([rng.integers(0, 6, m), rng.integers(0, 50, m)])
    hi = np.minimum(lo + rng.integers(0, 40, (m, 2)), np.array(shape) - 1)
    d = rng.random(m) * 10.0 ** rng.integers(-8, 8, m)  # wildly different magnitudes
    M = Product(Diagonal(d), RangeQueries(shape, lo, hi))
    got = M.column_norms(1)
    D = M.dense() != 0
    for j in range(D.shape[1]):
        terms = d[D[:, j]]
        exact = sum((Fraction(float(t)) for t in terms), Fraction(0))
        c = terms.size
        assert abs(Fraction(float(got[j])) - exact) <= exact * Fraction(max(c - 1, 0), 2**53) * (
            1 + Fraction(1, 2**40)
        )
    assert M.max_column_nnz() >= int(D.sum(axis=0).max())


def test_product_integrality_of_a_diagonal_and_binary_rows():
    R = RangeQueries(4, np.array([0, 2]), np.array([1, 3]))
    assert Product(Diagonal([2.0, 3.0]), R).is_integral()
    assert not Product(Diagonal([2.0, 0.5]), R).is_integral()
    # rows of a binary matrix that are all zero do not see their weight
    T = RangeQueries(3, np.array([0, 0]), np.array([0, 1]), transposed=True)  # 3 × 2; row 2 is 0
    assert Product(Diagonal([1.0, 2.0, 0.5]), T).is_integral()
    assert not Product(Diagonal([1.0, 0.5, 2.0]), T).is_integral()


def test_range_coverage_in_one_dimension_matches_the_corner_form():
    rng = np.random.default_rng(1)
    lo = rng.integers(0, 30, 50)
    hi = np.minimum(lo + rng.integers(0, 30, 50), 29)
    R = RangeQueries(30, lo, hi)
    np.testing.assert_array_equal(R.column_norms(1), R.dense().sum(axis=0))
    assert R.max_column_nnz() == int(R.dense().sum(axis=0).max())
