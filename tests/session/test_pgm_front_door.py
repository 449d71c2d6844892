"""PrivBayes+PGM and HDMM+PGM at the session's front door (issue #25): the
model plans `ektelo.wide.MODELS` dispatches with the session's budget in the
plan's unit — `privbayes_pgm` pure ε, `hdmm_pgm` ε (Laplace) or ρ (Gaussian)
— answering all 2-way marginals and drawing synthetic tables, each spending
exactly the request; a plan given the wrong kind of budget, or a bad
parameter, refused before anything is spent; `plan="auto"` unchanged."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from ektelo import Domain, plans, wide
from ektelo.budget import ZCDP, PureDP, rho_of_epsilon_delta
from ektelo.datasets import census_like
from ektelo.port import ProtectedTable, protect
from ektelo.session import Session

# The census-like table of `ektelo generate` on a coarse domain (1,680 cells:
# every pair of its 5 attributes is a small model for HDMM+PGM too).
DOMAIN = {
    "age": {"bins": [18, 30, 40, 50, 60, 70, 90]},
    "sex": {"values": ["F", "M"]},
    "race": {"values": ["white", "black", "hispanic", "asian-other"]},
    "marital": {"values": ["never-married", "married", "married-spouse-absent", "separated",
                           "divorced", "widowed", "civil-partnership"]},
    "salary": {"bins": [0, 20000, 40000, 60000, 100000, 500000]},
}
NAMES = list(DOMAIN)
SIZES = {n: Domain.from_dict(DOMAIN)[n].size for n in NAMES}
ROWS = 3000
DELTA = 1e-9
# (plan, the session's budget options)
CASES = [("privbayes_pgm", {}), ("hdmm_pgm", {}), ("hdmm_pgm", {"delta": DELTA})]
IDS = ["privbayes_pgm-eps", "hdmm_pgm-eps", "hdmm_pgm-zcdp"]


@pytest.fixture(scope="module")
def census() -> pd.DataFrame:
    return census_like(ROWS, seed=0)[0]


def cost(epsilon: float, options: dict[str, float]) -> float:
    """What a request of ε costs the session: ε, or ρ(ε, δ) under zCDP."""
    return rho_of_epsilon_delta(epsilon, options["delta"]) if options else epsilon


def codes(census: pd.DataFrame, attr: str) -> np.ndarray:
    """The domain's codes of a column (bins: the half-open bin; values: the index)."""
    spec = DOMAIN[attr]
    if "bins" in spec:
        return np.searchsorted(spec["bins"], census[attr].to_numpy(), side="right") - 1
    return np.asarray(pd.Categorical(census[attr], categories=spec["values"]).codes)


def pair_tv(frame: pd.DataFrame, census: pd.DataFrame, a: str, b: str) -> float:
    """Total-variation distance between a pair's answers and its true marginal."""
    est = frame.loc[frame["marginal"] == f"{a}×{b}", "answer"].to_numpy()
    est = est.reshape(SIZES[a], SIZES[b])
    true = np.zeros_like(est)
    np.add.at(true, (codes(census, a), codes(census, b)), 1.0)
    return 0.5 * float(np.abs(est / est.sum() - true / true.sum()).sum())


@pytest.mark.parametrize("plan, options", CASES, ids=IDS)
def test_all_pairs_answered_by_the_model_spending_exactly_the_request(census, plan, options):
    s = Session(census, DOMAIN, epsilon=1.0, seed=5, progress=False, **options)
    frame = s.marginals(2, epsilon=0.8, plan=plan)
    assert frame.attrs["plan"] == plan
    noise = "Gaussian noise at ρ" if options else "Laplace noise at ε"
    assert noise in frame.attrs["why"]
    pairs = list(itertools.combinations(NAMES, 2))
    assert list(frame["marginal"].unique()) == ["×".join(p) for p in pairs]
    assert len(frame) == sum(SIZES[a] * SIZES[b] for a, b in pairs)
    assert frame["ci_method"].str.startswith(f"none: graphical-model estimate ({plan}").all()
    assert frame["std_error"].isna().all() and frame["ci_low"].isna().all()
    # exactly the request, in the session's unit, and the rest left
    assert s.spent == pytest.approx(cost(0.8, options), rel=1e-9)
    assert s.remaining == pytest.approx(cost(1.0, options) - cost(0.8, options), rel=1e-6)
    assert list(s.history["plan"]) == [plan]
    # the answers are the table's marginals, in the rows' order (uniform
    # answers are at TV 0.39 on average, 0.57 at most; the plans here at
    # 0.02–0.05 on average, at most 0.03–0.09 over seeds 5–7)
    tvs = [pair_tv(frame, census, a, b) for a, b in pairs]
    assert max(tvs) < 0.15 and float(np.mean(tvs)) < 0.08, tvs
    sums = frame.groupby("marginal", sort=False)["answer"].sum()
    assert np.allclose(sums, sums.iloc[0]) and abs(sums.iloc[0] - ROWS) < 0.05 * ROWS


