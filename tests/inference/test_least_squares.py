"""`inference.least_squares` against direct reference solvers (numpy lstsq),
on measurements built as the kernel builds them (noise drawn here with a
seeded generator): LSMR, the exact tree and Kronecker solves, weights,
public facts, input checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize as so
import scipy.sparse as sp
from inference_helpers import measure, random_matrix, rel, run, stacked  # tests/inference

from ektelo import inference as inf
from ektelo.inference import _system  # private `stack`: the grouping shows only in the matrix
from ektelo.matrix import (
    Dense,
    Hierarchy,
    Identity,
    Kronecker,
    Partition,
    Prefix,
    Product,
    RangeQueries,
    Sparse,
    Total,
    VStack,
    Weighted,
)


@pytest.mark.parametrize("kind", ["dense", "sparse", "range"])
@pytest.mark.parametrize("seed", range(4))
def test_least_squares_matches_lstsq(kind: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 40))
    x = rng.integers(0, 50, n).astype(float)
    ms = [
        measure(random_matrix(kind, n + 10, n, rng), x, 2.0, rng),
        measure(Identity(n), x, 5.0, rng),
    ]
    A, b = stacked(ms)
    ref = np.linalg.lstsq(A, b, rcond=None)[0]
    est, info = run(inf.least_squares, ms)
    assert info.converged and info.method == "lsmr"
    assert est.shape == (n,)
    assert rel(est, ref) < 1e-6


def test_least_squares_underdetermined_gives_minimum_norm(rng: np.random.Generator) -> None:
    n = 30
    x = rng.integers(0, 20, n).astype(float)
    m = measure(random_matrix("dense", 12, n, rng), x, 1.0, rng)
    ref = np.linalg.lstsq(m.query.dense(), m.answers, rcond=None)[0]  # minimum norm
    assert rel(inf.least_squares([m]).x, ref) < 1e-6


def test_least_squares_on_hierarchical_range_measurements(rng: np.random.Generator) -> None:
    n = 256
    x = rng.integers(0, 30, n).astype(float)
    starts = [np.arange(0, n, s) for s in (256, 64, 16, 4)]
    lo = np.concatenate(starts)
    hi = np.concatenate([st + s - 1 for st, s in zip(starts, (256, 64, 16, 4), strict=True)])
    Q = VStack([Identity(n), RangeQueries(n, lo, hi)])
    m = measure(Q, x, 3.0, rng)
    ref = np.linalg.lstsq(Q.dense(), m.answers, rcond=None)[0]
    est, info = run(inf.least_squares, [m])
    assert rel(est, ref) < 1e-8
    assert info.iterations < 40


@pytest.mark.parametrize(
    ("dims", "b", "weights"),
    [((1000,), 16, None), ((37, 21), 2, None), ((64, 64), 2, [1.0, 2.0, 0.5, 1, 1, 1, 1])],
)
def test_one_tree_measurement_is_solved_exactly(dims, b, weights, rng) -> None:
    """auto picks the two-pass tree solve; LSMR and a direct solve agree."""
    H = Hierarchy(dims, b, root=weights is not None, level_weights=weights)
    x = rng.integers(0, 30, H.shape[1]).astype(float)
    m = measure(H, x, 2.0, rng)
    est, info = run(inf.least_squares, [m])
    assert info.method == "tree" and info.converged and info.optimality < 1e-10
    iterative, lsmr_info = run(inf.least_squares, [m], method="lsmr")
    assert lsmr_info.method == "lsmr" and lsmr_info.iterations > 0
    assert rel(est, iterative) < 1e-8
    assert math.isclose(info.residual, lsmr_info.residual, rel_tol=1e-8)
    if H.shape[1] <= 1000:
        assert rel(est, np.linalg.lstsq(H.dense(), m.answers, rcond=None)[0]) < 1e-10
    np.testing.assert_array_equal(inf.least_squares([m], method="tree").x, est)


@pytest.mark.parametrize("rank_deficient", [False, True])
def test_one_kronecker_measurement_is_solved_through_its_factors(rank_deficient, rng) -> None:
    """(A ⊗ B)⁺ = A⁺ ⊗ B⁺: the exact minimum-norm LS estimate, as LSMR's."""
    A = Dense(rng.normal(size=(9, 6)))
    B = Prefix(5) if not rank_deficient else Dense(np.ones((3, 5)))
    K = Kronecker([A, B, Identity(2)])
    x = rng.integers(0, 30, K.shape[1]).astype(float)
    m = measure(K, x, 1.0, rng)
    est, info = run(inf.least_squares, [m])
    assert info.method == "kronecker" and info.optimality < 1e-10
    ref = np.linalg.lstsq(K.dense(), m.answers, rcond=None)[0]  # minimum norm
    assert rel(est, ref) < 1e-9
    assert rel(est, inf.least_squares([m], method="lsmr").x) < 1e-6


