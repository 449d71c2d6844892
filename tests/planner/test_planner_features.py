"""`ektelo.planner.measure_features` (issue #29, Tier 1): one Laplace
measurement of x over public contiguous blocks, exactly the share charged,
and the named features computed from it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ektelo import protect
from ektelo.planner import FEATURE_NAMES, Features, coarse_partition, measure_features


def test_coarse_blocks_are_contiguous_and_at_most_sixteen():
    one = coarse_partition((100,))
    assert one.num_groups == 16 and np.all(np.diff(one.groups) >= 0)  # contiguous runs
    assert set(one.sizes) <= {6, 7}  # nearly equal
    two = coarse_partition((8, 6)).groups.reshape(8, 6)
    assert two.max() == 15
    np.testing.assert_array_equal(two[:2, :2], 0)  # the first 4x4 block is rows 0-1, cols 0-1
    np.testing.assert_array_equal(two[6:, 5:], 15)  # 6 columns: runs of 2, 2, 1, 1
    assert coarse_partition((5,)).num_groups == 5  # never more blocks than cells
    assert coarse_partition((4, 4, 4)).num_groups == 8


def test_features_charge_exactly_the_share_once():
    x = protect(np.arange(64.0), epsilon=1.0, seed=3)
    f = measure_features(x, 0.05, kind="prefix", plan_eps=0.95)
    assert x.budget.spent == pytest.approx(0.05, rel=1e-12)
    (record,) = x.history()
    assert record.eps == 0.05 and record.charged_at_root == pytest.approx(0.05)
    # the kernel's snapped Laplace: a scale a hair above 1/ε
    assert f.coarse_scale == pytest.approx(1 / 0.05, rel=1e-3) and len(f.coarse) == 16
    assert f.total == pytest.approx(sum(f.coarse))
    assert (f.dims, f.cells, f.kind, f.eps) == (1, 64, "prefix", 0.95)


def test_the_noisy_blocks_estimate_the_block_sums():
    """At a large ε the coarse counts are the true block sums (the blocks
    are x's contiguous runs, not some other grouping)."""
    data = np.zeros((8, 8))
    data[0, 0] = 1000.0
    data[7, 7] = 500.0
    x = protect(data, epsilon=1e6, seed=1)
    f = measure_features(x, 1e5, kind="ranges", plan_eps=1.0)
    coarse = np.array(f.coarse)
    assert coarse[0] == pytest.approx(1000, abs=0.01) and coarse[15] == pytest.approx(500, abs=0.01)
    assert np.abs(coarse[1:15]).max() < 0.01
    named = f.named()
    assert named["top_share"] == pytest.approx(1.0, abs=1e-4)
    # the two full blocks are never "empty"; an empty block is unless its noise ≥ 2b
    assert named["empty_share"] == np.mean(coarse < 2 * f.coarse_scale) <= 14 / 16
    assert named["log10_total"] == pytest.approx(math.log10(1500), abs=1e-4)


def test_named_features():
    f = Features(dims=1, cells=1000, kind="prefix", eps=0.1, total=1e4,
                 coarse=(5e3, 3e3, 1e3, 1e3, -1.0, 0.0), coarse_scale=2.0)
    named = f.named()
    assert tuple(named) == FEATURE_NAMES
    assert named == pytest.approx({
        "dims": 1.0, "log10_cells": 3.0, "is_prefix": 1.0, "log10_eps": -1.0,
        "log10_total": 4.0, "log10_signal": 3.0, "top_share": 0.8, "empty_share": 2 / 6})
    negative = Features(dims=2, cells=16, kind="ranges", eps=1.0, total=-3.0,
                        coarse=(-1.0, -2.0, 0.0, 0.0), coarse_scale=1.0)
    n = negative.named()
    assert n["log10_total"] == 0.0 and n["is_prefix"] == 0.0  # total clamped at 1 in the log
    assert n["top_share"] == 0.5 and n["empty_share"] == 1.0  # no positive mass: uniform


@pytest.mark.parametrize(("eps", "kind", "plan_eps", "match"), [
    (0.0, "prefix", 0.9, "eps must be a finite positive number"),
    (-0.1, "prefix", 0.9, "eps must be a finite positive number"),
    (float("nan"), "prefix", 0.9, "eps must be a finite positive number"),
    (0.1, "prefix", 0.0, "plan_eps must be a finite positive number"),
    (0.1, "nonsense", 0.9, "unknown workload kind 'nonsense'"),
])
def test_bad_arguments_are_refused_before_spending(eps, kind, plan_eps, match):
    x = protect(np.ones(32), epsilon=1.0, seed=0)
    with pytest.raises(ValueError, match=match):
        measure_features(x, eps, kind=kind, plan_eps=plan_eps)
    assert x.budget.spent == 0 and x.history() == ()


def test_more_than_the_budget_is_refused_and_changes_nothing():
    from ektelo import BudgetExceeded

    x = protect(np.ones(32), epsilon=0.1, seed=0)
    with pytest.raises(BudgetExceeded):
        measure_features(x, 0.2, kind="prefix", plan_eps=0.9)
    assert x.budget.spent == 0 and x.history() == ()
