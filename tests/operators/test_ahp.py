"""AHP as a plan (issue #35): the kernel's noisy identity, then the public clustering
of `ektelo.operators.ahp` (Zhang et al., SDM 2014, steps 2–4)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import ektelo
from ektelo.matrix import Identity, Partition
from ektelo.operators import ahp, partition

PIECES = np.repeat([10, 100, 0, 40], [50, 30, 48, 40])
TRUTH = np.repeat([0, 1, 2, 3], [50, 30, 48, 40])


def _refines(P: Partition, truth: np.ndarray) -> bool:
    groups = np.asarray(P.groups).reshape(-1)
    return all(np.unique(truth[groups == g]).size == 1 for g in np.unique(groups))


def ahp_partition(x: Any, eps: float, seed: int, **options: Any) -> Partition:
    """AHP's private step (a noisy identity in the kernel), then its public clustering."""
    v = ektelo.protect(np.asarray(x), epsilon=eps, seed=seed)
    noisy = v.laplace(Identity(v.size), eps=eps)  # Private→Public
    assert v.budget.remaining == 0  # the whole ε on one identity measurement
    return partition.ahp(noisy.answers, eps, shape=v.shape, **options)  # Public


def test_returns_partition_of_x_shape_and_is_deterministic() -> None:
    x = np.arange(24).reshape(4, 6) % 5
    P = ahp_partition(x, 1.0, 3)
    assert isinstance(P, Partition)
    assert P.domain_shape == (4, 6)
    assert ahp_partition(x, 1.0, 3) == P


def test_recovers_pieces_at_large_eps() -> None:
    for seed in range(5):
        P = ahp_partition(PIECES, 1e3, seed)
        assert _refines(P, TRUTH)
        assert P.num_groups <= 12  # few groups: similar counts are clustered


def test_merges_pieces_at_small_eps() -> None:
    big = [ahp_partition(PIECES, 1e3, s).num_groups for s in range(5)]
    for seed in range(5):
        P = ahp_partition(PIECES, 0.01, seed)
        assert not _refines(P, TRUTH)
        assert P.num_groups < min(big)


def test_groups_need_not_be_contiguous() -> None:
    x = np.array([0, 500, 0, 500, 0, 500] * 5)
    P = ahp_partition(x, 1e3, 0)
    assert P.num_groups == 2
    assert P.groups[0] == P.groups[2] != P.groups[1]


def test_single_cell() -> None:
    assert ahp_partition(np.array([7]), 1.0, 0).num_groups == 1


def test_threshold_zeroes_small_noisy_counts() -> None:
    """Step 2: counts at or below η·ln(n)/ε join the zero cluster."""
    n, eps, eta = 64, 1.0, 0.35
    theta = eta * math.log(n) / eps
    y = np.where(np.arange(n) < 32, theta * 0.99, 1000.0)
    y[0] = 0.0
    P = partition.ahp(y, eps, eta=eta)
    assert P.num_groups == 2 and len(set(np.asarray(P.groups)[:32])) == 1


def test_greedy_err_star_matches_a_plain_loop() -> None:
    def plain(y: np.ndarray, var: float) -> np.ndarray:
        n, out = y.size, []
        for j in range(n):
            e1, e2, best, floor = 0.0, var, var, var / (n - j) ** 2
            for l in range(j + 1, n):
                length = l - j + 1
                ne1, ne2 = (y[j] - y[j : l + 1].mean()) ** 2, var / length**2
                if ne1 - e1 >= e2 - floor:
                    break
                best, e1, e2 = min(best, ne1 + ne2), ne1, ne2
            out.append(best)
        return np.array(out)

    rng = np.random.default_rng(0)
    for top, var in ((50, 22.0), (5, 5000.0), (1, 3.0)):
        y = np.sort(np.where(rng.random(200) < 0.5, 0, rng.integers(0, top + 1, 200)))
        y = y.astype(np.float64)
        np.testing.assert_allclose(ahp.best_start_errors(y, var), plain(y, var))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"y": np.zeros(0)}, ValueError),
        ({"y": np.array([1.0, np.nan])}, ValueError),
        ({"y": np.array([np.inf, 1.0])}, ValueError),
        ({"eps": 0.0}, ValueError),
        ({"eps": -1.0}, ValueError),
        ({"eps": math.inf}, ValueError),
        ({"eps": True}, TypeError),
        ({"ratio": 1.0}, ValueError),
        ({"ratio": 0.0}, ValueError),
        ({"eta": -0.1}, ValueError),
    ],
)
def test_bad_inputs(kwargs: dict[str, Any], error: type[Exception]) -> None:
    args = {"y": np.arange(8.0), "eps": 1.0, **kwargs}
    y, eps = args.pop("y"), args.pop("eps")
    with pytest.raises(error):
        partition.ahp(y, eps, **args)
