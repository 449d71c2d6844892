"""MWEM and the paper's variants (Hardt, Ligett & McSherry, NeurIPS 2012;
εktelo §6 Algorithm 2, §9.1, Table 4).

Every plan runs T rounds of: query selection (Private→Public, inside the
kernel), Vector Laplace, inference over all measurements so far. The
variants swap one operator each: `mwem_b` the selection (the worst query plus
the disjoint dyadic ranges of length 2^(k−1) in round k, free by parallel
composition), `mwem_c` the inference (NNLS with a high-confidence total
instead of multiplicative weights), `mwem_d` both.

Choices (stated because the sources differ):
* the total: MWEM assumes it is known. Pass it as `total` (public side
  information, as DPBench and Table 4 do), or leave `total=None` and the plan
  buys a noisy one with `total_ratio`·ε;
* budget: ε/T per round, `ratio` of it to selection, the rest to measuring
  (Algorithm 2: ε/2T each);
* MW inference cycles all measurements `passes` times per round from the
  last estimate: 100 in `mwem` (DPBench's MWEM, `updateround`, whose errors
  are the reference), 50 in `mwem_b` (εktelo's MwemVariantB,
  `update_rounds`, the code behind Table 4);
* NNLS refits all measurements each round (the original εktelo code fitted
  only the latest one, which throws away data), warm-started from the last
  estimate where that reaches the optimum;
* augmented selection adds unit ranges in round 1, as §9.1 says (the
  original code started at width 2). On an n-D domain the dyadic ranges run
  over the flattened (C-order) vector, as in the original;
* limits, checked before anything is spent: `rounds` is an int in
  1..`MAX_ROUNDS` (1,000) and `passes` an int in 1..`MAX_PASSES` (1,000).
  A round costs more than the last (inference refits every measurement so
  far: 200 rounds of `mwem` on 256 cells take about a minute, 1,000 about
  half an hour) and gets only ε/T, so larger values are refused rather than
  left to run for hours; floats (`1e8` from the command line) are refused
  too. `ratio` (and `total_ratio` when the total is bought) lie strictly
  between 0 and 1;
* `workload_reduction=True` (§8) selects and measures on the workload's
  groups of cells. `mwem` and `mwem_c` then return the same estimate as
  without it (W x̂ is unchanged, so are the scores, the noise and the fits:
  Prop. 1); `mwem_b` and `mwem_d` draw their free dyadic ranges over the
  groups instead of the cells, so they measure other queries.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any

import numpy as np
import scipy.sparse as sp

from .. import inference
from ..matrix import Dense, EMatrix, Partition, RangeQueries, Sparse, Total
from ..measurement import Measurement
from ._registry import register
from .budget import check_eps, split
from .common import reduce_for_workload

__all__ = ["MAX_PASSES", "MAX_ROUNDS", "mwem", "mwem_b", "mwem_c", "mwem_d"]

# Upper limits of the iteration counts (module notes): refused above these.
MAX_ROUNDS = 1_000
MAX_PASSES = 1_000


def _mwem(
    x: Any,
    workload: EMatrix,
    eps: float,
    *,
    rounds: int,
    ratio: float,
    total: float | None,
    total_ratio: float,
    augmented: bool,
    how: str,
    workload_reduction: bool,
    passes: int | None = None,
) -> np.ndarray:
    # Every hyper-parameter is checked here, before the first charge.
    eps = check_eps(eps)
    rounds = _positive_int(rounds, "rounds", MAX_ROUNDS)
    passes = _positive_int(passes, "passes", MAX_PASSES) if how == "mw" else None
    ratio = _share(ratio, "ratio")
    if total is None:
        total_ratio = _share(total_ratio, "total_ratio")
    else:
        total = _check_total(total)
    if not isinstance(workload_reduction, bool | np.bool_):
        raise TypeError(f"workload_reduction must be True or False, got {workload_reduction!r}")
    # With workload_reduction (§8), selection and measurement run on the
    # workload's groups: W = W'·P, so the scores W'·(P x̂) equal W·x̂. MW keeps
    # x̂ uniform within groups, so its inference runs on the k groups
    # (groups=P); NNLS stays on x's cells, where its own grouping finds the
    # same structure.
    x_run, W_run, P = reduce_for_workload(x, workload, workload_reduction)
    if P is not None:  # materialised once: every round's selection evaluates it
        W_run = Sparse(W_run.sparse())
    n = x.size
    measurements: list[Measurement] = []
    if total is None:  # MWEM assumes the total; otherwise buy a noisy one
        eps_total, eps = split(eps, total_ratio, 1 - total_ratio)
        measurements.append(x_run.laplace(Total(x_run.size), eps=eps_total))
        total = max(float(measurements[0].answers[0]), 1.0)
    total = _check_total(total)
    x_hat = np.full(n, total / n)
    last: inference.Estimate | None = None  # MW's last round: its passes continue
    fit = _NNLS(n)  # NNLS inference over all measurements so far
    for k, eps_round in enumerate(split(eps, *[1 / rounds] * rounds), start=1):
        eps_select, eps_measure = split(eps_round, ratio, 1 - ratio)
        seen = x_hat if P is None else P.reduce(x_hat)
        if augmented:
            M = x_run.augmented_worst_approx(W_run, seen, round_index=k, eps=eps_select)
        else:
            M = _row(W_run, x_run.worst_approx(W_run, seen, eps=eps_select))
        measurements.append(x_run.laplace(M, eps=eps_measure))
        if how == "mw":
            last = inference.multiplicative_weights(
                measurements, total=total, start=last, maxiter=passes, groups=P
            )
            x_hat = last.x.reshape(-1)
        else:
            x_hat = fit(measurements, total, x_hat)
    return x_hat


def _positive_int(value: Any, name: str, limit: int) -> int:
    if (
        isinstance(value, bool | np.bool_)
        or not isinstance(value, int | np.integer)
        or not 1 <= value <= limit
    ):
        raise ValueError(f"{name} must be an integer in 1..{limit:,}, got {value!r}")
    return int(value)


def _share(value: Any, name: str) -> float:
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number strictly between 0 and 1, got {value!r}")
    if not 0 < float(value) < 1:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")
    return float(value)


def _check_total(total: Any) -> float:
    if isinstance(total, bool) or not isinstance(total, (int, float, np.integer, np.floating)):
        raise TypeError(f"total must be a positive number or None, got {type(total).__name__}")
    value = float(total)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"total must be a positive finite number, got {total!r}")
    return value


def _row(workload: EMatrix, i: int) -> EMatrix:
    """Query i of the workload as a one-row matrix (ranges stay implicit)."""
    if type(workload) is RangeQueries and not workload.transposed:
        lo, hi = workload.lower[i : i + 1], workload.upper[i : i + 1]
        return RangeQueries(workload.domain_shape, lo, hi)
    return Dense(workload.row(i).reshape(1, -1))


class _NNLS:
    """`inference.nnls` over a growing list of measurements, on the coarsest
    domain they determine.

    Cells whose columns are equal in every measured query are
    indistinguishable to the fit: Q = Q_r·R with R summing each group of
    cells, so each measurement is exactly a measurement of R·x with query
    Q_r (paper §8, Prop. 1, applied to the measurements). NNLS then runs on
    the groups, scaled so that the reduced problem is the full one restricted
    to vectors uniform on each group (an isometry): the same optimal
    objective and fitted answers Q·x̂, with each group's total spread evenly
    over its cells (the measurements cannot tell them apart). MWEM's
    one-query rounds leave few groups (a 2-D domain of 65 536 cells falls to
    dozens), so this is much cheaper and can be solved to the optimum; when
    the groups are not much fewer than the cells (the augmented selection's
    unit ranges) the fit runs on the full domain with NNLS's defaults.

    Measured queries are materialised once, as CSR (the same entries), since
    NNLS multiplies by them hundreds of times per round. Holds state for one
    plan run only.
    """

    def __init__(self, n: int):
        self.n = n
        self.queries: list[Any] = []  # CSC copy of each measured query on the root
        self.groups: np.ndarray | None = np.zeros(n, dtype=np.int64)

    def __call__(
        self, measurements: list[Measurement], total: float, last: np.ndarray | None = None
    ) -> np.ndarray:
        """The NNLS estimate from all measurements; `last`, the previous
        round's estimate (public), is a warm start on large reduced problems."""
        for m in measurements[len(self.queries) :]:
            Q = m.query_on_root.sparse().tocsc()
            Q.sum_duplicates()
            self.queries.append(Q)
            self.groups = _refine(self.groups, Q)
        groups = self.groups
        stacked = _stacked(measurements, self.queries)
        if groups is None or 2 * (int(groups.max()) + 1) > self.n:
            return inference.nnls(stacked, total=total).x.reshape(-1)
        k = int(groups.max()) + 1
        # NNLS on the groups (groups=): the full problem restricted to
        # group-uniform x, in the isometric unknowns u_g = (group total)/√size
        # (same least-squares start, same geometry; x ≥ 0 ⟺ u ≥ 0).
        on = Partition(groups)
        if k > _SMALL and last is not None:
            # Warm start (mwem_d): the last estimate is uniform on these groups
            # (they refine the last round's). Its optimum has few positive
            # groups, so NNLS's active-set steps are exact solves on them and
            # reach the optimum (KKT) in a few steps. Accepted only then;
            # otherwise — the default tolerance is loose with a known total and
            # can stop near the start — the cold fit below, as before. Either
            # way the optimal fit.
            try:
                warm = inference.nnls(stacked, total=total, start=last, groups=on)
            except inference.ConvergenceError:
                pass
            else:
                if warm.info.optimality <= _WARM_ACCEPT:
                    return warm.x.reshape(-1)
        options = {"tol": 1e-10, "exact_scale": 1e-2, "maxiter": 2000} if k <= _SMALL else {}
        try:
            fitted = inference.nnls(stacked, total=total, groups=on, **options)
        except inference.ConvergenceError as stalled:  # stalled at the last digits
            if not stalled.info.optimality <= _REDUCED_ACCEPT:
                raise
            fitted = stalled.estimate
        return fitted.x.reshape(-1)


