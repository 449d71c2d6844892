"""Groups per privacy unit (issue #37): L0/L∞ bounds against a rows bound, under zCDP.

The event table of `bench_units.py` (~10⁶ rows, 10⁵ persons, log-normal rows
per person; each person visits at most 3 of 50 sites) answers a Gaussian
histogram over `site` with ρ per person, two ways:

* `max_rows_per_unit = k`: one person moves the histogram by k (L1 and, at
  worst, L2), so σ = k/√(2ρ);
* `max_groups_per_unit = g`, `max_rows_per_group = r`, `group_by = site`: at
  most g sites of r rows each, so L2 = √g·r and σ = √g·r/√(2ρ).

For each bound it prints the truncation bias (RMS over cells, exact), the
noise (the kernel's σ, read from the measurement), the total √(bias²+σ²) and
one measured run; then the best of each family in hindsight and their ratio.

    PYTHONPATH=. python benchmarks/bench_unit_groups.py [--rows 1000000] [--rho 0.5]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

import ektelo
from benchmarks.bench_units import events
from ektelo.domain import Domain
from ektelo.matrix import Identity


def _run(frame, domain, rho, truth, **bounds):  # type: ignore[no-untyped-def]
    t = ektelo.protect(frame, domain, rho=rho, seed=0, privacy_unit="person", **bounds)
    x = t.vectorize(["site"])
    charge = rho / float(t.ledger()[1].stability) ** 2  # the L1 charge: (g·r)² or k²
    groups = bounds.get("max_groups_per_unit")
    if groups:
        charge *= groups  # the kernel charges g·r²: ask ρ/(g·r²) (Session does the same)
    m = x.gaussian(Identity(50), rho=charge)
    assert math.isclose(t.budget.spent, rho, rel_tol=1e-6), (t.budget.spent, rho)
    exact = _bounded_counts(frame, domain, **bounds)
    bias = float(np.sqrt(np.mean((truth - exact) ** 2)))
    sigma = float(m.noise.scale)
    run = float(np.sqrt(np.mean((np.asarray(m.answers) - truth) ** 2)))
    return bias, sigma, math.hypot(bias, sigma), run


def _bounded_counts(frame, domain, **bounds):  # type: ignore[no-untyped-def]
    """The bounded table's histogram, exactly (the data holder's view, no noise)."""
    from ektelo.engines import open_table
    from ektelo.kernel import PrivacyUnit

    if "max_rows_per_unit" in bounds:
        units = PrivacyUnit("person", bounds["max_rows_per_unit"])
    else:
        units = PrivacyUnit("person", bounds["max_rows_per_group"],
                            bounds["max_groups_per_unit"], tuple(bounds["group_by"]))
    engine, table = open_table(frame, domain, engine="memory", units=units, key="research-0")
    return np.asarray(engine.vectorize(table, [0], (50,)), dtype=float)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--persons", type=int, default=100_000)
    parser.add_argument("--rho", type=float, default=0.5)
    args = parser.parse_args()
    frame = events(args.rows, args.persons)
    domain = Domain.from_json({"site": 50, "hour": 168})
    truth = np.bincount(frame["site"], minlength=50).astype(float)
    sites = frame.groupby("person")["site"].nunique()
    print(f"{len(frame):,} rows, {sites.size:,} persons; sites per person: max {sites.max()}, "
          f"mean {sites.mean():.2f}; ρ = {args.rho} per person (Gaussian histogram by site)")
    print(f"{'bound':>22} | {'bias':>8} {'σ':>8} {'total':>8} {'run':>8}")
    best: dict[str, tuple[float, str]] = {}
    for k in (8, 16, 32, 64, 128, 256):
        row = _run(frame, domain, args.rho, truth, max_rows_per_unit=k)
        name = f"rows/unit k={k}"
        print(f"{name:>22} | {row[0]:>8.1f} {row[1]:>8.1f} {row[2]:>8.1f} {row[3]:>8.1f}")
        best["rows"] = min(best.get("rows", (math.inf, "")), (row[2], name))
    for r in (4, 8, 16, 32, 64, 128):
        row = _run(frame, domain, args.rho, truth, max_groups_per_unit=3, max_rows_per_group=r,
                   group_by=["site"])  # fmt: skip
        name = f"groups g=3, r={r}"
        print(f"{name:>22} | {row[0]:>8.1f} {row[1]:>8.1f} {row[2]:>8.1f} {row[3]:>8.1f}")
        best["groups"] = min(best.get("groups", (math.inf, "")), (row[2], name))
    (a, na), (b, nb) = best["rows"], best["groups"]
    print(f"best in hindsight: {na} total {a:.1f}; {nb} total {b:.1f}; ratio {b / a:.2f}")


if __name__ == "__main__":
    main()
