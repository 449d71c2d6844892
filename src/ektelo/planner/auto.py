"""The planner's choice (issue #29): `auto_plan` (public facts only, free)
and `plan_auto` (Tier 0, then Tier 1 with a little honest budget), which is
also the registered plan "auto".

`plan_auto(x, W, eps, kind=...)`:

* Tier 0 (free): every data-independent candidate ranked by its expected
  error (`planner.tier0`: exact where the matrix mechanism's closed form is
  reachable, else a data-free Monte-Carlo estimate; Li et al., VLDB J. 2015).
* Tier 1: when the decision table (given, else the shipped `table.json`) has
  a tree for the workload's group, the noisy features are bought with
  share·ε (`measure_features`, one Laplace measurement through the kernel)
  and the tree is walked (Pythia, Kotsogiannis et al., SIGMOD 2017): a leaf
  "tier0" runs Tier 0's best, a named leaf runs that plan, with (1 − share)·ε.
  No tree (marginals, 3-D, zCDP, no table): no features, all of ε (or ρ)
  to Tier 0's best.
* Declared rows: when the custodian declares the row count public
  (`rows=`) and the table has a `declared` tree for the group, that tree is
  walked on public facts alone (`Features.from_declared_rows`): nothing is
  spent on features and the plan runs with the whole ε. `auto_plan` does the
  same for free, so `--plan auto --public-rows N` and the session's
  `preview` know the plan before anything is spent.

Either way exactly ε (or ρ) is spent in all, every argument is checked
before the first charge, and the `Choice` records the ranking, the
features, the path taken and the plan.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _validate as check
from ..budget import ZCDP, PureDP
from ..plans.budget import split
from ..plans.registry import get, register
from ..plans.registry import run as run_plan
from ..port import ProtectedVector
from .evidence import grid_ratio
from .features import KINDS, Features, check_kind, measure_features
from .rules import DATA_DEPENDENT_MIN_CELLS, SIMPLEST_FIRST, Candidate, Choice, choose_plan
from .table import TIER0, DecisionTable, default_table, group_of, walk_node
from .tier0 import rank

__all__ = ["auto", "auto_plan", "infer_kind", "plan_auto", "tier0_best"]

# Plans over a 2-D domain only (their strategies or grids are 2-D).
_NEEDS_2D = frozenset({"quadtree", "uniform_grid", "adaptive_grid"})
# Candidates whose expected error is within this factor of the best count as
# ties, broken by the order of `candidates` (simplest first).
_TIE = 1.01


def infer_kind(W: Any, shape: tuple[int, ...]) -> str:
    """The workload kind from W's public structure: a `Prefix` is "prefix",
    `RangeQueries` "ranges", an `Identity` "identity"; anything else needs
    kind= (a clear error)."""
    from ..matrix import Identity, Prefix, RangeQueries

    if isinstance(W, Prefix):
        return "prefix"
    if isinstance(W, RangeQueries) and not W.transposed:
        return "ranges"
    if isinstance(W, Identity):
        return "identity"
    raise ValueError(f"cannot tell the workload's kind from a {type(W).__name__} over "
                     f"{shape}: pass kind= (one of {', '.join(KINDS)})")


def tier0_best(ranked: tuple[Candidate, ...]) -> Candidate | None:
    """Tier 0's choice: the lowest expected RMSE, ties (within 1%) to the
    simplest candidate; None when nothing is priced."""
    priced = [c for c in ranked if c.rmse is not None]
    if not priced:
        return None
    best = min(c.rmse for c in priced if c.rmse is not None)
    order = {name: i for i, name in enumerate(SIMPLEST_FIRST)}
    ties = [c for c in priced if c.rmse is not None and c.rmse <= best * _TIE]
    return min(ties, key=lambda c: (order.get(c.plan, len(order)), c.rmse or 0.0))


def _describe(c: Candidate, unit: str) -> str:
    how = "Monte-Carlo" if c.method == "monte-carlo" else "exact"
    return f"RMSE {c.rmse:.3g} per query ({how}, at this {unit})"


def _tier0_why(ranked: tuple[Candidate, ...], best: Candidate, unit: str) -> str:
    why = f"lowest expected error: {_describe(best, unit)}"
    runner = [c for c in ranked if c.plan != best.plan and c.rmse is not None]
    if runner and runner[0].rmse is not None:
        why += f"; next {runner[0].plan} RMSE {runner[0].rmse:.3g}"
    return why


def auto_plan(
    W: Any,
    kind: str,
    shape: Any,
    *,
    eps: float | None = None,
    rho: float | None = None,
    mc_seeds: int | None = None,
    rows: float | None = None,
    table: DecisionTable | None = None,
) -> Choice:
    """The plan for workload `W` (an EMatrix over a domain of `shape`, a
    workload spec's `kind`) at `eps` (Laplace) or `rho` (Gaussian, zCDP):
    public facts only, so it costs no budget (`--plan auto` and
    `Session(..., plan="auto")`).

    With `rows` (a row count the custodian declared public) under ε, and a
    `declared` tree for the workload's group in `table` (default the
    shipped one), that tree chooses (module docstring); otherwise:

    Every data-independent candidate is ranked by Tier 0 (exact or
    Monte-Carlo expected error) and the best taken; a data-dependent plan is
    kept instead only where `choose_plan`'s rules pick one, the domain is
    large (`DATA_DEPENDENT_MIN_CELLS`, 256: DPBench finds DAWA's partition
    paying off on large domains, while on a handful of cells it only spends
    budget on a partition) *and* its error measured on the planner's
    training grid is below the best data-independent plan's there, at the
    nearest ε and at every scale (at the declared `rows`' scale when given):
    it has no closed-form error to compare (`planner.evidence`). Under zCDP
    only the Gaussian-capable plans compete."""
    shape = tuple(int(s) for s in shape)
    n = math.prod(shape)
    if rows is not None:
        rows = check.positive(rows, "rows")
    table = _check_table(table)
    if rows is not None and eps is not None:
        declared = _declared_tree(table, kind, shape)
        if declared is not None:
            ranked = rank(W, kind, shape, eps=eps, mc_seeds=mc_seeds)
            name, why, listed, public, path = _declared_choice(declared, kind, shape, eps,
                                                               rows, ranked)
            return Choice(name, why, listed, features=public, path=path, plan_budget=eps)
    rule, rule_why = choose_plan(kind, shape)
    dependent = get(rule).data_dependent
    ranked = rank(W, kind, shape, eps=eps, rho=rho, mc_seeds=mc_seeds)
    found = list(ranked)
    unit = "ρ" if rho is not None else "ε"
    best = tier0_best(ranked)
    if dependent:
        note = "data-dependent: no closed-form error"
        keep = False
        if rho is not None:
            note = "data-dependent plans use the Laplace mechanism; zCDP runs Gaussian plans"
        elif n < DATA_DEPENDENT_MIN_CELLS:
            note += f"; domain of {n} cells < {DATA_DEPENDENT_MIN_CELLS}: partition not worth it"
        elif best is None:
            keep = True  # nothing to compare with
        else:
            assert eps is not None
            evidence = grid_ratio(rule, group_of(len(shape), kind), eps, rows)
            if evidence is None:
                note += "; no training-grid evidence for this shape: Tier 0's best instead"
            elif evidence[0] >= 1:
                note += (f"; on the training grid {evidence[0]:.2f}× the best data-independent "
                         f"plan's error ({evidence[1]}): Tier 0's best instead")
            else:
                keep = True
                note += (f"; on the training grid at most {evidence[0]:.2f}× the best "
                         f"data-independent plan's error ({evidence[1]})")
        found.append(Candidate(rule, True, None, note))
        if keep:
            return Choice(rule, f"{rule_why} (domain of {n:,} cells; {note.split('; ', 1)[-1]})",
                          tuple(found))
    if best is None:
        if dependent and rho is None:
            return Choice(rule, f"{rule_why} (no expected error for any candidate)",
                          tuple(found))
        return Choice("identity", "no expected error for any candidate: the identity "
                      "strategy", tuple(found))
    return Choice(best.plan, _tier0_why(ranked, best, unit), tuple(found))


def _check_share(share: Any) -> float:
    if isinstance(share, bool) or not isinstance(share, int | float | np.floating):
        raise TypeError(f"share must be a number strictly between 0 and 1, got {share!r}")
    if not 0 < float(share) < 1:
        raise ValueError(f"share must lie strictly between 0 and 1, got {share!r}")
    return float(share)


def plan_auto(
    x: ProtectedVector,
    W: Any,
    eps: float | None,
    *,
    kind: str | None = None,
    share: float | None = None,
    table: DecisionTable | None = None,
    rho: float | None = None,
    mc_seeds: int | None = None,
    rows: float | None = None,
) -> tuple[Any, Choice]:
    """Choose a plan for workload W on x and run it: (x̂, Choice). Spends
    exactly `eps` (Laplace; features included) or `rho` (zCDP: Gaussian
    Tier 0 only, no features). `kind` is the workload's kind (inferred from
    W's structure when None, where possible); `share` the features' share of
    ε (default the table's); `table` a `DecisionTable` (default the shipped
    one, None if untrained); `rows` a row count the custodian declared public
    (the table's `declared` tree then chooses, nothing is spent on features).
    Everything is checked before the first charge."""
    from ..plans.common import check_workload

    if not isinstance(x, ProtectedVector):
        raise TypeError(f"plan_auto needs a ProtectedVector, got {type(x).__name__}")
    check_workload(x, W)
    shape = tuple(int(s) for s in x.shape)
    kind = infer_kind(W, shape) if kind is None else check_kind(kind)
    if (eps is None) == (rho is None):
        raise TypeError("give exactly one of eps (Laplace) and rho= (Gaussian, zCDP)")
    budget = check.positive(rho if rho is not None else eps, "rho" if rho is not None else "eps")
    if share is not None:
        share = _check_share(share)
    if mc_seeds is not None and (isinstance(mc_seeds, bool) or not isinstance(mc_seeds, int)
                                 or not 2 <= mc_seeds <= 1000):
        raise ValueError(f"mc_seeds must be an integer in 2..1000, got {mc_seeds!r}")
    if rows is not None:
        rows = check.positive(rows, "rows")
    shipped = table is None
    table = _check_table(table)
    _check_remaining(x, budget, rho is not None)
    group = group_of(len(shape), kind)
    declared = None if (rows is None or rho is not None) else \
        _declared_tree(table, kind, shape)
    if declared is not None:
        assert rows is not None
        _check_leaves(declared, x, W, shape)
        ranked = rank(W, kind, shape, eps=budget, mc_seeds=mc_seeds)
        name, why, listed, public, path = _declared_choice(declared, kind, shape, budget,
                                                           rows, ranked)
        estimate = run_plan(name, x, W, budget)  # the only charge: the whole ε
        return estimate, Choice(name, why, listed, features=public, path=path,
                                plan_budget=budget)
    tree = None if (table is None or group is None or rho is not None) else \
        table.trees.get(group)
    if tree is None:
        return _run_tier0(x, W, kind, shape, budget, rho is not None, mc_seeds,
                          _no_tree_reason(table, shipped, group, rho is not None, kind, shape))
    assert table is not None and group is not None
    _check_leaves(tree, x, W, shape)
    f = share if share is not None else table.share
    eps_features, eps_plan = split(budget, f, 1 - f)
    ranked = rank(W, kind, shape, eps=eps_plan, mc_seeds=mc_seeds)
    features = measure_features(x, eps_features, kind=kind, plan_eps=eps_plan)  # the charge
    walked = table.walk(group, features)
    assert walked is not None
    leaf, path = walked
    name, why, found = _resolve_leaf(
        leaf, path, f"decision table ({group}; features at ε={eps_features:.3g})", ranked)
    estimate = run_plan(name, x, W, eps_plan)
    choice = Choice(name, why, found, features=features, path=path,
                    feature_budget=eps_features, plan_budget=eps_plan)
    return estimate, choice


def _check_table(table: Any) -> DecisionTable | None:
    """`table` checked, or the shipped table when None (None if untrained)."""
    if table is None:
        return default_table()
    if not isinstance(table, DecisionTable):
        raise TypeError(f"table must be a DecisionTable (DecisionTable.load(path)), "
                        f"got {type(table).__name__}")
    return table


def _declared_tree(table: DecisionTable | None, kind: str,
                   shape: tuple[int, ...]) -> dict[str, Any] | None:
    group = group_of(len(shape), kind)
    if table is None or group is None:
        return None
    return table.declared.get(group)


def _declared_choice(tree: dict[str, Any], kind: str, shape: tuple[int, ...], eps: float,
                     rows: float, ranked: tuple[Candidate, ...]) -> tuple[
                         str, str, tuple[Candidate, ...], Features, tuple[str, ...]]:
    """Walk a declared-rows tree on public facts: (plan, why, candidates,
    the public features, the path)."""
    group = group_of(len(shape), kind)
    features = Features.from_declared_rows(dims=len(shape), cells=math.prod(shape), kind=kind,
                                           eps=eps, rows=rows)
    leaf, path = walk_node(tree, features)
    name, why, found = _resolve_leaf(
        leaf, path, f"decision table ({group}; {rows:,.0f} rows declared public, nothing "
        "spent on features)", ranked)
    return name, why, found, features, path


def _resolve_leaf(leaf: str, path: tuple[str, ...], head: str,
                  ranked: tuple[Candidate, ...]) -> tuple[str, str, tuple[Candidate, ...]]:
    """A tree's leaf as (plan, why, candidates): "tier0" is Tier 0's best (the
    identity when nothing is priced); a named data-dependent plan joins the
    candidates, marked as chosen by the table."""
    steps = " → ".join(path) if path else "a single leaf"
    why = f"{head}: {steps} → {leaf}"
    found = list(ranked)
    if leaf != TIER0:
        if get(leaf).data_dependent:
            found.append(Candidate(leaf, True, None, "data-dependent: chosen by the decision "
                                   "table (no closed-form error)"))
        return leaf, why, tuple(found)
    best = tier0_best(ranked)
    if best is None:
        return "identity", why + ": nothing priced, the identity strategy", tuple(found)
    return best.plan, why + f": Tier 0's {_tier0_why(ranked, best, 'ε')}", tuple(found)


def _check_remaining(x: ProtectedVector, budget: float, gaussian: bool) -> None:
    """Refuse, before the features are charged, a request the remaining
    budget cannot cover: the features and the plan are charged one after
    the other, and a refusal of the second would waste the first. On a zCDP
    kernel ε is charged as ρ = ε²/2 (the pieces' ρ sum to at most that)."""
    from ..kernel import BudgetExceeded

    b = x.budget
    if gaussian and b.unit == "epsilon":
        raise ValueError("rho= spends ρ (zCDP, Gaussian noise), but this data was protected "
                         "with a pure ε-DP budget: give eps instead (nothing was spent)")
    cost = budget if (gaussian or b.unit == "epsilon") else budget**2 / 2
    if cost > b.remaining * (1 + 1e-9):
        unit = "ρ" if b.unit == "rho" else "ε"
        raise BudgetExceeded(f"auto needs {unit}={cost:g} but {unit}={b.remaining:g} of "
                             f"{b.total:g} remains; nothing was spent")


def _leaves(node: dict[str, Any]) -> set[str]:
    if "plan" in node:
        return {node["plan"]}
    return _leaves(node["below"]) | _leaves(node["above"])


def _check_leaves(tree: dict[str, Any], x: ProtectedVector, W: Any,
                  shape: tuple[int, ...]) -> None:
    """Every plan the tree may choose can run on x (public facts), checked
    before the features are charged: a plan failing after that charge
    would waste it. Data-dependent plans' partitions need counts (x
    declared integral); 2-D plans need a 2-D domain; a data-independent
    plan's strategy must build for W."""
    from ..plans import data_independent

    for leaf in sorted(_leaves(tree) - {TIER0}):
        if leaf in _NEEDS_2D and len(shape) != 2:
            raise ValueError(f"the decision table may choose {leaf}, which needs a 2-D domain; "
                             f"this one is {len(shape)}-D (nothing was spent)")
        if get(leaf).data_dependent:
            if not x.integral:
                raise ValueError(f"the decision table may choose {leaf}, a data-dependent plan "
                                 "that needs a vector of counts; this vector is not declared "
                                 "integral (protect it with integral=True; nothing was spent)")
        else:
            try:
                data_independent.strategy_for(leaf, shape, W)
            except Exception as exc:
                raise ValueError(f"the decision table may choose {leaf}, whose strategy does not "
                                 f"build for this workload: {exc} (nothing was spent)") from exc


def _no_tree_reason(table: DecisionTable | None, shipped: bool, group: str | None,
                    gaussian: bool, kind: str, shape: tuple[int, ...]) -> str:
    if gaussian:
        return "Tier 0 only (zCDP: no features; Gaussian candidates)"
    if table is None and shipped:
        return "Tier 0 only (no decision table shipped yet: table.json absent)"
    if group is None:
        return f"Tier 0 only (no decision-table group for {kind} over {len(shape)}-D)"
    return f"Tier 0 only (the decision table has no tree for {group})"


def _run_tier0(x: ProtectedVector, W: Any, kind: str, shape: tuple[int, ...], budget: float,
               gaussian: bool, mc_seeds: int | None, reason: str) -> tuple[Any, Choice]:
    """No tree: all of the budget to Tier 0's best (Gaussian under zCDP)."""
    if gaussian:
        ranked = rank(W, kind, shape, rho=budget, mc_seeds=mc_seeds)
    else:
        ranked = rank(W, kind, shape, eps=budget, mc_seeds=mc_seeds)
    best = tier0_best(ranked)
    unit = "ρ" if gaussian else "ε"
    name = "identity" if best is None else best.plan
    why = reason + ": " + (_tier0_why(ranked, best, unit) if best is not None
                           else "nothing priced, the identity strategy")
    if gaussian:
        estimate = run_plan(name, x, W, budget, mechanism="gaussian")
    else:
        estimate = run_plan(name, x, W, budget)
    return estimate, Choice(name, why, ranked, plan_budget=budget)


@register(
    "auto",
    citation="Kotsogiannis et al., SIGMOD 2017 (Pythia); Hay et al., SIGMOD 2016 (DPBench)",
    summary="the planner: Tier 0 expected errors, Tier 1 noisy features and a decision table",
    data_dependent=True,
)
def auto(
    x: ProtectedVector,
    workload: Any,
    budget: float | PureDP | ZCDP,
    *,
    kind: str | None = None,
    share: float | None = None,
    table: DecisionTable | None = None,
    mc_seeds: int | None = None,
    rows: float | None = None,
) -> np.ndarray:
    """The planner as a plan (`plan_auto`): spends exactly the budget in all —
    an ε (a number or PureDP: share·ε on features when the decision table
    has a tree for the workload, the rest on the chosen plan) or a ρ
    (`ZCDP(ρ)`: Tier 0's best Gaussian plan, no features). `mc_seeds` sets
    the seed count of Tier 0's Monte-Carlo estimates (default
    `tier0.MC_SEEDS`, fixed: the choice does not depend on the machine's
    load). `rows`: a row count the custodian declared public (the decision
    table's declared tree then chooses, all of ε goes to the plan). Returns x̂."""
    if isinstance(budget, ZCDP):
        estimate, _ = plan_auto(x, workload, None, kind=kind, share=share, table=table,
                                rho=budget.rho, mc_seeds=mc_seeds, rows=rows)
    else:
        eps = budget.epsilon if isinstance(budget, PureDP) else budget
        estimate, _ = plan_auto(x, workload, eps, kind=kind, share=share, table=table,
                                mc_seeds=mc_seeds, rows=rows)
    return np.asarray(estimate, dtype=np.float64).reshape(-1)
