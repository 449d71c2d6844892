"""Sums, means and quantiles on adult (issue #38): ektelo's joint answers
against the peers' one-query-at-a-time Laplace answers, and the coverage of
ektelo's 95 % intervals. Prints every figure; asserts nothing.

(a) The workload of every group sum and count of the sex × race breakdown of
    hours-per-week, with all its sub-breakdowns (each sex, each race, all:
    18 groups × {sum, count} = 36 queries), answered jointly by
    `Session.aggregates(..., totals=True)` (the planner's choice: HDMM with a
    row-space value factor) vs the peers' way, at the same total ε:
      - "per query": each of the 36 queries with ε/36 and its own Laplace noise
        (sum: sensitivity max value = 98; count: 1);
      - "per groupby": each of the 4 groupings × 2 aggregates with ε/8, the
        groups of one grouping disjoint (parallel composition) — the more
        favourable reading of the peers (Tumult's groupby + sum/count).
    RMSE over the queries and draws, of sums and counts separately, and ratios.
(b) Mean hours-per-week by sex at ε = 0.1 and 1: `Session.mean` vs the peers'
    estimators, written here (no opendp dependency):
      - "sum/count": sum and count each with ε/2, Laplace, their ratio
        (sensitivities 98 and 1);
      - "clamped mean" (Tumult's `average`, OpenDP's sum/count mean): the
        centred sum Σ(v − mid) with sensitivity (hi − lo)/2 at ε/2 and the count
        at ε/2, mean = mid + S_c/C;
    and the single sum by sex (ektelo vs Laplace at sensitivity 98).
(c) Coverage of the 95 % intervals: means (by sex; by sex × race with totals,
    where small groups make the ratio hard) and quantiles (age at 0.5 and
    0.9 by sex), ε = 0.1 and 1, over --draws independent noise draws each
    (one research-mode session per setting, each question a fresh draw).

    python benchmarks/bench_aggregates.py [--draws 200] [--quick]
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
DOMAIN = {"sex": 2, "race": 5, "hours-per-week": 99, "age": 85}
V = "hours-per-week"


def _load() -> pd.DataFrame:
    return pd.read_csv(DATA, usecols=list(DOMAIN))


def _session(df: pd.DataFrame, seed: int) -> Session:
    return Session(df, DOMAIN, epsilon=1e9, seed=seed, progress=False)


def _truth_breakdown(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Sums and counts in the order of `aggregates(V, by=[sex, race], totals=True)`."""
    sums, counts = [], []
    for sex in [0, 1, None]:
        for race in [0, 1, 2, 3, 4, None]:
            mask = np.ones(len(df), dtype=bool)
            if sex is not None:
                mask &= df["sex"].to_numpy() == sex
            if race is not None:
                mask &= df["race"].to_numpy() == race
            sums.append(float(df.loc[mask, V].sum()))
            counts.append(float(mask.sum()))
    return np.array(sums), np.array(counts)


