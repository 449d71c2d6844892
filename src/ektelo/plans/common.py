"""Small building blocks shared by plans (all public, client-side)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..matrix import EMatrix, Partition, Product, Sparse
from ..operators import inference
from ..operators import partition as partition_ops

__all__ = ["estimate", "measure_and_infer", "reduce_for_workload"]


def estimate(measurements: list[Any], how: str = "ls", **options: Any) -> np.ndarray:
    """Run the named inference operator on all measurements (§5.5)."""
    if how == "ls":
        return inference.least_squares(measurements, **options)
    if how == "nnls":
        return inference.nnls(measurements, **options)
    raise ValueError(f"inference must be 'ls' or 'nnls', got {how!r}")


def measure_and_infer(x: Any, strategy: EMatrix, eps: float, how: str = "ls") -> np.ndarray:
    """The commonest idiom (§6.2): Query selection → Vector Laplace → LS."""
    return estimate([x.laplace(strategy, eps=eps)], how)


def reduce_for_workload(
    x: Any, workload: EMatrix, enabled: bool
) -> tuple[Any, EMatrix, Partition | None]:
    """Workload-based domain reduction (§8) when `enabled`: (x', W', P).

    W' = W·S, S selecting one cell of each group: W's columns are equal
    within a group, so this is W·P⁺ (Prop. 1) with W's own entries, exactly.
    P⁺'s averages of equal columns round (ten 1/10s sum to 1 − 2⁻⁵³), which
    makes an integer workload's reduced queries non-integral: the kernel
    would then draw continuous noise with a padded sensitivity instead of
    its integer mechanism."""
    if not enabled:
        return x, workload, None
    P = partition_ops.workload_based(workload)
    first = np.full(P.num_groups, P.size, dtype=np.int64)
    np.minimum.at(first, P.groups, np.arange(P.size, dtype=np.int64))
    k = P.num_groups
    select = sp.csr_matrix((np.ones(k), (first, np.arange(k))), shape=(P.size, k))
    return x.reduce_by_partition(P), Product(workload, Sparse(select)), P
