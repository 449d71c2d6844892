"""Timing reproducers of issue #36 on the memory engine, in process.

1. **Membership.** A table of 60,000 rows, with or without one person whose
   attributes are unique (a = 49, b = 7). The attacker times 15 zero-budget
   `where(person).group_by(["b", "c"])` calls and compares their median with
   a reference built on the same handle, an unsatisfiable predicate (no row,
   whatever the data): it guesses "in" when the target's median exceeds the
   reference's by half. Accuracy over 100 trials (50% is chance).
2. **Counts.** `where(a < k).group_by(["b", "c"])` for k = 1..49 (counts
   ~1,200·k): the Spearman correlation between time and the (secret) count,
   and a count estimated from the times by a linear fit on two reference
   predicates whose counts the attacker knows (none, and everything).

    python benchmarks/bench_timing_channels.py [--trials 100]

Run before and after issue #36's change (the parent commit: `group_by`'s
early return and grouping of the selected rows only).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

import ektelo
from ektelo import Domain, col

DOMAIN = Domain.from_dict({"a": 50, "b": 40, "c": 25})
ROWS = 60_000


def frame(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"a": rng.integers(0, 49, ROWS), "b": rng.integers(0, 40, ROWS),
                         "c": rng.integers(0, 25, ROWS)})


def timed(op: Callable[[], Any], n: int) -> float:
    out = []
    for _ in range(n):
        start = time.perf_counter_ns()
        op()
        out.append(time.perf_counter_ns() - start)
    return float(np.median(out))


def membership(trials: int, calls: int) -> float:
    rng = np.random.default_rng(1)
    right = 0
    base = frame(0)
    for _ in range(trials):
        inside = bool(rng.integers(2))
        extra = pd.DataFrame({"a": [49], "b": [7], "c": [3]}) if inside else base.iloc[:1]
        t = ektelo.protect(pd.concat([base, extra], ignore_index=True), DOMAIN, epsilon=1.0,
                           engine="memory")
        target = t.where((col("a") == 49) & (col("b") == 7))
        empty = t.where((col("a") == 49) & (col("a") == 48))  # no row, whatever the data
        ref_out = timed(lambda h=empty: h.group_by(["b", "c"]), calls)
        seen = timed(lambda h=target: h.group_by(["b", "c"]), calls)
        guess = seen > 1.5 * ref_out
        right += guess == inside
    return right / trials


def counts(reps: int) -> tuple[float, float]:
    t = ektelo.protect(frame(2), DOMAIN, epsilon=1.0, engine="memory")
    data = frame(2)
    ks = list(range(1, 50, 4))
    secret = [int((data["a"] < k).sum()) for k in ks]
    # k = 0 and 50 are the attacker's references (no row, every row); all predicates
    # are timed in a shuffled order, round after round, so that drifting machine load
    # hits them alike
    order = [0, *ks, 50]
    seen: dict[int, list[int]] = {k: [] for k in order}
    rng = np.random.default_rng(3)
    for _ in range(reps):
        for k in rng.permutation(order):
            start = time.perf_counter_ns()
            t.where(col("a") < int(k)).group_by(["b", "c"])
            seen[int(k)].append(time.perf_counter_ns() - start)
    times = [float(np.median(seen[k])) for k in ks]
    rho = float(spearmanr(secret, times)[0])
    # the attacker's line through its two references
    t0, t1 = float(np.median(seen[0])), float(np.median(seen[50]))
    estimates = [(x - t0) / (t1 - t0) * ROWS if t1 != t0 else ROWS / 2 for x in times]
    error = float(np.median(np.abs(np.array(estimates) - np.array(secret)) / np.array(secret)))
    return rho, error


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--calls", type=int, default=15)
    args = parser.parse_args()
    acc = membership(args.trials, args.calls)
    print(f"membership guesser: {acc:.0%} right over {args.trials} trials "
          f"({args.calls} zero-budget calls each; 50% is chance)", flush=True)
    rho, err = counts(15)
    print(f"count from timing: Spearman(time, count) = {rho:.2f}; median relative error of "
          f"the estimated count = {err:.0%} (13 predicates, 15 calls each, shuffled)")


if __name__ == "__main__":
    main()
