"""Means and quantiles derived from jointly measured linear answers, with
intervals (issue #38; public post-processing of released answers: nothing
here sees private data or spends budget — Dwork & Roth 2014, Prop. 2.1).

A sum of a numeric attribute over a group and the group's count are two rows
of one workload (`ektelo.workload.spec.aggregates`), answered by one plan;
their least-squares answers carry a joint noise covariance F Fᵀ
(`ektelo.answers.noise_factor`, exact for the data-independent plans). From
them:

* **mean** = S / C, clamped to the attribute's value range. Interval by
  Fieller's method (Fieller 1954): for the true mean μ, S − μC equals the
  noise e_S − μe_C exactly (S_true = μ·C_true), a linear combination of the
  plan's noise with variance v(μ) = v_S − 2μ·c_SC + μ²·v_C; the set
  {μ : |S − μC| ≤ k·√v(μ)} is a quadratic inequality in μ, and it covers μ
  whenever that one linear combination stays within k standard deviations —
  probability ≥ 1 − α with k the half-width factor of the question's method
  (Laplace-tail width for Laplace noise, conservative for sums of Laplace
  terms; the normal quantile for Gaussian noise). It is intersected with
  the value range [min v, max v] (the binned mean lies there); where the
  count is not significantly positive the set is unbounded and the interval
  is the whole value range. `std_error` is the delta method's
  √v(m̂)/|Ĉ|. A group whose noisy count is ≤ 0 has no mean: its answer is
  NaN and its `note` says so (never a division by zero).
* **quantile** at level q (the smallest bin k with F(k) ≥ q·N, numpy's
  "inverted_cdf" on the binned values) from the noisy CDF F̂ made
  non-decreasing (running maximum). Interval: the true k* has
  D(k*) = F(k*) − qN ≥ 0 and D(k* − 1) < 0, and the noisy D̂(k) = F̂(k) − q·F̂(last)
  differs from D(k) by one linear combination of the noise; so the set
  {k : D̂(k) ≥ −h_k and D̂(k − 1) < h_{k−1}} (h: the two-sided 1 − α
  half-width of D̂(k)'s noise) misses k* only if one of two one-sided
  α/2 events happens — coverage ≥ 1 − α. Reported as the hull of that set,
  at the bins' representative values.

What every interval covers is the noise of the measurements only: values
were clamped to the declared range and counted at their bin's representative
value (`ektelo.workload.values`), and that bias is not part of it
(`ci_method` says so). For a data-dependent plan answered by least squares the
interval is conditional on its released partition (its bias is not covered
either).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .answers import half_width, tidy
from .workload import spec as questions

__all__ = ["fieller", "finish", "quantile_rows"]

NOISE_ONLY = "noise only: not clamping to the domain or binning bias"
PARTITION = ("conditional on the plan's released partition (the bias of spreading a group's "
             "count over its cells is not covered)")
EMPTY_NOTE = "noisy count ≤ 0: no mean (the group may be empty)"
UNBOUNDED_NOTE = "count not significantly positive: the interval is the value range"


def fieller(S: float, C: float, vS: float, vC: float, cSC: float, k: float,
            lo: float, hi: float) -> tuple[float, float, bool]:
    """Fieller's set {μ : (S − μC)² ≤ k²(vS − 2μ·cSC + μ²vC)} ∩ [lo, hi] as
    (low, high, bounded): the whole [lo, hi] when the set is unbounded."""
    a = C * C - k * k * vC
    b = -2.0 * (S * C - k * k * cSC)
    c = S * S - k * k * vS
    if a <= 0:
        return lo, hi, False
    disc = b * b - 4 * a * c
    if disc < 0:  # an empty set (probability ≤ α): the point estimate
        m = min(max(S / C, lo), hi)
        return m, m, True
    root = math.sqrt(disc)
    low, high = (-b - root) / (2 * a), (-b + root) / (2 * a)
    return min(max(low, lo), hi), max(min(high, hi), lo), True


def finish(q: questions.ParsedWorkload, answers: np.ndarray, std: np.ndarray | None,
           method: str, alpha: float, factor: np.ndarray | None, *,
           nonnegative: bool = False, rounded: bool = False) -> pd.DataFrame:
    """The analyst's rows of a derived question (`q.derived`) from the
    answers of its linear workload, their standard errors and method, and
    the noise factor F (covariance F Fᵀ; None: no interval for a ratio)."""
    d = q.derived
    if d is None:
        raise ValueError("finish needs a derived question (sum/mean/quantile)")
    if d.what == "quantile":
        return quantile_rows(q, answers, method, alpha, factor)
    values = np.asarray(d.values)
    base = tidy(q, answers, std, method, alpha, nonnegative and bool(values.min() >= 0),
                rounded, False).to_frame()
    base["ci_method"] = base["ci_method"].astype(str) + f"; {NOISE_ONLY}"
    measured = ([] if d.basis == "ends"
                else list(dict.fromkeys(base["statistic"].astype(str))))
    parts = []
    for stat in d.statistics:
        if stat in measured:
            parts.append(base[base["statistic"].astype(str) == stat])
        else:
            parts.append(_mean_rows(q, base, answers, method, alpha, factor, values))
    out = pd.concat(parts, ignore_index=True)
    out["statistic"] = pd.Categorical(out["statistic"].astype(str),
                                      categories=list(questions.STATISTICS))
    if "note" in out.columns:
        out["note"] = out["note"].fillna("")
    out["ci_method"] = out["ci_method"].astype("category")
    return out


def _mean_rows(q: questions.ParsedWorkload, base: pd.DataFrame, answers: np.ndarray,
               method: str, alpha: float, factor: np.ndarray | None,
               values: np.ndarray) -> pd.DataFrame:
    g = q.derived.groups if q.derived is not None else 1
    lo, hi = float(values.min()), float(values.max())
    S, C = answers[:g], answers[g:2 * g]
    if q.derived is not None and q.derived.basis == "ends":
        # rows Σ(v − lo)x and Σ(hi − v)x: C = (r₁ + r₂)/(hi − lo), S = r₁ + lo·C
        # (linear maps of the answers, and of their noise factor alike)
        C = (answers[:g] + answers[g:2 * g]) / (hi - lo)
        S = answers[:g] + lo * C
        if factor is not None:
            fc = (factor[:g] + factor[g:2 * g]) / (hi - lo)
            factor = np.vstack([factor[:g] + lo * fc, fc])
    rows = base.iloc[:g].copy()
    rows["statistic"] = "mean"
    k = float(half_width(np.ones(1), method, alpha)[0])
    answer = np.full(g, np.nan)
    err = np.full(g, np.nan)
    low = np.full(g, np.nan)
    high = np.full(g, np.nan)
    notes = [""] * g
    for i in range(g):
        if not C[i] > 0:
            notes[i] = EMPTY_NOTE
            continue
        answer[i] = min(max(S[i] / C[i], lo), hi)
        if factor is None:
            continue
        fs, fc = factor[i], factor[g + i]
        vS, vC, cSC = float(fs @ fs), float(fc @ fc), float(fs @ fc)
        m = answer[i]
        err[i] = math.sqrt(max(vS - 2 * m * cSC + m * m * vC, 0.0)) / C[i]
        low[i], high[i], bounded = fieller(S[i], C[i], vS, vC, cSC, k, lo, hi)
        if not bounded:
            notes[i] = UNBOUNDED_NOTE
    rows["answer"] = answer
    rows["std_error"] = err
    rows["ci_low"] = low
    rows["ci_high"] = high
    if factor is None:
        rows["ci_method"] = "none: no joint noise covariance for this plan (not least squares)"
    else:
        noise = "exact Gaussian" if "Gaussian" in method else "Laplace-tail width"
        rows["ci_method"] = (f"Fieller ratio of the jointly measured sum and count ({noise}), "
                             f"within the value range; std_error by the delta method; "
                             f"{NOISE_ONLY}" + (f"; {PARTITION}" if "partition" in method
                                                else ""))
    rows["note"] = notes
    return rows


def quantile_rows(q: questions.ParsedWorkload, answers: np.ndarray, method: str,
                  alpha: float, factor: np.ndarray | None) -> pd.DataFrame:
    """Quantile rows (see the module) from a CDF question's answers."""
    d = q.derived
    assert d is not None
    values = np.asarray(d.values)
    n, g = values.size, d.groups
    F = answers.reshape(n, g)
    target = [c for c in q.rows.columns if c.endswith(("_at_most", "_below"))]
    groups = q.rows.iloc[:g].drop(columns=target).reset_index(drop=True)
    k = float(half_width(np.ones(1), method, alpha)[0])
    out = []
    for level in d.levels:
        block = groups.copy()
        block.insert(0, "quantile", level)
        answer, low, high = np.full(g, np.nan), np.full(g, np.nan), np.full(g, np.nan)
        err = np.full(g, np.nan)
        notes = [""] * g
        for j in range(g):
            mono = np.maximum.accumulate(F[:, j])
            total = mono[-1]
            if not total > 0:
                notes[j] = "noisy count ≤ 0: no quantile (the group may be empty)"
                continue
            answer[j] = values[int(np.argmax(mono >= level * total))]
            if factor is None:
                continue
            rows = factor.reshape(n, g, -1)[:, j, :]
            D = F[:, j] - level * F[-1, j]
            sd = np.sqrt(np.sum((rows - level * rows[-1]) ** 2, axis=1))
            h = k * sd
            upper_ok = np.concatenate([[True], D[:-1] < h[:-1]])
            ok = (-h <= D) & upper_ok
            inside = np.flatnonzero(ok)
            if inside.size:
                low[j], high[j] = values[inside[0]], values[inside[-1]]
            else:  # (probability ≤ α) the point estimate
                low[j] = high[j] = answer[j]
        block["answer"] = answer
        block["std_error"] = err
        block["ci_low"] = low
        block["ci_high"] = high
        block["ci_method"] = ""
        block["note"] = notes
        out.append(block)
    frame = pd.concat(out, ignore_index=True)
    if factor is None:
        how = "none: no joint noise covariance for this plan (not least squares)"
    else:
        noise = "exact Gaussian" if "Gaussian" in method else "Laplace-tail width"
        how = (f"noisy CDF inverted: bins whose CDF band ({noise}) admits the level; "
               f"values at bin representatives; no std_error (not linear in the noise); "
               f"{NOISE_ONLY}" + (f"; {PARTITION}" if "partition" in method else ""))
    frame["ci_method"] = pd.Categorical([how] * len(frame))
    return frame
