"""`make run`: the paper's flagship example, the CDF estimator of Algorithm 1.

On a census-like table that ektelo generates itself (`ektelo.datasets.census_like`:
no download, no shared data), estimate the salary CDF of men in their thirties
with ε = 1, through the public API:

    where(sex = M and 30 ≤ age < 40) → select(salary) → vectorize
    → AHP partition (ε/2) → reduce → Identity → Laplace (ε/2) → NNLS → Prefix

and print the private CDF next to the true one with each row's noise-only
interval and whether it covers the truth (it leaves out the partition's
bias, and the table says how many rows it misses), the error, the budget
spent, and the path of a saved plot (when matplotlib is installed: the `plot` extra)
with the private CDF's 95% band: the noise-only interval conditional on
AHP's released partition (`ektelo.session.noise_only_std` over the
measurements the plan took; it leaves out the partition's bias and NNLS's
clipping). Noise comes from the secure sampler.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import ektelo
from ektelo import col, plans
from ektelo.datasets import SALARY_BIN, census_like
from ektelo.matrix import Prefix
from ektelo.port import ProtectedTable
from ektelo.session import Recorder, noise_only_std


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--out", default="out", help="directory for the plot")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    frame, domain = census_like(args.rows, seed=7)
    print(f"Generated a census-like table: {len(frame):,} rows, attributes "
          f"{', '.join(domain.names)} (domain of {domain.size:,} cells)")

    protected = ektelo.protect(frame, domain, epsilon=args.epsilon)  # the kernel holds the data
    assert isinstance(protected, ProtectedTable)
    recorder = Recorder(protected.port)  # keeps the (public) measurements the plan takes
    table = ProtectedTable(recorder, protected.node)
    men_in_thirties = (col("sex") == "M") & (col("age") >= 30) & (col("age") < 40)
    private_cdf = plans.cdf_estimator(
        table, None, args.epsilon, attribute="salary", where=men_in_thirties
    )

    # The true CDF, computed here only because the demo owns its synthetic data.
    chosen = frame[(frame["sex"] == "M") & frame["age"].between(30, 39)]
    counts = np.bincount(
        (chosen["salary"] // SALARY_BIN).astype(int), minlength=domain["salary"].size
    )
    true_cdf = np.cumsum(counts)
    # 95% band: noise only, given the public partition (normal approximation)
    band = 1.96 * noise_only_std(Prefix(true_cdf.size), recorder.measurements)

    budget = table.budget
    records = int(true_cdf[-1])
    scaled = float(np.linalg.norm(private_cdf - true_cdf) / (true_cdf.size * records))
    worst = float(np.max(np.abs(private_cdf - true_cdf)) / records)
    print(f"\nSalary CDF of men aged 30-39 ({records:,} people), ε = {args.epsilon:g}")
    print(f"{'salary ≤':>10} {'true':>9} {'private':>9} {'diff':>8} {'±95% noise':>11} "
          f"{'covers':>6}")
    shown = (9, 19, 29, 39, 49, 59, 79, 99, 149, 199, 299, 499)
    missed = 0
    for k in shown:
        diff = private_cdf[k] - true_cdf[k]
        covers = abs(diff) <= band[k]
        missed += not covers
        print(f"{(k + 1) * SALARY_BIN:>10,} {true_cdf[k]:>9,.0f} {private_cdf[k]:>9,.1f} "
              f"{diff:>+8.1f} {band[k]:>11.1f} {'yes' if covers else 'NO':>6}")
    print(f"±95% noise: the interval of the noise alone, given the partition AHP\n"
          f"released (normal approximation). It leaves out the partition's bias (cells\n"
          f"merged into one group share its count), so it undercovers: {missed} of "
          f"{len(shown)} rows\nabove miss the true CDF (known here only because the demo "
          f"made its data).")
    print(f"\nError: max |CDF difference| = {worst:.4f} of the group; DPBench scaled L2 "
          f"error = {scaled:.2e}")
    print(f"Budget: total ε = {budget.total:g}, spent ε = {budget.spent:g}, "
          f"remaining ε = {budget.remaining:g}")
    for request in table.history():
        eps = "-" if request.eps is None else f"{float(request.eps):g}"  # (None: a ρ request)
        print(f"  {request.operation:<14} ε = {eps}")

    out = Path(args.out)
    plot_path = out / "cdf.png"
    saved = _plot(true_cdf, private_cdf, band, plot_path, args.epsilon)
    elapsed = f"{time.perf_counter() - start:.1f} s in all"
    if saved:
        print(f"Plot saved to {plot_path.resolve()} ({elapsed})")
    else:
        print(f"Plot skipped: matplotlib is not installed (pip install 'ektelo[plot]') "
              f"({elapsed})")


def _plot(
    true_cdf: np.ndarray, private_cdf: np.ndarray, band: np.ndarray, path: Path, eps: float
) -> bool:
    """Draw the two CDFs to `path`; False (nothing written) without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return False

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    salary = (np.arange(true_cdf.size) + 1) * SALARY_BIN / 1000
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(salary, true_cdf, label="true CDF", lw=2)
    line = ax.plot(salary, private_cdf, label=f"private CDF (ε = {eps:g})", lw=1.2, ls="--")[0]
    ax.fill_between(salary, private_cdf - band, private_cdf + band, alpha=0.25,
                    color=line.get_color(), label="95% band (noise only, given the partition)")
    ax.set_xlabel("salary (thousands)")
    ax.set_ylabel("people with salary ≤ x")
    ax.set_xlim(0, 250)
    ax.set_title("Algorithm 1: CDF estimator on a census-like table")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


if __name__ == "__main__":
    main()
