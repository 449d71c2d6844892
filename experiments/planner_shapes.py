"""Can richer shape features bring the planner's 2-D regret to 1.2? (issue #43)

A simulation from the cached grid (`experiments/results/planner_grid_2d.csv.gz`),
no plan is run: for every 2-D case (six DPBench datasets × six scales × ε ∈
{0.01, 0.1, 1} × 5 data seeds) it measures candidate features on the case's
vector with Laplace noise at share·ε (numpy, the noise the runtime's one
`reduce_by_partition(...).laplace(...)` charge would add to 16×16 blocks;
coarser grids are sums of the same noisy blocks), trains `planner_train.fit_tree`
leave-one-dataset-out on each feature set, and prices each held-out choice by
the grid's mean error of that plan at (1 − share)·ε over the best in hindsight
at ε — `planner_regret.simulated_regret`'s pricing. It also prints two bounds:

* **public features only** (what a declared row count can know: rows, ε):
  the best single plan per (scale, ε) chosen in-sample across all datasets —
  no tree on (rows, ε) does better on the resampled scales;
* **perfect features**: each case's best plan at (1 − share)·ε, chosen in
  hindsight.

Feature sets: the runtime's (4×4 empty and top shares, signal), signal only,
and 8×8 / 16×16 shape features (empty share, top-1/8 mass share, entropy's
effective share of blocks, total variation between neighbouring blocks, the
blocks' signal-to-noise). ``mwem_fallback`` prices an MWEM that always
answers (its failures replaced by the uniform plan's error: what a fallback
to the noisy-total uniform estimate would give).

    PYTHONPATH=src:. python -m experiments.planner_shapes [--share 0.05]
"""

from __future__ import annotations

import argparse
import math
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from . import planner_grid as pg
from . import planner_train as pt

GRID = Path(__file__).resolve().parent / "results" / "planner_grid_2d.csv.gz"
EPSILONS = (0.01, 0.1, 1.0)
BASE = ["log10_eps", "log10_signal", "log10_total"]


def errors(grid: pd.DataFrame, factor: float) -> pd.DataFrame:
    """Mean scaled error per (dataset, scale, ε) × plan at `factor`·ε (inf: failed)."""
    part = grid[np.isclose(grid["factor"], factor)]
    shared, own = part[part["dataset"] == "*"], part[part["dataset"] != "*"]
    records = grid[grid["dataset"] != "*"].groupby(["dataset", "scale"])["records"].first()
    rows = []
    for (d, s), n in records.items():
        for eps in EPSILONS:
            sub = own[(own["dataset"] == d) & (own["scale"] == s) & np.isclose(own["eps"], eps)]
            di = shared[np.isclose(shared["eps"], eps)]
            for frame in (sub, di):
                for plan, y in frame.groupby("plan"):
                    rows.append((d, s, eps, plan, y["abs_error"].astype(float).mean() / n))
    out = pd.DataFrame(rows, columns=["dataset", "scale", "eps", "plan", "err"]).fillna(np.inf)
    return out.pivot_table(index=["dataset", "scale", "eps"], columns="plan", values="err")


