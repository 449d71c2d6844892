"""The planner experiment's grid of plan errors (issue 29): every candidate
plan's DPBench error on every (setting, dataset, scale, ε, seed), cached so
that training (`planner_train`) and evaluation (`planner_regret`) re-use it
and an interrupted run resumes.

Settings (DPBench, Hay et al., SIGMOD 2016, §5–6):

* ``1d-prefix``: Prefix(4096) on the ten 1-D histograms;
* ``1d-ranges``: 2000 random ranges over 4096 cells, drawn once with the
  public seed `RANGES_1D_SEED` by `workload.random_range` (DPBench's
  RandomRange, like the 2-D reference set);
* ``2d-ranges``: the 2000 reference ranges (`dpbench_2d_ranges_2000.npy`) on
  the six 256×256 histograms.

Scales: each dataset's own counts ("own"), and DPBench's resampled-to-scale
variants 10³…10⁷: the histogram's shape normalised and N records drawn
multinomially with a data seed (one per (dataset, scale, seed), so every plan
at a seed sees the same vector). Error: DPBench's scaled average per-query L2
error ‖Wx − Wx̂‖₂ / (|W|·‖x‖₁) (`workload.scaled_l2_error`).

Plans run as a custodian would run them: no side information (no true total
for MWEM, UG, AG; they buy a noisy one), default hyper-parameters.

Saving (stated in docs/planner_regret.md): a data-independent plan's
estimate is least squares on its strategy, x̂ = A⁺(Ax + η), so its error
vector W x̂ − W x = W A⁺ η does not depend on x. Its runs are shared across
datasets and scales at the same (setting, ε, seed): the cache keeps the
absolute per-query error ‖W x̂ − W x‖₂/|W| (dataset "*"), and the scaled
error of any vector is that divided by the vector's total.

Cache: one gzip CSV per dimensionality under ``experiments/results/``
(appended in gzip members while running, so a killed run keeps what it
wrote); columns group, dataset, scale, eps, factor, seed, plan, abs_error,
records. `factor` is the share of ε the plan ran with: 1 for the full ε,
1 − share for the plan part of the planner's split (training needs the
candidates' errors there).
"""

from __future__ import annotations

import gzip
import io
import math
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .common import dpbench_1d, dpbench_2d, one_blas_thread

__all__ = [
    "EPSILONS",
    "GROUP_DIMS",
    "GROUP_KIND",
    "PLANS",
    "SCALES",
    "Grid",
    "all_records",
    "dataset_vector",
    "datasets",
    "load_cache",
    "run_grid",
    "scaled_errors",
    "workload_for",
]

RESULTS = Path(__file__).resolve().parent / "results"
GROUP_DIMS = {"1d-prefix": 1, "1d-ranges": 1, "2d-ranges": 2}
GROUP_KIND = {"1d-prefix": "prefix", "1d-ranges": "random-ranges", "2d-ranges": "random-ranges"}
EPSILONS = (0.01, 0.1, 1.0)
SCALES = ("own", "1e3", "1e4", "1e5", "1e6", "1e7")
RANGES_1D_SEED = 2016  # the public seed of the 1-D random range set
RANGES_1D_COUNT = 2000
# The candidates per dimensionality (DPBench's algorithms the library has).
PLANS = {
    1: ("identity", "uniform", "privelet", "h2", "hb", "greedy_h", "dawa", "ahp", "mwem"),
    2: ("identity", "uniform", "privelet", "hb", "quadtree", "uniform_grid",
        "adaptive_grid", "dawa", "mwem"),
}
COLUMNS = ("group", "dataset", "scale", "eps", "factor", "seed", "plan", "abs_error", "records")


