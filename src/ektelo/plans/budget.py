"""Budget splits for plans: shares that sum to ε exactly."""

from __future__ import annotations

import math
from fractions import Fraction

__all__ = ["check_eps", "split"]


def check_eps(eps: float, name: str = "eps") -> float:
    """Validate a privacy budget: a finite positive real number."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"{name} must be a positive real number, got {type(eps).__name__}")
    value = float(eps)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {eps!r}")
    return value


def split(eps: float, *fractions: float) -> list[float]:
    """Split `eps` into shares proportional to `fractions` (which must sum to 1).

    The last share is whatever remains, so the shares add up to `eps` (the
    kernel's ledger is exact up to its documented slack of 1e-9·ε).
    """
    total = check_eps(eps)
    if not fractions:
        raise ValueError("split needs at least one fraction")
    if any(not (isinstance(f, (int, float)) and 0 < f <= 1) for f in fractions):
        raise ValueError(f"fractions must lie in (0, 1], got {fractions}")
    if abs(math.fsum(fractions) - 1.0) > 1e-9:
        raise ValueError(f"fractions must sum to 1, got {math.fsum(fractions)}")
    shares = [total * f for f in fractions[:-1]]
    last = float(Fraction(total) - sum(Fraction(s) for s in shares))
    if last <= 0:
        raise ValueError("budget split leaves nothing for the last share")
    return [*shares, last]
