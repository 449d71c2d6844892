"""GreedyH and HDMM (operators.selection.greedy_h / hdmm) against brute-force dense
evaluations of the objective they minimise: the matrix-mechanism error
‖A‖₁²·tr(W (AᵀA)⁺ Wᵀ) computed with a dense pseudo-inverse."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import nnls
from scipy.sparse.linalg import lsmr

from ektelo.matrix import (
    Dense,
    EMatrix,
    Identity,
    Kronecker,
    Partition,
    Prefix,
    Product,
    RangeQueries,
    Suffix,
    Total,
    VStack,
    Wavelet,
    Weighted,
)

# GreedyH through `greedy_h` / `greedy_h_error` (one weighting with `local=`;
# its oracles and passes by the workload's representation: ranges, a Dense
# matrix of few rows, a Dense matrix padded with zero rows, which has the same
# Gram); HDMM's documented objectives and gradients from its public modules
from ektelo.operators import hdmm as hd
from ektelo.operators import hdmm_opt0 as opt0
from ektelo.operators.selection import greedy_h, greedy_h_error, greedy_h_many, hdmm
from ektelo.workload import all_range, marginals, prefix, random_range


def dense_error(A: EMatrix | np.ndarray, W: EMatrix) -> float:
    """‖A‖₁²·tr(W (AᵀA)⁺ Wᵀ): total squared error at ε = √2 (brute force)."""
    a = A if isinstance(A, np.ndarray) else A.dense()
    w = W.dense()
    sens = np.abs(a).sum(axis=0).max()
    pinv = np.linalg.pinv(a.T @ a, rcond=1e-12, hermitian=True)
    return float(sens**2 * np.trace(w @ pinv @ w.T))


def dense_gram(W: EMatrix) -> np.ndarray:
    """WᵀW, dense."""
    D = W.dense()
    return D.T @ D


def identity_error(W: EMatrix) -> float:
    """The Identity strategy's error tr(W Wᵀ) = ‖W‖_F² (no inverse needed)."""
    return float((W.dense() ** 2).sum())


def dense_h2(n: int, b: int = 2) -> np.ndarray:
    """The unweighted b-ary hierarchy, built independently of the operator."""
    rows: list[np.ndarray] = []

    def node(lo: int, hi: int) -> None:
        row = np.zeros(n)
        row[lo : hi + 1] = 1
        rows.append(row)
        size = hi - lo + 1
        if size == 1:
            return
        cuts = np.linspace(lo, hi + 1, min(size, b) + 1).round().astype(int)
        for c0, c1 in itertools.pairwise(cuts):
            node(c0, c1 - 1)

    node(0, n - 1)
    return np.array(rows)