@dataclass(frozen=True)
class Grid:
    """What to run: groups, datasets (None: all), scales, ε, seeds, the ε
    factors (1 and 1 − share), and plans (None: `PLANS`)."""

    groups: tuple[str, ...] = tuple(GROUP_DIMS)
    datasets: tuple[str, ...] | None = None
    scales: tuple[str, ...] = SCALES
    epsilons: tuple[float, ...] = EPSILONS
    seeds: int = 5
    factors: tuple[float, ...] = (1.0,)
    part_seeds: int = 5  # seeds at the factors below 1 (training only)
    di_seeds: int | None = None  # data-independent plans' seeds at the full ε (default seeds)
    plans: dict[int, tuple[str, ...]] | None = None  # per dimensionality

    def plans_for(self, group: str) -> tuple[str, ...]:
        return (self.plans or PLANS)[GROUP_DIMS[group]]

    def with_plans(self, extra: dict[int, tuple[str, ...]]) -> Grid:
        """This grid with `extra` plans added (e.g. Tier 0's choices)."""
        base = self.plans or PLANS
        merged = {d: tuple(dict.fromkeys((*base[d], *extra.get(d, ())))) for d in base}
        return replace(self, plans=merged)

    def seeds_at(self, factor: float) -> int:
        return self.seeds if math.isclose(factor, 1.0) else min(self.seeds, self.part_seeds)

    def di_seeds_at(self, factor: float) -> int:
        """Seeds of the data-independent plans: more at the full ε (cheap:
        shared across datasets), so that their mean is close to its
        expectation when they compete for the best in hindsight."""
        if math.isclose(factor, 1.0) and self.di_seeds is not None:
            return max(self.di_seeds, self.seeds)
        return self.seeds_at(factor)


# -- inputs -------------------------------------------------------------------
@cache
def datasets(dims: int) -> dict[str, np.ndarray]:
    """The DPBench histograms of `dims` dimensions (shared data)."""
    return dpbench_1d() if dims == 1 else dpbench_2d()


@cache
def workload_for(group: str) -> Any:
    """The public workload of a setting (an EMatrix)."""
    from ektelo import workload

    if group == "1d-prefix":
        return workload.prefix(4096)
    if group == "1d-ranges":
        return workload.random_range((4096,), RANGES_1D_COUNT, seed=RANGES_1D_SEED)
    if group == "2d-ranges":
        from .dpbench import ranges_2d

        return ranges_2d()
    raise ValueError(f"unknown planner setting {group!r}; known: {', '.join(GROUP_DIMS)}")


def scale_records(scale: str) -> int | None:
    """The number of records of a scale label (None: the dataset's own)."""
    if scale == "own":
        return None
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; known: {', '.join(SCALES)}")
    return int(float(scale))


def _seed(*parts: Any) -> int:
    return zlib.crc32("|".join(map(str, parts)).encode())


def dataset_vector(dims: int, dataset: str, scale: str, seed: int) -> np.ndarray:
    """The data vector of (dataset, scale, seed): the dataset itself, or its
    shape resampled to N records (DPBench's data generator) with a data seed."""
    x = datasets(dims)[dataset]
    n = scale_records(scale)
    if n is None:
        return x
    rng = np.random.default_rng(_seed("data", dims, dataset, scale, seed))
    shape = x.reshape(-1) / x.sum()
    return rng.multinomial(n, shape).reshape(x.shape).astype(np.int64)


def _data_independent(plan: str) -> bool:
    from ektelo import plans

    return not plans.get(plan).data_dependent


# -- the cache ------------------------------------------------------------------
def cache_path(dims: int, folder: Path | None = None, tag: str = "") -> Path:
    """The cache file a run writes (`tag`: one per concurrent writer)."""
    return (folder or RESULTS) / f"planner_grid_{dims}d{'-' + tag if tag else ''}.csv.gz"


def cache_paths(dims: int, folder: Path | None = None) -> list[Path]:
    """Every cache file of `dims` (all writers')."""
    return sorted((folder or RESULTS).glob(f"planner_grid_{dims}d*.csv.gz"))


