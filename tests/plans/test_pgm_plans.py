"""PrivBayes+PGM and HDMM+PGM (ektelo.plans.pgm): exact spend, every
measurement on a projection (never the full vector), HDMM's marginal
strategy (its closed-form error checked against the explicit matrices, the
closed-form split checked as optimal), the model-size guard, bad input
refused before anything is spent, and accuracy on adult's five smallest
columns against MST, direct marginals and PrivBayes's own estimator."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import ektelo
from ektelo import Domain, plans
from ektelo.budget import ZCDP, PureDP
from ektelo.inference import GraphicalModel
from ektelo.inference.graphical_model import ModelTooLarge
from ektelo.matrix import Identity
from ektelo.operators import hdmm as hdmm_ops
from ektelo.plans.pgm import ClosureObjective, marginal_strategy
from ektelo.port import ProtectedTable
from ektelo.session import Recorder
from tests.plans.test_mst import chain_table  # the same tree-structured table

DOMAIN = Domain.from_json({"a": 4, "b": 4, "c": 3, "d": 5, "e": 2})
ADULT = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "adult"
FIVE = ["workclass", "marital-status", "relationship", "race", "sex"]


def recorded(frame: pd.DataFrame, **budget: float) -> tuple[ProtectedTable, Recorder]:
    """A protected table whose measurements are kept (public records)."""
    protected = ektelo.protect(frame, DOMAIN, seed=7, **budget)
    assert isinstance(protected, ProtectedTable)
    recorder = Recorder(protected.port)
    return ProtectedTable(recorder, protected.node), recorder


def spent(table: ProtectedTable) -> Fraction:
    return sum((Fraction(r.charged_at_root) for r in table.history()), Fraction(0))


def tv(p: np.ndarray, q: np.ndarray) -> float:
    return 0.5 * float(np.abs(p / p.sum() - q / q.sum()).sum())


def true_marginal(frame: pd.DataFrame, domain: Domain, attrs: list[str]) -> np.ndarray:
    out = np.zeros(domain.project(attrs).shape)
    for key, count in frame.groupby(attrs).size().items():
        out[key] = count
    return out


# -- PrivBayes+PGM ----------------------------------------------------------------------
def test_privbayes_pgm_spends_exactly_eps_with_privbayes_split() -> None:
    table, recorder = recorded(chain_table(), epsilon=2.0)
    model = plans.run("privbayes_pgm", table, None, 0.8, beta=0.25, theta=None)
    assert isinstance(model, GraphicalModel)
    assert abs(spent(table) - Fraction(0.8)) <= Fraction(0.8) * Fraction(1, 10**9)
    history = table.history()
    assert history[0].operation == "privbayes_select"
    assert history[0].eps == pytest.approx(0.25 * 0.8)
    laplace = [r for r in history if r.operation == "laplace"]
    # a degree-2 network on 5 attributes has d − k = 3 maximal cliques, equal shares
    assert len(laplace) == 3 == len(recorder.measurements)
    assert all(r.eps == pytest.approx(0.75 * 0.8 / 3) for r in laplace)
    for m in recorder.measurements:  # each on its own projection, ≤ 3 attributes
        assert m.attributes is not None and len(m.attributes) == 3
        assert m.query.shape[1] == DOMAIN.project(list(m.attributes)).size
    assert {tuple(m.attributes) for m in recorder.measurements} == set(model.cliques)


def test_privbayes_pgm_recovers_the_dependent_pairs_at_large_eps() -> None:
    df = chain_table()
    table = ektelo.protect(df, DOMAIN, epsilon=200.0, seed=2)
    model = plans.privbayes_pgm(table, None, 200.0)
    for pair in (["a", "b"], ["c", "d"]):
        assert tv(true_marginal(df, DOMAIN, pair), model.marginal(pair)) < 0.03, pair
    assert abs(model.total - len(df)) < 0.01 * len(df)


def test_privbayes_pgm_models_the_workload_attributes() -> None:
    table, recorder = recorded(chain_table(), epsilon=1.0)
    model = plans.privbayes_pgm(table, [("a", "b"), ("b", "c")], 1.0)
    assert model.domain.names == ("a", "b", "c")
    assert all(set(m.attributes or ()) <= {"a", "b", "c"} for m in recorder.measurements)


def test_privbayes_pgm_size_guard_before_and_after_the_selection() -> None:
    # before anything is spent: the 3 largest attributes alone exceed the limit
    # (without the θ-usefulness cap: see the capped tests below)
    table = ektelo.protect(chain_table(), DOMAIN, epsilon=1.0, seed=1)
    with pytest.raises(ModelTooLarge, match="nothing was spent"):
        plans.privbayes_pgm(table, None, 1.0, max_model_size=79, theta=None)
    assert spent(table) == 0
    # 80 cells admit one clique of the 3 largest, not a whole network (≥ 2
    # maximal cliques of ≥ 24 cells): refused after the selection only
    with pytest.raises(ModelTooLarge, match="junction tree"):
        plans.privbayes_pgm(table, None, 1.0, beta=0.3, max_model_size=80, theta=None)
    assert [r.operation for r in table.history()] == ["privbayes_select"]
    assert spent(table) == Fraction(0.3)


@pytest.mark.parametrize("workload, options, error, match", [
    ([("a", "nope")], {}, ValueError, "unknown attribute 'nope'"),
    ([], {}, ValueError, "workload is empty"),
    ("a,b", {}, TypeError, "list of attribute tuples"),
    (None, {"degree": 0}, ValueError, "degree must be a positive integer"),
    (None, {"beta": 1.5}, ValueError, "beta"),
    (None, {"max_model_size": 0}, ValueError, "max_model_size"),
    (None, {"theta": 0.0}, ValueError, "theta"),
    (None, {"theta": "4"}, TypeError, "theta"),
    (None, {"rows": 0}, ValueError, "rows"),
    (None, {"rows": 10.5}, TypeError, "rows"),
])  # fmt: skip
def test_privbayes_pgm_bad_input_spends_nothing(workload, options, error, match) -> None:
    table = ektelo.protect(chain_table(500), DOMAIN, epsilon=1.0, seed=1)
    with pytest.raises(error, match=match):
        plans.privbayes_pgm(table, workload, 1.0, **options)
    with pytest.raises(TypeError, match="ZCDP"):
        plans.privbayes_pgm(table, None, ZCDP(0.1))
    with pytest.raises(TypeError, match="ProtectedTable"):
        plans.privbayes_pgm(ektelo.protect(np.ones(4), epsilon=1.0), None, 1.0)
    assert spent(table) == 0


# -- PrivBayes+PGM with θ-usefulness (TODS §4.4) ---------------------------------------
WIDE = Domain.from_json({"w0": 40, "w1": 40, "w2": 40, **{f"s{i}": 3 for i in range(5)}})


def wide_table(rows: int = 3000, seed: int = 0) -> pd.DataFrame:
    """Three 40-value attributes (w1 follows w0) and five 3-value ones (s1
    follows s0, s3 follows w2 mod 3): a degree-2 network may join the three
    wide ones in a 64,000-cell clique."""
    rng = np.random.default_rng(seed)
    cols = {a: rng.integers(0, WIDE[a].size, rows) for a in WIDE.names}
    cols["w1"] = np.where(rng.random(rows) < 0.8, cols["w0"], cols["w1"])
    cols["s1"] = np.where(rng.random(rows) < 0.8, cols["s0"], cols["s1"])
    cols["s3"] = np.where(rng.random(rows) < 0.8, cols["w2"] % 3, cols["s3"])
    return pd.DataFrame(cols)


def _capped_cells(model: GraphicalModel) -> list[int]:
    return [math.prod(WIDE[a].size for a in c) for c in model.cliques if len(c) > 1]


@pytest.mark.parametrize("rows", [None, 3000])
def test_privbayes_pgm_theta_cap_at_degree_two_where_it_used_to_be_refused(rows) -> None:
    limit = 20_000  # below the 64,000-cell clique of the three wide attributes
    frame = wide_table()
    before = ektelo.protect(frame, WIDE, epsilon=1.0, seed=4)
    with pytest.raises(ModelTooLarge, match="64,000 cells"):
        plans.privbayes_pgm(before, None, 1.0, theta=None, max_model_size=limit)
    table = ektelo.protect(frame, WIDE, epsilon=1.0, seed=4)
    recorder = Recorder(table.port)
    table = ProtectedTable(recorder, table.node)
    model = plans.privbayes_pgm(table, None, 1.0, rows=rows, max_model_size=limit)
    assert abs(spent(table) - Fraction(1)) <= Fraction(1, 10**9)
    ops = [r.operation for r in table.history()]
    if rows is None:  # 1% of ε on the noisy total, then PrivBayes's split of the rest
        assert ops[:2] == ["noisy_count", "privbayes_select"]
        assert table.history()[0].eps == pytest.approx(0.01)
        eps_meas = 0.99 * 0.7
    else:  # a declared row count costs nothing
        assert ops[0] == "privbayes_select"
        eps_meas = 0.7
    laplace = [r for r in table.history() if r.operation == "laplace"]
    assert ops[-len(laplace):] == ["laplace"] * len(laplace)
    assert math.fsum(r.eps for r in laplace) == pytest.approx(eps_meas)
    # the cap ⌊N·ε_meas/(d·θ)⌋ (N at most the true 3000) holds every clique with parents
    cap = math.floor(3000 * eps_meas / (8 * 4.0))
    assert 0 < max(_capped_cells(model)) <= cap
    assert model.size <= limit
    for m in recorder.measurements:  # each measured on its own projection
        assert m.attributes is not None
        assert m.query.shape[1] == WIDE.project(list(m.attributes)).size


def test_privbayes_pgm_theta_cap_lowers_the_error_on_a_wide_table() -> None:
    """Degree 2 on the wide table at ε = 1: the capped network's model is
    closer on the pairs than the uncapped one (which joins 40×40×40 cliques
    whose marginals drown in noise), over 2 seeds (here 0.12 against 0.21,
    each seed within 0.01 of its mean)."""
    frame = wide_table()
    pairs = [list(p) for p in itertools.combinations(WIDE.names, 2)]
    truth = [true_marginal(frame, WIDE, p) for p in pairs]
    errors: dict[str, list[float]] = {"capped": [], "uncapped": []}
    for seed in (1, 2):
        for label, theta in (("capped", 4.0), ("uncapped", None)):
            table = ektelo.protect(frame, WIDE, epsilon=1.0, seed=seed)
            model = plans.privbayes_pgm(table, None, 1.0, theta=theta, rows=len(frame),
                                        maxiter=100)  # fmt: skip
            found = [tv(t, model.marginal(p)) for t, p in zip(truth, pairs, strict=True)]
            errors[label].append(float(np.mean(found)))
    assert np.mean(errors["capped"]) < 0.8 * np.mean(errors["uncapped"]), errors


# -- HDMM's marginal strategy -----------------------------------------------------------
def _marginal_matrix(domain: Domain, clique: tuple[str, ...]) -> np.ndarray:
    out = np.ones((1, 1))
    for a in domain.attributes:
        factor = np.eye(a.size) if a.name in clique else np.ones((1, a.size))
        out = np.kron(out, factor)
    return out


def test_closure_error_is_hdmm_error_of_the_explicit_matrices() -> None:
    """The sparse closed form equals tr((AᵀA)⁺WᵀW) times ‖A‖₁² (Laplace) or
    ‖A‖₂² (Gaussian) computed from the explicit matrices, and HDMM's own
    OPT_M objective over all 2^d sets (`operators.hdmm`)."""
    domain = Domain.from_json({"a": 3, "b": 4, "c": 2, "d": 5})
    workload = [("a", "b"), ("b", "c"), ("a", "b", "d")]
    closure = ClosureObjective(domain, workload)
    theta = np.random.default_rng(0).random(len(closure.support))
    A = np.vstack([t * _marginal_matrix(domain, c) for c, t in zip(closure.support, theta,
                                                                  strict=True)])
    W = np.vstack([_marginal_matrix(domain, c) for c in workload])
    trace = float(np.trace(np.linalg.pinv(A.T @ A) @ W.T @ W))
    laplace, grad = closure.objective(theta, "laplace")
    assert laplace == pytest.approx(trace * theta.sum() ** 2, rel=1e-9)
    assert closure.objective(theta, "gaussian")[0] == pytest.approx(
        trace * (theta**2).sum(), rel=1e-9)
    full, w = np.zeros(16), np.zeros(16)
    for c, t in zip(closure.support, theta, strict=True):
        full[sum(1 << domain.index(a) for a in c)] = t
    for c in workload:
        w[sum(1 << domain.index(a) for a in c)] += 1
    alg = hdmm_ops.MarginalSpectrum.of(domain.shape)
    hdmm_value = hdmm_ops.marginal_objective(full, alg.multiplicity * alg.eigenvalues(w), alg)[0]
    assert laplace == pytest.approx(hdmm_value, rel=1e-9)
    # the gradient (L-BFGS-B relies on it) against central differences
    step = 1e-6
    for i in (0, 3, len(theta) - 1):
        e = np.zeros_like(theta)
        e[i] = step
        numeric = (closure.objective(theta + e, "laplace")[0]
                   - closure.objective(theta - e, "laplace")[0]) / (2 * step)
        assert grad[i] == pytest.approx(numeric, rel=1e-5)


@pytest.mark.parametrize("mechanism, power", [("gaussian", 0.5), ("laplace", 1 / 3)])
def test_workload_strategy_is_the_closed_form_optimal_split(mechanism, power) -> None:
    """ρ_a ∝ √n_a (Gaussian), ε_a ∝ n_a^{1/3} (Laplace) minimise the direct
    answers' error Σ n_a·Var_a: no random split of the same budget does better."""
    workload = [("a", "b"), ("c",), ("d", "e"), ("a", "d")]
    strategy = marginal_strategy(DOMAIN, workload, mechanism, method="workload")
    cells = np.array([DOMAIN.project(list(c)).size for c in strategy.cliques], dtype=float)
    shares = np.array(strategy.shares())
    assert shares == pytest.approx(cells**power / (cells**power).sum())

    def direct_error(share: np.ndarray) -> float:
        variance = 1 / (2 * share) if mechanism == "gaussian" else 2 / share**2
        return float((cells * variance).sum())

    best = direct_error(shares)
    rng = np.random.default_rng(1)
    for _ in range(200):
        other = rng.dirichlet(np.ones(len(cells)))
        assert direct_error(other) >= best * (1 - 1e-12)
    # least squares on the same measurements (the strategy's own measure, at
    # a budget of 1) does no worse than the direct answers
    assert strategy.expected_error(1.0) <= best * (1 + 1e-9)


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_opt_m_never_errs_more_than_the_workload_strategy(mechanism) -> None:
    domain = Domain.from_json({"a": 2, "b": 2, "c": 2, "d": 30})
    workload = list(itertools.combinations(domain.names, 2))
    opt = marginal_strategy(domain, workload, mechanism)
    own = marginal_strategy(domain, workload, mechanism, method="workload")
    assert opt.method == "opt_m" and own.method == "workload"
    assert opt.objective < own.objective  # the 1-way marginals help here
    assert set(own.cliques) == set(workload)
    assert math.isclose(sum(opt.shares()), 1.0)


