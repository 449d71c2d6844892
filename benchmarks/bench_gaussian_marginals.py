"""All 2-way marginals of the adult table: Laplace under ε-DP against the
Gaussian under zCDP, at the same (ε, δ) guarantee (issue #24's benchmark).

Each marginal is measured directly (the identity strategy on its cells) on
the table's projection `table.vectorize([a, b])` — 1-stable, so k marginals
compose sequentially at the table:

* Laplace, pure ε-DP: ε/k per marginal, noise std √2·k/ε per cell
  (an ε-DP release is also (ε, δ)-DP for every δ);
* Gaussian, ρ-zCDP with ρ = ρ(ε, δ) (the tight conversion, rounded down):
  ρ/k per marginal, σ = √(k/(2ρ)) per cell.

Prints, per ε: the noise std of each mechanism (from the measurements the
kernel returned), the measured RMSE over every cell of every marginal, and
their ratio; and the number of marginals k where the two cross. Reads
../shared/data/adult (skips with a message when it is absent).

    python benchmarks/bench_gaussian_marginals.py [--eps 1 0.5] [--delta 1e-9] [--k 2]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

import ektelo
from ektelo.budget import rho_of_epsilon_delta
from ektelo.matrix import Identity

ADULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult"


def run(frame: pd.DataFrame, domain: ektelo.Domain, eps: float, delta: float, k_way: int) -> None:
    cliques = list(itertools.combinations(domain.names, k_way))
    k = len(cliques)
    laplace = ektelo.protect(frame, domain, epsilon=eps, seed=1)
    gaussian = ektelo.protect(frame, domain, epsilon=eps, delta=delta, seed=2)
    rho = gaussian.budget.total
    errors: dict[str, list[float]] = {"laplace": [], "gaussian": []}
    scales: dict[str, float] = {}
    start = time.perf_counter()
    for c in cliques:
        x = np.bincount(
            np.ravel_multi_index(tuple(frame[a].to_numpy() for a in c), domain.project(c).shape),
            minlength=domain.project(c).size,
        )
        n = x.size
        m = laplace.vectorize(list(c)).laplace(Identity(n), eps=eps / k)
        g = gaussian.vectorize(list(c)).gaussian(Identity(n), rho=rho / k)
        errors["laplace"].extend((m.answers - x).tolist())
        errors["gaussian"].extend((g.answers - x).tolist())
        scales["laplace"] = math.sqrt(m.variance)
        scales["gaussian"] = math.sqrt(g.variance)
    seconds = time.perf_counter() - start
    rmse = {name: float(np.sqrt(np.mean(np.square(v)))) for name, v in errors.items()}
    cells = len(errors["laplace"])
    print(
        f"ε={eps:g}, δ={delta:g}: {k} {k_way}-way marginals, {cells} cells; ρ = {rho:.5f}; "
        f"spent ε {laplace.budget.spent:.6g}, ρ {gaussian.budget.spent:.6g} "
        f"({seconds:.1f} s for both)"
    )
    print(
        f"  noise std per cell  Laplace {scales['laplace']:9.2f}   Gaussian "
        f"{scales['gaussian']:9.2f}   ratio {scales['laplace'] / scales['gaussian']:.2f}×"
    )
    print(
        f"  measured RMSE       Laplace {rmse['laplace']:9.2f}   Gaussian "
        f"{rmse['gaussian']:9.2f}   ratio {rmse['laplace'] / rmse['gaussian']:.2f}×"
    )
    # std ratio as a function of k: (√2·k/ε) / √(k/(2ρ)) = 2·√(k·ρ)/ε; equal at k = ε²/(4ρ)
    print(f"  the two cross at k ≈ {eps**2 / (4 * rho):.1f} marginals (Gaussian wins above)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0])
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--k", type=int, nargs="+", default=[2, 3])
    args = parser.parse_args()
    if not (ADULT / "adult.csv").exists():
        print(f"skipped: the adult table is not at {ADULT}")
        return
    frame = pd.read_csv(ADULT / "adult.csv")
    domain = ektelo.Domain.from_json(json.loads((ADULT / "adult-domain.json").read_text()))
    frame = frame[list(domain.names)]
    print(f"ρ(ε=1, δ={args.delta:g}) = {rho_of_epsilon_delta(1.0, args.delta):.5f}")
    for k_way in args.k:
        for eps in args.eps:
            run(frame, domain, eps, args.delta, k_way)


if __name__ == "__main__":
    main()
