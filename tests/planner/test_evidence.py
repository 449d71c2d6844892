"""`auto` never chooses a data-dependent plan that its training grid shows
losing to the best data-independent candidate (issue #43,
`ektelo.planner.evidence`): the 2-D range case over adult's age ×
hours-per-week, where `auto` used to choose DAWA and lost to HDMM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ektelo import plans
from ektelo.planner import auto_plan
from ektelo.planner.evidence import grid_ratio
from ektelo.workload import random_range

ADULT = Path(__file__).resolve().parents[3] / "shared/data/adult/adult-domain.json"


@pytest.mark.parametrize("eps", [0.1, 1.0])
def test_adult_two_d_ranges_get_tier0_not_dawa(eps: float) -> None:
    dom = json.loads(ADULT.read_text())
    shape = (dom["age"], dom["hours-per-week"])  # 85 × 99 = 8,415 cells
    W = random_range(shape, 100, seed=0)
    choice = auto_plan(W, "ranges", shape, eps=eps)
    assert not plans.get(choice.plan).data_dependent
    priced = {c.plan: c.rmse for c in choice.candidates if c.rmse is not None}
    assert choice.plan == "hdmm" and priced["hdmm"] == min(priced.values())
    dawa = next(c for c in choice.candidates if c.plan == "dawa")
    ratio = grid_ratio("dawa", "2d-ranges", eps)
    assert ratio is not None and ratio[0] > 1  # measured losing at some scale
    assert f"{ratio[0]:.2f}×" in dawa.note


def test_grid_ratio_reads_the_nearest_cell() -> None:
    worst = grid_ratio("dawa", "2d-ranges", 0.1)
    small = grid_ratio("dawa", "2d-ranges", 0.1, rows=1200)
    assert worst is not None and small is not None
    assert small[1] == "ε=0.1, scale 1e3" and small[0] < 1 < worst[0]
    assert grid_ratio("dawa", "2d-ranges", 0.08, rows=1200) == small  # nearest ε in log
    assert grid_ratio("dawa", None, 0.1) is None  # no grid for the shape
    assert grid_ratio("mwem", "2d-ranges", 0.1) is None


def test_histograms_without_a_grid_get_tier0() -> None:
    from ektelo.matrix import Identity

    choice = auto_plan(Identity(64 * 64), "identity", (64, 64), eps=1.0)
    assert choice.plan == "identity"
    dawa = next(c for c in choice.candidates if c.plan == "dawa")
    assert "no training-grid evidence" in dawa.note
