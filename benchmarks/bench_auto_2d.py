"""`auto` on 2-D ranges over adult's age × hours-per-week (issue #43): the
plan `auto_plan` chooses (free, no row count) beside the per-query RMSE of
DAWA, HDMM and the identity, measured over seeds. Before issue #43 the
fixed rule chose DAWA here; the training grid's evidence
(`ektelo.planner.evidence`) now keeps Tier 0's best (HDMM).

    PYTHONPATH=. python benchmarks/bench_auto_2d.py [--seeds 5] [--eps 0.1 1]

Reads ../shared/data/adult (skips with a message when it is absent).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

import ektelo
from ektelo import plans
from ektelo.planner import auto_plan
from ektelo.workload import random_range

ADULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--eps", type=float, nargs="+", default=[0.1, 1.0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    if not (ADULT / "adult.csv").exists():
        print(f"SKIPPED: {ADULT} not found (the adult data lives in ../shared/data)")
        return
    dom = json.loads((ADULT / "adult-domain.json").read_text())
    frame = pd.read_csv(ADULT / "adult.csv")
    shape = (dom["age"], dom["hours-per-week"])
    counts = np.zeros(shape, dtype=np.int64)
    np.add.at(counts, (frame["age"].to_numpy(), frame["hours-per-week"].to_numpy()), 1)
    x = counts.reshape(-1)
    W = random_range(shape, args.queries, seed=0)
    truth = W.matvec(x.astype(np.float64))
    print(f"adult age × hours-per-week {shape}, {args.queries} random ranges, "
          f"{args.seeds} seeds; per-query RMSE, mean over seeds")  # fmt: skip
    for eps in args.eps:
        choice = auto_plan(W, "ranges", shape, eps=eps)
        row = {}
        for plan in sorted({"dawa", "hdmm", "identity", choice.plan}):
            errs = []
            for seed in range(args.seeds):
                v = ektelo.protect(x, epsilon=eps, seed=seed, integral=True)
                est = np.asarray(plans.run(plan, v, W, eps), dtype=np.float64)
                errs.append(float(np.sqrt(np.mean((W.matvec(est) - truth) ** 2))))
            row[plan] = float(np.mean(errs))
        cells = "  ".join(f"{p} {e:8.1f}" for p, e in row.items())
        print(f"ε={eps:g}: auto chooses {choice.plan:8s} | {cells}")


if __name__ == "__main__":
    main()