def part_a(df: pd.DataFrame, eps_list: list[float], draws: int) -> None:
    print("(a) every group sum and count of sex × race with sub-breakdowns (36 queries)")
    S, C = _truth_breakdown(df)
    hi = 98.0
    rng = np.random.default_rng(0)
    print(f"{'eps':>6} {'plan':>6} | {'RMSE sums':>10} {'counts':>8} | peers per query: "
          f"{'sums':>9} {'counts':>7} | per groupby: {'sums':>8} {'counts':>7} | "
          f"ratio sums q/g   counts q/g")
    for eps in eps_list:
        s = _session(df, seed=int(eps * 1000) + 1)
        es, ec = [], []
        plan = ""
        for _ in range(draws):
            f = s.aggregates(V, by=["sex", "race"], statistics=("sum", "count"), totals=True,
                             epsilon=eps)
            plan = f.attrs["plan"]
            es.append(f.loc[f["statistic"] == "sum", "answer"].to_numpy() - S)
            ec.append(f.loc[f["statistic"] == "count", "answer"].to_numpy() - C)
        r_s, r_c = math.sqrt(np.mean(np.square(es))), math.sqrt(np.mean(np.square(ec)))
        k = 2 * len(S)
        q_s = math.sqrt(np.mean(rng.laplace(0, hi * k / eps, (draws, len(S))) ** 2))
        q_c = math.sqrt(np.mean(rng.laplace(0, k / eps, (draws, len(S))) ** 2))
        g_s = math.sqrt(np.mean(rng.laplace(0, hi * 8 / eps, (draws, len(S))) ** 2))
        g_c = math.sqrt(np.mean(rng.laplace(0, 8 / eps, (draws, len(S))) ** 2))
        print(f"{eps:6g} {plan:>6} | {r_s:10.1f} {r_c:8.2f} | {'':>16}{q_s:9.1f} {q_c:7.2f} | "
              f"{'':>13}{g_s:8.1f} {g_c:7.2f} | {q_s / r_s:5.1f}×/{g_s / r_s:4.1f}×   "
              f"{q_c / r_c:5.2f}×/{g_c / r_c:4.2f}×")
    print("  (ratio = peers' RMSE / ektelo's: above 1, ektelo is more accurate)")


def part_b(df: pd.DataFrame, eps_list: list[float], draws: int) -> None:
    print("\n(b) mean hours-per-week by sex (one query per sex), RMSE over draws")
    true_mean = df.groupby("sex")[V].mean().to_numpy()
    true_sum = df.groupby("sex")[V].sum().to_numpy(float)
    n = df.groupby("sex")[V].size().to_numpy(float)
    lo, hi = 0.0, 98.0
    mid = (lo + hi) / 2
    rng = np.random.default_rng(1)
    print(f"{'eps':>6} | ektelo mean  sum/count  clamped-mean | ratio s/c  clamped | "
          f"ektelo sum  Laplace sum  ratio")
    for eps in eps_list:
        s = _session(df, seed=int(eps * 1000) + 2)
        em, esum = [], []
        for _ in range(draws):
            f = s.mean(V, by="sex", epsilon=eps)
            em.append(f["answer"].to_numpy() - true_mean)
            g = s.sum(V, by="sex", epsilon=eps)
            esum.append(g["answer"].to_numpy() - true_sum)
        r_e = math.sqrt(np.mean(np.square(em)))
        r_es = math.sqrt(np.mean(np.square(esum)))
        shape = (draws * 50, 2)
        sc = (np.clip((true_sum + rng.laplace(0, 2 * hi / eps, shape))
                      / np.maximum(n + rng.laplace(0, 2 / eps, shape), 1), lo, hi))
        r_sc = math.sqrt(np.mean((sc - true_mean) ** 2))
        centred = true_sum - mid * n
        cm = np.clip(mid + (centred + rng.laplace(0, 2 * (hi - lo) / 2 / eps, shape))
                     / np.maximum(n + rng.laplace(0, 2 / eps, shape), 1), lo, hi)
        r_cm = math.sqrt(np.mean((cm - true_mean) ** 2))
        r_ls = math.sqrt(np.mean(rng.laplace(0, hi / eps, shape) ** 2))
        print(f"{eps:6g} | {r_e:11.5f} {r_sc:10.5f} {r_cm:13.5f} | {r_sc / r_e:9.2f} "
              f"{r_cm / r_e:8.2f} | {r_es:10.1f} {r_ls:12.1f} {r_ls / r_es:6.2f}")
    print(f"  (ektelo: {draws} draws; peers: {draws * 50} draws)")


def _cov_line(label: str, hits: np.ndarray) -> str:
    p = float(hits.mean())
    se = math.sqrt(p * (1 - p) / hits.size)
    return f"  {label:<48} {100 * p:6.2f} % ± {100 * se:4.2f}  ({hits.size} intervals)"


