"""Space and matrix–vector time of dense, sparse and implicit matrices
(paper §7.2, Tables 2–3, Example 2).

Workloads, at domain sizes from 10^3 up to 10^8 cells for the implicit forms:
  (a) Prefix(n) — the empirical CDF;
  (b) HB-style range queries: VStack([Identity(n), RangeQueries(every node above
      the leaves of a branching-16 tree)]), as in the paper's evaluation;
  (c) Example 2: Kronecker([Prefix(k), Prefix(k), VStack([Total(7), Identity(7),
      Dense 2×7])]) — natively k = 100 (70,000 cells), and scaled (k = √(N/7)).

For every size and form: build time and traced peak memory while building
(tracemalloc sees NumPy's allocations), memory held afterwards (array and
sparse buffers reachable from the object — for the implicit forms also the
pickled size, i.e. the defining state without caches), best-of-r matvec time,
nanoseconds per element of input plus output, and "passes": the matvec time
over one streaming pass (a `numpy.cumsum`, measured in the same run) over
the same number of elements. Dense and sparse forms beyond the memory cap are
not built: the table prints what they would need.

Targets: Example 2 builds in under 10 ms holding under 1 MB (paper: dense
56 GB, sparse 8 GB); implicit Prefix matvec at n = 10^8 within 3× one
`numpy.cumsum` over the same vector; every implicit matvec a small constant
number of passes.

Usage: python benchmarks/bench_matrix.py [--max-exponent 8] [--repeats 3] [--cap-gb 2]
Not a test: nothing here asserts; it prints a table.
"""

from __future__ import annotations

import argparse
import gc
import math
import pickle
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from ektelo.matrix import (
    Dense,
    EMatrix,
    Identity,
    Kronecker,
    Prefix,
    RangeQueries,
    Total,
    VStack,
)

BRANCHING = 16
MARITAL = np.array([[1, 0, 1, 0, 0, 1, 0], [0, 1, 0, 1, 1, 0, 1]], dtype=float)


# -- workloads ------------------------------------------------------------------------------


def hb(n: int, branching: int = BRANCHING) -> VStack:
    """Identity plus every node above the leaves of a `branching`-ary tree."""
    lower, upper = [], []
    width = branching
    while True:
        starts = np.arange(0, n, width, dtype=np.int64)
        lower.append(starts)
        upper.append(np.minimum(starts + width, n) - 1)
        if width >= n:
            break
        width *= branching
    return VStack([Identity(n), RangeQueries(n, np.concatenate(lower), np.concatenate(upper))])


def example2(k: int) -> Kronecker:
    return Kronecker([Prefix(k), Prefix(k), VStack([Total(7), Identity(7), Dense(MARITAL)])])


def nnz(M: EMatrix) -> int:
    """Non-zeros of the materialised matrix, computed from the structure."""
    if isinstance(M, Prefix):
        return M.n * (M.n + 1) // 2
    if isinstance(M, Identity):
        return M.n
    if isinstance(M, RangeQueries):
        return int(np.prod(M.upper - M.lower + 1, axis=1).sum())
    if isinstance(M, VStack):
        return sum(nnz(b) for b in M.blocks)
    if isinstance(M, Kronecker):
        return math.prod(nnz(f) for f in M.factors)
    return int(M.sparse().nnz)  # small explicit parts


def dense_bytes(M: EMatrix) -> int:
    return 8 * M.shape[0] * M.shape[1]


def sparse_bytes(M: EMatrix) -> int:
    """CSR with float64 data; SciPy uses 32-bit indices below 2^31 non-zeros."""
    count = nnz(M)
    index = 4 if count < 2**31 else 8
    return count * (8 + index) + (M.shape[0] + 1) * index


# -- measuring ------------------------------------------------------------------------------


