"""Data-independent plans (§6, Fig. 2 plans 1–6, 10, 11, 13): Query
selection → Vector Laplace → least-squares inference, differing only in the
strategy. Each returns the estimate x̂ (flattened, C order) on x's domain.

A plan of this family is declared by its strategy, once: `@strategy_plan`
takes the function (shape, workload, *, hyper-parameters) → the strategy
matrix (public), registers it as the plan's strategy (what `strategy_for`
and the planner price before anything is spent) and makes the plan from it,
the one body every plan of the family shares (`_run`). The plans are plain
functions of this module with the family's signature: (x, workload, budget,
*, workload_reduction=False, <the strategy's hyper-parameters>,
mechanism="laplace").

Each also measures with the Gaussian mechanism on request (issue 24:
`mechanism="gaussian"` spends a ρ of zCDP, Bun & Steinke 2016): the strategy
does not depend on the data, so only the noise and its accounting change —
the budget is checked against the mechanism by `check_budget` and spent by
`measure`; least squares weighs the rows by their noise variance alike."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..matrix import EMatrix
from ..operators import selection
from ..port import ProtectedVector
from .budget import Mechanism, check_budget
from .common import estimate, measure, reduce_for_workload
from .registry import register, strategy_of

__all__ = [
    "greedy_h",
    "h2",
    "hb",
    "hdmm",
    "identity",
    "privelet",
    "quadtree",
    "strategy_for",
    "strategy_plan",
]

#: a strategy: (shape of x, workload on x, *, hyper-parameters) → the matrix measured
Strategy = Callable[..., EMatrix]

_KW = inspect.Parameter.KEYWORD_ONLY


def _run(
    strategy: Strategy, x: ProtectedVector, workload: EMatrix, budget: Any,
    workload_reduction: bool, mechanism: str, hyper: dict[str, Any],
) -> np.ndarray:  # fmt: skip
    """The family's one body: all of the budget on the strategy, then LS."""
    b = check_budget(budget, mechanism, x)
    x, W, _ = reduce_for_workload(x, workload, workload_reduction)  # Private, 1-stable (§8)
    if _takes_mechanism(strategy):  # chosen for its error (HDMM)
        hyper = {**hyper, "mechanism": mechanism}
    y = measure(x, strategy(x.shape, W, **hyper), b)  # Public, then Private→Public
    return estimate([y])  # Public: LS


@functools.cache
def _takes_mechanism(strategy: Strategy) -> bool:
    """Whether the strategy chooses by the mechanism (read once per strategy:
    a signature costs as much as an Identity plan's own work)."""
    return "mechanism" in inspect.signature(strategy).parameters


def strategy_plan(
    name: str, *, citation: str, summary: str, reduction: bool = True
) -> Callable[[Strategy], Callable[..., np.ndarray]]:
    """Declare the data-independent plan `name` by its strategy (the decorated
    function, whose docstring is the plan's) and register it. `reduction`:
    the plan offers `workload_reduction` (§8: the strategy over the
    workload's groups). Returns the plan."""

    def wrap(strategy: Strategy) -> Callable[..., np.ndarray]:
        hyper = [p for p in inspect.signature(strategy).parameters.values()
                 if p.kind is _KW and p.name != "mechanism"]  # fmt: skip
        P = inspect.Parameter
        signature = inspect.Signature([
            P("x", P.POSITIONAL_OR_KEYWORD, annotation="ProtectedVector"),
            P("workload", P.POSITIONAL_OR_KEYWORD, annotation="EMatrix"),
            P("budget", P.POSITIONAL_OR_KEYWORD, annotation="PlanBudget"),
            *([P("workload_reduction", _KW, default=False, annotation="bool")] if reduction
              else []),
            *hyper,
            P("mechanism", _KW, default="laplace", annotation="Mechanism"),
        ], return_annotation="np.ndarray")  # fmt: skip

        def plan(*args: Any, **kwargs: Any) -> np.ndarray:
            given = signature.bind(*args, **kwargs)  # TypeError for an unknown option
            given.apply_defaults()
            a = given.arguments
            return _run(strategy, a["x"], a["workload"], a["budget"],
                        bool(a.get("workload_reduction", False)), a["mechanism"],
                        {p.name: a[p.name] for p in hyper})  # fmt: skip

        plan.__name__ = plan.__qualname__ = name
        plan.__module__ = strategy.__module__
        plan.__doc__ = strategy.__doc__
        plan.__signature__ = signature  # type: ignore[attr-defined]
        register(name, citation=citation, summary=summary, data_dependent=False,
                 strategy=strategy)(plan)  # fmt: skip
        return plan

    return wrap


