"""Tier 0 of the planner (issue #29): how long ranking every data-independent
candidate takes, and how each was priced, on 1-D 4096 cells (prefix and 1000
random ranges) and 2-D 256×256 (1000 random ranges), Laplace and Gaussian.

Each setting runs in a fresh process state for the prices (the in-process
cache cleared) with the workload built beforehand; the figures printed are
wall seconds for `planner.rank` per setting and per candidate, and each
candidate's RMSE at ε = 1 (ρ = 0.5) with its method. The Monte-Carlo
candidates run all `MC_SEEDS` fixed seeds each (a choice that does not
depend on the machine's load); the seeds used are printed. `--threads N`
limits BLAS threads (threadpoolctl) — on a shared, loaded machine one thread
avoids oversubscription."""

from __future__ import annotations

import argparse
import time

from threadpoolctl import threadpool_limits

from ektelo.matrix import Prefix
from ektelo.planner import price, rank, tier0
from ektelo.workload import builders


def settings() -> list[tuple[str, str, tuple[int, ...], object]]:
    return [
        ("1-D 4096 prefix", "prefix", (4096,), Prefix(4096)),
        ("1-D 4096 1000 random ranges", "random-ranges", (4096,),
         builders.random_range((4096,), 1000, 0)),
        ("2-D 256x256 1000 random ranges", "random-ranges", (256, 256),
         builders.random_range((256, 256), 1000, 0)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    with threadpool_limits(args.threads):
        rank(Prefix(16), "prefix", (16,), eps=1.0)  # imports and first-call set-up
        for label, kind, shape, W in settings():
            for mech, kw in (("laplace", {"eps": 1.0}), ("gaussian", {"rho": 0.5})):
                tier0.clear_cache()
                start = time.perf_counter()
                ranked = rank(W, kind, shape, **kw)
                total = time.perf_counter() - start
                print(f"{label}, {mech}: Tier 0 in {total:.2f} s")
                for c in ranked:
                    tier0.clear_cache()
                    t = time.perf_counter()
                    p = price(c.plan, shape, W, gaussian=mech == "gaussian")
                    dt = time.perf_counter() - t
                    rmse = "unpriced" if c.rmse is None else f"±{c.rmse:.3g}"
                    seeds = f", {p.seeds} seeds" if p.method == "monte-carlo" else ""
                    print(f"    {c.plan:<10} {rmse:>10}  {c.method or '-':<12}{seeds:<11} "
                          f"{dt:6.2f} s")
                print(flush=True)


if __name__ == "__main__":
    main()
