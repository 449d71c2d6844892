"""Marginal selection and PrivBayes on a DuckDB table (issue #28): codes
pulled into memory vs the engine's GROUP BYs.

Run:  PYTHONPATH=. python benchmarks/bench_engine_selection.py [--rows 1e7]
      [--memory-limit 1GB] [--threads 2] [--repeats 2] [--before-src DIR]

The table is `bench_engines.generate`'s synthetic Parquet file (`--rows` rows ×
6 attributes under /tmp; 16·2·8·10·8·4 cells). Each run is a fresh process
(wall time; peak RSS from /proc/self/status VmHWM, so each pays its imports):

  * select_marginal: `protect(path, engine=DuckDBEngine(memory_limit=…,
    threads=…))` → `where(hours != 3)` → `select_marginal` over the 15
    attribute pairs (MST's candidates, McKenna et al. 2021, Algorithm 1) with
    zero estimates, research seed — through the kernel and its handles;
  * privbayes: the same table → `privbayes_select(eps=1, degree=2)`
    (Zhang et al. 2017; its scores need the C(6, 3) = 20 three-way marginals).

The same children run against the current source (`src/`, the engine's
GROUP BYs) and, with `--before-src DIR`, against an earlier checkout's
`src/` (e.g. `git archive 608a6d7 src | tar -x -C /tmp/before`: the kernel
that pulled every row's codes into memory before scoring). Both must select
the same candidates (printed). Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._child import peak_rss_mb, run_child
from benchmarks.bench_engines import DOMAIN, generate

HERE = Path(__file__).resolve().parents[1]


def child(which: str, path: str, limit: str, threads: int) -> dict[str, Any]:
    import numpy as np

    import ektelo
    from ektelo import Domain, col
    from ektelo.engines import DuckDBEngine

    domain = Domain.from_dict(DOMAIN)
    t0 = time.perf_counter()
    engine = DuckDBEngine(memory_limit=limit, threads=threads)
    table = ektelo.protect(path, domain, epsilon=10.0, seed=1, engine=engine, on_invalid="drop")
    t1 = time.perf_counter()
    if which == "select_marginal":
        pairs = list(itertools.combinations(domain.names, 2))
        ests = [np.zeros(int(np.prod(domain.project(list(p)).shape))) for p in pairs]
        picked: Any = table.where(col("hours") != 3).select_marginal(pairs, ests, eps=1.0)
    else:
        picked = table.privbayes_select(eps=1.0, degree=2)
    t2 = time.perf_counter()
    return {"protect_s": round(t1 - t0, 2), "select_s": round(t2 - t1, 2),
            "picked": repr(picked), "peak_rss_mb": round(peak_rss_mb())}  # fmt: skip


def measure(args: argparse.Namespace, which: str, src: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{HERE}"}
    cmd = [sys.executable, __file__, "--child", which, "--path", args.path,
           "--memory-limit", args.memory_limit, "--threads", str(args.threads)]  # fmt: skip
    return run_child(cmd, env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="1e7")
    parser.add_argument("--path", default=None)
    parser.add_argument("--memory-limit", default="1GB")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--before-src", default=None, help="an earlier checkout's src/")
    parser.add_argument("--only", choices=("select_marginal", "privbayes"), default=None)
    parser.add_argument("--child", default=None)
    args = parser.parse_args()
    rows = int(float(args.rows))
    if args.path is None:
        args.path = f"/tmp/ektelo_bench_{rows}.parquet"
    if args.child:
        print(json.dumps(child(args.child, args.path, args.memory_limit, args.threads)))
        return
    path = Path(args.path)
    if not path.exists():
        generate(path, rows, args.threads)
    print(f"file {path} ({path.stat().st_size / 2**20:,.0f} MB, {rows:,} rows); DuckDB "
          f"memory_limit={args.memory_limit}, threads={args.threads}")  # fmt: skip
    sources = {"group_by": HERE / "src"}
    if args.before_src:
        sources["codes"] = Path(args.before_src).resolve()
    for which in ("select_marginal", "privbayes"):
        if args.only not in (None, which):
            continue
        best: dict[str, dict[str, Any]] = {}
        for _ in range(args.repeats):  # interleaved: the shared machine's load hits each alike
            for name, src in sources.items():
                r = measure(args, which, src)
                print(f"  {which} {name}: {json.dumps(r)}", flush=True)
                if "error" in r:
                    continue
                if name not in best or r["select_s"] < best[name]["select_s"]:
                    best[name] = r
        for name, r in best.items():
            print(f"{which:16s} {name:9s} select {r['select_s']:.2f} s, protect "
                  f"{r['protect_s']:.2f} s, peak RSS {r['peak_rss_mb']:,} MB, picked {r['picked']}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    main()
