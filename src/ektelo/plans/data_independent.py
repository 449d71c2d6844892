"""Data-independent plans (§6, Fig. 2 plans 1–6, 10, 11, 13): Query
selection → Vector Laplace → least-squares inference, differing only in the
strategy. Each returns the estimate x̂ (flattened, C order) on x's domain.

Each also measures with the Gaussian mechanism on request (issue 24:
`mechanism="gaussian"` spends a ρ of zCDP, Bun & Steinke 2016): the strategy
does not depend on the data, so only the noise and its accounting change —
the budget is checked against the mechanism by `check_budget` and spent by
`measure`; least squares weighs the rows by their noise variance alike."""

from __future__ import annotations

import numpy as np

from ..kernel import ProtectedVector
from ..matrix import EMatrix
from ..operators import selection
from .budget import Mechanism, PlanBudget, check_budget
from .common import check_workload, estimate, measure, reduce_for_workload
from .registry import register

__all__ = [
    "greedy_h",
    "h2",
    "hb",
    "hdmm",
    "identity",
    "privelet",
    "quadtree",
    "strategy_for",
]


@register(
    "identity",
    citation="Dwork, McSherry, Nissim & Smith, TCC 2006",
    summary="Laplace noise on every cell of the data vector",
    data_dependent=False,
)
def identity(
    x: ProtectedVector,
    workload: EMatrix,
    budget: PlanBudget,
    *,
    workload_reduction: bool = False,
    mechanism: Mechanism = "laplace",
) -> np.ndarray:
    """Identity: all of the budget on the identity strategy (the Laplace
    mechanism; the Gaussian with mechanism="gaussian"), then LS. With
    `workload_reduction`, on the workload's groups (§8). Returns x̂."""
    b = check_budget(budget, mechanism, x)
    x, _, _ = reduce_for_workload(x, workload, workload_reduction)  # Private, 1-stable
    y = measure(x, selection.identity(x.size), b)  # Private→Public
    return estimate([y])  # Public: LS


@register(
    "privelet",
    citation="Xiao, Wang & Gehrke, ICDE 2010",
    summary="Haar wavelet strategy, least-squares reconstruction",
    data_dependent=False,
)
def privelet(
    x: ProtectedVector,
    workload: EMatrix,
    budget: PlanBudget,
    *,
    workload_reduction: bool = False,
    mechanism: Mechanism = "laplace",
) -> np.ndarray:
    """Privelet: the budget on the (n-D) Haar wavelet strategy, then LS. Returns x̂.
    With `workload_reduction`, the 1-D wavelet over the workload's groups."""
    b = check_budget(budget, mechanism, x)
    x, _, _ = reduce_for_workload(x, workload, workload_reduction)  # Private, 1-stable
    y = measure(x, selection.wavelet(x.shape), b)  # Private→Public
    return estimate([y])  # Public: LS


@register(
    "h2",
    citation="Hay, Rastogi, Miklau & Suciu, PVLDB 2010",
    summary="binary hierarchy of range queries, least-squares inference",
    data_dependent=False,
)
def h2(
    x: ProtectedVector,
    workload: EMatrix,
    budget: PlanBudget,
    *,
    workload_reduction: bool = False,
    mechanism: Mechanism = "laplace",
) -> np.ndarray:
    """H2: the budget on the binary hierarchy, then LS (the paper's consistency step).
    With `workload_reduction`, the hierarchy over the workload's groups."""
    b = check_budget(budget, mechanism, x)
    x, _, _ = reduce_for_workload(x, workload, workload_reduction)  # Private, 1-stable
    y = measure(x, selection.h2(x.shape), b)  # Private→Public
    return estimate([y])  # Public: LS (the tree's two passes)


