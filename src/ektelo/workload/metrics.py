"""Error metrics for workload answers (public)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..matrix import EMatrix, as_vector

__all__ = ["scaled_l2_error"]


def scaled_l2_error(W: EMatrix, x: Any, x_hat: Any) -> float:
    """DPBench's scaled average per-query L2 error (Hay et al., SIGMOD 2016):
    ‖Wx − Wx̂‖₂ / (|W| · ‖x‖₁), |W| the number of queries."""
    true = as_vector(x, W.shape[1], "x")
    est = as_vector(x_hat, W.shape[1], "x_hat")
    scale = float(np.abs(true).sum())
    if scale == 0:
        raise ValueError("scaled error is undefined for an all-zero data vector")
    return float(np.linalg.norm(W.matvec(true) - W.matvec(est)) / (W.shape[0] * scale))
