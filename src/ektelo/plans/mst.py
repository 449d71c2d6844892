"""MST (McKenna, Miklau & Sheldon, "Winning the NIST contest: a scalable and
general approach to differentially private synthetic data", JPC 2021, §4,
Algorithm 1): a table plan, ρ-zCDP.

The budget ρ is split in thirds: (1) all 1-way marginals, Gaussian noise;
(2) a maximum spanning tree over the attributes, whose edge weights are how
badly the 1-way model answers each pair, chosen privately by r − 1 rounds of
the exponential mechanism in Kruskal's order (the kernel's `select_marginal`,
candidates the pairs that close no cycle, ε = √(8·(ρ/3)/(r − 1)) each);
(3) the chosen pairs' marginals, Gaussian noise.  The graphical model
(Private-PGM, `inference.fit_graphical_model`) fitted to all of them is the
result: it answers any marginal and samples synthetic rows.

Domain compression (§4, MST's published default, `compress=True`): after
step (1), the values of an attribute whose noisy 1-way count is below 3σ
are merged into one value (`inference.graphical.compression`); the 1-way
measurements are re-expressed on the compressed domain, the tree's pairs
are measured as ``vectorize(pair).reduce_by_partition(P)`` (1-stable, the
same ρ), and the model is fitted on the compressed domain and returned as a
`CompressedGraphicalModel`, whose marginals and synthetic rows are in the
original domain. A merged value's mass is split among its values by their
noisy 1-way counts, shrunk toward uniform by positive-part James–Stein
(`compression.merged_shares`; issue #43; the published code spreads it
uniformly, ``split_merged=False``): parameter-free, uniform when the counts
spread no more than the noise. Public post-processing of the 1-way answers,
it changes neither the selection nor the fit. On the credit table
(training data, 3 seeds) synthetic TV 0.186 → 0.174 at ε = 0.1, 0.0622 →
0.0608 at ε = 1, 0.0512 → 0.0507 at ε = 3, 0.0450 → 0.0448 at ε = 10. The
selection scores each pair on the compressed domain, as the published code
does (issue #43): ‖G·M_pair(D) − est‖₁ with est the compressed 1-way model's
pair marginal and G the public map summing the original cells of each
compressed cell (the kernel's `select_marginal(groups=...)`). Sensitivity:
one row lies in one original cell, hence in one compressed cell, so adding
or removing it moves G·M by 1 in one entry and the score by at most 1 — the
same Δ = 1 as on the original domain, and the same ε per choice
(`kernel/marginal_select.py`, "Grouped marginals"). The map is built from
the noisy 1-way answers only (public). `compress=False` is the reference
run of issue #25.

Regularised fit (issue #43). The final least-squares fit to noisy marginals
overfits the noise at low ε: ektelo's converged fit scored worse than points
on the way there. So by default it starts from the uniform model and stops
by the discrepancy principle (Morozov 1966; early stopping of gradient
iterations on noisy data, Engl, Hanke & Neubauer 1996, §6): at the first
iterate whose inverse-variance weighted squared residual is at most
τ = `DISCREPANCY` times the number of noisy answers (about that number at
the truth). Public post-processing: it reads only noisy answers and their
public variances. τ was chosen on the credit data (see `DISCREPANCY`).

Pure ε-DP kernels are refused: MST is defined in zCDP (its Gaussian
measurements have no pure-DP guarantee).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

from ..budget import ZCDP, PureDP
from ..inference import GraphicalModel, fit_graphical_model
from ..inference.graphical.compression import (
    DomainCompression,
    compress_oneway,
    compress_reduced,
    compressed_partition,
    supports_of,
)
from ..inference.graphical_model import CompressedGraphicalModel
from ..matrix import Identity
from ..measurement import Measurement
from ..port import ProtectedTable
from .registry import register

__all__ = ["DISCREPANCY", "check_rho_budget", "mst", "shares"]

# The discrepancy level of MST's fit (see the module): chosen on the credit
# default table (30,000 rows, 14 attributes binned like adult's; ε = 0.1, 0.3,
# 1, 3, 10, 3 seeds), never on adult. Mean model TV of its 91 pairs there:
# converged 0.201 / 0.194 / 0.153 / 0.122 / 0.097; τ = 0.8 gives 0.193 /
# 0.184 / 0.143 / 0.119 / 0.098 (τ = 0.7: 0.198 / 0.194 / 0.154 / 0.116 /
# 0.097; 0.9: 0.196 / 0.182 / 0.143 / 0.124 / 0.100; 1.0 worse at every ε).
DISCREPANCY = 0.8


def check_rho_budget(table: Any, budget: Any, plan: str) -> float:
    """The plan's ρ (a number or ZCDP), refusing PureDP and pure-ε kernels
    before anything is spent."""
    if not isinstance(table, ProtectedTable):
        raise TypeError(f"{plan} runs on a ProtectedTable, got {type(table).__name__}")
    if isinstance(budget, PureDP):
        raise TypeError(
            f"{plan} spends a ρ of zCDP (a number or ZCDP), got "
            f"PureDP(epsilon={budget.epsilon:g}); its measurements are Gaussian"
        )
    rho = budget.rho if isinstance(budget, ZCDP) else budget
    if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not (
        math.isfinite(rho) and rho > 0
    ):
        raise ValueError(f"{plan}'s budget must be a finite positive ρ, got {budget!r}")
    if table.budget.unit != "rho":
        raise ValueError(
            f"{plan} is a zCDP mechanism (Gaussian noise), but this table was protected with a "
            "pure ε-DP budget: protect it with epsilon= and delta= (or rho=)"
        )
    return float(rho)


def shares(total: float | Fraction, n: int) -> list[float]:
    """`total` in n equal float shares whose exact sum is `total` up to the
    last share's rounding (the last is the exact remainder, rounded)."""
    t = Fraction(total)
    each = float(t / n)
    return [each] * (n - 1) + [float(t - (n - 1) * Fraction(each))]


