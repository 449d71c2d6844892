"""Small building blocks shared by plans (all public, client-side)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import inference
from ..matrix import EMatrix, Partition
from ..operators import partition as partition_ops

__all__ = ["estimate", "measure_and_infer", "reduce_for_workload"]


def estimate(measurements: list[Any], how: str = "ls", **options: Any) -> np.ndarray:
    """Run the named inference operator on all measurements (§5.5); the
    estimate of the root, flattened."""
    if how == "ls":
        return inference.least_squares(measurements, **options).x.reshape(-1)
    if how == "nnls":
        return inference.nnls(measurements, **options).x.reshape(-1)
    raise ValueError(f"inference must be 'ls' or 'nnls', got {how!r}")


def measure_and_infer(x: Any, strategy: EMatrix, eps: float, how: str = "ls") -> np.ndarray:
    """The commonest idiom (§6.2): Query selection → Vector Laplace → LS."""
    return estimate([x.laplace(strategy, eps=eps)], how)


def reduce_for_workload(
    x: Any, workload: EMatrix, enabled: bool
) -> tuple[Any, EMatrix, Partition | None]:
    """Workload-based domain reduction (§8) when `enabled`: (x', W', P), W'
    the workload on the groups with its own entries (`Partition.select_workload`)."""
    if not enabled:
        return x, workload, None
    P = partition_ops.workload_based(workload)
    return x.reduce_by_partition(P), P.select_workload(workload), P