def strategy_for(
    name: str, shape: tuple[int, ...], workload: EMatrix, *, mechanism: Mechanism = "laplace"
) -> EMatrix | None:
    """The measurement strategy a data-independent plan would use with its
    default parameters and `mechanism` (public), or None if the plan is not
    of that form. This lets callers compute exact expected errors before
    spending budget (HDMM's strategy depends on the mechanism)."""
    strategy = strategy_of(name)
    if strategy is None:
        return None
    options = {"mechanism": mechanism} if _takes_mechanism(strategy) else {}
    return strategy(tuple(int(s) for s in shape), workload, **options)


@strategy_plan(
    "identity",
    citation="Dwork, McSherry, Nissim & Smith, TCC 2006",
    summary="Laplace noise on every cell of the data vector",
)
def identity(shape: tuple[int, ...], W: EMatrix) -> EMatrix:
    """Identity: all of the budget on the identity strategy (the Laplace
    mechanism; the Gaussian with mechanism="gaussian"), then LS. With
    `workload_reduction`, on the workload's groups (§8). Returns x̂."""
    return selection.identity(math.prod(shape))


@strategy_plan(
    "privelet",
    citation="Xiao, Wang & Gehrke, ICDE 2010",
    summary="Haar wavelet strategy, least-squares reconstruction",
)
def privelet(shape: tuple[int, ...], W: EMatrix) -> EMatrix:
    """Privelet: the budget on the (n-D) Haar wavelet strategy, then LS. Returns x̂.
    With `workload_reduction`, the 1-D wavelet over the workload's groups."""
    return selection.wavelet(shape)


@strategy_plan(
    "h2",
    citation="Hay, Rastogi, Miklau & Suciu, PVLDB 2010",
    summary="binary hierarchy of range queries, least-squares inference",
)
def h2(shape: tuple[int, ...], W: EMatrix) -> EMatrix:
    """H2: the budget on the binary hierarchy, then LS (the paper's consistency
    step: the tree's two passes). With `workload_reduction`, the hierarchy
    over the workload's groups."""
    return selection.h2(shape)


@strategy_plan(
    "hb",
    citation="Qardaji, Yang & Li, PVLDB 2013",
    summary="hierarchy with the variance-optimal branching factor",
)
def hb(shape: tuple[int, ...], W: EMatrix) -> EMatrix:
    """HB: the budget on the hierarchy with the optimal branching factor, then
    LS (the tree's two passes). With `workload_reduction`, the hierarchy over
    the workload's groups."""
    return selection.hb(shape)


@strategy_plan(
    "quadtree",
    citation="Cormode, Procopiuc, Srivastava, Shen & Yu, ICDE 2012",
    summary="2-D quadtree of range queries, least-squares inference",
    reduction=False,
)
def quadtree(shape: tuple[int, ...], W: EMatrix) -> EMatrix:
    """QuadTree: the budget on the quadtree over a 2-D domain, then LS."""
    return selection.quadtree(shape)


@strategy_plan(
    "greedy_h",
    citation="Li, Hay & Miklau, PVLDB 2014",
    summary="workload-weighted hierarchy (DAWA's GreedyH), least squares",
)
def greedy_h(shape: tuple[int, ...], W: EMatrix) -> EMatrix:
    """GreedyH: the budget on a hierarchy weighted for the workload, then LS."""
    return selection.greedy_h(math.prod(shape), W)


@strategy_plan(
    "hdmm",
    citation="McKenna, Miklau, Hay & Machanavajjhala, PVLDB 2018",
    summary="strategy optimised for the workload (High-Dimensional Matrix Mechanism)",
)
def hdmm(
    shape: tuple[int, ...], W: EMatrix, *, seed: int = 0, mechanism: str = "laplace"
) -> EMatrix:
    """HDMM: the budget on the strategy optimised for the workload (public,
    memoised by the operator), then LS. The strategy is chosen for the
    mechanism's error: ‖A‖₁² (Laplace, HDMM §3) or ‖A‖₂² (Gaussian)."""
    return selection.hdmm(W, seed=seed, mechanism=mechanism)  # type: ignore[arg-type]