def shape_features(x: np.ndarray, eps: float, share: float, rng: np.random.Generator,
                   declared: bool) -> dict[str, float]:
    """Noisy 16×16 block counts at share·ε and the features read off them."""
    scale = 1.0 / (share * eps)
    fine = x.astype(float).reshape(16, 16, 16, 16).sum(axis=(1, 3)) + rng.laplace(0, scale,
                                                                                 (16, 16))
    total = float(x.sum()) if declared else float(fine.sum())
    plan_eps = eps * (1 - share)
    out = {"log10_eps": math.log10(plan_eps), "log10_total": math.log10(max(total, 1.0)),
           "log10_signal": math.log10(max(total, 1.0) * plan_eps)}
    for b in (4, 8, 16):
        arr = fine.reshape(b, 16 // b, b, 16 // b).sum(axis=(1, 3))
        sd = scale * 16 / b  # √(summed blocks) Laplace scales: the std grows as √((16/b)²)
        a = arr.reshape(-1)
        clamped = np.clip(a, 0.0, None)
        mass = clamped.sum()
        p = clamped / mass if mass > 0 else np.full(a.size, 1 / a.size)
        nz = p[p > 0]
        out[f"empty{b}"] = float(np.mean(a < 2 * sd))
        out[f"top{b}"] = float(np.sort(p)[::-1][: max(1, a.size // 8)].sum())
        out[f"effshare{b}"] = float(math.exp(-(nz * np.log(nz)).sum()) / a.size)
        q = p.reshape(b, b)
        out[f"rough{b}"] = float(0.5 * (np.abs(np.diff(q, axis=0)).sum()
                                        + np.abs(np.diff(q, axis=1)).sum()))
        out[f"snr{b}"] = math.log10(max(mass / a.size, 1e-9) / sd)
    return out


def all_features(cases: Sequence[tuple[str, str]], share: float, seeds: int = 5) -> pd.DataFrame:
    rows = []
    for d, s in cases:
        for seed in range(seeds):
            x = pg.dataset_vector(2, d, s, seed)
            for eps in EPSILONS:
                for declared in (False, True):
                    rng = np.random.default_rng(zlib.crc32(f"shape|{d}|{s}|{eps}|{seed}".encode()))
                    rows.append({"dataset": d, "scale": s, "eps": eps, "seed": seed,
                                 "declared": declared,
                                 **shape_features(x, eps, share, rng, declared)})
    return pd.DataFrame(rows)


def loo_regret(feats: pd.DataFrame, names: list[str], ratio: pd.DataFrame, part: pd.DataFrame,
               best: pd.Series, leaf_share: float, mwem_fallback: bool) -> dict[float, float]:
    """Leave-one-dataset-out geometric-mean regret per ε."""
    r = ratio.copy()
    p = part.copy()
    if mwem_fallback:
        r["mwem"] = np.where(np.isfinite(r["mwem"]), r["mwem"], r["uniform"])
        p["mwem"] = np.where(np.isfinite(p["mwem"]), p["mwem"], p["uniform"])
    idx = pd.MultiIndex.from_frame(feats[["dataset", "scale", "eps"]])
    R = r.reindex(idx).to_numpy(float)
    with np.errstate(divide="ignore"):
        cost = np.where(np.isfinite(np.log(R)), np.log(R), pt.FAIL_COST)
    choices = tuple(r.columns)
    chosen = []
    for d in sorted(feats["dataset"].unique()):
        train = (feats["dataset"] != d).to_numpy()
        ok = [j for j in range(len(choices)) if np.all(np.isfinite(R[train, j]))]
        cases = pt.Cases(feats.loc[train, names].to_numpy(float), tuple(names),
                         cost[train][:, ok], tuple(choices[j] for j in ok),
                         feats.loc[train, ["dataset"]].reset_index(drop=True))
        tree = pt.fit_tree(cases, min_leaf=max(2, int(leaf_share * train.sum())))
        held = feats[~train]
        for key, plan in zip(held.itertuples(index=False),
                             pt.predict(tree, tuple(names), held[names].to_numpy(float)),
                             strict=True):
            chosen.append((key.dataset, key.scale, key.eps,
                           float(p.loc[(key.dataset, key.scale, key.eps), plan])))
    mean = pd.DataFrame(chosen, columns=["dataset", "scale", "eps", "err"]).groupby(
        ["dataset", "scale", "eps"])["err"].mean()
    regret = (mean / best.reindex(mean.index)).clip(upper=math.exp(pt.FAIL_COST))
    return {e: float(np.exp(np.log(regret.xs(e, level="eps")).mean())) for e in EPSILONS}


def fmt(by_eps: dict[float, float]) -> str:
    return " / ".join(f"{v:.3f}" for v in by_eps.values())


def gmean_by_eps(values: pd.Series) -> dict[float, float]:
    return {e: float(np.exp(np.log(values.xs(e, level="eps")).mean())) for e in EPSILONS}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--share", type=float, default=0.05)
    args = parser.parse_args(argv)
    grid = pd.read_csv(GRID)
    full, part = errors(grid, 1.0), errors(grid, 1 - args.share)
    best = full.min(axis=1)
    ratio = part.div(best, axis=0)
    print(f"2-D ranges, {len(best)} cases; regret at ε = 0.01 / 0.1 / 1 (geometric means)")
    fixed = full.div(best, axis=0)
    for plan in ("adaptive_grid", "dawa", "hdmm", "uniform_grid"):
        print(f"  always {plan:14} (full ε): {fmt(gmean_by_eps(fixed[plan]))}")
    # Public facts of a case: its row count (a scale, or a dataset's own
    # count, which is its alone) and ε. Best plan per (rows, ε), in-sample.
    logs = np.log(fixed)
    rows_key = [f"{d}:own" if s == "own" else s for d, s, _ in logs.index]
    per = logs.groupby([rows_key, logs.index.get_level_values("eps")]).transform("mean")
    bound = per.min(axis=1)
    print("  bound, public features only (best plan per row count × ε, in-sample): "
          + " / ".join(f"{math.exp(bound.xs(e, level='eps').mean()):.3f}" for e in EPSILONS))
    print(f"  bound, perfect features at {1 - args.share:g}ε: "
          f"{fmt(gmean_by_eps(ratio.min(axis=1)))}")
    feats = all_features(list(best.index.droplevel("eps").unique()), args.share)
    names_all = [c for c in feats.columns
                 if c not in ("dataset", "scale", "eps", "seed", "declared")]
    sets = {
        "runtime's (4×4)": [*BASE, "empty4", "top4"],
        "signal only": BASE,
        "+8×8 shape": [*BASE, "empty4", "top4", "empty8", "top8", "effshare8", "rough8",
                       "snr8"],
        "+16×16 shape": [*BASE, "empty4", "top4", "empty16", "top16", "effshare16",
                         "rough16", "snr16"],
        "all": names_all,
    }
    print(f"leave-one-dataset-out, features at {args.share:g}·ε (declared: exact total)")
    for declared in (False, True):
        f = feats[feats["declared"] == declared].reset_index(drop=True)
        for mwem in (False, True):
            for label, names in sets.items():
                cells = [fmt(loo_regret(f, names, ratio, part, best, leaf, mwem))
                         for leaf in (0.06, 0.1, 0.2)]
                print(f"  declared={declared!s:5} mwem_always={mwem!s:5} {label:16} "
                      f"leaf 6% {cells[0]} | 10% {cells[1]} | 20% {cells[2]}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