@pytest.mark.parametrize("plan, options", CASES, ids=IDS)
def test_synthetic_table_with_the_domain_labels_spends_exactly(census, plan, options):
    s = Session(census, DOMAIN, epsilon=1.0, seed=2, progress=False, **options)
    syn = s.synthetic(rows=400, plan=plan, epsilon=0.5, seed=0)
    assert list(syn.columns) == NAMES and len(syn) == 400
    assert set(syn["sex"]) <= {"F", "M"} and set(syn["race"]) <= set(DOMAIN["race"]["values"])
    assert set(syn["marital"]) <= set(DOMAIN["marital"]["values"])
    assert syn["age"].between(18, 90).all()
    assert syn.attrs["plan"] == plan
    assert s.spent == pytest.approx(cost(0.5, options), rel=1e-9)
    assert list(s.history["question"]) == ["synthetic"]


def test_privbayes_pgm_runs_on_a_wide_table_without_its_vector(vectorized):
    """8 attributes × 10 values (10⁸ cells): only the network's cliques
    (≤ degree + 1 = 3 attributes) are ever vectorized."""
    seen = vectorized
    rng = np.random.default_rng(0)
    names = [f"a{i}" for i in range(8)]
    cols = [rng.integers(0, 10, 2000)]
    for _ in names[1:]:
        cols.append(np.where(rng.random(2000) < 0.7, cols[-1], rng.integers(0, 10, 2000)))
    s = Session(pd.DataFrame(dict(zip(names, cols, strict=True))), dict.fromkeys(names, 10),
                epsilon=2.0, seed=1, progress=False)
    frame = s.marginals(2, epsilon=2.0, plan="privbayes_pgm")
    assert frame["marginal"].nunique() == 28 and len(frame) == 2800
    assert seen and max(len(a) for a in seen) <= 3
    assert s.spent == pytest.approx(2.0, rel=1e-9)


@pytest.mark.parametrize("options, instead", [({}, "privbayes_pgm"),
                                              ({"delta": DELTA}, "mst or aim")])
def test_hdmm_pgm_on_every_pair_of_a_wide_table_says_what_to_do(options, instead):
    """Every pair of 8 attributes triangulates into one 10⁸-cell clique:
    refused before anything is measured, naming the ways out."""
    from ektelo.inference.graphical_model import ModelTooLarge

    names = [f"a{i}" for i in range(8)]
    frame = pd.DataFrame({n: np.arange(300) % 10 for n in names})
    s = Session(frame, dict.fromkeys(names, 10), epsilon=1.0, seed=1, progress=False, **options)
    with pytest.raises(ModelTooLarge, match=f"fewer attributes, or use {instead}$"):
        s.marginals(2, epsilon=0.5, plan="hdmm_pgm")
    assert s.spent == 0 and s.history.empty


def test_a_zcdp_session_asking_privbayes_pgm_is_refused_with_nothing_spent(census):
    s = Session(census, DOMAIN, epsilon=1.0, delta=DELTA, seed=1, progress=False)
    message = "privbayes_pgm spends pure ε .*epsilon= and no delta"
    with pytest.raises(ValueError, match=message):
        s.marginals(2, epsilon=0.5, plan="privbayes_pgm")
    with pytest.raises(ValueError, match=message):
        s.synthetic(epsilon=0.5, plan="privbayes_pgm")
    with pytest.raises(ValueError, match=message):
        s.preview("marginals:2:all", plan="privbayes_pgm", epsilon=0.5)
    with pytest.raises(ValueError, match="can use mst, aim, hdmm_pgm"):
        s.model("privbayes_pgm", epsilon=0.5)
    assert s.spent == 0 and s.history.empty


def test_a_pure_epsilon_session_asking_a_zcdp_plan_names_the_alternatives(census):
    s = Session(census, DOMAIN, epsilon=1.0, seed=1, progress=False)
    for plan in ("mst", "aim"):
        with pytest.raises(ValueError, match=f"{plan} spends ρ.*delta=.*privbayes_pgm or "
                                             "hdmm_pgm"):
            s.marginals(2, epsilon=0.5, plan=plan)
    assert s.spent == 0


@pytest.mark.parametrize("plan, params, error, match", [
    ("privbayes_pgm", {"nope": 1}, TypeError, r"no parameter\(s\) \['nope'\]"),
    ("privbayes_pgm", {"degree": 0}, ValueError, "degree must be a positive integer"),
    ("privbayes_pgm", {"theta": -1.0}, ValueError, "theta"),
    ("hdmm_pgm", {"mechanism": "gaussian"}, ValueError, "mechanism follows the session"),
    ("hdmm_pgm", {"strategy": "best"}, ValueError, "'opt_m', 'workload'"),
    ("hdmm_pgm", {"max_model_size": 10}, ValueError, "max_model_size=10"),
])
def test_bad_parameters_are_refused_with_nothing_spent(census, plan, params, error, match):
    s = Session(census, DOMAIN, epsilon=1.0, seed=1, progress=False)
    with pytest.raises(error, match=match):
        s.marginals(2, epsilon=0.5, plan=plan, params=params)
    with pytest.raises(error, match=match):
        s.synthetic(epsilon=0.5, plan=plan, params=params)
    assert s.spent == 0 and s.history.empty