def _stacked(measurements: list[Measurement], queries: list[Any]) -> list[Measurement]:
    """The measurements with their queries on the root replaced by `queries`
    (the same entries, materialised), and consecutive ones of equal noise
    scale stacked into one record: the same rows and weights for inference,
    one matrix product instead of many."""
    out: list[Measurement] = []
    start = 0
    for end in range(1, len(measurements) + 1):
        if end < len(measurements) and (
            measurements[end].noise_scale == measurements[start].noise_scale
        ):
            continue
        group = measurements[start:end]
        Q = sp.vstack(queries[start:end], format="csr")
        small = Q.shape[0] * Q.shape[1] <= _SMALL * _SMALL
        M = Dense(Q.toarray()) if small else Sparse(Q)  # dense: no sparse dispatch per product
        answers = np.concatenate([m.answers for m in group])
        out.append(dataclasses.replace(group[0], answers=answers, query=M, query_on_root=M))
        start = end
    return out


# NNLS's stopping rule is relative to its gradient at 0, which the heavily
# weighted total dominates, so its default tolerance can stop far from the
# optimum (on 2-D MWEM rounds, at 10³× the optimal objective). Up to _SMALL
# groups (mwem_c's case) a tight tolerance is cheap and reaches the optimum
# (checked against scipy.optimize.nnls); the total's weight 100 (noise scale
# 1% of the measurements') keeps the system well conditioned and is still
# honoured to ~1e-9 there. Larger reduced problems (mwem_d's) use NNLS's
# defaults, which are close to the optimum on them (~1e-3 of the objective)
# and far cheaper than a tight tolerance.
_SMALL = 512
_REDUCED_ACCEPT = 1e-7
# A warm-started fit is kept when its projected gradient is this small relative
# to the scale (a KKT point: exact active-set steps end at ~1e-16 on 2-D MWEM
# rounds; stopping at the loose default tolerance leaves ~1e-7).
_WARM_ACCEPT = 1e-12