# -- HDMM+PGM ---------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism, budget, kind", [
    ("laplace", 0.7, "epsilon"), ("gaussian", 0.3, "rho"),
])  # fmt: skip
def test_hdmm_pgm_spends_exactly_its_budget_on_projections(mechanism, budget, kind) -> None:
    workload = [("a", "b"), ("b", "e"), ("c", "d")]
    table, recorder = recorded(chain_table(), **{kind: 1.0})
    model = plans.run("hdmm_pgm", table, workload, budget, mechanism=mechanism, maxiter=200)
    assert isinstance(model, GraphicalModel)
    assert abs(spent(table) - Fraction(budget)) <= Fraction(budget) * Fraction(1, 10**9)
    strategy = marginal_strategy(DOMAIN, workload, mechanism)
    measured = [tuple(m.attributes or ()) for m in recorder.measurements]
    assert measured == list(strategy.cliques)
    allowed = {s for c in workload for k in (1, 2) for s in itertools.combinations(c, k)}
    assert set(measured) <= allowed  # never more than a workload marginal's projection
    for m in recorder.measurements:
        assert m.query.shape[1] == DOMAIN.project(list(m.attributes or ())).size
    amounts = [r.rho if kind == "rho" else r.eps for r in table.history()]
    assert amounts == pytest.approx([budget * s for s in strategy.shares()])


