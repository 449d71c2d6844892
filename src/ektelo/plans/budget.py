"""Budget splits for plans: shares that sum to ε exactly."""

from __future__ import annotations

import math
from fractions import Fraction

from .._validate import positive, unit_interval

__all__ = ["check_eps", "split"]


def check_eps(eps: float, name: str = "eps") -> float:
    """Validate a privacy budget: a finite positive real number (the library's
    one convention, `ektelo._validate.positive`: NumPy scalars accepted)."""
    return positive(eps, name)


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
