"""Typed privacy budgets and the conversions between them (public values).

Two kinds of guarantee, each a frozen value:

* `PureDP(epsilon)` — ε-differential privacy (Dwork et al. 2006); the paper's
  kernel and every Laplace/exponential-mechanism operator.
* `ZCDP(rho)` — ρ-zero-concentrated DP (Bun & Steinke, TCC 2016), the
  natural unit of the Gaussian mechanism. Composition adds ρ; a c-stable
  transformation costs c²·ρ (group privacy); ε-DP implies (ε²/2)-zCDP, so a
  zCDP ledger can also charge pure-DP requests.

A data holder who states the guarantee as (ε, δ)-DP gets a zCDP budget
`ZCDP.from_approx(epsilon, delta)`: the largest ρ whose tight conversion
(Canonne, Kamath & Steinke, NeurIPS 2020, Prop. 12; the optimisation over
the Rényi order α of Asoodeh et al. 2021) gives at most δ at that ε,
rounded down — so the stated (ε, δ) holds. `ZCDP.epsilon(delta)` is the
same conversion the other way, for reports.

Reports say what was guaranteed: `describe(budget)` is the one line for a
kernel's budget (`ektelo.BudgetReport`: total, spent, remaining, unit, delta) —
the spent ε, or the spent ρ and the (ε, δ)-DP it implies (CKS 2020 Prop. 12,
rounded up); `str()` of a `PureDP` or `ZCDP` says the same of a budget.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_HALF_EVEN, Decimal
from typing import Literal, Protocol

__all__ = [
    "ZCDP",
    "BudgetReport",
    "PureDP",
    "delta_of_rho",
    "describe",
    "epsilon_of_rho",
    "rho_of_epsilon_delta",
]

# δ at which a ρ with no stated δ is reported as (ε, δ)-DP (any δ > 0 holds)
REPORT_DELTA = 1e-9


def _positive(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return v


def _delta(value: object) -> float:
    d = _positive(value, "delta")
    if d >= 1:
        raise ValueError(f"delta must be below 1, got {value!r}")
    return d


@dataclass(frozen=True)
class PureDP:
    """An ε-DP budget."""

    epsilon: float
    unit: Literal["epsilon"] = "epsilon"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _positive(self.epsilon, "epsilon"))

    @property
    def total(self) -> float:
        return self.epsilon

    def __str__(self) -> str:
        return f"{self.epsilon:.6g}-DP (pure)"


@dataclass(frozen=True)
class ZCDP:
    """A ρ-zCDP budget; `delta` is the δ the data holder stated, if any (reports
    then give the ε it implies)."""

    rho: float
    delta: float | None = None
    unit: Literal["rho"] = "rho"

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", _positive(self.rho, "rho"))
        if self.delta is not None:
            object.__setattr__(self, "delta", _delta(self.delta))

    @property
    def total(self) -> float:
        return self.rho

    def __str__(self) -> str:
        delta = REPORT_DELTA if self.delta is None else self.delta
        return f"{self.rho:.6g}-zCDP, i.e. {_approx(self.rho, delta, self.delta is None)}"

    @classmethod
    def from_approx(cls, epsilon: float, delta: float) -> ZCDP:
        """The zCDP budget that guarantees (ε, δ)-DP (rounded down)."""
        return cls(rho_of_epsilon_delta(epsilon, delta), delta=_delta(delta))

    def epsilon(self, delta: float | None = None, *, rho: float | None = None) -> float:
        """The ε of the (ε, δ)-DP implied by `rho` (default: the whole budget)."""
        d = self.delta if delta is None else _delta(delta)
        if d is None:
            raise ValueError("no delta: pass delta= to convert ρ to (ε, δ)")
        return epsilon_of_rho(self.rho if rho is None else rho, d)


def delta_of_rho(rho: float, epsilon: float) -> float:
    """The δ of (ε, δ)-DP implied by ρ-zCDP at ε (tight; CKS 2020 Prop. 12):

        δ = inf_{α>1} exp((α−1)(αρ−ε)) / (α−1) · (1 − 1/α)^α,

    minimised over α by bisection on the derivative of the log, which is
    increasing in α: (2α−1)ρ − ε + log(1 − 1/α).
    """
    rho, epsilon = _positive(rho, "rho"), float(epsilon)
    lo, hi = 1.0 + 1e-12, max(2.0, (epsilon + 1.0) / (2.0 * rho) + 2.0)
    for _ in range(200):
        alpha = 0.5 * (lo + hi)
        if (2 * alpha - 1) * rho - epsilon + math.log1p(-1.0 / alpha) < 0:
            lo = alpha
        else:
            hi = alpha
    alpha = hi
    log_delta = (alpha - 1) * (alpha * rho - epsilon) + alpha * math.log1p(-1.0 / alpha)
    log_delta -= math.log(alpha - 1.0)
    return min(1.0, math.exp(min(log_delta, 0.0)))


def rho_of_epsilon_delta(epsilon: float, delta: float) -> float:
    """The largest ρ (to ~1e-12 relative, rounded down) with δ(ρ, ε) ≤ δ."""
    epsilon, delta = _positive(epsilon, "epsilon"), _delta(delta)
    lo, hi = 0.0, epsilon + 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid > 0 and delta_of_rho(mid, epsilon) <= delta:
            lo = mid
        else:
            hi = mid
    if lo <= 0:
        raise ValueError(f"no zCDP budget gives ({epsilon}, {delta})-DP")
    return lo * (1 - 1e-12)  # rounded down: the stated (ε, δ) holds


def epsilon_of_rho(rho: float, delta: float) -> float:
    """The smallest ε (rounded up) with δ(ρ, ε) ≤ δ: what ρ-zCDP guarantees."""
    rho, delta = _positive(rho, "rho"), _delta(delta)
    lo, hi = 0.0, rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)) + 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if delta_of_rho(rho, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi * (1 + 1e-12)


class BudgetReport(Protocol):
    """What `describe` reads: a kernel's `BudgetReport` (`ektelo.kernel.ledger`)."""

    @property
    def total(self) -> float: ...
    @property
    def spent(self) -> float: ...
    @property
    def remaining(self) -> float: ...
    @property
    def unit(self) -> str: ...
    @property
    def delta(self) -> float | None: ...


