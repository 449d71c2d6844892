"""Census case study (εktelo §9.2, §10.1.2, Table 5): census-style workloads
on a multi-dimensional table, answered by striped, PrivBayes and baseline plans.

Data. The paper's extract of the March 2000 CPS (49,436 households; income in
5,000 bins × age 5 × marital status 7 × race 4 × gender 2 = 1.4M cells) is not
available; we use the shared UCI adult table (48,842 rows, integer-coded) with
a census-like domain of the same attributes, written by hand:

* income-like attribute (the stripe axis, last): capital-gain, 100 codes.
  It is a money amount and, like income over 5,000 narrow bins, heavy-tailed
  and mostly empty along its axis (23 of 100 codes occur; 92 % of rows at 0):
  the structure — long empty or uniform runs in every stripe — that the
  striped plans and DAWA exploit in the paper. hours-per-week (99 codes, 96
  occurring, heaped at 40) is run as a second, robustness setting in the full
  experiment: it is the other fine-grained numeric attribute, but dense and
  spiky, the opposite case for a data-dependent partition.
* age: the 85 codes in 17 bins of 5 (quick: 5 bins of 17, like the paper's 5);
* marital-status (7), race (5), sex (2).
Full: 17·7·5·2·100 = 119,000 cells (hours-per-week: 117,810).

Workloads (on the full vector, in Kronecker form so HDMM can optimise them):
Identity (⊗ of identities); all 2-way marginals; Prefix(income) × {value or
any} on the others, i.e. Prefix ⊗ VStack(Identity, Total) on every other
attribute.

Algorithms: identity, privbayes, privbayes_ls (table plans), hb_striped,
hb_striped_kron, dawa_striped (stripes along the income-like axis) and hdmm.
The plans whose measurements depend on the workload (dawa_striped, hdmm) run
once per workload; the others' one estimate is scored on all three. A
reference row `zero_reference` (x̂ = 0, not a private plan) gives the size of
‖Wx‖ next to the noise: the regime the scaled error is measured in.

Error: DPBench's scaled per-query L2 error ‖Wx − Wx̂‖₂ / (|W|·‖x‖₁)
(`ektelo.workload.scaled_l2_error`), mean over trials.

ε: §10.1.2 does not state it. Table 5's Identity entry fixes it: Identity's
expected error on the identity workload is √(2n)/ε / (n·N), and with
n = 1.4M, N = 49,436 that is 24.18e-9 exactly at ε = 1. We run ε ∈ {0.1, 1}
and compare ε = 1 with the paper.

Noise is seeded (research mode) for reproducibility; the base seed is in the
CSV. `--trials N` sets the trials (default 5). `--quick`: a smaller domain
(age in 5 bins × race × sex × capital-gain = 5,000 cells), no hb_striped
(its measurements are hb_striped_kron's), ε = 1, 1 trial.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import ektelo
from ektelo import Domain
from ektelo.matrix import EMatrix, Identity, Kronecker, Prefix, Total, VStack
from ektelo.plans import (
    dawa_striped,
    hb_striped,
    hb_striped_kron,
    hdmm,
    identity,
    privbayes,
    privbayes_ls,
)
from ektelo.workload import marginals, scaled_l2_error

from .common import experiment, one_blas_thread, progress, require_shared, save_outputs

__all__ = ["census_domain", "census_workloads", "run"]

INCOME = "capital-gain"
ROBUSTNESS_INCOME = "hours-per-week"
OTHERS = ("age", "marital-status", "race", "sex")
EPSILONS = (0.1, 1.0)
TRIALS = 5
SEED = 20180602
WORKLOADS = ("Identity", "2-way marginals", "Prefix(income)")
ALGORITHMS = (
    "identity",
    "privbayes",
    "privbayes_ls",
    "hb_striped",
    "hb_striped_kron",
    "dawa_striped",
    "hdmm",
)
_PLANS: dict[str, Any] = {
    "identity": identity,
    "privbayes": privbayes,
    "privbayes_ls": privbayes_ls,
    "hb_striped": hb_striped,
    "hb_striped_kron": hb_striped_kron,
    "dawa_striped": dawa_striped,
    "hdmm": hdmm,
}
TABLE_PLANS = {"privbayes", "privbayes_ls"}
PER_WORKLOAD = {"dawa_striped", "hdmm"}  # measurements depend on the workload
# Table 5 of the paper (CPS, 1.4M cells, ε = 1): error in units of UNITS.
PAPER = {
    "identity": (24.18, 12.04, 18.97),
    "privbayes": (76.93, 65.31, 28.70),
    "privbayes_ls": (5.86, 13.29, 36.81),
    "hb_striped": (70.31, 21.91, 4.13),
    "dawa_striped": (3.43, 1.96, 2.50),
}
UNITS = dict(zip(WORKLOADS, (1e-9, 1e-7, 1e-7), strict=True))
PAPER_FINDINGS = (
    "Paper (Table 5, CPS): DAWA-Striped has the lowest error on all three workloads; "
    "PrivBayes is worse than Identity on all three; PrivBayesLS improves on PrivBayes "
    "on Identity and 2-way marginals (not on Prefix); HB-Striped beats Identity only "
    "on Prefix(income)."
)


def census_domain(
    income: str = INCOME, age_bins: int = 17, others: tuple[str, ...] = OTHERS
) -> Domain:
    """The census-like domain on adult: age (coarsened from its 85 codes into
    `age_bins` equal bins) and the other attributes in `others` (default
    marital-status, race, sex), then `income`."""
    if 85 % age_bins:
        raise ValueError(f"age_bins must divide 85, got {age_bins}")
    sizes = {"marital-status": 7, "race": 5, "sex": 2, "hours-per-week": 99, "capital-gain": 100}
    if income not in ("hours-per-week", "capital-gain"):
        raise ValueError(f"income must be hours-per-week or capital-gain, got {income!r}")
    if others[:1] != ("age",) or not set(others) <= set(OTHERS):
        raise ValueError(f"others must start with age and be among {OTHERS}, got {others}")
    width = 85 // age_bins
    spec: dict[str, Any] = {"age": {"bins": list(range(0, 86, width))}}
    spec.update({name: sizes[name] for name in (*others[1:], income)})
    return Domain.from_dict(spec)


def census_workloads(shape: tuple[int, ...]) -> dict[str, EMatrix]:
    """The three workloads of Table 5 on a domain whose last axis is income."""
    *others, income = shape
    return {
        "Identity": Kronecker([Identity(n) for n in shape]),
        "2-way marginals": marginals(shape, 2),
        "Prefix(income)": Kronecker(
            [*(VStack([Identity(n), Total(n)]) for n in others), Prefix(income)]
        ),
    }


def _run_plan(
    name: str, frame: pd.DataFrame, domain: Domain, W: EMatrix, eps: float, seed: int
) -> np.ndarray:
    table = ektelo.protect(frame, domain, epsilon=eps, seed=seed)
    if name == "privbayes":
        x_hat = privbayes(table, W, eps, seed=seed)
    elif name in TABLE_PLANS:
        x_hat = _PLANS[name](table, W, eps)
    else:
        x_hat = _PLANS[name](table.vectorize(), W, eps)
    if abs(table.budget.spent - eps) > 1e-9 * eps:
        raise RuntimeError(f"{name} spent {table.budget.spent}, not ε = {eps}")
    return np.asarray(x_hat, dtype=np.float64)


def _setting(
    domain: Domain,
    frame_all: pd.DataFrame,
    algorithms: tuple[str, ...],
    epsilons: tuple[float, ...],
    trials: int,
    seeds: np.random.SeedSequence,
) -> list[dict[str, Any]]:
    income = domain.names[-1]
    frame = frame_all[list(domain.names)]
    codes = domain.encode(frame)
    x = np.bincount(np.ravel_multi_index(tuple(codes.T), domain.shape), minlength=domain.size)
    workloads = census_workloads(domain.shape)
    sizes = ", ".join(f"{a.name} {a.size}" for a in domain)
    print(
        f"census on adult: income-like = {income}; {sizes} = {domain.size} cells, {len(frame)} rows"
    )
    jobs = [
        (eps, t, name, wname)
        for eps in epsilons
        for t in range(trials)
        for name in algorithms
        for wname in (WORKLOADS if name in PER_WORKLOAD else (None,))
    ]
    states = seeds.generate_state(len(jobs))
    rows = [  # x̂ = 0: no privacy cost; shows how large ‖Wx‖ is next to the noise
        {
            "income_attr": income,
            "cells": domain.size,
            "epsilon": eps,
            "trial": 0,
            "algorithm": "zero_reference",
            "workload": w,
            "error": scaled_l2_error(workloads[w], x, np.zeros(domain.size)),
            "seconds": 0.0,
        }
        for eps in epsilons
        for w in WORKLOADS
    ]
    with one_blas_thread():
        for (eps, t, name, wname), seed in progress(
            list(zip(jobs, states, strict=True)), f"census ({income})"
        ):
            start = time.perf_counter()
            W_run = workloads[wname] if wname else workloads["Prefix(income)"]
            x_hat = _run_plan(name, frame, domain, W_run, eps, int(seed))
            seconds = time.perf_counter() - start
            for w in (wname,) if wname else WORKLOADS:
                rows.append(
                    {
                        "income_attr": income,
                        "cells": domain.size,
                        "epsilon": eps,
                        "trial": t,
                        "algorithm": name,
                        "workload": w,
                        "error": scaled_l2_error(workloads[w], x, x_hat),
                        "seconds": seconds,
                    }
                )
    return rows


def _summary(raw: pd.DataFrame) -> pd.DataFrame:
    keys = ["income_attr", "cells", "epsilon", "algorithm", "workload"]
    table = (
        raw.groupby(keys, sort=False)
        .agg(
            trials=("error", "size"),
            error_mean=("error", "mean"),
            error_std=("error", "std"),
            seconds_mean=("seconds", "mean"),
        )
        .reset_index()
    )
    table["error_std"] = table["error_std"].fillna(0.0)
    table["unit"] = table["workload"].map(UNITS)
    table["error_in_unit"] = table["error_mean"] / table["unit"]
    paper = [
        PAPER[a][WORKLOADS.index(w)] if a in PAPER and e == 1.0 else np.nan
        for a, w, e in table[["algorithm", "workload", "epsilon"]].itertuples(index=False)
    ]
    table["paper_in_unit"] = paper
    table["seed"] = SEED
    return table


def _ratios(rows: pd.DataFrame) -> dict[tuple[str, str, float], float]:
    """error / Identity's error, keyed by (algorithm, workload, ε)."""
    base = {
        (w, e): v
        for a, w, e, v in rows[["algorithm", "workload", "epsilon", "error_mean"]].itertuples(
            index=False
        )
        if a == "identity"
    }
    return {
        (a, w, e): v / base[(w, e)]
        for a, w, e, v in rows[["algorithm", "workload", "epsilon", "error_mean"]].itertuples(
            index=False
        )
    }


