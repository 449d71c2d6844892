"""planner: train the planner's decision table on DPBench and measure its
regret honestly (issue 29; DPBench = Hay et al., SIGMOD 2016; the learned
choice follows Pythia, Kotsogiannis et al., SIGMOD 2017).

`python -m experiments planner [--quick] [--write-table] [--shares 0.05,0.1]`:

1. the grid (`planner_grid`): every candidate's error per (setting,
   dataset, scale, ε, seed) at the full ε and at (1 − share)·ε, resumed
   from ``experiments/results/planner_grid_*.csv.gz``;
2. best in hindsight: per (setting, dataset, scale, ε) the plan with the
   lowest mean error over seeds at the full ε;
3. training (`planner_train`): per share, features measured by the
   runtime's `measure_features` at share·ε, one tree per group;
   leave-one-dataset-out regret simulated from the grid (each held-out
   case's choice priced by the grid's errors at (1 − share)·ε) picks the
   share and, per group, the least leaf size (`MIN_LEAF_SHARES`);
4. evaluation: leave-one-dataset-out with the chosen share — for each
   held-out dataset, `plans.run("auto", x, W, ε, kind=..., table=<the
   table trained without it>)` per (scale, ε, seed) (features at share·ε,
   the plan at the rest, exactly ε in all); regret = mean error of auto /
   mean error of the best plan in hindsight at the full ε;
   and, as a second track, the *declared rows* planner: the custodian
   declares the row count public, trees split on public facts only
   (`declared_features`), nothing is spent on features and the plan runs
   with the whole ε — trained and evaluated the same way (`plans.run("auto",
   ..., rows=<the vector's total>)`);
5. the tables: per group × ε and per group × scale, the geometric mean and
   90th percentile of auto's regret, the fixed choices' geometric-mean
   regrets (always-HB, -AG, -QuadTree, today's rules `choose_plan`, Tier 0
   alone) and auto's win rate against each; `--write-table` trains on every
   dataset and writes ``src/ektelo/planner/table.json``.

Auto's runs are cached too (``experiments/results/planner_auto_<group>.csv.gz``,
keyed by the tree's JSON and the share), so re-running the command costs only what
changed. Results: docs/planner_regret.md.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import planner_grid as pg
from . import planner_train as pt
from .common import experiment, one_blas_thread, progress, require_shared

__all__ = ["FIXED", "regret_table", "run_experiment", "summarise"]

NAME = "planner"
SHARES = (0.05,)  # others (--shares 0.05,0.1) run their own training grid first
TABLE_PATH = Path(__file__).resolve().parents[1] / "src" / "ektelo" / "planner" / "table.json"
TARGET = 1.2
# The fixed choices compared with auto (plan, label); "rules" and "tier0"
# are resolved per group (`fixed_leaves`) and run afresh (`run_fixed`).
FIXED = (("hb", "HB"), ("adaptive_grid", "AG"), ("quadtree", "QuadTree"),
         ("rules", "rules"), ("tier0", "Tier0"))
# A leaf holds at least this share of a group's training cases; chosen per
# group by the simulated leave-one-dataset-out regret, like the share.
MIN_LEAF_SHARES = (0.03, 0.06, 0.1, 0.2)


# -- regret arithmetic -----------------------------------------------------------------
def gmean(values: Any) -> float:
    v = np.asarray(values, dtype=float)
    return float(np.exp(np.mean(np.log(v)))) if v.size else math.nan


def regret_table(auto: pd.DataFrame, full: pd.DataFrame,
                 fixed: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (group, dataset, scale, ε): auto's mean error over seeds
    (`auto` has per-seed rows with column "error"), the best plan in
    hindsight at the full ε (`full`: per-seed grid errors), auto's regret =
    the ratio of the two, and per fixed choice (label → its own per-seed
    runs, like `auto`'s) its mean error and regret (NaN where it has none)."""
    best = pt.best_in_hindsight(full)
    auto_mean = auto.groupby(pt.CASE_KEYS)["error"].mean()
    rows = best.join(auto_mean.rename("auto_error"), how="inner").reset_index()
    rows["regret"] = rows["auto_error"] / rows["best_error"]
    index = pd.MultiIndex.from_frame(rows[pt.CASE_KEYS])
    for label, runs in fixed.items():
        mean = runs.groupby(pt.CASE_KEYS)["error"].mean()
        rows[f"{label}_error"] = mean.reindex(index).to_numpy(dtype=float)
        rows[f"{label}_regret"] = rows[f"{label}_error"] / rows["best_error"]
    return rows


