"""Graphical-model inference: Private-PGM's estimator in NumPy (McKenna,
Sheldon & Miklau, "Graphical-model based estimation and inference for
differential privacy", ICML 2019). A **Public** operator: it reads
`Measurement` records and spends no budget.

From noisy linear measurements of marginals of one table (each taken on a
projection ``table.vectorize(attrs)``, possibly reduced or transformed on the
way — the query is read through ``query_on_root``), `fit_graphical_model`
finds the distribution whose marginals minimise the weighted squared error

    L(μ) = Σ_i ‖Q_i μ_{C_i} − y_i‖² / σ_i²      (σ_i² the noise variance)

among the graphical models on the measured cliques — the maximum-entropy
solution of §3 — with the total fixed. The model is a product of factors
exp(θ_C) on the model's cliques; a junction tree (`graphical.junction`) gives
its clique marginals by belief propagation, and the log-potentials follow
entropic mirror descent (§3.2, Algorithm 1; `graphical.fitting`):
θ ← θ − α ∇L(μ), the step α found by backtracking on the mirror-descent
majorisation L(μ⁺) ≤ L(μ) + ⟨∇L(μ), μ⁺ − μ⟩ + N·KL(p⁺ ‖ p)/α (exact: the KL
between two members of the family is read off their log-partition
functions), which 1/(2N·Σ_i w_i max‖col Q_i‖²) always passes; Nesterov
momentum, restarted whenever a step would raise the loss, so the loss never
increases; a start read off the measured marginals (exact for 1-way ones).
On identical measurements of adult (ε = 1) it reaches a lower loss than the
`mbi` package's mirror descent after 10,000 iterations, with the same
accuracy (benchmarks/bench_graphical_model.py); at 1,000 iterations mbi's
less-converged fit is the more accurate (TV 0.056 against 0.060, docs/plans.md):
the least-squares optimum is less accurate than points on the way to it.

The fitted `GraphicalModel` answers any marginal (`marginal`, by variable
elimination over the junction tree when no clique holds it), any linear query
on a marginal (`answer`), and samples synthetic rows decoded back to the
Domain's values (`synthetic`). Nothing ever materialises the full domain: the
junction tree's size is checked against a public limit before fitting
(`max_model_size`, raising `ModelTooLarge`), and `model_size` gives that size
for hypothetical cliques (AIM's guard, McKenna et al., PVLDB 2022).

`CompressedGraphicalModel` wraps a model fitted on a compressed domain (MST's
domain compression, `graphical.compression`) so that it answers and samples
in the original domain.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .. import _validate as check
from ..domain import Domain, check_names
from ..errors import ModelTooLarge
from ..matrix import EMatrix, Total
from ..measurement import Measurement
from .graphical.compression import DomainCompression
from .graphical.elimination import tree_marginal
from .graphical.fitting import (
    FitInfo,
    Problem,
    check_measurements,
    estimate_total,
    initial_potentials,
    mirror_descent,
    weights_of,
)
from .graphical.junction import (
    Clique,
    JunctionTree,
    assignment,
    canonical,
    clique_potentials,
    expand,
    maximal_cliques,
)
from .graphical.junction import model_size as _model_size
from .graphical.sampling import decode, sample_codes

__all__ = [
    "MAX_MODEL_CELLS",
    "CompressedGraphicalModel",
    "DomainCompression",
    "FitInfo",
    "GraphicalModel",
    "ModelTooLarge",
    "fit_graphical_model",
    "model_size",
]

# The default public limit on the junction tree's cells (and on any table a
# marginal query builds): 2.5·10⁷ float64 cells is 200 MB per copy, and a fit
# holds a few copies (potentials, beliefs, gradient).
MAX_MODEL_CELLS = 25_000_000


def model_size(domain: Domain, cliques: Sequence[Sequence[str]]) -> int:
    """The junction tree's cells for hypothetical `cliques` over `domain`,
    without fitting (AIM's model-size guard)."""
    return _model_size(domain, cliques)


def _check_domain(domain: Any) -> Domain:
    if not isinstance(domain, Domain):
        raise TypeError(f"domain must be an ektelo Domain, got {type(domain).__name__}")
    return domain


def _check_limit(limit: Any) -> int:
    if limit is None:
        return MAX_MODEL_CELLS
    return check.positive_int(limit, "max_model_size")


class GraphicalModel:
    """A distribution over `domain` as a product of factors exp(θ_C) on its
    cliques, scaled to `total` records (Private-PGM's `GraphicalModel`).

    Built by `fit_graphical_model`, or directly from log-potentials (one
    array per clique, axes in the domain's attribute order; zero potentials
    — the default — give the uniform distribution).

    Attributes: `domain`, `total`, `cliques` (the model's cliques: where the
    potentials live, each in the domain's order), `maximal_cliques` (the
    junction tree's), `size` (the junction tree's cells), `info` (`FitInfo`).
    """

    def __init__(
        self,
        domain: Domain,
        cliques: Sequence[Sequence[str]],
        potentials: Sequence[np.ndarray] | None = None,
        *,
        total: float = 1.0,
        info: FitInfo | None = None,
        max_model_size: int | None = None,
    ):
        self.domain = _check_domain(domain)
        canon = [canonical(domain, c) for c in cliques]
        self.cliques: tuple[Clique, ...] = tuple(maximal_cliques(canon))
        self.total = check.positive(total, "total")
        self.info = info if info is not None else FitInfo()
        self._limit = _check_limit(max_model_size)
        size = _model_size(domain, self.cliques)
        if size > self._limit:
            raise ModelTooLarge(
                f"the junction tree of cliques {[list(c) for c in self.cliques]} has {size} "
                f"cells, above max_model_size={self._limit}"
            )
        self._tree = JunctionTree(domain, self.cliques)
        shapes = [tuple(domain[a].size for a in c) for c in self.cliques]
        if potentials is None:
            pots = [np.zeros(s) for s in shapes]
        else:
            if len(potentials) != len(canon):
                raise ValueError(f"{len(potentials)} potentials for {len(canon)} cliques")
            # Potentials given for every clique passed (subsets included)
            # fold into the maximal clique that holds them.
            pots = [np.zeros(s) for s in shapes]
            for c, p in zip(canon, potentials, strict=True):
                arr = np.asarray(p, dtype=np.float64)
                want = tuple(domain[a].size for a in c)
                if arr.shape != want:
                    raise ValueError(
                        f"the potential of {list(c)} has shape {arr.shape}, not {want}"
                    )
                if not np.all(np.isfinite(arr)):
                    raise ValueError(f"the potential of {list(c)} has non-finite entries")
                i = next(j for j, m in enumerate(self.cliques) if set(c) <= set(m))
                pots[i] += expand(arr, c, self.cliques[i], domain)
        self._potentials = tuple(pots)
        self._assign = assignment(self._tree, self.cliques)
        probs, _ = self._tree.calibrate(
            clique_potentials(self._tree, self.cliques, self._assign, pots)
        )
        self._probs = tuple(probs)

    @property
    def size(self) -> int:
        """Cells of the junction tree (the sum over its maximal cliques)."""
        return self._tree.size

    @property
    def maximal_cliques(self) -> tuple[Clique, ...]:
        """The junction tree's cliques (the triangulation's maximal cliques)."""
        return self._tree.cliques

    @property
    def potentials(self) -> tuple[np.ndarray, ...]:
        """The log-potentials θ_C, one per clique of `cliques` (copies)."""
        return tuple(p.copy() for p in self._potentials)

    def marginal(self, attrs: Sequence[str]) -> np.ndarray:
        """The model's marginal on `attrs` (axes in the order given, shape
        `domain.project(attrs).shape`), summing to `total`. Inside one
        clique it is summed from the clique's belief; otherwise computed by
        variable elimination over the junction tree, every table checked
        against the model's size limit (`ModelTooLarge`)."""
        names = check_names(self.domain, attrs)
        return self.total * self._prob(names)

    def _prob(self, names: Clique) -> np.ndarray:
        parts: dict[int, list[str]] = {}
        for a in names:
            parts.setdefault(self._tree.component[a], []).append(a)
        if len(parts) > 1:
            # Independent parts of the model (joined by empty separators):
            # the marginal is the outer product of theirs.
            cells = math.prod(self.domain[a].size for a in names)
            if cells > self._limit:
                raise ModelTooLarge(
                    f"the marginal on {list(names)} has {cells} cells, above the limit "
                    f"{self._limit}"
                )
            args: list[Any] = []
            for group in parts.values():
                args += [self._prob(tuple(group)), [names.index(a) for a in group]]
            return np.asarray(np.einsum(*args, list(range(len(names)))))
        home = self._tree.home(names)
        if home is None:
            return tree_marginal(self._tree, self._probs, names, self._limit, ModelTooLarge)
        clique = self._tree.cliques[home]
        drop = tuple(i for i, a in enumerate(clique) if a not in names)
        table = self._probs[home].sum(axis=drop) if drop else self._probs[home]
        kept = [a for a in clique if a in names]
        return np.transpose(table, [kept.index(a) for a in names])

    def answer(self, W: Any, attrs: Sequence[str]) -> np.ndarray:
        """W times the flattened (C order) marginal on `attrs`; W an ektelo
        EMatrix, a 2-D array or a SciPy sparse matrix with one column per cell."""
        mu = self.marginal(attrs).reshape(-1)
        if isinstance(W, EMatrix) or sp.issparse(W):
            shape = W.shape
        else:
            W = np.asarray(W, dtype=np.float64)
            if W.ndim != 2:
                raise ValueError(f"W must be a matrix (2-D), got {W.ndim} dimensions")
            shape = W.shape
        if shape[1] != mu.size:
            raise ValueError(
                f"W has {shape[1]} columns; the marginal on {list(attrs)} has {mu.size} cells"
            )
        out = W.matvec(mu) if isinstance(W, EMatrix) else W @ mu
        return np.asarray(out, dtype=np.float64).reshape(-1)

    def synthetic(self, rows: int, *, seed: Any = None, method: str = "balanced") -> pd.DataFrame:
        """`rows` records drawn from the model, columns in the domain's order
        and decoded to its values (labels, a bin's lower edge, codes).
        ``method="balanced"`` (default): Private-PGM's rounding of expected
        counts, each new column's values spread evenly over the rows ordered
        by the columns drawn before (issue #43); ``"round"`` the rounding
        with values shuffled (Private-PGM's); ``"sample"`` independent draws
        (`graphical.sampling`)."""
        rows = check.positive_int(rows, "rows")
        if method not in ("round", "sample", "balanced"):
            raise ValueError(f"method must be 'round', 'sample' or 'balanced', got {method!r}")
        rng = np.random.default_rng(seed)
        codes = sample_codes(self._tree, self._probs, rows, rng, method)
        return pd.DataFrame(
            {a.name: decode(a, codes[:, j]) for j, a in enumerate(self.domain.attributes)}
        )

    def __repr__(self) -> str:
        return (
            f"GraphicalModel({len(self.cliques)} cliques, {self.size} cells, total={self.total:g})"
        )


class CompressedGraphicalModel(GraphicalModel):
    """A `GraphicalModel` fitted on a compressed domain (MST's domain
    compression, `graphical.compression`), speaking the original one:
    `domain` is the original Domain; `marginal`/`answer` spread each merged
    value's mass uniformly over its original values; `synthetic` draws rows
    on the compressed domain and replaces a merged value by one of its
    original values, uniformly. `inner` is the fitted model on
    `compression.compressed`; `cliques`, `size`, `info` and `total` are its."""

    def __init__(self, inner: GraphicalModel, compression: DomainCompression):
        if not isinstance(inner, GraphicalModel):
            raise TypeError(f"inner must be a GraphicalModel, got {type(inner).__name__}")
        if not isinstance(compression, DomainCompression):
            raise TypeError(
                f"compression must be a DomainCompression, got {type(compression).__name__}"
            )
        if inner.domain != compression.compressed:
            raise ValueError("inner is not a model of the compression's compressed domain")
        # Not GraphicalModel.__init__: the tree and beliefs are inner's.
        self.inner = inner
        self.compression = compression
        self.domain = compression.original
        self.cliques = inner.cliques
        self.total = inner.total
        self.info = inner.info
        self._limit = inner._limit

    @property
    def size(self) -> int:
        """Cells of the (compressed) junction tree."""
        return self.inner.size

    @property
    def maximal_cliques(self) -> tuple[Clique, ...]:
        return self.inner.maximal_cliques

    @property
    def potentials(self) -> tuple[np.ndarray, ...]:
        """The inner model's log-potentials (on the compressed domain)."""
        return self.inner.potentials

    def marginal(self, attrs: Sequence[str]) -> np.ndarray:
        """The marginal on `attrs` over the original domain (axes in the
        order given), summing to `total`; `ModelTooLarge` when it has more
        cells than the model's limit."""
        names = check_names(self.domain, attrs)
        cells = math.prod(self.domain[a].size for a in names)
        if cells > self._limit:
            raise ModelTooLarge(
                f"the marginal on {list(names)} has {cells} cells, above the limit {self._limit}"
            )
        return self.compression.expand(self.inner.marginal(names), names)

    def synthetic(self, rows: int, *, seed: Any = None, method: str = "balanced") -> pd.DataFrame:
        """`rows` records in the original domain's values (see the class)."""
        rows = check.positive_int(rows, "rows")
        if method not in ("round", "sample", "balanced"):
            raise ValueError(f"method must be 'round', 'sample' or 'balanced', got {method!r}")
        rng = np.random.default_rng(seed)
        codes = sample_codes(self.inner._tree, self.inner._probs, rows, rng, method)
        codes = self.compression.decode(codes, rng)
        return pd.DataFrame(
            {a.name: decode(a, codes[:, j]) for j, a in enumerate(self.domain.attributes)}
        )

    def __repr__(self) -> str:
        return (
            f"CompressedGraphicalModel({len(self.cliques)} cliques, {self.size} cells on "
            f"{self.inner.domain.size:.3g} compressed of {self.domain.size:.3g} cells, "
            f"total={self.total:g})"
        )


def fit_graphical_model(
    measurements: Sequence[Measurement],
    domain: Domain,
    *,
    total: float | None = None,
    cliques: Sequence[Sequence[str]] | None = None,
    maxiter: int = 1000,
    tol: float = 1e-6,
    start: GraphicalModel | None = None,
    max_model_size: int | None = None,
    callback: Callable[[int, float], Any] | None = None,
    init: str = "measured",
    discrepancy: float | None = None,
) -> GraphicalModel:
    """Fit Private-PGM's graphical model to measurements of one table's
    marginals (module docstring; McKenna, Sheldon & Miklau, ICML 2019).

    Args:
        measurements: measurements of projections of ONE table
            (``table.vectorize(attrs).gaussian(...)`` / ``.laplace(...)``),
            grouped by their attributes (the cliques).
        domain: the table's (public) Domain.
        total: the known public total; by default estimated from the
            measurements (inverse-variance weighted).
        cliques: extra cliques to include in the model.
        maxiter, tol: the stopping rule (`graphical.fitting.mirror_descent`).
        start: a previous model to warm-start from (its potentials, on the
            cliques of the new model that contain them, and its step size).
        max_model_size: the public limit on the junction tree's cells
            (default `MAX_MODEL_CELLS`); above it, `ModelTooLarge`.
        callback: called as callback(iteration, loss) after each iteration.
        init: the starting point without `start`: "measured" (default; the
            measured marginals' conditionals, `initial_potentials`: the
            optimum for disjoint or consistent tree measurements) or
            "uniform" (all potentials zero). A fixed `maxiter` from the
            uniform start is early stopping, a regulariser of the noisy
            least-squares fit.
        discrepancy: early stopping by the discrepancy principle (Morozov
            1966): the fit stops at the first iterate whose loss — the
            inverse-variance weighted squared residual, about the number of
            answers at the truth — is at most `discrepancy` × the number of
            answers. None (default): run to convergence. A regulariser of
            the noisy least-squares fit, from the uniform start (`init`).
    """
    domain = _check_domain(domain)
    items = check_measurements(measurements, domain)
    maxiter = check.positive_int(maxiter, "maxiter")
    tol = check.probability(tol, "tol")
    limit = _check_limit(max_model_size)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    if discrepancy is not None:
        discrepancy = check.positive(discrepancy, "discrepancy")
    if init not in ("measured", "uniform"):
        raise ValueError(f"init must be 'measured' or 'uniform', got {init!r}")
    if start is not None and not isinstance(start, GraphicalModel):
        raise TypeError(f"start must be a GraphicalModel, got {type(start).__name__}")
    if start is not None and start.domain != domain:
        raise ValueError("start is a model of another domain")
    extra = [] if cliques is None else [canonical(domain, c, "cliques") for c in cliques]
    # A total query (NoisyCount's, or Total on any projection) measures the
    # total alone: it enters the total's estimate, not the model (with the
    # total fixed it adds nothing to the loss).
    marginals = [m for m in items if not isinstance(m.query_on_root, Total)]
    measured = [canonical(domain, m.attributes or ()) for m in marginals]
    model_cliques = maximal_cliques([*measured, *extra])
    size = _model_size(domain, model_cliques)
    if size > limit:
        raise ModelTooLarge(
            f"the junction tree of cliques {[list(c) for c in model_cliques]} has {size} "
            f"cells, above max_model_size={limit}"
        )
    weights = weights_of(items)
    estimated = total is None
    n = estimate_total(items, weights) if total is None else check.positive(total, "total")
    kept = [w for m, w in zip(items, weights, strict=True) if m in marginals]
    problem = Problem(domain, model_cliques, marginals, kept, n)
    dropped: list[Clique] = []
    step = problem.safe_step
    if start is None and init == "uniform":
        theta = [np.zeros(s) for s in problem.shapes]
    elif start is None:
        theta = initial_potentials(problem)
    else:
        theta = [np.zeros(tuple(domain[a].size for a in c)) for c in model_cliques]
        for c, p in zip(start.cliques, start._potentials, strict=True):
            j = next((j for j, m in enumerate(model_cliques) if set(c) <= set(m)), None)
            if j is None:
                dropped.append(c)
                continue
            theta[j] = theta[j] + expand(p, c, model_cliques[j], domain)
        if math.isfinite(start.info.stepsize):
            # The start's step was for its own total: steps scale as 1/N.
            step = start.info.stepsize * start.total / n
    stop = None if discrepancy is None else discrepancy * problem.answers
    theta, info = mirror_descent(problem, theta, step, maxiter, tol, callback, stop_loss=stop)
    info = FitInfo(
        iterations=info.iterations,
        loss=info.loss,
        converged=info.converged,
        stepsize=info.stepsize,
        seconds=info.seconds,
        total_estimated=estimated,
        dropped_start_cliques=tuple(dropped),
        message=info.message,
        evaluations=info.evaluations,
    )
    return GraphicalModel(domain, model_cliques, theta, total=n, info=info, max_model_size=limit)
