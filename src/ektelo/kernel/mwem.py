"""MWEM's private query selection (Hardt, Ligett & McSherry, "A simple and
practical algorithm for differentially private data release", NeurIPS 2012)
— Private→Public.  (εktelo's augmented variant, §9.1, adds public ranges to
the query chosen here: `operators.selection.augmented_row`, outside the kernel.)

The argument — what this code must do for the kernel to be private, and why it
does — is the proof note `proofs/mwem.md`, checked against this file's version
(tests/kernel/test_proof_notes.py fails when the file changes after it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..matrix import EMatrix
from .evaluate import evaluate

__all__ = ["cell_clamp", "worst_approx"]

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
