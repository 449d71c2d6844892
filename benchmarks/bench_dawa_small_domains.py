"""DAWA's exact partition on small domains (issue #22): the per-bucket penalty
P1 (default, 1/ε₂ + 2λ) against P2 (penalty="log-length", 1/ε₂ + λ·(4 + ln L));
prints tables.

    python benchmarks/bench_dawa_small_domains.py               # 5 seeds
    python benchmarks/bench_dawa_small_domains.py --seeds 2 --per-dataset

1. Group counts of `dawa_partition` (the kernel operator, budget eps) on 4
   constant pieces of 256 cells (levels 10, 100, 0, 40; n = 1024).
2. Accuracy of the DAWA plan (`ektelo.plans.dawa`: ratio 0.25 to the
   partition, GreedyH and least squares on the groups) on the DPBench 1-D
   histograms (../shared/data/dpbench/1d, 4096 bins) summed 4 by 4 to 1,024
   cells, plus the 4 pieces, for Prefix(1024) and 2,000 random ranges
   (DPBench's RandomRange, seed 0), plan ε = 0.1, 1, 10, research-mode seeds.
   Error: DPBench's scaled average per-query L2 error
   ‖Wx − Wx̂‖₂ / (|W|·‖x‖₁) (`ektelo.workload.metrics.scaled_l2_error`),
   averaged over the seeds; the table gives its mean over the 10 datasets for
   P1 and P2, the geometric mean of the per-dataset ratios P2/P1 and on how
   many datasets P2 is better.  The plan does not expose `penalty`, so the
   script switches the module default (`dawa._DEFAULT_PENALTY`) per run.
Skips (with a message) when the shared data are absent.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import ektelo
from ektelo import plans
from ektelo import workload as wl
from ektelo.kernel import dawa
from ektelo.kernel.noise import RandomSource
from ektelo.workload.metrics import scaled_l2_error

DATA_1D = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "dpbench" / "1d"
N = 1024
PIECES = np.repeat([10, 100, 0, 40], 256)
VARIANTS = {"P1 (2λ, default)": 2.0, "P2 (log-length)": "log-length"}
PLAN_EPS = (0.1, 1.0, 10.0)
OP_EPS = (0.1, 1.0, 10.0, 50.0)


def _load() -> dict[str, np.ndarray]:
    data = {}
    for path in sorted(DATA_1D.glob("*.npy")):
        x = np.load(path)
        data[path.name.split(".")[0]] = x.reshape(N, -1).sum(axis=1).astype(np.int64)
    return data


def group_counts(seeds: int) -> None:
    print(
        f"Groups on 4 constant pieces of 256 cells (n = {N}), dawa_partition(eps), "
        f"{seeds} seeds: mean [min–max]"
    )
    print(f"{'eps':>6}  " + "  ".join(f"{name:>22}" for name in VARIANTS))
    for eps in OP_EPS:
        cells = []
        for penalty in VARIANTS.values():
            k = [
                dawa.dawa_partition(PIECES, eps, RandomSource(s), penalty=penalty).num_groups
                for s in range(seeds)
            ]
            cells.append(f"{statistics.mean(k):6.1f} [{min(k)}–{max(k)}]")
        print(f"{eps:>6g}  " + "  ".join(f"{c:>22}" for c in cells))
    print()


def _error(x: np.ndarray, W, eps: float, seeds: int) -> float:
    errs = []
    for s in range(seeds):
        X = ektelo.protect(x, epsilon=eps, seed=10_000 + s)
        errs.append(scaled_l2_error(W, x, plans.dawa(X, W, eps)))
    return statistics.mean(errs)


def accuracy(data: dict[str, np.ndarray], seeds: int, per_dataset: bool) -> None:
    workloads = {"Prefix": wl.prefix(N), "2000 ranges": wl.random_range((N,), 2000, seed=0)}
    names = list(VARIANTS)
    print(
        f"DAWA plan on DPBench 1-D at {N} cells ({len(data)} datasets), scaled L2 error "
        f"×1e6, mean of {seeds} seeds"
    )
    print(
        f"{'plan ε':>6} {'workload':<12} {'P1 mean':>9} {'P2 mean':>9} {'geo P2/P1':>9} "
        f"{'P2 better':>9} {'pieces P1':>10} {'pieces P2':>10}"
    )
    saved = dawa._DEFAULT_PENALTY
    try:
        for eps in PLAN_EPS:
            for wname, W in workloads.items():
                err: dict[str, list[float]] = {v: [] for v in names}
                pieces: dict[str, float] = {}
                for name, rule in VARIANTS.items():
                    dawa._DEFAULT_PENALTY = rule
                    err[name] = [_error(x, W, eps, seeds) for x in data.values()]
                    pieces[name] = _error(PIECES, W, eps, seeds)
                p1, p2 = np.array(err[names[0]]), np.array(err[names[1]])
                geo = float(np.exp(np.mean(np.log(p2 / p1))))
                print(
                    f"{eps:>6g} {wname:<12} {p1.mean() * 1e6:>9.3f} {p2.mean() * 1e6:>9.3f} "
                    f"{geo:>9.2f} {int((p2 < p1).sum()):>5}/{p1.size:<3} "
                    f"{pieces[names[0]] * 1e6:>10.3f} {pieces[names[1]] * 1e6:>10.3f}"
                )
                if per_dataset:
                    for i, dname in enumerate(data):
                        print(
                            f"{'':>19}{dname:<32} {p1[i] * 1e6:>9.3f} {p2[i] * 1e6:>9.3f} "
                            f"{p2[i] / p1[i]:>6.2f}"
                        )
    finally:
        dawa._DEFAULT_PENALTY = saved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--per-dataset", action="store_true")
    args = parser.parse_args()
    start = time.perf_counter()
    group_counts(max(args.seeds, 6))
    if not DATA_1D.is_dir() or not any(DATA_1D.glob("*.npy")):
        print(f"skipped the DPBench accuracy table: no data at {DATA_1D}")
        return 0
    accuracy(_load(), args.seeds, args.per_dataset)
    print(f"\n({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
