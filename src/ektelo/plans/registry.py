"""The plan registry: names, citations and one-line descriptions.

Plans register themselves with `@register(...)`, and a published variant of
a plan — the same function with other defaults for some hyper-parameters
(the MWEM variants of §9.1) — with `register_variant(...)`;
`ektelo.plans.run` looks them up by name and refuses unknown names and
unknown hyper-parameters (an unknown option is an error, never silently
ignored). `mechanism_plans()` names the plans with a choice of noise
(`mechanism="laplace"|"gaussian"`, issue 24).

The registry is lazy (issue #41: a small question must not pay for every
plan's imports — AIM's graphical models, PGM, SciPy's solvers): `PLAN_MODULES`
names the module that registers each plan, `get(name)` imports only that
module, and `names()` answers from the table without importing anything.
tests/plans/test_registry_table.py checks that the table and what the modules
actually register agree, so the two cannot drift.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PLAN_MODULES",
    "PlanInfo",
    "get",
    "mechanism_plans",
    "names",
    "register",
    "register_variant",
    "registered_modules",
    "run",
    "strategy_of",
]


@dataclass(frozen=True)
class PlanInfo:
    """What the registry knows about a plan."""

    name: str
    function: Callable[..., Any]
    citation: str
    summary: str
    data_dependent: bool
    input_kind: str  # "vector" or "table"
    returns: str  # "estimate" (x̂ on x's domain) or "answers" (workload answers)
    # a data-independent plan's strategy, (shape, workload, *, hyper-parameters)
    # → EMatrix: the plan is declared by it (`data_independent.strategy_plan`)
    strategy: Callable[..., Any] | None = None

    @property
    def parameters(self) -> dict[str, Any]:
        """Hyper-parameters (keyword-only arguments) and their defaults."""
        sig = inspect.signature(self.function)
        return {
            p.name: p.default
            for p in sig.parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        }


_PLANS: dict[str, PlanInfo] = {}
# the module whose import registered each plan (checked against PLAN_MODULES)
_REGISTERED_BY: dict[str, str] = {}

# Every plan's name → the module that registers it when imported. Plans of a
# package above this one load the same way, like entry points: the planner
# registers "auto" itself (it chooses among the plans here, so plans never
# import it; DESIGN.md's import contract).
PLAN_MODULES: dict[str, str] = {
    "adaptive_grid": "ektelo.plans.data_dependent",
    "ahp": "ektelo.plans.data_dependent",
    "aim": "ektelo.plans.aim",
    "auto": "ektelo.planner.auto",
    "cdf_estimator": "ektelo.plans.cdf",
    "dawa": "ektelo.plans.data_dependent",
    "dawa_striped": "ektelo.plans.striped",
    "greedy_h": "ektelo.plans.data_independent",
    "h2": "ektelo.plans.data_independent",
    "hb": "ektelo.plans.data_independent",
    "hb_striped": "ektelo.plans.striped",
    "hb_striped_kron": "ektelo.plans.striped",
    "hdmm": "ektelo.plans.data_independent",
    "hdmm_pgm": "ektelo.plans.pgm",
    "identity": "ektelo.plans.data_independent",
    "mst": "ektelo.plans.mst",
    "mwem": "ektelo.plans.mwem",
    "mwem_b": "ektelo.plans.mwem",
    "mwem_c": "ektelo.plans.mwem",
    "mwem_d": "ektelo.plans.mwem",
    "nb_select_ls": "ektelo.plans.naive_bayes",
    "nb_workload": "ektelo.plans.naive_bayes",
    "nb_workload_ls": "ektelo.plans.naive_bayes",
    "privbayes": "ektelo.plans.privbayes",
    "privbayes_ls": "ektelo.plans.privbayes",
    "privbayes_pgm": "ektelo.plans.pgm",
    "privelet": "ektelo.plans.data_independent",
    "quadtree": "ektelo.plans.data_independent",
    "uniform": "ektelo.plans.data_dependent",
    "uniform_grid": "ektelo.plans.data_dependent",
}


def register(
    name: str,
    *,
    citation: str,
    summary: str,
    data_dependent: bool,
    input_kind: str = "vector",
    returns: str = "estimate",
    strategy: Callable[..., Any] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Class the decorated function as the plan `name` (`strategy`: the
    measurement strategy of a data-independent plan, declared once)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in _PLANS:
            raise ValueError(f"plan {name!r} registered twice")
        _PLANS[name] = PlanInfo(
            name, fn, citation, summary, data_dependent, input_kind, returns, strategy
        )
        _REGISTERED_BY[name] = fn.__module__
        return fn

    return wrap


def register_variant(
    name: str, plan: Callable[..., Any], *, citation: str, summary: str, doc: str, **choices: Any
) -> Callable[..., Any]:
    """Register `plan` with the hyper-parameters `choices` as its defaults
    under `name`, and return that variant (a `functools.partial` of the plan:
    the same function, documented by `doc`). The variant inherits the plan's
    registered kind (data dependence, input, result)."""
    base = next((info for info in _PLANS.values() if info.function is plan), None)
    if base is None:
        raise ValueError(f"register {plan.__name__} before its variants")
    unknown = set(choices) - set(base.parameters)
    if unknown:
        raise TypeError(f"{base.name} has no parameter(s) {sorted(unknown)}")
    variant = functools.partial(plan, **choices)
    variant.__doc__ = doc
    variant.__name__ = name  # type: ignore[attr-defined]
    variant.__module__ = plan.__module__  # (a partial's own says "functools")
    register(
        name,
        citation=citation,
        summary=summary,
        data_dependent=base.data_dependent,
        input_kind=base.input_kind,
        returns=base.returns,
        strategy=None if base.strategy is None or choices else base.strategy,
    )(variant)
    return variant


def _load(name: str) -> None:
    """Import the module that registers plan `name`, if it is not loaded."""
    module = PLAN_MODULES.get(name)
    if module is not None and name not in _PLANS:
        importlib.import_module(module)


def _load_all() -> None:
    for name in PLAN_MODULES:
        _load(name)


def registered_modules() -> dict[str, str]:
    """The plans registered so far → the module that registered each (what
    `PLAN_MODULES` must say once every plan module is imported)."""
    return dict(_REGISTERED_BY)


def names() -> list[str]:
    """The plan names, sorted (from the static table: nothing is imported)."""
    return sorted(set(PLAN_MODULES) | set(_PLANS))


def mechanism_plans() -> list[str]:
    """The plans that measure with the Laplace or the Gaussian mechanism on
    request (a keyword-only `mechanism`), sorted (imports every plan)."""
    _load_all()
    return [n for n in names() if "mechanism" in _PLANS[n].parameters]


def strategy_of(name: str) -> Callable[..., Any] | None:
    """The declared strategy of plan `name`, or None (not a data-independent
    plan of one strategy, or no plan of that name)."""
    _load(name)
    info = _PLANS.get(name)
    return None if info is None else info.strategy


def get(name: str) -> PlanInfo:
    """The registry entry of plan `name` (KeyError with the known names),
    importing only the module that registers it."""
    _load(name)
    try:
        return _PLANS[name]
    except KeyError:
        raise KeyError(f"unknown plan {name!r}; known plans: {', '.join(names())}") from None


def run(name: str, x: Any, workload: Any, budget: Any, **params: Any) -> Any:
    """Run plan `name` on protected data `x` for `workload` with `budget`:
    an ε (a number or `PureDP`), or — for the plans of `mechanism_plans()`
    with `mechanism="gaussian"` — a ρ (a number or `ZCDP`)."""
    info = get(name)
    unknown = set(params) - set(info.parameters) if params else set()  # (a signature: not free)
    if "mechanism" in unknown:
        raise TypeError(
            f"plan {name!r} has no choice of mechanism: it measures with Laplace noise "
            f"(ε-DP) only; the plans with mechanism= are {', '.join(mechanism_plans())}"
        )
    if unknown:
        raise TypeError(
            f"plan {name!r} has no parameter(s) {sorted(unknown)}; "
            f"its parameters are {sorted(info.parameters)}"
        )
    return info.function(x, workload, budget, **params)
