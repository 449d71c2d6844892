"""What every estimator shares (paper §5.5, §7.6): the result types, the
checks of the one calling convention, and the weighted system built from a
list of measurements.

* `Estimate` — the result of every estimator: ``x``, the estimate of the root
  vector (read-only, shaped like the root's domain), and ``info``, a
  `SolveInfo` (method, iterations, products, residual, optimality, …).
* `ConvergenceError` — an estimator stopped far from its optimum; the best
  `Estimate` found is attached.
* `Estimator` — the `typing.Protocol` of the convention:
  ``estimator(measurements, *, total=None, start=None, tol=…, maxiter=…,
  groups=None) -> Estimate``.

The weighted system (§5.5 (i), (iii)). Measurement i's rows are weighted by
1/bᵢ (its noise scale): rows are scaled to equal noise before fitting; only
the ratios matter, so the weights are normalised to ``min(b)/bᵢ`` and equal
scales cost nothing. A known total or other public linear facts (``prior``)
enter as extra rows whose noise scale is ``exact_scale`` times the smallest
measurement scale (default 10⁻³, weight 10³ relative): the fit honours them
to a relative ~10⁻⁶ of the measurements' own discrepancy while the system
stays well enough conditioned for the iterative solvers. Measurements with
noise scale 0 get the same treatment. Inputs are never modified.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .. import _validate as check
from ..matrix import (
    Diagonal,
    EMatrix,
    Partition,
    Product,
    RangeQueries,
    Total,
    VStack,
    Weighted,
    as_vector,
)
from ..measurement import Measurement

if TYPE_CHECKING:  # scipy.sparse.linalg is imported where used (#41: start-up cost)
    from scipy.sparse.linalg import LinearOperator

__all__ = ["ConvergenceError", "Estimate", "Estimator", "SolveInfo"]


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------


class SolveInfo:
    """How an estimator ran.

    Attributes:
        method: the algorithm ("lsmr", "tree", "kronecker", "blocks",
            "projected_newton", "tree_newton", "tree_active_set", "lbfgsb",
            "mw").
        converged: True when the stopping rule was met.
        iterations: outer iterations (LSMR steps, Newton steps, L-BFGS-B
            iterations, parent solves or MW passes; 0 for direct solves).
        products: matrix–vector products with the stacked query matrix or
            its transpose during the solve (the cost measure of implicit
            inference; 0 for multiplicative weights, which works row by row;
            NNLS's products with its materialised free columns are not counted).
        message: the solver's reason for stopping.
        residual: the weighted residual norm ‖D(Qx̂ − y)‖₂ at the estimate
            (on the groups' problem with ``groups=``).
        optimality: the scale-free optimality measure of the stopping rule
            (LS: ‖Aᵀr‖/(‖A‖‖r‖); NNLS: ‖projected gradient‖∞ / ‖Aᵀb‖∞; NaN
            for multiplicative weights).
        state: what a later call may continue from (multiplicative weights'
            prepared passes; see `multiplicative_weights`), else None.

    Where the solve itself did not need them (direct solves), the residual
    and optimality are computed on first access: they cost products the
    estimate does not.
    """

    __slots__ = (
        "_measure", "_optimality", "_residual", "converged", "iterations", "message",
        "method", "products", "state",
    )  # fmt: skip

    method: str
    converged: bool
    iterations: int
    products: int
    message: str
    state: Any
    _residual: float | None
    _optimality: float | None
    _measure: Callable[[], tuple[float, float]] | None

    def __init__(
        self,
        method: str,
        converged: bool,
        iterations: int,
        products: int,
        message: str,
        residual: float | None = None,
        optimality: float | None = None,
        *,
        measure: Callable[[], tuple[float, float]] | None = None,
        state: Any = None,
    ):
        if (residual is None or optimality is None) and measure is None:
            raise ValueError("SolveInfo needs the residual and optimality, or how to measure them")
        init = object.__setattr__
        init(self, "method", str(method))
        init(self, "converged", bool(converged))
        init(self, "iterations", int(iterations))
        init(self, "products", int(products))
        init(self, "message", str(message))
        init(self, "_residual", None if residual is None else float(residual))
        init(self, "_optimality", None if optimality is None else float(optimality))
        init(self, "_measure", measure)
        init(self, "state", state)

    def _measured(self) -> tuple[float, float]:
        """(residual, optimality), measured on first access when not given."""
        if self._residual is not None and self._optimality is not None:
            return self._residual, self._optimality
        assert self._measure is not None  # (checked in __init__)
        residual, optimality = (float(v) for v in self._measure())
        object.__setattr__(self, "_residual", residual)
        object.__setattr__(self, "_optimality", optimality)
        object.__setattr__(self, "_measure", None)
        return residual, optimality

    @property
    def residual(self) -> float:
        return self._measured()[0]

    @property
    def optimality(self) -> float:
        return self._measured()[1]

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("SolveInfo is immutable")

    def __repr__(self) -> str:
        return (
            f"SolveInfo(method={self.method!r}, converged={self.converged}, "
            f"iterations={self.iterations}, products={self.products}, "
            f"message={self.message!r})"
        )


@dataclass(frozen=True, eq=False)
class Estimate:
    """The result of every estimator.

    Attributes:
        x: the estimate of the root vector, shaped like the root's domain
            (``root_shape``), read-only; ``x.reshape(-1)`` is the flattened
            (C order) vector the measurements' ``query_on_root`` act on.
        info: how the estimator ran (`SolveInfo`).
    """

    x: np.ndarray
    info: SolveInfo

    def __post_init__(self) -> None:
        x = np.asarray(self.x, dtype=np.float64)
        if x.flags.writeable:
            x = x.view()
            x.flags.writeable = False
        object.__setattr__(self, "x", x)


class ConvergenceError(RuntimeError):
    """An estimator stopped far from its optimum.

    Raised instead of warning; the best estimate found so far is attached as
    ``estimate`` (an `Estimate`) and its `SolveInfo` as ``info``.
    """

    def __init__(self, message: str, estimate: Estimate):
        super().__init__(message)
        self.estimate = estimate
        self.info = estimate.info

    def on_root(
        self, expand: Callable[[np.ndarray], np.ndarray], root_shape: tuple[int, ...]
    ) -> ConvergenceError:
        """The same error with its estimate mapped from the solver's unknowns
        to the root (`expand`), shaped like the root."""
        x = expand(self.estimate.x.reshape(-1)).reshape(root_shape)
        return ConvergenceError(str(self), Estimate(x, self.info))


class Estimator(Protocol):
    """The one calling convention of the estimators (`least_squares`, `nnls`,
    `multiplicative_weights`): measurements in, an `Estimate` out, the same
    keyword for the same idea — ``total`` a known public total, ``start`` an
    initial estimate (an array on the root or a previous `Estimate`),
    ``tol`` and ``maxiter`` the stopping rule, ``groups`` a public
    `Partition` of the root to estimate on (uniform within each group)."""

    def __call__(
        self,
        measurements: Sequence[Measurement],
        *,
        total: float | None = None,
        start: Any = None,
        tol: Any = ...,
        maxiter: int | None = ...,
        groups: Partition | None = None,
    ) -> Estimate: ...


# Mild non-convergence (within this factor of the tolerance) is reported in
# SolveInfo only; beyond it the solvers raise ConvergenceError.
FAIL_FACTOR = 1e3


# ---------------------------------------------------------------------------
# Checks of the convention
# ---------------------------------------------------------------------------


def as_list(measurements: Any) -> list[Measurement]:
    """The measurements as a non-empty list of `Measurement`s, or an error."""
    if isinstance(measurements, Measurement):
        raise TypeError("pass a list of measurements, e.g. [m], not a single Measurement")
    if not isinstance(measurements, Sequence) or isinstance(measurements, (str, bytes)):
        raise TypeError(
            f"measurements must be a list of Measurement, got {type(measurements).__name__}"
        )
    items = list(measurements)
    if not items:
        raise ValueError("inference needs at least one measurement")
    for i, m in enumerate(items):
        if not isinstance(m, Measurement):
            raise TypeError(f"measurements[{i}] is a {type(m).__name__}, not a Measurement")
    return items


def check_root(items: list[Measurement]) -> tuple[tuple[int, ...], int]:
    """The common root's shape and size; refuses mixed roots and bad answers."""
    root_id, root_shape = items[0].root_id, tuple(items[0].root_shape)
    for i, m in enumerate(items):
        if m.root_id != root_id:
            raise ValueError(
                "cannot combine measurements of different root vectors: "
                f"measurements[0] has root {root_id!r}, measurements[{i}] has {m.root_id!r}"
            )
        if tuple(m.root_shape) != root_shape:
            raise ValueError(
                f"measurements[{i}] has root_shape {tuple(m.root_shape)}; expected {root_shape}"
            )
    size = math.prod(root_shape)
    for i, m in enumerate(items):
        if m.query_on_root.shape[1] != size:
            raise ValueError(
                f"measurements[{i}].query_on_root has {m.query_on_root.shape[1]} columns; "
                f"the root domain {root_shape} has {size} cells"
            )
        if not np.all(np.isfinite(m.answers)):
            raise ValueError(f"measurements[{i}] has non-finite answers")
    return root_shape, size


def check_maxiter(maxiter: Any, default: int) -> int:
    """An iteration cap: a positive integer, or None for the solver's default."""
    return default if maxiter is None else check.positive_int(maxiter, "maxiter")


def start_vector(start: Any, size: int) -> np.ndarray:
    """An initial estimate given as an array (any shape of `size` entries)
    or a previous `Estimate`: a fresh, finite float vector (never the
    caller's array)."""
    x0 = as_vector(start.x if isinstance(start, Estimate) else start, size, "start")
    if not np.all(np.isfinite(x0)):
        raise ValueError("start must be finite")
    return np.array(x0, dtype=np.float64, copy=True)


def public_rows(prior: Any, total: Any, size: int) -> list[tuple[EMatrix, np.ndarray]]:
    """The known total and the prior facts as (matrix on the root, answers)."""
    rows: list[tuple[EMatrix, np.ndarray]] = []
    if total is not None:
        rows.append((Total(size), np.array([check.real(total, "total")])))
    if prior is None:
        return rows
    pairs = (
        [prior]
        if (isinstance(prior, tuple) and len(prior) == 2 and isinstance(prior[0], EMatrix))
        else list(prior)
    )
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], EMatrix)):
            raise TypeError(
                f"prior[{i}] must be a (matrix, answers) pair with an EMatrix on the root domain"
            )
        M, answers = pair
        if M.shape[1] != size:
            raise ValueError(f"prior[{i}] has {M.shape[1]} columns; the root domain has {size}")
        y = as_vector(answers, M.shape[0], f"prior[{i}] answers")
        if not np.all(np.isfinite(y)):
            raise ValueError(f"prior[{i}] answers must be finite")
        rows.append((M, np.array(y, copy=True)))
    return rows


