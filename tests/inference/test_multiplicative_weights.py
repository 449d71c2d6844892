"""`inference.multiplicative_weights` against literal implementations of the
MWEM update; statelessness and continuation from the last round."""

from __future__ import annotations

import numpy as np
import pytest
from inference_helpers import measure  # tests/inference

from ektelo import inference as inf
from ektelo.matrix import (
    Dense,
    Identity,
    Partition,
    Product,
    RangeQueries,
    Total,
)
from ektelo.measurement import Measurement
from ektelo.workload import builders


def test_mw_single_update_is_the_mwem_formula() -> None:
    n = 6
    Q = Dense(np.array([[1, 1, 0, 0, 1, 0]], dtype=float))
    m = Measurement([30.0], Q, Q, 1.0, 1.0, "r", (n,))
    T = 60.0
    est = inf.multiplicative_weights([m], total=T, maxiter=1).x
    x = np.full(n, T / n)
    q = Q.dense()[0]
    x = x * np.exp(q * (30.0 - q @ x) / (2 * T))
    x *= T / x.sum()
    np.testing.assert_allclose(est, x, rtol=1e-12)


def test_mw_cyclic_matches_a_literal_implementation(rng: np.random.Generator) -> None:
    n = 20
    x = rng.integers(0, 10, n).astype(float)
    W = builders.random_range(n, 6, seed=4)
    ms = [measure(W, x, 2.0, rng), measure(Total(n), x, 2.0, rng)]
    T = float(x.sum())
    x0 = rng.random(n) + 0.1
    est = inf.multiplicative_weights(ms, total=T, start=x0, maxiter=7).x
    ref = x0 * T / x0.sum()
    rows = np.vstack([m.query_on_root.dense() for m in ms])
    ys = np.concatenate([m.answers for m in ms])
    for _ in range(7):
        for q, a in zip(rows, ys, strict=True):
            ref = ref * np.exp(q * (a - q @ ref) / (2 * T))
            ref *= T / ref.sum()
    np.testing.assert_allclose(est, ref, rtol=1e-9)


def test_mw_simultaneous_matches_the_vectorised_update(rng: np.random.Generator) -> None:
    n = 15
    x = rng.integers(0, 10, n).astype(float)
    m = measure(builders.random_range(n, 9, seed=1), x, 1.0, rng)
    T = float(x.sum())
    est = inf.multiplicative_weights([m], total=T, maxiter=3, mode="simultaneous").x
    Q = m.query.dense()
    ref = np.full(n, T / n)
    for _ in range(3):
        ref = ref * np.exp(Q.T @ (m.answers - Q @ ref) / (2 * T))
        ref *= T / ref.sum()
    np.testing.assert_allclose(est, ref, rtol=1e-12)


def test_mw_total_from_measured_total_or_ls(rng: np.random.Generator) -> None:
    n = 10
    x = rng.integers(0, 10, n).astype(float)
    m_id = measure(Identity(n), x, 1.0, rng)
    m_tot = measure(Total(n), x, 1.0, rng)
    m_tot_noisy = measure(Total(n), x, 3.0, rng)
    est = inf.multiplicative_weights([m_id, m_tot], maxiter=2).x
    assert est.sum() == pytest.approx(m_tot.answers[0])
    # Two totals: inverse-variance weighted.
    a1, a2 = m_tot.answers[0], m_tot_noisy.answers[0]
    expected = (a1 / 1.0 + a2 / 9.0) / (1.0 + 1.0 / 9.0)
    est2 = inf.multiplicative_weights([m_id, m_tot, m_tot_noisy], maxiter=1).x
    assert est2.sum() == pytest.approx(expected)
    # No total measured: the LS estimate's total.
    est3 = inf.multiplicative_weights([m_id], maxiter=1).x
    assert est3.sum() == pytest.approx(m_id.answers.sum())


def test_mw_converges_to_consistent_data() -> None:
    n = 8
    x = np.array([5, 0, 3, 9, 1, 1, 4, 7], dtype=float)
    m = Measurement(x, Identity(n), Identity(n), 1.0, 1.0, "r", (n,))
    est = inf.multiplicative_weights([m], total=x.sum(), maxiter=2000).x
    np.testing.assert_allclose(est, x, atol=0.05)