def tree_ranges(A: EMatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    assert isinstance(A, Product) and isinstance(A.B, RangeQueries)
    return A.B.lower[:, 0], A.B.upper[:, 0], A.A.d


LOCALS = ("canonical", "damped", "reference", "exact")


def padded(W: EMatrix) -> Dense:
    """W as a Dense matrix with 5·n zero rows more: the same Gram WᵀW, but
    more than four rows per cell, so GreedyH holds it by its dense Gram (a
    dense workload of fewer is held by its rows)."""
    D = W.dense()
    return Dense(np.vstack([D, np.zeros((5 * D.shape[1], D.shape[1]))]))


def assert_same_strategy(A: EMatrix, B: EMatrix) -> None:
    """The same nodes with the same weights (the same splits and collapses)."""
    for x, y in zip(tree_ranges(A)[:2], tree_ranges(B)[:2], strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_allclose(tree_ranges(A)[2], tree_ranges(B)[2], rtol=1e-12)


def collapsed(A: EMatrix, n: int) -> bool:
    """Some node collapsed: without collapses every cell keeps its own row
    (the grid's splits p > 0 leave every leaf a positive weight)."""
    lower, upper, _ = tree_ranges(A)
    return bool(np.setdiff1d(np.arange(n), lower[lower == upper]).size)


WORKLOADS_1D = {
    "prefix": lambda n: prefix(n),
    "random_range": lambda n: random_range(n, 30, seed=7),
    "all_range": lambda n: all_range(n),
}


# -- GreedyH ---------------------------------------------------------------------


@pytest.mark.parametrize("n", [16, 37, 64])
@pytest.mark.parametrize("name", sorted(WORKLOADS_1D))
@pytest.mark.parametrize("branching", [2, 3])
def test_greedy_h_objective_is_the_dense_error(n: int, name: str, branching: int) -> None:
    W = WORKLOADS_1D[name](n)
    A = greedy_h(n, W, branching=branching)
    implicit = greedy_h_error(n, W, branching=branching)
    assert implicit == pytest.approx(dense_error(A, W), rel=1e-9)


@pytest.mark.parametrize("n", [16, 64])
@pytest.mark.parametrize("name", sorted(WORKLOADS_1D))
def test_greedy_h_beats_the_unweighted_hierarchy(n: int, name: str) -> None:
    W = WORKLOADS_1D[name](n)
    greedy = dense_error(greedy_h(n, W), W)
    h2 = dense_error(dense_h2(n), W)
    assert greedy <= h2
    assert greedy_h_error(n, W, local="uniform") == pytest.approx(h2, rel=1e-9)
    uniform = greedy_h(n, W, local="uniform")  # H_b, every node weighted alike
    assert dense_error(uniform, W) == pytest.approx(h2, rel=1e-9)


def test_greedy_h_is_a_weighted_hierarchy_of_sensitivity_one() -> None:
    n = 64
    A = greedy_h(n, random_range(n, 40, seed=3))
    lower, upper, weights = tree_ranges(A)
    assert A.shape == (weights.size, n)
    assert np.all(weights > 0) and np.all(weights <= 1)
    # Laminar: any two intervals are nested or disjoint, as in a tree.
    for i in range(lower.size):
        overlap = (lower <= upper[i]) & (upper >= lower[i])
        nested = ((lower <= lower[i]) & (upper >= upper[i])) | (
            (lower >= lower[i]) & (upper <= upper[i])
        )
        assert np.all(nested[overlap])
    # Every row is a node of the binary tree over the 64 cells.
    h2 = dense_h2(n)
    nodes = {(int(r.argmax()), int(n - 1 - r[::-1].argmax())) for r in h2}
    assert {(int(lo), int(hi)) for lo, hi in zip(lower, upper, strict=True)} <= nodes
    # Every root-to-leaf path sums to 1: each column has L1 norm exactly 1.
    np.testing.assert_allclose(np.abs(A.dense()).sum(axis=0), 1.0, rtol=1e-12)
    assert A.sensitivity(1) == pytest.approx(1.0, rel=1e-12)


def test_greedy_h_is_deterministic() -> None:
    W = random_range(100, 25, seed=2)
    A, B = greedy_h(100, W), greedy_h((100,), W)
    np.testing.assert_array_equal(A.dense(), B.dense())


@pytest.mark.parametrize("local", ["exact", "damped"])
def test_greedy_h_general_workload_matches_range_path(local: str) -> None:
    n = 48
    W = random_range(n, 20, seed=5)
    as_dense = Dense(W.dense())  # no range structure: held by its rows
    assert opt0.gram_target(as_dense).form is None
    for M in (as_dense, padded(W)):  # ... and by its dense Gram
        assert_same_strategy(greedy_h(n, M, local=local), greedy_h(n, W, local=local))
        assert greedy_h_error(n, M, local=local) == pytest.approx(
            greedy_h_error(n, W, local=local), rel=1e-9
        )
    A = greedy_h(n, as_dense)
    assert greedy_h_error(n, as_dense) == pytest.approx(dense_error(A, W), rel=1e-9)


def test_greedy_h_local_objectives_are_exactly_evaluated() -> None:
    n = 64
    W = random_range(n, 40, seed=8)
    errors = []
    for local in (*LOCALS, "uniform"):
        A = greedy_h(n, W, local=local)
        errors.append(greedy_h_error(n, W, local=local))
        assert errors[-1] == pytest.approx(dense_error(A, W), rel=1e-9)
    assert greedy_h_error(n, W) == min(errors)  # the best is returned
    assert len({round(e, 6) for e in errors}) >= 4  # ... of weightings that differ


@pytest.mark.parametrize("n", [40, 97])
def test_greedy_h_on_workload_reduced_by_interval_partition(n: int) -> None:
    # DAWA's selection input: W·P⁺ for an interval partition P of the cells.
    rng = np.random.default_rng(n)
    cuts = np.sort(rng.choice(np.arange(1, n), size=n // 4, replace=False))
    P = Partition(np.searchsorted(cuts, np.arange(n), side="right"))
    k = P.num_groups
    for W in (prefix(n), random_range(n, 30, seed=3)):
        reduced = P.reduce_workload(W)
        for local in ("exact", "damped"):  # the ranges against the dense Gram
            ranged = greedy_h(k, reduced, local=local)
            assert_same_strategy(ranged, greedy_h(k, padded(reduced), local=local))
            assert greedy_h_error(k, reduced, local=local) == pytest.approx(
                dense_error(ranged, reduced), rel=1e-9
            )
        A = greedy_h(k, reduced)
        assert greedy_h_error(k, reduced) == pytest.approx(dense_error(A, reduced), rel=1e-9)


def test_greedy_h_reduced_ranges_need_no_dense_gram() -> None:
    # 10⁴ buckets, as many ranges: held as ranges of buckets, never as the
    # dense 10⁴×10⁴ Gram (refused above 8192 cells) nor as rows (q ≥ n)
    n, k = 40_000, 10_000
    rng = np.random.default_rng(4)
    cuts = np.sort(rng.choice(np.arange(1, n), size=k - 1, replace=False))
    P = Partition(np.searchsorted(cuts, np.arange(n), side="right"))
    reduced = P.reduce_workload(random_range(n, k, seed=4))
    A = greedy_h(k, reduced)
    assert A.sensitivity(1) == pytest.approx(1.0, rel=1e-9)
    assert greedy_h_error(k, reduced) <= greedy_h_error(k, reduced, local="uniform")


def test_greedy_h_weighted_stacked_ranges_are_recognised() -> None:
    n = 32
    W = VStack([Weighted(prefix(n), 2.0), random_range(n, 10, seed=1), Total(n)])
    assert opt0.gram_target(W).form is not None
    A = greedy_h(n, W)
    assert greedy_h_error(n, W) == pytest.approx(dense_error(A, W), rel=1e-9)


def test_greedy_h_collapses_what_the_workload_cannot_see() -> None:
    # One query over [8, 23] of 32 cells: in the binary tree it is the union of
    # the nodes [8, 15] and [16, 23], which the workload never looks inside.
    n = 32
    W = RangeQueries(n, np.array([[8]]), np.array([[23]]))
    A = greedy_h(n, W)
    assert dense_error(A, W) == pytest.approx(2.0)  # two queries of weight 1
    lower, upper, weights = tree_ranges(A)
    for lo, hi in ((8, 15), (16, 23)):
        assert weights[(lower == lo) & (upper == hi)] == pytest.approx([1.0])
        assert not np.any((lower >= lo) & (upper <= hi) & (upper - lower < hi - lo))
    assert greedy_h_error(n, Total(n)) == pytest.approx(1.0)  # the root alone
    # Identity workload: the leaves alone (the Identity strategy).
    np.testing.assert_allclose(greedy_h(16, Identity(16)).dense(), np.eye(16))


def test_greedy_h_strategy_answers_the_workload(rng: np.random.Generator) -> None:
    n = 64
    W = random_range(n, 30, seed=11)
    A = greedy_h(n, W)
    x = rng.poisson(20, size=n).astype(float)
    x_hat = lsmr(A.as_linear_operator(), A.matvec(x), atol=1e-12, btol=1e-12, maxiter=1000)[0]
    np.testing.assert_allclose(W.matvec(x_hat), W.matvec(x), rtol=1e-6)


def test_greedy_h_large_domain_stays_implicit() -> None:
    n = 4096
    for W in (prefix(n), random_range(n, 1000, seed=0)):
        A = greedy_h(n, W)
        assert A.sensitivity(1) == pytest.approx(1.0, rel=1e-9)
        error = greedy_h_error(n, W)
        assert error < greedy_h_error(n, W, local="uniform")
        assert error < float(W.column_norms(2).sum())  # beats Identity (‖W‖_F²)


def test_greedy_h_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="Hilbert"):
        greedy_h((8, 8), prefix(64))
    with pytest.raises(ValueError, match="columns"):
        greedy_h(10, prefix(12))
    with pytest.raises(ValueError, match="branching"):
        greedy_h(8, prefix(8), branching=1)
    with pytest.raises(TypeError):
        greedy_h(8, np.eye(8))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="local"):
        greedy_h_error(8, prefix(8), local="best")


# -- HDMM: OPT_0 -------------------------------------------------------------------


GRAM_WORKLOADS = {
    "prefix": lambda n: Prefix(n),
    "weighted_prefix": lambda n: Weighted(Prefix(n), 1.5),
    "suffix": lambda n: Suffix(n),
    "identity": lambda n: Identity(n),
    "total": lambda n: Total(n),
    "all_range": lambda n: all_range(n),
    "weighted_all_range": lambda n: Weighted(all_range(n), 0.5),
    "random_range": lambda n: random_range(n, 2 * n, seed=3),
    "stacked_ranges": lambda n: VStack([Prefix(n), all_range(n), random_range(n, 4, seed=2)]),
    "dense": lambda n: Dense(np.random.default_rng(n).normal(size=(3, n))),
}


def p_identity_dense(theta: np.ndarray) -> np.ndarray:
    n = theta.shape[1]
    return np.vstack([np.eye(n), theta]) / (1.0 + theta.sum(axis=0))


@pytest.mark.parametrize("n", [1, 2, 7, 40])
@pytest.mark.parametrize("name", sorted(GRAM_WORKLOADS))
def test_opt0_reads_the_workload_gram_exactly(name: str, n: int, rng: np.random.Generator) -> None:
    """OPT_0's view of W (`gram_target`: the library's W.gram(), or W itself when
    it has fewer rows than columns, with the diagonal from its column norms)
    gives the objective C(Θ) = tr((AᵀA)⁻¹ WᵀW) of the dense formula."""
    W = GRAM_WORKLOADS[name](n)
    D = W.dense()
    target = opt0.gram_target(W)
    np.testing.assert_allclose(target.diag, np.diag(D.T @ D), rtol=1e-12, atol=1e-12)
    theta = rng.uniform(0, 1, size=(3, n))
    value, _ = opt0.p_identity_objective(theta, target)
    A = p_identity_dense(theta)
    expected = float(np.trace(np.linalg.solve(A.T @ A, D.T @ D)))
    assert value == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_minimise_nonnegative_recovers_nnls(rng: np.random.Generator) -> None:
    # min ½‖Ax − b‖² over x ≥ 0 has a unique answer; SciPy's NNLS finds it exactly.
    A = rng.normal(size=(60, 25))
    b = rng.normal(size=60)
    expected, _ = nnls(A, b)

    def fun(x: np.ndarray, grad: np.ndarray) -> float:
        r = A @ x - b
        grad[:] = A.T @ r
        return 0.5 * float(r @ r)

    x, f = opt0.minimise_nonnegative(fun, np.ones(25), maxiter=2000, rtol=0.0)
    assert np.all(x >= 0) and np.count_nonzero(expected == 0) > 0  # some bounds bind
    np.testing.assert_allclose(x, expected, atol=1e-6)
    assert f == pytest.approx(0.5 * float(np.sum((A @ expected - b) ** 2)), rel=1e-9)


@pytest.mark.parametrize("W", [prefix(12), random_range(12, 9, seed=4)], ids=["prefix", "rr"])
def test_p_identity_gradient_matches_finite_differences(
    W: EMatrix, rng: np.random.Generator
) -> None:
    target = opt0.gram_target(W)
    theta = rng.uniform(0, 1, size=(3, 12))
    value, grad = opt0.p_identity_objective(theta, target)
    assert value == pytest.approx(dense_error(p_identity_dense(theta), W), rel=1e-9)
    h = 1e-6
    numeric = np.zeros_like(theta)
    for idx in np.ndindex(theta.shape):
        e = np.zeros_like(theta)
        e[idx] = h
        up = opt0.p_identity_objective(theta + e, target)[0]
        down = opt0.p_identity_objective(theta - e, target)[0]
        numeric[idx] = (up - down) / (2 * h)
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-7 * np.abs(grad).max())


def test_hdmm_prefix_beats_identity_and_hierarchies() -> None:
    n = 64
    W = prefix(n)
    result = hd.optimise(W, restarts=1)
    assert result.method == "OPT_0"
    A = result.strategy
    err = dense_error(A, W)
    assert result.error == pytest.approx(err, rel=1e-9)
    assert err < 0.5 * identity_error(W)
    assert err < min(dense_error(dense_h2(n), W), dense_error(Wavelet(n), W))
    assert A.sensitivity(1) == pytest.approx(1.0, rel=1e-9)


def test_hdmm_all_range_beats_identity_and_hierarchies() -> None:
    n = 32
    W = all_range(n)
    err = dense_error(hdmm(W, restarts=1), W)
    assert err < identity_error(W)
    assert err < min(dense_error(dense_h2(n), W), dense_error(Wavelet(n), W))


def test_hdmm_is_deterministic_given_seed() -> None:
    W = prefix(24)
    first: list[EMatrix] = []
    second: list[EMatrix] = []
    for out in (first, second):
        hdmm.cache_clear()  # type: ignore[attr-defined]  # (optimised afresh each time)
        out.append(hdmm(W, restarts=1, seed=3))
    np.testing.assert_array_equal(first[0].dense(), second[0].dense())


def counts() -> tuple[int, int]:
    info = hdmm.cache_info()  # type: ignore[attr-defined]
    return info.hits, info.misses


def test_hdmm_memoises_the_strategy() -> None:
    hdmm.cache_clear()  # type: ignore[attr-defined]
    first = hdmm(prefix(24), seed=0)
    assert counts() == (0, 1)
    again = hdmm(prefix(24), seed=0)  # an equal workload built anew: equal by value
    assert counts() == (1, 1)
    np.testing.assert_array_equal(again.dense(), first.dense())
    assert again is not first and again == first  # a fresh copy, equal by value
    for kwargs in ({"seed": 1}, {"p": 2}, {"restarts": 2}, {"maxiter": 50}, {"rounds": 2}):
        hdmm(prefix(24), **kwargs)  # any other argument misses
    hdmm(random_range(24, 5, seed=1))  # so does another workload
    assert counts() == (1, 7)
    hdmm(prefix(24), seed=1)
    hdmm(prefix(24), p=[2])  # p per attribute as a list ...
    hdmm(prefix(24), p=(2,))  # ... and as a tuple: one entry
    assert counts() == (3, 8)


def test_hdmm_memo_is_bounded_and_skips_foreign_workloads() -> None:
    class Foreign(Identity):  # not one of ektelo.matrix's classes: it has no spec
        pass

    hdmm.cache_clear()  # type: ignore[attr-defined]
    size = hdmm.cache_info().maxsize  # type: ignore[attr-defined]
    for n in range(2, size + 7):
        hdmm(Identity(n))
    assert hdmm.cache_info().currsize == size  # type: ignore[attr-defined]
    before = counts()
    assert dense_error(hdmm(Foreign(4)), Identity(4)) == pytest.approx(4.0)
    assert counts() == before  # optimised, not memoised
    hdmm.cache_clear()  # type: ignore[attr-defined]
    assert hdmm.cache_info().currsize == 0  # type: ignore[attr-defined]


def test_hdmm_strategy_recovers_the_data(rng: np.random.Generator) -> None:
    W = random_range(40, 25, seed=9)
    A = hdmm(W, restarts=1)
    x = rng.poisson(10, size=40).astype(float)
    x_hat = lsmr(A.as_linear_operator(), A.matvec(x), atol=1e-12, btol=1e-12, maxiter=1000)[0]
    np.testing.assert_allclose(x_hat, x, rtol=1e-6, atol=1e-6)


def test_hdmm_identity_workload_keeps_identity() -> None:
    A = hdmm(Identity(16), restarts=1)
    assert dense_error(A, Identity(16)) == pytest.approx(16.0)


# -- HDMM: OPT_⊗ ---------------------------------------------------------------------


def test_hdmm_kronecker_prefix_prefix() -> None:
    # 8×8: the Identity is already optimal per attribute (so is GreedyH's
    # choice); 16×16: the optimised factors beat it.
    W8 = Kronecker([Prefix(8), Prefix(8)])
    A8 = hdmm(W8, restarts=1)
    assert dense_error(A8, W8) <= identity_error(W8) * (1 + 1e-9)
    W16 = Kronecker([Prefix(16), Prefix(16)])
    result = hd.optimise(W16, restarts=1)
    assert isinstance(result.strategy, Kronecker) and result.method == "OPT_kron"
    err = dense_error(result.strategy, W16)
    assert result.error == pytest.approx(err, rel=1e-9)
    assert err < 0.7 * identity_error(W16)


def test_hdmm_union_of_products_block_descent() -> None:
    W = VStack([Kronecker([Prefix(16), Total(8)]), Kronecker([Total(16), Prefix(8)])])
    result = hd.optimise(W, restarts=1, rounds=3)
    err = dense_error(result.strategy, W)
    assert result.error == pytest.approx(err, rel=1e-9)
    assert err < 0.5 * identity_error(W)
    one_round = hd.optimise(W, restarts=1, rounds=1).error
    assert result.error <= one_round * (1 + 1e-9)


def test_hdmm_two_dimensional_ranges_as_union_of_products(rng: np.random.Generator) -> None:
    W = random_range((8, 8), 20, seed=1)
    result = hd.optimise(W, restarts=1)
    err = dense_error(result.strategy, W)
    assert result.error == pytest.approx(err, rel=1e-9)
    assert err <= identity_error(W)
    x = rng.poisson(5, size=64).astype(float)
    A = result.strategy
    x_hat = lsmr(A.as_linear_operator(), A.matvec(x), atol=1e-12, btol=1e-12, maxiter=1000)[0]
    np.testing.assert_allclose(x_hat, x, rtol=1e-6, atol=1e-6)


# -- HDMM: OPT_M ---------------------------------------------------------------------


def test_marginal_objective_closed_form_and_gradient(rng: np.random.Generator) -> None:
    dims = (3, 4, 2)
    W = marginals(dims, 2)
    w = hd.marginal_coefficients(W, dims)
    alg = hd.MarginalSpectrum.of(dims)
    weight = alg.multiplicity * alg.eigenvalues(w)
    theta = rng.uniform(0.2, 1, size=8)
    value, grad = hd.marginal_objective(theta, weight, alg)
    assert value == pytest.approx(dense_error(hd.marginals_strategy(theta, dims), W), rel=1e-9)
    h = 1e-6
    numeric = np.array(
        [
            (
                hd.marginal_objective(theta + h * e, weight, alg)[0]
                - hd.marginal_objective(theta - h * e, weight, alg)[0]
            )
            / (2 * h)
            for e in np.eye(8)
        ]
    )
    np.testing.assert_allclose(grad, numeric, rtol=1e-5)


def test_hdmm_two_way_marginals(rng: np.random.Generator) -> None:
    dims = (5, 5, 5, 5)
    W = marginals(dims, 2)
    result = hd.optimise(W, restarts=1)
    assert result.method == "OPT_M"
    err = dense_error(result.strategy, W)
    assert result.error == pytest.approx(err, rel=1e-6)
    assert err < 0.9 * identity_error(W)
    assert result.strategy.sensitivity(1) == pytest.approx(1.0, rel=1e-9)
    x = rng.poisson(3, size=625).astype(float)
    A = result.strategy
    x_hat = lsmr(A.as_linear_operator(), A.matvec(x), atol=1e-12, btol=1e-12, maxiter=1000)[0]
    np.testing.assert_allclose(W.matvec(x_hat), W.matvec(x), rtol=1e-6)


def test_hdmm_rejects_bad_input() -> None:
    with pytest.raises(TypeError):
        hdmm(np.eye(4))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="restarts"):
        hdmm(prefix(8), restarts=0)
    with pytest.raises(ValueError, match="attributes"):
        hdmm(Kronecker([Prefix(4), Prefix(4)]), p=(1, 2, 3))