def summarise(rows: pd.DataFrame, by: list[str], labels: list[str]) -> pd.DataFrame:
    """Per group of `by`: cases, auto's geometric-mean and 90th-percentile
    regret, each fixed choice's geometric-mean regret and auto's win rate
    against it (the share of cases where auto's mean error is lower)."""
    out = []
    for key, g in rows.groupby(by, sort=True):
        rec = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        rec.update(cases=len(g), auto_failed=int(np.sum(~np.isfinite(g["auto_error"]))),
                   auto_gmean=gmean(g["regret"]),
                   auto_p90=float(np.percentile(g["regret"], 90)))
        for label in labels:
            fx = g[f"{label}_regret"].to_numpy(dtype=float)
            if np.all(np.isnan(fx)):
                continue
            ok = ~np.isnan(fx)
            rec[f"{label}_gmean"] = gmean(fx[ok])
            rec[f"win_vs_{label}"] = float(np.mean(
                g["auto_error"].to_numpy()[ok] < g[f"{label}_error"].to_numpy()[ok]))
        rec["met"] = bool(rec["auto_gmean"] <= TARGET and all(
            rec["auto_gmean"] < v for k, v in rec.items() if k.endswith("_gmean")
            and k != "auto_gmean"))
        out.append(rec)
    return pd.DataFrame(out)


# -- fixed choices ----------------------------------------------------------------------
def fixed_leaves(grid: pg.Grid) -> dict[str, dict[str, str]]:
    """The fixed choices as one constant leaf per group (label → {group:
    leaf}): a plan name, or "tier0" (Tier 0's best at each ε); today's rules
    (`choose_plan`) name one plan per group whatever ε."""
    from ektelo.planner import choose_plan

    out: dict[str, dict[str, str]] = {}
    for plan, label in FIXED:
        out[label] = {}
        for group in grid.groups:
            shape = (4096,) if pg.GROUP_DIMS[group] == 1 else (256, 256)
            if plan == "rules":
                out[label][group] = choose_plan(pg.GROUP_KIND[group], shape)[0]
            elif plan == "tier0":
                out[label][group] = pt.TIER0
            elif plan in grid.plans_for(group):
                out[label][group] = plan
    return out


def run_fixed(grid: pg.Grid, leaves: dict[str, dict[str, str]], share: float, folder: Path,
              tier0: dict[tuple[str, float], str]) -> dict[str, pd.DataFrame]:
    """Each fixed choice run afresh with auto's own noise draws: a constant
    declared-rows tree through `run_auto`, so the same protected copy (the
    same kernel seed per group, dataset, scale, ε and seed) as auto's runs.
    Common random numbers: where auto and a fixed choice pick the same plan
    they give the same answer, and neither shares noise with the grid's runs
    that define the best in hindsight (which would favour the fixed choice:
    a plan that is best in hindsight on a case has regret exactly 1 there by
    construction, on its own runs)."""
    out = {}
    for label, per_group in leaves.items():
        if not per_group:  # no group of this grid has the plan (AG, QuadTree in 1-D)
            continue
        trees = {g: {d: {"plan": leaf} for d in _names(grid, g)}
                 for g, leaf in per_group.items()}
        out[label] = run_auto(grid, trees, share, folder, tier0, declared=True,
                              label=f"fixed {label}")
    return out


# -- features and training ------------------------------------------------------------------
def declared_features(grid: pg.Grid) -> pd.DataFrame:
    """Every case's public features when its row count is declared
    (`Features.from_declared_rows`: nothing measured, the same for every
    seed), in the columns `case_features` gives."""
    from ektelo.planner import PUBLIC_FEATURES, Features

    records = pg.all_records(grid, grid.seeds)
    rows = []
    for r in records.itertuples(index=False):
        shape = (4096,) if pg.GROUP_DIMS[r.group] == 1 else (256, 256)
        f = Features.from_declared_rows(dims=len(shape), cells=math.prod(shape),
                                        kind=pg.GROUP_KIND[r.group], eps=float(r.eps),
                                        rows=float(r.records))
        rows.append({"group": r.group, "dataset": r.dataset, "scale": r.scale, "eps": r.eps,
                     "seed": r.seed, **{k: f.named()[k] for k in PUBLIC_FEATURES}})
    return pd.DataFrame(rows)


