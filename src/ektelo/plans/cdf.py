"""The CDF estimator of Algorithm 1 (εktelo §2.1): a table plan."""

from __future__ import annotations

import numpy as np

from ..matrix import EMatrix, Identity, Prefix
from ..operators import partition
from ..port import ProtectedTable
from ..predicates import Predicate
from .budget import check_eps, split
from .common import estimate
from .registry import register

__all__ = ["cdf_estimator"]


@register(
    "cdf_estimator",
    citation="εktelo Algorithm 1 (Zhang et al., SIGMOD 2018)",
    summary="CDF of one attribute: where, select, vectorize, AHP partition, NNLS",
    data_dependent=True,
    input_kind="table",
    returns="answers",
)
def cdf_estimator(
    table: ProtectedTable,
    workload: EMatrix | None,
    eps: float,
    *,
    attribute: str,
    where: Predicate | None = None,
    ratio: float = 0.5,
) -> np.ndarray:
    """Algorithm 1. `table` is a protected table; `where` an optional row
    predicate. Budget: ratio·ε to AHP's partition, the rest to the noisy
    group counts. Returns W·x̂, with W the Prefix (CDF) workload over
    `attribute` unless another workload is given."""
    eps_part, eps_meas = split(check_eps(eps), ratio, 1 - ratio)
    D = table.where(where) if where is not None else table  # Private, 1-stable
    x = D.select([attribute]).vectorize()  # Private, 1-stable
    noisy = x.laplace(Identity(x.size), eps=eps_part)  # Private→Public: AHP's step 1
    P = partition.ahp(noisy.answers, eps_part, shape=x.shape)  # Public: AHP's clustering
    x_bar = x.reduce_by_partition(P)  # Private, 1-stable
    y = x_bar.laplace(Identity(P.num_groups), eps=eps_meas)  # Private→Public
    x_hat = estimate([y], "nnls")  # Public
    W = Prefix(x.size) if workload is None else workload
    return W @ x_hat
