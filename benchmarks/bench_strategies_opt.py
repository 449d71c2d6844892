"""Benchmark of the workload-adaptive strategies (operators.selection.greedy_h, .hdmm).

Prints three tables (four with --tradeoff):

1. GreedyH: selection time and peak traced memory at n = 1024, 4096, 16384
   for Prefix and RandomRange(1000), with the expected error per query at
   ε = 1 of GreedyH, the unweighted binary hierarchy H2 and Identity.
2. GreedyH's local objectives (canonical / damped / reference / exact local
   error / uniform H2), each evaluated exactly, to back GreedyH's choice.
3. HDMM with its default parameters on Prefix(1024), Prefix(4096),
   RandomRange(1000) at n = 4096 and two 2-D 256×256 range workloads: wall
   and CPU time of the first optimisation, CPU time of a memoised repeat, the
   same error comparison, and the figures measured before the OPT_0 rework.
4. (--tradeoff) OPT_0's error against time for p = 16 … 128 and 1 or 2
   restarts, which backs `hdmm`'s defaults.

Expected error per query at ε = 1 is the Laplace matrix-mechanism formula
2·‖A‖₁²·tr(W (AᵀA)⁺ Wᵀ) / m (m workload queries), computed exactly from the
operators' own structure (no dense n×n inverse at these sizes).

Run: .venv/bin/python benchmarks/bench_strategies_opt.py [--quick] [--hdmm-only]
[--tradeoff]   (--quick leaves out HDMM's two n = 4096 workloads.)

CPU time (time.process_time) is printed beside wall time: on a shared, busy
machine the wall time also counts waiting for a core. BLAS threads are the
caller's: this script pins OpenBLAS/OpenMP to 1 thread unless the environment
sets them (with multi-threaded BLAS on a busy machine HDMM's small and
mid-sized products were measured 10-300x slower); the library sets none.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

# The imports below come after pinning the BLAS threads (ruff allows os.environ first).
import argparse
import math
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

from ektelo.matrix import EMatrix, Kronecker
from ektelo.operators import _greedy_h as gh
from ektelo.operators import _greedy_h_oracles as gho
from ektelo.operators import _greedy_h_tree as ght
from ektelo.operators import hdmm as hd
from ektelo.operators.selection import greedy_h, greedy_h_error, hdmm
from ektelo.workload import all_range, prefix, random_range

TARGET_SECONDS = 0.5  # GreedyH at n = 4096


def per_query(trace: float, m: int, eps: float = 1.0) -> float:
    """2·tr/ε² per query (the strategies here have ‖A‖₁ = 1)."""
    return 2.0 * trace / (eps**2 * m)


def timed(fn: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def cpu_timed(fn: Callable[[], object], repeat: int = 3) -> tuple[float, float]:
    """(best wall seconds, best CPU seconds of this process) over `repeat` runs:
    on a busy machine the wall time also counts waiting for a core."""
    walls, cpus = [], []
    for _ in range(repeat):
        c, w = time.process_time(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus)


def peak_mib(fn: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def identity_trace(W: EMatrix) -> float:
    return float(W.column_norms(2).sum())


def greedy_table() -> None:
    print("GreedyH (1-D, branching 2): selection time, peak traced memory, error per query")
    print(f"target: n = 4096 in < {TARGET_SECONDS} s")
    head = (
        f"{'workload':<17}{'n':>7}{'wall s':>8}{'cpu s':>7}{'MiB':>6}{'rows':>7}"
        f"{'GreedyH':>12}{'H2':>12}{'Identity':>12}{'vs H2':>7}{'vs I':>7}"
    )
    print(head)
    print("-" * len(head))
    for n in (1024, 4096, 16384):
        for name, W in (("Prefix", prefix(n)), ("RandomRange(1000)", random_range(n, 1000))):
            greedy_h(n, W)  # warm-up
            A = greedy_h(n, W)
            wall, cpu = cpu_timed(lambda W=W, n=n: greedy_h(n, W))
            mib = peak_mib(lambda W=W, n=n: greedy_h(n, W))
            m = W.shape[0]
            g = per_query(greedy_h_error(n, W), m)
            h2 = per_query(greedy_h_error(n, W, local="uniform"), m)
            ident = per_query(identity_trace(W), m)
            rows = A.shape[0]
            flag = " <- target" if n == 4096 else ""
            print(
                f"{name:<17}{n:>7}{wall:>8.3f}{cpu:>7.3f}{mib:>6.1f}{rows:>7}"
                f"{g:>12.4g}{h2:>12.4g}{ident:>12.4g}{g / h2:>7.2f}{g / ident:>7.2f}{flag}"
            )
    print()


def local_objective_table() -> None:
    print("GreedyH local objectives, exact error per query (ε = 1)")
    locals_ = ("canonical", "damped", "reference", "exact")
    head = f"{'workload':<17}{'n':>7}" + "".join(f"{x:>11}" for x in (*locals_, "uniform H2"))
    print(head)
    print("-" * len(head))
    for n in (64, 1024, 16384):
        for name, W in (
            ("Prefix", prefix(n)),
            ("RandomRange(1000)", random_range(n, 1000)),
            ("RandomRange(50)", random_range(n, 50)),
        ):
            m = W.shape[0]
            tree = ght._Tree.build(n, 2)
            oracle = gho._oracle_for(W, n)
            vals = [gh._greedy_pass(tree, oracle, local=local).root_error for local in locals_]
            vals.append(gh._uniform_fit(tree, oracle).root_error)
            print(f"{name:<17}{n:>7}" + "".join(f"{per_query(v, m):>11.4g}" for v in vals))
    print()


def hierarchy_kron_trace(W: EMatrix) -> float:
    """H2 ⊗ … ⊗ H2 on a Kronecker workload: Π_i of the 1-D H2 traces."""
    assert isinstance(W, Kronecker)
    return math.prod(greedy_h_error(f.shape[1], f, local="uniform") for f in W.factors)


def hierarchy_ranges_trace(W: EMatrix) -> float:
    """H2 ⊗ H2 on 2-D ranges: Σ_q Π_i 1_qᵢᵀ X_i⁺ 1_qᵢ, X_i = the normalised H2's Gram."""
    total = np.ones(W.shape[0])
    for axis, n in enumerate(W.domain_shape):  # type: ignore[attr-defined]
        tree = ght._Tree.build(n, 2)
        rows = []
        for lv in tree.levels:
            for lo, hi in zip(lv.lower, lv.upper, strict=True):
                r = np.zeros(n)
                r[lo : hi + 1] = 1
                rows.append(r)
        H = np.array(rows) / (len(tree.levels))
        Xinv = np.linalg.inv(H.T @ H)
        C = np.zeros((n + 1, n + 1))
        C[1:, 1:] = Xinv.cumsum(0).cumsum(1)
        a = W.lower[:, axis]  # type: ignore[attr-defined]
        b = W.upper[:, axis] + 1  # type: ignore[attr-defined]
        total *= C[b, b] - C[a, b] - C[b, a] + C[a, a]
    return float(total.sum())


