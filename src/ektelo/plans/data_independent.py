"""Data-independent plans (§6, Fig. 2 plans 1–6, 10, 11, 13): Query
selection → Vector Laplace → least-squares inference, differing only in the
strategy. Each returns the estimate x̂ (flattened, C order) on x's domain."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..matrix import EMatrix
from ..operators import selection
from ..operators.selection import greedy_h as greedy_h_strategy
from ..operators.selection import hdmm as hdmm_strategy
from ._registry import register
from .budget import check_eps
from .common import measure_and_infer, reduce_for_workload

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
    x: Any, workload: EMatrix, eps: float, *, workload_reduction: bool = False
) -> np.ndarray:
    """Identity: all of ε on the identity strategy (Laplace mechanism), then LS.

    Budget: ε to the single measurement. Returns x̂ on x's domain.
    """
    eps = check_eps(eps)
    x_red, _, _ = reduce_for_workload(x, workload, workload_reduction)
    return measure_and_infer(x_red, selection.identity(x_red.size), eps)


def _on_shape(
    x: Any, workload: EMatrix, eps: float, strategy: Any, workload_reduction: bool
) -> np.ndarray:
    """ε on `strategy(shape)` for x's shape — or, after workload-based
    reduction, for the 1-D vector of the workload's groups — then LS."""
    eps = check_eps(eps)
    x_red, _, P = reduce_for_workload(x, workload, workload_reduction)
    shape = x.shape if P is None else (x_red.size,)
    return measure_and_infer(x_red, strategy(shape), eps)


@register(
    "privelet",
    citation="Xiao, Wang & Gehrke, ICDE 2010",
    summary="Haar wavelet strategy, least-squares reconstruction",
    data_dependent=False,
)
def privelet(
    x: Any, workload: EMatrix, eps: float, *, workload_reduction: bool = False
) -> np.ndarray:
    """Privelet: ε on the (n-D) Haar wavelet strategy, then LS. Returns x̂.
    With `workload_reduction`, the 1-D wavelet over the workload's groups."""
    return _on_shape(x, workload, eps, selection.wavelet, workload_reduction)


@register(
    "h2",
    citation="Hay, Rastogi, Miklau & Suciu, PVLDB 2010",
    summary="binary hierarchy of range queries, least-squares inference",
    data_dependent=False,
)
def h2(x: Any, workload: EMatrix, eps: float, *, workload_reduction: bool = False) -> np.ndarray:
    """H2: ε on the binary hierarchy, then LS (the paper's consistency step).
    With `workload_reduction`, the hierarchy over the workload's groups."""
    return _on_shape(x, workload, eps, selection.h2, workload_reduction)


@register(
    "hb",
    citation="Qardaji, Yang & Li, PVLDB 2013",
    summary="hierarchy with the variance-optimal branching factor",
    data_dependent=False,
)
def hb(x: Any, workload: EMatrix, eps: float, *, workload_reduction: bool = False) -> np.ndarray:
    """HB: ε on the hierarchy with the optimal branching factor, then LS.
    With `workload_reduction`, the hierarchy over the workload's groups."""
    return _on_shape(x, workload, eps, selection.hb, workload_reduction)


@register(
    "quadtree",
    citation="Cormode, Procopiuc, Srivastava, Shen & Yu, ICDE 2012",
    summary="2-D quadtree of range queries, least-squares inference",
    data_dependent=False,
)
def quadtree(x: Any, workload: EMatrix, eps: float) -> np.ndarray:
    """QuadTree: ε on the quadtree over a 2-D domain, then LS."""
    return measure_and_infer(x, selection.quadtree(x.shape), check_eps(eps))


@register(
    "greedy_h",
    citation="Li, Hay & Miklau, PVLDB 2014",
    summary="workload-weighted hierarchy (DAWA's GreedyH), least squares",
    data_dependent=False,
)
def greedy_h(
    x: Any, workload: EMatrix, eps: float, *, workload_reduction: bool = False
) -> np.ndarray:
    """GreedyH: ε on a hierarchy weighted for the workload, then LS."""
    eps = check_eps(eps)
    x_red, W_red, _ = reduce_for_workload(x, workload, workload_reduction)
    return measure_and_infer(x_red, greedy_h_strategy(x_red.size, W_red), eps)


@register(
    "hdmm",
    citation="McKenna, Miklau, Hay & Machanavajjhala, PVLDB 2018",
    summary="strategy optimised for the workload (High-Dimensional Matrix Mechanism)",
    data_dependent=False,
)
def hdmm(
    x: Any, workload: EMatrix, eps: float, *, workload_reduction: bool = False, seed: int = 0
) -> np.ndarray:
    """HDMM: ε on the strategy optimised for the workload (public), then LS."""
    eps = check_eps(eps)
    x_red, W_red, _ = reduce_for_workload(x, workload, workload_reduction)
    # The strategy is memoised by the operator: trials, datasets and
    # `strategy_for` on one workload optimise once.
    return measure_and_infer(x_red, hdmm_strategy(W_red, seed=seed), eps)


def strategy_for(name: str, shape: tuple[int, ...], workload: EMatrix) -> EMatrix | None:
    """The measurement strategy a data-independent plan would use with its
    default parameters (public), or None if the plan is not of that form.
    This lets callers compute exact expected errors before spending budget."""
    n = int(np.prod(shape))
    builders = {
        "identity": lambda: selection.identity(n),
        "privelet": lambda: selection.wavelet(shape),
        "h2": lambda: selection.h2(shape),
        "hb": lambda: selection.hb(shape),
        "quadtree": lambda: selection.quadtree(shape),
        "greedy_h": lambda: greedy_h_strategy(n, workload),
        "hdmm": lambda: hdmm_strategy(workload, seed=0),
        "hb_striped_kron": lambda: selection.stripe(
            shape, len(shape) - 1, selection.hb((shape[-1],))
        ),
    }
    build = builders.get(name)
    return None if build is None else build()
