"""Timings of the MWEM family (issue 6); prints a table.

    python benchmarks/bench_plans_mwem.py                # all plans, both settings
    python benchmarks/bench_plans_mwem.py --repeat 3 --plans mwem mwem_b

Settings (ε = 0.1, the true total given, T = 10 rounds, research-mode seeds):
* 1-D: n = 4096, W = RandomRange(1000) (Table 4's setting), DPBench HEPTH;
* 2-D: 256 × 256, W = 2000 random 2-D ranges, DPBench Adult_2D.
(Synthetic Poisson data when the shared DPBench data is absent.)

Per plan and setting: median CPU seconds (time.process_time) and wall
seconds over `--repeat` runs, the scaled L2 error, the target (< 2 s) and the
original εktelo figure where the issue gives one (MWEM 2-D ≈ 33 s; mwem_b did
not finish in 300 s at 1-D; mwem_d ≈ 36 s). CPU time is the measure to read
on a shared machine: wall time includes waiting for the CPU.

BLAS runs single-threaded here (OPENBLAS_NUM_THREADS=1 unless set): on a
loaded two-core box OpenBLAS threads spin on every dot product of more than
~10⁴ entries and multiply the wall time of iterative solvers several times.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import statistics
import time

import numpy as np

import ektelo
from bench_plans import vector_settings  # this directory: scripts run as files
from ektelo import plans
from ektelo import workload as wl

PLANS = ("mwem", "mwem_b", "mwem_c", "mwem_d")
EPS = 0.1
TARGET = 2.0
ORIGINAL = {("mwem", "2-D"): "≈ 33", ("mwem_b", "1-D"): "> 300", ("mwem_d", "?"): "≈ 36"}


def settings() -> dict[str, tuple[np.ndarray, object]]:
    """bench_plans' 1-D and 2-D cases (same data and workloads)."""
    cases = vector_settings()
    return {name: cases[name] for name in ("1-D", "2-D")}


def run(plan: str, x: np.ndarray, W: object, seed: int) -> tuple[float, float, float]:
    handle = ektelo.protect(x, epsilon=EPS, seed=seed)
    wall, cpu = time.perf_counter(), time.process_time()
    x_hat = plans.run(plan, handle, W, EPS, total=float(x.sum()))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu, wall, wl.scaled_l2_error(W, x, x_hat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--plans", nargs="*", default=list(PLANS))
    parser.add_argument("--settings", nargs="*", default=["1-D", "2-D"])
    args = parser.parse_args()
    cases = settings()
    print(f"MWEM family, ε = {EPS}, true total, median of {args.repeat} run(s), target {TARGET} s")
    header = (
        f"{'plan':8} {'setting':8} {'CPU s':>8} {'wall s':>8} {'error':>10} "
        f"{'target':>7} {'original εktelo s':>18}"
    )
    print(header)
    print("-" * len(header))
    for name in args.settings:
        x, W = cases[name]
        for plan in args.plans:
            runs = [run(plan, x, W, seed=1 + r) for r in range(args.repeat)]
            cpu = statistics.median(r[0] for r in runs)
            wall = statistics.median(r[1] for r in runs)
            err = statistics.median(r[2] for r in runs)
            ok = "ok" if cpu < TARGET else "MISS"
            original = ORIGINAL.get((plan, name), ORIGINAL.get((plan, "?"), "–"))
            print(
                f"{plan:8} {name:8} {cpu:8.2f} {wall:8.2f} {err:10.3e} {ok:>7} {original:>18}",
                flush=True,
            )


if __name__ == "__main__":
    main()
