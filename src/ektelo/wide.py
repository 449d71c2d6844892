"""The session's graphical-model path for wide tables (issue #25's front door;
public layer): the model plans the session and `ektelo run`/`ektelo synth`
reach (`MODELS`: what budget each spends and what workload it takes),
fitting one over a session's protected table with the session's budget in
the plan's unit, and reading tidy marginal answers off the fitted model.

Marginals of a wide table are answered without its full vector: MST
(McKenna, Miklau & Sheldon, JPC 2021) or AIM (McKenna et al., PVLDB 2022)
measure 1-way marginals and a few chosen cliques on projections, PrivBayes+PGM
and HDMM+PGM (McKenna, Sheldon & Miklau, ICML 2019 §6; `plans.pgm`) a
private Bayesian network's or HDMM's marginal strategy's marginals;
Private-PGM (`ektelo.inference.graphical_model`) fits a model over them,
and every requested marginal is read off the model — post-processing, no
further budget.  Reading off a model has no closed-form error, so such rows
carry `ci_method` "none: graphical-model estimate" and no interval.  This is
the εktelo paper's future work (§10: "inference operators that do not
require full vectorization").
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _validate as check
from .workload import spec as questions

__all__ = ["DIRECT_MARGINALS", "LARGE_VECTOR", "MODELS", "MODEL_PLANS", "ModelPlan",
           "aim_cliques", "check_request", "fit", "marginal_answers", "marginal_order",
           "model_ci_method", "question_cliques", "spend", "stderr_lines", "why"]

# A question over more cells than this is "wide": `vectorize` warns, and
# marginals are answered without the full vector (`ektelo.planner.choose`).
LARGE_VECTOR = 10**6
# The plan name of marginals measured one by one (each marginal's own vector).
DIRECT_MARGINALS = "marginals_direct"


@dataclass(frozen=True)
class ModelPlan:
    """What a model plan needs from the session.

    `units`: the budgets it spends — "rho" (ρ-zCDP, Gaussian noise: the
    session opened with delta= or rho=) and/or "epsilon" (pure ε-DP, Laplace
    noise and the exponential mechanism: epsilon= alone). Each plan's own
    signature and checks decide this (mst/aim: `check_rho_budget`;
    privbayes_pgm: `check_eps`; hdmm_pgm: `check_budget` with its
    `mechanism=`). `workload`: what the question's marginals are to the plan —
    "none" (MST models all low-order marginals), "marginals" (the workload
    it measures or selects for: AIM, HDMM's strategy) or "attributes"
    (PrivBayes is not workload-aware: the tuples only name the attributes
    modelled). `what`: what it measures, for the answers' `why` line."""

    name: str
    units: tuple[str, ...]
    workload: str
    what: str


# The plans that return a graphical model (input: a table), by name.
MODELS: dict[str, ModelPlan] = {m.name: m for m in (
    ModelPlan("mst", ("rho",), "none", "1-way marginals and a private spanning tree of pairs"),
    ModelPlan("aim", ("rho",), "marginals", "cliques chosen round by round for the workload"),
    ModelPlan("privbayes_pgm", ("epsilon",), "attributes",
              "PrivBayes's private network and its clique marginals"),
    ModelPlan("hdmm_pgm", ("epsilon", "rho"), "marginals",
              "the marginals of HDMM's strategy for the workload"),
)}
MODEL_PLANS = tuple(MODELS)

_UNIT_NAME = {"rho": "ρ (zCDP, Gaussian noise)", "epsilon": "pure ε (Laplace noise)"}


def _model(plan: str) -> ModelPlan:
    if plan not in MODELS:
        raise ValueError(f"a model plan is one of {', '.join(MODEL_PLANS)}, got {plan!r}")
    return MODELS[plan]


def spend(plan: str, budget: Mapping[str, float]) -> tuple[str, float]:
    """The unit and amount `plan` spends of a session's request (`budget`:
    {"epsilon": ε} on a pure-ε session; {"rho": ρ, ...} on a zCDP one),
    or a clear error naming what the plan needs and how to get it — raised
    before anything is spent."""
    m = _model(plan)
    unit = "rho" if "rho" in budget else "epsilon"
    if unit in m.units:
        return unit, float(budget[unit])
    others = [n for n, o in MODELS.items() if unit in o.units]
    if unit == "epsilon":
        raise ValueError(
            f"{plan} spends {_UNIT_NAME['rho']}: open the session with epsilon= and delta= "
            f"(or rho=); on the command line, --delta. This pure-ε session can use "
            f"{' or '.join(others)}")
    raise ValueError(
        f"{plan} spends {_UNIT_NAME['epsilon']}: open the session with epsilon= and no "
        f"delta; on the command line, leave out --delta. This zCDP session can use "
        f"{', '.join(others)}")


def why(plan: str, budget: Mapping[str, float]) -> str:
    """The one-line reason of a named model plan (checked against the budget)."""
    unit, _ = spend(plan, budget)
    noise = "Gaussian noise at ρ" if unit == "rho" else "Laplace noise at ε"
    return (f"named: {MODELS[plan].what}, {noise}, Private-PGM; answers read off its fitted "
            "graphical model")


def model_ci_method(plan: str) -> str:
    """The `ci_method` of answers read off `plan`'s fitted model."""
    return f"none: graphical-model estimate ({plan}; no closed-form interval)"


def marginal_order(q: questions.ParsedWorkload) -> int:
    """K of a K-way marginals question (the size of its largest marginal)."""
    names = [str(n) for n in q.rows["marginal"].unique()]
    return max((0 if n == "total" else len(n.split("×")) for n in names), default=0)


def check_request(domain: Any, plan: str, attrs: Any, workload: Any,
                  params: dict[str, Any] | None) -> tuple[list[str], list[tuple[str, ...]] | None]:
    """A model request checked from public information before anything is
    spent: the attributes modelled (all when `attrs` is None) and the
    plan's workload cliques (None: the plan's default, every pair)."""
    m = _model(plan)
    names = list(domain.names) if attrs is None else [
        str(a) for a in questions.histogram(domain, attrs).attributes]
    if workload is not None and m.workload == "none":
        takers = [n for n, o in MODELS.items() if o.workload != "none"]
        raise ValueError(f"workload= is for {', '.join(takers)} ({plan} models all low-order "
                         "marginals)")
    cliques = None if workload is None else [tuple(str(a) for a in c) for c in workload]
    check_params(plan, params)
    return names, cliques


#: the most synthetic rows one request draws (a public cap: 10⁷ rows of a
#: wide table are a few GB; more is refused before anything is spent)
MAX_SYNTHETIC_ROWS = 10_000_000
#: the most inference iterations a model request asks for (post-processing,
#: but it runs after the charge: bounded so that it ends)
MAX_MODEL_ITERATIONS = 1_000_000


def _bounded_int(most: int) -> Callable[[Any, str], None]:
    def run(value: Any, name: str) -> None:
        if check.integer(value, name, minimum=1) > most:
            raise ValueError(f"{name} must be at most {most}, got {value!r}")
    return run


def _optional(inner: Callable[[Any, str], Any]) -> Callable[[Any, str], None]:
    def run(value: Any, name: str) -> None:
        if value is not None:
            inner(value, name)
    return run


def _flag(value: Any, name: str) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")


def _callable(value: Any, name: str) -> None:
    if not callable(value):
        raise TypeError(f"{name} must be None or a function of one line, got "
                        f"{type(value).__name__}")


# Every model plan's parameter values, checked before anything is spent
# (issue #36: a bad value used to be refused by the plan after its first charge).
_PARAM_VALUES: dict[str, Callable[[Any, str], Any]] = {
    "maxiter": _bounded_int(MAX_MODEL_ITERATIONS),
    "rounds": _optional(_bounded_int(10_000)),
    "compress": _flag,
    "split_merged": _flag,  # MST: merged values split by their noisy counts (#43)
    "progress": _optional(_callable),
    "max_model_size": _optional(check.positive),
    "degree": _bounded_int(64),
    "beta": check.probability,
    "theta": check.positive,
    "rows": _optional(check.positive),
    "discrepancy": _optional(check.positive),  # AIM's opt-in regularised refit (#43)
}


def check_params(plan: str, params: Mapping[str, Any] | None,
                  unit: str | None = None) -> None:
    """Unknown parameters, and a `mechanism=` that is not the session's (the
    budget's unit decides it), refused before anything is spent."""
    from . import plans

    known = plans.get(plan).parameters
    unknown = set(params or {}) - set(known)
    if unknown:
        raise TypeError(f"plan {plan!r} has no parameter(s) {sorted(unknown)}; its "
                        f"parameters are {sorted(known)}")
    for key, value in (params or {}).items():
        check_value = _PARAM_VALUES.get(key)
        if check_value is not None:
            check_value(value, key)
    if unit is not None and "mechanism" in (params or {}):
        wanted = "gaussian" if unit == "rho" else "laplace"
        given = (params or {})["mechanism"]
        if given != wanted:
            raise ValueError(
                f"{plan}'s mechanism follows the session's budget: 'gaussian' under zCDP "
                f"(delta= or rho=), 'laplace' under pure ε; this session spends "
                f"{'ρ' if unit == 'rho' else 'ε'}, so mechanism={given!r} is refused "
                "(nothing was spent)")


def fit(table: Any, attrs: list[str] | None, plan: str, budget: Mapping[str, float], *,
        cliques: list[tuple[str, ...]] | None = None, params: dict[str, Any] | None = None,
        say: Callable[[str], Any] | None = None, rows: float | None = None) -> Any:
    """`plan` (one of `MODEL_PLANS`) run with the whole of the session's
    request `budget` in the plan's unit (`spend`: ρ for mst/aim, ε for
    privbayes_pgm, either for hdmm_pgm — Gaussian noise at ρ, Laplace at ε)
    on `table` projected onto `attrs` (all its attributes when None): the
    fitted GraphicalModel. `cliques` is the workload of the plans that take
    one (default every pair); `say` gets AIM's per-round progress lines;
    `rows`, a row count declared public, is privbayes_pgm's `rows=` (its
    θ-usefulness cap then spends nothing on a noisy count). Everything is
    checked before the plan spends anything."""
    from . import plans
    from .budget import ZCDP, PureDP
    from .inference.graphical_model import ModelTooLarge

    unit, amount = spend(plan, budget)
    params = dict(params or {})
    check_params(plan, params, unit)
    sub = table if attrs is None or list(attrs) == list(table.domain.names) else \
        table.select(list(attrs))
    if plan == "aim":
        if say is not None and "progress" not in params:
            params["progress"] = say
        return plans.run("aim", sub, cliques, amount, **params)
    if plan == "hdmm_pgm":
        params["mechanism"] = "gaussian" if unit == "rho" else "laplace"
        typed: ZCDP | PureDP = ZCDP(amount) if unit == "rho" else PureDP(amount)
        try:
            return plans.run("hdmm_pgm", sub, cliques, typed, **params)
        except ModelTooLarge as exc:  # raised before it measures anything: say what to do
            others = " or ".join(n for n, m in MODELS.items()
                                 if unit in m.units and n != "hdmm_pgm")
            raise ModelTooLarge(
                f"{exc}. HDMM+PGM's model holds every marginal of the workload together (all "
                f"pairs of many attributes make one clique of the whole table): ask for the "
                f"marginals of fewer attributes, or use {others}") from None
    if plan == "privbayes_pgm":
        if rows is not None and "rows" not in params:
            params["rows"] = max(1, round(float(rows)))
        return plans.run("privbayes_pgm", sub, cliques, amount, **params)
    return plans.run("mst", sub, None, amount, **params)


def question_cliques(q: questions.ParsedWorkload, plan: str) -> list[tuple[str, ...]] | None:
    """A question's workload for model plan `plan`: a marginals question's
    marginals (`aim_cliques`); for another kind of question, HDMM+PGM
    measures the joint of its attributes (the model then answers any linear
    query on them), the other plans their default (None)."""
    if q.kind == "marginals":
        return aim_cliques(q)
    if plan == "hdmm_pgm":
        return [tuple(str(a) for a in q.attributes)]
    return None


def aim_cliques(q: questions.ParsedWorkload) -> list[tuple[str, ...]]:
    """AIM's workload for a marginals question: the attribute tuples of its
    marginals (the total, if asked, is in every model)."""
    names = [str(n) for n in q.rows["marginal"].unique() if n != "total"]
    out = [tuple(n.split("×")) for n in names]
    return out or list(itertools.combinations(q.attributes, 1))


def marginal_answers(q: questions.ParsedWorkload, model: Any) -> np.ndarray:
    """Every row of marginals question `q` read off `model`, in the rows'
    order (each marginal's cells in C order of its attributes, as the
    question's tidy rows list them)."""
    if q.kind != "marginals":
        raise ValueError(f"a graphical model answers marginals questions here, not {q.kind!r}")
    out = []
    for name in q.rows["marginal"].unique():
        if name == "total":
            out.append(np.array([float(model.total)]))
        else:
            out.append(np.asarray(model.marginal(str(name).split("×")),
                                  dtype=np.float64).reshape(-1))
    return np.concatenate(out)


def stderr_lines(line: str) -> None:
    """Progress lines (AIM's rounds) on stderr."""
    print(line, file=sys.stderr, flush=True)