def test_hdmm_pgm_typed_budgets_and_default_workload() -> None:
    table = ektelo.protect(chain_table(), DOMAIN, rho=1.0, seed=3)
    model = plans.hdmm_pgm(table, None, ZCDP(0.2), mechanism="gaussian", maxiter=100)
    assert {frozenset(c) for c in model.cliques} == {
        frozenset(p) for p in itertools.combinations(DOMAIN.names, 2)}  # every pair
    assert abs(spent(table) - Fraction(0.2)) <= Fraction(2, 10**10)
    pure = ektelo.protect(chain_table(), DOMAIN, epsilon=1.0, seed=3)
    plans.hdmm_pgm(pure, [("a", "b")], PureDP(0.5), maxiter=100)
    assert abs(spent(pure) - Fraction(0.5)) <= Fraction(1, 10**9)


def test_hdmm_pgm_recovers_its_marginals_at_large_budget() -> None:
    df = chain_table()
    table = ektelo.protect(df, DOMAIN, rho=100.0, seed=4)
    model = plans.hdmm_pgm(table, [("a", "b"), ("c", "d")], 100.0, mechanism="gaussian")
    for pair in (["a", "b"], ["c", "d"]):
        assert tv(true_marginal(df, DOMAIN, pair), model.marginal(pair)) < 0.01, pair