def _printed(value: float, rounding: str, digits: int = 6) -> float:
    exponent = Decimal(repr(value)).adjusted() - digits + 1
    return float(Decimal(repr(value)).quantize(Decimal(1).scaleb(exponent), rounding=rounding))


def _approx(rho: float, delta: float, assumed: bool) -> str:
    """'(ε, δ)-DP' implied by ρ-zCDP, ε to 6 significant digits: the nearest
    such number if it still gives δ (tight conversion, `delta_of_rho`), else
    the next one up — so the printed guarantee holds. ρ = 0 is (0, 0)-DP."""
    eps = 0.0
    if rho > 0:
        eps = _printed(epsilon_of_rho(rho, delta), ROUND_HALF_EVEN)
        if delta_of_rho(rho, eps) > delta:
            eps = _printed(epsilon_of_rho(rho, delta), ROUND_CEILING)
    note = "; no δ stated: any δ > 0 holds with its own ε" if assumed else ""
    return f"({eps:.6g}, {delta:g})-DP{note}"


def describe(budget: BudgetReport) -> str:
    """One line saying what a kernel's spending guarantees so far.

    Pure ε: "spent ε = 0.5 of 1 (remaining 0.5): 0.5-DP". zCDP: "spent ρ =
    0.0075 of 0.015 (remaining 0.0075): 0.0075-zCDP, i.e. (0.72, 1e-09)-DP"
    — the (ε, δ) at the δ the budget was stated with (`protect(...,
    epsilon=, delta=)`), else at δ = 1e-9, said so.
    """
    head = (
        f"spent {'ε' if budget.unit == 'epsilon' else 'ρ'} = {budget.spent:.6g} of "
        f"{budget.total:.6g} (remaining {budget.remaining:.6g})"
    )
    unit = getattr(budget, "privacy_unit", None)
    per = "" if unit is None else f" per {unit}"
    if budget.unit == "epsilon":
        return f"{head}: {budget.spent:.6g}-DP{per}"
    delta = REPORT_DELTA if budget.delta is None else budget.delta
    guarantee = _approx(budget.spent, delta, budget.delta is None)
    keys = getattr(budget, "key_delta", None)
    if keys is not None:  # open columns' keys released (issue #39): their δ adds
        guarantee += f", plus δ ≤ {keys:g} for keys of open columns"
    return f"{head}: {budget.spent:.6g}-zCDP, i.e. {guarantee}{per}"
