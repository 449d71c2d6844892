"""PrivBayes+PGM and HDMM+PGM (`ektelo.plans.pgm`) next to MST and AIM on
the adult table (issue #25's accuracy benchmark).

Two settings, each at ε = 1 (``--eps`` for others; δ = 10⁻⁹ for the zCDP
plans) over a few seeds:

* ``adult`` — all 91 2-way marginals of the 14 attributes (48,842 rows,
  a 6.4·10¹⁷-cell domain), the issue's workload;
* ``adult5`` — all 10 pairs of five small attributes (workclass,
  marital-status, relationship, race, sex: 3,780 cells), where HDMM+PGM's
  model (the complete graph's junction tree is the whole domain) fits.

Per plan and seed it prints ``synth TV`` — the average over the pairs of
the total-variation distance ½‖p − q‖₁ between the true marginal and that
of a synthetic table with as many rows as the real one
(``model.synthetic(len(df))``) — and ``model TV`` (the model's own
marginals), the wall and CPU seconds of the plan, and the model's
junction-tree cells; a plan refused by the model-size guard
(`ModelTooLarge`) is printed with its message instead. ``direct`` (adult5
only) is every pair measured on its own projection with Gaussian noise at
ρ/10, negative counts clipped (no model; its "synth TV" is the same).

Budgets: MST, AIM and hdmm_pgm (Gaussian) spend ρ(ε = 1, δ = 10⁻⁹);
privbayes_pgm and hdmm_pgm (Laplace) spend a pure ε = 1 (a stronger
guarantee at the same ε).

``privbayes_pgm`` is PrivBayes+PGM at degree 2 with PrivBayes's
θ-usefulness cap (θ = 4, N from a 1% noisy count: the plan's defaults);
``privbayes_pgm_k3`` the same at degree 3, ``privbayes_pgm_rows`` at degree 2
with the row count declared (no count spent), ``privbayes_pgm_nocap`` the
fixed-k network (``theta=None``, the plan before the cap) and
``privbayes_pgm_k1`` degree 1 (all but ``_nocap`` at ``--theta``, default 4).

    PYTHONPATH=. python benchmarks/bench_pgm_plans.py [--seeds 3] [--settings adult adult5]
        [--eps 1] [--plans privbayes_pgm privbayes_pgm_k3 privbayes_pgm_rows
        privbayes_pgm_nocap privbayes_pgm_k1 hdmm_pgm hdmm_pgm_laplace mst aim direct]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import ektelo
from ektelo import plans
from ektelo.inference.graphical_model import ModelTooLarge
from ektelo.matrix import Identity

ADULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult"
FIVE = ["workclass", "marital-status", "relationship", "race", "sex"]
DELTA = 1e-9
ADULT_ROWS = 48_842  # adult's published row count (a public fact: declared, not measured)

# name -> (budget kind, runner(table, budget)); a runner returns a fitted model
THETA = {"theta": 4.0}  # privbayes_pgm's θ (--theta)
RUNNERS: dict[str, tuple[str, Callable[[Any, float], Any]]] = {
    "privbayes_pgm": ("epsilon", lambda t, b: plans.privbayes_pgm(t, None, b, **THETA)),
    "privbayes_pgm_k3": (
        "epsilon", lambda t, b: plans.privbayes_pgm(t, None, b, degree=3, **THETA)
    ),
    "privbayes_pgm_rows": (
        "epsilon", lambda t, b: plans.privbayes_pgm(t, None, b, rows=ADULT_ROWS, **THETA)
    ),
    "privbayes_pgm_nocap": ("epsilon", lambda t, b: plans.privbayes_pgm(t, None, b, theta=None)),
    "privbayes_pgm_k1": (
        "epsilon", lambda t, b: plans.privbayes_pgm(t, None, b, degree=1, **THETA)
    ),
    "hdmm_pgm": ("rho", lambda t, b: plans.hdmm_pgm(t, None, b, mechanism="gaussian")),
    "hdmm_pgm_laplace": ("epsilon", lambda t, b: plans.hdmm_pgm(t, None, b)),
    "mst": ("rho", lambda t, b: plans.mst(t, None, b)),
    "aim": ("rho", lambda t, b: plans.aim(t, None, b)),
}


def true_marginals(codes: np.ndarray, shape: tuple[int, ...]) -> dict[tuple[int, int], np.ndarray]:
    out = {}
    for i, j in itertools.combinations(range(len(shape)), 2):
        flat = np.ravel_multi_index((codes[:, i], codes[:, j]), (shape[i], shape[j]))
        out[i, j] = np.bincount(flat, minlength=shape[i] * shape[j]).astype(np.float64)
    return out


def mean_tv(truth: dict[tuple[int, int], np.ndarray], other: Callable[[int, int], Any]) -> float:
    errors = []
    for (i, j), p in truth.items():
        q = np.asarray(other(i, j), dtype=np.float64).reshape(-1)
        errors.append(0.5 * float(np.abs(p / p.sum() - q / q.sum()).sum()))
    return float(np.mean(errors))


def run_model(name: str, frame: pd.DataFrame, domain: ektelo.Domain, seed: int,
              truth: dict[tuple[int, int], np.ndarray], eps: float = 1.0) -> dict[str, Any]:
    kind, runner = RUNNERS[name]
    budget = {"epsilon": eps} if kind == "epsilon" else {"epsilon": eps, "delta": DELTA}
    table = ektelo.protect(frame, domain, seed=seed, **budget)
    start, cpu = time.perf_counter(), time.process_time()
    try:
        model = runner(table, table.budget.total)
    except ModelTooLarge as exc:
        return {"refused": str(exc), "spent": table.budget.spent}
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    assert table.budget.remaining <= 1e-9 * table.budget.total, table.budget
    names = domain.names
    synthetic = domain.encode(model.synthetic(len(frame), seed=seed))
    synth = true_marginals(synthetic, domain.shape)
    return {
        "synth": mean_tv(truth, lambda i, j: synth[i, j]),
        "model": mean_tv(truth, lambda i, j: model.marginal([names[i], names[j]])),
        "seconds": seconds,
        "cpu": cpu_seconds,
        "cells": model.size,
    }


def run_direct(frame: pd.DataFrame, domain: ektelo.Domain, seed: int,
               truth: dict[tuple[int, int], np.ndarray], eps: float = 1.0) -> dict[str, Any]:
    table = ektelo.protect(frame, domain, epsilon=eps, delta=DELTA, seed=seed)
    rho = table.budget.total
    start, cpu = time.perf_counter(), time.process_time()
    names = domain.names
    noisy = {
        (i, j): np.maximum(table.vectorize([names[i], names[j]]).gaussian(
            Identity(domain.shape[i] * domain.shape[j]), rho=rho / len(truth)).answers, 0.0)
        for i, j in truth
    }  # fmt: skip
    tv = mean_tv(truth, lambda i, j: noisy[i, j])
    return {"synth": tv, "model": tv, "seconds": time.perf_counter() - start,
            "cpu": time.process_time() - cpu, "cells": 0}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--settings", nargs="+", default=["adult5", "adult"])
    parser.add_argument("--plans", nargs="+", default=[*RUNNERS, "direct"])
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0])
    parser.add_argument("--theta", type=float, default=4.0, help="privbayes_pgm's θ")
    args = parser.parse_args()
    THETA["theta"] = args.theta
    if not (ADULT / "adult.csv").exists():
        print(f"SKIPPED: {ADULT} not found (the adult data lives in ../shared/data)")
        return
    full = pd.read_csv(ADULT / "adult.csv")
    adult = ektelo.Domain.from_json(json.loads((ADULT / "adult-domain.json").read_text()))
    for setting, eps in itertools.product(args.settings, args.eps):
        attrs = FIVE if setting == "adult5" else list(adult.names)
        frame, domain = full[attrs], adult.project(attrs)
        truth = true_marginals(domain.encode(frame), domain.shape)
        print(f"\n{setting}: {len(frame)} rows, {len(attrs)} attributes, {len(truth)} pairs, "
              f"domain {math.prod(domain.shape):.3g} cells; ε = {eps:g} "
              f"(δ = {DELTA:g} for ρ plans)")
        print(f"{'plan':19} {'seed':>4} {'synth TV':>9} {'model TV':>9} {'seconds':>8} "
              f"{'cpu s':>7} {'cells':>10}")  # fmt: skip
        summary: dict[str, list[dict[str, Any]]] = {}
        for name in args.plans:
            if name == "direct" and setting != "adult5":
                continue
            for seed in range(args.seeds):
                r = (run_direct(frame, domain, seed, truth, eps) if name == "direct"
                     else run_model(name, frame, domain, seed, truth, eps))  # fmt: skip
                if "refused" in r:
                    print(f"{name:19} {seed:4d} refused (spent {r['spent']:.3g}): {r['refused']}",
                          flush=True)
                    continue
                summary.setdefault(name, []).append(r)
                print(f"{name:19} {seed:4d} {r['synth']:9.4f} {r['model']:9.4f} "
                      f"{r['seconds']:8.1f} {r['cpu']:7.1f} {r['cells']:10d}", flush=True)
        print(f"mean ± standard error over seeds ({setting}, ε = {eps:g})")
        for name, rows in summary.items():
            def stat(key: str, rows: list[dict[str, Any]] = rows) -> str:
                v = np.array([r[key] for r in rows], dtype=np.float64)
                se = v.std(ddof=1) / math.sqrt(v.size) if v.size > 1 else float("nan")
                return f"{v.mean():.4f} ± {se:.4f}"

            cpu = np.mean([r["cpu"] for r in rows])
            print(f"  {name:19} synth {stat('synth')}  model {stat('model')}  cpu {cpu:.1f} s  "
                  f"({len(rows)} seeds)")


if __name__ == "__main__":
    main()