def test_hdmm_pgm_size_guard_refuses_before_spending() -> None:
    table = ektelo.protect(chain_table(), DOMAIN, rho=1.0, seed=3)
    # every pair of 5 attributes triangulates into one clique of the whole domain
    with pytest.raises(ModelTooLarge, match=r"480 cells, above max_model_size=479"):
        plans.hdmm_pgm(table, None, 0.5, mechanism="gaussian", max_model_size=479)
    assert spent(table) == 0 and table.history() == ()


@pytest.mark.parametrize("workload, options, error, match", [
    ([("a", "nope")], {}, ValueError, "unknown attribute 'nope'"),
    ([], {}, ValueError, "workload is empty"),
    ([("a", "a")], {}, ValueError, "duplicate attributes"),
    (Identity(4), {}, TypeError, "not a query matrix"),
    ([("a",)], {"mechanism": "exponential"}, ValueError, "mechanism must be"),
    ([("a",)], {"strategy": "best"}, ValueError, "strategy must be one of"),
    ([("a",)], {"mechanism": "gaussian"}, ValueError, "pure ε-DP budget"),
])  # fmt: skip
def test_hdmm_pgm_bad_input_spends_nothing(workload, options, error, match) -> None:
    table = ektelo.protect(chain_table(500), DOMAIN, epsilon=1.0, seed=1)
    with pytest.raises(error, match=match):
        plans.hdmm_pgm(table, workload, 0.5, **options)
    with pytest.raises(TypeError, match="ZCDP"):
        plans.hdmm_pgm(table, [("a",)], ZCDP(0.1))
    assert spent(table) == 0


