"""Data-dependent plans (§6, Fig. 2): Uniform, UniformGrid, AdaptiveGrid, AHP
and DAWA. The data-dependent steps (noisy totals, private partitions) run
inside the kernel; everything here is public post-processing."""

from __future__ import annotations

import numpy as np

from ..matrix import EMatrix, Identity, Total
from ..operators import partition, selection
from ..port import ProtectedVector
from .budget import check_eps, split
from .common import estimate, known_total, reduce_for_workload
from .registry import register

__all__ = ["adaptive_grid", "ahp", "dawa", "uniform", "uniform_grid"]


@register(
    "uniform",
    citation="Hay, Machanavajjhala, Miklau et al., SIGMOD 2016 (DPBench baseline)",
    summary="noisy total spread uniformly over the domain",
    data_dependent=True,
)
def uniform(x: ProtectedVector, workload: EMatrix, eps: float) -> np.ndarray:
    """Uniform: ε on the total; x̂ spreads it evenly (the LS solution)."""
    y = x.laplace(Total(x.size), eps=check_eps(eps))  # Private→Public
    return estimate([y])  # Public: LS


@register(
    "uniform_grid",
    citation="Qardaji, Yang & Li, ICDE 2013",
    summary="uniform grid sized by the (noisy) total, least squares",
    data_dependent=True,
)
def uniform_grid(
    x: ProtectedVector,
    workload: EMatrix,
    eps: float,
    *,
    total: float | None = None,
    total_ratio: float = 0.05,
) -> np.ndarray:
    """UniformGrid: an m×m grid with m = √(Nε/10) over a 2-D domain.

    Budget: if `total` (N) is public it is used and all of ε measures the
    grid; otherwise `total_ratio`·ε buys a noisy total (also used in
    inference) and the rest measures the grid. Returns x̂ by LS.
    """
    eps = check_eps(eps)
    total, ys, eps = known_total(x, eps, total, total_ratio)  # public, or Private→Public
    M = selection.uniform_grid(x.shape, total, eps)  # Public
    ys.append(x.laplace(M, eps=eps))  # Private→Public
    return estimate(ys)  # Public: LS


@register(
    "adaptive_grid",
    citation="Qardaji, Yang & Li, ICDE 2013",
    summary="two-level grid, second level sized by first-level noisy counts",
    data_dependent=True,
)
def adaptive_grid(
    x: ProtectedVector,
    workload: EMatrix,
    eps: float,
    *,
    alpha: float = 0.5,
    total: float | None = None,
    total_ratio: float = 0.05,
) -> np.ndarray:
    """AdaptiveGrid: level-1 grid with α·ε, per-cell level-2 grids with the
    rest, sized from the level-1 noisy counts (public); LS over both levels.
    The total for sizing is public (`total`) or noisy (`total_ratio`·ε)."""
    eps = check_eps(eps)
    total, ys, eps = known_total(x, eps, total, total_ratio)  # public, or Private→Public
    eps1, eps2 = split(eps, alpha, 1 - alpha)
    M1 = selection.ag_first_level(x.shape, total, eps)  # Public
    y1 = x.laplace(M1, eps=eps1)  # Private→Public
    M2 = selection.ag_second_level(x.shape, M1, y1.answers, eps, alpha=alpha)  # Public
    ys += [y1, x.laplace(M2, eps=eps2)]  # Private→Public
    return estimate(ys)  # Public: LS over both levels


@register(
    "ahp",
    citation="Zhang, Chen, Xu, Meng & Xie, SDM 2014",
    summary="private clustering of similar counts, then noisy group totals",
    data_dependent=True,
)
def ahp(
    x: ProtectedVector,
    workload: EMatrix,
    eps: float,
    *,
    ratio: float = 0.85,
    eta: float = 0.35,
    workload_reduction: bool = False,
) -> np.ndarray:
    """AHP: ratio·ε to AHP's private partition, the rest to the group totals;
    LS spreads each total uniformly over its group."""
    eps_part, eps_meas = split(check_eps(eps), ratio, 1 - ratio)
    x, _, _ = reduce_for_workload(x, workload, workload_reduction)  # Private, 1-stable
    noisy = x.laplace(Identity(x.size), eps=eps_part)  # Private→Public: AHP's step 1
    P = partition.ahp(noisy.answers, eps_part, shape=x.shape, eta=eta)  # Public: clustering
    y = x.reduce_by_partition(P).laplace(Identity(P.num_groups), eps=eps_meas)  # Private→Public
    return estimate([y])  # Public: LS


@register(
    "dawa",
    citation="Li, Hay & Miklau, PVLDB 2014",
    summary="private L1 interval partition, then GreedyH on the groups",
    data_dependent=True,
)
def dawa(
    x: ProtectedVector,
    workload: EMatrix,
    eps: float,
    *,
    ratio: float = 0.25,
    approximate: bool | None = None,
    workload_reduction: bool = False,
) -> np.ndarray:
    """DAWA: ratio·ε to the private L1 partition (2-D via the Hilbert order),
    the rest to GreedyH's strategy for the workload on the groups; LS on the
    groups' totals, each spread evenly over its cells."""
    eps_part, eps_meas = split(check_eps(eps), ratio, 1 - ratio)
    x, W, _ = reduce_for_workload(x, workload, workload_reduction)  # Private, 1-stable
    P = x.dawa_partition(eps=eps_part, approximate=approximate, ratio=ratio)  # Private→Public
    M = selection.greedy_h_on_partition(P, W)  # Public
    y = x.reduce_by_partition(P).laplace(M, eps=eps_meas)  # Private→Public
    return estimate([y], groups="measured")  # Public: LS on the groups y was taken on