def held_bytes(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes of the array and sparse buffers reachable from `obj` (caches included)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return obj.nbytes if obj.base is None else held_bytes(obj.base, seen)
    if sp.issparse(obj):
        return sum(held_bytes(getattr(obj, a), seen) for a in ("data", "indices", "indptr"))
    if isinstance(obj, (list, tuple)):
        return sum(held_bytes(v, seen) for v in obj)
    if isinstance(obj, dict):
        return sum(held_bytes(v, seen) for v in obj.values())
    if hasattr(obj, "__dict__"):
        return held_bytes(vars(obj), seen)
    return 0


def traced(fn: Callable[[], Any]) -> tuple[Any, float, int]:
    """Result, seconds and traced peak bytes of one call."""
    gc.collect()
    tracemalloc.start()
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return result, seconds, peak


def best(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def human(nbytes: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{nbytes:.0f} B"


def seconds(t: float) -> str:
    return f"{t * 1e3:.3g} ms" if t < 1 else f"{t:.3g} s"


HEADER = (
    f"{'workload':<10} {'cells n':>11} {'queries m':>11} {'form':<9} {'build':>9} "
    f"{'build peak':>10} {'held':>9} {'pickled':>9} {'matvec':>9} {'ns/(n+m)':>9} "
    f"{'passes':>7}"
)


def row(name: str, M: EMatrix, form: str, **cols: str) -> str:
    m, n = M.shape
    c = {
        k: cols.get(k, "")
        for k in ("build", "peak", "held", "pickled", "matvec", "per", "passes", "note")
    }
    if c["note"]:
        return f"{name:<10} {n:>11,} {m:>11,} {form:<9} {c['note']}"
    return (
        f"{name:<10} {n:>11,} {m:>11,} {form:<9} {c['build']:>9} {c['peak']:>10} "
        f"{c['held']:>9} {c['pickled']:>9} {c['matvec']:>9} {c['per']:>9} {c['passes']:>7}"
    )


class Bench:
    def __init__(self, repeats: int, cap: float):
        self.repeats, self.cap = repeats, cap
        self.passes: list[tuple[str, int, float]] = []  # implicit runs
        self.prefix_ratio: dict[int, tuple[float, float]] = {}
        self.example2: dict[str, float] = {}

    def cumsum_time(self, length: int) -> float:
        """One streaming pass over `length` elements in and out."""
        v = np.random.default_rng(1).random(length)
        return best(lambda: np.cumsum(v), self.repeats)

    def run(self, name: str, build: Callable[[], EMatrix], explicit: bool = True) -> None:
        M, build_s, build_peak = traced(build)
        m, n = M.shape
        x = np.random.default_rng(0).random(n)
        M.matvec(x)  # one-time caches (transpose, range corners) are built here
        t = best(lambda: M.matvec(x), self.repeats)
        pass_s = self.cumsum_time(n) * (n + m) / (2 * n)
        passes = t / pass_s
        self.passes.append((name, n, passes))
        print(
            row(
                name,
                M,
                "implicit",
                build=seconds(build_s),
                peak=human(build_peak),
                held=human(held_bytes(M)),
                pickled=human(len(pickle.dumps(M, protocol=5))),
                matvec=seconds(t),
                per=f"{t / (n + m) * 1e9:.2f}",
                passes=f"{passes:.1f}",
            ),
            flush=True,
        )
        if name == "Prefix" and n >= 10**7:
            self.prefix_ratio[n] = self.prefix_vs_cumsum(M, x)
        if explicit:
            self.run_explicit(name, M, x, pass_s)

    def prefix_vs_cumsum(self, M: EMatrix, x: np.ndarray) -> tuple[float, float]:
        """Interleaved best-of timings of Prefix.matvec and np.cumsum on x."""
        implicit, reference = [], []
        for _ in range(max(5, self.repeats)):
            start = time.perf_counter()
            M.matvec(x)
            implicit.append(time.perf_counter() - start)
            start = time.perf_counter()
            np.cumsum(x)
            reference.append(time.perf_counter() - start)
        return min(implicit), min(reference)

    def run_explicit(self, name: str, M: EMatrix, x: np.ndarray, pass_s: float) -> None:
        m, n = M.shape
        for form, need, make in (
            ("dense", dense_bytes(M), M.dense),
            ("sparse", sparse_bytes(M), M.sparse),
        ):
            if need > self.cap:
                print(row(name, M, form, note=f"skipped (would need {human(need)})"), flush=True)
                continue
            A, build_s, build_peak = traced(make)
            t = best(lambda A=A: A @ x, self.repeats)
            print(
                row(
                    name,
                    M,
                    form,
                    build=seconds(build_s),
                    peak=human(build_peak),
                    held=human(held_bytes(A)),
                    matvec=seconds(t),
                    per=f"{t / (n + m) * 1e9:.2f}",
                    passes=f"{t / pass_s:.1f}",
                ),
                flush=True,
            )
            del A
            gc.collect()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-exponent", type=int, default=8, help="largest size 10^k")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cap-gb", type=float, default=2.0, help="dense/sparse memory cap")
    args = parser.parse_args()
    bench = Bench(args.repeats, args.cap_gb * 1e9)
    sizes = [10**e for e in range(3, args.max_exponent + 1)]

    print(f"dense and sparse forms are built only below {args.cap_gb:g} GB")
    print(HEADER)
    print("-" * len(HEADER))
    for n in sizes:
        bench.run("Prefix", lambda n=n: Prefix(n))
    for n in sizes:
        bench.run("HB b=16", lambda n=n: hb(n))
    # Example 2 natively (70,000 cells), then scaled to ~10^k cells.
    M = example2(100)
    build_s = best(lambda: example2(100), max(args.repeats, 5))
    bench.example2 = {
        "build": build_s,
        "held": held_bytes(M),
        "pickled": len(pickle.dumps(M, protocol=5)),
        "dense": dense_bytes(M),
        "sparse": sparse_bytes(M),
    }
    bench.run("Example 2", lambda: example2(100))
    for n in sizes:
        k = max(1, round(math.sqrt(n / 7)))
        if 7 * k * k != 70_000:
            bench.run("Ex.2 sc.", lambda k=k: example2(k))

    print()
    print("Targets")
    e2 = bench.example2
    print(
        f"  Example 2 (70,000 cells): builds in {e2['build'] * 1e3:.3f} ms (target < 10 ms), "
        f"holds {human(e2['held'])} of arrays, pickles to {human(e2['pickled'])} "
        f"(target < 1 MB); dense would need {human(e2['dense'])} (paper: 56 GB), "
        f"sparse {human(e2['sparse'])} (paper: 8 GB)"
    )
    for n, (implicit, reference) in sorted(bench.prefix_ratio.items()):
        print(
            f"  Prefix matvec at n = {n:.0e}: {seconds(implicit)} vs numpy.cumsum "
            f"{seconds(reference)}: ratio {implicit / reference:.2f} (target ≤ 3)"
        )
    worst = max(bench.passes, key=lambda r: r[2])
    print(
        f"  implicit matvec, passes over input+output (1 = one numpy.cumsum of that length): "
        f"max {worst[2]:.1f} ({worst[0]}, n = {worst[1]:,})"
    )


if __name__ == "__main__":
    main()
