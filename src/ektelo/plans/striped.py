"""Striped plans for high-dimensional data (εktelo §9.2, Algorithms 5–6):
split the domain into 1-D stripes along one attribute, run a 1-D subplan on
every stripe in parallel (parallel composition: ε is charged once), and infer
jointly on the full domain. The two HB plans are data-independent and take
`mechanism="gaussian"` as well (a ρ budget, charged once by the same rule:
Algorithm 2's max over a partition holds for zCDP too)."""

from __future__ import annotations

import numpy as np

from ..matrix import EMatrix
from ..operators import partition, selection
from ..port import ProtectedVector
from .budget import Mechanism, PlanBudget, check_budget, check_eps, split
from .common import estimate, measure
from .data_independent import strategy_plan
from .registry import register

__all__ = ["dawa_striped", "hb_striped", "hb_striped_kron"]


@register(
    "hb_striped",
    citation="εktelo §9.2, Algorithm 5",
    summary="HB on every 1-D stripe along one attribute, joint least squares",
    data_dependent=False,
)
def hb_striped(
    x: ProtectedVector,
    workload: EMatrix,
    budget: PlanBudget,
    *,
    axis: int = -1,
    mechanism: Mechanism = "laplace",
) -> np.ndarray:
    """HB-Striped: split x into stripes along `axis`, measure HB on each with
    all of the budget (the stripes are disjoint), LS over all stripes. Returns x̂."""
    b = check_budget(budget, mechanism, x)
    R = partition.stripe(x.shape, axis)  # Public
    M = selection.hb((x.shape[axis],))  # Public: the same HB on every stripe
    ys = [measure(s, M, b) for s in x.split_by_partition(R)]  # Private→Public, in parallel
    return estimate(ys)  # Public: LS, block diagonal: stripe by stripe


@strategy_plan(
    "hb_striped_kron",
    citation="εktelo §9.2, Algorithm 6",
    summary="HB on the stripe attribute ⊗ Identity on the others, one measurement",
    reduction=False,
)
def hb_striped_kron(shape: tuple[int, ...], W: EMatrix, *, axis: int = -1) -> EMatrix:
    """HB-Striped_kron: the same measurements as `hb_striped`, selected at once
    as HB(axis) ⊗ Identity(others) (StripeSelect); all of the budget to one
    measurement; LS (the Kronecker factors' pseudo-inverses)."""
    return selection.stripe(shape, axis, selection.hb)


@register(
    "dawa_striped",
    citation="εktelo §9.2 (plan 18), after Li, Hay & Miklau 2014",
    summary="DAWA on every 1-D stripe along one attribute, joint least squares",
    data_dependent=True,
)
def dawa_striped(
    x: ProtectedVector, workload: EMatrix, eps: float, *, axis: int = -1, ratio: float = 0.25
) -> np.ndarray:
    """DAWA-Striped: on each stripe (in parallel, so ε is charged once):
    ratio·ε to DAWA's private partition, the rest to GreedyH's strategy for
    the workload restricted to the stripe, on the groups; LS over all stripes.

    The stripes' strategies are measured by one Laplace call on x: their
    union, each group interval written as the range of its cells
    (`selection.greedy_h_stripes`: the same answers as measuring the
    stripe's group totals). The stripes share no cell, so the union's
    sensitivity — computed by the kernel — is the largest of theirs (1 for
    GreedyH) and its noise that of each stripe's own call; the stripes'
    partitions are charged ratio·ε once through their split (parallel
    composition, Algorithm 2), the union (1 − ratio)·ε on x: ε in all, as
    stripe-by-stripe measurement."""
    eps_part, eps_meas = split(check_eps(eps), ratio, 1 - ratio)
    R = partition.stripe(x.shape, axis)  # Public
    W = selection.stripe_workloads(workload, x.shape, axis)  # Public: W on every stripe
    P = [s.dawa_partition(eps=eps_part, ratio=ratio) for s in x.split_by_partition(R)]  # Priv→Pub
    M = selection.greedy_h_stripes(x.shape, axis, P, W)  # Public
    y = x.laplace(M, eps=eps_meas)  # Private→Public
    return estimate([y])  # Public: LS, line by line (each stripe on its own)
