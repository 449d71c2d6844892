"""AHP's private partition (Zhang, Chen, Xu, Meng & Xie, "Towards accurate
histogram publication under differential privacy", SDM 2014) — Private→Public.

`ahp_partition(x, eps, source)` groups the cells of the private count vector x
(any shape, flattened in C order) into clusters of similar counts; the groups
need not be contiguous.  It is εktelo's operator PA (§6, Plan 8).

The algorithm (AHP's steps 2–5):
1. noisy identity: y = x + Laplace(1/eps) on every cell, with the whole eps;
2. threshold: y_i ← 0 where y_i ≤ θ = η·ln(n)/eps (small noisy counts are
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
   shrink).  ε₂ = eps·(1 − ratio)/ratio is the budget the plan keeps to measure
   the groups.
The partition's groups are the clusters (runs of the sorted order).

Published defaults (DPBench's AHP, `ratio = 0.85, eta = 0.35`, confirmed in
dpcomp_core's ahp engine; εktelo inherits them): the plan gives ratio·ε to this
operator and (1 − ratio)·ε to the group totals; η = 0.35 sets the threshold.

Privacy.  Step 1 is the Laplace mechanism on the identity query: one cell
changes by ±1 between neighbouring count vectors (L1 distance 1), so the
sensitivity is 1 and `source.laplace(x, sensitivity=1, epsilon=eps,
integral=True)` (exact discrete Laplace, noise.py) is eps-DP.  Steps 2–4 read
only y and public numbers (n, eps, η, ratio): post-processing.  The output is
only the partition.  x is read as counts (rint, clamped into ±2⁵²: 1-Lipschitz
per cell, no-ops on the declared counts the kernel hands in); a c-stable
integral transform is charged c·eps by the kernel (group privacy).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..matrix import Partition

# `best_start_errors` (step 4's err*) is a module name so that tests check it
# against a plain scan; `ektelo.kernel.__all__` does not export it.
__all__ = ["ahp_partition", "best_start_errors", "check_options"]


def check_options(*, ratio: float = 0.85, eta: float = 0.35) -> dict[str, float]:
    """The options, validated from public values only (the kernel calls this
    before charging; `ahp_partition` then cannot raise on them)."""
    ratio = _positive(ratio, "ratio")
    if ratio >= 1:
        raise ValueError(f"ratio must lie in (0, 1), got {ratio!r}")
    return {"ratio": ratio, "eta": _nonnegative(eta, "eta")}


def ahp_partition(
    x: np.ndarray,
    eps: float,
    source: Any,
    *,
    ratio: float = 0.85,
    eta: float = 0.35,
) -> Partition:
    """AHP's private clustering of x's cells into groups of similar counts; eps-DP.

    eps: this operator's budget (the plan's ratio·ε), all spent on one noisy
    identity measurement.  ratio: the plan's published split (0.85), used only
    to price a group's measurement noise with ε₂ = eps·(1 − ratio)/ratio.
    eta: threshold factor (0.35); noisy counts ≤ eta·ln(n)/eps become 0.
    Returns a Partition of x's shape.
    """
    arr = np.asarray(x)
    if arr.size == 0:
        raise ValueError("x must have at least one cell")
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"x must hold numbers, got dtype {arr.dtype}")
    eps = _positive(eps, "eps")
    options = check_options(ratio=ratio, eta=eta)
    ratio, eta = options["ratio"], options["eta"]
    # x is read as counts: rint and a clamp into ±2^52 (no-ops on counts; the
    # kernel hands in declared counts), so nothing here depends on checking values
    limit = 2.0**52
    with np.errstate(all="ignore"):
        flat = np.clip(np.rint(np.nan_to_num(arr.astype(np.float64).reshape(-1))), -limit, limit)
    n = flat.size
    noisy = np.array(source.laplace(flat, sensitivity=1.0, epsilon=eps, integral=True).values)
    noisy[noisy <= eta * math.log(n) / eps] = 0.0
    order = np.argsort(noisy, kind="stable")
    eps2 = eps * (1 - ratio) / ratio
    starts = _greedy_clusters(noisy[order], 2.0 / eps2**2)
    run = np.zeros(n, dtype=np.int64)
    run[starts[1:]] = 1
    groups = np.empty(n, dtype=np.int64)
    groups[order] = np.cumsum(run)
    return Partition(groups, arr.shape)


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
