"""Inference operators against direct reference solvers (numpy lstsq, scipy
nnls), on measurements built as the kernel builds them (noise drawn here with
a seeded generator)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize as so
import scipy.sparse as sp

from ektelo.matrix import (
    Dense,
    EMatrix,
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
from ektelo.measurement import Measurement
from ektelo.operators import inference as inf
from ektelo.workload import builders


def measure(
    Q: EMatrix,
    x_measured: np.ndarray,
    scale: float,
    rng: np.random.Generator,
    *,
    on_root: EMatrix | None = None,
    root_id: str = "root",
    root_shape: tuple[int, ...] | None = None,
) -> Measurement:
    """y = Q·x + Laplace(scale), with Q mapped to the root by `on_root`."""
    y = Q.matvec(x_measured)
    if scale > 0:
        y = y + rng.laplace(0.0, scale, Q.shape[0])
    root = Q if on_root is None else on_root
    shape = root_shape or (root.shape[1],)
    return Measurement(y, Q, root, scale, 1.0, root_id, shape)


def stacked(measurements: list[Measurement]) -> tuple[np.ndarray, np.ndarray]:
    """The dense weighted system (rows scaled by 1/b) for reference solvers."""
    rows, rhs = [], []
    for m in measurements:
        rows.append(m.query_on_root.dense() / m.noise_scale)
        rhs.append(m.answers / m.noise_scale)
    return np.vstack(rows), np.concatenate(rhs)


def random_matrix(kind: str, m: int, n: int, rng: np.random.Generator) -> EMatrix:
    if kind == "dense":
        return Dense(rng.normal(size=(m, n)))
    if kind == "sparse":
        return Sparse(sp.random(m, n, density=0.3, random_state=rng, format="csr") + sp.eye(m, n))
    lo = rng.integers(0, n, m)
    hi = rng.integers(0, n, m)
    return RangeQueries(n, np.minimum(lo, hi), np.maximum(lo, hi))


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


# ---------------------------------------------------------------------------
# Least squares
# ---------------------------------------------------------------------------
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
    est, info = inf.least_squares(ms, return_info=True)
    assert info.converged and info.method == "lsmr"
    assert est.shape == (n,)
    assert rel(est, ref) < 1e-6


def test_least_squares_underdetermined_gives_minimum_norm(rng: np.random.Generator) -> None:
    n = 30
    x = rng.integers(0, 20, n).astype(float)
    m = measure(random_matrix("dense", 12, n, rng), x, 1.0, rng)
    ref = np.linalg.lstsq(m.query.dense(), m.answers, rcond=None)[0]  # minimum norm
    assert rel(inf.least_squares([m]), ref) < 1e-6


def test_least_squares_on_hierarchical_range_measurements(rng: np.random.Generator) -> None:
    n = 256
    x = rng.integers(0, 30, n).astype(float)
    starts = [np.arange(0, n, s) for s in (256, 64, 16, 4)]
    lo = np.concatenate(starts)
    hi = np.concatenate([st + s - 1 for st, s in zip(starts, (256, 64, 16, 4), strict=True)])
    Q = VStack([Identity(n), RangeQueries(n, lo, hi)])
    m = measure(Q, x, 3.0, rng)
    ref = np.linalg.lstsq(Q.dense(), m.answers, rcond=None)[0]
    est, info = inf.least_squares([m], return_info=True)
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
    est, info = inf.least_squares([m], return_info=True)
    assert info.method == "tree" and info.converged and info.optimality < 1e-10
    iterative, lsmr_info = inf.least_squares([m], method="lsmr", return_info=True)
    assert lsmr_info.method == "lsmr" and lsmr_info.iterations > 0
    assert rel(est, iterative) < 1e-8
    assert math.isclose(info.residual, lsmr_info.residual, rel_tol=1e-8)
    if H.shape[1] <= 1000:
        assert rel(est, np.linalg.lstsq(H.dense(), m.answers, rcond=None)[0]) < 1e-10
    np.testing.assert_array_equal(inf.least_squares([m], method="tree"), est)


@pytest.mark.parametrize("rank_deficient", [False, True])
def test_one_kronecker_measurement_is_solved_through_its_factors(rank_deficient, rng) -> None:
    """(A ⊗ B)⁺ = A⁺ ⊗ B⁺: the exact minimum-norm LS estimate, as LSMR's."""
    A = Dense(rng.normal(size=(9, 6)))
    B = Prefix(5) if not rank_deficient else Dense(np.ones((3, 5)))
    K = Kronecker([A, B, Identity(2)])
    x = rng.integers(0, 30, K.shape[1]).astype(float)
    m = measure(K, x, 1.0, rng)
    est, info = inf.least_squares([m], return_info=True)
    assert info.method == "kronecker" and info.optimality < 1e-10
    ref = np.linalg.lstsq(K.dense(), m.answers, rcond=None)[0]  # minimum norm
    assert rel(est, ref) < 1e-9
    assert rel(est, inf.least_squares([m], method="lsmr")) < 1e-6