def part_c(df: pd.DataFrame, eps_list: list[float], draws: int) -> None:
    print(f"\n(c) coverage of the 95 % intervals over {draws} draws per setting")
    true_mean = df.groupby("sex")[V].mean().to_numpy()
    cells = []
    for sex in [0, 1, None]:
        for race in [0, 1, 2, 3, 4, None]:
            m = np.ones(len(df), dtype=bool)
            if sex is not None:
                m &= df["sex"].to_numpy() == sex
            if race is not None:
                m &= df["race"].to_numpy() == race
            cells.append(df.loc[m, V].mean())
    cell_means = np.array(cells)
    qs = (0.5, 0.9)
    true_q = {(q, sex): np.quantile(df.loc[df["sex"] == sex, "age"] if sex is not None
                                    else df["age"], q, method="inverted_cdf")
              for q in qs for sex in (0, 1, None)}
    true_q2 = {}
    for sex in (0, 1, None):
        for race in (0, 1, 2, 3, 4, None):
            m = np.ones(len(df), dtype=bool)
            if sex is not None:
                m &= df["sex"].to_numpy() == sex
            if race is not None:
                m &= df["race"].to_numpy() == race
            for q in qs:
                true_q2[(q, sex, race)] = np.quantile(df.loc[m, "age"], q, method="inverted_cdf")
    for eps in eps_list:
        s = _session(df, seed=int(eps * 1000) + 3)
        h1, h2, h3, h4 = [], [], [], []
        width1, width3, width4 = [], [], []
        for _ in range(draws):
            f = s.mean(V, by="sex", epsilon=eps)
            h1.append((f["ci_low"] <= true_mean) & (true_mean <= f["ci_high"]))
            width1.append((f["ci_high"] - f["ci_low"]).to_numpy())
            g = s.mean(V, by=["sex", "race"], totals=True, epsilon=eps)
            h2.append((g["ci_low"].to_numpy() <= cell_means) & (cell_means <= g["ci_high"]))
            r = s.quantile("age", qs, by="sex", epsilon=eps)
            truth = np.array([true_q[(q, None if pd.isna(x) else int(x))]
                              for q, x in zip(r["quantile"], r["sex"], strict=True)])
            h3.append((r["ci_low"].to_numpy() <= truth) & (truth <= r["ci_high"].to_numpy()))
            width3.append((r["ci_high"] - r["ci_low"]).to_numpy())
            r = s.quantile("age", qs, by=["sex", "race"], epsilon=eps)
            truth = np.array([true_q2[(q, None if pd.isna(a) else int(a),
                                       None if pd.isna(b) else int(b))]
                              for q, a, b in zip(r["quantile"], r["sex"], r["race"],
                                                 strict=True)])
            h4.append((r["ci_low"].to_numpy() <= truth) & (truth <= r["ci_high"].to_numpy()))
            width4.append((r["ci_high"] - r["ci_low"]).to_numpy())
        print(f" ε = {eps:g}")
        print(_cov_line("mean hours by sex (Fieller)", np.concatenate(h1)) +
              f"  median width {np.median(width1):.3g}")
        print(_cov_line("mean hours by sex × race with totals", np.concatenate(h2)))
        print(_cov_line("quantiles of age at 0.5, 0.9 by sex (CDF band)", np.concatenate(h3)) +
              f"  mean width {np.mean(width3):.3g} years")
        print(_cov_line("quantiles of age by sex × race (small groups)", np.concatenate(h4)) +
              f"  mean width {np.mean(width4):.3g} years")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="20 draws, ε = 0.1 and 1 only")
    parser.add_argument("--parts", default="abc")
    args = parser.parse_args()
    draws = 20 if args.quick else args.draws
    df = _load()
    start = time.perf_counter()
    if "a" in args.parts:
        part_a(df, [0.1, 1.0] if args.quick else [0.1, 0.5, 1.0, 4.0], max(draws // 4, 10))
    if "b" in args.parts:
        part_b(df, [0.1, 1.0], draws)
    if "c" in args.parts:
        part_c(df, [0.1, 1.0], draws)
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