# HDMM before the OPT_0 rework (commit c32a1db: SciPy's L-BFGS-B to its own
# tolerance, p = n/16, Grams applied through the workload's operators, no
# memo), restarts = 1, seed 0, one BLAS thread, on the same busy 2-core
# machine: (CPU s, wall s, error per query at ε = 1); None where not measured
# (Prefix(4096): only the wall time of a run with restarts = 2 is known).
BEFORE: dict[str, tuple[float | None, float | None, float | None]] = {
    "Prefix(1024)": (8.2, 63.1, 91.47),
    "Prefix(4096)": (None, 1229.0, None),
    "RandomRange(1000) 4096": (None, None, None),
    "AllRange⊗AllRange 256×256": (0.9, 5.8, 2107.5),
    "RandomRange 256×256 (1000)": (0.5, 2.9, 2720.4),
}


def optional(value: float | None, width: int, spec: str) -> str:
    return f"{'n/a':>{width}}" if value is None else f"{value:>{width}{spec}}"


def hdmm_cases(quick: bool) -> list[tuple[str, EMatrix, Callable[[EMatrix], float]]]:
    cases: list[tuple[str, EMatrix, Callable[[EMatrix], float]]] = [
        ("Prefix(1024)", prefix(1024), lambda W: greedy_h_error(1024, W, local="uniform")),
    ]
    if not quick:
        cases += [
            ("Prefix(4096)", prefix(4096), lambda W: greedy_h_error(4096, W, local="uniform")),
            (
                "RandomRange(1000) 4096",
                random_range(4096, 1000),
                lambda W: greedy_h_error(4096, W, local="uniform"),
            ),
        ]
    cases += [
        (
            "AllRange⊗AllRange 256×256",
            Kronecker([all_range(256), all_range(256)]),
            hierarchy_kron_trace,
        ),
        ("RandomRange 256×256 (1000)", random_range((256, 256), 1000), hierarchy_ranges_trace),
    ]
    return cases


