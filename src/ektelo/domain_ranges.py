"""Numeric ranges for `ektelo domain init`, proposed privately (issue #38):
never the raw minimum or maximum of the private data.

A numeric column's bounds come either from the user (a public range typed on
the command line: a codebook, a legal limit) or from noisy quantiles: the
column is bucketed on a fixed public grid of round numbers — 0 and
±{1, 2, 5}·10^k for k = −3 … 9, values beyond ±10⁹ clamped — its CDF
measured once through the kernel (a `Session`, HB, ε stated per column), and
the bounds are the outer edges of the grid bins holding the noisy 1 % and
99 % quantiles (post-processing of that one noisy CDF; `private_range`). The result
is a function of public edges and noisy counts only, so it is ε-DP per
column (columns compose: the total is ε × the number of columns). The tool
is the data holder's: it reads the file; missing values are dropped before
protection (a 1-stable filter).

Kept apart from `domain_template` (whose labels and integrality are still
read from the data; that is the template note's business) so either can
change on its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["GRID", "LEVELS", "private_range", "private_ranges"]

# The public grid: 0 and ±{1, 2, 5}·10^k, k = −3..9 (round numbers; ~80 bins).
_POSITIVE = [m * 10.0**k for k in range(-3, 10) for m in (1, 2, 5)]
GRID: tuple[float, ...] = tuple([-v for v in reversed(_POSITIVE)] + [0.0] + _POSITIVE)
# The quantiles whose bins' outer edges become the bounds.
LEVELS = (0.01, 0.99)


def private_range(column: pd.Series, epsilon: float, *, seed: int | None = None
                  ) -> tuple[float, float]:
    """(lo, hi) for one numeric column from its noisy CDF on `GRID` at
    `epsilon` (see the module); `seed` is research mode only.

    With F̂ the noisy CDF, σ its standard errors and N̂ = F̂(last): lo is the
    lower edge of the first bin where F̂ exceeds max(q·N̂, 2σ) and hi the
    upper edge of the first bin where N̂ − F̂ falls below it (q = 1 %) — the
    1 % and 99 % quantiles, or further in when the noise exceeds 1 % of the
    rows (a small table at a small ε: more of its tails is then clamped),
    so that noise alone rarely pushes a bound out into the empty grid."""
    from .session import Session

    values = pd.to_numeric(column, errors="coerce").dropna().astype(np.float64)
    table = pd.DataFrame({"v": values.to_numpy()})
    edges = list(GRID)
    session = Session(table, {"v": {"bins": edges}}, epsilon=epsilon, seed=seed,
                      on_invalid="clamp", progress=False, engine="memory")
    got = session.cdf("v", epsilon=epsilon, plan="hb")
    F = got["answer"].to_numpy(float)
    sigma = got["std_error"].to_numpy(float)
    total = F[-1]
    threshold = np.maximum(LEVELS[0] * max(total, 0.0), 2 * sigma)
    above = np.flatnonzero(threshold < F)
    below = np.flatnonzero(total - F < threshold)
    if total <= 0 or above.size == 0 or below.size == 0:  # nothing to go on
        return edges[0], edges[-1]
    low_bin, high_bin = int(above[0]), int(below[0])
    return edges[low_bin], edges[max(high_bin, low_bin) + 1]


def private_ranges(frame: pd.DataFrame, spec: Mapping[str, Any], *,
                   epsilon: float | None = None,
                   public: Mapping[str, tuple[float, float]] | None = None,
                   bins: int = 20, seed: int | None = None
                   ) -> tuple[dict[str, Any], list[str], float]:
    """`spec` (a `domain_template` result) with every numeric column's range
    replaced: by `public[name]` where given, else by `private_range` at
    `epsilon` (None: left as it is, with a note). Integer columns spanning
    at most 1000 values keep width 1; others get about `bins` round bins.
    Returns the new spec, notes, and the ε spent in total."""
    from .domain_template import _plain, _round_width

    public = dict(public or {})
    unknown = sorted(set(public) - set(spec))
    if unknown:
        raise ValueError(f"--range names column(s) not in the template: {unknown}")
    out = dict(spec)
    notes: list[str] = []
    spent = 0.0
    for name, entry in spec.items():
        if not isinstance(entry, Mapping) or "range" not in entry:
            continue
        integral = entry.get("width") == 1 and all(isinstance(v, int) for v in entry["range"])
        if name in public:
            lo, hi = (float(v) for v in public[name])
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ValueError(f"--range {name}: give lo < hi, two finite numbers")
            how = "public range"
        elif epsilon is not None:
            lo, hi = private_range(frame[name], epsilon, seed=seed)
            spent += epsilon
            how = f"noisy CDF's 1%/99% quantiles at ε={epsilon:g}"
        else:
            continue
        if integral and hi - lo + 1 <= 1000:
            lo_i, hi_i = math.floor(lo), math.ceil(hi)
            out[name] = {"range": [lo_i, hi_i], "width": 1}
        else:
            width = _round_width((hi - lo) / bins)
            start = math.floor(lo / width) * width
            out[name] = {"range": [_plain(start), _plain(hi)], "width": _plain(width)}
        notes.append(f"{name}: range {out[name]['range']} from the {how} "
                     "(values outside are clamped on protect with on_invalid='clamp')")
    return out, notes, spent
