"""The planner (issue #29): which plan answers a workload best, from public
facts and, optionally, a little honest budget.

* `decide` — `choose`, the one place that decides which plan answers a
  question (named or "auto"; wide marginals; the strategy, built once);
* `rules` — the fixed rules (`choose_plan`) and the error-aware
  `auto_plan` that `choose` uses;
* `tier0` — Tier 0, free: every data-independent candidate ranked by its
  exact expected error (the matrix mechanism's closed form), or a data-free
  Monte-Carlo estimate where the closed form is out of reach;
* `features` — Tier 1's noisy features, one Laplace measurement through the
  kernel at a declared share of ε (Pythia, Kotsogiannis et al., SIGMOD 2017);
* `table` — the decision table trained offline on DPBench (plain JSON);
* `auto` — `plan_auto`, registered as the plan "auto":
  ``plans.run("auto", x, W, eps, kind=...)`` chooses and runs, spending
  exactly ε (features included).
"""

from __future__ import annotations

from .auto import auto_plan, infer_kind, plan_auto, tier0_best
from .decide import choose
from .explain import PREVIEW_NOTE, error_label, format_choice, ranking_rows
from .features import (
    FEATURE_NAMES,
    KINDS,
    PUBLIC_FEATURES,
    Features,
    coarse_partition,
    measure_features,
)
from .rules import (
    DATA_DEPENDENT_MIN_CELLS,
    RANGE_KINDS,
    Candidate,
    Choice,
    candidates,
    choose_plan,
)
from .table import GROUPS, TIER0, DecisionTable, default_table, group_of
from .tier0 import Price, monte_carlo, price, range_kron_error, rank

__all__ = [
    "DATA_DEPENDENT_MIN_CELLS",
    "FEATURE_NAMES",
    "GROUPS",
    "KINDS",
    "PREVIEW_NOTE",
    "PUBLIC_FEATURES",
    "RANGE_KINDS",
    "TIER0",
    "Candidate",
    "Choice",
    "DecisionTable",
    "Features",
    "Price",
    "auto_plan",
    "candidates",
    "choose",
    "choose_plan",
    "coarse_partition",
    "default_table",
    "error_label",
    "format_choice",
    "group_of",
    "infer_kind",
    "measure_features",
    "monte_carlo",
    "plan_auto",
    "price",
    "range_kron_error",
    "rank",
    "ranking_rows",
    "tier0_best",
]