def case_features(grid: pg.Grid, share: float) -> pd.DataFrame:
    """Every case's named features at `share` (cheap: one measurement each)."""
    rows = []
    cases = [(g, d, s, e, t) for g in grid.groups
             for d in _names(grid, g) for s in grid.scales for e in grid.epsilons
             for t in range(grid.seeds)]
    for g, d, s, e, t in progress(cases, f"features share={share:g}"):
        rows.append({"group": g, "dataset": d, "scale": s, "eps": e, "seed": t,
                     **pt.measure_case_features(g, d, s, e, t, share)})
    return pd.DataFrame(rows)


def _names(grid: pg.Grid, group: str) -> tuple[str, ...]:
    every = tuple(sorted(pg.datasets(pg.GROUP_DIMS[group])))
    return every if grid.datasets is None else tuple(d for d in every if d in grid.datasets)


def _train(cases: pt.Cases, min_leaf_share: float) -> dict[str, Any]:
    min_leaf = max(2, int(min_leaf_share * len(cases.cost)))
    return pt.fit_tree(cases, min_leaf=min_leaf)


def loo_trees(cases: pt.Cases, min_leaf_share: float) -> dict[str, dict[str, Any]]:
    """Per held-out dataset: the tree trained on the others."""
    names = sorted(set(cases.keys["dataset"]))
    return {d: _train(cases.subset((cases.keys["dataset"] != d).to_numpy()), min_leaf_share)
            for d in names}


def simulated_regret(cases: pt.Cases, trees: dict[str, dict[str, Any]], part: pd.DataFrame,
                     best: pd.DataFrame, tier0: dict[tuple[str, float], str]) -> pd.Series:
    """Leave-one-dataset-out regret from the grid: each held-out case's
    choice (by its own noisy features, one per seed) priced by that plan's
    mean error over the grid's seeds at (1 − share)·ε; per (group, dataset,
    scale, ε) the mean over seeds / the best in hindsight at ε."""
    means = pt.mean_errors(part)
    chosen = []
    for d, tree in trees.items():
        mask = (cases.keys["dataset"] == d).to_numpy()
        sub = cases.subset(mask)
        for key, choice in zip(sub.keys.itertuples(index=False),
                               pt.predict(tree, sub.names, sub.values), strict=True):
            plan = tier0[(key.group, float(key.eps))] if choice == pt.TIER0 else choice
            err = means.loc[(key.group, key.dataset, key.scale, key.eps), plan]
            chosen.append((key.group, key.dataset, key.scale, key.eps, float(err)))
    frame = pd.DataFrame(chosen, columns=[*pt.CASE_KEYS, "error"])
    mean = frame.groupby(pt.CASE_KEYS)["error"].mean()
    regret = mean / best["best_error"].reindex(mean.index)
    # a choice that gave no answer (inf) counts as the training's FAIL_COST,
    # so that leaf sizes still compare by their other cases
    return regret.clip(upper=math.exp(pt.FAIL_COST)).rename("regret")


# -- auto's runs ------------------------------------------------------------------------------
AUTO_COLUMNS = ("tree", "group", "dataset", "scale", "eps", "seed", "share", "error", "spent")


