"""The one place that decides which plan answers a question (issue #35).

`choose(question, budget, plan=..., rows=...)` → `Choice`, from public facts
only (the question's kind, workload and domain shape; the budget's unit; a
row count the custodian declared public), so choosing costs nothing. In order:

1. marginals of a table too large for one vector (`wide.LARGE_VECTOR`
   cells) under zCDP with plan "auto": a graphical-model plan (MST for 2-way,
   AIM beyond) when its measurements get more budget than direct ones would
   (`_wide_marginals`: the budget-per-marginal comparison), else
2. such marginals (or plan "marginals_direct"): each marginal measured on
   its own vector (`wide.DIRECT_MARGINALS`);
3. a named model plan (`wide.MODEL_PLANS`): checked against the budget's unit;
4. any other named plan: checked against the registry;
5. "auto" on a domain too large to price: the fixed rules (`choose_plan`);
6. "auto" otherwise: `auto_plan` (Tier 0's exact or Monte-Carlo error, the
   declared-rows tree, the data-dependent rule).

The `Choice` carries the chosen plan's strategy when it has one (built once
per question, or taken from Tier 0's pricing) and whether it runs with the
Gaussian mechanism, so nothing downstream asks `plans.strategy_for` again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .. import wide
from ..plans import data_independent
from ..plans.registry import get
from ..workload import spec as questions
from .auto import auto_plan
from .rules import Choice, choose_plan

__all__ = ["choose"]


def choose(
    q: questions.ParsedWorkload,
    budget: Mapping[str, float],
    *,
    plan: str = "auto",
    rows: float | None = None,
) -> Choice:
    """The plan for question `q` at `budget` ({"epsilon": ε} for Laplace, or
    {"rho": ρ, ...} on a zCDP session), named (`plan`) or chosen ("auto");
    `rows`: a row count declared public (None: none, or the question is
    filtered). A bad plan name is a KeyError naming the plans; a model plan
    on the wrong unit a ValueError — before anything is spent."""
    rho = budget.get("rho")
    large = math.prod(q.shape) > wide.LARGE_VECTOR
    if q.kind == "marginals" and plan == "auto" and large and rho is not None:
        name, reason = _wide_marginals(q, rho)
        if name is not None:
            return Choice(name, reason, ())
    if q.kind == "marginals" and (plan == wide.DIRECT_MARGINALS or (plan == "auto" and large)):
        why = ("each marginal measured on its own vector (the full table would have "
               f"{math.prod(q.shape):,} cells); exact error")
        if rho is None:
            why += ("; pure ε: Laplace noise (the graphical-model path, MST/AIM, needs a "
                    "zCDP budget: delta=; plan='privbayes_pgm' or 'hdmm_pgm' fits a model "
                    "under pure ε)")
        return Choice(wide.DIRECT_MARGINALS, why, (), gaussian=rho is not None)
    if plan in wide.MODEL_PLANS:  # refused here, before spending, on the wrong budget
        return Choice(plan, wide.why(plan, budget), ())
    if plan != "auto":
        get(plan)  # a clear error naming the plans
        strategy, gaussian = _strategy(plan, q, rho)
        why = "named" if gaussian or rho is None else (
            "named; runs with the Laplace mechanism at ε = √(2ρ) (same ρ)")
        return Choice(plan, why, (), strategy=strategy, gaussian=gaussian)
    if large:
        name, why = choose_plan(q.kind, q.shape)
        strategy, gaussian = _strategy(name, q, rho)
        return Choice(name, why + " (domain too large for closed-form comparison)", (),
                      strategy=strategy, gaussian=gaussian)
    choice = auto_plan(q.matrix, q.kind, q.shape,
                       eps=None if rho is not None else budget["epsilon"], rho=rho, rows=rows)
    priced = next((c.strategy for c in choice.candidates
                   if c.plan == choice.plan and c.strategy is not None), None)
    if priced is None:
        strategy, gaussian = _strategy(choice.plan, q, rho)
    else:  # Tier 0 priced the strategy the plan runs (with the mechanism, #43): built once
        strategy, gaussian = priced, rho is not None and "mechanism" in get(choice.plan).parameters
    return replace(choice, strategy=strategy, gaussian=gaussian)


def _strategy(name: str, q: questions.ParsedWorkload, rho: float | None) -> tuple[Any, bool]:
    """The plan's strategy (None: not a fixed one) and whether it runs with the
    Gaussian mechanism: a ρ budget does when the plan takes `mechanism=` and
    has a fixed strategy (#24) — then the strategy is the one chosen for the
    Gaussian's error (HDMM's ‖A‖₂, #43); else Laplace at ε = √(2ρ)."""
    takes = rho is not None and "mechanism" in get(name).parameters
    strategy = data_independent.strategy_for(
        name, q.shape, q.matrix, mechanism="gaussian" if takes else "laplace")
    return strategy, takes and strategy is not None


def _wide_marginals(q: questions.ParsedWorkload, rho: float) -> tuple[str | None, str]:
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
    k, r = wide.marginal_order(q), len(q.attributes)
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
