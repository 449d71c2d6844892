"""MWEM's private query selection (Hardt, Ligett & McSherry, "A simple and
practical algorithm for differentially private data release", NeurIPS 2012)
and εktelo's augmented variant (§9.1) — Private→Public.

`worst_approx(x, W, x_hat, eps, source)` picks the workload query that the
public estimate x_hat answers worst: the exponential mechanism over W's rows
with score s_i(x) = |w_i·x − w_i·x_hat| (MWEM, line "select q_i using the
exponential mechanism").  `augmented_worst_approx(...)` returns that query plus,
in round k, the H2-style dyadic ranges of length 2^(k−1) disjoint from it
(εktelo §9.1: "in round one, it adds any unit length queries that do not
intersect with the selected query; in round two, length two queries, ...").

Privacy.  Neighbouring vectors differ by d with ‖d‖₁ ≤ 1, so every score
moves by ≤ |w_i·d| ≤ max_ij |w_ij| =: Δ (x_hat is public and fixed).  Δ is
computed from the matrix's structure and is exact or an upper bound, never
below the truth (`max_abs_entry`).  Computed scores get a floating-point
allowance of 2⁻²⁹·Δ·(‖x‖₁ + ‖x_hat‖₁ + 1) on top: each answer (a sum of
≤ 2²² terms, also via prefix sums) is off by ≤ 2⁻³⁰·Δ·‖v‖₁, for x and its
neighbour, and the final subtraction and |·| add ≤ 2⁻⁵²·(score).  The index is then
drawn by `source.exponential_mechanism(s, sensitivity=Δ', epsilon=eps)`
(P(i) ∝ exp(eps·s_i/(2Δ')), floating-point safe, noise.py E1–E4): eps-DP.
The augmented set is a deterministic function of the chosen index and public
values (post-processing); its measurement is charged separately by the plan
(its rows are pairwise disjoint, so a 0/1 workload keeps sensitivity 1).
The workload must be a library matrix (the kernel rebuilds client matrices
before calling: a foreign class could misreport its entries).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..matrix import (
    Dense,
    Diagonal,
    EMatrix,
    Identity,
    Kronecker,
    Ones,
    Prefix,
    RangeQueries,
    Sparse,
    Suffix,
    Total,
    VStack,
    Wavelet,
    Weighted,
)

__all__ = ["augmented_worst_approx", "max_abs_entry", "worst_approx"]

_FLOAT_ALLOWANCE = 2.0**-30  # relative error bound of a computed answer (see docstring)
_DENSE_LIMIT = 1 << 24  # materialise at most this many entries to find the max exactly


def worst_approx(
    x: np.ndarray, workload: EMatrix, x_hat: np.ndarray, eps: float, source: Any
) -> int:
    """Index of the workload row chosen by the exponential mechanism with score
    |w_i·x − w_i·x_hat| (MWEM's query selection); eps-DP in x."""
    v, est = _vectors(x, workload, x_hat)
    eps = _positive(eps, "eps")
    delta = max_abs_entry(workload)
    if delta == 0:  # every score is 0 whatever x is: a data-independent uniform choice
        uniform = np.zeros(workload.shape[0])
        return int(source.exponential_mechanism(uniform, sensitivity=1.0, epsilon=eps))
    scores = np.abs(workload.matvec(v) - workload.matvec(est))
    size = float(np.abs(v).sum()) + float(np.abs(est).sum()) + 1.0
    allowance = 2 * _FLOAT_ALLOWANCE * delta * size
    return int(source.exponential_mechanism(scores, sensitivity=delta + allowance, epsilon=eps))


def augmented_worst_approx(
    x: np.ndarray,
    workload: EMatrix,
    x_hat: np.ndarray,
    eps: float,
    source: Any,
    round_index: int,
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
    i = worst_approx(x, workload, x_hat, eps, source)
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


def max_abs_entry(M: EMatrix) -> float:
    """max_ij |M_ij|, exactly or as an upper bound (never below the truth)."""
    t = type(M)
    if t in (Identity, Ones, Total, Prefix, Suffix, Wavelet, RangeQueries):
        return 1.0  # entries in {0, ±1} by construction
    if t is Dense:
        return float(np.abs(M.array).max(initial=0.0))
    if t is Sparse:
        return float(np.abs(M.matrix.data).max(initial=0.0))
    if t is Diagonal:
        return float(np.abs(np.asarray(M.d)).max(initial=0.0))
    if t is Weighted:
        return abs(float(M.weight)) * max_abs_entry(M.base)
    if t is VStack:
        return max(max_abs_entry(b) for b in M.blocks)
    if t is Kronecker:
        return math.prod(max_abs_entry(f) for f in M.factors)
    m, n = M.shape
    if m * n <= _DENSE_LIMIT:
        return float(np.abs(M.dense()).max(initial=0.0))
    # any entry is bounded by its column's L2 norm (and by its L1 norm)
    return float(M.sensitivity(2))


def _row_matrix(W: EMatrix, i: int) -> EMatrix:
    """Row i of W as a one-row library matrix (ranges stay ranges)."""
    if type(W) is RangeQueries and not W.transposed:
        return RangeQueries(W.domain_shape, W.lower[i : i + 1], W.upper[i : i + 1])
    row = W.row(i)
    nz = np.flatnonzero(row)
    if nz.size and np.all(row[nz] == 1.0) and nz[-1] - nz[0] + 1 == nz.size:
        return RangeQueries(row.size, nz[:1], nz[-1:])
    return Dense(row.reshape(1, -1))


def _vectors(x: Any, W: Any, x_hat: Any) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(W, EMatrix):
        raise TypeError(f"workload must be an EMatrix, got {type(W).__name__}")
    v = np.asarray(x, dtype=np.float64).reshape(-1)
    est = np.asarray(x_hat, dtype=np.float64).reshape(-1)
    if v.size != W.shape[1] or est.size != W.shape[1]:
        raise ValueError(
            f"workload has {W.shape[1]} columns but x has {v.size} cells and x_hat {est.size}"
        )
    if not (np.isfinite(v).all() and np.isfinite(est).all()):
        raise ValueError("x and x_hat must be finite")
    return v, est


def _positive(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return v
