"""Scalability of inference (paper §7.6, §10.2.2): LS and NNLS on HB-style
measurements — Identity stacked with a branching-16 hierarchy of ranges
(`selection.hierarchy(n, 16)`) measured once with Laplace noise at ε = 1 —
at n = 2^16, 2^17, 2^20, 2^21, 2^24 and 10^8. (2^17 and 2^21 = 2·16^k give
the leaves' parents 2 cells each — the hardest case for NNLS against LS,
whose parent solves then cover half as many parents as cells.)

Prints iterations, matrix–vector products, seconds and peak memory (traced
allocations during one more, untimed inference call, and the process's max
RSS).
Targets: LS at 2^24 under 6 s; 10^8 within 60 s and 8 GB; NNLS on the tree
at 2^24 within ~4× of LS (issue #23, NumPy only since the C step was
dropped). "LS" is the default `least_squares`, which solves this one-tree
measurement exactly in two passes (`inference.tree.lstsq`); "NNLS" the default
`nnls`, here `inference.tree_nnls` (a few tree solves on the cells' parents after
sorting each parent's cells); "LSMR" forces the iterative solver
(method="lsmr"), the yardstick of NNLS on other matrices, whose steps are
LSMR solves: columns xLS and xLSMR give each time over both. A method
stops at the first size where a run took over 60 s, or where
its predicted memory (bytes per cell of the previous size) exceeds 8 GB.

Two data regimes: "dense" (Poisson(50) counts: few bounds active for NNLS)
and "sparse" (70% empty cells, the rest uniform on 1..9, noise scale ≈ 7:
most bounds active, the hard case for NNLS).

Times are of the solve alone; the `Estimate`'s info gives the iterations,
products and status printed (its residual and gradient, computed on first
access where the solve did not need them, are not read).

Each method runs `--repeat` times (default 2; at least 20 below n = 2^20,
where a solve takes milliseconds), memory tracing off, the methods in
turn (LS, NNLS, LS, NNLS, …) so that the machine's drift hits each alike,
and the fastest time is printed: on this VM the first touch of fresh
memory in a process is slow (filling a new 2^24-vector the first time takes
~0.36 s, later ~0.02 s), so a single run charges that to whichever method
comes first — it made LS at 2^24 look 3–6× slower than it is.

Usage: python benchmarks/bench_inference.py [--sizes 16 17 20 21 24 1e8] [--repeat 2]
       [--regimes dense sparse] [--methods LS NNLS L-BFGS-B]
       [--lbfgsb-max 65536] [--time-limit 60]
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import time
import tracemalloc

import numpy as np

from ektelo import inference
from ektelo.measurement import Measurement
from ektelo.operators import selection

TIME_LIMIT = 60.0
MEMORY_LIMIT = 8e9
# below this n every method runs at least SMALL_REPEAT times
SMALL, SMALL_REPEAT = 2**20, 20


def parse_size(text: str) -> int:
    value = float(text)
    return int(2**value) if value < 64 else int(value)


def make_measurement(n: int, regime: str, seed: int = 0) -> Measurement:
    Q = selection.hierarchy(n, 16)
    rng = np.random.default_rng(seed)
    if regime == "dense":
        x = rng.poisson(50, n).astype(np.float64)
    else:
        x = rng.integers(1, 10, n).astype(np.float64)
        x[rng.random(n) < 0.7] = 0.0
    eps = 1.0
    scale = Q.sensitivity(1) / eps
    y = Q.matvec(x)
    del x
    y += rng.laplace(0.0, scale, y.size)
    m = Measurement(y, Q, Q, scale, eps, "bench", (n,))
    del y
    # Build the matrix's one-time caches (transpose, range corners) here, so
    # that the first method timed does not pay for them.
    Q.T.matvec(Q.matvec(np.zeros(n)))
    return m


CALLS = {
    "LS": lambda m: inference.least_squares([m]),
    "LSMR": lambda m: inference.least_squares([m], method="lsmr"),
    "NNLS": lambda m: inference.nnls([m]),
    "L-BFGS-B": lambda m: inference.nnls([m], method="lbfgsb"),
}


def run(method: str, m: Measurement) -> float:
    """Seconds of one solve."""
    gc.collect()
    t0 = time.perf_counter()
    CALLS[method](m)
    return time.perf_counter() - t0


def peak_memory(method: str, m: Measurement) -> int:
    """Traced peak bytes of one more solve, untimed (tracing every Python
    allocation slows the solve down, and more so the one with more of them)."""
    gc.collect()
    tracemalloc.start()
    CALLS[method](m)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["16", "17", "20", "21", "24", "1e8"])
    parser.add_argument("--regimes", nargs="+", default=["dense", "sparse"])
    parser.add_argument("--lbfgsb-max", type=int, default=2**16)
    parser.add_argument("--methods", nargs="+", default=["LS", "LSMR", "NNLS", "L-BFGS-B"])
    parser.add_argument("--time-limit", type=float, default=TIME_LIMIT)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    sizes = [parse_size(s) for s in args.sizes]
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs (timings are wall clock)")
    header = (
        f"{'regime':7s} {'n':>11s} {'method':7s} {'iters':>6s} {'products':>8s} "
        f"{'seconds':>8s} {'xLS':>6s} {'xLSMR':>6s} {'peak GB':>8s} {'rss GB':>7s}  status"
    )
    for regime in args.regimes:
        print()
        print(header)
        stopped: dict[str, str] = {}
        per_cell: dict[str, float] = {}
        for n in sizes:
            setup = time.perf_counter()
            m = make_measurement(n, regime)
            setup = time.perf_counter() - setup
            ls_time = lsmr_time = None
            skipped: dict[str, str] = {}
            for method in args.methods:
                predicted = per_cell.get(method, 0.0) * n
                if method in stopped:
                    skipped[method] = stopped[method]
                elif predicted > MEMORY_LIMIT:
                    stopped[method] = f"predicted {predicted / 1e9:.1f} GB > 8 GB"
                    skipped[method] = stopped[method]
            timed = [
                method
                for method in args.methods
                if method not in skipped and not (method == "L-BFGS-B" and n > args.lbfgsb_max)
            ]
            # interleaved rounds, so that the machine's drift hits every method
            # alike; the fastest of each (see the docstring); more rounds for
            # the small sizes, where one solve takes milliseconds
            repeat = args.repeat if n >= SMALL else max(args.repeat, SMALL_REPEAT)
            times: dict[str, list[float]] = {method: [] for method in timed}
            for _ in range(repeat):
                for method in timed:
                    times[method].append(run(method, m))
            for method in args.methods:
                if method == "L-BFGS-B" and n > args.lbfgsb_max:
                    continue
                label = f"{regime:7s} {n:>11d} {method:7s}"
                if method in skipped:
                    print(
                        f"{label} {'':>6s} {'':>8s} {'':>8s} {'':>6s} {'':>6s} {'':>8s} {'':>7s}  "
                        f"skipped: {skipped[method]}"
                    )
                    continue
                seconds = min(times[method])
                peak = peak_memory(method, m)
                info = CALLS[method](m).info  # untimed: iterations, products, status
                per_cell[method] = peak / n
                if method == "LS":
                    ls_time = seconds
                if method == "LSMR":
                    lsmr_time = seconds
                ratio = seconds / ls_time if ls_time else float("nan")
                ratio_lsmr = seconds / lsmr_time if lsmr_time else float("nan")
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
                status = "converged" if info.converged else f"NOT converged ({info.message})"
                print(
                    f"{label} {info.iterations:6d} {info.products:8d} {seconds:8.4f} "
                    f"{ratio:6.2f} {ratio_lsmr:6.2f} {peak / 1e9:8.2f} {rss:7.2f}  {status}",
                    flush=True,
                )
                if seconds > args.time_limit:
                    limit = args.time_limit
                    stopped[method] = f"previous size took {seconds:.0f} s > {limit:.0f} s"
            probe = np.ones(n)
            t0 = time.perf_counter()
            probe.copy()
            copy_ms = 1e3 * (time.perf_counter() - t0)
            del probe
            print(
                f"{'':7s} {n:>11d} (setup: strategy + noisy answers {setup:.1f} s; "
                f"machine probe: copying one n-vector takes {copy_ms:.0f} ms, "
                f"load {os.getloadavg()[0]:.1f})"
            )
            del m
            gc.collect()


if __name__ == "__main__":
    main()
