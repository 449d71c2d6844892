"""Benchmarks of the kernel's private operator algorithms (issue 5); prints tables.

    python benchmarks/bench_private_ops.py              # timings vs targets
    python benchmarks/bench_private_ops.py --accuracy   # + plan-level accuracy

Timings: median wall time of a few runs (research-mode RandomSource, seeded).
Accuracy: the partition operators inside minimal plans written in plain numpy
(the plan library has the real ones), on DPBench 1-D data, Prefix workload,
DPBench's scaled L2 error ‖Wx − Wx̂‖₂ / (|W|·‖x‖₁), next to the reference
errors of the original DPBench code (../shared/reference/dpbench_errors.csv):
* AHP-style: ahp_partition with 0.85ε, Laplace(1/(0.15ε)) on each group's
  total, uniform expansion (as AHP publishes its groups).
* DAWA-style: dawa_partition with 0.25ε, Laplace(1/(0.75ε)) on each group's
  total, uniform expansion.  The reference DAWA measures the groups with
  GreedyH and least squares instead, which helps on Prefix.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ektelo.engines import MemoryEngine
from ektelo.engines.rows import Rows
from ektelo.kernel.dawa import dawa_partition
from ektelo.kernel.mwem import worst_approx
from ektelo.kernel.noise import RandomSource
from ektelo.kernel.privbayes import engine_scores, greedy
from ektelo.matrix import RangeQueries
from ektelo.operators.ahp import ahp_partition

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
DPBENCH_1D = SHARED / "data" / "dpbench" / "1d"
REFERENCE = SHARED / "reference" / "dpbench_errors.csv"


def _median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _row(name: str, seconds: float, target: float | None) -> str:
    verdict = "" if target is None else ("ok" if seconds < target else "OVER")
    tgt = "" if target is None else f"< {target:g} s"
    return f"{name:<52} {seconds:>9.3f} s  {tgt:>9}  {verdict}"


def timings() -> None:
    rng = np.random.default_rng(0)
    src = RandomSource(1)
    x4096 = rng.poisson(20, 4096) * (rng.random(4096) < 0.3)
    x1m = rng.poisson(20, 2**20) * (rng.random(2**20) < 0.3)
    lo, hi = np.sort(rng.integers(0, 4096, (2, 100_000)), axis=0)
    ranges = RangeQueries(4096, lo, hi)
    x_hat = np.full(4096, x4096.sum() / 4096)
    hepth = DPBENCH_1D / "HEPTH.n4096.npy"
    rows = [
        ("dawa_partition n=4096 (approximate, auto)",
         lambda: dawa_partition(x4096, 0.025, src), 5, 0.2),
        ("dawa_partition n=1024 (exact, auto)",
         lambda: dawa_partition(x4096[:1024], 0.025, src), 3, None),
        ("dawa_partition n=2^20 (approximate)",
         lambda: dawa_partition(x1m, 0.025, src), 1, 30.0),
        ("ahp_partition n=4096 (synthetic)",
         lambda: ahp_partition(x4096, 0.085, src), 5, 0.2),
        ("worst_approx 1e5 ranges, n=4096 (per round)",
         lambda: worst_approx(x4096, ranges, x_hat, 0.01, src, delta=1.0), 5, 0.1),
    ]  # fmt: skip
    if hepth.exists():
        hx = np.load(hepth)
        rows.insert(4, ("ahp_partition n=4096 (HEPTH, eps=0.085)",
                        lambda: ahp_partition(hx, 0.085, src), 5, 0.2))  # fmt: skip
        rows.insert(5, ("ahp_partition n=4096 (HEPTH, eps=0.85)",
                        lambda: ahp_partition(hx, 0.85, src), 5, 0.2))  # fmt: skip
    adult = SHARED / "data" / "adult"
    if (adult / "adult.csv").exists():
        import pandas as pd

        domain = json.loads((adult / "adult-domain.json").read_text())
        codes = pd.read_csv(adult / "adult.csv")[list(domain)].to_numpy()
        sizes = tuple(domain.values())

        def pb() -> object:  # the kernel's two steps: every score, then the choices
            scored = engine_scores(MemoryEngine(), Rows.all(codes), sizes, 2)
            return greedy(scored, len(sizes), 0.3, src, degree=2)

        rows.append(("privbayes_select adult 48842x14, degree 2", pb, 3, 10.0))
    print(f"{'operation':<52} {'median':>11}  {'target':>9}")
    for name, fn, repeats, target in rows:
        fn()  # warm up (imports, caches)
        print(_row(name, _median_time(fn, repeats), target), flush=True)


# ---------------------------------------------------------------- accuracy
def _prefix_error(x: np.ndarray, x_hat: np.ndarray) -> float:
    return float(np.linalg.norm(np.cumsum(x) - np.cumsum(x_hat)) / (x.size * x.sum()))


def _expand(groups: np.ndarray, totals: np.ndarray) -> np.ndarray:
    return (totals / np.bincount(groups))[groups]


def ahp_plan(x: np.ndarray, eps: float, src: RandomSource, rng: np.random.Generator) -> float:
    P = ahp_partition(x, 0.85 * eps, src)
    totals = P.reduce(x) + rng.laplace(0.0, 1.0 / (0.15 * eps), P.num_groups)
    return _prefix_error(x, _expand(P.groups, totals))


def dawa_plan(x: np.ndarray, eps: float, src: RandomSource, rng: np.random.Generator) -> float:
    P = dawa_partition(x, 0.25 * eps, src)
    totals = P.reduce(x) + rng.laplace(0.0, 1.0 / (0.75 * eps), P.num_groups)
    return _prefix_error(x, _expand(P.groups, totals))


def _reference() -> dict[tuple[str, str, float, int], float]:
    """(algorithm, file, eps, scale) -> DPBench's mean error."""
    out = {}
    if REFERENCE.exists():
        with REFERENCE.open() as f:
            for r in csv.DictReader(f):
                if r["dims"] == "1" and r["algorithm"] in ("AHP", "DAWA"):
                    key = (r["algorithm"], Path(r["data_file"]).name, float(r["eps"]))
                    out[(*key, int(r["scale"]))] = float(r["mean_error"])
    return out


