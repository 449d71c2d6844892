"""The planner's fixed rules (`choose_plan`): a plan from public
facts only — the kind of workload and the domain's shape — never the data,
so choosing costs no budget.

The rules are a small fixed table, read from the accuracy results of the
paper's experiments and DPBench (Hay et al., SIGMOD 2016): in order,

1. marginal workloads → `hdmm` (its strategy is optimised for marginals);
2. 1-D range or prefix workloads → `dawa` up to 2¹⁶ cells (data-adaptive,
   among the most accurate there), else `hb` (scales to large domains);
3. prefix workloads over several attributes (a CDF broken down by the
   others) → `hb_striped_kron` (HB on the CDF attribute ⊗ Identity);
4. 2-D range workloads → `dawa` up to 2¹⁸ cells (via the Hilbert order);
5. other range workloads → `hb`;
6. histograms (any other workload) → `dawa` up to 2¹⁶ cells, else
   `identity`.

The records every planner answer is made of (`Candidate`, `Choice`) and
the data-independent candidates of a workload (`candidates`) live here too;
`planner.tier0` prices them and `planner.auto` chooses (`auto_plan`,
`plan_auto`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .features import Features

__all__ = [
    "DATA_DEPENDENT_MIN_CELLS",
    "RANGE_KINDS",
    "SIMPLEST_FIRST",
    "Candidate",
    "Choice",
    "candidates",
    "choose_plan",
]

# Workload kinds (`ektelo.workload.spec`) that are sets of range queries.
RANGE_KINDS = ("prefix", "ranges", "random-ranges", "file")


def choose_plan(kind: str, shape: Sequence[int]) -> tuple[str, str]:
    """The plan for a workload of `kind` (a workload spec's kind: "prefix",
    "ranges", "marginals", …) over a domain of `shape`, and why (one line).
    Public facts only: see the module for the rules."""
    shape = tuple(int(s) for s in shape)
    n = math.prod(shape)
    if kind == "marginals":
        return "hdmm", "marginal workloads are answered best by HDMM's optimised strategy"
    if kind == "aggregates":
        return "hdmm", ("sums and counts: HDMM's strategy, the value factor in its row space "
                        "(a centred sum beside a weighted count)")
    if len(shape) == 1 and kind in RANGE_KINDS:
        if n <= 2**16:
            return "dawa", ("DAWA adapts to the data and is among the most accurate for 1-D "
                            "range/prefix workloads in DPBench")
        return "hb", "HB is accurate for 1-D ranges and scales to large domains"
    if kind == "prefix":
        return "hb_striped_kron", ("a CDF broken down by other attributes: HB on the CDF "
                                   "attribute ⊗ identity on the others (§9.2)")
    if len(shape) == 2 and kind in ("ranges", "random-ranges", "file") and n <= 2**18:
        return "dawa", "DAWA (via the Hilbert order) is strong on 2-D range workloads"
    if kind in ("ranges", "random-ranges", "file"):
        return "hb", "a hierarchy of range queries answers range workloads well"
    if n <= 2**16:
        return "dawa", "for a histogram DAWA's partition exploits uniform regions"
    return "identity", "for a large histogram the identity strategy is a robust default"


# Below this many cells a data-dependent plan's partition is not worth its
# share of the budget (DPBench's small domains favour data-independent plans).
DATA_DEPENDENT_MIN_CELLS = 256
# A candidate's error needing a dense pseudo-inverse above this many cells is
# not priced (O(n³) and the strategies' dense Grams: the planner answers in
# about a second up to here).
_MAX_DENSE = 256
# The data-independent candidates, simplest first: the order `candidates`
# lists them in, and how near-ties are broken.
SIMPLEST_FIRST = ("identity", "hb", "h2", "privelet", "greedy_h", "quadtree",
                  "hb_striped_kron", "hdmm")


@dataclass(frozen=True)
class Candidate:
    """One plan the planner considered: its expected root-mean-squared error
    per query (None: no closed form), a note (why not, or the method), and
    how the error was found: "exact", "monte-carlo" (Tier 0's data-free
    estimate), or None (not priced)."""

    plan: str
    data_dependent: bool
    rmse: float | None
    note: str
    method: str | None = None
    strategy: Any = field(default=None, repr=False, compare=False)  # Tier 0's, when priced


@dataclass(frozen=True)
class Choice:
    """The planner's answer: the plan, why (one line, with the decision
    table's path when Tier 1 chose), and every candidate, ranked. For
    `plan_auto` also the noisy features (None: not measured), the table's
    path, the ε (or ρ) spent on the features and the budget the plan ran
    with."""

    plan: str
    why: str
    candidates: tuple[Candidate, ...]
    features: Features | None = None
    path: tuple[str, ...] = ()
    feature_budget: float = 0.0
    plan_budget: float | None = None
    # `choose`'s: the plan's strategy (data-independent plans; built once per
    # question) and whether it runs with the Gaussian mechanism (a ρ budget)
    strategy: Any = field(default=None, repr=False, compare=False)
    gaussian: bool = False


def candidates(kind: str, shape: Sequence[int]) -> list[str]:
    """The data-independent plans that apply to a workload of `kind` over
    `shape` (public facts), simplest first."""
    d = len(shape)
    names = ["identity"]
    if d == 1:
        names += ["hb", "h2", "privelet", "greedy_h"]
    elif d == 2:
        names += ["hb", "quadtree"]
    if d >= 2 and kind == "prefix":
        names.append("hb_striped_kron")
    if max(shape) <= _MAX_DENSE:  # HDMM optimises per attribute: minutes at ~10³ values
        names.append("hdmm")
    return names
