"""Tests of `ektelo.inference.graphical_model` (Private-PGM's estimator,
McKenna, Sheldon & Miklau, ICML 2019): exact recovery from noiseless
marginals (tree and non-tree cliques), agreement with least squares on the
full vector, weighting by variance, marginals outside a clique, synthetic
rows, the size guard, warm starts and bad input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import ektelo
from ektelo import inference as inf
from ektelo.domain import Domain
from ektelo.inference.graphical_model import (
    GraphicalModel,
    ModelTooLarge,
    fit_graphical_model,
    model_size,
)
from ektelo.matrix import Dense, Identity, Partition, Total
from ektelo.measurement import Gaussian, Measurement

DOMAIN = Domain.from_dict({"a": 3, "b": 4, "c": 5, "d": 2})
CHAIN = [("a", "b"), ("b", "c"), ("c", "d")]
TRIANGLE = [("a", "b"), ("b", "c"), ("a", "c")]


def brute_joint(domain: Domain, cliques, potentials, total: float) -> np.ndarray:
    """The distribution ∝ exp(Σ θ_C) on the full domain, by brute force."""
    log = np.zeros(domain.shape)
    for c, theta in zip(cliques, potentials, strict=True):
        order = sorted(c, key=domain.index)
        table = np.transpose(theta, [list(c).index(a) for a in order])
        view = [domain[a].size if a in c else 1 for a in domain.names]
        log = log + table.reshape(view)
    p = np.exp(log - log.max())
    return total * p / p.sum()


def project(joint: np.ndarray, domain: Domain, attrs) -> np.ndarray:
    drop = tuple(i for i, a in enumerate(domain.names) if a not in attrs)
    kept = [a for a in domain.names if a in attrs]
    return np.transpose(joint.sum(axis=drop), [kept.index(a) for a in attrs])


def measurement(attrs, answers, *, sigma=1.0, Q=None, table="k/t0/") -> Measurement:
    """A measurement of the projection on `attrs` (the kernel's record shape)."""
    shape = DOMAIN.project(attrs).shape
    n = math.prod(shape)
    Q = Identity(n) if Q is None else Q
    return Measurement(
        answers, Q, Q, Gaussian(sigma), 0.0, table + "|".join(attrs), shape,
        attributes=tuple(attrs),
    )  # fmt: skip


def random_potentials(cliques, rng, scale=1.0):
    return [scale * rng.normal(size=DOMAIN.project(c).shape) for c in cliques]


# -- the model itself ------------------------------------------------------------


@pytest.mark.parametrize(
    "cliques",
    [CHAIN, TRIANGLE, [("a", "b", "c"), ("c", "d"), ("b",)], [("a", "c"), ("b", "d")], [("d",)]],
)
def test_model_marginals_match_brute_force(cliques) -> None:
    rng = np.random.default_rng(0)
    pots = random_potentials(cliques, rng, 2.0)
    model = GraphicalModel(DOMAIN, cliques, pots, total=500.0)
    joint = brute_joint(DOMAIN, cliques, pots, 500.0)
    for k in (1, 2, 3, 4):
        for attrs in itertools.permutations(DOMAIN.names, k):
            np.testing.assert_allclose(
                model.marginal(attrs), project(joint, DOMAIN, attrs), rtol=1e-9, atol=1e-9
            )
    assert model.marginal(["d", "a"]).shape == (2, 3)
    assert model.marginal(["d", "a"]).sum() == pytest.approx(500.0)


def test_answer_applies_queries_to_the_flattened_marginal() -> None:
    rng = np.random.default_rng(1)
    model = GraphicalModel(DOMAIN, CHAIN, random_potentials(CHAIN, rng), total=100.0)
    mu = model.marginal(["d", "a"]).reshape(-1)
    W = rng.normal(size=(3, 6))
    np.testing.assert_allclose(model.answer(W, ["d", "a"]), W @ mu)
    np.testing.assert_allclose(model.answer(Dense(W), ["d", "a"]), W @ mu)
    np.testing.assert_allclose(model.answer(Total(6), ["d", "a"]), [100.0])
    with pytest.raises(ValueError, match="W has 5 columns; the marginal on"):
        model.answer(np.ones((1, 5)), ["d", "a"])


# -- fitting -------------------------------------------------------------------------


@pytest.mark.parametrize("cliques", [CHAIN, TRIANGLE], ids=["chain", "triangle"])
def test_exact_recovery_from_noiseless_marginals(cliques) -> None:
    rng = np.random.default_rng(2)
    pots = random_potentials(cliques, rng)
    truth = brute_joint(DOMAIN, cliques, pots, 1000.0)
    ms = [measurement(c, project(truth, DOMAIN, c).reshape(-1)) for c in cliques]
    model = fit_graphical_model(ms, DOMAIN, maxiter=5000, tol=1e-13)
    assert model.total == pytest.approx(1000.0, rel=1e-12)  # estimated from the marginals
    assert model.info.total_estimated
    full = model.marginal(DOMAIN.names)
    assert np.abs(full - truth).max() < 1e-3 * truth.max()
    # A model started at the uniform distribution is far from the truth.
    assert np.abs(1000.0 / DOMAIN.size - truth).max() > 0.3 * truth.max()


def test_loss_never_increases() -> None:
    rng = np.random.default_rng(3)
    truth = brute_joint(DOMAIN, TRIANGLE, random_potentials(TRIANGLE, rng), 2000.0)
    ms = [
        measurement(
            c,
            project(truth, DOMAIN, c).reshape(-1) + rng.normal(0, 5, DOMAIN.project(c).size),
            sigma=5.0,
        )
        for c in TRIANGLE
    ]
    losses: list[float] = []
    model = fit_graphical_model(
        ms,
        DOMAIN,
        total=2000.0,
        maxiter=300,
        tol=1e-15,
        callback=lambda it, loss: losses.append(loss),
    )
    assert len(losses) == model.info.iterations
    assert all(b <= a * (1 + 1e-12) for a, b in itertools.pairwise(losses))
    assert losses[-1] == pytest.approx(model.info.loss)


def _full_vector_measurements(rng, sigma):
    """Noisy 1- and 2-way marginals of a small table, as measurements of
    projections and as the same queries on the full vector."""
    truth = brute_joint(DOMAIN, CHAIN, random_potentials(CHAIN, rng, 0.5), 20_000.0)
    # ("c", "a"): a measurement whose attributes are not in the domain's order
    cliques = [("a",), ("b",), ("d",), ("a", "b"), ("b", "c"), ("c", "d"), ("c", "a")]
    on_table, on_vector = [], []
    for c in cliques:
        y = project(truth, DOMAIN, c).reshape(-1) + rng.normal(0, sigma, DOMAIN.project(c).size)
        on_table.append(measurement(c, y, sigma=sigma))
        # the same marginal as a query on the full vector (domain order)
        rows = np.zeros((DOMAIN.project(c).size, DOMAIN.size))
        cells = np.indices(DOMAIN.shape).reshape(len(DOMAIN), -1)
        idx = np.ravel_multi_index(
            tuple(cells[DOMAIN.index(a)] for a in c), DOMAIN.project(c).shape
        )
        rows[idx, np.arange(DOMAIN.size)] = 1.0
        on_vector.append(
            Measurement(y, Dense(rows), Dense(rows), Gaussian(sigma), 0.0, "v", DOMAIN.shape)
        )
    return cliques, on_table, on_vector


@pytest.mark.parametrize("estimator", [inf.least_squares, inf.nnls])
def test_agrees_with_least_squares_on_the_full_vector(estimator) -> None:
    rng = np.random.default_rng(4)
    cliques, on_table, on_vector = _full_vector_measurements(rng, 3.0)
    x = estimator(on_vector, total=20_000.0).x.reshape(DOMAIN.shape)
    # The fitted marginals are interior (all positive), so least squares on
    # the vector and the graphical model minimise the same loss over the
    # same marginals (NNLS is exactly the same problem).
    assert min(project(x, DOMAIN, c).min() for c in cliques) > 0
    model = fit_graphical_model(on_table, DOMAIN, total=20_000.0, maxiter=3000, tol=1e-12)
    for c, m in zip(cliques, on_table, strict=True):
        theirs = project(x, DOMAIN, c)
        tv = 0.5 * np.abs(model.marginal(c) - theirs).sum() / 20_000.0
        # ... much closer than the noisy measurements themselves
        raw = 0.5 * np.abs(m.answers.reshape(theirs.shape) - theirs).sum() / 20_000.0
        assert tv < 1e-5 and raw > 10 * tv, (c, tv, raw)


def test_weights_follow_the_noise_variance() -> None:
    y_low = np.array([100.0, 300.0, 600.0])
    y_high = np.array([500.0, 400.0, 100.0])
    for s_low, s_high in ((1.0, 30.0), (30.0, 1.0)):
        ms = [measurement(("a",), y_low, sigma=s_low), measurement(("a",), y_high, sigma=s_high)]
        model = fit_graphical_model(ms, DOMAIN, total=1000.0, maxiter=2000, tol=1e-14)
        w = np.array([s_low**-2, s_high**-2])
        expected = (w[0] * y_low + w[1] * y_high) / w.sum()
        np.testing.assert_allclose(model.marginal(["a"]), expected, rtol=1e-5)
        precise = y_low if s_low < s_high else y_high
        assert np.abs(model.marginal(["a"]) - precise).max() < 1.0


def test_negative_noisy_counts_fit_as_the_nonnegative_least_squares_answer() -> None:
    # One marginal, total fixed: the optimum is the projection of y on the
    # counts ≥ 0 summing to the total, max(y − λ, 0) — here λ = 10.
    y = np.array([500.0, -20.0, 300.0, 230.0])
    model = fit_graphical_model([measurement(("b",), y)], DOMAIN, total=1000.0, tol=1e-12)
    np.testing.assert_allclose(model.marginal(["b"]), [490.0, 0.0, 290.0, 220.0], atol=0.5)


def test_a_total_query_measures_the_total_only() -> None:
    frame, domain = _table(2000, 2)
    table = ektelo.protect(frame, domain, epsilon=1.0, delta=1e-6, seed=3)
    count = table.vectorize().gaussian(Total(24), rho=table.budget.total / 2)
    x = table.vectorize(["sex", "k"])
    pair = x.gaussian(Identity(6), rho=table.budget.total / 2)
    model = fit_graphical_model([count, pair], domain)
    assert model.cliques == (("sex", "k"),)  # the total adds no clique
    # the total: both measurements' estimates, weighted by their precision
    sums = np.array([count.answers[0], pair.answers.sum()])
    precision = np.array([1 / count.variance, 1 / (6 * pair.variance)])
    assert model.total == pytest.approx(float(sums @ precision / precision.sum()))
    only = fit_graphical_model([count], domain)
    assert only.total == pytest.approx(max(1.0, count.answers[0]))
    np.testing.assert_allclose(only.marginal(["k"]), only.total / 3)


def test_general_queries_on_a_clique_and_a_marginal_outside_it() -> None:
    rng = np.random.default_rng(5)
    truth = brute_joint(DOMAIN, CHAIN, random_potentials(CHAIN, rng), 5000.0)
    # prefix sums on (b, c) and an explicit random query on (c, d)
    Qbc = Dense(np.tril(np.ones((20, 20))))
    Qcd = Dense(rng.random((10, 10)) + np.eye(10))
    ms = [
        measurement(("a", "b"), project(truth, DOMAIN, ("a", "b")).reshape(-1)),
        measurement(("b", "c"), Qbc.matvec(project(truth, DOMAIN, ("b", "c")).reshape(-1)), Q=Qbc),
        measurement(("c", "d"), Qcd.matvec(project(truth, DOMAIN, ("c", "d")).reshape(-1)), Q=Qcd),
    ]
    model = fit_graphical_model(ms, DOMAIN, total=5000.0, maxiter=2000, tol=1e-10)
    np.testing.assert_allclose(
        model.marginal(["d", "a"]), project(truth, DOMAIN, ("d", "a")), atol=0.5
    )


# -- through the kernel ---------------------------------------------------------------


def _table(rows: int, seed: int) -> tuple[pd.DataFrame, Domain]:
    domain = Domain.from_dict(
        {"sex": {"values": ["F", "M"]}, "age": {"bins": [0, 20, 40, 60, 100]}, "k": 3}
    )
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], rows)
    age = np.where(sex == "F", rng.uniform(0, 60, rows), rng.uniform(20, 100, rows))
    k = np.minimum((age // 30).astype(int), 2)
    return pd.DataFrame({"sex": sex, "age": age, "k": k}), domain


def test_fits_kernel_measurements_of_projections() -> None:
    frame, domain = _table(5000, 0)
    table = ektelo.protect(frame, domain, epsilon=4.0, delta=1e-6, seed=1)
    rho = table.budget.total / 3
    ms = []
    for c in [("sex", "age"), ("k", "age"), ("sex",)]:
        x = table.vectorize(list(c))
        ms.append(x.gaussian(Identity(x.size), rho=rho))
    model = fit_graphical_model(ms, domain)
    assert model.total == pytest.approx(5000, rel=0.02)
    codes = domain.encode(frame)
    true_sa = np.zeros((2, 4))
    np.add.at(true_sa, (codes[:, 0], codes[:, 1]), 1)
    assert 0.5 * np.abs(model.marginal(["sex", "age"]) - true_sa).sum() / 5000 < 0.05
    # Mixing two tables is refused.
    other = ektelo.protect(frame, domain, epsilon=1.0, delta=1e-6, seed=2)
    y = other.vectorize(["k"]).gaussian(Identity(3), rho=0.01)
    with pytest.raises(ValueError, match="different tables"):
        fit_graphical_model([*ms, y], domain)


def test_a_reduced_projection_enters_through_its_query_on_root() -> None:
    # MST's domain compression: ages 0-20 and 20-40 merged before measuring.
    frame, domain = _table(4000, 4)
    table = ektelo.protect(frame, domain, epsilon=8.0, delta=1e-6, seed=5)
    rho = table.budget.total / 2
    merged = table.vectorize(["age"]).reduce_by_partition(Partition([0, 0, 1, 2]))
    coarse = merged.gaussian(Identity(3), rho=rho)
    pair = table.vectorize(["age", "k"])
    fine = pair.gaussian(Identity(12), rho=rho)
    assert coarse.query_on_root.shape == (3, 4)
    model = fit_graphical_model([coarse, fine], domain)
    ages = model.marginal(["age"])
    codes = domain.encode(frame)
    true_ages = np.bincount(codes[:, 1], minlength=4)
    assert abs(ages[0] + ages[1] - true_ages[:2].sum()) < 0.01 * len(frame)
    assert 0.5 * np.abs(ages - true_ages).sum() / len(frame) < 0.02


# -- synthetic data -----------------------------------------------------------------------


def test_synthetic_rows_reproduce_the_model_marginals() -> None:
    rng = np.random.default_rng(6)
    model = GraphicalModel(DOMAIN, CHAIN, random_potentials(CHAIN, rng, 1.5), total=1.0)
    other = GraphicalModel(DOMAIN, [("a", "d")], random_potentials([("a", "d")], rng, 1.5))
    rows = 20_000
    for method in ("sample", "round", "balanced"):
        frame = model.synthetic(rows, seed=7, method=method)
        assert list(frame.columns) == list(DOMAIN.names) and len(frame) == rows
        codes = DOMAIN.encode(frame)
        for attrs in [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d"), ("a", "c")]:
            cols = tuple(codes[:, DOMAIN.index(a)] for a in attrs)
            shape = DOMAIN.project(attrs).shape
            seen = np.bincount(np.ravel_multi_index(cols, shape), minlength=math.prod(shape))
            for m, should_pass in ((model, True), (other, False)):
                expected = m.marginal(attrs).reshape(-1) / m.total * rows
                p = stats.chisquare(seen, expected).pvalue
                assert (p > 1e-4) == should_pass, (method, attrs, p)
    # Rounding matches a clique's marginal to within one row per cell group.
    frame = model.synthetic(rows, seed=8)
    codes = DOMAIN.encode(frame)
    seen = np.bincount(np.ravel_multi_index((codes[:, 0], codes[:, 1]), (3, 4)), minlength=12)
    assert np.abs(seen - model.marginal(["a", "b"]).reshape(-1) * rows).max() < 30


def test_balanced_rows_match_the_model_off_the_tree_more_closely_than_shuffled() -> None:
    """The even spread realises the model's conditional independence nearly
    exactly: pairs not in one clique (a–c, a–d, b–d on the chain) are closer
    to the model's marginals than with shuffled rounding, seed after seed."""
    rng = np.random.default_rng(9)
    model = GraphicalModel(DOMAIN, CHAIN, random_potentials(CHAIN, rng, 1.5), total=1.0)
    rows = 5000

    def distance(method: str, seed: int) -> float:
        codes = DOMAIN.encode(model.synthetic(rows, seed=seed, method=method))
        out = 0.0
        for attrs in [("a", "c"), ("a", "d"), ("b", "d")]:
            cols = tuple(codes[:, DOMAIN.index(a)] for a in attrs)
            shape = DOMAIN.project(attrs).shape
            seen = np.bincount(np.ravel_multi_index(cols, shape), minlength=math.prod(shape))
            out += np.abs(seen - model.marginal(attrs).reshape(-1) * rows).sum()
        return out

    balanced = [distance("balanced", s) for s in range(8)]
    shuffled = [distance("round", s) for s in range(8)]
    assert sum(b < r for b, r in zip(balanced, shuffled, strict=True)) >= 7
    assert np.mean(balanced) < 0.8 * np.mean(shuffled)


def test_synthetic_rows_decode_to_the_domain_values() -> None:
    frame, domain = _table(3000, 1)
    codes = domain.encode(frame)
    ms = []
    for c in [("sex", "age"), ("age", "k")]:
        shape = domain.project(c).shape
        y = np.bincount(
            np.ravel_multi_index(tuple(codes[:, domain.index(a)] for a in c), shape),
            minlength=math.prod(shape),
        ).astype(float)
        n = y.size
        ms.append(
            Measurement(
                y,
                Identity(n),
                Identity(n),
                Gaussian(1.0),
                0.0,
                "k/t0/" + "|".join(c),
                shape,
                attributes=c,
            )
        )
    model = fit_graphical_model(ms, domain, maxiter=200)
    synth = model.synthetic(3000, seed=0)
    assert set(synth["sex"]) <= {"F", "M"}
    assert set(synth["age"]) <= {0.0, 20.0, 40.0, 60.0}  # a bin's lower edge
    assert set(synth["k"]) <= {0, 1, 2}
    again = domain.encode(synth)  # encodes back without error
    assert np.array_equal(again, domain.encode(model.synthetic(3000, seed=0)))
    assert not np.array_equal(again, domain.encode(model.synthetic(3000, seed=1)))


# -- size guard ---------------------------------------------------------------------------


def test_model_size_counts_the_junction_tree_cells() -> None:
    assert model_size(DOMAIN, CHAIN) == 12 + 20 + 10
    assert model_size(DOMAIN, TRIANGLE) == 60 + 2  # one clique abc; d alone
    # A 4-cycle is triangulated into two triangles, the cheaper way (a-c chord).
    assert model_size(DOMAIN, [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")]) == min(
        3 * 4 * 5 + 3 * 5 * 2, 4 * 3 * 2 + 4 * 5 * 2
    )
    assert model_size(DOMAIN, []) == 3 + 4 + 5 + 2


def test_size_guard_raises_model_too_large() -> None:
    ms = [measurement(c, np.full(DOMAIN.project(c).size, 10.0)) for c in TRIANGLE]
    with pytest.raises(ModelTooLarge, match=r"has 62 cells, above max_model_size=61"):
        fit_graphical_model(ms, DOMAIN, max_model_size=61)
    assert issubclass(ModelTooLarge, ValueError)
    fit_graphical_model(ms, DOMAIN, max_model_size=62, maxiter=5)
    # Extra cliques count too.
    with pytest.raises(ModelTooLarge, match="120 cells"):
        fit_graphical_model(ms, DOMAIN, cliques=[("a", "b", "c", "d")], max_model_size=100)
    # A marginal query's tables are guarded as well.
    model = GraphicalModel(DOMAIN, CHAIN, max_model_size=45)
    with pytest.raises(ModelTooLarge, match="above the limit 45"):
        model.marginal(["a", "b", "c", "d"])


# -- warm start --------------------------------------------------------------------------------


def test_warm_start_continues_from_a_previous_model() -> None:
    rng = np.random.default_rng(9)
    truth = brute_joint(DOMAIN, TRIANGLE, random_potentials(TRIANGLE, rng), 1000.0)
    ms = [measurement(c, project(truth, DOMAIN, c).reshape(-1)) for c in TRIANGLE[:2]]
    first = fit_graphical_model(ms, DOMAIN, maxiter=3000, tol=1e-12)
    # AIM's pattern: one more measurement, refit from the previous model (the
    # new clique closes a cycle: no closed-form start for the cold fit).
    more = [*ms, measurement(("a", "c"), project(truth, DOMAIN, ("a", "c")).reshape(-1))]
    losses: dict[str, list[float]] = {"warm": [], "cold": []}
    warm = fit_graphical_model(
        more,
        DOMAIN,
        start=first,
        maxiter=3000,
        tol=1e-12,
        callback=lambda it, loss: losses["warm"].append(loss),
    )
    cold = fit_graphical_model(
        more, DOMAIN, maxiter=3000, tol=1e-12, callback=lambda it, loss: losses["cold"].append(loss)
    )
    assert warm.info.dropped_start_cliques == ()
    # The start already fits two of the three marginals.
    assert losses["warm"][0] < 0.5 * losses["cold"][0]
    np.testing.assert_allclose(warm.marginal(DOMAIN.names), cold.marginal(DOMAIN.names), atol=0.05)
    # Restarting from a converged model stops at once.
    again = fit_graphical_model(more, DOMAIN, start=warm, maxiter=3000, tol=1e-6)
    assert again.info.iterations <= 6  # the stopping rule's window (5) and one


# -- bad input ---------------------------------------------------------------------------------


def test_bad_input_gives_clear_errors() -> None:
    good = measurement(("a",), np.ones(3))
    with pytest.raises(ValueError, match="no measurements"):
        fit_graphical_model([], DOMAIN)
    with pytest.raises(TypeError, match="list of Measurement"):
        fit_graphical_model(good, DOMAIN)
    with pytest.raises(TypeError, match="Domain"):
        fit_graphical_model([good], {"a": 3})
    unknown = Measurement(
        np.ones(3), Identity(3), Identity(3), Gaussian(1.0), 0.0, "k/t0/z", (3,), attributes=("z",)
    )
    with pytest.raises(ValueError, match="unknown attribute 'z'"):
        fit_graphical_model([good, unknown], DOMAIN)
    array = Measurement(np.ones(3), Identity(3), Identity(3), Gaussian(1.0), 0.0, "k/v0", (3,))
    with pytest.raises(ValueError, match="protected array"):
        fit_graphical_model([array], DOMAIN)
    with pytest.raises(ValueError, match="different tables"):
        fit_graphical_model([good, measurement(("b",), np.ones(4), table="k/t9/")], DOMAIN)
    wrong = Measurement(
        np.ones(4), Identity(4), Identity(4), Gaussian(1.0), 0.0, "k/t0/a", (4,), attributes=("a",)
    )
    with pytest.raises(ValueError, match=r"root_shape \(4,\)"):
        fit_graphical_model([wrong], DOMAIN)
    with pytest.raises(ValueError, match="unknown attribute 'q'"):
        fit_graphical_model([good], DOMAIN, cliques=[("a", "q")])
    with pytest.raises(ValueError, match="total cannot be estimated"):
        fit_graphical_model(
            [measurement(("a",), np.ones(1), Q=Dense(np.array([[1.0, 0, 0]])))], DOMAIN
        )
    with pytest.raises(TypeError, match="maxiter"):
        fit_graphical_model([good], DOMAIN, maxiter=1.5)
    model = GraphicalModel(DOMAIN, CHAIN)
    with pytest.raises(ValueError, match="unknown attribute 'e'"):
        model.marginal(["a", "e"])
    with pytest.raises(ValueError, match="method"):
        model.synthetic(10, method="gibbs")