def _root(parent: dict[str, str], v: str) -> str:
    """The representative of v's component (Kruskal's disjoint sets)."""
    while parent[v] != v:
        v = parent[v]
    return v


def _acyclic_pairs(attrs: list[str], parent: dict[str, str]) -> list[tuple[str, str]]:
    """The pairs whose edge closes no cycle of the forest so far."""
    pairs = itertools.combinations(attrs, 2)
    return [(a, b) for a, b in pairs if _root(parent, a) != _root(parent, b)]


@register(
    "mst",
    citation="McKenna, Miklau & Sheldon, JPC 2021 (Winning the NIST contest)",
    summary="1-way marginals, private maximum spanning tree of pairs, graphical model",
    data_dependent=True,
    input_kind="table",
    returns="model",
)
def mst(
    table: ProtectedTable,
    workload: Any,
    budget: float | ZCDP,
    *,
    maxiter: int = 1000,
    compress: bool = True,
    discrepancy: float | None = DISCREPANCY,
    split_merged: bool = True,
) -> GraphicalModel:
    """MST. Budget: ρ (zCDP) in thirds — 1-way marginals, the tree's r − 1
    exponential-mechanism choices, the tree's pair marginals. `workload` is
    not used (MST targets all low-order marginals). With `compress` (the
    default) rare values are merged before selection (module docstring).
    `discrepancy` (default `DISCREPANCY`, 0.8) regularises the final fit:
    from the uniform model, stopped once the weighted loss is at most that
    times the number of answers; None fits to convergence from the
    measured marginals (the unregularised least-squares model).
    `split_merged` (default True) splits a merged value's mass by its values'
    noisy 1-way counts (James–Stein; module docstring), False uniformly.
    Returns the fitted GraphicalModel (`.marginal`, `.answer`, `.synthetic`),
    a `CompressedGraphicalModel` when anything was merged."""
    rho = check_rho_budget(table, budget, "mst")
    if not isinstance(compress, bool):
        raise TypeError(f"compress must be True or False, got {compress!r}")
    if not isinstance(split_merged, bool):
        raise TypeError(f"split_merged must be True or False, got {split_merged!r}")
    domain = table.domain
    attrs = list(domain.names)
    if len(attrs) < 2:
        raise ValueError(f"mst needs at least 2 attributes, the table has {attrs}")
    rho_1, rho_select, rho_2 = shares(rho, 3)
    log1: list[Measurement] = [
        table.vectorize([a]).gaussian(Identity(domain[a].size), rho=r)
        for a, r in zip(attrs, shares(rho_1, len(attrs)), strict=True)
    ]  # Private→Public: 1-way marginals
    # Public from here to the tree's measurements: the compression is read
    # off the noisy 1-way answers.
    comp = DomainCompression.from_supports(domain, supports_of(log1) if compress else {})
    if split_merged and not comp.trivial:
        comp = comp.with_shares(log1)  # Public: merged values split by their noisy counts
    small = domain if comp.trivial else comp.compressed  # the domain the model lives on
    fit_log1 = [compress_oneway(m, comp) for m in log1] if not comp.trivial else log1
    model = fit_graphical_model(fit_log1, small, maxiter=maxiter)  # Public
    parent = {a: a for a in attrs}
    tree: list[tuple[str, ...]] = []
    for r in shares(rho_select, len(attrs) - 1):  # Kruskal order, r − 1 choices
        pairs = _acyclic_pairs(attrs, parent)
        # Public: the 1-way model's pairs, on the compressed domain, and each
        # original cell's compressed cell (the kernel scores G·M, module doc)
        estimates = [model.marginal(p) for p in pairs]
        groups = None if comp.trivial else [comp.cell_map(p) for p in pairs]
        edge = table.select_marginal(pairs, estimates, rho=r, groups=groups)  # Private→Public
        parent[_root(parent, edge[0])] = _root(parent, edge[1])
        tree.append(edge)
    log2 = [
        _measure_pair(table, comp, e, r)
        for e, r in zip(tree, shares(rho_2, len(tree)), strict=True)
    ]  # Private→Public: the tree's pair marginals (on the compressed domain)
    if discrepancy is None:  # to convergence, from the measured marginals
        fitted = fit_graphical_model(fit_log1 + log2, small, maxiter=maxiter)  # Public
    else:  # regularised: from the uniform start, stopped by the discrepancy principle
        fitted = fit_graphical_model(fit_log1 + log2, small, maxiter=maxiter, init="uniform",
                                     discrepancy=discrepancy)  # Public
    return fitted if comp.trivial else CompressedGraphicalModel(fitted, comp)


def _measure_pair(
    table: ProtectedTable, comp: DomainCompression, pair: tuple[str, ...], rho: float
) -> Measurement:
    """The pair's marginal with Gaussian noise at `rho`, on the compressed
    domain (summed over merged values first: 1-stable) when anything of the
    pair is merged."""
    attrs = list(pair)
    if all(comp.counts[a].size == comp.original[a].size for a in attrs):
        cells = table.domain.project(attrs).size
        return table.vectorize(attrs).gaussian(Identity(cells), rho=rho)
    P = compressed_partition(comp, attrs)
    reduced = table.vectorize(attrs).reduce_by_partition(P)  # Private, 1-stable
    m = reduced.gaussian(Identity(P.num_groups), rho=rho)  # Private→Public
    return compress_reduced(m, comp)  # Public