def _plot(table: pd.DataFrame, income: str) -> Any:
    def draw(ax: Any) -> None:
        rows = table[table["income_attr"] == income]
        ratio = _ratios(rows)
        epsilons = sorted(rows["epsilon"].unique())
        algorithms = [a for a in ALGORITHMS if a in set(rows["algorithm"])]
        groups = [(w, e) for w in WORKLOADS for e in epsilons]
        width = 0.8 / len(algorithms)
        for k, a in enumerate(algorithms):
            values = [ratio.get((a, w, e), np.nan) for w, e in groups]
            pos = np.arange(len(groups)) + (k - (len(algorithms) - 1) / 2) * width
            ax.bar(pos, values, width, label=a, color=f"C{k}")
            if a in PAPER:
                paper = [
                    PAPER[a][WORKLOADS.index(w)] / PAPER["identity"][WORKLOADS.index(w)]
                    if e == 1.0
                    else np.nan
                    for w, e in groups
                ]
                ax.plot(pos, paper, "k_", markersize=9, markeredgewidth=2)
        ax.plot([], [], "k_", markersize=9, markeredgewidth=2, label="paper (CPS, ε=1)")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xticks(np.arange(len(groups)))
        ax.set_xticklabels([f"{w}\nε={e:g}" for w, e in groups], fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("scaled L2 error ÷ Identity's (same workload and ε)")
        ax.legend(fontsize=7, ncol=2)
        ax.grid(True, axis="y", alpha=0.3)

    return draw


def _print_comparison(table: pd.DataFrame) -> None:
    print(PAPER_FINDINGS)
    for (income, eps), rows in table.groupby(["income_attr", "epsilon"], sort=False):
        wide = rows.pivot(index="algorithm", columns="workload", values="error_in_unit")
        order = [*ALGORITHMS, "zero_reference"]
        wide = wide.reindex(index=[a for a in order if a in wide.index], columns=WORKLOADS)
        if eps == 1.0:
            for w in WORKLOADS:
                wide[f"paper {w}"] = [
                    PAPER.get(a, (np.nan,) * 3)[WORKLOADS.index(w)] for a in wide.index
                ]
        print(f"\nincome-like = {income}, ε = {eps:g}; error in the paper's units")
        print("(Identity ×1e-9, others ×1e-7; 'paper' = Table 5, CPS, ε = 1)")
        print(wide.round(3).to_string())
        ratio = wide[list(WORKLOADS)].div(wide.loc["identity", list(WORKLOADS)], axis=1)
        if eps == 1.0:
            paper = pd.DataFrame(PAPER, index=WORKLOADS).T
            paper = paper.div(paper.loc["identity"], axis=1).add_prefix("paper ")
            ratio = ratio.join(paper)
        print("error / Identity's error (scale-free: our domain is 12x smaller than the CPS one)")
        print(ratio.round(3).to_string())
        private = wide.drop(index="zero_reference", errors="ignore")
        best = {w: private[w].idxmin() for w in WORKLOADS}
        print(f"  lowest error (private plans): {best}")
        pb_vs_id = {
            w: bool(wide.loc["privbayes", w] > wide.loc["identity", w])
            for w in WORKLOADS
            if "privbayes" in wide.index
        }
        print(f"  PrivBayes worse than Identity: {pb_vs_id}")
        if {"privbayes", "privbayes_ls"} <= set(wide.index):
            ls = {
                w: bool(wide.loc["privbayes_ls", w] < wide.loc["privbayes", w]) for w in WORKLOADS
            }
            print(f"  PrivBayesLS better than PrivBayes: {ls}")
        if "dawa_striped" in wide.index:
            dawa = {
                w: bool(wide.loc["dawa_striped", w] < wide.loc["identity", w]) for w in WORKLOADS
            }
            print(f"  DAWA-Striped better than Identity: {dawa}")


@experiment("census")
def run(out: Path, trials: int | None, quick: bool) -> pd.DataFrame:
    """Table 5 on adult; writes census.csv and census.png."""
    path = require_shared("adult/adult.csv")
    frame = pd.read_csv(path, usecols=[*OTHERS, INCOME, ROBUSTNESS_INCOME])
    trials = trials if trials is not None else (1 if quick else TRIALS)
    if quick:
        domains = [census_domain(INCOME, 5, ("age", "race", "sex"))]
        algorithms = tuple(a for a in ALGORITHMS if a != "hb_striped")  # = hb_striped_kron's
    else:
        domains = [census_domain(INCOME), census_domain(ROBUSTNESS_INCOME)]
        algorithms = ALGORITHMS
    epsilons = (1.0,) if quick else EPSILONS
    start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for domain, seeds in zip(
        domains, np.random.SeedSequence(SEED).spawn(len(domains)), strict=True
    ):
        rows += _setting(domain, frame, algorithms, epsilons, trials, seeds)
    table = _summary(pd.DataFrame(rows))
    elapsed = time.perf_counter() - start
    save_outputs(
        "census",
        out,
        table,
        _plot(table, INCOME),
        f"Census workloads on adult (income-like: {INCOME}; {trials} trial(s))",
    )
    _print_comparison(table)
    print(f"census: {elapsed:.1f} s")
    return table
