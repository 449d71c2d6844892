"""MWEM's private query selection (Hardt, Ligett & McSherry, "A simple and
practical algorithm for differentially private data release", NeurIPS 2012)
and εktelo's augmented variant (§9.1) — Private→Public.

The argument — what this code must do for the kernel to be private, and why it
does — is the proof note `proofs/mwem.md`, checked against this file's version
(tests/kernel/test_proof_notes.py fails when the file changes after it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..matrix import (
    Dense,
    EMatrix,
    RangeQueries,
    VStack,
)
from .evaluate import evaluate

__all__ = ["augmented_worst_approx", "cell_clamp", "worst_approx"]

_ESTIMATE_GRID = 2.0**-10  # S2
_SCORE_CAP = 2.0**42  # S3
_EXACT = 2**52  # S1: bound on every partial sum of W·x


def cell_clamp(n: int, delta: float) -> float:
    """C of S1, or 0 when n·Δ is too large for exact scores (refused up front)."""
    if not (math.isfinite(delta) and delta >= 1):
        return 0.0
    return float(math.floor(_EXACT / (n * delta)))


def worst_approx(
    x: np.ndarray, workload: EMatrix, x_hat: np.ndarray, eps: float, source: Any, *, delta: float
) -> int:
    """Index of the workload row chosen by the exponential mechanism with score
    min(|w_i·x − w_i·x_hat|, 2⁴²) (MWEM's query selection); eps-DP in x.

    The caller (the kernel) has checked, before charging, that `workload` is an
    integer library matrix with max |entry| `delta` ≥ 1, that x is declared
    integral, that `cell_clamp(n, delta)` ≥ 1 and that x_hat is finite.
    """
    n = workload.shape[1]
    bound = cell_clamp(n, delta)
    with np.errstate(all="ignore"):
        v = np.asarray(x, dtype=np.float64).reshape(-1)
        v = np.clip(np.rint(np.nan_to_num(v)), -bound, bound)  # S1
        answers = evaluate(workload, v[:, None])[:, 0]  # exact (S1); the kernel's evaluator
        public = evaluate(workload, np.asarray(x_hat, dtype=np.float64).reshape(-1, 1))[:, 0]
        public = np.rint(public / _ESTIMATE_GRID) * _ESTIMATE_GRID  # S2
        scores = np.fmin(np.abs(answers - public), _SCORE_CAP)  # S3
    return int(source.exponential_mechanism(scores, sensitivity=delta, epsilon=eps))


def augmented_worst_approx(
    x: np.ndarray,
    workload: EMatrix,
    x_hat: np.ndarray,
    eps: float,
    source: Any,
    round_index: int,
    *,
    delta: float,
) -> EMatrix:
    """The worst-approximated query plus, in round k ≥ 1, every dyadic range
    [j·2^(k−1), (j+1)·2^(k−1)) (cut at n) that does not meet its support.

    1-D domains only.  Returns VStack([chosen, dyadic ranges]) (or the chosen
    query alone when no range fits); rows are pairwise disjoint.  Only the
    selection spends eps.
    """
    v = np.asarray(x)
    if v.ndim != 1:
        raise ValueError(f"augmented_worst_approx needs a 1-D x, got shape {v.shape}")
    if isinstance(round_index, bool) or not isinstance(round_index, (int, np.integer)):
        raise TypeError(f"round_index must be an int, got {type(round_index).__name__}")
    if round_index < 1:
        raise ValueError(f"round_index is 1-based, got {round_index}")
    i = worst_approx(x, workload, x_hat, eps, source, delta=delta)
    n = workload.shape[1]
    chosen = _row_matrix(workload, i)
    support = np.cumsum(np.concatenate([[0], (workload.row(i) != 0).astype(np.int64)]))
    length = 1 << min(int(round_index) - 1, 62)
    if length > n:
        return chosen
    lower = np.arange(0, n, length, dtype=np.int64)
    upper = np.minimum(lower + length, n) - 1
    free = support[upper + 1] == support[lower]
    if not free.any():
        return chosen
    return VStack([chosen, RangeQueries(n, lower[free], upper[free])])


def _row_matrix(W: EMatrix, i: int) -> EMatrix:
    """Row i of W as a one-row library matrix (ranges stay ranges)."""
    if type(W) is RangeQueries and not W.transposed:
        return RangeQueries(W.domain_shape, W.lower[i : i + 1], W.upper[i : i + 1])
    row = W.row(i)
    nz = np.flatnonzero(row)
    if nz.size and np.all(row[nz] == 1.0) and nz[-1] - nz[0] + 1 == nz.size:
        return RangeQueries(row.size, nz[:1], nz[-1:])
    return Dense(row.reshape(1, -1))
