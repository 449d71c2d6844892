"""Small building blocks shared by plans (all public, client-side): the
measurement with the plan's mechanism (Laplace or Gaussian), the inference
step as plans call it, workload-based reduction (§8), a public or noisy
total, and the checks of hyper-parameters, made before any spending."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import inference
from ..budget import ZCDP, PureDP
from ..matrix import EMatrix, Partition, Total
from ..measurement import Measurement
from ..operators import partition
from ..port import ProtectedVector
from .budget import split

__all__ = [
    "check_choice",
    "check_count",
    "check_flag",
    "check_share",
    "check_total",
    "check_workload",
    "estimate",
    "known_total",
    "measure",
    "reduce_for_workload",
]


def measure(x: ProtectedVector, M: EMatrix, budget: PureDP | ZCDP) -> Measurement:
    """Private→Public: M·x with the noise of the budget's kind (a budget from
    `check_budget`): Vector Laplace for PureDP(ε) (§5.3), the Gaussian
    mechanism for ZCDP(ρ) (Bun & Steinke 2016; σ ≥ Δ₂(M)/√(2ρ)). Either way
    the kernel computes M's sensitivity and charges exactly the budget."""
    if isinstance(budget, ZCDP):
        return x.gaussian(M, rho=budget.rho)
    return x.laplace(M, eps=budget.epsilon)


def estimate(measurements: list[Measurement], how: str = "ls", **options: Any) -> np.ndarray:
    """Run the named inference operator (§5.5: "ls" least squares, "nnls"
    non-negative least squares) on all measurements; the estimate of the
    root, flattened (C order)."""
    if how == "ls":
        return inference.least_squares(measurements, **options).x.reshape(-1)
    if how == "nnls":
        return inference.nnls(measurements, **options).x.reshape(-1)
    raise ValueError(f"inference must be 'ls' or 'nnls', got {how!r}")


def reduce_for_workload(
    x: ProtectedVector, workload: EMatrix, enabled: bool
) -> tuple[ProtectedVector, EMatrix, Partition | None]:
    """Workload-based domain reduction (§8) when `enabled`: (x', W', P), W'
    the workload on the groups with its own entries (`Partition.select_workload`);
    else (x, W, None)."""
    check_workload(x, workload)
    if not enabled:
        return x, workload, None
    P = partition.workload_based(workload)
    return x.reduce_by_partition(P), P.select_workload(workload), P


def check_workload(x: ProtectedVector, workload: Any) -> None:
    """Refuse a workload whose columns are not x's cells (before any spending):
    an estimate of x answers it only when W·x̂ is defined."""
    shape = getattr(workload, "shape", None)
    if shape is None or len(shape) != 2:
        raise TypeError(f"workload must be a matrix (an EMatrix), got {type(workload).__name__}")
    if int(shape[1]) != x.size:
        raise ValueError(
            f"the workload has {int(shape[1])} columns but the data vector has {x.size} cells "
            f"(shape {x.shape}): build the workload over the same domain"
        )


def known_total(
    x: ProtectedVector, eps: float, total: float | None, total_ratio: float, at_least: float = 0.0
) -> tuple[float, list[Measurement], float]:
    """A public total for the plan: `total` when given (then all of ε is
    left), else a noisy one bought with total_ratio·ε (at least `at_least`),
    its measurement kept for inference. Returns (total, measurements so far,
    ε left)."""
    if total is not None:
        return float(total), [], eps
    eps_total, eps_rest = split(eps, total_ratio, 1 - total_ratio)
    m = x.laplace(Total(x.size), eps=eps_total)  # Private→Public
    return max(float(m.answers[0]), at_least), [m], eps_rest


# -- hyper-parameter checks (before the first charge) -----------------------------------
def check_count(value: Any, name: str, limit: int) -> int:
    """An iteration count: an int (not a float, not a bool) in 1..limit."""
    if (
        isinstance(value, bool | np.bool_)
        or not isinstance(value, int | np.integer)
        or not 1 <= value <= limit
    ):
        raise ValueError(f"{name} must be an integer in 1..{limit:,}, got {value!r}")
    return int(value)


def check_share(value: Any, name: str) -> float:
    """A budget share: a number strictly between 0 and 1 (a Python float, as
    `split` takes it; NumPy's float64 is one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number strictly between 0 and 1, got {value!r}")
    if not 0 < float(value) < 1:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")
    return float(value)


def check_total(total: Any) -> float:
    """A public total: a positive finite number."""
    if isinstance(total, bool) or not isinstance(total, (int, float, np.integer, np.floating)):
        raise TypeError(f"total must be a positive number or None, got {type(total).__name__}")
    value = float(total)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"total must be a positive finite number, got {total!r}")
    return value


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    """One of the named choices of an operator."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def check_flag(value: Any, name: str) -> bool:
    """True or False (NumPy's booleans too)."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)
