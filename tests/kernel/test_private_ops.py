"""Unit tests of the kernel's private operator algorithms (issue 5):
ektelo.kernel.{ahp, dawa, mwem, privbayes}.

Contracts (public return types, research-mode determinism, clear errors),
behaviour on data with a known answer, and the sensitivity claims each privacy
argument rests on, checked by brute force on random neighbours.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import ektelo
from ektelo.kernel import dawa, mwem, privbayes
from ektelo.kernel.dawa import dawa_partition
from ektelo.kernel.mwem import worst_approx as _worst
from ektelo.kernel.noise import RandomSource
from ektelo.kernel.sensitivity import max_abs_entry
from ektelo.matrix import (
    Dense,
    Diagonal,
    EMatrix,
    Identity,
    Kronecker,
    Partition,
    Prefix,
    RangeQueries,
    Sparse,
    Suffix,
    Sum,
    Total,
    VStack,
    Wavelet,
    Weighted,
)
from ektelo.matrix.partition import hilbert_order
from tests.privbayes_rows import r_score
from tests.privbayes_rows import select_from_rows as privbayes_select

PIECES = np.repeat([10, 100, 0, 40], [50, 30, 48, 40])
TRUTH = np.repeat([0, 1, 2, 3], [50, 30, 48, 40])


def _fixed_point_cost(w: np.ndarray) -> int:
    """round(2^S·dev(w)) half up, dev(w) = Σ|w_j − mean(w)|, in Python ints."""
    cells = [int(c) for c in w]
    L, S = len(cells), sum(cells)
    T = sum(abs(L * c - S) for c in cells)  # L·dev
    return (T * 2 ** (dawa.COST_BITS + 1) + L) // (2 * L)


def _refines(P: Partition, truth: np.ndarray) -> bool:
    """Every group lies inside one true piece."""
    flat = truth.reshape(-1)
    return all(np.unique(flat[P.groups == g]).size == 1 for g in range(P.num_groups))


class SpySource:
    """A RandomSource that records the privacy parameters of every call."""

    def __init__(self, seed: int) -> None:
        self.inner = RandomSource(seed)
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def laplace(self, answers: np.ndarray, **kw: Any) -> Any:
        self.calls.append(("laplace", {**kw, "size": np.size(answers)}))
        return self.inner.laplace(answers, **kw)

    def exponential_mechanism(self, scores: np.ndarray, **kw: Any) -> int:
        self.calls.append(("em", {**kw, "size": np.size(scores)}))
        return self.inner.exponential_mechanism(scores, **kw)

    def uint64(self, n: int) -> np.ndarray:
        self.calls.append(("uint64", {"n": n}))
        return self.inner.uint64(n)


# ---------------------------------------------------------------- DAWA


class TestDAWA:
    @pytest.mark.parametrize("approximate", [False, True, None])
    def test_returns_partition_and_is_deterministic(self, approximate: bool | None) -> None:
        P = dawa_partition(PIECES, 1.0, RandomSource(5), approximate=approximate)
        assert isinstance(P, Partition)
        assert P.domain_shape == PIECES.shape
        assert dawa_partition(PIECES, 1.0, RandomSource(5), approximate=approximate) == P

    @pytest.mark.parametrize("approximate", [False, True])
    def test_groups_are_intervals(self, approximate: bool) -> None:
        P = dawa_partition(PIECES, 0.5, RandomSource(2), approximate=approximate)
        for g in range(P.num_groups):
            cells = P.cells(g)
            assert cells[-1] - cells[0] + 1 == cells.size

    @pytest.mark.parametrize("approximate", [False, True])
    def test_recovers_pieces_at_large_eps(self, approximate: bool) -> None:
        for seed in range(5):
            P = dawa_partition(PIECES, 1e3, RandomSource(seed), approximate=approximate)
            assert _refines(P, TRUTH)
            assert P.num_groups <= PIECES.size // 3

    @pytest.mark.parametrize("approximate", [False, True])
    def test_merges_across_pieces_at_small_eps(self, approximate: bool) -> None:
        merged = [
            not _refines(
                dawa_partition(PIECES, 0.01, RandomSource(s), approximate=approximate), TRUTH
            )
            for s in range(6)
        ]
        assert sum(merged) >= 5

    def test_exact_and_approximate_agree_on_an_easy_input(self) -> None:
        x = np.repeat([0, 1000, 0, 1000], 32)  # boundaries on dyadic positions
        for seed in range(3):
            cuts = []
            for approximate in (False, True):
                P = dawa_partition(x, 1e3, RandomSource(seed), approximate=approximate)
                g = P.groups
                assert _refines(P, np.repeat([0, 1, 2, 3], 32))
                cuts.append({32, 64, 96} <= set(np.flatnonzero(g[1:] != g[:-1]) + 1))
            assert cuts == [True, True]

    def test_auto_mode_switches_by_size(self) -> None:
        spy_small, spy_large = SpySource(0), SpySource(0)
        dawa_partition(np.arange(1024) % 3, 1.0, spy_small)
        dawa_partition(np.arange(1025) % 3, 1.0, spy_large)
        assert spy_small.calls[0][1]["size"] == 1024 * 1025 // 2  # every interval
        blocks = sum(-(-1025 // 2**k) for k in range(1, 12))  # non-singleton dyadic blocks
        assert spy_large.calls[0][1]["size"] == blocks

    def test_noise_parameters_are_the_documented_ones(self) -> None:
        spy = SpySource(0)
        dawa_partition(np.arange(4096) % 9, 0.3, spy, approximate=True)
        ((kind, kw),) = spy.calls
        assert kind == "laplace" and kw["integral"] and kw["epsilon"] == 0.3
        assert kw["sensitivity"] == dawa.dyadic_sensitivity(12)
        assert 2.0 * 12 - 2 < kw["sensitivity"] / 2**dawa.COST_BITS < 2.0 * 12  # ≈ Σ 2(1 − 2^-k)
        spy = SpySource(0)
        dawa_partition(np.arange(64) % 9, 0.3, spy, approximate=False)
        assert spy.calls[0][1]["sensitivity"] == 2 ** (dawa.COST_BITS + 2) + 1

    def test_dyadic_cost_vector_sensitivity_holds_on_random_neighbours(self) -> None:
        rng = np.random.default_rng(11)
        for n in (5, 64, 100, 257):
            declared = dawa.dyadic_sensitivity((n - 1).bit_length())
            for _ in range(40):
                x = rng.integers(0, 30, n) * rng.integers(0, 2, n)
                y = x.copy()
                y[rng.integers(n)] += rng.choice([-1, 1])
                a, b = dawa.dyadic_costs(x), dawa.dyadic_costs(y)
                change = sum(int(np.abs(p - q).sum()) for p, q in zip(a, b, strict=True))
                assert change <= declared

    def test_interval_costs_move_at_most_two_units_each(self) -> None:
        rng = np.random.default_rng(12)
        n = 40
        for _ in range(30):
            x = rng.integers(0, 20, n)
            y = x.copy()
            y[rng.integers(n)] += rng.choice([-1, 1])
            r = dawa.interval_devs(x)
            s = dawa.interval_devs(y)
            assert np.abs(r - s).max() <= 2 ** (dawa.COST_BITS + 1)

    @pytest.mark.parametrize("values", ["small", "signed", "spread"])
    def test_all_interval_devs_match_brute_force(self, values: str) -> None:
        rng = np.random.default_rng(3)
        v = {
            "small": rng.integers(0, 20, 30),
            "signed": rng.integers(-5, 20, 30),
            "spread": rng.integers(0, 2**30, 30),  # ranks by search, not by lookup
        }[values]
        a, e, _, _ = dawa.intervals(30)
        r = dawa.interval_devs(v)
        assert r.size == a.size == 30 * 31 // 2
        for i in range(r.size):
            assert r[i] == _fixed_point_cost(v[a[i] : e[i]])

    def test_fixed_point_costs_are_exact_at_the_largest_inputs(self) -> None:
        # cells at both ends of the clamp C1 (±2^30) on the largest exact domain:
        # the one-division rounding stays within int64 (checked against Python
        # ints on the whole domain, the longest intervals and a random sample).
        n = dawa.EXACT_MAX
        v = np.full(n, -dawa.CELL_MAX, dtype=np.int64)
        v[np.random.default_rng(6).permutation(n)[: n // 2]] = dawa.CELL_MAX
        a, e, lengths, _ = dawa.intervals(n)
        r = dawa.interval_devs(v)
        whole = int(np.flatnonzero(lengths == n)[0])
        assert r[whole] == 2 ** (41 + dawa.COST_BITS)  # dev = 2^11·2^30 (L·dev = 2^52)
        sample = np.concatenate(
            [np.flatnonzero(lengths >= n - 8), np.random.default_rng(7).integers(0, r.size, 200)]
        )
        for i in sample:
            assert r[i] == _fixed_point_cost(v[a[i] : e[i]]), (a[i], e[i])

    @pytest.mark.parametrize("block", [1, 3, 16, 100])
    def test_chain_dp_takes_the_first_minimum(
        self, block: int, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # many ties (costs in -2..2): the blocked DP must still return the
        # smallest start a among the minimisers, as one argmin over a < e does
        monkeypatch.setattr(dawa, "DP_BLOCK", block)
        rng = np.random.default_rng(block)
        for n in (1, 2, 15, 16, 17, 50):
            noisy = np.zeros((n + 1, n + 1), dtype=np.int64)
            for e in range(1, n + 1):
                noisy[e, :e] = rng.integers(-2, 3, e)
            best, want = [0], [0]
            for e in range(1, n + 1):
                totals = [best[a] + int(noisy[e, a]) for a in range(e)]
                want.append(totals.index(min(totals)))
                best.append(min(totals))
            assert dawa.chain_dp(noisy) == want

    def test_interval_devs_batches_agree(self, monkeypatch: pytest.MonkeyPatch) -> None:
        v = np.random.default_rng(5).integers(0, 50, 70)
        whole = dawa.interval_devs(v)
        monkeypatch.setattr(dawa, "DEV_BATCH", 7)
        assert np.array_equal(dawa.interval_devs(v), whole)

    @pytest.mark.parametrize("n", [1, 2, 17, 64])
    def test_exact_partition_is_the_literal_chain_dp(self, n: int) -> None:
        """The exact DP against a literal rendering of T2: every interval's
        fixed-point cost, computed cell by cell, noised in one call in
        (start, end) order and floored, the public penalty (P1) added, and the
        chain DP taking the first (longest last bucket) minimum — same labels
        for the same bits."""
        rng = np.random.default_rng(n)
        for trial in range(4):
            v = rng.poisson(rng.choice([1, 30]), n) * rng.integers(0, 2, n)
            eps = [0.01, 0.1, 1.0, 10.0][trial]
            got = dawa.exact_partition(v, eps, RandomSource(trial), 40)
            source = RandomSource(trial)
            pairs = [(a, e) for a in range(n) for e in range(a + 1, n + 1)]
            costs = []
            for a, e in pairs:
                w, L = v[a:e], e - a
                T = int(np.abs(L * w - w.sum()).sum())
                costs.append(
                    (T // L << dawa.COST_BITS) + (((T % L) << (dawa.COST_BITS + 1)) + L) // (2 * L)
                )
            draw = source.laplace(
                np.array(costs, dtype=np.float64), sensitivity=float(dawa.SHIFT),
                epsilon=eps, integral=True,
            )  # fmt: skip
            scale = dawa.laplace_scale_for(float(dawa.SHIFT), eps, integral=True)
            penalty = 40 + round(2.0 * scale)  # 1/ε₂ = 40 units + P1's 2λ
            noisy = {p: math.floor(c) + penalty for p, c in zip(pairs, draw.values, strict=True)}
            best, start = [0], [0]
            for e in range(1, n + 1):
                totals = [best[a] + noisy[(a, e)] for a in range(e)]
                start.append(totals.index(min(totals)))
                best.append(min(totals))
            want = np.empty(n, dtype=np.int64)
            e, g = n, 0
            while e > 0:
                want[start[e] : e] = g
                e, g = start[e], g + 1
            assert np.array_equal(got, want)

    def test_two_dimensional_input_goes_through_the_hilbert_order(self) -> None:
        quad = np.kron(np.array([[5, 200], [60, 0]]), np.ones((8, 8), dtype=np.int64))
        truth = np.kron(np.arange(4).reshape(2, 2), np.ones((8, 8), dtype=np.int64))
        P = dawa_partition(quad, 1e3, RandomSource(4))
        assert P.domain_shape == (16, 16)
        assert _refines(P, truth)
        order = hilbert_order((16, 16))
        position = np.empty(256, dtype=np.int64)
        position[order] = np.arange(256)
        for g in range(P.num_groups):  # groups are intervals of the Hilbert order
            pos = np.sort(position[P.cells(g)])
            assert pos[-1] - pos[0] + 1 == pos.size

    @pytest.mark.parametrize("shape", [(1, 1), (2, 2), (8, 8), (3, 5), (7, 2), (1, 9)])
    def test_hilbert_order_is_a_local_permutation(self, shape: tuple[int, int]) -> None:
        order = hilbert_order(shape)
        assert np.array_equal(np.sort(order), np.arange(shape[0] * shape[1]))
        if shape[0] == shape[1] and shape[0] & (shape[0] - 1) == 0:
            r, c = np.divmod(order, shape[1])
            assert np.all(np.abs(np.diff(r)) + np.abs(np.diff(c)) == 1)

    def test_constant_and_single_cell_inputs(self) -> None:
        assert dawa_partition(np.array([3]), 1.0, RandomSource(0)).num_groups == 1
        P = dawa_partition(np.full(4096, 7), 1.0, RandomSource(0))
        assert P.num_groups < 4096 // 8

    @pytest.mark.parametrize(
        ("kwargs", "error"),
        [
            ({"x": np.zeros((2, 2, 2))}, ValueError),
            ({"x": np.zeros(0)}, ValueError),
            ({"eps": 0}, ValueError),
            ({"eps": math.nan}, ValueError),
            ({"eps": "1"}, TypeError),
            ({"ratio": 1.5}, ValueError),
            ({"approximate": "yes"}, TypeError),
            ({"x": np.zeros(3000, dtype=np.int64), "approximate": False}, ValueError),
            ({"eps": 1e-300}, ValueError),
            ({"penalty": -1.0}, ValueError),
        ],
    )
    def test_bad_inputs(self, kwargs: dict[str, Any], error: type[Exception]) -> None:
        args = {"x": np.arange(8), "eps": 1.0, **kwargs}
        x, eps = args.pop("x"), args.pop("eps")
        with pytest.raises(error):
            dawa_partition(x, eps, RandomSource(0), **args)


# ---------------------------------------------------------------- MWEM


def _ranges(n: int, lower: list[int], upper: list[int]) -> RangeQueries:
    return RangeQueries(n, np.array(lower), np.array(upper))


def worst_approx(x: Any, W: EMatrix, xh: Any, eps: float, source: Any) -> int:
    """The module function with Δ as the kernel computes it."""
    return _worst(x, W, xh, eps, source, delta=max_abs_entry(W))


class TestWorstApprox:
    def test_returns_an_int_and_is_deterministic(self) -> None:
        W = _ranges(16, [0, 2, 5], [3, 9, 15])
        x, xh = np.arange(16.0), np.full(16, 7.5)
        i = worst_approx(x, W, xh, 1.0, RandomSource(8))
        assert type(i) is int and 0 <= i < 3
        assert i == worst_approx(x, W, xh, 1.0, RandomSource(8))

    def test_picks_the_clearly_worst_query_at_large_eps(self) -> None:
        x = np.zeros(64)
        x[40] = 500.0
        W = _ranges(64, [0, 10, 38, 50, 0], [9, 30, 41, 63, 63])
        for seed in range(5):
            assert worst_approx(x, W, np.full(64, 500 / 64), 1e3, RandomSource(seed)) == 2

    def test_sensitivity_comes_from_the_coefficients(self) -> None:
        W = Weighted(_ranges(8, [0, 4], [3, 7]), 5.0)
        spy = SpySource(0)
        worst_approx(np.arange(8.0), W, np.zeros(8), 0.5, spy)
        ((kind, kw),) = spy.calls
        assert kind == "em" and kw["epsilon"] == 0.5
        assert kw["sensitivity"] == 5.0  # exact scores: no floating-point allowance

    def test_is_fast_enough_structure_for_many_ranges(self) -> None:
        rng = np.random.default_rng(0)
        lo, hi = np.sort(rng.integers(0, 4096, (2, 1000)), axis=0)
        spy = SpySource(1)
        i = worst_approx(
            rng.poisson(3, 4096), RangeQueries(4096, lo, hi), np.full(4096, 3.0), 1.0, spy
        )
        assert 0 <= i < 1000 and spy.calls[0][1]["size"] == 1000

    @pytest.mark.parametrize(
        "M",
        [
            Identity(6),
            Total(6),
            Prefix(6),
            Suffix(6),
            Wavelet(8),
            Dense(np.array([[1.0, -7.5, 0.0], [2.0, 3.0, 4.0]])),
            Sparse(np.array([[0.0, -3.0], [0.5, 0.0]])),
            Diagonal(np.array([1.0, -4.0, 2.0])),
            Weighted(Prefix(4), -2.5),
            VStack([Prefix(3), Dense(np.array([[0.0, 9.0, -1.0]]))]),
            Kronecker([Dense(np.array([[1.0, -2.0]])), Weighted(Identity(3), 3.0)]),
            Sum([Dense(np.array([[1.0, 2.0], [3.0, -4.0]])), Identity(2)]),
            _ranges(10, [0, 3], [5, 9]),
        ],
        ids=lambda M: type(M).__name__,
    )
    def test_max_abs_entry_is_never_below_the_truth(self, M: EMatrix) -> None:
        truth = float(np.abs(M.dense()).max())
        bound = max_abs_entry(M)
        assert bound >= truth
        if not isinstance(M, Sum):
            assert bound == pytest.approx(truth)

    @pytest.mark.parametrize(
        ("args", "error"),
        [
            ({"W": "rows"}, TypeError),
            ({"x": np.zeros(5, dtype=np.int64)}, ValueError),
            ({"xh": np.zeros(3)}, ValueError),
            ({"xh": np.array([0, 1, np.nan, 0])}, ValueError),
            ({"x": np.zeros(4)}, ValueError),  # a float vector is not declared counts
            ({"W": Weighted(Identity(4), 0.5)}, ValueError),  # scores must be exact
            ({"W": Weighted(Identity(4), 0.0)}, ValueError),
            ({"eps": -1}, ValueError),
            ({"eps": 1e-300}, ValueError),
        ],
    )
    def test_bad_inputs_are_refused_before_the_charge(
        self, args: dict[str, Any], error: type[Exception]
    ) -> None:
        a = {"x": np.zeros(4, dtype=np.int64), "W": Identity(4), "xh": np.zeros(4), **args}
        x = ektelo.protect(a["x"], epsilon=1.0, seed=0)
        with pytest.raises(error):
            x.worst_approx(a["W"], a["xh"], eps=a.get("eps", 0.5))
        assert x.budget.spent == 0 and x.history() == ()

    def test_huge_counts_and_entries_give_an_index_not_an_error(self) -> None:
        x = ektelo.protect(np.array([2**50, 0, 3, 2**40], dtype=np.int64), epsilon=1.0, seed=0)
        W = Weighted(Prefix(4), 2.0**40)
        i = x.worst_approx(W, np.full(4, 1e300), eps=0.5)
        assert 0 <= i < 4 and x.budget.spent == 0.5


# ---------------------------------------------------------------- PrivBayes


def _planted_table(rows: int = 4000, seed: int = 0) -> np.ndarray:
    """Five attributes of size 4: A1 copies A0 and A3 copies A2 (10% noise), A4 independent."""
    rng = np.random.default_rng(seed)
    t = rng.integers(0, 4, (rows, 5))
    flip = rng.random((rows, 2)) < 0.1
    t[:, 1] = np.where(flip[:, 0], t[:, 1], t[:, 0])
    t[:, 3] = np.where(flip[:, 1], t[:, 3], t[:, 2])
    return t


class TestPrivBayes:
    def test_returns_the_network_as_public_tuples_and_is_deterministic(self) -> None:
        t = _planted_table()
        net = privbayes_select(t, (4, 4, 4, 4, 4), 1.0, RandomSource(2), degree=2)
        assert net == privbayes_select(t, (4, 4, 4, 4, 4), 1.0, RandomSource(2), degree=2)
        assert isinstance(net, list)
        assert all(type(c) is tuple and all(type(a) is int for a in c) for c in net)
        assert sorted(c[0] for c in net) == [0, 1, 2, 3, 4]  # every attribute a child once
        seen: set[int] = set()
        for k, clique in enumerate(net):
            assert len(clique) == 1 + min(2, k)  # ≤ degree + 1
            assert set(clique[1:]) <= seen and list(clique[1:]) == sorted(clique[1:])
            seen.add(clique[0])

    def test_finds_the_planted_dependencies_at_large_eps(self) -> None:
        t = _planted_table()
        for seed in range(4):
            net = privbayes_select(t, (4,) * 5, 1e3, RandomSource(seed), degree=1)
            edges = {frozenset(c) for c in net if len(c) == 2}
            assert frozenset({0, 1}) in edges and frozenset({2, 3}) in edges

    def test_budget_is_split_evenly_over_the_choices(self) -> None:
        spy = SpySource(0)
        privbayes_select(_planted_table(300), (4,) * 5, 0.8, spy, degree=2)
        em = [kw for kind, kw in spy.calls if kind == "em"]
        assert len(em) == 4
        assert all(kw["epsilon"] == pytest.approx(0.2) for kw in em)
        assert all(2.0 <= kw["sensitivity"] < 2.0 + 1e-6 for kw in em)
        assert [kw["size"] for kw in em] == [4, 3 * 1, 2 * 3, 1 * 6]  # (X, Π) pairs

    def test_r_score_matches_its_definition(self) -> None:
        t = np.random.default_rng(5).integers(0, 3, (300, 3))
        joint = np.zeros((3, 9))
        np.add.at(joint, (t[:, 0], t[:, 1] * 3 + t[:, 2]), 1)
        expected = joint.sum(1, keepdims=True) * joint.sum(0, keepdims=True) / 300
        assert r_score(t, (3, 3, 3), 0, (1, 2)) == pytest.approx(
            0.5 * np.abs(joint - expected).sum()
        )

    def test_r_score_sensitivity_is_two_on_random_neighbours(self) -> None:
        rng = np.random.default_rng(6)
        worst = 0.0
        for _ in range(200):
            rows = int(rng.integers(1, 40))
            t = rng.integers(0, 3, (rows, 3))
            extra = rng.integers(0, 3, (1, 3))
            u = np.vstack([t, extra])
            for child, parents in ((0, (1,)), (2, (0, 1)), (1, (2,))):
                diff = abs(
                    r_score(u, (3, 3, 3), child, parents) - r_score(t, (3, 3, 3), child, parents)
                )
                worst = max(worst, diff)
        assert worst <= 2.0

    def test_adult_degree_two(self) -> None:
        data = Path(__file__).resolve().parents[3] / "shared" / "data" / "adult"
        if not (data / "adult.csv").exists():
            pytest.skip("shared adult data not available")
        domain = json.loads((data / "adult-domain.json").read_text())
        path = data / "adult.csv"
        codes = pd.read_csv(path)[list(domain)].to_numpy()
        net = privbayes_select(codes, tuple(domain.values()), 1.0, RandomSource(0))
        assert len(net) == len(domain) and max(len(c) for c in net) == 3

    def test_one_attribute_spends_nothing(self) -> None:
        spy = SpySource(0)
        assert privbayes_select(np.zeros((5, 1), dtype=int), (2,), 1.0, spy) == [(0,)]
        assert all(kind != "em" for kind, _ in spy.calls)

    @pytest.mark.parametrize(
        ("kw", "error"),
        [({"degree": 0}, ValueError), ({"degree": 1.5}, ValueError), ({"eps": 0.0}, ValueError)],
    )
    def test_bad_inputs_are_refused_before_the_charge(
        self, kw: dict[str, Any], error: type[Exception]
    ) -> None:
        frame = pd.DataFrame(_planted_table(50), columns=list("abcde"))
        t = ektelo.protect(frame, ektelo.Domain.from_dict(dict.fromkeys("abcde", 4)),
                           epsilon=1.0, seed=0)  # fmt: skip
        with pytest.raises(error):
            t.privbayes_select(**{"eps": 1.0, **kw})
        assert t.budget.spent == 0 and t.history() == ()


def test_modules_use_no_numpy_random() -> None:
    """All randomness must come from the kernel's RandomSource."""
    import inspect

    for module in (dawa, mwem, privbayes):
        source = inspect.getsource(module)
        assert "np.random" not in source and "import random" not in source