def _tree_key(tree: dict[str, Any], share: float, tier0: str, declared: bool = False) -> str:
    text = json.dumps({"tree": tree, "share": share, "tier0": tier0}, sort_keys=True)
    if declared:  # a declared-rows tree is a different run even where the tree is equal
        text += "|declared"
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def run_auto(grid: pg.Grid, trees: dict[str, dict[str, dict[str, Any]]], share: float,
             folder: Path, tier0: dict[tuple[str, float], str],
             declared: bool = False, label: str = "auto") -> pd.DataFrame:
    """Auto's error per (group, held-out dataset, scale, ε, seed), running
    `plans.run("auto", ...)` with the table trained without that dataset;
    cached per group in `folder` (``planner_auto_<group>.csv.gz``). With
    `declared` the trees are declared-rows trees and each run declares the
    vector's total (`rows=`), spending nothing on features (share column 0)."""
    import ektelo
    from ektelo import plans
    from ektelo.inference import ConvergenceError
    from ektelo.planner import DecisionTable

    frames = []
    for group, per in trees.items():
        cache = folder / f"planner_auto_{group}.csv.gz"
        done = _load_auto(cache)
        have = {(r.tree, r.dataset, r.scale, round(r.eps, 6), r.seed)
                for r in done.itertuples(index=False)}
        jobs = []
        for dataset, tree in per.items():
            t0 = ",".join(tier0[(group, e)] for e in grid.epsilons)
            key = _tree_key(tree, share, t0, declared)
            for scale in grid.scales:
                for eps in grid.epsilons:
                    for seed in range(grid.seeds):
                        if (key, dataset, scale, round(eps, 6), seed) not in have:
                            jobs.append((key, dataset, tree, scale, eps, seed))
        rows: list[dict[str, Any]] = []
        last = time.perf_counter()
        with one_blas_thread():
            for i, (key, dataset, tree, scale, eps, seed) in enumerate(
                    progress(jobs, f"{label} {group} share={share:g}"), 1):
                table = DecisionTable.from_dict({
                    "version": 1, "share": share, "trained_on": f"DPBench without {dataset}",
                    "trees": {} if declared else {group: tree},
                    "declared": {group: tree} if declared else {}})
                x = pg.dataset_vector(pg.GROUP_DIMS[group], dataset, scale, seed)
                W = pg.workload_for(group)
                noise = zlib.crc32(f"auto|{group}|{dataset}|{scale}|{eps}|{seed}|{share}".encode())
                X = ektelo.protect(x, epsilon=eps, seed=noise)
                flat = x.reshape(-1).astype(np.float64)
                try:
                    x_hat = plans.run("auto", X, W, eps, kind=pg.GROUP_KIND[group], table=table,
                                      rows=float(flat.sum()) if declared else None)
                except ConvergenceError:  # the chosen plan gave no answer (MWEM: see the grid)
                    err = math.inf
                else:
                    est = np.asarray(x_hat, dtype=np.float64).reshape(-1)
                    err = float(np.linalg.norm(W.matvec(flat) - W.matvec(est))
                                / (W.shape[0] * flat.sum()))
                rows.append(dict(zip(AUTO_COLUMNS, (key, group, dataset, scale, eps, seed,
                                                    0.0 if declared else share, err,
                                                    float(X.budget.spent)),
                                     strict=True)))
                if time.perf_counter() - last > 20 or i == len(jobs):
                    _append_auto(cache, rows)
                    rows = []
                    last = time.perf_counter()
        got = _load_auto(cache)
        t0 = ",".join(tier0[(group, e)] for e in grid.epsilons)
        wanted = {_tree_key(t, share, t0, declared) for t in per.values()}
        got = got[got["tree"].isin(wanted) & got["scale"].isin(grid.scales)
                  & got["eps"].isin(grid.epsilons) & (got["seed"] < grid.seeds)]
        frames.append(got)
    found = pd.concat(frames, ignore_index=True)
    bad = found[~np.isclose(found["spent"], found["eps"], rtol=1e-9)]
    if len(bad):
        raise RuntimeError(f"auto spent other than ε in {len(bad)} runs, e.g. "
                           f"{bad.iloc[0].to_dict()}")
    return found.reset_index(drop=True)


def _load_auto(path: Path) -> pd.DataFrame:
    if not path.exists():
        return pd.DataFrame({c: [] for c in AUTO_COLUMNS})
    with gzip.open(path, "rt") as fh:
        table = pd.read_csv(fh, dtype={"scale": str, "dataset": str, "tree": str})
    table["eps"] = table["eps"].astype(float)
    return table


