"""The 2-D shape features of the issue-#43 simulation (`experiments.planner_shapes`):
they tell a flat histogram from a concentrated one at a usable ε, and read
nothing but the noisy blocks (an exact declared total changes only the total)."""

from __future__ import annotations

import numpy as np

from experiments.planner_shapes import shape_features


def _features(x: np.ndarray, declared: bool = False, eps: float = 1.0) -> dict[str, float]:
    return shape_features(x, eps, 0.05, np.random.default_rng(0), declared)


def test_flat_and_concentrated_histograms_are_told_apart() -> None:
    flat = np.full((256, 256), 100, dtype=np.int64)
    spike = np.zeros((256, 256), dtype=np.int64)
    spike[:16, :16] = flat.sum() // 256  # all the mass in one 16×16 block
    f, s = _features(flat), _features(spike)
    assert f["effshare16"] > 0.99 and s["effshare16"] < 0.05
    assert abs(f["top16"] - 1 / 8) < 0.01 and s["top16"] > 0.99
    assert f["empty16"] == 0.0 and s["empty16"] > 0.85  # Laplace(20) passes 40 in ~7% of blocks
    assert f["rough16"] < 0.01 < s["rough16"]


def test_a_declared_total_changes_only_the_total() -> None:
    x = np.random.default_rng(1).poisson(3.0, (256, 256))
    noisy, declared = _features(x), _features(x, declared=True)
    assert declared["log10_total"] == np.log10(x.sum())
    shape = [k for k in noisy if not k.startswith("log10_")]
    assert all(noisy[k] == declared[k] for k in shape)