def test_tree_method_only_where_it_applies(rng: np.random.Generator) -> None:
    H = Hierarchy(64, 4)
    x = rng.integers(0, 30, 64).astype(float)
    m = measure(H, x, 1.0, rng)
    extra = measure(Identity(64), x, 3.0, rng)
    # Two measurements, or a known total: LSMR, same answer as forcing it.
    for kwargs, items in [({}, [m, extra]), ({"known_total": x.sum()}, [m])]:
        est, info = inf.least_squares(items, return_info=True, **kwargs)
        assert info.method == "lsmr"
        np.testing.assert_array_equal(est, inf.least_squares(items, method="lsmr", **kwargs))
        with pytest.raises(ValueError, match="method='tree' needs one measurement"):
            inf.least_squares(items, method="tree", **kwargs)
    # A tree without some leaves is rank deficient: minimum-norm LSMR.
    partial = Hierarchy(8, 2, level_weights=[1, 1, 1, 0])
    m0 = measure(partial, x[:8], 1.0, rng)
    assert inf.least_squares([m0], return_info=True)[1].method == "lsmr"
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
    system, _ = inf._system(items, None, None, 1e-3)
    ranges = [blk for blk in system.A.blocks if not isinstance(blk, Identity | Weighted)]
    assert len(ranges) == 1 and ranges[0].shape == (12, 108)
    A, b = stacked(items)
    ref = np.linalg.lstsq(A, b, rcond=None)[0]
    assert rel(inf.least_squares(items), ref) < 1e-8
    nn_ref = so.nnls(A, b)[0]
    assert rel(inf.nnls(items, tol=1e-10), nn_ref) < 1e-6


def test_weights_give_the_inverse_variance_combination(rng: np.random.Generator) -> None:
    n = 6
    x = rng.integers(0, 50, n).astype(float)
    m1 = measure(Identity(n), x, 1.0, rng)
    m10 = measure(Identity(n), x, 10.0, rng)
    expected = (m1.answers / 1.0 + m10.answers / 100.0) / (1.0 + 1.0 / 100.0)
    np.testing.assert_allclose(inf.least_squares([m1, m10]), expected, rtol=1e-9)
    np.testing.assert_allclose(inf.least_squares([m10, m1]), expected, rtol=1e-9)
    # Unweighted averaging would be wrong by a lot here.
    assert rel(inf.least_squares([m1, m10]), (m1.answers + m10.answers) / 2) > 1e-3


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
    assert rel(inf.least_squares(ms), ref) < 1e-6


def test_inputs_are_not_mutated(rng: np.random.Generator) -> None:
    n = 10
    x = rng.integers(0, 20, n).astype(float)
    ms = [measure(Prefix(n), x, 1.0, rng), measure(Identity(n), x, 2.0, rng)]
    answers = [m.answers.copy() for m in ms]
    dense = [m.query_on_root.dense() for m in ms]
    prior_answers = np.array([5.0, 7.0])
    prior = (Dense(np.eye(n)[:2]), prior_answers)
    start = np.full(n, -1.0)
    inf.least_squares(ms, prior=prior, known_total=100.0)
    inf.nnls(ms, prior=prior, start=start)
    inf.nnls(ms, method="lbfgsb", start=start)
    inf.multiplicative_weights(ms, x0=np.abs(start))
    inf.multiplicative_weights(ms, x0=np.abs(start), mode="simultaneous")
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
    with pytest.raises(ValueError, match="known_total"):
        inf.least_squares([m], known_total=math.nan)
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
    est = inf.least_squares([m], known_total=T)
    assert est.sum() == pytest.approx(T, rel=1e-6)
    # With a noisy total measured too, the known one dominates.
    m_tot = measure(Total(n), x, 50.0, rng)
    est2 = inf.least_squares([m, m_tot], known_total=T)
    assert est2.sum() == pytest.approx(T, rel=1e-6)
    est3 = inf.nnls([m, m_tot], known_total=T)
    assert est3.sum() == pytest.approx(T, rel=1e-5)
    assert np.all(est3 >= 0)