def test_greedy_h_rows_oracle_matches_the_gram_oracle() -> None:
    # A general workload with fewer rows than cells is held by its rows (a
    # q-vector image per node), the padded copy by its dense Gram; some
    # neighbouring columns are equal, so nodes collapse ("flat") in both.
    rng = np.random.default_rng(11)
    n, q = 90, 25
    R = rng.integers(0, 3, size=(q, n)).astype(float)
    R[:, 8:16] = R[:, 8:9]
    R[:, 40:44] = R[:, 40:41] * 0.5
    W = Dense(R)
    for local in ("exact", "damped", "reference"):
        by_rows = greedy_h(n, W, local=local)
        assert collapsed(by_rows, n), "some node collapses"
        assert_same_strategy(by_rows, greedy_h(n, padded(W), local=local))
        assert greedy_h_error(n, W, local=local) == pytest.approx(
            greedy_h_error(n, padded(W), local=local), rel=1e-9
        )
        assert greedy_h_error(n, W, local=local) == pytest.approx(
            dense_error(by_rows, W), rel=1e-9
        )
    A = greedy_h(n, W)
    assert greedy_h_error(n, W) == pytest.approx(dense_error(A, W), rel=1e-9)


def _rows_workload(rng: np.random.Generator, n: int, q: int) -> Dense:
    """Dense 0/1/2 rows with runs of equal columns (nodes collapse), some across
    the Gram blocks' boundaries and some inside them."""
    R = rng.integers(0, 3, size=(q, n)).astype(float)
    for lo in rng.choice(n - 40, 6, replace=False):
        R[:, lo : lo + int(rng.integers(2, 40))] = R[:, lo : lo + 1]
    return Dense(R)


