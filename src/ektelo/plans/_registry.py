"""The plan registry: names, citations and one-line descriptions.

Plans register themselves with `@register(...)`; `ektelo.plans.run` looks them
up by name and refuses unknown names and unknown hyper-parameters (an
unknown option is an error, never silently ignored).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["PlanInfo", "get", "names", "register", "run"]


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


def register(
    name: str,
    *,
    citation: str,
    summary: str,
    data_dependent: bool,
    input_kind: str = "vector",
    returns: str = "estimate",
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Class the decorated function as the plan `name`."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in _PLANS:
            raise ValueError(f"plan {name!r} registered twice")
        _PLANS[name] = PlanInfo(
            name, fn, citation, summary, data_dependent, input_kind, returns
        )
        return fn

    return wrap


def names() -> list[str]:
    """The registered plan names, sorted."""
    return sorted(_PLANS)


def get(name: str) -> PlanInfo:
    """The registry entry of plan `name` (KeyError with the known names)."""
    try:
        return _PLANS[name]
    except KeyError:
        raise KeyError(f"unknown plan {name!r}; known plans: {', '.join(names())}") from None


def run(name: str, x: Any, workload: Any, eps: float, **params: Any) -> Any:
    """Run plan `name` on protected data `x` for `workload` with budget `eps`."""
    info = get(name)
    unknown = set(params) - set(info.parameters)
    if unknown:
        raise TypeError(
            f"plan {name!r} has no parameter(s) {sorted(unknown)}; "
            f"its parameters are {sorted(info.parameters)}"
        )
    return info.function(x, workload, eps, **params)
