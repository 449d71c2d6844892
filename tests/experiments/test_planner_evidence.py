"""The shipped `src/ektelo/planner/evidence.json` is what
`experiments.planner_evidence` computes from the committed grid cache."""

from __future__ import annotations

import json

import pytest

from experiments import planner_evidence as pe
from experiments.planner_grid import cache_paths, load_cache


def test_shipped_evidence_is_reproduced_from_the_cache() -> None:
    grid = load_cache([p for dims in (1, 2) for p in cache_paths(dims)])
    shipped = json.loads(pe.OUT.read_text())["ratios"]
    fresh = pe.ratios(grid)
    assert set(fresh) == set(shipped) == {"1d-prefix", "1d-ranges", "2d-ranges"}
    for group, table in fresh.items():
        for eps, row in table["dawa"].items():
            for scale, ratio in row.items():
                assert shipped[group]["dawa"][eps][scale] == pytest.approx(ratio, abs=1e-4)
