"""The planner's evidence for data-dependent plans (issue #43): each
data-dependent plan's measured error on the training grid
(`planner_grid`'s cache, DPBench data, Hay et al., SIGMOD 2016) relative to
the best data-independent plan of the same grid, per (group, ε, scale),
written to `src/ektelo/planner/evidence.json` for `ektelo.planner.evidence`.

Ratio = geometric mean over datasets and seeds of the plan's per-query
error ‖Wx − Wx̂‖₂/|W| at the full ε, divided by the geometric mean over
seeds of the best data-independent plan's (whose error vector W A⁺η does
not depend on x, so one set of runs serves every dataset and scale).

    python -m experiments.planner_evidence        # from the cached grid
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .planner_grid import cache_paths, load_cache

__all__ = ["OUT", "main", "ratios"]

OUT = Path(__file__).resolve().parents[1] / "src" / "ektelo" / "planner" / "evidence.json"
# The data-dependent plans the planner's rules may choose without a tree.
PLANS = ("dawa",)


def _gm(s: pd.Series) -> float:
    return float(np.exp(np.mean(np.log(s.to_numpy(dtype=np.float64)))))


def ratios(grid: pd.DataFrame) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """{group: {plan: {ε: {scale: ratio}}}} from grid rows at the full ε."""
    full = grid[grid["factor"] == 1.0]
    out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for group, g in full.groupby("group"):
        di = g[g["dataset"] == "*"].groupby(["eps", "plan"])["abs_error"].apply(_gm).unstack()
        best = di.min(axis=1)
        for plan in PLANS:
            rows = g[(g["dataset"] != "*") & (g["plan"] == plan)]
            if rows.empty:
                continue
            per = rows.groupby(["eps", "scale"])["abs_error"].apply(_gm)
            table: dict[str, dict[str, float]] = {}
            for (eps, scale), err in per.items():
                ratio = err / float(best[eps])
                table.setdefault(f"{eps:g}", {})[str(scale)] = (
                    round(ratio, 4) if math.isfinite(ratio) else math.inf)
            out.setdefault(str(group), {})[plan] = table
    return out


def main() -> None:
    grid = load_cache([p for dims in (1, 2) for p in cache_paths(dims)])
    table_of = ratios(grid)
    doc = {
        "version": 1,
        "about": "per (group, plan, ε, scale): the data-dependent plan's measured error on "
                 "the planner's training grid (DPBench, 5 seeds) over the best "
                 "data-independent plan's; python -m experiments.planner_evidence",
        "ratios": table_of,
    }
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    for group, plans in table_of.items():
        for plan, table in plans.items():
            for eps, row in table.items():
                cells = "  ".join(f"{s}:{r:.2f}" for s, r in sorted(row.items()))
                print(f"{group:10s} {plan:6s} ε={eps:5s} {cells}")


if __name__ == "__main__":
    main()