def test_tree_method_only_where_it_applies(rng: np.random.Generator) -> None:
    H = Hierarchy(64, 4)
    x = rng.integers(0, 30, 64).astype(float)
    m = measure(H, x, 1.0, rng)
    extra = measure(Identity(64), x, 3.0, rng)
    # Two measurements, or a known total: LSMR, same answer as forcing it.
    for kwargs, items in [({}, [m, extra]), ({"total": x.sum()}, [m])]:
        est, info = run(inf.least_squares, items, **kwargs)
        assert info.method == "lsmr"
        np.testing.assert_array_equal(est, inf.least_squares(items, method="lsmr", **kwargs).x)
        with pytest.raises(ValueError, match="method='tree' needs one measurement"):
            inf.least_squares(items, method="tree", **kwargs)
    # A tree without some leaves is rank deficient: minimum-norm LSMR.
    partial = Hierarchy(8, 2, level_weights=[1, 1, 1, 0])
    m0 = measure(partial, x[:8], 1.0, rng)
    assert inf.least_squares([m0]).info.method == "lsmr"
    with pytest.raises(ValueError, match="method must be"):
        inf.least_squares([m], method="cg")


def test_range_measurements_are_grouped_without_changing_the_fit(rng) -> None:
    """Range-query measurements (one per MWEM round, say) are fitted as one
    block; unequal scales keep their weights, other matrices stay apart."""
    shape = (12, 9)
    x = rng.integers(0, 30, 108).astype(float)
    items = []
    for scale in (1.0, 1.0, 4.0, 2.0):
        lo = rng.integers(0, 6, size=(3, 2))
        items.append(measure(RangeQueries(shape, lo, lo + 3), x, scale, rng))
    items.append(measure(Identity(108), x, 8.0, rng))
    A, _ = _system.stack([(m.query_on_root, m.answers, 1.0 / m.noise_scale) for m in items])
    ranges = [blk for blk in A.blocks if not isinstance(blk, Identity | Weighted)]
    assert len(ranges) == 1 and ranges[0].shape == (12, 108)
    A, b = stacked(items)
    ref = np.linalg.lstsq(A, b, rcond=None)[0]
    assert rel(inf.least_squares(items).x, ref) < 1e-8
    nn_ref = so.nnls(A, b)[0]
    assert rel(inf.nnls(items, tol=1e-10).x, nn_ref) < 1e-6


def test_weights_give_the_inverse_variance_combination(rng: np.random.Generator) -> None:
    n = 6
    x = rng.integers(0, 50, n).astype(float)
    m1 = measure(Identity(n), x, 1.0, rng)
    m10 = measure(Identity(n), x, 10.0, rng)
    expected = (m1.answers / 1.0 + m10.answers / 100.0) / (1.0 + 1.0 / 100.0)
    np.testing.assert_allclose(inf.least_squares([m1, m10]).x, expected, rtol=1e-9)
    np.testing.assert_allclose(inf.least_squares([m10, m1]).x, expected, rtol=1e-9)
    # Unweighted averaging would be wrong by a lot here.
    assert rel(inf.least_squares([m1, m10]).x, (m1.answers + m10.answers) / 2) > 1e-3


def test_measurements_on_reduced_and_split_vectors_combine(rng: np.random.Generator) -> None:
    n = 12
    x = rng.integers(0, 40, n).astype(float)
    P = Partition(np.array([0, 0, 1, 1, 1, 2, 3, 3, 3, 3, 4, 4]))
    # 1) Prefix queries on the reduced vector x' = P x (the kernel composes Q·P).
    Qr = Prefix(P.num_groups)
    m_red = measure(Qr, P.reduce(x), 1.5, rng, on_root=Product(Qr, P.reduce_matrix()))
    # 2) Identity on the cells of group 3 (a split piece: selection matrix S).
    cells = P.cells(3)
    S = Sparse(sp.csr_matrix((np.ones(cells.size), (np.arange(cells.size), cells)), (4, n)))
    m_split = measure(Identity(cells.size), x[cells], 0.5, rng, on_root=Product(Identity(4), S))
    # 3) A noisy total of the root.
    m_tot = measure(Total(n), x, 4.0, rng)
    ms = [m_red, m_split, m_tot]
    A, b = stacked(ms)
    ref = np.linalg.lstsq(A, b, rcond=None)[0]
    assert rel(inf.least_squares(ms).x, ref) < 1e-6


