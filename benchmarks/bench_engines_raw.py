"""Engines against their own raw queries (issue #42): ektelo / raw, one run.

Run:  PYTHONPATH=. python benchmarks/bench_engines_raw.py [--rows 2e6] [--path /tmp/...]
      [--threads 2] [--memory-limit 1GB] [--repeats 3] [--no-spark]

A synthetic table (written by DuckDB from hashes of the row number, not data
of the repo) of `--rows` rows as Parquet under /tmp (row groups of 10^6
rows): `a` (INTEGER 0..15), `b` (INTEGER 0..99), `c` (INTEGER 0..999), `s`
(8 string labels), `x` (DOUBLE in [0, 100), 10 bins). The domain holds all
five; the question is the histogram over (a, b), 1 600 cells.

DuckDB (`--threads`, `--memory-limit`), in this process, CPU time of the
process (DuckDB's threads included) and wall time, best of `--repeats`
interleaved rounds:
  * raw:       `SELECT a, b, count(*) FROM read_parquet(?) GROUP BY a, b` on a
               connection with the same settings;
  * histogram: `table.select(["a", "b"]).vectorize()` through the kernel and
               one noisy total of it — the charged request at which the
               lazy vectorize counts (issue #36) — on a table protected before
               the round;
  * protect:   `ektelo.protect(path, domain, engine=DuckDBEngine(...))`: the
               domain check (min/max/NULL counts from the Parquet statistics
               for a, b, c, x; a scan for the labels of s);
  * end to end: a fresh engine, protect and the histogram, against a script
               that opens a connection and runs the raw query; again with a
               domain of the integer columns a, b, c only (no scan at all).
Spark (local[2], 4 shuffle partitions; skipped with --no-spark): the same
file read once as a DataFrame; raw `df.groupBy("a", "b").count().collect()`
against ektelo's histogram of that DataFrame, and protect + histogram; CPU
time of the JVM (from /proc) and wall time, after one warm-up round.
Peak RSS (VmHWM) of this process is printed after the DuckDB rounds, next
to the memory limit. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._child import local_spark, peak_rss_mb

DOMAIN = {
    "a": 16,
    "b": 100,
    "c": 1000,
    "s": {"values": ["p", "q", "r", "s", "t", "u", "v", "w"]},
    "x": {"bins": [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]},
}
RAW_SQL = "SELECT a, b, count(*) FROM read_parquet(?) GROUP BY a, b"


def generate(path: Path, rows: int, threads: int) -> None:
    import duckdb

    con = duckdb.connect(config={"threads": threads, "preserve_insertion_order": False})
    con.execute("SET enable_progress_bar = false")
    con.execute(
        f"""
        COPY (
          SELECT CAST(hash(i, 1) % 16 AS INTEGER) AS a,
                 CAST(hash(i, 2) % 100 AS INTEGER) AS b,
                 CAST(hash(i, 3) % 1000 AS INTEGER) AS c,
                 ['p', 'q', 'r', 's', 't', 'u', 'v', 'w'][CAST(hash(i, 4) % 8 AS INTEGER) + 1] AS s,
                 CAST(hash(i, 5) % 100000 AS DOUBLE) / 1000 AS x
          FROM range({int(rows)}) t(i)
        ) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 1000000)
        """
    )  # the row count and the path are this script's own values


def _histogram(table: Any) -> Any:
    """The histogram over (a, b), and one noisy total of it: vectorize is free
    and lazy (issue #36), so the counts are computed at that charged request."""
    from ektelo.matrix import Total

    x = table.select(["a", "b"]).vectorize()
    x.laplace(Total(x.size), eps=0.01)
    return x


class Best:
    """The least CPU and wall time of each measured path."""

    def __init__(self, cpu: Callable[[], float]):
        self.cpu = cpu
        self.times: dict[str, tuple[float, float]] = {}

    def run(self, name: str, work: Callable[[], Any]) -> Any:
        c0, w0 = self.cpu(), time.perf_counter()
        out = work()
        c, w = self.cpu() - c0, time.perf_counter() - w0
        old = self.times.get(name, (np.inf, np.inf))
        self.times[name] = (min(old[0], c), min(old[1], w))
        return out

    def ratio(self, top: str, bottom: str, target: str) -> str:
        (ct, wt), (cb, wb) = self.times[top], self.times[bottom]
        return (f"{top} / {bottom}: CPU {ct:.3f} s / {cb:.3f} s = {ct / cb:.2f}x, "
                f"wall {wt:.3f} s / {wb:.3f} s = {wt / wb:.2f}x  (target {target})")  # fmt: skip


def bench_duckdb(path: str, args: argparse.Namespace) -> None:
    import duckdb

    import ektelo
    from ektelo import Domain
    from ektelo.engines import DuckDBEngine

    domain = Domain.from_dict(DOMAIN)
    integers = Domain.from_dict({k: DOMAIN[k] for k in ("a", "b", "c")})
    config = {"threads": args.threads, "memory_limit": args.memory_limit,
              "preserve_insertion_order": False}  # fmt: skip
    engine_args = {"threads": args.threads, "memory_limit": args.memory_limit}
    con = duckdb.connect(config=config)
    best = Best(time.process_time)
    raw_counts = histogram = None
    for _ in range(args.repeats):
        rows = best.run("raw", lambda: con.execute(RAW_SQL, [path]).fetchall())
        raw_counts = np.zeros(16 * 100)
        for a, b, n in rows:
            raw_counts[a * 100 + b] = n

        def protect() -> Any:
            return ektelo.protect(path, domain, epsilon=1.0, engine=DuckDBEngine(**engine_args))

        table = best.run("protect", protect)
        histogram = best.run("histogram", partial(_histogram, table))

        def script() -> Any:
            fresh = duckdb.connect(config=config)
            return fresh.execute(RAW_SQL, [path]).fetchall()

        def end_to_end() -> Any:
            engine = DuckDBEngine(**engine_args)
            t = ektelo.protect(path, domain, epsilon=1.0, engine=engine)
            return _histogram(t)

        def end_to_end_integers() -> Any:  # every attribute cleared by the statistics
            engine = DuckDBEngine(**engine_args)
            t = ektelo.protect(path, integers, epsilon=1.0, engine=engine)
            return _histogram(t)

        best.run("raw script", script)
        best.run("protect + histogram", end_to_end)
        best.run("same, integer domain", end_to_end_integers)
    print("DuckDB")
    print("  " + best.ratio("histogram", "raw", "<= 1.3x"))
    print("  " + best.ratio("protect + histogram", "raw script", "end to end"))
    print("  " + best.ratio("same, integer domain", "raw script", "end to end, no scan"))
    print("  " + best.ratio("protect", "raw", "the domain check"))
    print(f"  peak RSS of this process {peak_rss_mb():,.0f} MB; DuckDB memory_limit "
          f"{args.memory_limit}")  # fmt: skip
    _same_total(histogram, raw_counts)


def _same_total(histogram: Any, raw: Any) -> None:
    """The paths count the same rows: a noisy total (ε = 1) of ektelo's vector
    against the raw query's exact total (the vector stays in the kernel)."""
    from ektelo.matrix import Total

    noisy = float(histogram.laplace(Total(histogram.size), eps=0.5).answers[0])
    print(f"  rows: raw {raw.sum():,.0f}, ektelo (noisy, eps=0.5) {noisy:,.1f}")


def _jvm_cpu(pid: int) -> Callable[[], float]:
    tick = os.sysconf("SC_CLK_TCK")

    def cpu() -> float:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick  # utime + stime

    return cpu


def bench_spark(path: str, args: argparse.Namespace) -> None:
    import ektelo
    from ektelo import Domain
    from ektelo.engines import SparkEngine

    spark = local_spark()
    jvm: Any = spark._jvm
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    domain = Domain.from_dict(DOMAIN)
    frame = spark.read.parquet(path)
    engine = SparkEngine(session=spark)
    best = Best(_jvm_cpu(pid))
    raw_counts = histogram = None
    for round_ in range(args.repeats + 1):  # round 0 warms the JVM up, then starts afresh
        rows = best.run("raw", lambda: frame.groupBy("a", "b").count().collect())
        raw_counts = np.zeros(16 * 100)
        for r in rows:
            raw_counts[r["a"] * 100 + r["b"]] = r["count"]

        def protect() -> Any:
            return ektelo.protect(frame, domain, epsilon=1.0, engine=engine)

        table = best.run("protect", protect)
        histogram = best.run("histogram", partial(_histogram, table))
        if round_ == 0:
            best.times.clear()
    print("Spark local[2]")
    print("  " + best.ratio("histogram", "raw", "<= 1.5x"))
    print("  " + best.ratio("protect", "raw", "the domain check: one scan of every column"))
    _same_total(histogram, raw_counts)
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="2e6")
    parser.add_argument("--path", default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--memory-limit", default="1GB")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-spark", action="store_true")
    args = parser.parse_args()
    rows = int(float(args.rows))
    path = Path(args.path or f"/tmp/ektelo_bench_raw_{rows}.parquet")
    if not path.exists():
        t0 = time.perf_counter()
        generate(path, rows, args.threads)
        print(f"generated {rows:,} rows → {path} in {time.perf_counter() - t0:.1f} s")
    print(f"{path} ({path.stat().st_size / 2**20:,.0f} MB, {rows:,} rows); "
          f"load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")  # fmt: skip
    bench_duckdb(str(path), args)
    if not args.no_spark:
        bench_spark(str(path), args)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    main()
