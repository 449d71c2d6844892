"""Budgets of plans: the checks of a plan's budget argument, the choice of
noise mechanism, and splits whose shares sum to ε exactly.

A plan's third argument is its budget. Most plans draw Laplace noise or use
the exponential mechanism and spend ε (a number, or `ektelo.budget.PureDP`).
The data-independent plans with a `mechanism=` choice spend the budget of
their mechanism (issue 24): ε for `"laplace"` (pure ε-DP, Dwork et al.
2006), ρ for `"gaussian"` (ρ-zCDP, Bun & Steinke 2016), given as a number or
as the typed `PureDP(epsilon)` / `ZCDP(rho)`; a budget of the other kind is
refused before anything is spent.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Literal, TypeAlias

from .._validate import positive, unit_interval
from ..budget import ZCDP, PureDP

if TYPE_CHECKING:
    from ..port import ProtectedVector

__all__ = ["MECHANISMS", "Mechanism", "PlanBudget", "check_budget", "check_eps", "split"]

Mechanism: TypeAlias = Literal["laplace", "gaussian"]
MECHANISMS: tuple[Mechanism, ...] = ("laplace", "gaussian")
PlanBudget: TypeAlias = float | PureDP | ZCDP


def check_eps(eps: float | PureDP, name: str = "eps") -> float:
    """Validate a pure-DP privacy budget: a finite positive real number (the
    library's one convention, `ektelo._validate.positive`: NumPy scalars
    accepted) or a `PureDP`. A `ZCDP` budget is refused: the plan's noise
    (Laplace, exponential mechanism) is accounted in ε."""
    if isinstance(eps, PureDP):
        return eps.epsilon
    if isinstance(eps, ZCDP):
        raise TypeError(
            f"{name} must be an ε (a number or PureDP): this plan draws Laplace noise or uses "
            f"the exponential mechanism, got ZCDP(rho={eps.rho:g}); a ρ budget is spent by the "
            "plans with mechanism='gaussian' (ektelo.plans.mechanism_plans() lists them)"
        )
    return positive(eps, name)


def check_budget(
    budget: PlanBudget, mechanism: str, x: ProtectedVector | None = None
) -> PureDP | ZCDP:
    """A plan's budget as the typed budget its `mechanism` spends, checked
    before any spending: PureDP(ε) for "laplace" (a number is ε), ZCDP(ρ) for
    "gaussian" (a number is ρ). A budget of the other kind is refused
    (TypeError), and so is "gaussian" on data protected with a pure-ε budget
    (ValueError; the kernel would refuse it too, with less context)."""
    if not isinstance(mechanism, str) or mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be 'laplace' or 'gaussian', got {mechanism!r}")
    if mechanism == "laplace":
        if isinstance(budget, ZCDP):
            raise TypeError(
                f"mechanism='laplace' spends an ε (a number or PureDP), got ZCDP(rho="
                f"{budget.rho:g}); pass mechanism='gaussian' to spend ρ, or ε = √(2ρ) "
                "for Laplace noise with that ρ-zCDP cost"
            )
        return PureDP(check_eps(budget, "budget"))
    if isinstance(budget, PureDP):
        raise TypeError(
            f"mechanism='gaussian' spends a ρ (zCDP: a number or ZCDP), got PureDP(epsilon="
            f"{budget.epsilon:g}); the Gaussian mechanism gives no pure ε-DP. For an (ε, δ) "
            "guarantee, protect the data with epsilon= and delta= and spend (a share of) "
            "the ρ it holds, x.budget.total"
        )
    if not isinstance(budget, ZCDP):
        budget = ZCDP(positive(budget, "budget"))
    if x is not None and x.budget.unit == "epsilon":
        raise ValueError(
            "mechanism='gaussian' spends ρ (zCDP), but this data was protected with a pure "
            "ε-DP budget, which admits Laplace noise only: protect it with rho= (or with "
            "epsilon= and delta=), or use mechanism='laplace'"
        )
    return budget


def split(eps: float, *fractions: float) -> list[float]:
    """Split `eps` into shares proportional to `fractions` (which must sum to 1).

    The last share is whatever remains, so the shares add up to `eps` (the
    kernel's ledger is exact up to its documented slack of 1e-9·ε).
    """
    total = check_eps(eps)
    if not fractions:
        raise ValueError("split needs at least one fraction")
    for f in fractions:
        unit_interval(f, "fractions", include_one=True)
    if abs(math.fsum(fractions) - 1.0) > 1e-9:
        raise ValueError(f"fractions must sum to 1, got {math.fsum(fractions)}")
    shares = [total * f for f in fractions[:-1]]
    last = float(Fraction(total) - sum(Fraction(s) for s in shares))
    if last <= 0:
        raise ValueError("budget split leaves nothing for the last share")
    return [*shares, last]
