"""Workload-based partition selection (paper §8, Algorithm 3) at scale:
RandomRange(1000) over n = 10^6 cells (target: under 1 s), plus a 2-D
random-range workload and a Kronecker marginal workload for reference.

Prints the number of groups and the best and median of several runs.
Usage: python benchmarks/bench_partition.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from ektelo.operators import partition
from ektelo.workload import builders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cases = [
        ("RandomRange(1000), n = 10^6", builders.random_range(10**6, 1000, seed=0), 1.0),
        ("RandomRange(1000), (1000, 1000)", builders.random_range((1000,) * 2, 1000, seed=0), None),
        ("2-way marginals, (10, 10, 100, 100)", builders.marginals((10, 10, 100, 100), 2), None),
        ("Prefix(10^6)", builders.prefix(10**6), None),
    ]
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs (timings are wall clock)")
    print(f"{'workload':38s} {'cells':>9s} {'groups':>9s} {'best s':>7s} {'median s':>8s}  target")
    for name, W, target in cases:
        times = []
        groups = 0
        for _ in range(args.runs):
            t0 = time.perf_counter()
            P = partition.workload_based(W)
            times.append(time.perf_counter() - t0)
            groups = P.num_groups
        best, median = min(times), statistics.median(times)
        verdict = (
            "" if target is None else (f"< {target:g} s: {'met' if median < target else 'MISSED'}")
        )
        print(f"{name:38s} {W.shape[1]:9d} {groups:9d} {best:7.3f} {median:8.3f}  {verdict}")


if __name__ == "__main__":
    main()
