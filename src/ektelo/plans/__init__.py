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
"""

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
from .registry import PlanInfo, get, mechanism_plans, names, register, register_variant, run
from .striped import dawa_striped, hb_striped, hb_striped_kron

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