def _refine(groups: np.ndarray | None, Q: Any) -> np.ndarray | None:
    """Split the cell groups by the columns of Q (CSC): cells stay together
    only where Q's columns are equal. Exact for queries whose columns have
    at most one nonzero (one query, or disjoint queries, as MWEM measures);
    None (no grouping) otherwise, or when the domain is too large to key."""
    n = Q.shape[1]
    counts = np.diff(Q.indptr)
    if groups is None or counts.max(initial=0) > 1 or n > 1 << 30:
        return None
    cols = np.flatnonzero(counts)
    row = np.zeros(n, dtype=np.int64)
    row[cols] = Q.indices[Q.indptr[cols]] + 1
    value = np.zeros(n)
    value[cols] = Q.data[Q.indptr[cols]]
    _, rank = np.unique(value, return_inverse=True)
    _, key = np.unique(groups * (Q.shape[0] + 1) + row, return_inverse=True)
    _, out = np.unique(key * (int(rank.max()) + 1) + rank, return_inverse=True)
    return out.astype(np.int64)


@register(
    "mwem",
    citation="Hardt, Ligett & McSherry, NeurIPS 2012",
    summary="worst-approximated query per round, multiplicative weights",
    data_dependent=True,
)
def mwem(
    x: Any,
    workload: EMatrix,
    eps: float,
    *,
    rounds: int = 10,
    ratio: float = 0.5,
    total: float | None = None,
    total_ratio: float = 0.05,
    workload_reduction: bool = False,
    passes: int = 100,
) -> np.ndarray:
    """MWEM (Algorithm 2). Budget: ε/T per round, `ratio` of it to the
    exponential-mechanism selection, the rest to measuring the selected query.
    The total is public (`total`) or bought with `total_ratio`·ε. Inference:
    `passes` multiplicative-weights cycles over all measurements per round
    (100, DPBench's MWEM; εktelo's MWEM used 50). Returns the final estimate
    x̂ (flattened). `workload_reduction`: see the module notes. Limits (all
    four plans, checked before any spending): `rounds` an int ≤ `MAX_ROUNDS`
    (1,000), `passes` an int ≤ `MAX_PASSES` (1,000)."""
    return _mwem(
        x,
        workload,
        eps,
        rounds=rounds,
        ratio=ratio,
        total=total,
        total_ratio=total_ratio,
        augmented=False,
        how="mw",
        workload_reduction=workload_reduction,
        passes=passes,
    )


