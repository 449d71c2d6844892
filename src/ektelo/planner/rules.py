"""Automatic plan choice (`ektelo run --plan auto`): a plan from public
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

`auto_plan` is `--plan auto` and `Session(..., plan="auto")`: error-aware.
For every data-independent candidate it computes the exact expected error
of the workload from the plan's strategy (the matrix mechanism's closed
form, `operators.error.expected_error`; Li et al., VLDB J. 2015) and takes
the smallest; a data-dependent plan is kept only where `choose_plan`'s rules
pick one *and* the domain is large (`DATA_DEPENDENT_MIN_CELLS`, 256: DPBench finds
DAWA's partition paying off on large, sparse domains, while on a handful of
cells it only spends budget on a partition), since its error has no closed
form to compare. Under zCDP (`rho=`) only the Gaussian-capable
data-independent plans compete. A learned planner that weighs more public
features belongs here too: it replaces `auto_plan` behind the same
signature.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DATA_DEPENDENT_MIN_CELLS",
    "RANGE_KINDS",
    "Candidate",
    "Choice",
    "auto_plan",
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
# Candidates whose expected error is within this factor of the best count as
# ties, broken by the order of `candidates` (simplest first).
_TIE = 1.01


@dataclass(frozen=True)
class Candidate:
    """One plan `auto_plan` considered: its expected root-mean-squared error
    per query (None: no closed form), and a note (why not, or the method)."""

    plan: str
    data_dependent: bool
    rmse: float | None
    note: str


@dataclass(frozen=True)
class Choice:
    """`auto_plan`'s answer: the plan, why (one line), and every candidate."""

    plan: str
    why: str
    candidates: tuple[Candidate, ...]


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


def auto_plan(
    W: Any,
    kind: str,
    shape: Sequence[int],
    *,
    eps: float | None = None,
    rho: float | None = None,
) -> Choice:
    """The plan for workload `W` (an EMatrix over a domain of `shape`, a
    workload spec's `kind`) at `eps` (Laplace) or `rho` (Gaussian, zCDP):
    public facts only, so it costs no budget. See the module docstring."""
    from ..operators import error  # lazy: the planner's rules need no NumPy
    from ..plans import data_independent
    from ..plans.registry import get

    strategy_for = data_independent.strategy_for

    shape = tuple(int(s) for s in shape)
    n = math.prod(shape)
    rule, rule_why = choose_plan(kind, shape)
    dependent = get(rule).data_dependent
    if dependent and rho is None and n >= DATA_DEPENDENT_MIN_CELLS:  # the rule wins: no need
        why = f"{rule_why} (domain of {n:,} cells; no closed-form error)"  # to price the others
        skipped = tuple(Candidate(c, False, None, "not priced: a large domain goes to the "
                                  "data-dependent rule") for c in candidates(kind, shape))
        return Choice(rule, why, (*skipped, Candidate(rule, True, None, "data-dependent: no "
                                                      "closed-form error")))
    found: list[Candidate] = []
    for name in candidates(kind, shape):
        # A candidate that fails or warns (a strategy optimiser's numerics) is
        # listed with the reason and left out of the comparison, not fatal.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                A = strategy_for(name, shape, W)
                if A is None:
                    continue
                total = float(error.expected_error(W, A, eps, rho=rho, max_dense=_MAX_DENSE))
                rmse = math.sqrt(total / W.shape[0])
                found.append(Candidate(name, False, rmse, "exact expected error (LS)"))
            except Exception as exc:
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                found.append(Candidate(name, False, None, f"left out: {reason}"))
    if dependent:
        note = "data-dependent: no closed-form error"
        if rho is not None:
            note = "data-dependent plans use the Laplace mechanism; zCDP runs Gaussian plans"
        elif n < DATA_DEPENDENT_MIN_CELLS:
            note += f"; domain of {n} cells < {DATA_DEPENDENT_MIN_CELLS}: partition not worth it"
        found.append(Candidate(rule, True, None, note))
    exact = [c for c in found if c.rmse is not None]
    if rho is not None and len(shape) == 1 and kind in RANGE_KINDS and n > _MAX_DENSE:
        return Choice("hb", f"HB: a 1-D range workload over {n:,} cells, Gaussian noise "
                            f"(errors above {_MAX_DENSE} cells not priced)", tuple(found))
    if not exact:
        if dependent and rho is None:
            return Choice(rule, f"{rule_why} (no closed-form error for any candidate)",
                          tuple(found))
        fallback = "identity"
        return Choice(fallback, "no closed-form error for any candidate: the identity strategy",
                      tuple(found))
    best_rmse = min(c.rmse for c in exact if c.rmse is not None)
    best = next(c for c in exact if c.rmse is not None and c.rmse <= best_rmse * _TIE)
    runner = sorted((c for c in exact if c.plan != best.plan), key=lambda c: c.rmse or 0.0)
    unit = "ρ" if rho is not None else "ε"
    why = f"lowest expected error: ±{best.rmse:.3g} per query (RMSE at this {unit})"
    if runner and runner[0].rmse is not None:
        why += f"; next {runner[0].plan} ±{runner[0].rmse:.3g}"
    return Choice(best.plan, why, tuple(found))