@register(
    "hb",
    citation="Qardaji, Yang & Li, PVLDB 2013",
    summary="hierarchy with the variance-optimal branching factor",
    data_dependent=False,
)
def hb(
    x: ProtectedVector,
    workload: EMatrix,
    budget: PlanBudget,
    *,
    workload_reduction: bool = False,
    mechanism: Mechanism = "laplace",
) -> np.ndarray:
    """HB: the budget on the hierarchy with the optimal branching factor, then LS.
    With `workload_reduction`, the hierarchy over the workload's groups."""
    b = check_budget(budget, mechanism, x)
    x, _, _ = reduce_for_workload(x, workload, workload_reduction)  # Private, 1-stable
    y = measure(x, selection.hb(x.shape), b)  # Private→Public
    return estimate([y])  # Public: LS (the tree's two passes)


@register(
    "quadtree",
    citation="Cormode, Procopiuc, Srivastava, Shen & Yu, ICDE 2012",
    summary="2-D quadtree of range queries, least-squares inference",
    data_dependent=False,
)
def quadtree(
    x: ProtectedVector, workload: EMatrix, budget: PlanBudget, *, mechanism: Mechanism = "laplace"
) -> np.ndarray:
    """QuadTree: the budget on the quadtree over a 2-D domain, then LS."""
    check_workload(x, workload)
    b = check_budget(budget, mechanism, x)
    y = measure(x, selection.quadtree(x.shape), b)  # Private→Public
    return estimate([y])  # Public: LS


@register(
    "greedy_h",
    citation="Li, Hay & Miklau, PVLDB 2014",
    summary="workload-weighted hierarchy (DAWA's GreedyH), least squares",
    data_dependent=False,
)
def greedy_h(
    x: ProtectedVector,
    workload: EMatrix,
    budget: PlanBudget,
    *,
    workload_reduction: bool = False,
    mechanism: Mechanism = "laplace",
) -> np.ndarray:
    """GreedyH: the budget on a hierarchy weighted for the workload, then LS."""
    b = check_budget(budget, mechanism, x)
    x, W, _ = reduce_for_workload(x, workload, workload_reduction)  # Private, 1-stable
    y = measure(x, selection.greedy_h(x.size, W), b)  # Public, then Private→Public
    return estimate([y])  # Public: LS


@register(
    "hdmm",
    citation="McKenna, Miklau, Hay & Machanavajjhala, PVLDB 2018",
    summary="strategy optimised for the workload (High-Dimensional Matrix Mechanism)",
    data_dependent=False,
)
def hdmm(
    x: ProtectedVector,
    workload: EMatrix,
    budget: PlanBudget,
    *,
    workload_reduction: bool = False,
    seed: int = 0,
    mechanism: Mechanism = "laplace",
) -> np.ndarray:
    """HDMM: the budget on the strategy optimised for the workload (public,
    memoised by the operator), then LS. The strategy is chosen for the
    mechanism's error: ‖A‖₁² (Laplace, HDMM §3) or ‖A‖₂² (Gaussian)."""
    b = check_budget(budget, mechanism, x)
    x, W, _ = reduce_for_workload(x, workload, workload_reduction)  # Private, 1-stable
    A = selection.hdmm(W, seed=seed, mechanism=mechanism)  # Public
    y = measure(x, A, b)  # Private→Public
    return estimate([y])  # Public: LS


def strategy_for(
    name: str, shape: tuple[int, ...], workload: EMatrix, *, mechanism: Mechanism = "laplace"
) -> EMatrix | None:
    """The measurement strategy a data-independent plan would use with its
    default parameters and `mechanism` (public), or None if the plan is not
    of that form. This lets callers compute exact expected errors before
    spending budget (HDMM's strategy depends on the mechanism)."""
    n = int(np.prod(shape))
    builders = {
        "identity": lambda: selection.identity(n),
        "privelet": lambda: selection.wavelet(shape),
        "h2": lambda: selection.h2(shape),
        "hb": lambda: selection.hb(shape),
        "quadtree": lambda: selection.quadtree(shape),
        "greedy_h": lambda: selection.greedy_h(n, workload),
        "hdmm": lambda: selection.hdmm(workload, seed=0, mechanism=mechanism),
        "hb_striped_kron": lambda: selection.stripe(
            shape, len(shape) - 1, selection.hb((shape[-1],))
        ),
    }
    build = builders.get(name)
    return None if build is None else build()