@register(
    "mwem_b",
    citation="εktelo §9.1 (plan 14), after Hardt et al. 2012",
    summary="MWEM with augmented selection (disjoint H2 queries for free)",
    data_dependent=True,
)
def mwem_b(
    x: Any,
    workload: EMatrix,
    eps: float,
    *,
    rounds: int = 10,
    ratio: float = 0.5,
    total: float | None = None,
    total_ratio: float = 0.05,
    workload_reduction: bool = False,
    passes: int = 50,
) -> np.ndarray:
    """MWEM variant (b): per round the worst query plus the disjoint dyadic
    queries of length 2^(k−1), all measured at the cost of one (parallel
    composition); multiplicative-weights inference, `passes` cycles over all
    measurements per round (50: εktelo's MwemVariantB, `update_rounds`).
    Budget as `mwem`. `workload_reduction`: the dyadic ranges run over the
    workload's groups."""
    return _mwem(
        x,
        workload,
        eps,
        rounds=rounds,
        ratio=ratio,
        total=total,
        total_ratio=total_ratio,
        augmented=True,
        how="mw",
        workload_reduction=workload_reduction,
        passes=passes,
    )


@register(
    "mwem_c",
    citation="εktelo §9.1 (plan 15), after Hardt et al. 2012",
    summary="MWEM with NNLS inference and a high-confidence total",
    data_dependent=True,
)
def mwem_c(
    x: Any,
    workload: EMatrix,
    eps: float,
    *,
    rounds: int = 10,
    ratio: float = 0.5,
    total: float | None = None,
    total_ratio: float = 0.05,
    workload_reduction: bool = False,
) -> np.ndarray:
    """MWEM variant (c): MWEM's selection, NNLS inference with the total as a
    (near-)exact constraint. Budget as `mwem`. `workload_reduction`: same
    estimate as without it."""
    return _mwem(
        x,
        workload,
        eps,
        rounds=rounds,
        ratio=ratio,
        total=total,
        total_ratio=total_ratio,
        augmented=False,
        how="nnls",
        workload_reduction=workload_reduction,
    )


@register(
    "mwem_d",
    citation="εktelo §9.1 (plan 16), after Hardt et al. 2012",
    summary="MWEM with augmented selection and NNLS inference",
    data_dependent=True,
)
def mwem_d(
    x: Any,
    workload: EMatrix,
    eps: float,
    *,
    rounds: int = 10,
    ratio: float = 0.5,
    total: float | None = None,
    total_ratio: float = 0.05,
    workload_reduction: bool = False,
) -> np.ndarray:
    """MWEM variant (d): augmented selection and NNLS inference. Budget as `mwem`.
    `workload_reduction`: the dyadic ranges run over the workload's groups."""
    return _mwem(
        x,
        workload,
        eps,
        rounds=rounds,
        ratio=ratio,
        total=total,
        total_ratio=total_ratio,
        augmented=True,
        how="nnls",
        workload_reduction=workload_reduction,
    )
