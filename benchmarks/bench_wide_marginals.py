"""All 2-way marginals of a 9-column survey and of the adult table through
the session's front door (issue #25, "the 9-column survey case").

The survey is the "fair" affairs data bundled with statsmodels (Fair 1978;
6,366 rows × 9 columns). Its domain is built from public bounds: the coded
columns as integer ranges, the continuous ones in bins (affairs in 16 bins,
so the full domain has 17,418,240 cells — the vector the issue's first try
built in 265 s). `marginals:2:all` is answered by the session (the same
path as `ektelo run --workload marginals:2:all`) at ε = 1, δ = 10⁻⁹: the
auto rule (`ektelo.wide.choose`) takes MST's graphical model; the bench
runs the direct Gaussian measurements (`plan="marginals_direct"`) beside it
for the error comparison. Prints, per plan and seed: wall and CPU seconds,
peak traced memory (tracemalloc, NumPy included), and the error against the
true marginals — the mean over the 36 pairs of the total-variation distance
½‖p − q‖₁ between normalized marginals, and the mean absolute error per
cell in counts.

`--adult` also times `ektelo run --workload marginals:2:all` (in-process,
throwaway budget) on the shared adult table (../shared/data/adult).

`--adult3` times `ektelo run --workload marginals:3:all --epsilon 1 --delta
1e-9 --seed 0` on adult (AIM by the wide-marginals rule: 364 triples, 20.9
million answer rows) in-process, and says where the time goes: wall and CPU
seconds of each phase (building the question's rows, AIM's selections in the
kernel, its model fits, its size guard, reading the answers off the model,
writing the CSV), the engine's marginal counts asked and held by the
kernel's cache, and the peak RSS. Run it under `/usr/bin/time -v` for the
process's own figures (the CSV goes to a temporary directory).

    PYTHONPATH=. python benchmarks/bench_wide_marginals.py [--seeds 3] [--adult] [--adult3]

Needs statsmodels (the `dev` extra); skips with a message without it.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

ADULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult"

# Public bounds (the survey's codebook), not read from the data.
FAIR_DOMAIN = {
    "rate_marriage": {"range": [1, 5], "width": 1},
    "age": {"bins": [17, 20, 25, 30, 35, 40, 45]},
    "yrs_married": {"bins": [0, 1, 4, 7, 10, 15, 20, 25]},
    "children": {"bins": [0, 1, 2, 3, 4, 5, 6]},
    "religious": {"range": [1, 4], "width": 1},
    "educ": {"bins": [9, 12, 14, 16, 17, 18, 21]},
    "occupation": {"range": [1, 6], "width": 1},
    "occupation_husb": {"range": [1, 6], "width": 1},
    "affairs": {"bins": [0, 0.01, 0.5, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 40, 50, 60]},
}


def fair() -> pd.DataFrame | None:
    try:
        import statsmodels.api as sm
    except ImportError:
        return None
    frame = sm.datasets.fair.load_pandas().data
    for c in ("rate_marriage", "religious", "occupation", "occupation_husb"):
        frame[c] = frame[c].astype(int)
    return frame


def errors(frame: pd.DataFrame, codes: np.ndarray, sizes: list[int],
           names: list[str]) -> tuple[float, float]:
    """(mean TV over pairs, mean |error| per cell) of tidy marginal rows
    against the true marginals (cells in C order, as the rows list them)."""
    tv, abs_err = [], []
    for i, j in itertools.combinations(range(len(names)), 2):
        est = frame.loc[frame["marginal"] == f"{names[i]}×{names[j]}", "answer"].to_numpy()
        cells = sizes[i] * sizes[j]
        truth = np.bincount(codes[:, i] * sizes[j] + codes[:, j], minlength=cells)
        p = np.clip(est, 0, None)
        tv.append(0.5 * np.abs(p / max(p.sum(), 1e-12) - truth / truth.sum()).sum())
        abs_err.append(np.abs(est - truth).mean())
    return float(np.mean(tv)), float(np.mean(abs_err))


def run_fair(seeds: int) -> None:
    from ektelo.session import Session, load_domain

    data = fair()
    if data is None:
        print("SKIPPED: statsmodels is not installed (pip install -e '.[dev]'); the survey "
              "is its bundled 'fair' dataset")
        return
    domain = load_domain(FAIR_DOMAIN)
    names = list(domain.names)
    sizes = list(domain.shape)
    codes = domain.encode(data[names])
    print(f"fair: {len(data):,} rows × {len(names)} columns, full domain "
          f"{math.prod(domain.shape):,} cells; all {len(names) * (len(names) - 1) // 2} 2-way "
          "marginals at ε = 1, δ = 1e-9")
    print(f"{'plan':18s} {'seed':>4s} {'wall s':>7s} {'CPU s':>6s} {'peak MB':>8s} "
          f"{'mean TV':>8s} {'mean |err|/cell':>15s}")
    summary: dict[str, list[tuple[float, float, float, float]]] = {}
    for plan in ("auto", "marginals_direct"):
        for seed in range(seeds):
            tracemalloc.start()
            wall, cpu = time.perf_counter(), time.process_time()
            s = Session(data[names], domain, epsilon=1.0, delta=1e-9, seed=seed,
                        progress=False)
            frame = s.marginals(2, epsilon=1.0, plan=plan)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            tv, err = errors(frame, codes, sizes, names)
            name = frame.attrs["plan"]
            summary.setdefault(name, []).append((wall, cpu, tv, err))
            print(f"{name:18s} {seed:4d} {wall:7.2f} {cpu:6.2f} {peak:8.1f} {tv:8.4f} "
                  f"{err:15.2f}")
            if seed == 0 and plan == "auto":
                print(f"  why: {frame.attrs['why']}")
                print(f"  ci_method: {frame['ci_method'].iloc[0]}")
    for name, rows in summary.items():
        a = np.array(rows)
        se = a[:, 2].std(ddof=1) / math.sqrt(len(a)) if len(a) > 1 else 0.0
        print(f"mean {name:13s} wall {a[:, 0].mean():.2f} s, CPU {a[:, 1].mean():.2f} s, "
              f"TV {a[:, 2].mean():.4f} ± {se:.4f}, |err|/cell {a[:, 3].mean():.2f}")
    print("issue #25 target: seconds (the full-vector path took 265 s)")


def run_adult() -> None:
    from ektelo.cli import main

    if not (ADULT / "adult.csv").is_file():
        print(f"SKIPPED: the shared adult table is not at {ADULT}")
        return
    args = ["run", "--data", str(ADULT / "adult.csv"), "--domain",
            str(ADULT / "adult-domain.json"), "--workload", "marginals:2:all", "--epsilon", "1",
            "--delta", "1e-9", "--no-ledger", "--out", "/tmp/bench_wide_adult_pairs.csv"]
    wall, cpu = time.perf_counter(), time.process_time()
    code = main(args)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"adult: ektelo run --workload marginals:2:all (ε=1, δ=1e-9) exit {code}: "
          f"wall {wall:.1f} s, CPU {cpu:.1f} s")


def resident_mb() -> float:
    """This process's resident memory now (Linux /proc; 0 elsewhere)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * 4096 / 2**20


