"""DAWA's private partition (ektelo.kernel.dawa), issue #22.

* Every refusal comes from `check_options`, on public values, before the
  kernel charges (and before `dawa_partition` draws any noise).
* After that nothing raises on the data: cells are read through the clamp C1
  (floor, then ±2^30), huge counts give a valid partition, and neighbouring
  inputs (one count ±1) are refused alike or not at all.
* The exact DP's penalty: P1 (default) splits flat pieces into ~150 groups at
  every ε; P2 (penalty="log-length") recovers 4 constant pieces.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import ektelo
from ektelo.kernel import dawa
from ektelo.kernel.dawa import check_options, dawa_partition
from ektelo.kernel.noise import RandomSource
from ektelo.matrix import Partition

PIECES = np.repeat([10, 100, 0, 40], 256)
TRUTH = np.repeat(np.arange(4), 256)


def _refines(P: Partition, truth: np.ndarray) -> bool:
    flat = truth.reshape(-1)
    return all(np.unique(flat[P.groups == g]).size == 1 for g in range(P.num_groups))


def _is_interval_partition(P: Partition, n: int) -> bool:
    cells = [P.cells(g) for g in range(P.num_groups)]
    return sum(c.size for c in cells) == n and all(c[-1] - c[0] + 1 == c.size for c in cells)


class NoNoise:
    """A source that fails the test if any noise is drawn."""

    def laplace(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("noise was drawn before the arguments were validated")


# ---------------------------------------------------------------- validation
class TestCheckOptions:
    def test_returns_the_normalised_options(self) -> None:
        assert check_options((1024,), 1.0) == {
            "approximate": False,
            "ratio": 0.25,
            "penalty": None,
        }
        assert check_options((1025,), 1.0)["approximate"] is True
        assert check_options((16, 16), np.float64(0.5), approximate=True)["approximate"] is True
        opts = check_options([32, 32], 2, ratio=np.float64(0.5), penalty="log-length")
        assert opts == {"approximate": False, "ratio": 0.5, "penalty": "log-length"}
        assert check_options((8,), 1.0, penalty=np.int64(3))["penalty"] == 3.0

    @pytest.mark.parametrize(
        ("shape", "eps", "options", "error"),
        [
            ((8,), 1e-300, {}, ValueError),  # below what exact arithmetic can serve
            ((8,), 1e-9, {}, ValueError),  # the kernel's floor; DAWA needs ≳ 1.3e-9
            ((4096,), 5e-9, {}, ValueError),  # the dyadic sensitivity needs ≳ 7.2e-9
            ((8,), 1e308, {}, ValueError),  # a grid finer than the sampler serves
            ((8,), 0.0, {}, ValueError),
            ((8,), -1.0, {}, ValueError),
            ((8,), math.nan, {}, ValueError),
            ((8,), math.inf, {}, ValueError),
            ((8,), "1", {}, TypeError),
            ((8,), True, {}, TypeError),
            ((8,), 1.0, {"ratio": 1.0}, ValueError),
            ((8,), 1.0, {"ratio": 0.0}, ValueError),
            ((8,), 1.0, {"ratio": "0.5"}, TypeError),
            ((8,), 1e-8, {"ratio": 1 - 1e-12}, ValueError),  # 1/ε₂ beyond 2^50 units
            ((8,), 1.0, {"approximate": "yes"}, TypeError),
            ((8,), 1.0, {"approximate": 1}, TypeError),
            ((8,), 1.0, {"penalty": -1}, ValueError),
            ((8,), 1.0, {"penalty": math.inf}, ValueError),
            ((8,), 1.0, {"penalty": "loud"}, ValueError),
            ((8,), 1.0, {"penalty": [2.0]}, TypeError),
            ((8,), 1.0, {"penalty": 1e40}, ValueError),  # beyond 2^50 units
            ((8,), 1.0, {"no_such_option": 1}, TypeError),
            ((2, 2, 2), 1.0, {}, ValueError),
            ((0,), 1.0, {}, ValueError),
            ((3, 0), 1.0, {}, ValueError),
            ("abc", 1.0, {}, TypeError),
            ((3000,), 1.0, {"approximate": False}, ValueError),
            ((2**28,), 1.0, {}, ValueError),
        ],
    )
    def test_refuses_from_public_values(
        self, shape: Any, eps: Any, options: dict[str, Any], error: type[Exception]
    ) -> None:
        with pytest.raises(error):
            check_options(shape, eps, **options)

    def test_accepts_the_extreme_eps_it_can_serve(self) -> None:
        check_options((1024,), 1.31e-9)
        check_options((4096,), 7.2e-9)
        check_options((8,), 1e300)

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"eps": 1e-300},
            {"eps": 1.0, "ratio": 2.0},
            {"eps": 1.0, "penalty": "loud"},
            {"eps": 1.0, "approximate": "no"},
            {"x": np.zeros(3000, dtype=np.int64), "approximate": False},
        ],
    )
    def test_dawa_partition_refuses_before_drawing_noise(self, kwargs: dict[str, Any]) -> None:
        args = {"x": np.arange(64), **kwargs}
        x, eps = args.pop("x"), args.pop("eps", 1.0)
        with pytest.raises((ValueError, TypeError)):
            dawa_partition(x, eps, NoNoise(), **args)

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"eps": 1e-300},
            {"eps": 0.5, "ratio": 1.0},
            {"eps": 0.5, "penalty": "loud"},
            {"eps": 0.5, "penalty": -2.0},
            {"eps": 0.5, "approximate": "no"},
            {"eps": 0.5, "no_such_option": 1},
        ],
    )
    def test_the_kernel_refuses_before_charging(self, kwargs: dict[str, Any]) -> None:
        X = ektelo.protect(PIECES[::16], epsilon=1.0, seed=0)
        with pytest.raises((ValueError, TypeError)):
            X.dawa_partition(**kwargs)
        assert X.budget.spent == 0 and X.history() == ()


# ---------------------------------------------------------------- clamps
class TestNothingRaisesAfterTheCharge:
    @pytest.mark.parametrize("approximate", [False, True])
    def test_huge_counts_give_a_valid_partition(self, approximate: bool) -> None:
        x = np.full(1024, 1e15)
        x[300:700] = 3e15
        x[:10] = 0.0
        P = dawa_partition(x, 1.0, RandomSource(0), approximate=approximate)
        assert isinstance(P, Partition) and P.domain_shape == (1024,)
        assert _is_interval_partition(P, 1024)
        clamped = np.minimum(x, dawa.CELL_MAX)  # C1: the partition of the clamped counts
        assert dawa_partition(clamped, 1.0, RandomSource(0), approximate=approximate) == P

    def test_huge_counts_through_the_kernel(self) -> None:
        x = np.full(1024, 10**15, dtype=np.int64)
        x[::7] = 2**52
        X = ektelo.protect(x, epsilon=1.0, seed=1)
        for options in ({}, {"approximate": True}, {"penalty": "log-length"}):
            P = X.dawa_partition(eps=0.25, **options)
            assert _is_interval_partition(P, 1024)
        assert X.budget.spent == 0.75

    def test_any_values_are_read_through_the_clamp(self) -> None:
        x = np.array([np.nan, np.inf, -np.inf, 1.5, -2.5, 2.0**40, -(2.0**40), 7.0])
        read = np.array([0, 2**30, -(2**30), 1, -3, 2**30, -(2**30), 7])
        for approximate in (False, True):
            for seed in range(3):
                P = dawa_partition(x, 0.5, RandomSource(seed), approximate=approximate)
                Q = dawa_partition(read, 0.5, RandomSource(seed), approximate=approximate)
                assert P == Q and _is_interval_partition(P, x.size)
        for small in (np.array([2**63, 5, 5, 0], dtype=np.uint64), np.arange(4, dtype=np.uint8)):
            assert dawa_partition(small, 1.0, RandomSource(0)).size == 4
        assert dawa_partition(np.arange(4, dtype=np.int8), 1.0, RandomSource(0)).size == 4

    def test_the_extreme_eps_run(self) -> None:
        for n in (64, 1024):
            P = dawa_partition(PIECES[:: 1024 // n], 1.31e-9, RandomSource(2))
            assert _is_interval_partition(P, n)
        P = dawa_partition(np.arange(4096) % 17, 7.2e-9, RandomSource(2))
        assert _is_interval_partition(P, 4096)
        P = dawa_partition(PIECES[::16], 1e300, RandomSource(2))
        assert _refines(P, TRUTH[::16])

    @pytest.mark.parametrize("penalty", [None, "log-length", 0.0])
    def test_the_python_int_dp_gives_the_int64_result(
        self, penalty: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The exact DP falls back to Python ints when the public bound and the
        # noise's magnitude could leave int64; forcing it must not change a bit.
        rng = np.random.default_rng(9)
        cases = [(rng.poisson(20, 90) * rng.integers(0, 2, 90), eps) for eps in (0.05, 1.0, 40.0)]
        fast = [dawa_partition(x, e, RandomSource(3), penalty=penalty) for x, e in cases]
        monkeypatch.setattr(dawa, "INT64_DP_BOUND", 0)
        slow = [dawa_partition(x, e, RandomSource(3), penalty=penalty) for x, e in cases]
        assert fast == slow

    def test_noise_is_floored_not_truncated(self) -> None:
        # eps large: the sampler's grid is below 1, so draws are fractional;
        # the noise added to the integer costs is their floor (T2's exact shift).
        raw = RandomSource(4).laplace(
            np.zeros(4000), sensitivity=1025.0, epsilon=50.0, integral=True
        )
        frac = raw.values[raw.values != np.round(raw.values)]
        assert frac.size > 100 and (frac < 0).any()
        units = dawa.noise_units(4000, 1025, 50.0, RandomSource(4))
        assert units.dtype == np.int64
        assert np.array_equal(units, np.floor(raw.values).astype(np.int64))


# ---------------------------------------------------------------- neighbours
def _outcome(call: Any) -> tuple[str, str]:
    try:
        P = call()
    except Exception as e:  # any exception is an observable
        return type(e).__name__, str(e)
    return "ok", f"Partition of {P.domain_shape}"


NEIGHBOUR_CASES = [
    (PIECES[::4], 1.0, {}),
    (PIECES[::4], 0.5, {"approximate": True}),
    (PIECES[::4], 2.0, {"penalty": "log-length"}),
    (np.full(300, 2**30), 1.0, {}),  # at the clamp: +1 is read as the same vector
    (np.full(64, 10**15), 1.0, {}),
    (np.zeros(300), 1e-300, {}),
    (np.zeros(300), 1.0, {"ratio": 1.5}),
    (np.zeros(300), 1.0, {"penalty": -1.0}),
    (np.zeros(300), 1.0, {"approximate": "x"}),
    (np.zeros(3000), 1.0, {"approximate": False}),
]


@pytest.mark.parametrize(("x", "eps", "options"), NEIGHBOUR_CASES)
def test_neighbours_are_refused_alike_or_not_at_all(
    x: np.ndarray, eps: float, options: dict[str, Any]
) -> None:
    x = np.asarray(x, dtype=np.int64)
    rng = np.random.default_rng(x.size)
    for _ in range(3):
        y = x.copy()
        y[rng.integers(x.size)] += rng.choice([-1, 1])
        a = _outcome(lambda v=x: dawa_partition(v, eps, RandomSource(0), **options))
        b = _outcome(lambda v=y: dawa_partition(v, eps, RandomSource(0), **options))
        assert a == b
        # through the kernel: the same refusal (or none) and the same ledger
        seen = []
        for v in (x, y):
            X = ektelo.protect(v, epsilon=2.0, seed=0)
            got = _outcome(lambda X=X: X.dawa_partition(eps=eps, **options))
            seen.append((got, X.budget.spent, len(X.history())))
        assert seen[0] == seen[1]


def test_neighbours_output_distributions_are_within_e_eps() -> None:
    """A coarse empirical check of T2 on 3 cells (4 possible partitions)."""
    eps, draws = 1.0, 1200
    freq = []
    for x in (np.array([0, 0, 3]), np.array([0, 1, 3])):
        source = RandomSource(11)
        counts: dict[tuple[int, ...], int] = {}
        for _ in range(draws):
            g = dawa_partition(x, eps, source).groups
            key = tuple(int(c) for c in np.flatnonzero(g[1:] != g[:-1]) + 1)
            counts[key] = counts.get(key, 0) + 1
        freq.append(counts)
    for key in set(freq[0]) | set(freq[1]):
        a, b = freq[0].get(key, 0), freq[1].get(key, 0)
        if min(a, b) >= 100:  # enough mass for the ratio to mean something
            assert max(a, b) / min(a, b) < math.exp(eps)


# ---------------------------------------------------------------- the penalty
class TestPenalty:
    def test_penalty_units(self) -> None:
        lam = dawa.exact_noise_scale(0.5)
        p1 = dawa.penalty_units(64, 0.5, None)
        assert p1.shape == (65,) and (p1 == round(2 * lam)).all()
        assert (dawa.penalty_units(64, 0.5, 3.0) == round(3 * lam)).all()
        p2 = dawa.penalty_units(64, 0.5, "log-length")
        lengths = np.arange(1, 65)
        assert np.array_equal(p2[1:], np.rint(lam * (4 + np.log(lengths))).astype(np.int64))
        assert (np.diff(p2[1:]) >= 0).all()

    def test_the_default_splits_flat_pieces_whatever_eps(self) -> None:
        # P1: flat costs are 0 and everything else scales as 1/eps, so the
        # spurious splits of constant pieces do not fade as eps grows
        for eps in (0.1, 50.0):
            assert dawa_partition(PIECES, eps, RandomSource(0)).num_groups > 100

    @pytest.mark.parametrize("eps", [1.0, 10.0, 50.0])
    def test_log_length_recovers_four_constant_pieces(self, eps: float) -> None:
        for seed in range(5):
            P = dawa_partition(PIECES, eps, RandomSource(seed), penalty="log-length")
            assert 4 <= P.num_groups < 16
            if eps >= 10:
                assert _refines(P, TRUTH)

    def test_group_counts_fall_from_the_default_as_eps_grows(self) -> None:
        small = [dawa_partition(PIECES, 0.1, RandomSource(s)).num_groups for s in range(3)]
        large = [
            dawa_partition(PIECES, eps, RandomSource(s), penalty="log-length").num_groups
            for eps in (1.0, 10.0, 50.0)
            for s in range(3)
        ]
        assert max(large) < 16 < 100 < min(small)

    def test_log_length_through_the_kernel_and_in_two_dimensions(self) -> None:
        quad = np.kron(np.array([[5, 200], [60, 0]]), np.ones((16, 16), dtype=np.int64))
        X = ektelo.protect(quad, epsilon=20.0, seed=4)
        P = X.dawa_partition(eps=10.0, penalty="log-length")
        truth = np.kron(np.arange(4).reshape(2, 2), np.ones((16, 16), dtype=np.int64))
        assert P.domain_shape == (32, 32) and _refines(P, truth) and P.num_groups < 16