class TestPrivBayesPublicBounds:
    """Issue #36: GreedyBayes's floating-point allowance read the private row
    count N (4(N + 2)²·2⁻⁵³: up to 0.25·ε per choice near 6.7·10⁷ rows). Now
    the scores are exact integers rounded once and clamped to a public R_MAX,
    and the sensitivity is one public constant whatever the table."""

    def test_the_sensitivity_does_not_depend_on_the_rows(self) -> None:
        seen = set()
        for rows in (3, 300, 30_000):
            spy = SpySource(0)
            privbayes_select(_planted_table(rows), (4,) * 5, 0.8, spy, degree=2)
            seen |= {kw["sensitivity"] for kind, kw in spy.calls if kind == "em"}
        assert seen == {privbayes.EM_SENSITIVITY}
        assert privbayes.EM_SENSITIVITY == 2.0 + 2.0 * 2.0**32 * 2.0**-53

    def test_scores_are_exact_at_a_spark_scale_row_count(self) -> None:
        """N = 6.7·10⁷ rows (as counts): the score is the correctly rounded
        exact rational, where float64 products c(x)c(π) are no longer exact."""
        from fractions import Fraction

        rng = np.random.default_rng(3)
        joint = rng.integers(1, 2**24, size=(3, 4)).astype(np.int64)  # every cell nonzero
        n = int(joint.sum())
        cx, cpi = joint.sum(1), joint.sum(0)
        exact = sum(abs(Fraction(int(joint[i, j])) - Fraction(int(cx[i]) * int(cpi[j]), n))
                    for i in range(3) for j in range(4)) / 2
        got = privbayes.exact_score(joint.reshape(-1), np.repeat(cx, 4), np.tile(cpi, 3), n)
        assert n > 6 * 10**7 and got == float(exact)

    def test_scores_are_clamped_to_the_public_bound(self) -> None:
        n = 2**40  # R = N/2 = 2³⁹ > R_MAX = 2³²
        joint = np.array([n // 2, n // 2], dtype=np.int64)  # the diagonal of a 2×2 table
        cx = np.array([n // 2, n // 2], dtype=np.int64)
        got = privbayes.exact_score(joint, cx, cx, n)  # R = N/2 > R_MAX
        assert got == float(privbayes.R_MAX)