def _append_auto(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    buf = io.StringIO()
    pd.DataFrame(rows, columns=list(AUTO_COLUMNS)).to_csv(
        buf, index=False, header=not path.exists(), float_format="%.6g")
    with gzip.open(path, "at") as fh:
        fh.write(buf.getvalue())


# -- the experiment ----------------------------------------------------------------------------
def _tier0_plans(grid: pg.Grid) -> dict[tuple[str, float], str]:
    """Tier 0's plan per (group, ε), priced in this process: its Monte-Carlo
    prices use the fixed `tier0.MC_SEEDS` seeds, as at run time, so Tier 0's
    choice is the same in training, in every `plans.run("auto")` of this
    process (which reads the same price cache) and for a user."""
    return {(g, e): pt.tier0_plan(g, e) for g in grid.groups for e in grid.epsilons}


def _check_coverage(errors: pd.DataFrame, grid: pg.Grid, what: str, seeds: int) -> None:
    """Every (case, seed, plan) of `grid` must be in `errors`: say what is missing."""
    expected = sum(len(_names(grid, g)) * len(grid.plans_for(g)) for g in grid.groups)
    expected *= len(grid.scales) * len(grid.epsilons) * seeds
    if len(errors) < expected:
        raise RuntimeError(f"the grid {what} has {len(errors)} of {expected} errors: run the "
                           "grid first (python -m experiments.planner_grid)")


def run_experiment(out: Path, quick: bool = False, dims: int | None = None,
                   shares: tuple[float, ...] | None = None, write_table: bool = False,
                   table_path: Path = TABLE_PATH) -> pd.DataFrame:
    """The whole pipeline (module docstring); returns the per-case regret
    rows. `write_table`: train on every dataset and write `table_path`."""
    return _run_experiment(out, quick, dims, shares, write_table, table_path)


def _run_experiment(out: Path, quick: bool, dims: int | None,
                    shares: tuple[float, ...] | None, write_table: bool,
                    table_path: Path) -> pd.DataFrame:
    require_shared("dpbench")
    started = time.perf_counter()
    shares = shares or SHARES
    if any(not 0 < s < 1 for s in shares):
        raise ValueError(f"shares must lie strictly between 0 and 1, got {shares}")
    factors = (1.0, *(round(1 - s, 6) for s in shares))
    grid = pg.grid_for_dims(dims, factors, quick)
    tier0 = _tier0_plans(grid)
    extra: dict[int, tuple[str, ...]] = {}
    for (g, _), plan in tier0.items():
        extra[pg.GROUP_DIMS[g]] = (*extra.get(pg.GROUP_DIMS[g], ()), plan)
    grid = grid.with_plans(extra)
    folder = out if quick else pg.RESULTS
    print(f"planner: {pg.describe(grid)}", flush=True)
    rows = pg.run_grid(grid, folder, log=sys.stderr)
    # training sees the grid's first `seeds` seeds of every plan; the report's
    # best in hindsight and fixed choices also the data-independent extras
    full = pg.scaled_errors(rows, grid, 1.0, extra_di=False)
    _check_coverage(full, grid, "at the full ε", grid.seeds)
    best = pt.best_in_hindsight(full)
    full_report = pg.scaled_errors(rows, grid, 1.0)

    # training: per share and leaf size, simulated leave-one-dataset-out regret
    t0 = {g: {e: p for (gg, e), p in tier0.items() if gg == g} for g in grid.groups}
    trained: dict[float, tuple[dict[str, pt.Cases], dict[str, dict[str, dict[str, Any]]],
                               dict[str, float]]] = {}
    sim: list[dict[str, Any]] = []
    for share in shares:
        factor = round(1 - share, 6)
        part = pg.scaled_errors(rows, grid, factor)
        _check_coverage(part, grid, f"at (1 - {share:g})ε", grid.seeds_at(factor))
        feats = case_features(grid, share)
        cases = {g: pt.build_cases(g, feats, part, full, t0[g]) for g in grid.groups}
        trained[share] = _train_groups(cases, part, best, tier0, share, sim)
    # the declared-rows track: public facts only, the plan at the full ε
    public = declared_features(grid)
    declared_cases = {g: pt.build_cases(g, public, full, full, t0[g]) for g in grid.groups}
    _, declared_trees, declared_leaf = _train_groups(declared_cases, full, best, tier0, 0.0, sim)
    sim_table = pd.DataFrame(sim)
    bought = sim_table[sim_table["track"] == "features"]
    overall = bought.groupby(["share", "group"])["sim_gmean"].min().groupby("share").apply(
        lambda v: gmean(v))
    share = float(overall.idxmin())
    print("\nleave-one-dataset-out regret simulated from the grid (features measured, plan "
          "errors at (1-share)ε from the grid; declared: public facts, plan at ε):")
    print(sim_table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"chosen leaf sizes: {trained[share][2]}; declared: {declared_leaf}")
    print(f"chosen share: {share:g}\n", flush=True)

    # evaluation: plans.run("auto", ...) with the held-out table, both tracks
    cases, trees, leaf = trained[share]
    leaves = fixed_leaves(grid)
    fixed = run_fixed(grid, leaves, share, folder, tier0)
    table = _evaluate(run_auto(grid, trees, share, folder, tier0), full_report, fixed, trees,
                      tier0, out, NAME, "auto (features bought at share·ε)")
    _evaluate(run_auto(grid, declared_trees, share, folder, tier0, declared=True),
              full_report, fixed, declared_trees, tier0, out, f"{NAME}_declared",
              "auto with the row count declared public (nothing spent on features)")
    sim_table.to_csv(out / f"{NAME}_shares.csv", index=False)
    _plot(out, table)

    if write_table:
        full_trees = {g: _train(cases[g], leaf[g]) for g in grid.groups}
        full_declared = {g: _train(declared_cases[g], declared_leaf[g]) for g in grid.groups}
        _write_table(full_trees, full_declared, share, grid, table_path)
    print(f"total wall time {time.perf_counter() - started:.0f} s; wrote {out / (NAME + '.csv')}")
    return table


def _train_groups(cases: dict[str, pt.Cases], part: pd.DataFrame, best: pd.DataFrame,
                  tier0: dict[tuple[str, float], str], share: float,
                  sim: list[dict[str, Any]]) -> tuple[dict[str, pt.Cases], dict[
                      str, dict[str, dict[str, Any]]], dict[str, float]]:
    """Per group: the leaf size with the least simulated leave-one-dataset-out
    regret and its held-out trees; appends each leaf size's figures to `sim`
    (track "declared" when share is 0: public features, plan at the full ε)."""
    trees, leaf = {}, {}
    for g, c in cases.items():
        found = []
        for ml in MIN_LEAF_SHARES:
            loo = loo_trees(c, ml)
            r = simulated_regret(c, loo, part, best, tier0)
            sim.append({"track": "declared" if share == 0 else "features", "share": share,
                        "group": g, "min_leaf_share": ml, "sim_gmean": gmean(r),
                        "sim_p90": float(np.percentile(r, 90))})
            found.append((gmean(r), ml, loo))
        _, leaf[g], trees[g] = min(found, key=lambda f: f[0])
    return cases, trees, leaf


def _evaluate(auto: pd.DataFrame, full_report: pd.DataFrame, fixed: dict[str, pd.DataFrame],
              trees: dict[str, dict[str, dict[str, Any]]], tier0: dict[tuple[str, float], str],
              out: Path, name: str, title: str) -> pd.DataFrame:
    """Regret tables of one track's runs: printed, and written to `out` as
    `<name>.csv`, `<name>_by_eps.csv`, `<name>_by_scale.csv`, `<name>.md`."""
    table = regret_table(auto, full_report, fixed)
    labels = [label for label in fixed if table[f"{label}_regret"].notna().any()]
    by_eps = summarise(table, ["group", "eps"], labels)
    by_scale = summarise(table, ["group", "scale"], labels)
    by_group = summarise(table, ["group"], labels)
    print(f"\n== {title} ==")
    _print_tables(by_eps, by_scale, by_group, trees, tier0)
    table.to_csv(out / f"{name}.csv", index=False)
    by_eps.to_csv(out / f"{name}_by_eps.csv", index=False)
    by_scale.to_csv(out / f"{name}_by_scale.csv", index=False)
    (out / f"{name}.md").write_text(f"## {title}\n\n" + "\n\n".join(
        f"### by {label}\n\n{_markdown(frame)}" for label, frame in
        (("group × ε", by_eps), ("group × scale", by_scale), ("group", by_group))) + "\n")
    return table


def _write_table(trees: dict[str, dict[str, Any]], declared: dict[str, dict[str, Any]],
                 share: float, grid: pg.Grid, path: Path) -> None:
    from ektelo.planner import DecisionTable

    trained_on = (f"DPBench (Hay et al. 2016): {pg.describe(grid)}; "
                  f"cost = log regret at (1-share)ε (declared trees: at ε) vs the best plan "
                  f"in hindsight at ε; "
                  f"python -m experiments planner --write-table")
    table = DecisionTable.from_dict({"version": 1, "share": share, "trees": trees,
                                     "declared": declared, "trained_on": trained_on})
    table.save(path)
    DecisionTable.load(path)  # what the package will read
    print(f"wrote {path}")


def _markdown(frame: pd.DataFrame) -> str:
    """`frame` (as `_fmt` shows it) as a Markdown table, for the docs."""
    shown = _shown(frame)
    lines = ["| " + " | ".join(map(str, shown.columns)) + " |",
             "|" + "---|" * len(shown.columns)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in shown.itertuples(index=False)]
    return "\n".join(lines)


def _fmt(frame: pd.DataFrame) -> str:
    return str(_shown(frame).to_string(index=False))


def _shown(frame: pd.DataFrame) -> pd.DataFrame:
    shown = frame.copy()
    for c in shown.columns:
        if c.startswith("win_vs_"):
            shown[c] = shown[c].map(lambda v: "" if pd.isna(v) else f"{100 * v:.0f}%")
        elif shown[c].dtype == float and c != "eps":
            shown[c] = shown[c].map(lambda v: "" if pd.isna(v) else f"{v:.3f}")
    return shown


def _print_tables(by_eps: pd.DataFrame, by_scale: pd.DataFrame, by_group: pd.DataFrame,
                  trees: dict[str, dict[str, dict[str, Any]]],
                  tier0: dict[tuple[str, float], str]) -> None:
    with pd.option_context("display.width", 220, "display.max_columns", 40):
        print("regret of auto (leave-one-dataset-out, plans.run('auto')) by group × ε:")
        print(_fmt(by_eps))
        print("\nby group × scale:")
        print(_fmt(by_scale))
        print("\nby group:")
        print(_fmt(by_group))
    print("Tier 0:", ", ".join(f"{g} ε={e:g}: {p}" for (g, e), p in sorted(tier0.items())))
    for g, per in trees.items():
        for d, tree in per.items():
            print(f"tree {g} without {d}: {json.dumps(tree)}")
    print(f"target: geometric-mean regret ≤ {TARGET} and below every fixed choice ('met')")


def _plot(out: Path, table: pd.DataFrame) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted(set(table["group"]))
    fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 4.5), squeeze=False)
    for ax, g in zip(axes[0], groups, strict=True):
        sub = table[table["group"] == g]
        for col, label in (("regret", "auto"), ("HB_regret", "HB"), ("rules_regret", "rules"),
                           ("Tier0_regret", "Tier 0")):
            if col in sub and sub[col].notna().any():
                v = np.sort(sub[col].to_numpy(dtype=float))
                ax.plot(v, np.arange(1, v.size + 1) / v.size, label=label)
        ax.axvline(TARGET, color="0.5", ls="--", lw=0.8)
        ax.set_xscale("log")
        ax.set_title(g)
        ax.set_xlabel("regret (error / best in hindsight)")
        ax.set_ylabel("fraction of cases ≤")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / f"{NAME}.png", dpi=120)
    plt.close(fig)


@experiment(NAME, options=("dims", "shares", "write_table"))
def run(out: Path, trials: int | None, quick: bool, dims: int | None = None,
        shares: tuple[float, ...] | None = None, write_table: bool = False) -> pd.DataFrame:
    """The planner experiment (see the module docstring); `trials` is not
    used (the grid's seeds are fixed at 5, 2 in the quick run)."""
    if trials is not None:
        raise ValueError("planner takes no --trials (5 seeds; 2 with --quick)")
    return run_experiment(out, quick, dims, shares, write_table)