def weights_of(items: list[Measurement]) -> tuple[list[float], float]:
    """Each measurement's weight min(b)/bᵢ (1 for noiseless ones) and min(b)."""
    scales = np.array([m.noise_scale for m in items], dtype=np.float64)
    positive = scales[scales > 0]
    unit = float(positive.min()) if positive.size else 1.0
    return [unit / b if b > 0 else 1.0 for b in scales], unit


# ---------------------------------------------------------------------------
# The weighted system
# ---------------------------------------------------------------------------


@dataclass
class System:
    """The weighted stacked system A x ≈ b (A = D·Q, b = D·y) on `size`
    unknowns; `parts` are its pieces (Q, y, weight), measurements first,
    and `facts` whether public facts (a total, a prior) are among them."""

    A: EMatrix
    b: np.ndarray
    size: int
    parts: list[tuple[EMatrix, np.ndarray, float]]
    facts: bool


def build_system(
    queries: list[tuple[EMatrix, np.ndarray, float]],
    facts: list[tuple[EMatrix, np.ndarray]],
    size: int,
    exact_scale: float,
) -> System:
    """The system of measured (query, answers, noise scale) triples and public
    facts (matrix, answers), weighted as the module says."""
    positive = [b for _, _, b in queries if b > 0]
    unit = min(positive) if positive else 1.0
    exact = unit * exact_scale  # the scale given to noiseless facts
    # The answers are read-only arrays owned by the measurements: used as
    # they are, never written to (the solvers only read b).
    parts = [(Q, y, unit / max(b, exact)) for Q, y, b in queries]
    parts += [(M, y, unit / exact) for M, y in facts]
    A, b = stack(parts)
    return System(A, b, size, parts, bool(facts))


