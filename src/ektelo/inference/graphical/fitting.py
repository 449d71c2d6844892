"""Fitting Private-PGM's estimator (McKenna, Sheldon & Miklau, ICML 2019,
§3.2, Algorithm 1): the measurements' checks and grouping by clique, the
total's estimate, the weighted L2 loss on a junction tree as a function of
the log-potentials, and entropic mirror descent on it (backtracking on the
exact mirror-descent bound, Nesterov momentum with adaptive restart). The
public entry point is `ektelo.inference.graphical_model.fit_graphical_model`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.sparse.linalg import lsmr

from ...domain import Domain, check_names
from ...matrix import EMatrix, Identity, Total
from ...measurement import Measurement
from .junction import Clique, JunctionTree, assignment, clique_potentials

__all__ = [
    "FitInfo",
    "Problem",
    "check_measurements",
    "estimate_total",
    "initial_potentials",
    "mirror_descent",
    "weights_of",
]

# The step-size rule: each iteration tries the last step times _GROW and
# backtracks by _SHRINK, at most _BACKTRACK times before taking the step known
# to pass (module docstring). A small growth keeps most iterations to one
# belief propagation (Private-PGM's JAX version grows by 1.01, halves on failure).
_GROW = 1.05
_SHRINK = 0.6
_BACKTRACK = 40
# The stopping rule's window (iterations; `mirror_descent`).
_WINDOW = 5


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
        self.offset = sum(w * float(y @ y) for y, w in same) - self.weight * float(target @ target)


def table_key(m: Measurement, i: int) -> str:
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


def check_measurements(measurements: Any, domain: Domain) -> list[Measurement]:
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
        tables.setdefault(table_key(m, i), i)
    if len(tables) > 1:
        first, other = sorted(tables.values())[:2]
        raise ValueError(
            f"measurements come from different tables (measurements[{first}] and "
            f"measurements[{other}] have roots {items[first].root_id!r} and "
            f"{items[other].root_id!r}); fit one table's measurements at a time"
        )
    return items


def weights_of(items: Sequence[Measurement]) -> list[float]:
    """1/σ² per measurement; noiseless ones (σ = 0) weigh as a σ of 10⁻³
    times the smallest positive one (the convention of `inference._system`)."""
    positive = [m.variance for m in items if m.variance > 0]
    exact = (min(positive) if positive else 1.0) * 1e-6
    return [1.0 / max(m.variance, exact) for m in items]


def estimate_total(items: Sequence[Measurement], weights: Sequence[float]) -> float:
    """The total from the measurements that determine it (v with Qᵀv = 1:
    the estimate v·y, variance ‖v‖²/w), combined by inverse variance;
    at least 1 (Private-PGM's rule)."""
    estimates, precisions = [], []
    for m, w in zip(items, weights, strict=True):
        Q = m.query_on_root
        if isinstance(Q, Total | Identity):  # v = 1 on every row
            estimates.append(float(np.sum(m.answers)))
            precisions.append(w / Q.shape[0])
            continue
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


class Problem:
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
        self.assign = assignment(self.tree, self.cliques)
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
        phi = clique_potentials(self.tree, self.cliques, self.assign, theta)
        return self.tree.calibrate(phi)

    def marginals(self, probs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """μ on every group's attributes (counts, the group's axis order)."""
        out = []
        for g in self.groups:
            table = np.add.reduce(probs[g.home], axis=g.drop) if g.drop else probs[g.home]
            out.append(self.total * table.transpose(g.perm))
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
            table = grad.transpose(g.to_domain).reshape(g.view)
            current = out[g.model]
            if current is None:
                out[g.model] = np.broadcast_to(table, self.shapes[g.model]).copy()
            else:
                current += table
        return [np.zeros(s) if t is None else t for s, t in zip(self.shapes, out, strict=True)]


# The measured counts are floored here for the starting point's logarithms
# (noisy counts can be ≤ 0): one record. Lower floors start cells so near 0
# that mirror descent, whose steps move a cell in proportion to its mass, takes
# long to raise the ones the other marginals need (measured on adult: a floor
# of 10⁻³ stalled at a loss 0.4% above the optimum, 1–30 did not).
_FLOOR = 1.0


def _simplex(y: np.ndarray, total: float) -> np.ndarray:
    """The nearest point to `y` (Euclidean) with entries ≥ 0 summing to
    `total`: max(y − λ, 0), λ found by sorting (Duchi, Shalev-Shwartz, Singer
    & Chandra, "Efficient projections onto the ℓ1-ball", ICML 2008, Fig. 1)."""
    u = np.sort(y.reshape(-1))[::-1]
    excess = (np.cumsum(u) - total) / np.arange(1, u.size + 1)
    rho = int(np.flatnonzero(u - excess > 0)[-1])
    return np.maximum(y - excess[rho], 0.0)


def initial_potentials(problem: Problem) -> list[np.ndarray]:
    """A starting point read off the measured marginals: for each maximal
    clique of the junction tree that is a model clique measured directly
    (identity queries), log μ̂_K − log μ̂_S with S its separator to its parent
    and μ̂ the measured marginal projected on the counts summing to the total
    (`_simplex`) and floored at `_FLOOR` records: a clique's conditional
    given its parent's side. For disjoint marginals (1-way ones) that is the
    optimum; for a tree of measured marginals (MST's) it is when they are
    consistent; other cliques start at zero (uniform)."""
    theta = [np.zeros(s) for s in problem.shapes]
    measured = {frozenset(g.attrs): g for g in problem.groups if g.target is not None}
    tree = problem.tree
    for k, clique in enumerate(tree.cliques):
        g = measured.get(frozenset(clique))
        if g is None or g.target is None or clique not in problem.cliques:
            continue
        table = np.transpose(
            g.target.reshape([problem.domain[a].size for a in g.attrs]), g.to_domain
        )
        table = np.maximum(_simplex(table, problem.total), _FLOOR)
        log = np.log(table)
        edge = next((e for e in tree.edges if e.child == k), None)
        if edge is not None and edge.separator and edge.child_sum:
            log = log - np.log(np.sum(table, axis=edge.child_sum, keepdims=True))
        theta[problem.cliques.index(clique)] = log
    return theta


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


def _evaluate(problem: Problem, theta: list[np.ndarray]) -> _Point:
    probs, log_z = problem.forward(theta)
    mus = problem.marginals(probs)
    f, grads = problem.loss(mus)
    return _Point(theta, log_z, mus, f, grads)


def mirror_descent(
    problem: Problem,
    theta: list[np.ndarray],
    step: float,
    maxiter: int,
    tol: float,
    callback: Callable[[int, float], Any] | None,
    *,
    momentum: bool = True,
    stop_loss: float | None = None,
) -> tuple[list[np.ndarray], FitInfo]:
    """Entropic mirror descent on the log-potentials with backtracking (the
    module docstring); stops when the last `_WINDOW` iterations lowered the
    loss by less than `tol` × max(loss, number of answers) each on average —
    the loss is a χ²-like sum, the number of answers its scale at the truth;
    a window, as one step shortened by backtracking or a momentum restart
    can gain little without the fit having converged. The step doubles from the safe
    one (or a warm start's) until the first backtrack, then grows gently.

    With `momentum`, each step is taken from an extrapolated point
    θ + β(θ − θ_prev) (Nesterov's sequence, β = (t_{k−1} − 1)/t_k), and the
    momentum restarts whenever a step would raise the loss (O'Donoghue &
    Candès, "Adaptive restart for accelerated gradient schemes", 2015): the
    loss still never increases.

    With `stop_loss`, the descent also stops at the first iterate whose loss
    is at most `stop_loss` (early stopping by the discrepancy principle:
    Morozov 1966; for gradient iterations on noisy least squares, Engl, Hanke
    & Neubauer, "Regularization of Inverse Problems", 1996, §6)."""
    start = time.perf_counter()
    if not problem.groups:  # only the total was measured: the uniform model
        return theta, FitInfo(iterations=0, loss=0.0, converged=True, message="nothing to fit")
    N = problem.total
    here = _evaluate(problem, theta)
    previous = here.theta
    step = max(step, problem.safe_step)
    converged = False
    it = 0
    evaluations = 1
    grow = 2.0
    t_prev, t_now = 1.0, 1.0
    history = [here.loss]
    message = "maxiter reached"
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
        else:
            previous, here = here.theta, new
            t_prev, t_now = t_now, (1.0 + math.sqrt(1.0 + 4.0 * t_now * t_now)) / 2.0
        history.append(here.loss)
        if callback is not None:
            callback(it, here.loss)
        if stop_loss is not None and here.loss <= stop_loss:
            message = "loss reached the discrepancy level"
            break
        if len(history) > _WINDOW and (history[-_WINDOW - 1] - here.loss) <= _WINDOW * tol * max(
            here.loss, problem.answers
        ):
            converged = True
            break
    info = FitInfo(
        iterations=it,
        loss=here.loss,
        converged=converged,
        stepsize=step,
        seconds=time.perf_counter() - start,
        message="loss decrease below tol" if converged else message,
        evaluations=evaluations,
    )
    return here.theta, info
