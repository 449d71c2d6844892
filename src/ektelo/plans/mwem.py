"""MWEM and the paper's variants (Hardt, Ligett & McSherry, NeurIPS 2012;
εktelo §9.1, Table 4).

Every plan runs T rounds of: query selection (Private→Public, inside the
kernel), Vector Laplace, inference. The variants swap one operator each:
`mwem_b` the selection (worst query plus disjoint H2 queries, free by
parallel composition), `mwem_c` the inference (NNLS with a high-confidence
total instead of multiplicative weights), `mwem_d` both.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..matrix import Dense, EMatrix, RangeQueries, Total
from ..operators import inference
from ._registry import register
from .budget import check_eps, split

__all__ = ["mwem", "mwem_b", "mwem_c", "mwem_d"]


def _row(workload: EMatrix, i: int) -> EMatrix:
    """Query i of the workload as a one-row matrix (ranges stay implicit)."""
    if isinstance(workload, RangeQueries) and not workload.transposed:
        lo, hi = workload.lower[i : i + 1], workload.upper[i : i + 1]
        return RangeQueries(workload.domain_shape, lo, hi)
    return Dense(workload.row(i).reshape(1, -1))


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
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    measurements = []
    if total is None:  # MWEM assumes the total; otherwise buy a noisy one
        eps_total, eps = split(eps, total_ratio, 1 - total_ratio)
        m_total = x.laplace(Total(x.size), eps=eps_total)
        measurements.append(m_total)
        total = max(float(m_total.answers[0]), 1.0)
    eps_select, eps_measure = split(eps / rounds, ratio, 1 - ratio)
    x_hat = np.full(x.size, total / x.size)
    for k in range(1, rounds + 1):
        if augmented:
            M = x.augmented_worst_approx(workload, x_hat, round_index=k, eps=eps_select)
        else:
            M = _row(workload, x.worst_approx(workload, x_hat, eps=eps_select))
        measurements.append(x.laplace(M, eps=eps_measure))
        if how == "mw":
            x_hat = inference.multiplicative_weights(measurements, total=total, x0=x_hat)
        else:
            x_hat = inference.nnls(measurements, known_total=total)
    return x_hat




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
    """MWEM. Budget: ε/T per round, `ratio` of it to the exponential-mechanism
    selection and the rest to measuring the selected query. The total is
    public (`total`) or bought with `total_ratio`·ε. Returns the final x̂."""
    return _mwem(x, workload, eps, rounds=rounds, ratio=ratio, total=total,
                 total_ratio=total_ratio, augmented=False, how="mw")


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
    return _mwem(x, workload, eps, rounds=rounds, ratio=ratio, total=total,
                 total_ratio=total_ratio, augmented=True, how="mw")


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
    return _mwem(x, workload, eps, rounds=rounds, ratio=ratio, total=total,
                 total_ratio=total_ratio, augmented=False, how="nnls")


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
    return _mwem(x, workload, eps, rounds=rounds, ratio=ratio, total=total,
                 total_ratio=total_ratio, augmented=True, how="nnls")
