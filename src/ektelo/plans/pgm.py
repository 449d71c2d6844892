"""PrivBayes+PGM and HDMM+PGM (McKenna, Sheldon & Miklau, "Graphical-model
based estimation and inference for differential privacy", ICML 2019, §6):
table plans that keep a published algorithm's measurements and replace its
estimator with Private-PGM (`inference.fit_graphical_model`).

* `privbayes_pgm` — PrivBayes's private degree-k network (the kernel's
  `privbayes_select`; Zhang, Cormode, Procopiuc, Srivastava & Xiao, TODS
  2017) and its noisy maximal-clique marginals, each measured on its own
  projection, then the graphical model instead of PrivBayes's conditional
  tables. Pure ε-DP with PrivBayes's split and its θ-usefulness cap on the
  cliques (TODS §4.3–4.4).
* `hdmm_pgm` — the marginals of a marginal workload's HDMM strategy
  (McKenna, Miklau, Hay & Machanavajjhala, PVLDB 2018, §5.3 OPT_M), each
  measured on its projection with Laplace (ε) or Gaussian (ρ) noise at the
  strategy's weight, then the graphical model. `marginal_strategy` computes
  that strategy from public information only.

Both return the fitted `GraphicalModel` (`.marginal`, `.answer`,
`.synthetic`); neither ever vectorizes the full domain, and the model's
junction tree is checked against the public `max_model_size` (cells) before
anything is measured (`ModelTooLarge`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._validate import positive, positive_int
from ..budget import ZCDP, PureDP
from ..domain import Domain, check_names
from ..inference import GraphicalModel, fit_graphical_model
from ..inference.graphical_model import MAX_MODEL_CELLS, ModelTooLarge, model_size
from ..matrix import EMatrix, Identity
from ..measurement import Measurement
from ..port import ProtectedTable
from .budget import check_budget, check_eps, split
from .common import check_choice, check_share
from .registry import register

__all__ = [
    "COUNT_SHARE",
    "ClosureObjective",
    "MarginalStrategy",
    "hdmm_pgm",
    "marginal_strategy",
    "privbayes_pgm",
    "workload_cliques",
]

Clique = tuple[str, ...]

# privbayes_pgm without a declared row count: the share of ε spent on a noisy
# total (a Laplace count) and the noise scales taken off it, so that the
# θ-usefulness cap rests on an N that is below the true one with probability
# 1 − ½e⁻³ ≈ 0.975 (Laplace tail); a larger N only loosens the cap.
COUNT_SHARE = 0.01
_COUNT_SCALES = 3.0

# Strategy marginals whose weight is below this fraction of the largest are
# dropped (their noise would be 10⁴× the largest's: they add nothing to the
# fit, and a near-zero share of the budget is refused by the kernel).
_NEGLIGIBLE = 1e-4


# -- shared checks ----------------------------------------------------------------------
def _check_table(table: Any, plan: str) -> ProtectedTable:
    if not isinstance(table, ProtectedTable):
        raise TypeError(f"{plan} runs on a ProtectedTable, got {type(table).__name__}")
    return table


def _check_limit(value: Any) -> int:
    if value is None:
        return MAX_MODEL_CELLS
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"max_model_size must be a positive number of cells, got {value!r}")
    return int(value)


def workload_cliques(domain: Domain, workload: Any, plan: str) -> list[Clique]:
    """A table plan's marginal workload as attribute tuples in the domain's
    order (None: every pair), checked: a list of attribute tuples with known,
    distinct attributes, not empty. Repeats are kept (a marginal asked twice
    weighs twice, as a stacked workload does)."""
    if workload is None:
        return list(itertools.combinations(domain.names, 2))
    if isinstance(workload, EMatrix):
        # A query matrix names no attributes; the front door (wide.fit) hands
        # the model plans attribute tuples.
        raise TypeError(
            f"{plan}'s workload is a list of attribute tuples, e.g. [('a', 'b')], not a query "
            f"matrix ({type(workload).__name__}); in ektelo run / Session ask for "
            f"marginals with --plan {plan}, or call ektelo.plans.run('{plan}', ...) with tuples"
        )
    if isinstance(workload, (str, bytes)) or not isinstance(workload, Sequence):
        raise TypeError(
            f"{plan}'s workload is a list of attribute tuples, e.g. [('a', 'b')], "
            f"got {type(workload).__name__}"
        )
    if len(workload) == 0:
        raise ValueError(f"{plan}'s workload is empty: give at least one attribute tuple")
    out = []
    for c in workload:
        names = check_names(domain, c, f"{plan}'s workload")
        out.append(tuple(sorted(names, key=domain.index)))
    return out


def _guard(domain: Domain, cliques: Sequence[Clique], limit: int, what: str) -> None:
    size = model_size(domain, cliques)
    if size > limit:
        raise ModelTooLarge(
            f"{what}: the graphical model over cliques {[list(c) for c in cliques]} would have "
            f"a junction tree of {size:,} cells, above max_model_size={limit:,}; nothing "
            "more was spent"
        )


def _exact_shares(total: float, weights: Sequence[float]) -> list[float]:
    """`total` split in proportion to `weights`, the last share the exact
    remainder (so the shares sum to `total` up to the ledger's slack)."""
    s = math.fsum(weights)
    out = [total * w / s for w in weights[:-1]]
    last = float(Fraction(total) - sum((Fraction(v) for v in out), Fraction(0)))
    if last <= 0:
        raise ValueError("the budget split leaves nothing for the last marginal")
    return [*out, last]


def _measure(
    table: ProtectedTable, clique: Clique, *, eps: float | None = None, rho: float | None = None
) -> Measurement:
    """Private→Public: the marginal of `clique` on its own projection (1-stable),
    Identity with Laplace (eps) or Gaussian (rho) noise."""
    x = table.vectorize(list(clique))
    cells = table.domain.project(list(clique)).size
    if rho is not None:
        return x.gaussian(Identity(cells), rho=rho)
    assert eps is not None
    return x.laplace(Identity(cells), eps=eps)


# -- PrivBayes+PGM ------------------------------------------------------------------------
@register(
    "privbayes_pgm",
    citation="McKenna, Sheldon & Miklau, ICML 2019 §6 (PrivBayes+PGM); Zhang et al., TODS 2017",
    summary="PrivBayes's private network and noisy marginals, graphical-model inference",
    data_dependent=True,
    input_kind="table",
    returns="model",
)
def privbayes_pgm(
    table: ProtectedTable,
    workload: Sequence[Sequence[str]] | None,
    eps: float | PureDP,
    *,
    degree: int = 2,
    beta: float = 0.3,
    theta: float | None = 4.0,
    rows: int | None = None,
    maxiter: int = 1000,
    max_model_size: int | None = None,
) -> GraphicalModel:
    """PrivBayes+PGM (McKenna, Sheldon & Miklau, ICML 2019 §6). Budget: ε
    with PrivBayes's published split (Zhang et al., TODS 2017 §4–5): β·ε to
    learn the degree-k network (GreedyBayes, the kernel's exponential
    mechanism), (1 − β)·ε in equal shares to the marginals of its maximal
    cliques, each the Identity on its own projection with Laplace noise.
    The fitted graphical model replaces PrivBayes's conditional tables.

    θ-usefulness (TODS §4.3–4.4): a clique's noisy marginal is θ-useful when
    N·ε_meas / (m·cells) ≥ θ (its average count per cell is θ noise scales),
    so the network's cliques are capped at ``max_cells = ⌊N·ε_meas/(m·θ)⌋``
    cells, m = d (each attribute is a child once, so at most d marginals are
    measured: each gets at least ε_meas/d), and GreedyBayes considers per
    child its maximal parent sets of ≤ k attributes that fit the cap (the
    kernel's `privbayes_select(max_cells=...)`). N is the declared public
    `rows` when given; otherwise ``COUNT_SHARE`` (1%) of ε buys a noisy
    total through the kernel (a Laplace count) and N is that total less 3
    noise scales, floored at 1 — then ε splits as 1% to the count and β, 1 − β
    of the rest. ``theta=None`` turns the cap off (PrivBayes with a fixed k:
    every parent set has min(k, |chosen|) attributes, and `rows` is unused).

    `workload`: None (model every attribute) or attribute tuples, whose
    attributes are the ones modelled (a public projection of the table);
    PrivBayes itself is not workload-aware. Before the network is chosen,
    the largest clique it could have (capped) must fit `max_model_size`
    (cells, default `MAX_MODEL_CELLS`) — checked before anything is spent
    when the cap is off or `rows` is declared, after the noisy count
    otherwise; once the network is chosen its junction tree is checked
    before any marginal is measured (a refusal then has spent the count and
    the selection's β·ε only). Returns the GraphicalModel."""
    table = _check_table(table, "privbayes_pgm")
    eps_ = check_eps(eps)
    beta = check_share(beta, "beta")
    limit = _check_limit(max_model_size)
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
        raise ValueError(f"degree must be a positive integer, got {degree!r}")
    if theta is not None:
        theta = positive(theta, "theta")
    if rows is not None:
        rows = positive_int(rows, "rows")
    domain = table.domain
    if workload is not None:
        wanted = workload_cliques(domain, workload, "privbayes_pgm")
        names = [a for a in domain.names if any(a in c for c in wanted)]
        if names != list(domain.names):
            table = table.select(names)  # Private, 1-stable (public attributes)
            domain = table.domain
    if len(domain.names) < 2:
        raise ValueError(f"privbayes_pgm needs at least 2 attributes, got {list(domain.names)}")
    d = len(domain.names)
    cap: int | None = None
    if theta is None or rows is not None:
        eps_net, eps_meas = split(eps_, beta, 1 - beta)
        if theta is not None and rows is not None:
            cap = _theta_cap(rows, eps_meas, d, theta)  # Public: declared N
        _widest_guard(domain, int(degree), cap, limit, "nothing was spent")
    else:
        _widest_guard(domain, int(degree), 1, limit, "nothing was spent")  # the least it can be
        eps_count, eps_net, eps_meas = split(
            eps_, COUNT_SHARE, (1 - COUNT_SHARE) * beta, (1 - COUNT_SHARE) * (1 - beta)
        )
        total = table.noisy_count(eps=eps_count)  # Private→Public: N + Laplace(1/eps_count)
        n_low = math.floor(float(total.answers[0]) - _COUNT_SCALES * total.noise.scale)
        cap = _theta_cap(max(1, n_low), eps_meas, d, theta)  # Public
        spent = f"the noisy count's ε={eps_count:g} was spent"
        _widest_guard(domain, int(degree), cap, limit, spent)
    network = table.privbayes_select(
        eps=eps_net, degree=int(degree), **({} if cap is None else {"max_cells": cap})
    )  # Private→Public
    names = list(domain.names)
    cliques = [tuple(names[i] for i in sorted(c)) for c in network]  # Public
    measured = [c for c in cliques if not any(set(c) < set(o) for o in cliques)]
    _guard(domain, measured, limit, "privbayes_pgm's network")
    log = [
        _measure(table, c, eps=e)
        for c, e in zip(measured, _exact_shares(eps_meas, [1.0] * len(measured)), strict=True)
    ]  # Private→Public: the network's marginals
    return fit_graphical_model(log, domain, maxiter=maxiter, max_model_size=limit)  # Public


def _theta_cap(rows: int, eps_meas: float, d: int, theta: float) -> int:
    """PrivBayes's θ-usefulness cap on a clique's cells (TODS §4.4): the
    largest |dom| with rows·eps_meas/(d·|dom|) ≥ θ, at least 1."""
    return max(1, math.floor(rows * eps_meas / (d * theta)))


def _widest_guard(domain: Domain, degree: int, cap: int | None, limit: int, spent: str) -> None:
    """Refuse when the largest clique the network may have exceeds `limit`:
    the degree + 1 largest attributes, or under a cap the larger of the cap
    and the largest attribute (a child alone when no parent fits)."""
    shape = sorted(domain.shape, reverse=True)
    widest = math.prod(shape[: degree + 1])
    if cap is not None:
        widest = max(min(widest, cap), shape[0])
    if widest > limit:
        raise ModelTooLarge(
            f"privbayes_pgm: a degree-{degree} network "
            + ("" if cap is None else f"with cliques capped at {cap:,} cells ")
            + f"may have a clique of {widest:,} cells, above max_model_size={limit:,}; "
            f"lower degree= or raise max_model_size ({spent})"
        )


# -- HDMM's marginal strategy, restricted to the workload's closure ---------------------
@dataclass(frozen=True)
class MarginalStrategy:
    """A weighted set of marginals M(θ) = [θ_a·M_a]_a (HDMM §5.3) for a
    marginal workload, with the budget share of each marginal under its
    mechanism: ε_a = ε·θ_a/Σθ (Laplace: ‖M(θ)‖₁ = Σθ) or ρ_a = ρ·θ_a²/Σθ²
    (Gaussian: ‖M(θ)‖₂ = √Σθ²). `objective` is the workload's expected total
    squared error of least squares on these measurements with the budget
    factor left out: multiply by 2/ε² (Laplace) or 1/(2ρ) (Gaussian)."""

    cliques: tuple[Clique, ...]
    weights: tuple[float, ...]  # θ, normalised to max 1
    mechanism: str
    method: str  # "opt_m" or "workload"
    objective: float

    def shares(self) -> tuple[float, ...]:
        """Each marginal's fraction of the budget (summing to 1)."""
        theta = np.asarray(self.weights)
        w = theta if self.mechanism == "laplace" else theta**2
        return tuple(float(v) for v in w / w.sum())

    def expected_error(self, budget: float) -> float:
        """The expected total squared error over the workload's cells at
        ε (Laplace) or ρ (Gaussian), for least squares on the measurements."""
        if self.mechanism == "laplace":
            return 2.0 * self.objective / budget**2
        return self.objective / (2.0 * budget)


class ClosureObjective:
    """HDMM's OPT_M error on the marginals inside the workload's cliques.

    HDMM (§5.3) writes every Gram in play as Σ_a u_a Q_a over attribute sets a,
    with Q_a = ⊗_{i∈a} I ⊗_{i∉a} 11ᵀ; the Q_a share one eigenbasis, on whose
    eigenspace s (multiplicity Π_{i∈s}(n_i − 1)) Σ_a u_a Q_a has eigenvalue
    Σ_{a⊇s} u_a Π_{i∉a} n_i. Dividing every eigenvalue by N = Π_i n_i (which
    cancels in the error) gives λ_s(u) = Σ_{a⊇s} u_a/n_a, n_a the cells of
    marginal a, so that the error

        tr((M(θ)ᵀM(θ))⁺ WᵀW) = Σ_s mult_s·λ_s(w)/λ_s(θ²)

    needs only the sets s below a workload clique (elsewhere λ_s(w) = 0):
    the downward closure plus ∅, never the 2^d sets of `operators.hdmm`'s
    OPT_M, and no product over the whole domain (no overflow on wide
    domains). The strategy's support is restricted to the closure too (the
    marginals a graphical model over the workload's cliques can hold).
    """

    def __init__(self, domain: Domain, workload: Sequence[Clique]):
        support = sorted(
            {s for c in workload for k in range(1, len(c) + 1)
             for s in itertools.combinations(c, k)},
            key=lambda c: (len(c), [domain.index(a) for a in c]),
        )  # fmt: skip
        self.support: list[Clique] = support
        spaces: list[Clique] = [(), *support]
        index = {c: j for j, c in enumerate(support)}
        cells = np.array([float(math.prod(domain[a].size for a in c)) for c in support])
        rows: list[int] = []
        cols: list[int] = []
        space = {c: i for i, c in enumerate(spaces)}
        for a in support:  # every subset s of a (closure members: a's subsets are)
            for k in range(len(a) + 1):
                for s in itertools.combinations(a, k):
                    rows.append(space[s])
                    cols.append(index[a])
        self.containment = sp.csr_matrix(
            (1.0 / cells[cols], (rows, cols)), shape=(len(spaces), len(support))
        )  # λ = C·u
        mult = np.array([float(math.prod(domain[a].size - 1 for a in s)) for s in spaces])
        w = np.zeros(len(support))
        for c in workload:
            w[index[c]] += 1.0
        self.coef = mult * (self.containment @ w)  # c_s = mult_s·λ_s(w)
        self.workload_weight = w

    def trace(self, u: np.ndarray) -> tuple[float, np.ndarray]:
        """Σ_s c_s/λ_s(u) and its gradient in u (+∞ where a needed λ_s is 0)."""
        lam = self.containment @ u
        need = self.coef > 0
        if np.any(lam[need] <= 0):
            return math.inf, np.zeros_like(u)
        inv = np.zeros_like(lam)
        inv[need] = self.coef[need] / lam[need]
        sq = np.zeros_like(lam)
        sq[need] = self.coef[need] / lam[need] ** 2
        return float(inv.sum()), -(self.containment.T @ sq)

    def objective(self, theta: np.ndarray, mechanism: str) -> tuple[float, np.ndarray]:
        """(Σθ)²·T(θ²) for Laplace (HDMM's), (Σθ²)·T(θ²) for Gaussian, and the
        gradient in θ; both are scale-invariant in θ."""
        u = theta**2
        t, dt = self.trace(u)
        if not math.isfinite(t):
            return math.inf, np.zeros_like(theta)
        if mechanism == "laplace":
            s = float(theta.sum())
            return s * s * t, 2.0 * s * t + s * s * dt * 2.0 * theta
        s = float(u.sum())
        return s * t, (t + s * dt) * 2.0 * theta


def marginal_strategy(
    domain: Domain,
    workload: Sequence[Sequence[str]] | None,
    mechanism: str = "laplace",
    *,
    method: str = "opt_m",
    maxiter: int = 1000,
) -> MarginalStrategy:
    """The marginals `hdmm_pgm` measures for a marginal workload (public).

    ``method="opt_m"``: HDMM's OPT_M (McKenna, Miklau, Hay & Machanavajjhala,
    PVLDB 2018, §5.3) — the weights θ ≥ 0 of all marginals in the workload's
    downward closure minimising the closed-form error of `ClosureObjective`, by
    L-BFGS-B from the workload's own marginals. For Laplace noise that is
    HDMM's objective (Σθ)²·tr(...); for Gaussian noise the L1 norm becomes
    the L2 column norm √Σθ² (the Gaussian matrix mechanism: Li, Miklau, Hay,
    McGregor & Rastogi, VLDB J. 2015), so (Σθ²)·tr(...). Marginals whose
    weight ends below 10⁻⁴ of the largest are dropped when the rest still
    answers the workload.

    ``method="workload"``: the workload's own marginals, each answered by
    its own noisy measurement, with the budget split that minimises the
    total expected squared error of those direct answers. A marginal of n_a
    cells asked w_a times, Gaussian noise at ρ_a (σ_a² = 1/(2ρ_a) for L2
    sensitivity 1: Bun & Steinke, TCC 2016, Prop. 1.6), errs
    Σ_a w_a·n_a/(2ρ_a); under Σρ_a = ρ the Lagrange condition
    w_a·n_a/ρ_a² = const gives ρ_a ∝ √(w_a·n_a) (total (Σ√(w_a n_a))²/(2ρ);
    Cauchy–Schwarz shows it is the minimum). With Laplace noise at ε_a
    (variance 2/ε_a², L1 sensitivity 1: Dwork, McSherry, Nissim & Smith,
    TCC 2006) the error Σ 2·w_a·n_a/ε_a² gives ε_a ∝ (w_a·n_a)^{1/3} (total
    2(Σ(w_a n_a)^{1/3})³/ε², by Hölder). In θ (ε_a ∝ θ_a, ρ_a ∝ θ_a²) that
    is θ_a ∝ (w_a n_a)^{1/3} or (w_a n_a)^{1/4}. This is a feasible point of
    OPT_M's problem (least squares can only do better), so "opt_m" never
    errs more by its own measure.
    """
    mechanism = check_choice(mechanism, "mechanism", ("laplace", "gaussian"))
    method = check_choice(method, "method", ("opt_m", "workload"))
    if not isinstance(domain, Domain):
        raise TypeError(f"domain must be an ektelo Domain, got {type(domain).__name__}")
    cliques = workload_cliques(domain, workload, "hdmm_pgm")
    closure = ClosureObjective(domain, cliques)
    support = closure.support
    asked = closure.workload_weight
    cells = np.array([float(math.prod(domain[a].size for a in c)) for c in support])
    # The closed form on the workload's own marginals (θ from the shares).
    direct = np.zeros(len(support))
    on = asked > 0
    if mechanism == "laplace":
        direct[on] = (asked[on] * cells[on]) ** (1 / 3)  # θ_a ∝ ε_a
    else:
        direct[on] = (asked[on] * cells[on]) ** (1 / 4)  # θ_a ∝ √ρ_a
    theta = direct / direct.max()
    if method == "opt_m" and len(support) > int(on.sum()):
        start_value = closure.objective(theta, mechanism)[0]

        def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
            value, grad = closure.objective(x, mechanism)
            if not math.isfinite(value):
                return 1e300, np.zeros_like(x)
            return value / start_value, grad / start_value

        from scipy.optimize import Bounds, minimize  # lazy: only where used

        res = minimize(fun, theta, jac=True, method="L-BFGS-B",
                       bounds=Bounds(0.0, np.inf), options={"maxiter": maxiter})  # fmt: skip
        found = np.maximum(res.x, 0.0)
        if found.max() > 0 and closure.objective(found, mechanism)[0] < start_value:
            theta = found / found.max()
            trimmed = np.where(theta >= _NEGLIGIBLE, theta, 0.0)
            if math.isfinite(closure.objective(trimmed, mechanism)[0]):
                theta = trimmed
    keep = np.nonzero(theta > 0)[0]
    value = closure.objective(theta, mechanism)[0]
    return MarginalStrategy(
        cliques=tuple(support[i] for i in keep),
        weights=tuple(float(theta[i]) for i in keep),
        mechanism=mechanism,
        method=method,
        objective=float(value),
    )


@register(
    "hdmm_pgm",
    citation="McKenna, Sheldon & Miklau, ICML 2019 §6 (HDMM+PGM); McKenna et al., PVLDB 2018",
    summary="HDMM's marginal strategy on projections, graphical-model inference",
    data_dependent=False,
    input_kind="table",
    returns="model",
)
def hdmm_pgm(
    table: ProtectedTable,
    workload: Sequence[Sequence[str]] | None,
    budget: float | PureDP | ZCDP,
    *,
    mechanism: str = "laplace",
    strategy: str = "opt_m",
    maxiter: int = 1000,
    max_model_size: int | None = None,
) -> GraphicalModel:
    """HDMM+PGM for a marginal workload (attribute tuples; None: every pair).
    Budget: ε (mechanism="laplace") or ρ of zCDP ("gaussian"), split over
    the strategy's marginals by their weights θ — ε_a = ε·θ_a/Σθ or
    ρ_a = ρ·θ_a²/Σθ², exactly the budget in total — each the Identity on its
    own projection. The strategy (`marginal_strategy`, public): "opt_m",
    HDMM's OPT_M (PVLDB 2018 §5.3) restricted to the marginals inside the
    workload's cliques (those a model over them can hold), or "workload",
    the workload's own marginals with the error-minimising closed-form split.
    (`operators.hdmm`'s OPT_M ranges over all 2^d marginals, up to the full
    d-way one, which neither a projection nor a model over the workload's
    cliques can hold; its error formula is evaluated here on the closure
    only.) Then the graphical model (Private-PGM) is fitted to the
    measurements: an estimate, not HDMM's least squares on the full vector.

    Before anything is spent the model's junction tree over the strategy's
    cliques is checked against `max_model_size` (cells): a dense workload
    (every pair of many attributes) triangulates into one huge clique and is
    refused with `ModelTooLarge`. Returns the fitted GraphicalModel."""
    table = _check_table(table, "hdmm_pgm")
    b = check_budget(budget, mechanism)
    if isinstance(b, ZCDP) and table.budget.unit != "rho":
        raise ValueError(
            "mechanism='gaussian' spends ρ (zCDP), but this table was protected with a pure "
            "ε-DP budget: protect it with rho= (or epsilon= and delta=), or use "
            "mechanism='laplace'"
        )
    limit = _check_limit(max_model_size)
    domain = table.domain
    check_choice(strategy, "strategy", ("opt_m", "workload"))  # named as the caller named it
    plan = marginal_strategy(domain, workload, mechanism, method=strategy)  # Public
    _guard(domain, plan.cliques, limit, "hdmm_pgm's strategy")
    if isinstance(b, ZCDP):
        amounts = _exact_shares(b.rho, plan.shares())
        log = [_measure(table, c, rho=r) for c, r in zip(plan.cliques, amounts, strict=True)]
    else:
        amounts = _exact_shares(b.epsilon, plan.shares())
        log = [_measure(table, c, eps=e) for c, e in zip(plan.cliques, amounts, strict=True)]
    # Private→Public above; Public below
    return fit_graphical_model(log, domain, maxiter=maxiter, max_model_size=limit)