def hdmm_table(quick: bool) -> None:
    print("HDMM, default parameters (p = min(n/16, 64), restarts = 1, seed 0):")
    print("first optimisation, then the memoised repeat; error per query at ε = 1")
    print(f"BLAS threads (set by the caller): {blas_threads()}")
    head = (
        f"{'workload':<28}{'method':>9}{'wall s':>9}{'cpu s':>8}{'memo ms':>9}{'HDMM':>11}"
        f"{'H2':>11}{'Identity':>11}{'vs H2':>7}{'vs I':>7}   before: {'cpu s':>7}{'wall s':>8}"
        f"{'HDMM':>11}"
    )
    print(head)
    print("-" * len(head))
    for name, W, h2_trace in hdmm_cases(quick):
        hdmm.cache_clear()  # type: ignore[attr-defined]
        c, w = time.process_time(), time.perf_counter()
        hdmm(W)
        wall, cpu = time.perf_counter() - w, time.process_time() - c
        _, memo_cpu = cpu_timed(lambda W=W: hdmm(W), repeat=3)
        result = hd._memo(W, None, 1, 0, 1000, 4)  # hdmm(W)'s memoised optimisation
        m = W.shape[0]
        err = per_query(result.error, m)
        h2 = per_query(h2_trace(W), m)
        ident = per_query(identity_trace(W), m)
        b_cpu, b_wall, b_err = BEFORE[name]
        print(
            f"{name:<28}{result.method:>9}{wall:>9.2f}{cpu:>8.2f}{memo_cpu * 1e3:>9.1f}"
            f"{err:>11.4g}{h2:>11.4g}{ident:>11.4g}{err / h2:>7.3f}{err / ident:>7.3f}"
            f"           {optional(b_cpu, 7, '.1f')}{optional(b_wall, 8, '.1f')}"
            f"{optional(b_err, 11, '.4g')}",
            flush=True,
        )
    hdmm.cache_clear()  # type: ignore[attr-defined]
    print()


def tradeoff_table() -> None:
    """Error against time for OPT_0's p and restarts (backs `hdmm`'s defaults)."""
    print("OPT_0 trade-off: p and restarts (seed 0), error per query at ε = 1")
    head = (
        f"{'workload':<24}{'p':>5}{'restarts':>9}{'wall s':>9}{'cpu s':>8}{'HDMM':>11}{'vs H2':>7}"
    )
    print(head)
    print("-" * len(head))
    for n, name, W in (
        (1024, "Prefix(1024)", prefix(1024)),
        (4096, "Prefix(4096)", prefix(4096)),
        (4096, "RandomRange(1000) 4096", random_range(4096, 1000)),
    ):
        m = W.shape[0]
        h2 = per_query(greedy_h_error(n, W, local="uniform"), m)
        for p in (16, 32, 64, 128, 256):
            if p > n // 16:
                continue
            for restarts in (1, 2):
                c, w = time.process_time(), time.perf_counter()
                result = hd.optimise(W, p=p, restarts=restarts, seed=0)
                wall, cpu = time.perf_counter() - w, time.process_time() - c
                err = per_query(result.error, m)
                print(
                    f"{name:<24}{p:>5}{restarts:>9}{wall:>9.2f}{cpu:>8.2f}{err:>11.4g}"
                    f"{err / h2:>7.3f}",
                    flush=True,
                )
    print()


def blas_threads() -> str:
    names = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    return ", ".join(f"{k}={os.environ.get(k, 'unset')}" for k in names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="HDMM on the smaller workloads only")
    parser.add_argument(
        "--tradeoff", action="store_true", help="also HDMM's error against time for p, restarts"
    )
    parser.add_argument("--hdmm-only", action="store_true", help="skip the GreedyH tables")
    args = parser.parse_args()
    if not args.hdmm_only:
        greedy_table()
        local_objective_table()
    hdmm_table(args.quick)
    if args.tradeoff:
        tradeoff_table()


if __name__ == "__main__":
    main()