@pytest.mark.parametrize(("n", "q", "b"), [(300, 120, 2), (517, 90, 3), (300, 900, 2)])
def test_greedy_h_rows_oracle_gram_blocks_match_the_gram_oracle(n: int, q: int, b: int) -> None:
    """A dense workload held by its rows (fewer rows than cells, or up to four
    per cell) takes m = u_Sᵀ G_SS u_S from Gram blocks of neighbouring cells
    at and below the depth of nodes of ≤ 32 cells, and images R_S u_S above
    it; the padded copy is held by its whole dense Gram. Every weighting —
    the splits, the collapsed nodes (inside blocks and across them) and the
    exact error — is the same, up to rounding."""
    W = _rows_workload(np.random.default_rng(n + q), n, q)
    G = padded(W)
    for local in LOCALS[1:]:
        assert_same_strategy(greedy_h(n, W, branching=b, local=local),
                             greedy_h(n, G, branching=b, local=local))  # fmt: skip
        assert greedy_h_error(n, W, branching=b, local=local) == pytest.approx(
            greedy_h_error(n, G, branching=b, local=local), rel=1e-9
        )
    best = greedy_h(n, W, branching=b)
    assert collapsed(best, n), "some node collapses"
    assert_same_strategy(best, greedy_h(n, G, branching=b))
    assert greedy_h_error(n, W, branching=b) == pytest.approx(dense_error(best, W), rel=1e-9)