class Phases:
    """Wall and CPU seconds spent inside wrapped functions (calls counted),
    and the resident memory when each returned (the largest)."""

    def __init__(self) -> None:
        self.spent: dict[str, list[float]] = {}

    def wrap(self, owner: object, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def timed(*args: object, **kwargs: object) -> object:
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                row = self.spent.setdefault(label, [0.0, 0.0, 0, 0.0])
                row[0] += time.perf_counter() - wall
                row[1] += time.process_time() - cpu
                row[2] += 1
                row[3] = max(row[3], resident_mb())

        setattr(owner, name, timed)


def run_adult3() -> None:
    import importlib
    import resource
    import tempfile

    from ektelo import ProtectedTable, cli, wide
    from ektelo.kernel import marginal_select
    from ektelo.workload import spec

    if not (ADULT / "adult.csv").is_file():
        print(f"SKIPPED: the shared adult table is not at {ADULT}")
        return
    aim = importlib.import_module("ektelo.plans.aim")
    phases = Phases()
    phases.wrap(spec, "marginals", "question rows (workload.spec.marginals)")
    phases.wrap(wide, "fit", "AIM (wide.fit), all of it")
    phases.wrap(ProtectedTable, "select_marginal", "  kernel selection (select_marginal)")
    phases.wrap(aim, "fit_graphical_model", "  model fits")
    phases.wrap(aim, "model_size", "  size guard triangulations (model_size)")
    phases.wrap(wide, "marginal_answers", "answers read off the model")
    phases.wrap(cli, "write_csv", "writing the CSV (cli.write_csv)")
    caches: list[marginal_select.MarginalCache] = []
    cache_init = marginal_select.MarginalCache.__init__

    def init(self: marginal_select.MarginalCache, *args: object, **kwargs: object) -> None:
        cache_init(self, *args, **kwargs)  # type: ignore[arg-type]
        caches.append(self)

    marginal_select.MarginalCache.__init__ = init  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "triples.csv"
        args = ["run", "--data", str(ADULT / "adult.csv"), "--domain",
                str(ADULT / "adult-domain.json"), "--workload", "marginals:3:all", "--epsilon",
                "1", "--delta", "1e-9", "--seed", "0", "--no-ledger", "--out", str(out)]
        wall, cpu = time.perf_counter(), time.process_time()
        code = cli.main(args)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        size = out.stat().st_size if out.exists() else 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"adult: ektelo run --workload marginals:3:all (ε=1, δ=1e-9, seed 0) exit {code}: "
          f"wall {wall:.1f} s, CPU {cpu:.1f} s (all threads), peak RSS {peak:,.0f} MB, "
          f"CSV {size / 2**30:.2f} GB")
    print(f"{'phase':45s} {'wall s':>8s} {'CPU s':>8s} {'calls':>6s} {'RSS after MB':>12s}")
    for label, (w, c, n, rss) in phases.spent.items():
        print(f"{label:45s} {w:8.1f} {c:8.1f} {int(n):6d} {rss:12,.0f}")
    for cache in caches:
        if cache.hits or cache.misses:
            print(f"kernel marginal cache: {cache.misses} counted by the engine, {cache.hits} "
                  f"read from the cache, {cache.held:,} cells held")
    print("issue #25 figures before this work: 20 min 16 s wall, 452 s CPU, 9.5 GB peak RSS")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--adult", action="store_true", help="also time the adult CLI run")
    parser.add_argument("--adult3", action="store_true",
                        help="only the adult 3-way run through ektelo run, phase by phase")
    args = parser.parse_args()
    if args.adult3:
        run_adult3()
        sys.stdout.flush()
        return
    run_fair(args.seeds)
    if args.adult:
        run_adult()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
