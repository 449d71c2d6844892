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
* MW inference cycles all measurements 100 times per round from the last
  estimate (DPBench's MWEM); NNLS refits all measurements each round (the
  original εktelo code fitted only the latest one, which throws away data);
* augmented selection adds unit ranges in round 1, as §9.1 says (the
  original code started at width 2). On an n-D domain the dyadic ranges run
  over the flattened (C-order) vector, as in the original.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ..kernel.measurement import Measurement
from ..matrix import Dense, EMatrix, Identity, Ones, RangeQueries, Sparse, Total, VStack
from ..operators import inference
from ._registry import register
from .budget import check_eps, split

__all__ = ["mwem", "mwem_b", "mwem_c", "mwem_d"]


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
) -> np.ndarray:
    eps = check_eps(eps)
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    measurements: list[Measurement] = []
    if total is None:  # MWEM assumes the total; otherwise buy a noisy one
        eps_total, eps = split(eps, total_ratio, 1 - total_ratio)
        measurements.append(x.laplace(Total(x.size), eps=eps_total))
        total = max(float(measurements[0].answers[0]), 1.0)
    total = _check_total(total)
    x_hat = np.full(x.size, total / x.size)
    compact: list[Measurement] = []  # the same measurements with CSR queries, for NNLS
    for k, eps_round in enumerate(split(eps, *[1 / rounds] * rounds), start=1):
        eps_select, eps_measure = split(eps_round, ratio, 1 - ratio)
        if augmented:
            M = x.augmented_worst_approx(workload, x_hat, round_index=k, eps=eps_select)
        else:
            M = _row(workload, x.worst_approx(workload, x_hat, eps=eps_select))
        measurements.append(x.laplace(M, eps=eps_measure))
        if how == "mw":
            x_hat = inference.multiplicative_weights(measurements, total=total, x0=x_hat)
        else:
            compact.extend(_compact(m) for m in measurements[len(compact) :])
            x_hat = inference.nnls(compact, known_total=total)
    return x_hat


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


# Materialise a measured query for NNLS only up to this many nonzeros.
_COMPACT_NNZ = 1 << 24


def _compact(m: Measurement) -> Measurement:
    """The same measurement with its root query held as one CSR matrix.

    NNLS multiplies by the stacked queries hundreds of times per round; a
    stack of one-row range queries costs a prefix sum per row and product,
    the CSR copy one pass over its nonzeros. The entries are identical (a
    public re-expression of public values; answers and noise untouched).
    """
    Q = m.query_on_root
    if type(Q) in (Sparse, Total, Ones, Identity) or _nnz(Q) > _COMPACT_NNZ:
        return m
    return dataclasses.replace(m, query_on_root=Sparse(Q.sparse()))


def _nnz(Q: EMatrix) -> int:
    """Nonzeros of a (stack of) range queries; anything else counts as dense."""
    if type(Q) is RangeQueries and not Q.transposed:
        return int(np.prod(Q.upper - Q.lower + 1, axis=1).sum())
    if type(Q) is VStack:
        return sum(_nnz(b) for b in Q.blocks)
    return math.prod(Q.shape)


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
) -> np.ndarray:
    """MWEM (Algorithm 2). Budget: ε/T per round, `ratio` of it to the
    exponential-mechanism selection, the rest to measuring the selected query.
    The total is public (`total`) or bought with `total_ratio`·ε. Returns the
    final estimate x̂ (flattened)."""
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
) -> np.ndarray:
    """MWEM variant (b): per round the worst query plus the disjoint dyadic
    queries of length 2^(k−1), all measured at the cost of one (parallel
    composition); multiplicative-weights inference. Budget as `mwem`."""
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
) -> np.ndarray:
    """MWEM variant (c): MWEM's selection, NNLS inference with the total as a
    (near-)exact constraint. Budget as `mwem`."""
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
) -> np.ndarray:
    """MWEM variant (d): augmented selection and NNLS inference. Budget as `mwem`."""
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
    )
