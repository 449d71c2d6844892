"""SQL on adult (issue #39): a typical report of 20 statements (counts and
sums of hours-per-week by 1–3 attributes, binned ages, some ranges)
answered JOINTLY by `Session.sql` (one workload, one plan, one charge of ε)
against one statement at a time with ε/20 each (`Session.sql` per
statement: each gets the planner's own choice for it). Prints every figure;
asserts nothing.

For each ε: the total squared error over every output cell, of counts and of
sums separately (sums are in hours, so they dominate a joint total), over
--draws independent noise draws (research-mode seeds), and the ratios
one-at-a-time / joint (above 1: joint is more accurate). Also the expected
totals from EXPLAIN where the plans have a closed form (nothing spent).

    python benchmarks/bench_sql.py [--draws 5] [--eps 0.1,1,10]
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ektelo.session import Session

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult" / "adult.csv"
INC = '"income>50K"'
H = '"hours-per-week"'
DEC = "FLOOR(age / 10) * 10"
DOMAIN = {"sex": 2, "race": 5, "income>50K": 2, "age": 85, "hours-per-week": 99}
REPORT = [
    "SELECT sex, COUNT(*) FROM adult GROUP BY sex",
    "SELECT race, COUNT(*) FROM adult GROUP BY race",
    "SELECT sex, race, COUNT(*) FROM adult GROUP BY sex, race",
    f"SELECT {INC}, COUNT(*) FROM adult GROUP BY {INC}",
    f"SELECT sex, {INC}, COUNT(*) FROM adult GROUP BY sex, {INC}",
    f"SELECT race, {INC}, COUNT(*) FROM adult GROUP BY race, {INC}",
    f"SELECT sex, race, {INC}, COUNT(*) FROM adult GROUP BY sex, race, {INC}",
    f"SELECT {DEC} AS decade, COUNT(*) FROM adult GROUP BY decade",
    f"SELECT {DEC} AS decade, sex, COUNT(*) FROM adult GROUP BY decade, sex",
    f"SELECT {DEC} AS decade, {INC}, COUNT(*) FROM adult GROUP BY decade, {INC}",
    f"SELECT sex, SUM({H}) FROM adult GROUP BY sex",
    f"SELECT race, SUM({H}) FROM adult GROUP BY race",
    f"SELECT sex, {INC}, SUM({H}) FROM adult GROUP BY sex, {INC}",
    f"SELECT {DEC} AS decade, SUM({H}) FROM adult GROUP BY decade",
    "SELECT COUNT(*) FROM adult WHERE age BETWEEN 8 AND 17",
    "SELECT sex, COUNT(*) FROM adult WHERE age BETWEEN 18 AND 27 GROUP BY sex",
    f"SELECT {INC}, COUNT(*) FROM adult WHERE {H} >= 40 GROUP BY {INC}",
    f"SELECT sex, COUNT(*) FROM adult WHERE {H} BETWEEN 20 AND 39 GROUP BY sex",
    f"SELECT SUM({H}) FROM adult WHERE age < 13",
    f"SELECT race, SUM({H}) FROM adult WHERE age >= 33 GROUP BY race",
]


def _errors(frames: list[pd.DataFrame], truth: list[pd.DataFrame]) -> tuple[float, float]:
    """Total squared error of counts and of sums over every output cell."""
    counts = sums = 0.0
    for f, t in zip(frames, truth, strict=True):
        sq = (f["answer"].to_numpy() - t["answer"].to_numpy()) ** 2
        is_sum = f["select"].astype(str).str.startswith("SUM").to_numpy()
        sums += float(sq[is_sum].sum())
        counts += float(sq[~is_sum].sum())
    return counts, sums


def _expected(frames: list[pd.DataFrame]) -> tuple[float, float]:
    counts = sums = 0.0
    for f in frames:
        v = f["expected_std_error"].to_numpy(dtype=float) ** 2
        is_sum = f["select"].astype(str).str.startswith("SUM").to_numpy()
        sums += float(v[is_sum].sum())
        counts += float(v[~is_sum].sum())
    return counts, sums


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--eps", default="0.1,1,10")
    args = parser.parse_args()
    eps_list = [float(e) for e in args.eps.split(",")]
    df = pd.read_csv(DATA, usecols=list(DOMAIN))
    text = "; ".join(REPORT)
    exact = Session(df, DOMAIN, epsilon=1e12, seed=0, progress=False)
    # the true answers: the same report at an enormous ε (noise ~1e-8), rounded
    truth = [f.assign(answer=np.round(f["answer"], 3)) for f in exact.sql(text, epsilon=1e11)]
    cells = sum(len(t) for t in truth)
    k = len(REPORT)
    print(f"adult: {len(df):,} rows; a report of {k} statements, {cells} output cells "
          f"(counts and sums of hours-per-week); {args.draws} draws per ε")
    print(f"{'eps':>6} {'joint plan':>10} | {'joint SSE counts':>16} {'sums':>12} | "
          f"{'1-at-a-time counts':>18} {'sums':>12} | ratio counts  sums   all | "
          f"expected ratio counts sums  all | s joint  s alone")
    for eps in eps_list:
        s = Session(df, DOMAIN, epsilon=1e9, seed=int(eps * 1000) + 7, progress=False)
        plan = s.sql(text, epsilon=eps, explain=True)[0].attrs["plan"]
        ej = _expected(s.sql(text, epsilon=eps, explain=True))
        alone_explain = [s.sql(t, epsilon=eps / k, explain=True)[0] for t in REPORT]
        ea = _expected(alone_explain)
        joint_c = joint_s = alone_c = alone_s = 0.0
        t_joint = t_alone = 0.0
        for _ in range(args.draws):
            t0 = time.perf_counter()
            c, sm = _errors(s.sql(text, epsilon=eps), truth)
            t1 = time.perf_counter()
            joint_c, joint_s = joint_c + c, joint_s + sm
            frames = [s.sql(t, epsilon=eps / k)[0] for t in REPORT]
            t2 = time.perf_counter()
            c, sm = _errors(frames, truth)
            alone_c, alone_s = alone_c + c, alone_s + sm
            t_joint += t1 - t0
            t_alone += t2 - t1
        d = args.draws
        rc, rs = alone_c / joint_c, alone_s / joint_s
        ra = (alone_c + alone_s) / (joint_c + joint_s)
        erc = ea[0] / ej[0] if math.isfinite(ea[0]) and ej[0] > 0 else math.nan
        ers = ea[1] / ej[1] if math.isfinite(ea[1]) and ej[1] > 0 else math.nan
        era = (ea[0] + ea[1]) / (ej[0] + ej[1])
        print(f"{eps:6g} {plan:>10} | {joint_c / d:16.4g} {joint_s / d:12.4g} | "
              f"{alone_c / d:18.4g} {alone_s / d:12.4g} | {rc:12.2f} {rs:5.2f} {ra:5.2f} | "
              f"{erc:20.2f} {ers:4.2f} {era:4.2f} | {t_joint / d:7.2f} {t_alone / d:8.2f}")
    print("  SSE: total squared error over the report's cells, mean over draws; ratio = "
          "one-at-a-time SSE / joint SSE (above 1: joint is more accurate); expected: from "
          "EXPLAIN (NaN where a plan has no closed form)")


if __name__ == "__main__":
    main()
