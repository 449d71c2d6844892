"""The planner's evidence for a data-dependent plan (issue #43): its measured
error on the training grid relative to the best data-independent plan's.

A data-dependent plan (DAWA) has no closed-form expected error, so Tier 0
cannot price it. `auto_plan`'s fixed rules (`rules.choose_plan`) used to keep
it blind, and on adult's age × hours-per-week (100 random 2-D ranges) DAWA
lost to Tier 0's HDMM by 1.3–2.5×. The rule is now: keep a data-dependent
plan only where its error measured on the planner's training grid (DPBench,
Hay et al., SIGMOD 2016: `experiments/planner_grid.py`, 5 seeds per cell)
is below the best data-independent plan's there. `evidence.json`, written by
``python -m experiments.planner_evidence`` from the cached grid, holds per
(group, plan, ε, scale) the ratio

    geometric mean of the plan's per-query error / the best data-independent
    plan's (whose error W A⁺η is the same on every dataset and scale),

so the plan's estimated error here is that ratio times the best candidate's
exact expected error, and it is kept only when the ratio is below 1. The
grid's ε nearest to the given one (in log) is read; with a declared row
count the nearest scale (in log), else the worst scale: a plan chosen
without knowing the data's size must not lose at any size. A workload with
no grid for its shape (`table.group_of` is None) has no evidence, and the
data-dependent plan is not kept.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["EVIDENCE_PATH", "grid_ratio"]

EVIDENCE_PATH = Path(__file__).with_name("evidence.json")


@cache
def _ratios() -> dict[str, Any]:
    if not EVIDENCE_PATH.exists():
        return {}
    doc = json.loads(EVIDENCE_PATH.read_text())
    ratios: dict[str, Any] = doc.get("ratios", {})
    return ratios


def grid_ratio(plan: str, group: str | None, eps: float,
               rows: float | None = None) -> tuple[float, str] | None:
    """The data-dependent `plan`'s measured error on the training grid of
    `group` over the best data-independent plan's, at the grid's ε nearest
    `eps` and the scale nearest `rows` (the worst scale when None), with
    where it was read ("ε=0.1, scale 1e7"); None without evidence."""
    table = _ratios().get(group or "", {}).get(plan)
    if not table:
        return None
    near_eps = min(table, key=lambda e: abs(math.log10(float(e)) - math.log10(eps)))
    row: dict[str, float] = table[near_eps]
    if rows is not None:
        numeric = [s for s in row if s != "own"]
        scale = min(numeric, key=lambda s: abs(math.log10(float(s)) - math.log10(rows)))
    else:
        scale = max(row, key=lambda s: row[s])
    return float(row[scale]), f"ε={near_eps}, scale {scale}"
