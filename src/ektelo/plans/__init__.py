"""The plan library (εktelo §6, §9): every algorithm as a short function.

One signature everywhere: `plan(x, workload, eps, *, <hyper-parameters with
published defaults>)`, x a protected vector (or table, for table plans).
`names()` lists the registered plans, `run(name, ...)` runs one by name, and
every plan is also a plain function of this module.
"""

from ._registry import PlanInfo, get, names, register, run
from .budget import split
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
from .mwem import mwem, mwem_b, mwem_c, mwem_d
from .naive_bayes import nb_select_ls, nb_workload, nb_workload_ls
from .privbayes import privbayes, privbayes_ls
from .striped import dawa_striped, hb_striped, hb_striped_kron

__all__ = [
    "PlanInfo",
    "adaptive_grid",
    "ahp",
    "cdf_estimator",
    "dawa",
    "dawa_striped",
    "get",
    "greedy_h",
    "h2",
    "hb",
    "hb_striped",
    "hb_striped_kron",
    "hdmm",
    "identity",
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
    "privelet",
    "quadtree",
    "register",
    "run",
    "split",
    "strategy_for",
    "uniform",
    "uniform_grid",
]
