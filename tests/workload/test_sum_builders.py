"""Weighted workloads (issue #38): sums per group, per marginal cell and per
range against brute force on a random data vector; the representative values
of each kind of attribute; HDMM's row-space factor for sums and counts."""

from __future__ import annotations

import numpy as np
import pytest

from ektelo.domain import Attribute
from ektelo.matrix import Identity, Kronecker
from ektelo.operators import error
from ektelo.operators.hdmm import optimise, row_space_strategy
from ektelo.workload import group_sums, range_sums, value_factor
from ektelo.workload.values import representatives, value_range


def _data(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 20, size=shape).astype(float)


@pytest.mark.parametrize("totals", [False, True])
def test_group_sums_and_counts_match_brute_force(totals: bool) -> None:
    shape = (6, 3, 4)
    v = np.array([0.5, 1.5, 2.5, 10.0, -3.0, 7.0])
    x = _data(shape)
    W = group_sums(shape, 0, v, by=(1, 2), counts=True, totals=totals)
    got = W.matvec(x.ravel())
    sums = np.einsum("i,ijk->jk", v, x)
    counts = x.sum(axis=0)
    if not totals:
        np.testing.assert_allclose(got, np.concatenate([sums.ravel(), counts.ravel()]))
        return
    # [I; T] on each group axis: cells, then sums over the last axis, …
    def rollup(t: np.ndarray) -> np.ndarray:
        a = np.vstack([t, t.sum(axis=0, keepdims=True)])  # (4, 4)
        return np.hstack([a, a.sum(axis=1, keepdims=True)]).ravel()

    np.testing.assert_allclose(got, np.concatenate([rollup(sums), rollup(counts)]))


def test_group_sums_sum_over_unlisted_axes_and_no_groups() -> None:
    shape = (5, 2, 3)
    v = np.arange(5.0)
    x = _data(shape, 1)
    np.testing.assert_allclose(group_sums(shape, 0, v).matvec(x.ravel()),
                               [np.einsum("i,ijk->", v, x)])
    np.testing.assert_allclose(group_sums(shape, 0, v, by=(2,)).matvec(x.ravel()),
                               np.einsum("i,ijk->k", v, x))
    with pytest.raises(ValueError, match="not the summed axis"):
        group_sums(shape, 0, v, by=(0,))
    with pytest.raises(ValueError, match="5 values"):
        group_sums((4, 2), 0, v)


def test_range_sums_match_brute_force() -> None:
    shape = (5, 4)
    v = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    x = _data(shape, 2)
    lo = np.array([[0, 0], [1, 2], [4, 3]])
    hi = np.array([[4, 3], [3, 2], [4, 3]])
    got = range_sums(shape, 0, v, lo, hi).matvec(x.ravel())
    want = [float(np.sum(v[a:c + 1, None] * x[a:c + 1, b:d + 1]))
            for (a, b), (c, d) in zip(lo, hi, strict=True)]
    np.testing.assert_allclose(got, want)


def test_representatives_of_each_kind() -> None:
    np.testing.assert_array_equal(representatives(Attribute("h", 4)), [0, 1, 2, 3])
    np.testing.assert_array_equal(representatives(Attribute("a", 3, (18, 30, 65))), [18, 30, 65])
    binned = Attribute("s", 3, bins=(0, 10, 20, 50))
    np.testing.assert_array_equal(representatives(binned), [5, 15, 35])
    assert value_range(binned) == (5.0, 35.0)
    with pytest.raises(ValueError, match="'sex' is categorical"):
        representatives(Attribute("sex", 2, ("F", "M")))
    with pytest.raises(ValueError, match="'x' is unbounded"):
        representatives(Attribute("x", 2, (0.0, float("inf"))))
    with pytest.raises(ValueError, match="finite"):
        value_factor([1.0, float("nan")])


def test_row_space_strategy_error_is_exact_and_beats_measuring_the_workload() -> None:
    v = np.arange(40.0)
    W = value_factor(v, counts=True)
    A, err = row_space_strategy(W)  # type: ignore[misc]
    assert A.sensitivity(1) == pytest.approx(1.0)
    # the exact Laplace error at ε = 1 is 2·‖A‖₁²·tr((AᵀA)⁺WᵀW)
    assert error.expected_error(W, A, 1.0) == pytest.approx(2 * err, rel=1e-6)
    # the centred sum beside an equally weighted count: half the error of W itself
    # (the peers' centred-sum trick with the split optimised)
    assert err < 0.55 * error.expected_error(W, W, 1.0) / 2
    assert row_space_strategy(Identity(8)) is None  # full rank: p-Identity's job


def test_hdmm_takes_the_row_space_factor_on_sums_by_groups() -> None:
    v = np.arange(30.0)
    W = group_sums((30, 3), 0, v, by=(1,), counts=True)
    res = optimise(W)
    assert res.method.endswith("+row-space")
    assert isinstance(res.strategy, Kronecker)
    exact = error.expected_error(W, res.strategy, 1.0)
    assert exact == pytest.approx(2 * res.error, rel=1e-6)
    # far below the identity strategy's and below measuring W itself
    assert exact < 0.1 * error.expected_error(W, Identity(90), 1.0)
    assert exact < 0.55 * error.expected_error(W, W, 1.0)
