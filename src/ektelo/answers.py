"""The analyst's answer table (`Session.ask`): the tidy rows of a question
with the answer, its standard error and a 1 − α interval beside each row,
and the noise-only standard errors of least squares on recorded
measurements. Post-processing of released values only: nothing here sees
private data."""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np

from .columns import Category, Columns
from .workload import spec as questions

__all__ = ["consistent_nonnegative", "half_width", "noise_factor", "noise_only_std", "tidy"]


def noise_only_std(W: Any, measurements: list[Any]) -> np.ndarray:
    """√diag(W G⁺ Wᵀ), G = Σⱼ QⱼᵀQⱼ / vⱼ over the measurements on the root:
    the noise's standard error of W x̂ for the minimum-norm least-squares x̂
    (what the plans' LS returns, spreading each group evenly), conditional on
    the public partition/selection the measurements were taken on."""
    WZ = noise_factor(W, measurements)
    assert WZ is not None  # (no max_dense: always computed)
    return np.asarray(np.sqrt(np.sum(WZ**2, axis=1)), dtype=np.float64)


def noise_factor(W: Any, measurements: list[Any], *,
                 max_dense: int | None = None) -> np.ndarray | None:
    """F = W Z with Z Zᵀ = G⁺ (see `noise_only_std`): the noise covariance of
    the least-squares answers W x̂ is F Fᵀ, so that of any linear combination
    c of them is ‖cᵀF‖² — what the intervals of means (a sum and a count)
    and quantiles (a CDF value against the total) need (`ektelo.derived`).

    One measurement of a Kronecker strategy Q = ⊗Qᵢ answering a Kronecker
    workload W = ⊗Wᵢ over the same factors (HDMM's OPT_⊗ on sums and counts
    by groups) factorises: (QᵀQ)⁺ = ⊗(QᵢᵀQᵢ)⁺, so F = √v·⊗(Wᵢ Zᵢ) from one
    small eigendecomposition per attribute instead of one of n × n.
    Otherwise G is formed densely, up to `max_dense` cells (None: no limit;
    above it the result is None)."""
    fast = _kron_noise_factor(W, measurements)
    if fast is not None:
        return fast
    n = W.shape[1]
    if max_dense is not None and n > max_dense:
        return None
    G = np.zeros((n, n))
    for m in measurements:
        Q = m.query_on_root
        if Q.shape[1] != n:
            continue
        G += np.asarray(Q.gram().dense(), dtype=np.float64) / m.variance
    lam, V = np.linalg.eigh(0.5 * (G + G.T))
    keep = lam > lam.max(initial=0.0) * n * np.finfo(np.float64).eps * 10
    Z = V[:, keep] / np.sqrt(lam[keep])  # G⁺ = Z Zᵀ
    return np.asarray(W.matmat(Z), dtype=np.float64)


def _kron_noise_factor(W: Any, measurements: list[Any]) -> np.ndarray | None:
    from .matrix import Kronecker

    n = W.shape[1]
    on_root = [m for m in measurements if m.query_on_root.shape[1] == n]
    if len(on_root) != 1:
        return None
    # weighted products too (c·⊗Qᵢ: HDMM's Gaussian strategy; c·⊗Wᵢ: a joint SQL
    # workload's sums): (cQ)ᵀ(cQ) = c²QᵀQ, so F scales by c_W / c_Q
    Q, cq = _unweighted(on_root[0].query_on_root)
    W, cw = _unweighted(W)
    if not (isinstance(Q, Kronecker) and isinstance(W, Kronecker)) or cq == 0:
        return None
    if len(Q.factors) != len(W.factors) or any(
            q.shape[1] != w.shape[1] for q, w in zip(Q.factors, W.factors, strict=True)):
        return None
    parts = []
    for q, w in zip(Q.factors, W.factors, strict=True):
        G = np.asarray(q.gram().dense(), dtype=np.float64)
        lam, V = np.linalg.eigh(0.5 * (G + G.T))
        keep = lam > lam.max(initial=0.0) * G.shape[0] * np.finfo(np.float64).eps * 10
        parts.append(np.asarray(w.matmat(V[:, keep] / np.sqrt(lam[keep])), dtype=np.float64))
    F = parts[0]
    for part in parts[1:]:
        F = np.asarray(np.kron(F, part), dtype=np.float64)
    return np.asarray(F * (cw / cq) * math.sqrt(on_root[0].variance), dtype=np.float64)


def _unweighted(M: Any) -> tuple[Any, float]:
    """M as (base, c) with M = c·base, unwrapping `Weighted`s."""
    from .matrix import Weighted

    c = 1.0
    while type(M) is Weighted:
        c *= float(M.weight)
        M = M.base
    return M, c


def half_width(std: np.ndarray, method: str, alpha: float) -> np.ndarray:
    """Half-width of the two-sided 1 − α interval for the given method."""
    if "Laplace" in method:  # one Laplace(b) term, b = sd/√2, or a sum bounded by it
        return std / math.sqrt(2) * math.log(1 / alpha)
    z = statistics.NormalDist().inv_cdf(1 - alpha / 2)
    return z * std


def tidy(q: questions.ParsedWorkload, answers: np.ndarray, std: np.ndarray | None,
          method: str, alpha: float, nonnegative: bool, rounded: bool,
          consistent: bool) -> Columns:
    """The question's tidy rows with the answer columns beside them, as NumPy
    columns (`Columns.to_frame()`: the DataFrame). The rows are shared, not
    copied (a 3-way question on a wide table has ~10⁷ of them; pandas'
    copy-on-write keeps `q.rows` as it was), and `ci_method`, one string for
    every row, is a categorical (a byte a row)."""
    values = answers.copy()
    if consistent and nonnegative:
        values = consistent_nonnegative(q, values)
    elif nonnegative:
        values = np.maximum(values, 0.0)
    if std is None:
        low = high = np.full(values.shape, np.nan)
        err = np.full(values.shape, np.nan)
    else:
        half = half_width(std, method, alpha)
        low, high, err = answers - half, answers + half, std
        if nonnegative:
            low, high = np.maximum(low, 0.0), np.maximum(high, 0.0)
    if rounded:
        values = np.round(values)
    return q.table.extend({
        "answer": values, "std_error": err, "ci_low": low, "ci_high": high,
        "ci_method": Category(np.zeros(len(values), dtype=np.int8), (method,)),
    })


def consistent_nonnegative(q: questions.ParsedWorkload, answers: np.ndarray) -> np.ndarray:
    """Non-negative answers that stay consistent: a CDF non-decreasing from
    0 (isotonic by running maximum of the clipped values), other questions
    clipped at 0 (histogram cells are independent answers)."""
    if q.kind == "prefix":
        steps = q.shape[0]
        shaped = np.maximum(answers, 0.0).reshape(steps, -1)
        return np.maximum.accumulate(shaped, axis=0).reshape(-1)
    return np.asarray(np.maximum(answers, 0.0), dtype=np.float64)