def stack(parts: list[tuple[EMatrix, np.ndarray, float]]) -> tuple[EMatrix, np.ndarray]:
    """The weighted matrix and answers of `parts`, rows grouped so products are
    cheap: range queries on one domain (a measurement per MWEM round, say)
    become one `RangeQueries` block, whose product is one pass over the data
    instead of one per measurement. Row order does not matter to the fits."""
    ranges: dict[tuple[int, ...], list[int]] = {}
    found: dict[int, RangeQueries] = {}
    for i, (Q, _, _) in enumerate(parts):
        if type(Q) is RangeQueries and not Q.transposed:
            found[i] = Q
            ranges.setdefault(Q.domain_shape, []).append(i)
    groups = [idx for idx in ranges.values() if len(idx) > 1]
    merged = {i for idx in groups for i in idx}
    blocks: list[EMatrix] = []
    answers: list[np.ndarray] = []
    for i, (Q, y, w) in enumerate(parts):
        if i not in merged:
            blocks.append(Q if w == 1.0 else Weighted(Q, w))
            answers.append(y if w == 1.0 else w * y)
    for idx in groups:
        one = RangeQueries(
            found[idx[0]].domain_shape,
            np.concatenate([found[i].lower for i in idx]),
            np.concatenate([found[i].upper for i in idx]),
        )
        weights = np.concatenate([np.full(parts[i][0].shape[0], parts[i][2]) for i in idx])
        if np.all(weights == weights[0]):
            blocks.append(one if weights[0] == 1.0 else Weighted(one, float(weights[0])))
        else:
            blocks.append(Product(Diagonal(weights), one))
        answers.append(weights * np.concatenate([parts[i][1] for i in idx]))
    A = blocks[0] if len(blocks) == 1 else VStack(blocks)
    # one unweighted part: its answers as they are (no copy of a huge vector)
    b = answers[0] if len(answers) == 1 else np.concatenate(answers)
    return A, b


