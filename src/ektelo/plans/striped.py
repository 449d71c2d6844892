"""Striped plans for high-dimensional data (εktelo §9.2, Algorithms 5–6):
split the domain into 1-D stripes along one attribute, run a 1-D subplan on
every stripe in parallel (parallel composition: ε is charged once), and infer
jointly on the full domain."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..matrix import EMatrix, Prefix
from ..operators import partition as partition_ops
from ..operators import selection
from ..operators.strategies_opt import greedy_h as greedy_h_strategy
from ._registry import register
from .budget import check_eps, split
from .common import estimate

__all__ = ["dawa_striped", "hb_striped", "hb_striped_kron"]


def _axis(x: Any, axis: int) -> int:
    if not -len(x.shape) <= axis < len(x.shape):
        raise ValueError(f"stripe axis {axis} out of range for a {len(x.shape)}-D vector")
    return axis % len(x.shape)


@register(
    "hb_striped",
    citation="εktelo §9.2, Algorithm 5",
    summary="HB on every 1-D stripe along one attribute, joint least squares",
    data_dependent=False,
)
def hb_striped(x: Any, workload: EMatrix, eps: float, *, axis: int = -1) -> np.ndarray:
    """HB-Striped: split x into stripes along `axis`, measure HB on each with
    all of ε (the stripes are disjoint), LS over all stripes. Returns x̂."""
    eps, axis = check_eps(eps), _axis(x, axis)
    stripes = x.split_by_partition(partition_ops.stripe(x.shape, axis))
    strategy = selection.hb((x.shape[axis],))
    return estimate([s.laplace(strategy, eps=eps) for s in stripes])


@register(
    "hb_striped_kron",
    citation="εktelo §9.2, Algorithm 6",
    summary="HB on the stripe attribute ⊗ Identity on the others, one measurement",
    data_dependent=False,
)
def hb_striped_kron(x: Any, workload: EMatrix, eps: float, *, axis: int = -1) -> np.ndarray:
    """HB-Striped_kron: the same measurements as `hb_striped`, selected at once
    as HB(axis) ⊗ Identity(others); all of ε to one Laplace call; LS."""
    eps, axis = check_eps(eps), _axis(x, axis)
    strategy = selection.stripe(x.shape, axis, selection.hb((x.shape[axis],)))
    return estimate([x.laplace(strategy, eps=eps)])


@register(
    "dawa_striped",
    citation="εktelo §9.2 (plan 18), after Li, Hay & Miklau 2014",
    summary="DAWA on every 1-D stripe along one attribute, joint least squares",
    data_dependent=True,
)
def dawa_striped(
    x: Any, workload: EMatrix, eps: float, *, axis: int = -1, ratio: float = 0.25
) -> np.ndarray:
    """DAWA-Striped: on each stripe (in parallel, so ε is charged once):
    ratio·ε to DAWA's private partition, the rest to GreedyH's strategy for
    the stripe's prefix workload on the groups; LS over all stripes."""
    eps, axis = check_eps(eps), _axis(x, axis)
    eps_part, eps_meas = split(eps, ratio, 1 - ratio)
    stripes = x.split_by_partition(partition_ops.stripe(x.shape, axis))
    stripe_workload = Prefix(x.shape[axis])
    measurements = []
    for s in stripes:
        P = s.dawa_partition(eps=eps_part, ratio=ratio)  # Private→Public
        groups = s.reduce_by_partition(P)  # Private, 1-stable
        M = greedy_h_strategy(P.num_groups, P.reduce_workload(stripe_workload))
        measurements.append(groups.laplace(M, eps=eps_meas))
    return estimate(measurements)
