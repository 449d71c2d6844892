"""Data-dependent plans (§6, Fig. 2): Uniform, UniformGrid, AdaptiveGrid, AHP
and DAWA. The data-dependent steps (noisy totals, private partitions) run
inside the kernel; everything here is public post-processing."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..matrix import Dense, EMatrix, Identity, Partition, RangeQueries, Sparse, Total
from ..measurement import Measurement
from ..operators import partition as partition_ops
from ..operators import selection
from ..operators.selection import greedy_h as greedy_h_strategy
from ._registry import register
from .budget import check_eps, split
from .common import estimate, reduce_for_workload

__all__ = ["adaptive_grid", "ahp", "dawa", "uniform", "uniform_grid"]


@register(
    "uniform",
    citation="Hay, Machanavajjhala, Miklau et al., SIGMOD 2016 (DPBench baseline)",
    summary="noisy total spread uniformly over the domain",
    data_dependent=True,
)
def uniform(x: Any, workload: EMatrix, eps: float) -> np.ndarray:
    """Uniform: ε on the total; x̂ spreads it evenly (the LS solution)."""
    return estimate([x.laplace(Total(x.size), eps=check_eps(eps))])


def _total_for_grid(
    x: Any, eps: float, total: float | None, total_ratio: float
) -> tuple[float, list[Any], float]:
    """A public total for grid sizing: given, or a noisy total (kept for LS)."""
    if total is not None:
        return float(total), [], eps
    eps_total, eps_rest = split(eps, total_ratio, 1 - total_ratio)
    m = x.laplace(Total(x.size), eps=eps_total)
    return max(float(m.answers[0]), 0.0), [m], eps_rest


@register(
    "uniform_grid",
    citation="Qardaji, Yang & Li, ICDE 2013",
    summary="uniform grid sized by the (noisy) total, least squares",
    data_dependent=True,
)
def uniform_grid(
    x: Any,
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
    n_total, measurements, eps_grid = _total_for_grid(x, eps, total, total_ratio)
    grid = selection.uniform_grid(x.shape, n_total, eps_grid)
    measurements.append(x.laplace(grid, eps=eps_grid))
    return estimate(measurements)


@register(
    "adaptive_grid",
    citation="Qardaji, Yang & Li, ICDE 2013",
    summary="two-level grid, second level sized by first-level noisy counts",
    data_dependent=True,
)
def adaptive_grid(
    x: Any,
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
    n_total, measurements, eps_rest = _total_for_grid(x, eps, total, total_ratio)
    eps1, eps2 = split(eps_rest, alpha, 1 - alpha)
    level1 = selection.ag_first_level(x.shape, n_total, eps_rest)
    m1 = x.laplace(level1, eps=eps1)
    level2 = selection.ag_second_level(x.shape, level1, m1.answers, eps_rest, alpha=alpha)
    measurements += [m1, x.laplace(level2, eps=eps2)]
    return estimate(measurements)


@register(
    "ahp",
    citation="Zhang, Chen, Xu, Meng & Xie, SDM 2014",
    summary="private clustering of similar counts, then noisy group totals",
    data_dependent=True,
)
def ahp(
    x: Any,
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
    x_red, _, _ = reduce_for_workload(x, workload, workload_reduction)
    P = x_red.ahp_partition(eps=eps_part, eta=eta)  # Private→Public
    groups = x_red.reduce_by_partition(P)  # Private, 1-stable
    return estimate([groups.laplace(Identity(P.num_groups), eps=eps_meas)])


@register(
    "dawa",
    citation="Li, Hay & Miklau, PVLDB 2014",
    summary="private L1 interval partition, then GreedyH on the groups",
    data_dependent=True,
)
def dawa(
    x: Any,
    workload: EMatrix,
    eps: float,
    *,
    ratio: float = 0.25,
    approximate: bool | None = None,
    workload_reduction: bool = False,
) -> np.ndarray:
    """DAWA: ratio·ε to the private L1 partition (2-D via the Hilbert order),
    the rest to GreedyH's strategy for the reduced workload; LS."""
    eps_part, eps_meas = split(check_eps(eps), ratio, 1 - ratio)
    x_red, W_red, P_w = reduce_for_workload(x, workload, workload_reduction)
    P = x_red.dawa_partition(eps=eps_part, approximate=approximate, ratio=ratio)  # Private→Public
    groups = x_red.reduce_by_partition(P)  # Private, 1-stable
    M = _greedy_h_along_order(P, W_red)  # Public
    m = groups.laplace(M, eps=eps_meas)
    chain = [P] if P_w is None else [P_w, P]  # root cells → groups
    if not _measures_root_groups(m, chain):  # x itself derives from another vector
        return estimate([m])
    return estimate([m], groups=chain)  # Public: LS on the k group totals


