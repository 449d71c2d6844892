"""The session's graphical-model path for wide tables (issue #25's front door;
public layer): fitting MST or AIM over a session's protected table and
reading tidy marginal answers off the fitted model.

Marginals of a wide table are answered without its full vector: MST
(McKenna, Miklau & Sheldon, JPC 2021) or AIM (McKenna et al., PVLDB 2022)
measure 1-way marginals and a few chosen cliques on projections, Private-PGM
(`ektelo.inference.graphical_model`; McKenna, Sheldon & Miklau, ICML 2019)
fits a model over them, and every requested marginal is read off the model —
post-processing, no further budget.  Reading off a model has no closed-form
error, so such rows carry `ci_method` "none: graphical-model estimate" and
no interval.  This is
the εktelo paper's future work (§10: "inference operators that do not
require full vectorization").
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from .workload import spec as questions

__all__ = ["MODEL_PLANS", "aim_cliques", "check_request", "choose", "fit", "marginal_answers",
           "marginal_order", "model_ci_method", "stderr_lines"]

# The plans that return a graphical model (input: a table; budget: ρ).
MODEL_PLANS = ("mst", "aim")


def model_ci_method(plan: str) -> str:
    """The `ci_method` of answers read off `plan`'s fitted model."""
    return f"none: graphical-model estimate ({plan}; no closed-form interval)"


def marginal_order(q: questions.ParsedWorkload) -> int:
    """K of a K-way marginals question (the size of its largest marginal)."""
    names = [str(n) for n in q.rows["marginal"].unique()]
    return max((0 if n == "total" else len(n.split("×")) for n in names), default=0)


def choose(q: questions.ParsedWorkload, rho: float) -> tuple[str | None, str]:
    """The plan for a marginals question too wide for one vector, under zCDP:
    a model plan, or None for the direct measurements (each marginal on its
    own vector at ρ/K, exact Gaussian intervals), and the one-line reason.

    The rule compares the budget each marginal gets: direct measurement
    gives every one of the K marginals ρ/K; MST measures r − 1 tree pairs at
    ρ/(3(r − 1)) each, AIM its cliques at about 0.9ρ/(16r) each (r
    attributes). When a direct marginal gets at least as much as the
    model's measurements it is answered with no more noise and no model bias
    (and an exact interval), so direct wins; otherwise the model, which
    reads the many marginals off a few well-measured ones, errs less."""
    K = int(q.rows["marginal"].nunique())
    k, r = marginal_order(q), len(q.attributes)
    sigma = (K / (2 * rho)) ** 0.5
    direct = f"{K} marginals each measured directly at ρ/{K} (Gaussian σ={sigma:.3g} per cell)"
    if k >= 2 and r >= 2:
        plan, share = ("mst", 3 * (r - 1)) if k == 2 else ("aim", 16 * r / 0.9)
        if share < K:
            what = ("a private spanning tree of pairs" if plan == "mst"
                    else "cliques chosen for the workload")
            return plan, (f"{plan} graphical model (1-way marginals and {what}, Private-PGM; "
                          f"no full vector): {direct} would each get less budget than "
                          f"{plan}'s ρ/{share:.3g} measurements")
    return None, direct + "; no model plan would measure with more budget per marginal"


def check_request(domain: Any, plan: str, attrs: Any, workload: Any,
                  params: dict[str, Any] | None) -> tuple[list[str], list[tuple[str, ...]] | None]:
    """A model request checked from public information before anything is
    spent: the attributes modelled (all when `attrs` is None) and AIM's
    workload cliques (None: every pair)."""
    from . import plans

    if plan not in MODEL_PLANS:
        raise ValueError(f"a model plan is one of {', '.join(MODEL_PLANS)}, got {plan!r}")
    names = list(domain.names) if attrs is None else [
        str(a) for a in questions.histogram(domain, attrs).attributes]
    if workload is not None and plan != "aim":
        raise ValueError("workload= is AIM's (MST models all low-order marginals)")
    cliques = None if workload is None else [tuple(str(a) for a in c) for c in workload]
    known = plans.get(plan).parameters
    unknown = set(params or {}) - set(known)
    if unknown:
        raise TypeError(f"plan {plan!r} has no parameter(s) {sorted(unknown)}; its "
                        f"parameters are {sorted(known)}")
    return names, cliques


def fit(table: Any, attrs: list[str] | None, plan: str, rho: float, *,
        cliques: list[tuple[str, ...]] | None = None, params: dict[str, Any] | None = None,
        say: Callable[[str], Any] | None = None) -> Any:
    """`plan` (mst or aim) run with the whole ρ on `table` projected onto
    `attrs` (all its attributes when None): the fitted GraphicalModel.
    `cliques` is AIM's workload (default every pair); `say` gets AIM's
    per-round progress lines."""
    from . import plans

    if plan not in MODEL_PLANS:
        raise ValueError(f"a model plan is one of {', '.join(MODEL_PLANS)}, got {plan!r}")
    params = dict(params or {})
    sub = table if attrs is None or list(attrs) == list(table.domain.names) else \
        table.select(list(attrs))
    if plan == "aim":
        if say is not None and "progress" not in params:
            params["progress"] = say
        return plans.run("aim", sub, cliques, rho, **params)
    return plans.run("mst", sub, None, rho, **params)


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