def load_cache(paths: Iterable[Path]) -> pd.DataFrame:
    """Every cached row of `paths` (missing files are skipped)."""
    frames = []
    for p in paths:
        if p.exists():
            with gzip.open(p, "rt") as fh:
                frames.append(pd.read_csv(fh, dtype={"scale": str, "dataset": str}))
    if not frames:
        return pd.DataFrame({c: [] for c in COLUMNS})
    table = pd.concat(frames, ignore_index=True)
    table["eps"] = table["eps"].astype(float)
    table["factor"] = table["factor"].astype(float)
    return table.drop_duplicates(subset=list(COLUMNS[:7]), keep="last")


def _key(group: str, dataset: str, scale: str, eps: float, factor: float, seed: int,
         plan: str) -> tuple[Any, ...]:
    return (group, dataset, scale, round(float(eps), 6), round(float(factor), 6), int(seed), plan)


def _append(path: Path, rows: list[dict[str, Any]]) -> None:
    """Append rows as one gzip member (readers see every complete member)."""
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    pd.DataFrame(rows, columns=list(COLUMNS)).to_csv(
        buf, index=False, header=not path.exists(), float_format="%.6g"
    )
    with gzip.open(path, "at") as fh:
        fh.write(buf.getvalue())


# -- running ----------------------------------------------------------------------
def _run_plan(plan: str, x: np.ndarray, W: Any, eps: float, seed: int) -> float:
    """One run: the absolute per-query L2 error ‖Wx − Wx̂‖₂/|W|; inf when the
    plan gives no answer (MWEM's weights lose all their mass when the noise
    dwarfs the total): a custodian who picked it gets nothing, the worst case."""
    import ektelo
    from ektelo import plans
    from ektelo.inference import ConvergenceError

    X = ektelo.protect(x, epsilon=eps, seed=seed)
    try:
        x_hat = plans.run(plan, X, W, eps)
    except ConvergenceError:
        return math.inf
    if not math.isclose(X.budget.spent, eps, rel_tol=1e-9):
        raise RuntimeError(f"{plan} spent ε={X.budget.spent!r}, not {eps!r}")
    flat = x.reshape(-1).astype(np.float64)
    diff = W.matvec(flat) - W.matvec(np.asarray(x_hat, dtype=np.float64).reshape(-1))
    return float(np.linalg.norm(diff) / W.shape[0])


def _jobs(grid: Grid) -> list[tuple[Any, ...]]:
    """(group, dataset, scale, eps, factor, seed, plan) in run order: the full
    ε first, data-independent plans once per (group, ε, factor, seed)."""
    jobs = []
    for factor in grid.factors:
        for group in grid.groups:
            dims = GROUP_DIMS[group]
            names = grid.datasets or tuple(sorted(datasets(dims)))
            names = tuple(n for n in names if n in datasets(dims))
            for eps in grid.epsilons:
                for seed in range(grid.di_seeds_at(factor)):
                    for plan in grid.plans_for(group):
                        if _data_independent(plan):
                            jobs.append((group, "*", "*", eps, factor, seed, plan))
                for dataset in names:
                    for scale in grid.scales:
                        for seed in range(grid.seeds_at(factor)):
                            for plan in grid.plans_for(group):
                                if not _data_independent(plan):
                                    jobs.append((group, dataset, scale, eps, factor, seed, plan))
    return jobs


def _done(dims_all: Sequence[int], folder: Path | None) -> set[tuple[Any, ...]]:
    paths = [p for d in dims_all for p in cache_paths(d, folder)]
    return {_key(*r) for r in load_cache(paths)[list(COLUMNS[:7])].itertuples(index=False)}


