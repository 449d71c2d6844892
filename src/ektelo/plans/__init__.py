"""The plan library (εktelo §6, §9): every algorithm as a short function.

One signature everywhere: `plan(x, workload, eps, *, <hyper-parameters with
published defaults>) -> np.ndarray`, x a `ProtectedVector` (or a
`ProtectedTable`, for table plans). The data-independent plans listed by
`mechanism_plans()` call their budget argument `budget` and take
`mechanism="laplace"` (an ε) or `"gaussian"` (a ρ of zCDP), see
`plans.budget.check_budget`. A plan body is the operator calls of its
pseudocode; the machinery lives in the operators (`ektelo.operators`) and
the estimators (`ektelo.inference`). `names()` lists the registered plans,
`run(name, ...)` runs one by name, and every plan is also a plain function
of this module (the MWEM variants are `mwem` with other defaults).

Importing this package imports no plan (issue #41): each function loads its
module the first time it is read (PEP 562), and the registry imports a plan's
module when the plan is asked for by name (`registry.PLAN_MODULES`).
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from .. import _lazy
from .registry import PlanInfo, get, mechanism_plans, names, register, register_variant, run

if TYPE_CHECKING:  # the names for type checkers; at run time they load on first use
    from .aim import aim
    from .budget import MECHANISMS, Mechanism, PlanBudget, check_budget, split
    from .cdf import cdf_estimator
    from .data_dependent import adaptive_grid, ahp, dawa, uniform, uniform_grid
    from .data_independent import (
        greedy_h,
        h2,
        hb,
        hdmm,
        identity,
        privelet,
        quadtree,
        strategy_for,
    )
    from .mst import mst
    from .mwem import mwem, mwem_b, mwem_c, mwem_d
    from .naive_bayes import nb_select_ls, nb_workload, nb_workload_ls
    from .pgm import hdmm_pgm, privbayes_pgm
    from .privbayes import privbayes, privbayes_ls
    from .striped import dawa_striped, hb_striped, hb_striped_kron

# name → the submodule (of this package) that defines it
_LAZY = {
    "aim": "aim",
    **dict.fromkeys(("MECHANISMS", "Mechanism", "PlanBudget", "check_budget", "split"), "budget"),
    "cdf_estimator": "cdf",
    **dict.fromkeys(("adaptive_grid", "ahp", "dawa", "uniform", "uniform_grid"), "data_dependent"),
    **dict.fromkeys(
        ("greedy_h", "h2", "hb", "hdmm", "identity", "privelet", "quadtree", "strategy_for"),
        "data_independent",
    ),
    "mst": "mst",
    **dict.fromkeys(("mwem", "mwem_b", "mwem_c", "mwem_d"), "mwem"),
    **dict.fromkeys(("nb_select_ls", "nb_workload", "nb_workload_ls"), "naive_bayes"),
    **dict.fromkeys(("hdmm_pgm", "privbayes_pgm"), "pgm"),
    **dict.fromkeys(("privbayes", "privbayes_ls"), "privbayes"),
    **dict.fromkeys(("dawa_striped", "hb_striped", "hb_striped_kron"), "striped"),
}

__getattr__ = _lazy(__name__, {n: f"plans.{m}" for n, m in _LAZY.items()}, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _Plans(types.ModuleType):
    """This package's module type. Four plans share their name with the
    module that defines them (aim, mst, mwem, privbayes); importing such a
    module binds the name on the package to the module (the import system's
    `setattr(package, child, module)`), which would hide the plan function
    that `plans.aim` means. Loaded lazily, the module can be imported after
    this package, so the binding is redirected to the function here."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _LAZY.get(name) == name:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Plans

__all__ = [
    "MECHANISMS",
    "Mechanism",
    "PlanBudget",
    "PlanInfo",
    "adaptive_grid",
    "ahp",
    "aim",
    "cdf_estimator",
    "check_budget",
    "dawa",
    "dawa_striped",
    "get",
    "greedy_h",
    "h2",
    "hb",
    "hb_striped",
    "hb_striped_kron",
    "hdmm",
    "hdmm_pgm",
    "identity",
    "mechanism_plans",
    "mst",
    "mwem",
    "mwem_b",
    "mwem_c",
    "mwem_d",
    "names",
    "nb_select_ls",
    "nb_workload",
    "nb_workload_ls",
    "privbayes",
    "privbayes_ls",
    "privbayes_pgm",
    "privelet",
    "quadtree",
    "register",
    "register_variant",
    "run",
    "split",
    "strategy_for",
    "uniform",
    "uniform_grid",
]
