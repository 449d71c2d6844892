"""NNLS on the cells the measurements cannot tell apart
(``inference.nnls(groups="columns")``, `ektelo.inference.columns`; MWEM's
NNLS variants, εktelo §9.1): the cell groups are exactly the equal columns,
the fit reaches the full problem's optimum (scipy's NNLS on the dense
system), a warm start reaches the cold fit's optimum, a continued call equals
a fresh one, and other measurements leave the fit on the cells."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import nnls as scipy_nnls

from ektelo import inference
from ektelo import workload as wl
from ektelo.inference import columns
from ektelo.matrix import EMatrix, RangeQueries, Sparse, VStack, Weighted
from ektelo.measurement import Measurement


def _measure(Q: EMatrix, x: np.ndarray, b: float, rng: np.random.Generator) -> Measurement:
    y = Q.matvec(x.reshape(-1)) + rng.laplace(0.0, b, Q.shape[0])
    return Measurement(y, Q, Q, b, 1.0, "root", tuple(x.shape))


def test_cell_groups_are_exactly_the_equal_columns() -> None:
    shape = (7, 9)
    queries = [
        RangeQueries(shape, [[1, 2]], [[5, 6]]),
        RangeQueries(shape, [[0, 0]], [[3, 8]]),
        VStack([RangeQueries(63, [0], [9]), RangeQueries(63, [20, 40], [30, 62])]),
        Weighted(RangeQueries(shape, [[4, 4]], [[6, 8]]), 2.5),
    ]
    groups = np.zeros(63, dtype=np.int64)
    for Q in queries:
        groups = columns.refine(groups, Q.sparse().tocsc())
    dense = np.vstack([Q.dense() for Q in queries])
    _, expected = np.unique(dense.T, axis=0, return_inverse=True)
    same = groups[:, None] == groups[None, :]
    np.testing.assert_array_equal(same, expected[:, None] == expected[None, :])
    # overlapping rows in one measurement: no grouping (full-domain fit)
    assert columns.refine(groups, wl.prefix(63).sparse().tocsc()) is None


def test_nnls_on_groups_reaches_the_optimum() -> None:
    """The grouped fit attains the full-domain NNLS optimum (scipy's active set
    on the dense system), honours the total, and spreads groups evenly."""
    rng = np.random.default_rng(5)
    shape = (16, 12)
    x = rng.poisson(3.0, shape)
    x[3:6, 2:9] += 30
    T = float(x.sum())
    W = wl.random_range(shape, 12, seed=8)
    ms = [_measure(RangeQueries(shape, W.lower[i : i + 1], W.upper[i : i + 1]), x, 5.0, rng)
          for i in range(12)]  # fmt: skip
    est = inference.nnls(ms, total=T, groups="columns").x.reshape(-1)
    Q = np.vstack([m.query_on_root.dense() for m in ms])
    y = np.concatenate([m.answers for m in ms])
    ref, _ = scipy_nnls(np.vstack([Q, 1e3 * np.ones((1, x.size))]), np.append(y, 1e3 * T),
                        maxiter=10_000)  # fmt: skip

    def objective(v: np.ndarray) -> float:
        return float(np.sum((Q @ v - y) ** 2))

    assert np.all(est >= 0)
    assert est.sum() == pytest.approx(T, rel=1e-9)
    assert objective(est) <= objective(ref) * (1 + 1e-7) + 1e-9
    np.testing.assert_allclose(Q @ est, Q @ ref, rtol=1e-5, atol=1e-5 * T)
    # cells no measured query tells apart get equal estimates
    cols = np.unique(Q.T, axis=0, return_inverse=True)[1]
    for g in np.unique(cols):
        assert np.ptp(est[cols == g]) <= 1e-9 * T


def _two_augmented_rounds(rng: np.random.Generator) -> tuple[list[Measurement], float, int]:
    """Two MWEM rounds with augmented selection on 40×40 sparse counts: a box
    plus the disjoint dyadic ranges of the round's length."""
    shape, n = (40, 40), 1600
    x = np.where(rng.random(shape) < 0.85, 0, rng.poisson(40.0, shape))
    ms = []
    for k, box in enumerate([([0, 0], [29, 31]), ([5, 3], [36, 33])], start=1):
        chosen = RangeQueries(shape, [box[0]], [box[1]])
        inside = chosen.dense()[0] > 0
        length = 2 ** (k - 1)
        lo = np.arange(0, n, length)
        hi = lo + length - 1
        free = np.array([not inside[a : b + 1].any() for a, b in zip(lo, hi, strict=True)])
        dyadic = RangeQueries(n, lo[free], hi[free])
        Q = Sparse(sp.vstack([chosen.sparse(), dyadic.sparse()]))
        ms.append(_measure(Q, x, 20.0, rng))
    return ms, float(x.sum()), n