# -- accuracy on adult's five smallest columns ------------------------------------------
@pytest.fixture(scope="module")
def adult5() -> tuple[pd.DataFrame, Domain, dict[tuple[str, ...], np.ndarray]]:
    if not (ADULT / "adult.csv").exists():
        pytest.skip(f"SKIPPED LOUDLY: the shared adult table is not at {ADULT}")
    frame = pd.read_csv(ADULT / "adult.csv", usecols=FIVE)[FIVE]
    domain = Domain.from_json(json.loads((ADULT / "adult-domain.json").read_text()))
    domain = domain.project(FIVE)
    truth = {p: true_marginal(frame, domain, list(p)) for p in itertools.combinations(FIVE, 2)}
    return frame, domain, truth


def _mean_tv(truth: dict[tuple[str, ...], np.ndarray], answers: dict) -> float:
    return float(np.mean([tv(t, answers[p]) for p, t in truth.items()]))


def test_hdmm_pgm_beats_mst_and_direct_marginals_on_adult5(adult5) -> None:
    """All 10 pairs of 5 adult columns (3,780 cells), ε = 1, δ = 1e-9:
    HDMM+PGM's average TV (measured 0.0034–0.0036 over seeds) is below
    direct Gaussian marginals at ρ/10 each (0.0044–0.0047; two seeds each)
    and MST (≈ 0.013; one seed)."""
    frame, domain, truth = adult5

    def protect(seed: int) -> ProtectedTable:
        t = ektelo.protect(frame, domain, epsilon=1.0, delta=1e-9, seed=seed)
        assert isinstance(t, ProtectedTable)
        return t

    rho = protect(0).budget.total
    ours, direct = [], []
    for seed in range(2):
        model = plans.hdmm_pgm(protect(seed), None, rho, mechanism="gaussian", maxiter=200)
        ours.append(_mean_tv(truth, {p: model.marginal(list(p)) for p in truth}))
        table = protect(seed)
        noisy = {p: table.vectorize(list(p)).gaussian(
            Identity(domain.project(list(p)).size), rho=rho / 10).answers for p in truth}
        direct.append(_mean_tv(truth, {p: np.maximum(
            noisy[p].reshape(domain.project(list(p)).shape), 0) for p in truth}))
    mst = plans.mst(protect(0), None, rho, maxiter=200)
    mst_tv = _mean_tv(truth, {p: mst.marginal(list(p)) for p in truth})
    assert np.mean(ours) < 0.9 * np.mean(direct), (ours, direct)
    assert np.mean(ours) < 0.5 * mst_tv, (ours, mst_tv)


