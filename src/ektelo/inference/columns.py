"""NNLS on the cells the measurements cannot tell apart:
``nnls(measurements, groups="columns")``, a **Public** operator.

Cells whose columns are equal in every measured query are indistinguishable
to the fit: Q = Q_r·R with R summing each group of cells, so each
measurement is exactly a measurement of R·x with query Q_r (paper §8,
Prop. 1, applied to the measurements instead of the workload). NNLS then
runs on the groups (``groups=``), in the orthonormal basis of group-uniform
vectors — the full problem restricted to vectors uniform on each group, an
isometry: the same optimal objective and fitted answers Q·x̂, each group's
total spread evenly over its cells.

The groups are found exactly for measurements whose rows are disjoint (a
column with at most one nonzero per measurement: one query, or disjoint
queries, as MWEM and its augmented selection measure), by splitting the cell
groups by every measurement's columns in turn. Any other measurement, or
groups not much fewer than the cells (at least half as many), leaves the
fit on the cells.

Solved to the optimum, which NNLS's default stopping rule does not reach
with a known total (see `nnls`):

* up to `SMALL_GROUPS` (512) groups, with the tolerance tightened to ≤ 1e-10, the
  total's weight to ≤ 100 (exact_scale ≥ 1e-2: well conditioned, still
  honoured to ~1e-9) and 2000 iterations;
* beyond, from ``start`` first: its optimum has few positive groups, so the
  active-set steps are exact solves on them and reach the optimum's KKT
  point in a few steps, accepted only there (`_WARM_ACCEPT`); otherwise
  the cold fit with the given tolerance, close to the optimum on these
  problems (~1e-3 of the objective) and far cheaper than a tight one.

Either way a fit that stalls within `_REDUCED_ACCEPT` (1e-7) of the
optimality measure is accepted as it is (stalled at the last digits).

The measured queries are materialised once, as CSR (the same entries), since
NNLS multiplies by them hundreds of times, and consecutive measurements of
equal noise scale are stacked into one block: the same rows and weights, one
product instead of many. The estimator is stateless; its `Estimate` keeps
the materialised queries and the groups (``info.state``), which a call on a
longer list continues from when it is passed as ``start`` (an iterative
plan's next round): the same result as a fresh call from that start.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..matrix import Dense, Partition, Sparse
from ..measurement import Measurement
from ._system import ConvergenceError, Estimate, SolveInfo

if TYPE_CHECKING:
    import scipy.sparse as sp
else:  # imported on first use (#41)
    from ..matrix.lazy import sparse as sp

__all__ = ["SMALL_GROUPS", "nnls_on_columns", "refine"]

# Up to SMALL_GROUPS groups a tight tolerance is cheap and reaches the optimum
# (checked against scipy.optimize.nnls).
SMALL_GROUPS = 512
_REDUCED_ACCEPT = 1e-7
# A warm-started fit is kept when its projected gradient is this small relative
# to the scale (a KKT point: exact active-set steps end at ~1e-16 on 2-D MWEM
# rounds; stopping at the loose default tolerance leaves ~1e-7).
_WARM_ACCEPT = 1e-12


@dataclass(frozen=True, eq=False)
class _Columns:
    """What a call leaves in ``info.state``: the measurements it saw, their
    queries on the root (CSC, duplicates summed) and the cell groups."""

    items: tuple[Measurement, ...]
    queries: tuple[Any, ...]
    groups: np.ndarray | None

    def extended(self, items: list[Measurement]) -> _Columns:
        """The state for `items`, which start with this state's measurements."""
        queries, groups = list(self.queries), self.groups
        for m in items[len(self.items) :]:
            Q = m.query_on_root.sparse().tocsc()
            Q.sum_duplicates()
            queries.append(Q)
            groups = refine(groups, Q)
        return _Columns(tuple(items), tuple(queries), groups)

    def continued_by(self, items: list[Measurement]) -> bool:
        k = len(self.items)
        return k <= len(items) and all(a is b for a, b in zip(self.items, items, strict=False))


