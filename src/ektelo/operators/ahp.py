"""AHP's clustering (Zhang, Chen, Xu, Meng & Xie, "Towards accurate histogram
publication under differential privacy", SDM 2014) — a Public operator.

AHP is a plan, not a private operator (issue #35): its only private step is
a noisy identity measurement, y = x + Laplace(1/ε₁) on every cell (the
kernel's Vector Laplace on `Identity`, ε₁-DP); everything after reads only y
and public numbers, so it is post-processing and lives here, outside the
kernel. `ahp_clusters(y, eps, ...)` runs AHP's steps 2–4 on the noisy counts:

2. threshold: y_i ← 0 where y_i ≤ θ = η·ln(n)/ε₁ (small noisy counts are
   mostly noise; AHP's pruning step);
3. sort y ascending (stable);
4. greedy clustering of the sorted values: cell j joins the current cluster
   [i, j−1] unless err([i, j]) ≥ err([i, j−1]) + err*(j), where
   err(C) = Σ_{c∈C} (y_c − ȳ_C)² + 2/(ε₂²·|C|) is the squared error of
   publishing C's mean (approximation error plus the variance of Laplace(1/ε₂)
   noise on C's total spread over |C| cells) and err*(j) is the least
   per-cell error a cluster starting at j could reach, min over l of
   (y_j − ȳ_[j,l])² + 2/(ε₂²·(l−j+1)²), scanned with AHP's early stop (stop
   once the deviation term grows by at least what the noise term can still
   shrink).  ε₂ = ε₁·(1 − ratio)/ratio is the budget the plan keeps to measure
   the groups.
The partition's groups are the clusters (runs of the sorted order).

Published defaults (DPBench's AHP, `ratio = 0.85, eta = 0.35`, confirmed in
dpcomp_core's ahp engine; εktelo inherits them).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..matrix import Partition

__all__ = ["ahp_clusters", "best_start_errors", "check_options"]


def check_options(*, ratio: float = 0.85, eta: float = 0.35) -> dict[str, float]:
    """AHP's options, validated (ratio in (0, 1), eta ≥ 0)."""
    ratio = _positive(ratio, "ratio")
    if ratio >= 1:
        raise ValueError(f"ratio must lie in (0, 1), got {ratio!r}")
    return {"ratio": ratio, "eta": _nonnegative(eta, "eta")}


def ahp_clusters(
    noisy: Any,
    eps: float,
    *,
    shape: tuple[int, ...] | None = None,
    ratio: float = 0.85,
    eta: float = 0.35,
) -> Partition:
    """AHP's steps 2–4 on noisy identity counts `noisy` (measured at `eps`).

    eps: the ε₁ the identity measurement spent (sets the threshold
    eta·ln(n)/eps).  ratio: the plan's published split (0.85), used only to
    price a group's measurement noise with ε₂ = eps·(1 − ratio)/ratio.
    shape: the partition's shape (default: flat).  Returns a Partition.
    """
    values = np.array(noisy, dtype=np.float64, copy=True).reshape(-1)
    if values.size == 0:
        raise ValueError("the noisy counts must have at least one cell")
    if not np.all(np.isfinite(values)):
        raise ValueError("the noisy counts must be finite")
    eps = _positive(eps, "eps")
    options = check_options(ratio=ratio, eta=eta)
    ratio, eta = options["ratio"], options["eta"]
    n = values.size
    values[values <= eta * math.log(n) / eps] = 0.0
    order = np.argsort(values, kind="stable")
    eps2 = eps * (1 - ratio) / ratio
    starts = _greedy_clusters(values[order], 2.0 / eps2**2)
    run = np.zeros(n, dtype=np.int64)
    run[starts[1:]] = 1
    groups = np.empty(n, dtype=np.int64)
    groups[order] = np.cumsum(run)
    return Partition(groups, (n,) if shape is None else tuple(shape))


def _positive(value: Any, name: str) -> float:
    v = _real(value, name)
    if v <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return v


def _nonnegative(value: Any, name: str) -> float:
    v = _real(value, name)
    if v < 0:
        raise ValueError(f"{name} must be a finite non-negative number, got {value!r}")
    return v


def _real(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


def best_start_errors(y: np.ndarray, var: float) -> np.ndarray:
    """Step 4's err*(j) for every j: min over l ≥ j of (y_j − mean(y[j..l]))² +
    var/(l−j+1)², scanning l upward and stopping early as AHP does (vectorised over j).

    While l stays in j's run of equal values the deviation term is 0 and the
    noise term falls, so the scan never stops there: it starts at the run's end.
    """
    n = y.size
    prefix = np.concatenate([[0.0], np.cumsum(y)])
    change = np.flatnonzero(np.diff(y) != 0)  # last index of each run but the final one
    run_end = np.concatenate([change, [n - 1]])[np.searchsorted(change, np.arange(n))]
    length = run_end - np.arange(n) + 1  # scan position per j (the run's end)
    last_dev = np.zeros(n)
    last_noise = var / length.astype(np.float64) ** 2
    out = last_noise.copy()
    floor = var / (n - np.arange(n)).astype(np.float64) ** 2  # the least noise term left
    active = np.flatnonzero(run_end < n - 1)
    width = 32
    while active.size:
        lengths = length[active, None] + np.arange(1, width + 1)[None, :]
        ends = active[:, None] + lengths - 1  # l for each active j
        valid = ends < n
        safe = np.minimum(ends, n - 1)
        mean = (prefix[safe + 1] - prefix[active, None]) / lengths
        dev = (y[active, None] - mean) ** 2
        noise = var / lengths.astype(np.float64) ** 2
        prev_dev = np.concatenate([last_dev[active, None], dev[:, :-1]], axis=1)
        prev_noise = np.concatenate([last_noise[active, None], noise[:, :-1]], axis=1)
        stop = (dev - prev_dev >= prev_noise - floor[active, None]) | ~valid
        first = np.where(stop.any(axis=1), stop.argmax(axis=1), width)  # first stop
        upto = np.arange(width)[None, :] < first[:, None]
        cand = np.where(upto, dev + noise, np.inf).min(axis=1)
        out[active] = np.minimum(out[active], cand)
        going = first == width
        last_dev[active[going]] = dev[going, -1]
        last_noise[active[going]] = noise[going, -1]
        length[active[going]] += width
        active = active[going]
        width = max(32, min(n, (1 << 17) // max(1, active.size)))
    return out


def _greedy_clusters(y: np.ndarray, var: float) -> np.ndarray:
    """Start positions of AHP's greedy clusters of the sorted values y."""
    n = y.size
    best_start = best_start_errors(y, var)
    p1 = np.concatenate([[0.0], np.cumsum(y)]).tolist()
    p2 = np.concatenate([[0.0], np.cumsum(y * y)]).tolist()

    def err(i: int, j: int) -> float:  # cluster y[i..j] inclusive
        length = j - i + 1
        s = p1[j + 1] - p1[i]
        return float((p2[j + 1] - p2[i]) - s * s / length + var / length)

    starts, i = [0], 0
    last = err(0, 0)
    star = best_start.tolist()
    for j in range(1, n):
        now = err(i, j)
        if now >= last + star[j]:
            starts.append(j)
            i, last = j, err(j, j)
        else:
            last = now
    return np.array(starts, dtype=np.int64)
