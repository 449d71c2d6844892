"""Choosing the contribution bound of a privacy unit privately (issue #37).

`SuggestMaxRows(epsilon=0.05, quantile=0.95)` passed as
`protect(..., privacy_unit="person", max_rows_per_unit=SuggestMaxRows(...))`
(or `--max-rows-per-unit auto:0.05` on the command line) spends `epsilon` of
the per-unit budget on the histogram of rows per unit — a 1-stable vector of
the sealed table of units, measured with the kernel's Laplace mechanism summed
into buckets (1, 2, …, 16 rows, then powers of two) — and takes k as the upper
edge of the first bucket whose noisy cumulative count reaches `quantile` of the
noisy total. Public
post-processing from there on; the raw distribution never leaves the kernel.

The choice's bias, stated with it (`Suggestion`): about 1 − quantile of the
units have more than k rows and lose the rest of them; `rows_dropped` is the
noisy estimate Σ_{c>k} (c − k)·h̃[c] of how many rows that is (from the same
measurement, units with ≥ 1024 rows counted at 1024).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .matrix import Sparse

if TYPE_CHECKING:
    import scipy.sparse as sp
else:  # imported on first use (#41)
    from .matrix.lazy import sparse as sp

__all__ = ["SuggestMaxRows", "Suggestion"]


@dataclass(frozen=True)
class Suggestion:
    """A privately chosen contribution bound and the bias it implies (noisy)."""

    max_rows: int
    quantile: float
    epsilon: float
    rows_dropped: float  # noisy estimate of the rows the bound removes

    def __str__(self) -> str:
        return (f"max_rows_per_unit = {self.max_rows} (the noisy {self.quantile:.0%} quantile "
                f"of rows per unit, ε = {self.epsilon:g}); about {self.rows_dropped:,.0f} rows "
                "are dropped by the bound (a noisy estimate)")  # fmt: skip


@dataclass(frozen=True)
class SuggestMaxRows:
    """Choose max_rows_per_unit privately at protect time (module docstring)."""

    epsilon: float
    quantile: float = 0.95

    def __post_init__(self) -> None:
        eps, q = self.epsilon, self.quantile
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (
            math.isfinite(eps) and eps > 0
        ):
            raise ValueError(f"SuggestMaxRows needs a finite positive epsilon, got {eps!r}")
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q < 1:
            raise ValueError(f"quantile must lie in (0, 1), got {q!r}")

    def choose(self, rows_per_unit: Any) -> Suggestion:
        """k from the protected histogram of rows per unit (a ProtectedVector).

        One Laplace measurement of the histogram summed into buckets — 1, 2,
        …, 16 rows, then (16, 32], (32, 64], … up to the cap — each entry in
        one bucket, so the query's sensitivity is 1; k is the upper edge of the
        first bucket whose noisy cumulative count reaches `quantile` of the
        noisy total (noise left unclipped: zero-mean, so the cumulative counts
        stay unbiased)."""
        size = int(rows_per_unit.size)
        lower, upper = _buckets(size - 1)
        widths = [hi - lo + 1 for lo, hi in zip(lower, upper, strict=True)]
        rows = np.repeat(np.arange(len(lower)), widths)  # bucket of each entry 1..cap
        cols = np.arange(1, size)
        B = Sparse(sp.csr_matrix((np.ones(cols.size), (rows, cols)), shape=(len(lower), size)))
        noisy = rows_per_unit.laplace(B, eps=self.epsilon).answers  # Private→Public
        h = np.asarray(noisy, dtype=np.float64)  # public from here on
        cumulative = np.cumsum(h)
        total = cumulative[-1]
        reached = cumulative >= self.quantile * total if total > 0 else np.zeros(0, bool)
        first = np.flatnonzero(reached)
        bucket = int(first[0]) if len(first) else len(lower) - 1
        k = int(upper[bucket])
        middle = (np.asarray(lower) + np.asarray(upper)) / 2.0
        dropped = float(np.sum(np.maximum(middle - k, 0.0) * np.maximum(h, 0.0)))
        return Suggestion(k, float(self.quantile), float(self.epsilon), dropped)


def _buckets(cap: int) -> tuple[list[int], list[int]]:
    """Rows-per-unit buckets: 1..16 one by one, then powers of two up to `cap`."""
    lower = list(range(1, min(cap, 16) + 1))
    upper = list(lower)
    edge = 16
    while edge < cap:
        lower.append(edge + 1)
        upper.append(min(2 * edge, cap))
        edge *= 2
    return lower, upper
