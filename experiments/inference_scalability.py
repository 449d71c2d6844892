"""inference-scalability: least-squares and NNLS inference time against the
size of the data vector (εktelo §10.2.2, the inference-scaling figure).

Measurements: the binary hierarchy H2 (Hay et al. 2010) over n = 2ᵏ cells —
every node of a complete binary tree, one noise scale (sensitivity
log₂ n + 1, ε = 1) — on synthetic counts, as in the paper ("we fix the
measured query set to consist of binary hierarchical measurements"). The
noisy answers are drawn here with a seeded generator: this experiment times
inference only, so no kernel is involved. Implementations:

* ``direct-dense`` — the matrix as a dense array; LS by
  ``numpy.linalg.lstsq`` (SVD-based), NNLS by ``scipy.optimize.nnls``
  (Lawson–Hanson active set);
* ``iterative-sparse`` — `inference.least_squares` / `inference.nnls`
  (LSMR; projected Newton with LSMR steps) on a ``Sparse`` measurement matrix;
* ``iterative-implicit`` — the same operators on the implicit matrix
  (`matrix.Hierarchy`). LS is forced to LSMR (``method="lsmr"``):
  `least_squares` would otherwise solve one Hierarchy measurement exactly by
  its tree solver, and this series is the paper's iterative-implicit method;
* ``tree-based`` — the two-pass algorithm of Hay et al. for complete trees
  (`inference.tree.solve_levels`; LS only), the paper's "Tree-based";
* ``implicit, method=auto`` — what `least_squares` does by default on the
  implicit H2 matrix: the library's O(n) tree solve (`inference.tree.lstsq`),
  the Hay et al. algorithm on any `Hierarchy` (LS only; not in the paper).

A further series, ``iterative-implicit (HB)``, runs implicit LS (LSMR) on HB's
hierarchy (branching 16, no root; far fewer LSMR iterations than H2) up to
10⁸ cells, to test the paper's "hundreds of millions of cells".

Only the solve is timed (materialising the matrix and drawing the noise are
set-up). Each run is a job in a worker process with single-threaded BLAS, a
memory cap (``MEMORY_GB``) and a CPU limit (``CPU_LIMIT`` seconds; see
`plan_scalability.LimitedRunner`); after a timeout or memory failure the
larger sizes of that series are skipped. The table also gives each solution's
relative residual ‖Qx̂ − y‖/‖y‖ (equal across LS implementations at one size
when they all find the least-squares solution) and, for NNLS, min(x̂).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .common import experiment, save_outputs
from .plan_scalability import Point, as_table, panel_axes, sweep_series, synthetic_data

__all__ = ["h2_answers", "inference_job"]

NAME = "inference-scalability"
CPU_LIMIT = 60.0
MEMORY_GB = 10.0
EPS = 1.0
DEFAULT_TRIALS = 3

IMPLEMENTATIONS = {
    "LS": (
        "direct-dense",
        "iterative-sparse",
        "iterative-implicit",
        "tree-based",
        "implicit, method=auto",
    ),
    "NNLS": ("direct-dense", "iterative-sparse", "iterative-implicit"),
}


def h2_answers(x: np.ndarray) -> np.ndarray:
    """The true answers of `selection.h2((n,))` on x (n a power of 2), in its
    row order — the cells, then the tree's internal nodes top-down — by
    summing pairs level by level (no matrix needed)."""
    v = np.asarray(x, dtype=np.float64).reshape(-1)
    n = v.size
    if n & (n - 1):
        raise ValueError(f"H2 answers here need a power-of-two size, got {n}")
    levels = [v]
    while levels[-1].size > 1:
        levels.append(levels[-1].reshape(-1, 2).sum(axis=1))
    return np.concatenate([v, *levels[:0:-1]])


def inference_job(
    method: str, implementation: str, strategy: str, n: int, trial: int
) -> Callable[[], Any]:
    """Worker job: draw the measurement, prepare the representation; return
    the timed solve (which returns a function of post-timing checks)."""
    from ektelo import Measurement, inference
    from ektelo.inference import tree
    from ektelo.matrix import Sparse
    from ektelo.operators import selection

    x = synthetic_data((n,), seed=trial)
    rng = np.random.default_rng(10_000 + trial)
    if strategy == "h2":
        scale = (n.bit_length() - 1 + 1) / EPS  # levels of the tree: log2 n + 1
        y = h2_answers(x)
    else:
        Q = selection.hb((n,))
        scale = Q.sensitivity(1) / EPS
        y = Q.matvec(x)
    del x
    y += rng.laplace(0.0, scale, y.size)

    def checks(x_hat: np.ndarray, Q: Any, info: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        def after() -> dict[str, Any]:
            r = Q.matvec(x_hat) - y
            out = {
                "rows": int(y.size),
                "rel_residual": float(np.linalg.norm(r) / np.linalg.norm(y)),
            }
            out["min_estimate"] = float(x_hat.min())
            return {**out, **info}

        return after

    if implementation == "tree-based":
        if method != "LS" or strategy != "h2":
            raise ValueError("tree-based inference is least squares on a complete tree")

        def run_tree() -> Callable[[], dict[str, Any]]:
            x_hat = tree.solve_levels(tree.levels(y, n, 2), 2)
            return checks(x_hat, selection.h2((n,)), {})

        return run_tree
    Q = selection.h2((n,)) if strategy == "h2" else selection.hb((n,))
    if implementation == "direct-dense":
        A = Q.dense()

        def run_direct() -> Callable[[], dict[str, Any]]:
            if method == "LS":
                x_hat = np.linalg.lstsq(A, y, rcond=None)[0]
            else:
                from scipy.optimize import nnls

                x_hat = nnls(A, y)[0]
            return checks(x_hat, Q, {})

        return run_direct
    options: dict[str, Any] = {}
    if implementation == "iterative-sparse":
        M: Any = Sparse(Q.sparse())
    elif implementation == "iterative-implicit":
        M = Q
        # the paper's iterative methods, not the automatic exact tree solves
        options["method"] = "lsmr" if method == "LS" else "projected_newton"
    elif implementation == "implicit, method=auto":
        if method != "LS":
            raise ValueError("method=auto is a least-squares series")
        M = Q
    else:
        raise ValueError(f"unknown implementation {implementation!r}")
    measurement = Measurement(y, M, M, scale, EPS, "synthetic", (n,), seed=trial)
    solve = inference.least_squares if method == "LS" else inference.nnls

    def run_iterative() -> Callable[[], dict[str, Any]]:
        estimate = solve([measurement], **options)
        x_hat, info = estimate.x, estimate.info
        return checks(
            x_hat,
            Q,
            {"solver": info.method, "iterations": info.iterations, "products": info.products},
        )

    return run_iterative


def _sizes(quick: bool) -> tuple[list[int], list[int]]:
    """Sizes of the H2 series and of the HB series."""
    if quick:
        return [2**6, 2**8, 2**10], [2**8]
    base = [2**k for k in range(6, 25, 2)]
    return [*base, 2**25, 2**26, 2**27], [*base, 2**25, 2**26, 10**8]


_PAPER = (
    "paper §10.2.2: sparse+iterative reach millions of cells in < 1 min; implicit scales "
    "further (hundreds of millions); general LS scales further than Tree-based; "
    "direct methods unacceptable beyond ~5000 cells"
)


def _summary(table: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (method, impl), g in table.groupby(["method", "implementation"], sort=False):
        ok = g[g.status == "ok"]
        last = ok.iloc[-1] if not ok.empty else None
        after = g[g.status.isin(["timeout", "memory", "error"])]
        rows.append(
            {
                "method": method,
                "implementation": impl,
                "largest n": int(last["n"]) if last is not None else 0,
                "CPU s at largest": round(float(last["runtime_s"]), 3)
                if last is not None
                else math.nan,
                "stopped by": f"{after.status.iloc[0]} at n={int(after.n.iloc[0])}"
                if not after.empty
                else "-",
            }
        )
    return pd.DataFrame(rows)


def _plot(table: pd.DataFrame, cpu_limit: float) -> Callable[[Any], None]:
    def plot(ax: Any) -> None:
        styles = {
            "direct-dense": "o-",
            "iterative-sparse": "s-",
            "iterative-implicit": "^-",
            "iterative-implicit (HB)": "^--",
            "tree-based": "d-",
            "implicit, method=auto": "v:",
        }
        for a, method in zip(panel_axes(ax, 2, cols=2), ("LS", "NNLS"), strict=True):
            g = table[table.method == method]
            for impl, gr in g.groupby("implementation", sort=False):
                ok = gr[gr.status == "ok"]
                (line,) = a.plot(ok.n, ok.runtime_s, styles.get(str(impl), ".-"), label=str(impl))
                bad = gr[gr.status.isin(["timeout", "memory", "error"])]
                if not bad.empty:
                    a.plot(bad.n, [cpu_limit] * len(bad), "x", color=line.get_color(), ms=9)
            a.set_xscale("log")
            a.set_yscale("log")
            a.axhline(cpu_limit, color="grey", lw=0.6, ls=":")
            a.set_title(f"{method} inference (H2 measurements)", fontsize=10)
            a.set_xlabel("data vector size (cells)", fontsize=9)
            a.set_ylabel("CPU seconds", fontsize=9)
            a.legend(fontsize=8)

    return plot


def run_experiment(
    out: Path,
    trials: int | None,
    quick: bool,
    *,
    cpu_limit: float | None = None,
    memory_gb: float | None = None,
) -> pd.DataFrame:
    """Run every method × implementation series; write the CSV and PNG."""
    trials = trials if trials is not None else (1 if quick else DEFAULT_TRIALS)
    cpu_limit = cpu_limit if cpu_limit is not None else (10.0 if quick else CPU_LIMIT)
    memory_gb = memory_gb if memory_gb is not None else (3.0 if quick else MEMORY_GB)
    h2_sizes, hb_sizes = _sizes(quick)
    jobs = [(m, impl, "h2", h2_sizes) for m, impls in IMPLEMENTATIONS.items() for impl in impls]
    jobs.append(("LS", "iterative-implicit", "hb", hb_sizes))
    series = []
    for method, impl, strategy, sizes in jobs:
        name = impl if strategy == "h2" else f"{impl} (HB)"
        label = {"method": method, "implementation": name, "measurements": strategy}
        points = [Point({"n": n}, (method, impl, strategy, n)) for n in sizes]
        series.append((f"{method}/{name}", label, points))
    rows = sweep_series(
        NAME, out, f"{__name__}:inference_job", series, trials, cpu_limit, memory_gb
    )
    table = as_table(
        rows,
        [
            "method",
            "implementation",
            "measurements",
            "n",
            "rows",
            "status",
            "trials",
            "runtime_s",
            "runtime_std",
            "runtime_min",
            "wall_s",
            "peak_gb",
            "solver",
            "iterations",
            "products",
            "rel_residual",
            "min_estimate",
            "message",
        ],
    )
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(f"\nLargest size within {cpu_limit:g} CPU s and {memory_gb:g} GB:")
        print(_summary(table).to_string(index=False))
        print(_PAPER)
    save_outputs(
        NAME,
        out,
        table,
        _plot(table, cpu_limit),
        "Inference CPU time vs data-vector size (x: timeout or memory failure)",
    )
    return table


@experiment(NAME)
def main(out: Path, trials: int | None, quick: bool) -> pd.DataFrame:
    """The inference-scaling figure (§10.2.2)."""
    return run_experiment(out, trials, quick)
