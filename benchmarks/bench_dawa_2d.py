"""DAWA on the DPBench 2-D sets (issue #42); prints a table, asserts nothing.

    PYTHONPATH=. python benchmarks/bench_dawa_2d.py [--seeds 3] [--eps 0.1 1]

Per DPBench 2-D histogram (../shared/data/dpbench/2d, 256 × 256) and ε:
CPU seconds of one `plans.run("dawa", ...)` call — max and median over
`--seeds` research seeds — with the 2,000 DPBench reference ranges
(../shared/reference/dpbench_2d_ranges_2000.npy; 2,000 random ranges of
`workload.random_range` when absent), with and without workload-based
reduction (§8). With reduction DAWA partitions the 1-D vector of the
workload's groups, and GreedyH weighs W·S·P⁺ on the buckets: that matrix is
now counted from the ranges' corners (`selection.interval_reduced_ranges`);
the "old" column times, on the first seed only, the same call with the
implicit product densified as before (the counting switched off), and the
"images" column the same call with GreedyH's Gram blocks switched off
(`_greedy_h._BLOCK_CELLS = 1`: every node's m from its image R_S u_S, as
before the blocks; same strategies), to show both changes in one run.
Target: well under a second per run on every set. BLAS single-threaded.

The first lines print NumPy's huge-page setting: on a machine with
transparent huge pages on madvise and fragmented memory, NumPy's
madvise(MADV_HUGEPAGE) of its large arrays can cost more system time than
the work (on the shared 2-core machine of issue #42: 0.45 s of system time
for one 155 MB array of BeijingTaxiE's W P⁺, 0.1 s with it off). To see the
work without it: ``NUMPY_MADVISE_HUGEPAGE=0 python benchmarks/bench_dawa_2d.py``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import statistics
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

import ektelo
from ektelo import plans
from ektelo import workload as wl
from ektelo.matrix import EMatrix
from ektelo.operators import _greedy_h, _greedy_h_groups

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def _workload() -> tuple[EMatrix, str]:
    path = SHARED / "reference" / "dpbench_2d_ranges_2000.npy"
    if path.exists():
        corners = np.load(path)
        return wl.range_queries((256, 256), corners[:, 0], corners[:, 1]), "DPBench reference"
    return wl.random_range((256, 256), 2000, seed=0), "random_range(seed=0)"


def _run(x: np.ndarray, W: EMatrix, eps: float, seed: int, reduce: bool) -> float:
    handle = ektelo.protect(x, epsilon=eps, seed=seed)
    start = time.process_time()
    plans.run("dawa", handle, W, eps, workload_reduction=reduce)
    return time.process_time() - start


def _old(x: np.ndarray, W: EMatrix, eps: float, seed: int) -> float:
    """The reduction path with the counted W·S·P⁺ switched off."""
    counted: Any = _greedy_h_groups.interval_reduced_ranges
    _greedy_h_groups.interval_reduced_ranges = lambda P, W: None  # type: ignore[assignment]
    try:
        return _run(x, W, eps, seed, True)
    finally:
        _greedy_h_groups.interval_reduced_ranges = counted


def _images(x: np.ndarray, W: EMatrix, eps: float, seed: int, reduce: bool) -> float:
    """The call with GreedyH's Gram blocks switched off (images at every level)."""
    blocks = _greedy_h._BLOCK_CELLS
    _greedy_h._BLOCK_CELLS = 1
    try:
        return _run(x, W, eps, seed, reduce)
    finally:
        _greedy_h._BLOCK_CELLS = blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--eps", type=float, nargs="*", default=[0.1, 1.0])
    parser.add_argument("--no-old", action="store_true", help="skip the old paths' timings")
    args = parser.parse_args()
    folder = SHARED / "data" / "dpbench" / "2d"
    files = sorted(folder.glob("*_256_256.npy"))
    if not files:
        print(f"no DPBench 2-D data under {folder}: nothing to run")
        return
    W, source = _workload()
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    print(f"NUMPY_MADVISE_HUGEPAGE={os.environ.get('NUMPY_MADVISE_HUGEPAGE', 'unset (on)')}; "
          f"transparent huge pages: {thp.read_text().strip() if thp.exists() else 'n/a'}")
    print(f"DAWA (ratio 0.25), W = {source} ({W.shape[0]} ranges); CPU s per plan call, "
          f"{args.seeds} seed(s): max / median; first seed: old = the densified product "
          "(reduced), images = no Gram blocks (plain / reduced)")  # fmt: skip
    head = (f"{'dataset':14} {'ε':>5} {'plain max':>9} {'median':>7} {'images':>7} "
            f"{'ratio':>6} {'reduced max':>11} {'median':>7} {'images':>7} {'ratio':>6} "
            f"{'old':>7} {'old/new':>7}")  # fmt: skip
    print(head)
    print("-" * len(head))
    worst = 0.0
    for path in files:
        name = path.name.split("_256")[0]
        x = np.load(path).astype(np.int64)
        for eps in args.eps:
            seeds = [zlib.crc32(f"DAWA|{name}|{eps}|{s}".encode()) for s in range(args.seeds)]
            plain = [_run(x, W, eps, s, False) for s in seeds]
            reduced = [_run(x, W, eps, s, True) for s in seeds]
            worst = max(worst, *plain, *reduced)
            old = float("nan") if args.no_old else _old(x, W, eps, seeds[0])
            im_p = float("nan") if args.no_old else _images(x, W, eps, seeds[0], False)
            im_r = float("nan") if args.no_old else _images(x, W, eps, seeds[0], True)
            print(f"{name:14} {eps:5g} {max(plain):9.2f} {statistics.median(plain):7.2f} "
                  f"{im_p:7.2f} {im_p / plain[0]:5.1f}× "
                  f"{max(reduced):11.2f} {statistics.median(reduced):7.2f} "
                  f"{im_r:7.2f} {im_r / reduced[0]:5.1f}× {old:7.2f} "
                  f"{old / reduced[0]:6.1f}×", flush=True)  # fmt: skip
    print(f"slowest run: {worst:.2f} s CPU (target: well under 1 s); load: "
          f"{', '.join(f'{v:.1f}' for v in os.getloadavg())}")  # fmt: skip


if __name__ == "__main__":
    main()