def test_prior_facts_are_honoured(rng: np.random.Generator) -> None:
    n = 8
    x = rng.integers(0, 20, n).astype(float)
    m = measure(Identity(n), x, 3.0, rng)
    facts = Dense(np.eye(n)[[1, 4]])
    est = inf.least_squares([m], prior=(facts, x[[1, 4]]))
    np.testing.assert_allclose(est[[1, 4]], x[[1, 4]], rtol=1e-5, atol=1e-4)
    # Several pairs, and zero-noise measurements, get the same treatment.
    exact = measure(Dense(np.eye(n)[[2]]), x, 0.0, rng)
    est2 = inf.least_squares([m, exact], prior=[(facts, x[[1, 4]])])
    np.testing.assert_allclose(est2[[1, 2, 4]], x[[1, 2, 4]], rtol=1e-5, atol=1e-4)


def test_iteration_limit_raises_with_the_estimate(rng: np.random.Generator) -> None:
    n = 64
    x = rng.integers(0, 20, n).astype(float)
    m = measure(random_matrix("dense", 80, n, rng), x, 1.0, rng)
    with pytest.raises(inf.ConvergenceError) as err:
        inf.least_squares([m], maxiter=2)
    assert err.value.estimate.shape == (n,)
    assert not err.value.info.converged
    assert err.value.info.iterations == 2


# ---------------------------------------------------------------------------
# Non-negative least squares
# ---------------------------------------------------------------------------
def nnls_objective(A: np.ndarray, b: np.ndarray, x: np.ndarray) -> float:
    return 0.5 * float(np.sum((A @ x - b) ** 2))


@pytest.mark.parametrize("method", ["projected_newton", "lbfgsb"])
@pytest.mark.parametrize("kind", ["dense", "sparse", "range"])
@pytest.mark.parametrize("seed", range(4))
def test_nnls_matches_scipy_nnls(method: str, kind: str, seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(5, 40))
    # Sparse data and large noise: many bounds active at the optimum.
    x = rng.integers(0, 10, n) * (rng.random(n) < 0.4)
    ms = [
        measure(random_matrix(kind, n + 5, n, rng), x, 3.0, rng),
        measure(Identity(n), x, 6.0, rng),
    ]
    A, b = stacked(ms)
    ref, _ = so.nnls(A, b, maxiter=50 * n)
    est, info = inf.nnls(ms, method=method, return_info=True)
    assert info.converged
    assert np.all(est >= 0)
    f, fref = nnls_objective(A, b, est), nnls_objective(A, b, ref)
    scale = 0.5 * float(b @ b)
    assert f - fref <= 1e-4 * fref + 1e-10 * scale
    assert rel(est, ref) < 1e-2


def test_nnls_agrees_with_lsq_linear_on_ranges_and_starts(rng: np.random.Generator) -> None:
    n = 50
    x = rng.integers(0, 5, n) * (rng.random(n) < 0.3)
    ms = [measure(builders.random_range(n, 80, seed=2), x, 2.0, rng)]
    A, b = stacked(ms)
    ref = so.lsq_linear(A, b, bounds=(0, np.inf), tol=1e-12).x
    fref = nnls_objective(A, b, ref)
    for start in ("ls", "zeros", np.ones(n)):
        est = inf.nnls(ms, start=start)
        assert nnls_objective(A, b, est) - fref <= 1e-6 * fref


def test_nnls_equals_ls_when_ls_is_positive(rng: np.random.Generator) -> None:
    n = 16
    x = rng.integers(1000, 2000, n).astype(float)
    ms = [measure(Prefix(n), x, 1.0, rng), measure(Identity(n), x, 1.0, rng)]
    ls = inf.least_squares(ms)
    assert np.all(ls > 0)
    np.testing.assert_allclose(inf.nnls(ms), ls, rtol=1e-6)