def test_a_zcdp_session_refuses_laplace_for_hdmm_pgm(census):
    s = Session(census, DOMAIN, epsilon=1.0, delta=DELTA, seed=1, progress=False)
    with pytest.raises(ValueError, match="mechanism='laplace' is refused"):
        s.marginals(2, epsilon=0.5, plan="hdmm_pgm", params={"mechanism": "laplace"})
    assert s.spent == 0
    frame = s.marginals(["sex", "race"], epsilon=0.5, plan="hdmm_pgm",
                        params={"mechanism": "gaussian", "strategy": "workload"})
    assert len(frame) == 8 and s.spent == pytest.approx(rho_of_epsilon_delta(0.5, DELTA))


def test_preview_names_the_plan_and_no_closed_form(census):
    s = Session(census, DOMAIN, epsilon=1.0, seed=1, progress=False)
    p = s.preview("marginals:2:all", plan="hdmm_pgm", epsilon=0.5)
    assert p.plan == "hdmm_pgm" and p.std_error is None and p.ci_half_width is None
    assert "no closed-form" in p.ci_method and "hdmm_pgm" in str(p)
    assert "no closed-form" in str(p)
    assert s.spent == 0


def test_other_questions_are_answered_off_the_model(census):
    s = Session(census, DOMAIN, epsilon=1.0, seed=3, progress=False)
    frame = s.histogram(["sex", "race"], epsilon=0.5, plan="hdmm_pgm")
    assert len(frame) == 8 and frame["ci_method"].str.startswith("none: graphical").all()
    assert abs(frame["answer"].sum() - ROWS) < 0.05 * ROWS
    assert s.spent == pytest.approx(0.5, rel=1e-9)


def test_a_public_row_count_is_privbayes_pgms_declared_n(census, monkeypatch):
    """With `public_rows` the θ-usefulness cap rests on the declared count:
    no noisy count is bought; without it (or with `where=`) one is."""
    counts: list[float] = []
    original = ProtectedTable.noisy_count

    def spy(self, *, eps):
        counts.append(eps)
        return original(self, eps=eps)

    monkeypatch.setattr(ProtectedTable, "noisy_count", spy)
    declared = Session(census, DOMAIN, epsilon=1.0, seed=1, progress=False, public_rows=ROWS)
    declared.synthetic(rows=10, plan="privbayes_pgm", epsilon=0.4)
    assert counts == [] and declared.spent == pytest.approx(0.4, rel=1e-9)
    declared.marginals(2, epsilon=0.3, plan="privbayes_pgm", where="sex == 'F'")
    assert len(counts) == 1  # the filtered count is not the declared one
    plain = Session(census, DOMAIN, epsilon=1.0, seed=1, progress=False)
    plain.marginals(2, epsilon=0.4, plan="privbayes_pgm")
    assert len(counts) == 2 and plain.spent == pytest.approx(0.4, rel=1e-9)


def test_auto_never_picks_the_new_model_plans():
    wide_names = [f"w{i}" for i in range(8)]
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({n: rng.integers(0, 10, 300) for n in wide_names})
    pure = Session(frame, dict.fromkeys(wide_names, 10), epsilon=1.0, seed=1, progress=False)
    assert pure.preview("marginals:2:all", epsilon=0.5).plan == "marginals_direct"
    z = Session(frame, dict.fromkeys(wide_names, 10), epsilon=1.0, delta=DELTA, seed=1,
                progress=False)
    assert z.preview("marginals:2:all", epsilon=0.5).plan == "mst"
    assert z.spent == 0 and pure.spent == 0


@pytest.mark.parametrize("plan", wide.MODEL_PLANS)
def test_the_table_of_model_plans_agrees_with_the_plans(census, plan):
    """Each plan takes the budgets `MODELS` lists (and spends them exactly)
    and refuses the other kind before spending anything."""
    domain = Domain.from_dict({k: DOMAIN[k] for k in ("sex", "race", "marital")})
    frame = census[["sex", "race", "marital"]]
    kinds = {"epsilon": (lambda: protect(frame, domain, epsilon=1.0, seed=0), PureDP(0.5)),
             "rho": (lambda: protect(frame, domain, rho=1.0, seed=0), ZCDP(0.5))}
    assert set(wide.MODELS[plan].units) <= set(kinds) and wide.MODELS[plan].units
    for unit, (table_of, budget) in kinds.items():
        table = table_of()
        options = {"maxiter": 50}
        if plan == "hdmm_pgm":
            options["mechanism"] = "gaussian" if unit == "rho" else "laplace"
        if unit in wide.MODELS[plan].units:
            plans.run(plan, table, None, budget, **options)
            assert float(table.budget.spent) == pytest.approx(0.5, rel=1e-9)
        else:
            with pytest.raises((TypeError, ValueError)):
                plans.run(plan, table, None, budget, **options)
            assert float(table.budget.spent) == 0