def _measures_root_groups(m: Measurement, chain: list[Partition]) -> bool:
    """Whether m's query on the root is its query on the group totals composed
    with the partitions in `chain` only (checked on a fixed public probe)."""
    if m.query_on_root.shape[1] != chain[0].size:
        return False
    probe = np.random.default_rng(0).random(chain[0].size)
    reduced = probe
    for Q in chain:
        reduced = Q.reduce(reduced)
    return bool(np.allclose(m.query_on_root @ probe, m.query @ reduced, rtol=1e-9, atol=0.0))


def _greedy_h_along_order(P: Partition, W: EMatrix) -> EMatrix:
    """GreedyH's strategy for the workload W (on x's cells) reduced to DAWA's
    buckets, its tree built over neighbouring buckets of DAWA's 1-D order.

    For 2-D data that order is the Hilbert curve, but `Partition` numbers
    groups by their first cell in C order: the buckets are put in curve order
    by a permutation C ((C·y)[r] = total of the r-th bucket along the curve),
    GreedyH runs on W P⁺ Cᵀ and its strategy is applied as M C (same
    sensitivity: C only permutes columns). For 1-D data the orders agree.
    """
    k = P.num_groups
    if len(P.domain_shape) != 2:
        return greedy_h_strategy(k, P.reduce_workload(W))
    along = P.groups[partition_ops.hilbert_order(P.domain_shape)]
    first = np.full(k, along.size)
    np.minimum.at(first, along, np.arange(along.size))
    order = np.argsort(first)  # the groups along the curve
    rank = np.argsort(order)
    C = Sparse(sp.csr_matrix((np.ones(k), (rank, np.arange(k))), shape=(k, k)))
    reduced = _dense_reduced_ranges(P, W, order)
    if reduced is None:
        reduced = P.reduce_workload(W) @ C.T
    return greedy_h_strategy(k, reduced) @ C


def _dense_reduced_ranges(P: Partition, W: EMatrix, order: np.ndarray) -> EMatrix | None:
    """W P⁺ Cᵀ (q × k, groups taken in `order`) held densely, when W is a set
    of 2-D ranges and every group is a rectangle — as every bucket of the
    dyadic (approximate) DAWA partition is: an aligned Hilbert interval of 4^j
    cells is a square, of 2·4^j two neighbouring squares. GreedyH then works
    on these q rows. Entry (i, r) = |range_i ∩ g| / |g| for g = order[r],
    from the overlaps per axis. None otherwise (or when too large).
    """
    k = P.num_groups
    if not (
        isinstance(W, RangeQueries)
        and not W.transposed
        and len(W.domain_shape) == 2
        and W.num_queries * k <= _DENSE_REDUCED_MAX
    ):
        return None
    rows, cols = np.divmod(np.arange(P.size), W.domain_shape[1])
    box = [np.full(k, P.size), np.full(k, -1), np.full(k, P.size), np.full(k, -1)]
    np.minimum.at(box[0], P.groups, rows)
    np.maximum.at(box[1], P.groups, rows)
    np.minimum.at(box[2], P.groups, cols)
    np.maximum.at(box[3], P.groups, cols)
    if not np.array_equal((box[1] - box[0] + 1) * (box[3] - box[2] + 1), P.sizes):
        return None
    # overlaps per axis, once per distinct extent of the groups on that axis
    overlap = []
    for axis, (start, stop) in enumerate(((box[0], box[1]), (box[2], box[3]))):
        extents, which = np.unique(np.stack([start, stop]), axis=1, return_inverse=True)
        length = np.minimum(W.upper[:, axis], extents[1][:, None])
        length -= np.maximum(W.lower[:, axis], extents[0][:, None])
        overlap.append((np.maximum(length + 1, 0).astype(np.float64), which.reshape(-1)[order]))
    (by_row, row_of), (by_col, col_of) = overlap
    inv_size = 1.0 / P.sizes[order, None]
    out = np.empty((k, W.num_queries))  # transposed: a group's column is contiguous
    step = max(1, 2**21 // W.num_queries)
    for g in range(0, k, step):
        s = slice(g, g + step)
        np.multiply(by_row[row_of[s]], by_col[col_of[s]], out=out[s])
        out[s] *= inv_size[s]
    out.setflags(write=False)
    return Dense._wrap(out).T  # finite by construction: no validating copy; a view


_DENSE_REDUCED_MAX = 2**26  # entries of a dense W P⁺ (512 MiB)