@pytest.mark.parametrize(
    ("dims", "b"), [((64,), 2), ((256,), 4), ((16, 16), 2), ((9, 27), 3), ((200,), 4)]
)
def test_nnls_on_one_complete_tree_is_exact(dims, b, rng) -> None:
    """Sparse data (most bounds active) on trees whose parents of cells are
    alike (or 1-D): `Hierarchy.nnls` ("tree_newton") reaches scipy's NNLS optimum, and
    the info reports the measured residual and projected gradient."""
    H = Hierarchy(dims, b)
    n = H.shape[1]
    x = np.where(rng.random(n) < 0.7, 0.0, rng.integers(1, 10, n).astype(float))
    m = measure(H, x, 7.0, rng)
    est, info = inf.nnls([m], return_info=True)
    assert info.method == "tree_newton" and info.converged and info.iterations >= 1
    A = H.dense()
    ref = so.nnls(A, m.answers)[0]
    np.testing.assert_allclose(est, ref, atol=1e-8)
    assert info.optimality <= 1e-10
    assert info.residual == pytest.approx(np.linalg.norm(A @ est - m.answers), rel=1e-10)
    np.testing.assert_array_equal(inf.nnls([m]), est)  # the same without the info


def test_nnls_tree_falls_back_to_active_set_steps(rng, monkeypatch) -> None:
    """When the parents' rounds run out, the active-set steps finish the job."""
    H = Hierarchy(256, 4)
    x = np.where(rng.random(256) < 0.7, 0.0, rng.integers(1, 10, 256).astype(float))
    m = measure(H, x, 7.0, rng)
    monkeypatch.setattr(inf, "_TREE_NEWTON_ROUNDS", 1)
    est, info = inf.nnls([m], tol=1e-10, return_info=True)
    assert info.method == "tree_active_set" and info.converged
    np.testing.assert_allclose(est, so.nnls(H.dense(), m.answers)[0], atol=1e-8)


@pytest.mark.parametrize(("dims", "b"), [((30, 20), 2), ((27, 13), 3), ((20, 20), 16)])
def test_nnls_on_one_tree_uses_exact_active_set_steps(dims, b, rng) -> None:
    """Sparse data (most bounds active) on trees with uneven parents, where
    `Hierarchy.nnls` declines: the tree's active-set steps reach scipy's NNLS
    optimum from either start; L-BFGS-B agrees."""
    H = Hierarchy(dims, b)
    n = H.shape[1]
    x = np.where(rng.random(n) < 0.7, 0.0, rng.integers(1, 10, n).astype(float))
    m = measure(H, x, 7.0, rng)
    est, info = inf.nnls([m], tol=1e-10, return_info=True)
    assert info.method == "tree_active_set" and info.converged
    ref = so.nnls(H.dense(), m.answers)[0]
    np.testing.assert_allclose(est, ref, atol=1e-8)
    np.testing.assert_allclose(inf.nnls([m], tol=1e-10, start="zeros"), ref, atol=1e-8)
    general = inf.nnls([m], tol=1e-10, method="lbfgsb")
    np.testing.assert_allclose(general, ref, atol=1e-4)


def test_nnls_of_all_negative_answers_is_zero(rng: np.random.Generator) -> None:
    m = Measurement(-np.ones(4), Identity(4), Identity(4), 1.0, 1.0, "r", (4,))
    est, info = inf.nnls([m], return_info=True)
    np.testing.assert_array_equal(est, np.zeros(4))
    assert info.converged


# ---------------------------------------------------------------------------
# Multiplicative weights
# ---------------------------------------------------------------------------
def test_mw_single_update_is_the_mwem_formula() -> None:
    n = 6
    Q = Dense(np.array([[1, 1, 0, 0, 1, 0]], dtype=float))
    m = Measurement([30.0], Q, Q, 1.0, 1.0, "r", (n,))
    T = 60.0
    est = inf.multiplicative_weights([m], total=T, iterations=1)
    x = np.full(n, T / n)
    q = Q.dense()[0]
    x = x * np.exp(q * (30.0 - q @ x) / (2 * T))
    x *= T / x.sum()
    np.testing.assert_allclose(est, x, rtol=1e-12)


