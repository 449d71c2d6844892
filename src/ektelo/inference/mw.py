"""Multiplicative weights (MWEM's inference; Hardt, Ligett & McSherry, "A
simple and practical algorithm for differentially private data release",
NeurIPS 2012): `multiplicative_weights`, a **Public** operator.

The estimate is a distribution over the cells scaled to the mass T. For each
measured query q with answer a, in turn:

    x ← x ∘ exp(w · q · (a − q·x) / (2T)),  then x ← T · x / Σx

(w = min b / b_q weights noisier measurements less; w = 1 when all
measurements have one noise scale, which is the paper's update exactly).

The operator is stateless: its result depends on its arguments only. MWEM's
rounds call it with the last round's list plus one measurement; passing the
last round's `Estimate` as ``start`` continues from it — its estimate, and
the passes it prepared (the measurements' rows grouped into blocks, with the
blocks' mass histories), which carry over when the new list extends the old
one. The continued call gives what a fresh call from the same start gives,
up to rounding, in less time.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _validate as check
from ..matrix import Partition, VStack
from ..measurement import Measurement
from . import structured
from ._mw_passes import Rows, SegBlock, Step, mw_cyclic, mw_simultaneous, mw_steps
from ._system import (
    ConvergenceError,
    Estimate,
    SolveInfo,
    as_list,
    check_root,
    norm,
    start_vector,
    weights_of,
)
from .lsq import least_squares

__all__ = ["multiplicative_weights"]

def multiplicative_weights(
    measurements: Sequence[Measurement],
    *,
    total: float | None = None,
    start: Any = None,
    tol: float | None = None,
    maxiter: int = 100,
    groups: Partition | list[Partition] | str | None = None,
    mode: str = "cyclic",
) -> Estimate:
    """MWEM's multiplicative-weights inference (see the module; Public).

    The list of measurements is cycled `maxiter` times (MWEM's "use all
    measurements repeatedly" improvement; 100 passes as in DPBench's MWEM).
    Cells at 0 stay at 0.

    Evaluation ("cyclic"). The result is that of the literal loop (one query
    at a time, normalised after each), computed faster:

    * queries are kept implicit where their structure allows: a range (or
      any row constant on a contiguous run of cells) is a slice of x, an n-D
      range a box of x reshaped; only other rows are materialised, once per
      call, as sparse rows;
    * consecutive queries with pairwise disjoint supports form a block. Their
      multiplicative factors commute, but the normalisation between them
      does not quite: query r's estimate q_r·x = T·p_r / S_{r−1} depends on
      the running mass S_{r−1} = S_0 + Σ_{j<r} p_j (f_j − 1), where p_r is
      x's mass on the support of q_r (unchanged by the other, disjoint
      updates) and f_r its factor. A block's factors are therefore the
      solution of that scalar recurrence, which is found for all rows at
      once by fixed-point iteration (exact after at most |block| steps, as
      S_r depends only on earlier rows; in practice 1–3 steps, as the
      coupling is Σ_r (p_r / S)²/2), stopped when no exponent moves by more
      than 1e-13, else finished by the literal loop (after the first step,
      the factors move by exp(δ) for tiny δ, applied as its Taylor terms to
      within an ulp). Then one vectorised multiplication applies the block.
      Rows of one length L aligned to multiples of L (MWEM's dyadic ranges)
      are chunks of the span reshaped to (-1, L); the recurrence runs on
      the rows' chunks only, gathered from the chunks' masses, and the
      chunks no row covers keep the factor 1. Updates are thus identical to
      the literal loop's up to floating-point rounding.

    Args:
        total: the mass T. If None: the (inverse-variance weighted) answer of
            any measured all-ones query (a Total), else the total of the
            least-squares estimate; values below 1 are raised to 1.
        start: the starting estimate (an array on the root, non-negative with
            a positive sum, rescaled to T), or an `Estimate` — a previous
            call's continues its passes (see the module); default uniform
            T/n over the root's cells.
        tol: None (default): run all `maxiter` passes (MWEM's rule); a number
            in (0, 1): stop after the first pass that moves no entry by more
            than tol·T.
        maxiter: passes over all measured queries.
        groups: a public `Partition` of the root (or a chain of them, as in
            `least_squares`): MW on the groups' totals
            (see `structured`), the estimate uniform within each group — what
            MW on the cells gives from a group-uniform start when every
            query is constant on each group, at the cost of the groups.
            ``"measured"``: as in `least_squares`.
        mode: "cyclic" (the update above, one query at a time) or
            "simultaneous" (all queries of a pass at once:
            x ← x ∘ exp(Qᵀ W (y − Qx) / (2T)), εktelo's vectorised variant:
            one Q·x and Qᵀ·u per pass, a different algorithm).

    Returns:
        An `Estimate`; its info's ``state`` is what a later call continues.
    """
    items = as_list(measurements)
    root_shape, size = check_root(items)
    passes = check.positive_int(maxiter, "maxiter")
    tol = None if tol is None else check.probability(tol, "tol")
    if mode not in ("cyclic", "simultaneous"):
        raise ValueError(f"mode must be 'cyclic' or 'simultaneous', got {mode!r}")
    groups = structured.chosen_groups(groups, items)
    on = None
    if groups is not None:
        on = structured.groups_of(groups, size, orthonormal=False)
    T = _mass(items, total)
    weights, _ = weights_of(items)
    n = size if on is None else on.size
    state = start.info.state if isinstance(start, Estimate) else None
    if not (isinstance(state, _Passes) and state.continues(items, weights, n, T, groups, mode)):
        state = None
    if state is not None:
        x = np.array(state.x, copy=True)
    elif start is None:
        x = np.full(size, T / size) if on is None else on.reduce(np.full(size, T / size))
    else:
        x = start_vector(start, size)
        if np.any(x < 0) or x.sum() <= 0:
            raise ValueError("start must be finite, non-negative and have a positive sum")
        x = x if on is None else on.reduce(x)
    x *= T / x.sum()
    rows = [(m.query_on_root if on is None else on.query(m), m.answers) for m in items]
    expand = (lambda v: v) if on is None else on.expand
    steps: list[Step] | None = None
    try:
        if mode == "cyclic":
            steps = _steps(state, rows, weights, n, T)
            done = mw_cyclic(steps, x, T, passes, tol)
        else:
            done = mw_simultaneous(rows, weights, x, T, passes, tol)
    except ConvergenceError as err:
        raise err.on_root(expand, root_shape) from err
    x.setflags(write=False)
    message = f"{mode} passes done" if done == passes else f"moves below tol after {done} passes"
    info = SolveInfo(
        "mw", True, done, 0, message, measure=_residual(rows, x),
        state=_Passes(tuple(items), tuple(weights), n, T, groups, mode, steps, x),
    )  # fmt: skip
    return Estimate(expand(x).reshape(root_shape), info)


def _residual(rows: list[Rows], x: np.ndarray) -> Any:
    def measure() -> tuple[float, float]:
        Q = VStack([Q for Q, _ in rows]) if len(rows) > 1 else rows[0][0]
        return norm(Q.matvec(x) - np.concatenate([y for _, y in rows])), math.nan

    return measure


@dataclass(frozen=True, eq=False)
class _Passes:
    """What `multiplicative_weights` leaves in ``info.state``: its arguments
    (the measurements, their weights, the unknowns, T, the groups, the mode),
    its prepared passes (cyclic mode) and its estimate on the unknowns."""

    items: tuple[Measurement, ...]
    weights: tuple[float, ...]
    n: int
    T: float
    groups: Partition | list[Partition] | None
    mode: str
    steps: list[Step] | None
    x: np.ndarray

    def continues(
        self,
        items: list[Measurement],
        weights: list[float],
        n: int,
        T: float,
        groups: Partition | list[Partition] | None,
        mode: str,
    ) -> bool:
        """Whether a call with these arguments continues this one: the same
        unknowns, mass, groups and mode, and a list that extends this one's
        (the same measurement objects first, with the same weights)."""
        k = len(self.items)
        return (
            (self.n, self.T, self.mode) == (n, T, mode)
            and (self.groups is None) == (groups is None)
            and (groups is None or self.groups == groups)
            and k <= len(items)
            and all(a is b for a, b in zip(self.items, items, strict=False))
            and self.weights == tuple(weights[:k])
        )


def _steps(
    state: _Passes | None, rows: list[Rows], weights: list[float], n: int, T: float
) -> list[Step]:
    """The passes' steps: the continued call's (copies of its blocks' mass
    histories, never its own arrays: its `Estimate` stays as it was) followed
    by the new measurements', or all afresh. The blocks' first guesses are
    checked as ever, so the result is a fresh call's up to rounding."""
    if state is None or state.steps is None:
        return mw_steps(rows, weights, n, T)
    k = len(state.items)
    return [_copied(step) for step in state.steps] + mw_steps(rows[k:], weights[k:], n, T)


def _copied(step: Step) -> Step:
    if type(step) is not SegBlock:
        return step  # (never written to)
    return dataclasses.replace(
        step,
        history=None if step.history is None else step.history.copy(),
        history_starts=None if step.history_starts is None else step.history_starts.copy(),
        scratch=None,
    )


def _mass(items: list[Measurement], total: Any) -> float:
    """MWEM's mass T: given, else a measured total, else the LS total."""
    if total is not None:
        return check.positive(total, "total")
    n = items[0].query_on_root.shape[1]
    found: list[tuple[float, float]] = []  # (answer, variance)
    for m in items:
        Q = m.query_on_root
        sums = Q.matvec(np.ones(n))
        for i in np.nonzero(np.isclose(sums, n, rtol=1e-12, atol=0.0))[0][:16]:
            if np.allclose(Q.row(int(i)), 1.0, rtol=0.0, atol=1e-12):
                found.append((float(m.answers[i]), max(m.variance, 1e-300)))
    if found:
        a = np.array(found)
        estimate = float(np.sum(a[:, 0] / a[:, 1]) / np.sum(1.0 / a[:, 1]))
    else:
        estimate = float(least_squares(items).x.sum())
    return max(estimate, 1.0)