class Counter:
    """A SciPy LinearOperator over A that counts products."""

    def __init__(self, A: EMatrix):
        self.A, self.AT, self.count = A, A.T, 0

    def matvec(self, v: np.ndarray) -> np.ndarray:
        self.count += 1
        return self.A.matvec(v)

    def rmatvec(self, u: np.ndarray) -> np.ndarray:
        self.count += 1
        return self.AT.matvec(u)

    def operator(self, mask: np.ndarray | None = None) -> LinearOperator:
        from scipy.sparse.linalg import LinearOperator

        if mask is None:
            return LinearOperator(self.A.shape, self.matvec, self.rmatvec, dtype=np.float64)
        return LinearOperator(
            self.A.shape,
            lambda v: self.matvec(np.where(mask, v.reshape(-1), 0.0)),
            lambda u: np.where(mask, self.rmatvec(u), 0.0),
            dtype=np.float64,
        )


LSMR_MESSAGES = {
    0: "x = 0 is the exact solution",
    1: "Ax = b solved to the tolerance",
    2: "least-squares optimality reached to the tolerance",
    3: "condition-number limit reached",
    4: "Ax = b solved to machine precision",
    5: "least-squares optimality reached to machine precision",
    6: "condition number too large for this machine",
    7: "iteration limit reached",
}


def run_lsmr(
    counter: Counter,
    b: np.ndarray,
    tol: float,
    maxiter: int,
    mask: np.ndarray | None = None,
    x0: np.ndarray | None = None,
) -> tuple[np.ndarray, int, int, float, float]:
    """LSMR (Fong & Saunders 2011) on A, optionally restricted to the columns
    in mask and started from x0. Returns x, istop, iterations, ‖r‖ and the
    relative optimality ‖Aᵀr‖/(‖A‖‖r‖)."""
    from scipy.sparse.linalg import lsmr

    out = lsmr(
        counter.operator(mask), b, atol=tol, btol=tol, conlim=0.0, maxiter=maxiter, x0=x0
    )
    x, istop, itn, normr, normar, normA = out[:6]
    rel = float(normar / (normA * normr)) if normA > 0 and normr > 0 else 0.0
    return np.asarray(x, dtype=np.float64), int(istop), int(itn), float(normr), rel


def norm(v: np.ndarray) -> float:
    return float(np.sqrt(np.dot(v, v)))


def ls_measure(A: EMatrix, b: np.ndarray, x: np.ndarray) -> Callable[[], tuple[float, float]]:
    """LSMR's residual and optimality of x, computed when asked for."""

    def measure() -> tuple[float, float]:
        r = A.matvec(x) - b
        normr = norm(r)
        norm_a = math.sqrt(float(A.column_norms(2).sum()))  # Frobenius, as LSMR's estimate
        normar = norm(A.T.matvec(r))
        return normr, (normar / (norm_a * normr) if norm_a > 0 and normr > 0 else 0.0)

    return measure