def test_mw_cyclic_matches_a_literal_implementation(rng: np.random.Generator) -> None:
    n = 20
    x = rng.integers(0, 10, n).astype(float)
    W = builders.random_range(n, 6, seed=4)
    ms = [measure(W, x, 2.0, rng), measure(Total(n), x, 2.0, rng)]
    T = float(x.sum())
    x0 = rng.random(n) + 0.1
    est = inf.multiplicative_weights(ms, total=T, x0=x0, iterations=7)
    ref = x0 * T / x0.sum()
    rows = np.vstack([m.query_on_root.dense() for m in ms])
    ys = np.concatenate([m.answers for m in ms])
    for _ in range(7):
        for q, a in zip(rows, ys, strict=True):
            ref = ref * np.exp(q * (a - q @ ref) / (2 * T))
            ref *= T / ref.sum()
    np.testing.assert_allclose(est, ref, rtol=1e-9)


def test_mw_simultaneous_matches_the_vectorised_update(rng: np.random.Generator) -> None:
    n = 15
    x = rng.integers(0, 10, n).astype(float)
    m = measure(builders.random_range(n, 9, seed=1), x, 1.0, rng)
    T = float(x.sum())
    est = inf.multiplicative_weights([m], total=T, iterations=3, mode="simultaneous")
    Q = m.query.dense()
    ref = np.full(n, T / n)
    for _ in range(3):
        ref = ref * np.exp(Q.T @ (m.answers - Q @ ref) / (2 * T))
        ref *= T / ref.sum()
    np.testing.assert_allclose(est, ref, rtol=1e-12)


def test_mw_total_from_measured_total_or_ls(rng: np.random.Generator) -> None:
    n = 10
    x = rng.integers(0, 10, n).astype(float)
    m_id = measure(Identity(n), x, 1.0, rng)
    m_tot = measure(Total(n), x, 1.0, rng)
    m_tot_noisy = measure(Total(n), x, 3.0, rng)
    est = inf.multiplicative_weights([m_id, m_tot], iterations=2)
    assert est.sum() == pytest.approx(m_tot.answers[0])
    # Two totals: inverse-variance weighted.
    a1, a2 = m_tot.answers[0], m_tot_noisy.answers[0]
    expected = (a1 / 1.0 + a2 / 9.0) / (1.0 + 1.0 / 9.0)
    est2 = inf.multiplicative_weights([m_id, m_tot, m_tot_noisy], iterations=1)
    assert est2.sum() == pytest.approx(expected)
    # No total measured: the LS estimate's total.
    est3 = inf.multiplicative_weights([m_id], iterations=1)
    assert est3.sum() == pytest.approx(m_id.answers.sum())


def test_mw_converges_to_consistent_data() -> None:
    n = 8
    x = np.array([5, 0, 3, 9, 1, 1, 4, 7], dtype=float)
    m = Measurement(x, Identity(n), Identity(n), 1.0, 1.0, "r", (n,))
    est = inf.multiplicative_weights([m], total=x.sum(), iterations=2000)
    np.testing.assert_allclose(est, x, atol=0.05)


def test_mw_keeps_zero_cells_and_weights_noisy_measurements_less() -> None:
    n = 4
    Q = Dense(np.array([[1.0, 0, 0, 0]]))
    x0 = np.array([0.0, 1, 1, 1])
    loud = Measurement([3.0], Q, Q, 1.0, 1.0, "r", (n,))
    est = inf.multiplicative_weights([loud], total=4.0, x0=x0)
    assert est[0] == 0.0
    # Same answer for cells 1 and 2, but cell 2's measurement is 10x noisier:
    # its update is damped by the weight 1/10 (relative to the smallest scale).
    Q1 = Dense(np.array([[0, 1.0, 0, 0]]))
    Q2 = Dense(np.array([[0, 0, 1.0, 0]]))
    precise = Measurement([3.0], Q1, Q1, 1.0, 1.0, "r", (n,))
    vague = Measurement([3.0], Q2, Q2, 10.0, 1.0, "r", (n,))
    est = inf.multiplicative_weights([precise, vague], total=4.0, iterations=1)
    assert est[1] > est[2] > est[3]