def test_privbayes_pgm_beats_privbayes_own_estimate_on_adult5(adult5) -> None:
    """PrivBayes+PGM vs PrivBayes's conditional tables (ICML 2019 §6's
    comparison), ε = 1, three seeds: measured 0.006–0.007 against 0.0098–0.0115."""
    frame, domain, truth = adult5
    ours, theirs = [], []
    for seed in range(3):
        table = ektelo.protect(frame, domain, epsilon=1.0, seed=seed)
        model = plans.privbayes_pgm(table, None, 1.0, maxiter=200)
        ours.append(_mean_tv(truth, {p: model.marginal(list(p)) for p in truth}))
        table = ektelo.protect(frame, domain, epsilon=1.0, seed=seed)
        joint = plans.privbayes(table, None, 1.0, seed=seed).reshape(domain.shape)
        theirs.append(_mean_tv(truth, {p: joint.sum(
            axis=tuple(i for i, a in enumerate(FIVE) if a not in p)) for p in truth}))
    assert np.mean(ours) < 0.8 * np.mean(theirs), (ours, theirs)


def test_privbayes_pgm_degree_two_on_adult_is_fitted_and_accurate() -> None:
    """Issue #25's workload (all 91 pairs of adult's 14 attributes), ε = 1,
    degree 2: without the θ-usefulness cap this network was refused by the
    model-size guard or far off (0.448); with it the model's average TV was
    0.044–0.050 over seeds (benchmarks/bench_pgm_plans.py; MST 0.059)."""
    if not (ADULT / "adult.csv").exists():
        pytest.skip(f"SKIPPED LOUDLY: the shared adult table is not at {ADULT}")
    domain = Domain.from_json(json.loads((ADULT / "adult-domain.json").read_text()))
    frame = pd.read_csv(ADULT / "adult.csv")[list(domain.names)]
    table = ektelo.protect(frame, domain, epsilon=1.0, seed=0)
    model = plans.privbayes_pgm(table, None, 1.0, degree=2)
    assert abs(spent(table) - Fraction(1)) <= Fraction(1, 10**9)
    assert any(len(c) == 3 for c in model.cliques)  # degree 2 at work, not only pairs
    codes = domain.encode(frame)
    errors = []
    for i, j in itertools.combinations(range(len(domain.names)), 2):
        shape = (domain.shape[i], domain.shape[j])
        p = np.bincount(np.ravel_multi_index((codes[:, i], codes[:, j]), shape),
                        minlength=shape[0] * shape[1])  # fmt: skip
        q = model.marginal([domain.names[i], domain.names[j]])
        errors.append(tv(p.astype(float), np.asarray(q, dtype=float).reshape(-1)))
    assert len(errors) == 91 and float(np.mean(errors)) < 0.07, np.mean(errors)