def run_grid(grid: Grid, folder: Path | None = None, *, log: Any = None, tag: str = "",
             reverse: bool = False) -> pd.DataFrame:
    """Run every job of `grid` not already cached under `folder` (default
    ``experiments/results``), appending to the cache as it goes; returns the
    cache rows of the grid's groups. Concurrent runs (each with its own
    `tag`, one maybe `reverse`d) re-read each other's files every ~20 s and
    skip what the other has done."""
    dims_all = sorted({GROUP_DIMS[g] for g in grid.groups})
    done = _done(dims_all, folder)
    todo = [j for j in _jobs(grid) if _key(*j) not in done]
    if reverse:
        todo.reverse()
    started = time.perf_counter()
    pending: dict[int, list[dict[str, Any]]] = {d: [] for d in dims_all}
    last_flush = started
    with one_blas_thread():
        for i, (group, dataset, scale, eps, factor, seed, plan) in enumerate(todo, 1):
            if _key(group, dataset, scale, eps, factor, seed, plan) in done:
                continue
            dims = GROUP_DIMS[group]
            W = workload_for(group)
            if dataset == "*":  # data-independent: any vector; the error does not depend on it
                x = datasets(dims)[sorted(datasets(dims))[0]]
                records = math.nan
            else:
                x = dataset_vector(dims, dataset, scale, seed)
                records = float(x.sum())
            run_eps = eps * factor
            noise = _seed("noise", group, dataset, scale, eps, factor, seed, plan)
            err = _run_plan(plan, x, W, run_eps, noise)
            pending[dims].append(dict(zip(COLUMNS, (group, dataset, scale, eps, factor, seed,
                                                    plan, err, records), strict=True)))
            now = time.perf_counter()
            if now - last_flush > 20 or i == len(todo):
                for d, rows in pending.items():
                    _append(cache_path(d, folder, tag), rows)
                    rows.clear()
                last_flush = now
                done = _done(dims_all, folder) if tag or reverse else done
                if log is not None:
                    print(f"grid {i}/{len(todo)} {now - started:7.0f}s "
                          f"({group} {dataset} {scale} ε={eps:g}×{factor:g})", file=log,
                          flush=True)
    for d, rows in pending.items():
        _append(cache_path(d, folder, tag), rows)
    paths = [p for d in dims_all for p in cache_paths(d, folder)]
    table = load_cache(paths)
    return table[table["group"].isin(grid.groups)].reset_index(drop=True)


def scaled_errors(cache_rows: pd.DataFrame, grid: Grid, factor: float, *,
                  extra_di: bool = True) -> pd.DataFrame:
    """Scaled errors per (group, dataset, scale, eps, seed) × plan at `factor`,
    the shared data-independent runs spread over every dataset and scale
    (their absolute error divided by that vector's total); with `extra_di`
    the data-independent plans' extra seeds (`Grid.di_seeds`) too. Rows
    missing from the cache are absent (callers check coverage)."""
    di_seeds = grid.di_seeds_at(factor) if extra_di else grid.seeds_at(factor)
    rows = cache_rows[np.isclose(cache_rows["factor"].astype(float), factor)]
    dep = rows[rows["dataset"] != "*"].copy()
    dep["error"] = dep["abs_error"] / dep["records"]
    records = all_records(grid, di_seeds)
    ind = rows[(rows["dataset"] == "*") & (rows["seed"] < di_seeds)]
    ind = ind.drop(columns=["dataset", "scale", "records"])
    ind = ind.merge(records, on=["group", "eps", "seed"])
    ind["error"] = ind["abs_error"] / ind["records"]
    dep = dep[dep["seed"] < grid.seeds_at(factor)]
    both = pd.concat([dep, ind], ignore_index=True)
    keep = both["group"].isin(grid.groups) & both["scale"].isin(grid.scales)
    if grid.datasets is not None:
        keep &= both["dataset"].isin(grid.datasets)
    both = both[keep & both["eps"].isin(grid.epsilons)]
    both = both[[p in grid.plans_for(g) for g, p in zip(both["group"], both["plan"], strict=True)]]
    return both[["group", "dataset", "scale", "eps", "seed", "plan", "error"]].reset_index(
        drop=True
    )