def nnls_on_columns(
    items: list[Measurement],
    size: int,
    start: Any,
    solve: Callable[..., Estimate],
    **options: Any,
) -> Estimate:
    """``nnls(items, groups="columns", start=start, **options)``: see the
    module. `solve` is `nnls` itself (on the stacked records, with
    ``groups=`` the partition found); `options` its other arguments."""
    state = start.info.state if isinstance(start, Estimate) else None
    if not (isinstance(state, _Columns) and state.continued_by(items)):
        state = _Columns((), (), np.zeros(size, dtype=np.int64))
    state = state.extended(items)
    last = None
    if start is not None and not isinstance(start, str):
        last = start.x.reshape(-1) if isinstance(start, Estimate) else start
    stacked = _stacked(items, state.queries)
    fitted = _fit(stacked, state.groups, size, last, solve, options)
    info = fitted.info
    kept = SolveInfo(
        info.method, info.converged, info.iterations, info.products, info.message,
        measure=lambda: (info.residual, info.optimality), state=state,
    )  # fmt: skip
    return Estimate(fitted.x, kept)


def _fit(
    stacked: list[Measurement],
    groups: np.ndarray | None,
    size: int,
    last: Any,
    solve: Callable[..., Estimate],
    options: dict[str, Any],
) -> Estimate:
    if groups is None or 2 * (int(groups.max()) + 1) > size:
        return solve(stacked, **options)
    k = int(groups.max()) + 1
    on = Partition(groups)
    if k > SMALL_GROUPS and last is not None:
        try:
            warm = solve(stacked, start=last, groups=on, **options)
        except ConvergenceError:
            pass
        else:
            if warm.info.optimality <= _WARM_ACCEPT:
                return warm
    if k <= SMALL_GROUPS:
        options = dict(options)
        options["tol"] = min(options["tol"], 1e-10)
        options["exact_scale"] = max(options["exact_scale"], 1e-2)
        options["maxiter"] = options["maxiter"] or 2000
    try:
        return solve(stacked, groups=on, **options)
    except ConvergenceError as stalled:  # stalled at the last digits
        if not stalled.info.optimality <= _REDUCED_ACCEPT:
            raise
        return stalled.estimate


def _stacked(measurements: list[Measurement], queries: tuple[Any, ...]) -> list[Measurement]:
    """The measurements as records of their materialised queries on the root
    (the same entries), consecutive ones of equal noise scale stacked into
    one record: the same rows and weights for the fit."""
    out: list[Measurement] = []
    start = 0
    for end in range(1, len(measurements) + 1):
        if end < len(measurements) and (
            measurements[end].noise_scale == measurements[start].noise_scale
        ):
            continue
        group = measurements[start:end]
        Q = sp.vstack(queries[start:end], format="csr")
        small = Q.shape[0] * Q.shape[1] <= SMALL_GROUPS * SMALL_GROUPS
        M = Dense(Q.toarray()) if small else Sparse(Q)  # dense: no sparse dispatch per product
        answers = np.concatenate([m.answers for m in group])
        out.append(dataclasses.replace(group[0], answers=answers, query=M, query_on_root=M))
        start = end
    return out


def refine(groups: np.ndarray | None, Q: Any) -> np.ndarray | None:
    """Split the cell groups by the columns of Q (SciPy CSC, duplicates
    summed): cells stay together only where Q's columns are equal. Exact
    for queries whose columns have at most one nonzero (one query, or
    disjoint queries); None (no grouping) otherwise, after None, or when the
    domain is too large to key. Groups are numbered by their sorted keys."""
    n = Q.shape[1]
    counts = np.diff(Q.indptr)
    if groups is None or counts.max(initial=0) > 1 or n > 1 << 30:
        return None
    cols = np.flatnonzero(counts)
    row = np.zeros(n, dtype=np.int64)
    row[cols] = Q.indices[Q.indptr[cols]] + 1
    value = np.zeros(n)
    value[cols] = Q.data[Q.indptr[cols]]
    _, rank = np.unique(value, return_inverse=True)
    _, key = np.unique(groups * (Q.shape[0] + 1) + row, return_inverse=True)
    _, out = np.unique(key * (int(rank.max()) + 1) + rank, return_inverse=True)
    return out.astype(np.int64)