def test_mw_rejects_bad_arguments(rng: np.random.Generator) -> None:
    m = measure(Identity(3), np.ones(3), 1.0, rng)
    with pytest.raises(ValueError, match="total"):
        inf.multiplicative_weights([m], total=-1.0)
    with pytest.raises(ValueError, match="x0"):
        inf.multiplicative_weights([m], x0=[-1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="iterations"):
        inf.multiplicative_weights([m], iterations=0)
    with pytest.raises(ValueError, match="mode"):
        inf.multiplicative_weights([m], mode="batch")


def _literal_mw(ms: list, T: float, x0: np.ndarray, passes: int) -> np.ndarray:
    """The MW update one query at a time, normalised after each (the loop
    `multiplicative_weights` documents), on dense rows."""
    ref = x0 * T / x0.sum()
    rows = np.vstack([m.query_on_root.dense() for m in ms])
    ys = np.concatenate([m.answers for m in ms])
    unit = min(m.noise_scale for m in ms)
    ws = np.concatenate([np.full(m.answers.size, unit / m.noise_scale) for m in ms])
    for _ in range(passes):
        for q, a, w in zip(rows, ys, ws, strict=True):
            ref = ref * np.exp(w * q * (a - q @ ref) / (2 * T))
            ref *= T / ref.sum()
    return ref


@pytest.mark.parametrize(
    ("width", "keep"),
    [(1, 0.9), (4, 0.9), (8, 0.8), (1, 0.2), (2, 0.3), (16, 0.3), (3, 0.9)],
)
def test_mw_cyclic_aligned_equal_length_blocks_match_the_literal_loop(
    width: int, keep: float, rng: np.random.Generator
) -> None:
    """MWEM's augmented rounds: ranges of one length L aligned to multiples
    of L, some left out (holes; few, or most of them), in one disjoint block
    (vectorised: one row per chunk, or only the rows' chunks), and
    a ragged block of ranges. With a
    big-box query and a total measured between rounds, as the plan does."""
    n = 64 * width
    x = rng.integers(0, 20, n).astype(float)
    lower = np.arange(0, n, width)
    free = rng.random(lower.size) < keep
    free[:10] = True  # enough rows to vectorise
    ranges = RangeQueries(n, lower[free], lower[free] + width - 1)
    ragged = RangeQueries(n, np.array([0, 3, 9, 10, 20, 31, 33, 40, 47]),
                          np.array([1, 7, 9, 17, 29, 31, 38, 45, 50]))  # fmt: skip
    ms = [
        measure(ranges, x, 3.0, rng),
        measure(Total(n), x, 3.0, rng),
        measure(ragged, x, 6.0, rng),
        measure(RangeQueries(n, lower[free], lower[free] + width - 1), x, 3.0, rng),
    ]
    T = float(x.sum())
    x0 = rng.random(n) + 0.1
    est = inf.multiplicative_weights(ms, total=T, x0=x0, iterations=9)
    ref = _literal_mw(ms, T, x0, 9)
    np.testing.assert_allclose(est, ref, rtol=1e-9)


def test_mw_calls_that_extend_the_last_list_match_fresh_calls(rng: np.random.Generator) -> None:
    """MWEM's rounds call MW with the last list plus one measurement; those
    calls continue the last call's blocks (`_continued_steps`) and must give
    what a fresh call gives — also when the new measurement's smaller noise
    scale changes every weight (no reuse then)."""
    n = 256
    x = rng.integers(0, 30, n).astype(float)
    T = float(x.sum())
    lower = np.arange(0, n, 4)
    ms = [
        measure(RangeQueries(n, lower, lower + 3), x, 3.0, rng),
        measure(builders.random_range(n, 5, seed=2), x, 3.0, rng),
        measure(RangeQueries(n, lower[::2], lower[::2] + 1), x, 3.0, rng),
        measure(Total(n), x, 1.0, rng),  # smaller scale: new weights for all
    ]
    x0 = rng.random(n) + 0.1
    inf._LAST_STEPS.value = None
    estimates = []
    for k in range(1, len(ms) + 1):  # each call extends the last one's list
        estimates.append(inf.multiplicative_weights(ms[:k], total=T, x0=x0, iterations=6))
    for k, est in enumerate(estimates, start=1):
        inf._LAST_STEPS.value = None
        fresh = inf.multiplicative_weights(ms[:k], total=T, x0=x0, iterations=6)
        np.testing.assert_allclose(est, fresh, rtol=1e-12)
        np.testing.assert_allclose(est, _literal_mw(ms[:k], T, x0, 6), rtol=1e-9)