def all_records(grid: Grid, seeds: int) -> pd.DataFrame:
    """The total of every (group, dataset, scale, eps, seed) vector of `grid`."""
    out = []
    for group in grid.groups:
        dims = GROUP_DIMS[group]
        for dataset in grid.datasets or tuple(sorted(datasets(dims))):
            if dataset not in datasets(dims):
                continue
            for scale in grid.scales:
                for seed in range(seeds):
                    n = scale_records(scale)
                    total = float(datasets(dims)[dataset].sum()) if n is None else float(n)
                    for eps in grid.epsilons:
                        out.append((group, dataset, scale, eps, seed, total))
    return pd.DataFrame(out, columns=["group", "dataset", "scale", "eps", "seed", "records"])


def describe(grid: Grid) -> str:
    """One line naming the grid's extent."""
    return (f"groups {','.join(grid.groups)}; scales {','.join(grid.scales)}; "
            f"ε {','.join(f'{e:g}' for e in grid.epsilons)}; {grid.seeds} seeds; "
            f"ε factors {','.join(f'{f:g}' for f in grid.factors)} "
            f"({grid.seeds_at(0.5)} seeds below 1; data-independent plans "
            f"{grid.di_seeds_at(1.0)} at the full ε)"
            + ("" if grid.datasets is None else f"; datasets {','.join(grid.datasets)}"))


def grid_for_dims(dims: int | None, factors: Sequence[float], quick: bool = False,
                  part_seeds: int | None = None) -> Grid:
    """The full grid (or the quick subset) for one dimensionality or both;
    `part_seeds`: seeds at the ε factors below 1 (default `PART_SEEDS`)."""
    groups = tuple(g for g in GROUP_DIMS if dims is None or GROUP_DIMS[g] == dims)
    if quick:
        return Grid(groups=groups, scales=("1e4", "1e6"), epsilons=(1.0,), seeds=2,
                    factors=tuple(factors), datasets=QUICK_DATASETS, plans=QUICK_PLANS)
    if part_seeds is None:
        part_seeds = min(PART_SEEDS[GROUP_DIMS[g]] for g in groups)
    return Grid(groups=groups, factors=tuple(factors), part_seeds=part_seeds, di_seeds=DI_SEEDS)


# Data-independent plans' seeds at the full ε (their runs are shared, so cheap).
DI_SEEDS = 20


# Seeds of the training grid below the full ε (cut from 5 to fit the compute:
# 2 shared cores; docs/planner_regret.md).
PART_SEEDS = {1: 2, 2: 2}


QUICK_DATASETS = ("ADULTFRANK", "HEPTH", "MEDCOST", "Adult_2D", "MDSalary2D", "Stroke_2D")
# The quick run's plans: the cheap ones (2-D DAWA and AG take ~1 s a run).
QUICK_PLANS = {1: ("identity", "uniform", "hb", "dawa"),
               2: ("identity", "uniform", "hb", "quadtree", "uniform_grid")}


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m experiments.planner_grid --dims 1 --factors 1,0.95`: run (or
    resume) one part of the grid, e.g. in a background process per
    dimensionality; `python -m experiments planner` then finds it cached."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m experiments.planner_grid")
    parser.add_argument("--dims", type=int, choices=(1, 2))
    parser.add_argument("--factors", default="1", help="ε factors, e.g. 1,0.95,0.9")
    parser.add_argument("--part-seeds", type=int, help="seeds at the factors below 1")
    parser.add_argument("--tag", default="", help="this writer's cache file suffix")
    parser.add_argument("--reverse", action="store_true", help="run the jobs last first")
    args = parser.parse_args(argv)
    factors = tuple(float(f) for f in args.factors.split(","))
    grid = grid_for_dims(args.dims, factors, part_seeds=args.part_seeds)
    print(describe(grid), file=sys.stderr, flush=True)
    run_grid(grid, log=sys.stderr, tag=args.tag, reverse=args.reverse)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