def test_warm_started_fit_on_many_groups_is_the_cold_optimum() -> None:
    """Large reduced problems (more than 512 groups) start from the last
    estimate: the fit is the cold fit's optimum (scipy's NNLS on the full
    dense system), whatever the start."""
    ms, T, n = _two_augmented_rounds(np.random.default_rng(7))
    first = inference.nnls(ms[:1], total=T, groups="columns")
    groups = np.zeros(n, dtype=np.int64)
    for m in ms:
        groups = columns.refine(groups, m.query_on_root.sparse().tocsc())
    k = int(groups.max()) + 1
    # `SMALL_GROUPS`: the size above which the warm start is taken (the case under test)
    assert k > columns.SMALL_GROUPS and 2 * k <= n  # the warm-started case
    cold = inference.nnls(ms, total=T, groups="columns").x.reshape(-1)
    warm = inference.nnls(ms, total=T, start=first, groups="columns").x.reshape(-1)
    Q = np.vstack([m.query_on_root.dense() for m in ms])
    y = np.concatenate([m.answers for m in ms])
    A = np.vstack([Q, 1e3 * np.ones((1, n))])  # the total's weight 1/exact_scale
    ref, _ = scipy_nnls(A, np.append(y, 1e3 * T), maxiter=50 * n)

    def objective(v: np.ndarray) -> float:
        return float(np.sum((A @ v - np.append(y, 1e3 * T)) ** 2))

    for est in (cold, warm):
        assert np.all(est >= 0)
        assert objective(est) <= objective(ref) * (1 + 1e-9)
    np.testing.assert_allclose(Q @ warm, Q @ cold, rtol=1e-7, atol=1e-7 * T)


def test_a_continued_call_is_a_fresh_call_from_the_same_start() -> None:
    """The Estimate keeps the materialised queries and groups it found; a call
    on a longer list continues from them and gives what a fresh call from
    the same start gives. The earlier Estimate is left as it was."""
    rng = np.random.default_rng(3)
    shape = (12, 10)
    x = rng.poisson(4.0, shape)
    T = float(x.sum())
    W = wl.random_range(shape, 6, seed=2)
    ms = [_measure(RangeQueries(shape, W.lower[i : i + 1], W.upper[i : i + 1]), x, 2.0, rng)
          for i in range(6)]  # fmt: skip
    first = inference.nnls(ms[:3], total=T, groups="columns")
    kept = first.x.copy()
    continued = inference.nnls(ms, total=T, start=first, groups="columns")
    fresh = inference.nnls(ms, total=T, start=first.x.reshape(-1), groups="columns")
    np.testing.assert_array_equal(continued.x, fresh.x)
    np.testing.assert_array_equal(first.x, kept)
    assert continued.info.state is not first.info.state
    assert len(first.info.state.queries) == 3 and len(continued.info.state.queries) == 6


def test_overlapping_queries_leave_the_fit_on_the_cells() -> None:
    """Prefixes overlap: no cell grouping, NNLS on the cells (with the
    defaults: the materialised query's fit equals the implicit one's)."""
    rng = np.random.default_rng(1)
    x = rng.poisson(5.0, 32)
    Q = wl.prefix(32)
    m = _measure(Q, x, 1.0, rng)
    on_columns = inference.nnls([m], total=float(x.sum()), groups="columns")
    dense = Measurement(m.answers, Sparse(Q.sparse()), Sparse(Q.sparse()), 1.0, 1.0, "root", (32,))
    on_cells = inference.nnls([dense], total=float(x.sum()))
    np.testing.assert_allclose(on_columns.x, on_cells.x, rtol=1e-12, atol=1e-12)
    assert on_columns.info.state.groups is None
