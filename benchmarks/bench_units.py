"""Privacy units (issue #37): error against the contribution bound k.

A generated event table (~10⁶ rows, 10⁵ persons, skewed rows per person:
log-normal, median 5, a tail of persons with a hundred rows and more) is protected per person with
max_rows_per_unit = k. For each k it prints, for a histogram over `site` (50
cells) and the CDF over `hour` (168 cells) at a per-person ε:

* bias: the RMS over cells of (true count − bounded count), the rows the bound
  dropped (measured exactly with the engine, no noise);
* noise: the RMS noise of the identity plan, √2·k/ε per cell for the
  histogram (its CDF's prefix sums of the same noise);
* total: √(bias² + noise²), and one measured noisy run's RMS error.

    PYTHONPATH=. python benchmarks/bench_units.py [--rows 1000000] [--eps 1]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd

import ektelo
from ektelo.domain import Domain
from ektelo.engines import open_table
from ektelo.kernel import PrivacyUnit
from ektelo.matrix import Identity
from ektelo.units import SuggestMaxRows


def events(rows: int, persons: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    per = np.ceil(np.exp(rng.normal(1.6, 1.0, persons))).astype(np.int64)  # log-normal, skewed
    person = rng.permutation(np.repeat(np.arange(persons), per))[:rows]
    rows = person.size
    site = (person * 7 + rng.integers(0, 3, rows)) % 50  # persons favour sites
    hour = np.clip(rng.normal(80 + (person % 5) * 10, 30, rows), 0, 167).astype(int)
    return pd.DataFrame({"person": person, "site": site, "hour": hour})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--persons", type=int, default=100_000)
    parser.add_argument("--eps", type=float, default=1.0)
    args = parser.parse_args()
    frame = events(args.rows, args.persons)
    domain = Domain.from_json({"site": 50, "hour": 168})
    per = frame.groupby("person").size()
    print(f"{len(frame):,} rows, {per.size:,} persons; rows per person: median "
          f"{per.median():.0f}, 90% {per.quantile(0.9):.0f}, 99% {per.quantile(0.99):.0f}, "
          f"max {per.max()}; per-person ε = {args.eps}")
    truth_site = np.bincount(frame["site"], minlength=50).astype(float)
    truth_cdf = np.cumsum(np.bincount(frame["hour"], minlength=168)).astype(float)
    print(f"{'k':>5} {'kept':>7} | {'hist bias':>9} {'noise':>7} {'total':>7} {'run':>7} | "
          f"{'CDF bias':>9} {'noise':>8} {'total':>8} {'run':>8} | open s")
    totals: dict[int, float] = {}
    chosen = []
    for q in (0.9, 0.95, 0.99):  # the private choice (ektelo.units), its own ε = 0.05
        t = ektelo.protect(frame, domain, epsilon=1.0, seed=11, privacy_unit="person",
                           max_rows_per_unit=SuggestMaxRows(epsilon=0.05, quantile=q))  # fmt: skip
        chosen.append((q, int(t.ledger()[t.node].stability)))
    ks = sorted({1, 2, 4, 8, 16, 32, 64, 128, *(k for _, k in chosen)})
    for k in ks:
        start = time.perf_counter()
        engine, table = open_table(frame, domain, engine="memory",
                                   units=PrivacyUnit("person", k), key="bench")  # fmt: skip
        opened = time.perf_counter() - start
        bounded = engine.vectorize(table, [0, 1], (50, 168)).reshape(50, 168)
        b_site, b_cdf = bounded.sum(axis=1), np.cumsum(bounded.sum(axis=0))
        bias_h = math.sqrt(np.mean((truth_site - b_site) ** 2))
        bias_c = math.sqrt(np.mean((truth_cdf - b_cdf) ** 2))
        noise_h = math.sqrt(2) * k / args.eps
        noise_c = noise_h * math.sqrt(np.mean(np.arange(1, 169)))
        t = ektelo.protect(frame, domain, epsilon=2 * args.eps, seed=k,
                           privacy_unit="person", max_rows_per_unit=k)  # fmt: skip
        local = args.eps / k  # per-person ε at the k-stable bounded table
        y_site = t.select(["site"]).vectorize().laplace(Identity(50), eps=local).answers
        y_hour = t.select(["hour"]).vectorize().laplace(Identity(168), eps=local).answers
        run_h = math.sqrt(np.mean((truth_site - y_site) ** 2))
        run_c = math.sqrt(np.mean((truth_cdf - np.cumsum(y_hour)) ** 2))
        totals[k] = math.hypot(bias_h, noise_h)
        print(f"{k:>5} {engine.count(table) / len(frame):>7.1%} | {bias_h:>9.1f} "
              f"{noise_h:>7.1f} {math.hypot(bias_h, noise_h):>7.1f} {run_h:>7.1f} | "
              f"{bias_c:>9.1f} {noise_c:>8.1f} {math.hypot(bias_c, noise_c):>8.1f} "
              f"{run_c:>8.1f} | {opened:.1f}")
    best = min(totals, key=totals.__getitem__)
    print(f"best k in hindsight (histogram): {best}, RMS error {totals[best]:.1f}")
    for q, k in chosen:
        print(f"private choice at the {q:.0%} quantile (ε = 0.05): k = {k}, RMS error "
              f"{totals[k]:.1f} ({totals[k] / totals[best]:.2f}× the best)")


if __name__ == "__main__":
    main()