# -- GreedyH on small domains: every weighting in one pass on the dense Gram -------------


def _small_workload(rng: np.random.Generator, kind: int) -> tuple[int, EMatrix]:
    n, q = int(rng.integers(1, 120)), int(rng.integers(1, 60))
    lo = rng.integers(0, n, q)
    ranges = RangeQueries(n, lo, np.minimum(n - 1, lo + rng.integers(0, n, q)))
    if kind == 0:  # DAWA-Striped's stripe workload: ranges outside the range forms
        return n, Product(Identity(q), ranges)
    if kind == 1:
        return n, Dense(rng.normal(size=(q, n)))
    if kind == 2:  # ... reduced by an interval partition (DAWA's buckets)
        groups = np.cumsum(rng.random(n) < 0.3)
        P = Partition(groups - groups[0])
        return P.num_groups, P.reduce_workload(Product(Identity(q), ranges))
    R = rng.integers(0, 2, size=(q, n)).astype(float)
    R[:, n // 3 : n // 2] = R[:, n // 3 : n // 3 + 1]  # equal columns: nodes collapse
    return n, Dense(R)


@pytest.mark.parametrize("kind", [0, 1, 2, 3])
def test_greedy_h_dense_pass_matches_the_gram_oracle_passes(kind: int) -> None:
    """On small domains (n ≤ 256) `greedy_h` weighs every weighting side by
    side in one pass on the dense Gram; it must pick what the one-weighting
    passes on the dense-Gram oracle (`local=`, the padded workload) pick — the
    first of least exact error among H_b, "damped", "reference" and "exact" —
    with the same splits, collapsed nodes and exact error."""
    rng = np.random.default_rng(20 + kind)
    flat = 0
    for _ in range(12):
        n, W = _small_workload(rng, kind)
        b = int(rng.choice([2, 3]))
        G = padded(W)
        errors = {
            local: greedy_h_error(n, G, branching=b, local=local)
            for local in ("uniform", "damped", "reference", "exact")
        }
        best = min(errors, key=errors.__getitem__)  # the first of least error
        A = greedy_h(n, W, branching=b)
        assert_same_strategy(A, greedy_h(n, G, branching=b, local=best))
        error = greedy_h_error(n, W, branching=b)
        assert error == pytest.approx(errors[best], rel=1e-9, abs=1e-12)
        assert error == pytest.approx(dense_error(A, W), rel=1e-7, abs=1e-9)
        flat += collapsed(A, n)
    if kind == 3:
        assert flat > 0, "flat nodes were exercised"


def test_greedy_h_keeps_range_workloads_on_the_range_oracle() -> None:
    # ranges in range form (also reduced by intervals) keep the range oracle and
    # its "canonical" objective, which wins on these; the dense path (their
    # dense Gram, as the padded copies have) has no "canonical" and errs more
    for n, W in [(64, Prefix(64)), (64, random_range(64, 30, seed=1))]:
        assert_same_strategy(greedy_h(n, W), greedy_h(n, W, local="canonical"))
        assert greedy_h_error(n, W) < greedy_h_error(n, padded(W)) * (1 - 1e-6)


def test_greedy_h_many_equals_one_call_per_workload() -> None:
    """The batched pass (workloads of equal n together, in chunks) returns each
    workload's `greedy_h` strategy; range workloads go through `greedy_h`."""
    rng = np.random.default_rng(7)
    problems: list[tuple[int, EMatrix]] = [_small_workload(rng, i % 4) for i in range(24)]
    problems += [(n, W) for n, W in problems[:6]]  # equal n (and equal workloads)
    problems += [(64, random_range(64, 20, seed=3)), (300, Dense(rng.random((5, 300))))]
    many = greedy_h_many(problems, branching=3, granularity=50)
    for (n, W), A in zip(problems, many, strict=True):
        B = greedy_h(n, W, branching=3, granularity=50)
        np.testing.assert_array_equal(A.B.lower, B.B.lower)
        np.testing.assert_array_equal(A.B.upper, B.B.upper)
        np.testing.assert_allclose(A.A.d, B.A.d, rtol=1e-12)
    # 256 cells: a batched pass holds 16 Grams of 256², so these 20 take two
    big = [(256, Dense(rng.random((int(rng.integers(1, 40)), 256)))) for _ in range(20)]
    for (n, W), A in zip(big, greedy_h_many(big, branching=3, granularity=50), strict=True):
        assert_same_strategy(A, greedy_h(n, W, branching=3, granularity=50))


def test_greedy_h_many_reduces_by_a_partition_like_reduce_workload() -> None:
    """(P, W) problems: GreedyH on W·P⁺ over P's groups, as
    greedy_h(P.num_groups, P.reduce_workload(W)) — also when W is in range form
    (the oracles) or P's groups are not intervals."""
    rng = np.random.default_rng(9)
    problems = []
    for i in range(12):
        n = int(rng.integers(2, 200))
        lo = rng.integers(0, n, 30)
        ranges = RangeQueries(n, lo, np.minimum(n - 1, lo + rng.integers(0, n, 30)))
        groups = np.cumsum(rng.random(n) < 0.2)
        if i % 4 == 3:
            groups = rng.integers(0, 5, n)  # not intervals
        W = ranges if i % 4 == 2 else Product(Identity(30), ranges)
        problems.append((Partition(groups - groups.min()), W))
    for (P, W), A in zip(problems, greedy_h_many(problems), strict=True):
        B = greedy_h(P.num_groups, P.reduce_workload(W))
        np.testing.assert_allclose(A.dense(), B.dense(), rtol=1e-12, atol=1e-15)