def test_mw_keeps_zero_cells_and_weights_noisy_measurements_less() -> None:
    n = 4
    Q = Dense(np.array([[1.0, 0, 0, 0]]))
    x0 = np.array([0.0, 1, 1, 1])
    loud = Measurement([3.0], Q, Q, 1.0, 1.0, "r", (n,))
    est = inf.multiplicative_weights([loud], total=4.0, start=x0).x
    assert est[0] == 0.0
    # Same answer for cells 1 and 2, but cell 2's measurement is 10x noisier:
    # its update is damped by the weight 1/10 (relative to the smallest scale).
    Q1 = Dense(np.array([[0, 1.0, 0, 0]]))
    Q2 = Dense(np.array([[0, 0, 1.0, 0]]))
    precise = Measurement([3.0], Q1, Q1, 1.0, 1.0, "r", (n,))
    vague = Measurement([3.0], Q2, Q2, 10.0, 1.0, "r", (n,))
    est = inf.multiplicative_weights([precise, vague], total=4.0, maxiter=1).x
    assert est[1] > est[2] > est[3]


def test_mw_rejects_bad_arguments(rng: np.random.Generator) -> None:
    m = measure(Identity(3), np.ones(3), 1.0, rng)
    with pytest.raises(ValueError, match="total"):
        inf.multiplicative_weights([m], total=-1.0)
    with pytest.raises(ValueError, match="start"):
        inf.multiplicative_weights([m], start=[-1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="maxiter"):
        inf.multiplicative_weights([m], maxiter=0)
    with pytest.raises(ValueError, match="mode"):
        inf.multiplicative_weights([m], mode="batch")


def _literal_mw(ms: list, T: float, x0: np.ndarray, passes: int) -> np.ndarray:
    """The MW update one query at a time, normalised after each (the loop
    `multiplicative_weights` documents), on dense rows."""
    ref = x0 * T / x0.sum()
    rows = np.vstack([m.query_on_root.dense() for m in ms])
    ys = np.concatenate([m.answers for m in ms])
    unit = min(m.noise_scale for m in ms)
    ws = np.concatenate([np.full(m.answers.size, unit / m.noise_scale) for m in ms])
    for _ in range(passes):
        for q, a, w in zip(rows, ys, ws, strict=True):
            ref = ref * np.exp(w * q * (a - q @ ref) / (2 * T))
            ref *= T / ref.sum()
    return ref


@pytest.mark.parametrize(
    ("width", "keep"),
    [(1, 0.9), (4, 0.9), (8, 0.8), (1, 0.2), (2, 0.3), (16, 0.3), (3, 0.9)],
)
def test_mw_cyclic_aligned_equal_length_blocks_match_the_literal_loop(
    width: int, keep: float, rng: np.random.Generator
) -> None:
    """MWEM's augmented rounds: ranges of one length L aligned to multiples
    of L, some left out (holes; few, or most of them), in one disjoint block
    (vectorised: one row per chunk, or only the rows' chunks), and
    a ragged block of ranges. With a
    big-box query and a total measured between rounds, as the plan does."""
    n = 64 * width
    x = rng.integers(0, 20, n).astype(float)
    lower = np.arange(0, n, width)
    free = rng.random(lower.size) < keep
    free[:10] = True  # enough rows to vectorise
    ranges = RangeQueries(n, lower[free], lower[free] + width - 1)
    ragged = RangeQueries(n, np.array([0, 3, 9, 10, 20, 31, 33, 40, 47]),
                          np.array([1, 7, 9, 17, 29, 31, 38, 45, 50]))  # fmt: skip
    ms = [
        measure(ranges, x, 3.0, rng),
        measure(Total(n), x, 3.0, rng),
        measure(ragged, x, 6.0, rng),
        measure(RangeQueries(n, lower[free], lower[free] + width - 1), x, 3.0, rng),
    ]
    T = float(x.sum())
    x0 = rng.random(n) + 0.1
    est = inf.multiplicative_weights(ms, total=T, start=x0, maxiter=9).x
    ref = _literal_mw(ms, T, x0, 9)
    np.testing.assert_allclose(est, ref, rtol=1e-9)


def test_mw_continues_from_the_last_rounds_estimate(rng: np.random.Generator) -> None:
    """MWEM's rounds call MW with the last list plus one measurement, from
    the last round's `Estimate`: the continued passes (the last call's
    blocks, from ``info.state``) give what a fresh call from the same start
    gives — also when the new measurement's smaller noise scale changes
    every weight (no reuse then) — and leave the last Estimate as it was."""
    n = 256
    x = rng.integers(0, 30, n).astype(float)
    T = float(x.sum())
    lower = np.arange(0, n, 4)
    ms = [
        measure(RangeQueries(n, lower, lower + 3), x, 3.0, rng),
        measure(builders.random_range(n, 5, seed=2), x, 3.0, rng),
        measure(RangeQueries(n, lower[::2], lower[::2] + 1), x, 3.0, rng),
        measure(Total(n), x, 1.0, rng),  # smaller scale: new weights for all
    ]
    last = inf.multiplicative_weights(ms[:1], total=T, start=rng.random(n) + 0.1, maxiter=6)
    for k in range(2, len(ms) + 1):  # each call extends the last one's list
        kept = last.x.copy()
        continued = inf.multiplicative_weights(ms[:k], total=T, start=last, maxiter=6)
        again = inf.multiplicative_weights(ms[:k], total=T, start=last, maxiter=6)
        fresh = inf.multiplicative_weights(ms[:k], total=T, start=last.x, maxiter=6)
        np.testing.assert_array_equal(continued.x, again.x)  # last was not changed
        np.testing.assert_array_equal(last.x, kept)
        np.testing.assert_allclose(continued.x, fresh.x, rtol=1e-12)
        np.testing.assert_allclose(continued.x, _literal_mw(ms[:k], T, kept, 6), rtol=1e-9)
        last = continued


def test_mw_results_do_not_depend_on_call_history(rng: np.random.Generator) -> None:
    """No hidden state: the same call gives the same estimate, bit for bit,
    whatever was called in between (another list, another domain, a list
    that extends this one)."""
    n = 128
    x = rng.integers(0, 30, n).astype(float)
    lower = np.arange(0, n, 8)
    ms = [measure(RangeQueries(n, lower, lower + 7), x, 2.0, rng), measure(Total(n), x, 2.0, rng)]
    first = inf.multiplicative_weights(ms, total=float(x.sum()), maxiter=20)
    others = [measure(RangeQueries(n, lower[::2], lower[::2] + 3), x, 1.0, rng)]
    inf.multiplicative_weights(others, maxiter=7)
    inf.multiplicative_weights(ms[:1], total=float(x.sum()), maxiter=3)
    inf.multiplicative_weights([measure(Identity(16), x[:16], 1.0, rng)], maxiter=4)
    inf.multiplicative_weights([*ms, *others], maxiter=5)
    second = inf.multiplicative_weights(ms, total=float(x.sum()), maxiter=20)
    np.testing.assert_array_equal(first.x, second.x)


def test_mw_on_groups_is_mw_on_the_cells_from_a_uniform_start(rng) -> None:
    """groups=P: MW on the totals of P's groups (measurements of
    x.reduce_by_partition(P)); the same estimate as MW on the cells, which
    stays uniform within each group, at the groups' cost."""
    n = 96
    x = rng.integers(0, 30, n).astype(float)
    P = Partition(np.repeat(np.arange(24), 4)[rng.permutation(n)])
    k = P.num_groups
    Q = RangeQueries(k, np.array([0, 3, 10, 0]), np.array([5, 9, 20, 23]))
    m = measure(Q, P.reduce(x), 2.0, rng, on_root=Product(Q, P.reduce_matrix()))
    on_groups = inf.multiplicative_weights([m], total=float(x.sum()), maxiter=30, groups=P)
    on_cells = inf.multiplicative_weights([m], total=float(x.sum()), maxiter=30)
    np.testing.assert_allclose(on_groups.x, on_cells.x, rtol=1e-12)
    np.testing.assert_allclose(on_groups.x, P.expand(P.reduce(on_groups.x)), rtol=1e-12)


def test_mw_tol_stops_once_the_passes_settle() -> None:
    n = 8
    x = np.array([5, 0, 3, 9, 1, 1, 4, 7], dtype=float)
    m = Measurement(x, Identity(n), Identity(n), 1.0, 1.0, "r", (n,))
    full = inf.multiplicative_weights([m], total=x.sum(), maxiter=2000)
    early = inf.multiplicative_weights([m], total=x.sum(), maxiter=2000, tol=1e-6)
    assert full.info.iterations == 2000 and early.info.iterations < 2000
    np.testing.assert_allclose(early.x, full.x, atol=0.05)
