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
entropic mirror descent (§3.2, Algorithm 1): θ ← θ − α ∇L(μ), with the step
α found by backtracking on the mirror-descent majorisation
L(μ⁺) ≤ L(μ) + ⟨∇L(μ), μ⁺ − μ⟩ + N·KL(p⁺ ‖ p)/α (exact, as KL between two
members of the family is read off the log-partition functions), doubled at
each iteration as in Private-PGM. The step 1/(2N·Σ_i w_i max‖col Q_i‖²) always
passes, so the loss never increases.

The fitted `GraphicalModel` answers any marginal (`marginal`, by variable
elimination over the junction tree when no clique holds it), any linear query
on a marginal (`answer`), and samples synthetic rows decoded back to the
Domain's values (`synthetic`). Nothing ever materialises the full domain: the
junction tree's size is checked against a public limit before fitting
(`max_model_size`, raising `ModelTooLarge`), and `model_size` gives that size
for hypothetical cliques (AIM's guard, McKenna et al., PVLDB 2022).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.sparse.linalg import lsmr

from .. import _validate as check
from ..domain import Domain, check_names
from ..matrix import EMatrix, Identity
from ..measurement import Measurement
from .graphical.elimination import tree_marginal
from .graphical.junction import Clique, JunctionTree, canonical, maximal_cliques
from .graphical.junction import model_size as _model_size
from .graphical.sampling import decode, sample_codes

__all__ = [
    "MAX_MODEL_CELLS",
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

# The step-size rule: each iteration tries the last step times _GROW and
# backtracks by _SHRINK, at most _BACKTRACK times before taking the step known
# to pass (module docstring). A small growth keeps most iterations to one
# belief propagation (Private-PGM's JAX version grows by 1.01, halves on failure).
_GROW = 1.05
_SHRINK = 0.6
_BACKTRACK = 40


class ModelTooLarge(ValueError):  # noqa: N818 (the name the plans and AIM use)
    """The junction tree (or a table a query needs) exceeds the public size limit."""


@dataclass(frozen=True)
class FitInfo:
    """How a fit went: iterations run, final loss (the weighted squared error
    L above), whether the stopping rule was met, the last step size, the
    seconds spent, whether the total was estimated, the start's cliques that
    the new model could not hold (their potentials were dropped)."""

    iterations: int = 0
    loss: float = float("nan")
    converged: bool = False
    stepsize: float = float("nan")
    seconds: float = 0.0
    total_estimated: bool = False
    dropped_start_cliques: tuple[Clique, ...] = field(default_factory=tuple)
    message: str = ""
    evaluations: int = 0


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
                pots[i] += _expand(arr, c, self.cliques[i], domain)
        self._potentials = tuple(pots)
        self._assign = _assignment(self._tree, self.cliques)
        probs, _ = self._tree.calibrate(
            _clique_potentials(self._tree, self.cliques, self._assign, pots)
        )
        self._probs = tuple(probs)

    @property
    def size(self) -> int:
        """Cells of the junction tree (the sum over its maximal cliques)."""
        return self._tree.size

    @property
    def maximal_cliques(self) -> tuple[Clique, ...]:
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

    def synthetic(self, rows: int, *, seed: Any = None, method: str = "round") -> pd.DataFrame:
        """`rows` records drawn from the model, columns in the domain's order
        and decoded to its values (labels, a bin's lower edge, codes).
        ``method="round"`` (default) is Private-PGM's rounding of expected
        counts; ``"sample"`` independent draws (`graphical.sampling`)."""
        rows = check.positive_int(rows, "rows")
        if method not in ("round", "sample"):
            raise ValueError(f"method must be 'round' or 'sample', got {method!r}")
        rng = np.random.default_rng(seed)
        codes = sample_codes(self._tree, self._probs, rows, rng, method)
        return pd.DataFrame(
            {a.name: decode(a, codes[:, j]) for j, a in enumerate(self.domain.attributes)}
        )

    def __repr__(self) -> str:
        return (
            f"GraphicalModel({len(self.cliques)} cliques, {self.size} cells, total={self.total:g})"
        )


def _expand(table: np.ndarray, sub: Clique, clique: Clique, domain: Domain) -> np.ndarray:
    """`table` on `sub` (domain order) broadcast to the shape of `clique` ⊇ sub."""
    view = tuple(domain[a].size if a in sub else 1 for a in clique)
    return np.broadcast_to(table.reshape(view), tuple(domain[a].size for a in clique))


def _assignment(tree: JunctionTree, cliques: Sequence[Clique]) -> list[int]:
    """The maximal clique of the junction tree that holds each model clique."""
    out = []
    for c in cliques:
        home = tree.home(c)
        if home is None:  # the triangulation contains every clique
            raise AssertionError(f"no junction-tree clique holds {c}")
        out.append(home)
    return out


def _clique_potentials(
    tree: JunctionTree,
    cliques: Sequence[Clique],
    assign: Sequence[int],
    potentials: Sequence[np.ndarray],
) -> list[np.ndarray]:
    """Each maximal clique's log-potential: the sum of the model cliques' it holds."""
    out: list[np.ndarray | None] = [None] * len(tree.cliques)
    for c, home, theta in zip(cliques, assign, potentials, strict=True):
        table = (
            theta if c == tree.cliques[home] else _expand(theta, c, tree.cliques[home], tree.domain)
        )
        previous = out[home]
        out[home] = table if previous is None else previous + table
    return [np.zeros(s) if t is None else t for s, t in zip(tree.shapes, out, strict=True)]


# -- fitting ------------------------------------------------------------------------


@dataclass
class _Group:
    """The measurements of one attribute tuple (in the measurements' order)
    and where its marginal lives: summed from junction-tree clique `home`,
    its gradient added to the potential of model clique `model`."""

    attrs: Clique
    home: int
    drop: tuple[int, ...]
    perm: tuple[int, ...]
    model: int
    to_domain: tuple[int, ...]
    queries: list[tuple[EMatrix, np.ndarray, float]]
    # Identity queries folded into one: Σ w‖μ − y‖² = W‖μ − ȳ‖² + c.
    view: tuple[int, ...] = ()  # the canonical gradient's shape inside `model`
    weight: float = 0.0
    target: np.ndarray | None = None
    offset: float = 0.0

    def fold(self) -> None:
        """Fold the identity queries (the common case: a measured marginal)."""
        same = [(y, w) for Q, y, w in self.queries if isinstance(Q, Identity)]
        if not same:
            return
        self.queries = [q for q in self.queries if not isinstance(q[0], Identity)]
        self.weight = sum(w for _, w in same)
        target = np.sum([w * y for y, w in same], axis=0) / self.weight
        self.target = target
        self.offset = sum(w * float(y @ y) for y, w in same) - self.weight * float(
            target @ target
        )


def _table_key(m: Measurement, i: int) -> str:
    """The table a projection's measurement comes from: its root id without
    the trailing attribute list ("<kernel>/t<node>/")."""
    assert m.attributes is not None
    suffix = "|".join(m.attributes)
    if not m.root_id.endswith(suffix):
        raise ValueError(
            f"measurements[{i}]: root_id {m.root_id!r} does not end with its attributes "
            f"{suffix!r}; it is not the measurement of a table's projection"
        )
    return m.root_id[: len(m.root_id) - len(suffix)]


def _check_measurements(measurements: Any, domain: Domain) -> list[Measurement]:
    if isinstance(measurements, Measurement) or not isinstance(measurements, Sequence):
        raise TypeError(
            f"measurements must be a list of Measurement, got {type(measurements).__name__}"
        )
    items = list(measurements)
    if not items:
        raise ValueError("no measurements: the graphical model needs at least one measurement")
    tables: dict[str, int] = {}
    for i, m in enumerate(items):
        if not isinstance(m, Measurement):
            raise TypeError(f"measurements[{i}] is a {type(m).__name__}, not a Measurement")
        if m.attributes is None:
            raise ValueError(
                f"measurements[{i}] measures a protected array (no attributes); the graphical "
                f"model needs measurements of a table's projections (table.vectorize(attrs))"
            )
        check_names(domain, list(m.attributes), f"measurements[{i}].attributes")
        want = domain.project(m.attributes).shape
        if tuple(m.root_shape) != want:
            raise ValueError(
                f"measurements[{i}] has root_shape {tuple(m.root_shape)}; the domain's "
                f"{list(m.attributes)} have shape {want}"
            )
        if m.query_on_root.shape[1] != math.prod(want):
            raise ValueError(
                f"measurements[{i}].query_on_root has {m.query_on_root.shape[1]} columns; "
                f"the projection on {list(m.attributes)} has {math.prod(want)} cells"
            )
        if not np.all(np.isfinite(m.answers)):
            raise ValueError(f"measurements[{i}] has non-finite answers")
        tables.setdefault(_table_key(m, i), i)
    if len(tables) > 1:
        first, other = sorted(tables.values())[:2]
        raise ValueError(
            f"measurements come from different tables (measurements[{first}] and "
            f"measurements[{other}] have roots {items[first].root_id!r} and "
            f"{items[other].root_id!r}); fit one table's measurements at a time"
        )
    return items


def _weights(items: Sequence[Measurement]) -> list[float]:
    """1/σ² per measurement; noiseless ones (σ = 0) weigh as a σ of 10⁻³
    times the smallest positive one (the convention of `inference._system`)."""
    positive = [m.variance for m in items if m.variance > 0]
    exact = (min(positive) if positive else 1.0) * 1e-6
    return [1.0 / max(m.variance, exact) for m in items]


def _estimate_total(items: Sequence[Measurement], weights: Sequence[float]) -> float:
    """The total from the measurements that determine it (v with Qᵀv = 1:
    the estimate v·y, variance ‖v‖²/w), combined by inverse variance;
    at least 1 (Private-PGM's rule)."""
    estimates, precisions = [], []
    for m, w in zip(items, weights, strict=True):
        Q = m.query_on_root
        ones = np.ones(Q.shape[1])
        v = lsmr(Q.T.as_linear_operator(), ones, atol=1e-12, btol=1e-12, maxiter=200)[0]
        if np.linalg.norm(Q.rmatvec(v) - ones) > 1e-6 * math.sqrt(ones.size):
            continue
        norm2 = float(v @ v)
        if norm2 <= 0:
            continue
        estimates.append(float(v @ m.answers))
        precisions.append(w / norm2)
    if not estimates:
        raise ValueError(
            "the total cannot be estimated: no measurement determines it (none has the "
            "total among the linear combinations of its queries); pass total="
        )
    p = np.asarray(precisions)
    return max(1.0, float(np.dot(p, estimates) / p.sum()))


class _Problem:
    """The loss L(μ) of the module docstring on a fixed junction tree, as a
    function of the model cliques' log-potentials."""

    def __init__(
        self,
        domain: Domain,
        cliques: Sequence[Clique],
        items: Sequence[Measurement],
        weights: Sequence[float],
        total: float,
    ):
        self.domain, self.cliques, self.total = domain, tuple(cliques), total
        self.tree = JunctionTree(domain, self.cliques)
        self.assign = _assignment(self.tree, self.cliques)
        groups: dict[Clique, _Group] = {}
        lipschitz = 0.0
        for m, w in zip(items, weights, strict=True):
            assert m.attributes is not None
            attrs = m.attributes
            if attrs not in groups:
                home = self.tree.home(attrs)
                assert home is not None  # every measured clique is in the model
                clique = self.tree.cliques[home]
                kept = [a for a in clique if a in attrs]
                model = next(j for j, c in enumerate(self.cliques) if set(attrs) <= set(c))
                canon = sorted(attrs, key=domain.index)
                groups[attrs] = _Group(
                    attrs,
                    home,
                    tuple(i for i, a in enumerate(clique) if a not in attrs),
                    tuple(kept.index(a) for a in attrs),
                    model,
                    tuple(attrs.index(a) for a in canon),
                    [],
                )
            groups[attrs].queries.append((m.query_on_root, m.answers, w))
            lipschitz += w * m.query_on_root.sensitivity(2) ** 2
        self.groups = list(groups.values())
        self.shapes = [tuple(domain[a].size for a in c) for c in self.cliques]
        for g in self.groups:
            g.fold()
            g.view = tuple(domain[a].size if a in g.attrs else 1 for a in self.cliques[g.model])
        # The step that always passes the backtracking test (module docstring).
        self.safe_step = 1.0 / (2.0 * total * max(lipschitz, 1e-300))
        self.answers = sum(len(m) for m in items)

    def forward(self, theta: Sequence[np.ndarray]) -> tuple[list[np.ndarray], float]:
        """Clique probabilities (each summing to one) and log Z."""
        phi = _clique_potentials(self.tree, self.cliques, self.assign, theta)
        return self.tree.calibrate(phi)

    def marginals(self, probs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """μ on every group's attributes (counts, the group's axis order)."""
        out = []
        for g in self.groups:
            table = probs[g.home].sum(axis=g.drop) if g.drop else probs[g.home]
            out.append(self.total * np.transpose(table, g.perm))
        return out

    def loss(self, mus: Sequence[np.ndarray]) -> tuple[float, list[np.ndarray]]:
        """L(μ) and its gradient on every group's marginal."""
        value = 0.0
        grads = []
        for g, mu in zip(self.groups, mus, strict=True):
            flat = mu.reshape(-1)
            if g.target is not None:
                r = flat - g.target
                value += g.weight * float(r @ r) + g.offset
                grad = (2.0 * g.weight) * r
            else:
                grad = np.zeros(flat.size)
            for Q, y, w in g.queries:
                r = Q.matvec(flat) - y
                value += w * float(r @ r)
                grad += (2.0 * w) * Q.rmatvec(r)
            grads.append(grad.reshape(mu.shape))
        return value, grads

    def direction(self, grads: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The gradient as log-potentials on the model cliques."""
        out: list[np.ndarray | None] = [None] * len(self.cliques)
        for g, grad in zip(self.groups, grads, strict=True):
            table = np.transpose(grad, g.to_domain).reshape(g.view)
            current = out[g.model]
            if current is None:
                out[g.model] = np.broadcast_to(table, self.shapes[g.model]).copy()
            else:
                current += table
        return [np.zeros(s) if t is None else t for s, t in zip(self.shapes, out, strict=True)]


def _inner(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    return float(sum(np.vdot(x, y) for x, y in zip(a, b, strict=True)))


@dataclass
class _Point:
    """The model at log-potentials `theta`: log Z, the groups' marginals,
    the loss and its gradient."""

    theta: list[np.ndarray]
    log_z: float
    mus: list[np.ndarray]
    loss: float
    grads: list[np.ndarray]


def _evaluate(problem: _Problem, theta: list[np.ndarray]) -> _Point:
    probs, log_z = problem.forward(theta)
    mus = problem.marginals(probs)
    f, grads = problem.loss(mus)
    return _Point(theta, log_z, mus, f, grads)


def _mirror_descent(
    problem: _Problem,
    theta: list[np.ndarray],
    step: float,
    maxiter: int,
    tol: float,
    callback: Callable[[int, float], Any] | None,
    *,
    momentum: bool = True,
) -> tuple[list[np.ndarray], FitInfo]:
    """Entropic mirror descent on the log-potentials with backtracking (the
    module docstring); stops when an iteration lowers the loss by less than
    `tol` × max(loss, number of answers) — the loss is a χ²-like sum, the
    number of answers its scale at the truth. The step doubles from the safe
    one (or a warm start's) until the first backtrack, then grows gently.

    With `momentum`, each step is taken from an extrapolated point
    θ + β(θ − θ_prev) (Nesterov's sequence, β = (t_{k−1} − 1)/t_k), and the
    momentum restarts whenever a step would raise the loss (O'Donoghue &
    Candès, "Adaptive restart for accelerated gradient schemes", 2015): the
    loss still never increases."""
    start = time.perf_counter()
    N = problem.total
    here = _evaluate(problem, theta)
    previous = here.theta
    step = max(step, problem.safe_step)
    converged = False
    it = 0
    evaluations = 1
    grow = 2.0
    t_prev, t_now = 1.0, 1.0
    for it in range(1, maxiter + 1):
        beta = (t_prev - 1.0) / t_now if momentum else 0.0
        if beta > 0:
            y_theta = [a + beta * (a - b) for a, b in zip(here.theta, previous, strict=True)]
            base = _evaluate(problem, y_theta)
            evaluations += 1
        else:
            base = here
        direction = problem.direction(base.grads)
        dot_old = _inner(base.grads, base.mus)
        trial = grow * step
        for attempt in range(_BACKTRACK + 1):
            if attempt == _BACKTRACK or trial <= problem.safe_step:
                trial = max(trial, problem.safe_step)
            new = _evaluate(
                problem, [t - trial * d for t, d in zip(base.theta, direction, strict=True)]
            )
            evaluations += 1
            # L(μ⁺) ≤ L(μ) + ⟨g, μ⁺ − μ⟩ + N·KL(p⁺‖p)/α, where
            # N·KL(p⁺‖p) = −α⟨g, μ⁺⟩ − N(log Z⁺ − log Z): the ⟨g, μ⁺⟩ cancel.
            bound = base.loss - dot_old - (N / trial) * (new.log_z - base.log_z)
            slack = 1e-12 * (abs(base.loss) + abs(dot_old))
            if new.loss <= bound + slack or trial <= problem.safe_step:
                break
            trial *= _SHRINK
            grow = _GROW
        step = trial
        if new.loss > here.loss and beta > 0:
            # The momentum overshot: restart it (the next step is plain).
            t_prev, t_now = 1.0, 1.0
            previous = here.theta
            if callback is not None:
                callback(it, here.loss)
            continue
        decrease = here.loss - new.loss
        previous, here = here.theta, new
        t_prev, t_now = t_now, (1.0 + math.sqrt(1.0 + 4.0 * t_now * t_now)) / 2.0
        if callback is not None:
            callback(it, here.loss)
        if decrease <= tol * max(here.loss, problem.answers):
            converged = True
            break
    info = FitInfo(
        iterations=it,
        loss=here.loss,
        converged=converged,
        stepsize=step,
        seconds=time.perf_counter() - start,
        message="loss decrease below tol" if converged else "maxiter reached",
        evaluations=evaluations,
    )
    return here.theta, info


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
        maxiter, tol: the stopping rule (`_mirror_descent`).
        start: a previous model to warm-start from (its potentials, on the
            cliques of the new model that contain them, and its step size).
        max_model_size: the public limit on the junction tree's cells
            (default `MAX_MODEL_CELLS`); above it, `ModelTooLarge`.
        callback: called as callback(iteration, loss) after each iteration.
    """
    domain = _check_domain(domain)
    items = _check_measurements(measurements, domain)
    maxiter = check.positive_int(maxiter, "maxiter")
    tol = check.probability(tol, "tol")
    limit = _check_limit(max_model_size)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    if start is not None and not isinstance(start, GraphicalModel):
        raise TypeError(f"start must be a GraphicalModel, got {type(start).__name__}")
    if start is not None and start.domain != domain:
        raise ValueError("start is a model of another domain")
    extra = [] if cliques is None else [canonical(domain, c, "cliques") for c in cliques]
    measured = [canonical(domain, m.attributes or ()) for m in items]
    model_cliques = maximal_cliques([*measured, *extra])
    size = _model_size(domain, model_cliques)
    if size > limit:
        raise ModelTooLarge(
            f"the junction tree of cliques {[list(c) for c in model_cliques]} has {size} "
            f"cells, above max_model_size={limit}"
        )
    weights = _weights(items)
    estimated = total is None
    n = _estimate_total(items, weights) if total is None else check.positive(total, "total")
    problem = _Problem(domain, model_cliques, items, weights, n)
    theta = [np.zeros(tuple(domain[a].size for a in c)) for c in model_cliques]
    dropped: list[Clique] = []
    step = problem.safe_step
    if start is not None:
        for c, p in zip(start.cliques, start._potentials, strict=True):
            j = next((j for j, m in enumerate(model_cliques) if set(c) <= set(m)), None)
            if j is None:
                dropped.append(c)
                continue
            theta[j] = theta[j] + _expand(p, c, model_cliques[j], domain)
        if math.isfinite(start.info.stepsize):
            # The start's step was for its own total: steps scale as 1/N.
            step = start.info.stepsize * start.total / n
    theta, info = _mirror_descent(problem, theta, step, maxiter, tol, callback)
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