def accuracy(datasets: list[str], trials: int) -> None:
    ref = _reference()
    print(f"\nscaled L2 error on Prefix, mean of {trials} trials (ref: DPBench's code, 5 trials)")
    print(f"{'dataset':<24}{'eps':>5}  {'AHP':>9} {'ref AHP':>9}  {'DAWA':>9} {'ref DAWA':>9}")
    logs: dict[str, list[float]] = {"ahp": [], "dawa": []}
    for name in datasets:
        x = np.load(DPBENCH_1D / name).astype(np.int64)
        scale = int(x.sum())
        for eps in (0.1, 1.0):
            ahp_errs, dawa_errs = [], []
            for t in range(trials):
                rng = np.random.default_rng(1000 + t)
                ahp_errs.append(ahp_plan(x, eps, RandomSource(t), rng))
                dawa_errs.append(dawa_plan(x, eps, RandomSource(t), rng))
            r_ahp = ref.get(("AHP", name, eps, scale), float("nan"))
            r_dawa = ref.get(("DAWA", name, eps, scale), float("nan"))
            logs["ahp"].append(np.log(np.mean(ahp_errs) / r_ahp))
            logs["dawa"].append(np.log(np.mean(dawa_errs) / r_dawa))
            print(
                f"{name[:23]:<24}{eps:>5}  {np.mean(ahp_errs):9.2e} {r_ahp:9.2e}  "
                f"{np.mean(dawa_errs):9.2e} {r_dawa:9.2e}",
                flush=True,
            )
    ratios = {k: float(np.exp(np.nanmean(v))) for k, v in logs.items()}
    print(f"geometric mean ratio ours/ref: AHP {ratios['ahp']:.2f}, DAWA {ratios['dawa']:.2f}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accuracy", action="store_true", help="also run the accuracy table")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument(
        "--datasets",
        nargs="*",
        default=["ADULTFRANK.n4096.npy", "HEPTH.n4096.npy", "NETTRACE.n4096.npy"],
    )
    args = parser.parse_args(argv)
    timings()
    if args.accuracy:
        if not DPBENCH_1D.exists():
            sys.exit("DPBench data not found under ../shared/data")
        accuracy(args.datasets, args.trials)


if __name__ == "__main__":
    main(sys.argv[1:])
