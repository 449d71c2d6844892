"""The in-memory engine at 10^7 rows (issue #42); prints a table, asserts nothing.

    PYTHONPATH=. python benchmarks/bench_memory_engine.py [--rows 1e7] [--repeats 3]

A pandas DataFrame of `--rows` rows × 6 int64 columns (the schema of
bench_engines.py as integer codes: sizes 16, 2, 8, 10, 8, 4 — 81,920 cells),
drawn from a seeded generator. Each path runs in a fresh subprocess that
builds the frame, imports ektelo, warms the library up on a 10-row table
(imports are not the engine's time), resets the peak RSS to the current RSS
(/proc/self/clear_refs) and then runs:

  * floor:  np.ravel_multi_index over the six columns + np.bincount — the
            histogram a hand-written NumPy program computes from the codes;
  * memory: protect(frame) (the domain check and the code matrix), then
            select(all six) + vectorize through the kernel and its handles,
            and one noisy total, the charged request at which the kernel
            computes the counts (vectorize is free and lazy: issue #36).

Printed: CPU seconds (median of `--repeats` subprocesses) of each step, the
ratio memory / floor for the histogram (target ≤ 2×), and the peak RSS of
the memory path over the RSS with the input loaded (target ≤ 1.2×; the
input's bytes and the interpreter are both in that denominator, so the extra
memory the engine needs is shown as well).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import numpy as np

from benchmarks._child import run_child

SIZES = {"region": 16, "sex": 2, "edu": 8, "age": 10, "income": 8, "hours": 4}


def _status(field: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child(which: str, rows: int) -> dict[str, Any]:
    import pandas as pd

    import ektelo
    from ektelo import Domain

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({k: rng.integers(0, s, rows, dtype=np.int64) for k, s in SIZES.items()})
    domain = Domain.from_dict(SIZES)
    from ektelo.matrix import Total

    warm = ektelo.protect(frame.head(10), domain, epsilon=1.0).select(list(SIZES)).vectorize()
    warm.laplace(Total(warm.size), eps=0.1)
    out: dict[str, Any] = {"input_mb": float(frame.memory_usage(index=False).sum()) / 2**20}
    out["rss_input_mb"] = _status("VmRSS")
    with open("/proc/self/clear_refs", "w") as fh:  # the peak from here on
        fh.write("5")
    t0 = time.process_time()
    if which == "floor":
        flat = np.ravel_multi_index(tuple(frame[c].to_numpy() for c in SIZES),
                                    tuple(SIZES.values()))  # fmt: skip
        x = np.bincount(flat, minlength=int(np.prod(list(SIZES.values()))))
        out["histogram_s"] = time.process_time() - t0
    else:
        table = ektelo.protect(frame, domain, epsilon=1.0)
        t1 = time.process_time()
        x = table.select(list(SIZES)).vectorize()
        x.laplace(Total(x.size), eps=0.1)  # the counts are computed here (K9)
        out["protect_s"] = t1 - t0
        out["histogram_s"] = time.process_time() - t1
    out["cells"] = int(x.size)
    out["peak_mb"] = _status("VmHWM")
    return out


def measure(which: str, rows: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", which, "--rows", str(rows)]
    return run_child(cmd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="1e7")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", default=None)
    args = parser.parse_args()
    rows = int(float(args.rows))
    if args.child:
        print(json.dumps(child(args.child, rows)))
        return
    runs: dict[str, list[dict[str, Any]]] = {"floor": [], "memory": []}
    for _ in range(args.repeats):  # interleaved: the shared machine's load hits both alike
        for which in runs:
            r = measure(which, rows)
            if "error" in r:
                print(which, "failed:", r["error"])
                return
            runs[which].append(r)

    def med(which: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[which])

    floor, hist = med("floor", "histogram_s"), med("memory", "histogram_s")
    peak, base = med("memory", "peak_mb"), med("memory", "rss_input_mb")
    print(f"{rows:,} rows × 6 int64 columns ({med('memory', 'input_mb'):,.0f} MB); "
          f"{runs['memory'][0]['cells']:,} cells; CPU s, median of {args.repeats}")  # fmt: skip
    print(f"floor  ravel_multi_index + bincount   {floor:7.3f} s")
    print(f"memory protect(frame)                 {med('memory', 'protect_s'):7.3f} s")
    print(f"memory select + vectorize             {hist:7.3f} s   "
          f"{hist / floor:5.2f}× the floor (target ≤ 2×)")  # fmt: skip
    print(f"memory peak RSS {peak:,.0f} MB over {base:,.0f} MB with the input loaded: "
          f"{peak / base:4.2f}× (target ≤ 1.2×; +{peak - base:,.0f} MB); the floor's "
          f"{med('floor', 'peak_mb'):,.0f} MB")  # fmt: skip


if __name__ == "__main__":
    main()