def test_inputs_are_not_mutated(rng: np.random.Generator) -> None:
    n = 10
    x = rng.integers(0, 20, n).astype(float)
    ms = [measure(Prefix(n), x, 1.0, rng), measure(Identity(n), x, 2.0, rng)]
    answers = [m.answers.copy() for m in ms]
    dense = [m.query_on_root.dense() for m in ms]
    prior_answers = np.array([5.0, 7.0])
    prior = (Dense(np.eye(n)[:2]), prior_answers)
    start = np.full(n, -1.0)
    inf.least_squares(ms, prior=prior, total=100.0)
    inf.nnls(ms, prior=prior, start=start)
    inf.nnls(ms, method="lbfgsb", start=start)
    inf.multiplicative_weights(ms, start=np.abs(start))
    inf.multiplicative_weights(ms, start=np.abs(start), mode="simultaneous")
    for m, a, d in zip(ms, answers, dense, strict=True):
        np.testing.assert_array_equal(m.answers, a)
        np.testing.assert_array_equal(m.query_on_root.dense(), d)
    np.testing.assert_array_equal(prior_answers, [5.0, 7.0])
    np.testing.assert_array_equal(start, np.full(n, -1.0))


def test_mixed_roots_are_refused(rng: np.random.Generator) -> None:
    x = rng.integers(0, 20, 5).astype(float)
    a = measure(Identity(5), x, 1.0, rng, root_id="a")
    b = measure(Identity(5), x, 1.0, rng, root_id="b")
    for fn in (inf.least_squares, inf.nnls, inf.multiplicative_weights):
        with pytest.raises(ValueError, match="different root"):
            fn([a, b])


def test_bad_inputs_are_refused(rng: np.random.Generator) -> None:
    x = rng.integers(0, 20, 5).astype(float)
    m = measure(Identity(5), x, 1.0, rng)
    with pytest.raises(TypeError, match="list"):
        inf.least_squares(m)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one"):
        inf.least_squares([])
    with pytest.raises(TypeError, match="Measurement"):
        inf.least_squares([m.answers])  # type: ignore[list-item]
    wrong_shape = measure(Identity(5), x, 1.0, rng, root_shape=(2, 3))
    with pytest.raises(ValueError, match="root_shape"):
        inf.least_squares([m, wrong_shape])
    with pytest.raises(ValueError, match="tol"):
        inf.least_squares([m], tol=0)
    with pytest.raises(ValueError, match="maxiter"):
        inf.least_squares([m], maxiter=0)
    with pytest.raises(ValueError, match="total"):
        inf.least_squares([m], total=math.nan)
    with pytest.raises(ValueError, match="method"):
        inf.nnls([m], method="slsqp")
    with pytest.raises(ValueError, match="start"):
        inf.nnls([m], start="random")
    with pytest.raises(TypeError, match="prior"):
        inf.least_squares([m], prior=[np.eye(5)])


def test_known_total_is_honoured(rng: np.random.Generator) -> None:
    n = 20
    x = rng.integers(0, 20, n).astype(float)
    # Under-determined: half the cells are never measured.
    Q = Dense(np.eye(n)[: n // 2])
    m = measure(Q, x, 1.0, rng)
    T = float(x.sum())
    est = inf.least_squares([m], total=T).x
    assert est.sum() == pytest.approx(T, rel=1e-6)
    # With a noisy total measured too, the known one dominates.
    m_tot = measure(Total(n), x, 50.0, rng)
    est2 = inf.least_squares([m, m_tot], total=T).x
    assert est2.sum() == pytest.approx(T, rel=1e-6)
    est3 = inf.nnls([m, m_tot], total=T).x
    assert est3.sum() == pytest.approx(T, rel=1e-5)
    assert np.all(est3 >= 0)


def test_prior_facts_are_honoured(rng: np.random.Generator) -> None:
    n = 8
    x = rng.integers(0, 20, n).astype(float)
    m = measure(Identity(n), x, 3.0, rng)
    facts = Dense(np.eye(n)[[1, 4]])
    est = inf.least_squares([m], prior=(facts, x[[1, 4]])).x
    np.testing.assert_allclose(est[[1, 4]], x[[1, 4]], rtol=1e-5, atol=1e-4)
    # Several pairs, and zero-noise measurements, get the same treatment.
    exact = measure(Dense(np.eye(n)[[2]]), x, 0.0, rng)
    est2 = inf.least_squares([m, exact], prior=[(facts, x[[1, 4]])]).x
    np.testing.assert_allclose(est2[[1, 2, 4]], x[[1, 2, 4]], rtol=1e-5, atol=1e-4)


def test_iteration_limit_raises_with_the_estimate(rng: np.random.Generator) -> None:
    n = 64
    x = rng.integers(0, 20, n).astype(float)
    m = measure(random_matrix("dense", 80, n, rng), x, 1.0, rng)
    with pytest.raises(inf.ConvergenceError) as err:
        inf.least_squares([m], maxiter=2)
    assert err.value.estimate.x.shape == (n,) and err.value.estimate.info is err.value.info
    assert not err.value.info.converged
    assert err.value.info.iterations == 2


