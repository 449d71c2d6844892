"""Build time, memory and products of the hierarchical and grid strategies,
and least-squares inference on HB measurements.

Part 1 — strategies at 1-D n = 2^24 and 2-D 4096×4096 (2^16 and 256×256 with
--small). For each:

* build      — wall and CPU seconds of the selection call (target < 0.5 s);
* peak MB    — tracemalloc peak during the build (target: O(1), i.e. ≈ 0);
* stored KB  — bytes of the arrays the object holds (parameters only);
* sens s     — the L1 sensitivity the kernel computes;
* mv, rmv    — wall/CPU seconds of M·x and Mᵀ·y (the first call also fills
               any one-time cache), beside `1 pass`, the time of x·2 on the
               same vector (target: a small constant times one pass);
* mv MB      — tracemalloc peak of one M·x, the output included.

`--old` adds, for comparison, the form the selection operators built before
`Hierarchy`: VStack([Identity, RangeQueries(corners)]) (per-level Weighted
blocks for the geometric QuadTree).

Part 2 — LS inference (`inference.least_squares`) on one HB measurement
taken through the kernel, `ektelo.protect(x, epsilon=1, seed=0).laplace(
selection.hb(n), eps=1)`, x ~ Poisson(50), each size in a fresh process (so
its max RSS is its own): n = 2^20, 2^24 (target < 6 s) and 10^8 (target
< 60 s and 8 GB; skipped when the machine has too little free memory).
`measure` is the kernel call (rebuild, sensitivity, answers, noise); `LS` the
solve alone: method "tree" (the default's exact two-pass solve of one tree
measurement, `inference.tree.lstsq`) at every size, and LSMR (method="lsmr") up
to --lsmr-up-to (default 2^24). On a shared, loaded machine compare CPU seconds first.

    .venv/bin/python benchmarks/bench_selection.py [--small] [--only NAME] [--old]
        [--ls 20 24 1e8 | --no-ls] [--lsmr-up-to 24]

This script prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

from ektelo.matrix import EMatrix, Identity, VStack, Weighted
from ektelo.operators import selection as sel


def timed(f: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, wall seconds, CPU seconds) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = f()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def traced_peak(f: Callable[[], Any]) -> tuple[Any, float]:
    """(result, tracemalloc peak in MB) of one call."""
    gc.collect()
    tracemalloc.start()
    out = f()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, peak / 1e6


def stored_bytes(M: Any) -> int:
    """Bytes of the numpy arrays an expression holds (corners, caches, ...)."""
    seen: set[int] = set()

    def walk(obj: object) -> int:
        if id(obj) in seen:
            return 0
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            return int(obj.nbytes)
        if hasattr(obj, "data") and hasattr(obj, "indices") and hasattr(obj, "indptr"):
            return sum(walk(getattr(obj, k)) for k in ("data", "indices", "indptr"))
        if isinstance(obj, (list, tuple)):
            return sum(walk(x) for x in obj)
        if isinstance(obj, dict):
            return sum(walk(x) for x in obj.values())
        if isinstance(obj, EMatrix):
            return sum(walk(v) for v in vars(obj).values())
        return 0

    return walk(M)


# -- the previous form (for --old) ---------------------------------------------------------
def old_hierarchy(dims: tuple[int, ...], b: int, root: bool) -> EMatrix:
    tree = sel._grow(dims, b)
    inner = [lv for lv in tree.inner[0 if root else 1 :] if lv[0][0].size]
    return VStack([Identity(math.prod(dims)), sel._union(dims, inner)])


def old_quadtree(dims: tuple[int, int]) -> EMatrix:
    """The geometric QuadTree as per-level Weighted blocks (power-of-2 squares)."""
    tree = sel._grow(dims, 2)
    levels = [sel._union(dims, [tree.inner[t]]) for t in range(tree.height)]
    levels.append(Identity(math.prod(dims)))
    weights = sel._geometric_weights(tree.height)
    return VStack([Weighted(M, w) for w, M in zip(weights, levels, strict=True)])


# -- part 1 ------------------------------------------------------------------------------
HEADER = (
    f"{'strategy':<36} {'build s wall/cpu':>16} {'peak MB':>8} {'stored KB':>9} {'sens s':>7}"
    f" {'mv s wall/cpu':>14} {'rmv s wall/cpu':>14} {'1 pass':>11} {'mv MB':>7} {'rows':>11}"
)


def measure(name: str, build: Callable[[], EMatrix], rng: np.random.Generator) -> None:
    gc.collect()
    M, b_wall, b_cpu = timed(build)
    del M
    M, peak = traced_peak(build)
    _, s_wall, _ = timed(lambda: M.sensitivity())
    x = rng.random(M.shape[1])
    y = rng.random(M.shape[0])
    _, mv_wall, mv_cpu = timed(lambda: M.matvec(x))
    _, rmv_wall, rmv_cpu = timed(lambda: M.rmatvec(y))
    _, mv2_wall, mv2_cpu = timed(lambda: M.matvec(x))  # after any one-time cache
    _, rmv2_wall, rmv2_cpu = timed(lambda: M.rmatvec(y))
    _, p_wall, p_cpu = timed(lambda: x * 2.0)
    _, mv_peak = traced_peak(lambda: M.matvec(x))
    print(
        f"{name:<36} {b_wall:7.3f}/{b_cpu:<8.3f} {peak:8.1f} {stored_bytes(M) / 1e3:9.1f}"
        f" {s_wall:7.3f} {min(mv_wall, mv2_wall):6.3f}/{min(mv_cpu, mv2_cpu):<7.3f}"
        f" {min(rmv_wall, rmv2_wall):6.3f}/{min(rmv_cpu, rmv2_cpu):<7.3f}"
        f" {p_wall:5.3f}/{p_cpu:<5.3f} {mv_peak:7.0f} {M.shape[0]:>11,}"
        f"  sens={M.sensitivity():g} {type(M).__name__}",
        flush=True,
    )


def strategies(args: argparse.Namespace) -> None:
    n = 2**16 if args.small else 2**24
    side = 256 if args.small else 4096
    grid = (side, side)
    records, eps = 10**6, 1.0
    b1, b2 = sel.hb_branching(n), sel.hb_branching(grid)
    rng = np.random.default_rng(0)
    L1 = sel.ag_first_level(grid, records, eps)
    counts = rng.poisson(records / L1.shape[0], size=L1.shape[0]).astype(float)

    cases: list[tuple[str, Callable[[], EMatrix]]] = [
        (f"h2({n})", lambda: sel.h2(n)),
        (f"hb({n})  b={b1}", lambda: sel.hb(n)),
        (f"h2({side}x{side})", lambda: sel.h2(grid)),
        (f"hb({side}x{side})  b={b2}", lambda: sel.hb(grid)),
        (f"quadtree({side}x{side}) geometric", lambda: sel.quadtree(grid)),
        (f"h2({n - 1}) uneven parts", lambda: sel.h2(n - 1)),
        (f"quadtree({side - 3}x{side + 5}) uneven", lambda: sel.quadtree((side - 3, side + 5))),
        (f"wavelet({n})", lambda: sel.wavelet(n)),
        (f"wavelet({side}x{side})", lambda: sel.wavelet(grid)),
        (f"uniform_grid N={records:g} eps={eps:g}", lambda: sel.uniform_grid(grid, records, eps)),
        ("ag_first_level", lambda: sel.ag_first_level(grid, records, eps)),
        ("ag_second_level", lambda: sel.ag_second_level(grid, L1, counts, eps)),
        (f"stripe({side}x{side}, 0, hb)", lambda: sel.stripe(grid, 0, sel.hb)),
    ]
    if args.old:
        cases += [
            (f"[old VStack] h2({n})", lambda: old_hierarchy((n,), 2, True)),
            (f"[old VStack] hb({n})", lambda: old_hierarchy((n,), b1, False)),
            (f"[old VStack] hb({side}x{side})", lambda: old_hierarchy(grid, b2, False)),
            (f"[old VStack] quadtree({side}x{side})", lambda: old_quadtree(grid)),
        ]
    print(HEADER)
    for name, build in cases:
        if args.only and args.only not in name:
            continue
        measure(name, build, rng)


# -- part 2 ------------------------------------------------------------------------------
def ls_worker(n: int, method: str) -> None:
    """One LS run in this (fresh) process; prints one JSON line."""
    import ektelo
    from ektelo import inference

    truth = np.random.default_rng(0).poisson(50, n).astype(np.float64)
    M, build_wall, build_cpu = timed(lambda: sel.hb(n))

    def measure_hb() -> Any:
        return ektelo.protect(truth, epsilon=1.0, seed=0).laplace(M, eps=1.0)

    m, meas_wall, meas_cpu = timed(measure_hb)
    gc.collect()
    estimate, ls_wall, ls_cpu = timed(lambda: inference.least_squares([m], method=method))
    x_hat, info = estimate.x, estimate.info
    rmse = float(np.sqrt(np.mean((x_hat - truth) ** 2)))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print(
        json.dumps(
            {
                "n": n,
                "method": info.method,
                "b": M.branching,
                "rows": M.shape[0],
                "build": [build_wall, build_cpu],
                "measure": [meas_wall, meas_cpu],
                "ls": [ls_wall, ls_cpu],
                "iterations": info.iterations,
                "products": info.products,
                "converged": info.converged,
                "rmse": rmse,
                "noise_scale": m.noise_scale,
                "max_rss_gb": rss / 1e9,
            }
        ),
        flush=True,
    )


def free_memory() -> float:
    """MemAvailable in bytes (Linux), or infinity when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return math.inf


def parse_size(text: str) -> int:
    value = float(text)
    return int(2**value) if value < 64 else int(value)


def inference_runs(sizes: list[int], lsmr_limit: int) -> None:
    print(
        f"\nLS on HB through the kernel (targets: 2^24 < 6 s; 10^8 < 60 s, 8 GB)\n"
        f"{'n':>11} {'method':>6} {'b':>3} {'rows':>12} {'build s':>7} {'measure s wall/cpu':>18}"
        f" {'LS s wall/cpu':>15} {'iters':>5} {'products':>8} {'rmse':>7} {'max RSS GB':>10}"
    )
    runs = [(n, "auto") for n in sizes] + [(n, "lsmr") for n in sizes if n <= lsmr_limit]
    for n, method in runs:
        need = 8.0 * n * 11  # x, kernel copy, answers, LSMR's vectors: ≈ 11 floats per cell
        if need > free_memory():
            print(f"{n:>11,} skipped: needs about {need / 1e9:.1f} GB, "
                  f"{free_memory() / 1e9:.1f} GB free")  # fmt: skip
            continue
        cmd = [sys.executable, os.path.abspath(__file__), "--ls-worker", str(n), method]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        if done.returncode != 0 or not lines:
            print(f"{n:>11,} failed: {done.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(lines[-1])
        print(
            f"{r['n']:>11,} {r['method']:>6} {r['b']:>3} {r['rows']:>12,} {r['build'][0]:7.3f}"
            f" {r['measure'][0]:8.2f}/{r['measure'][1]:<8.2f}"
            f" {r['ls'][0]:7.2f}/{r['ls'][1]:<7.2f} {r['iterations']:>5} {r['products']:>8}"
            f" {r['rmse']:7.2f} {r['max_rss_gb']:10.2f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="2^16 and 256×256 instead")
    parser.add_argument("--only", default="", help="run the strategies whose name contains this")
    parser.add_argument("--old", action="store_true", help="also the previous VStack forms")
    parser.add_argument("--ls", nargs="*", default=["20", "24", "1e8"], help="LS sizes")
    parser.add_argument("--no-ls", action="store_true", help="skip the inference runs")
    parser.add_argument("--no-strategies", action="store_true", help="inference runs only")
    parser.add_argument(
        "--lsmr-up-to", default="24", help="also time LSMR (method='lsmr') up to this size"
    )
    parser.add_argument("--ls-worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ls_worker:
        ls_worker(int(args.ls_worker[0]), args.ls_worker[1])
        return
    if not args.no_strategies:
        strategies(args)
    if not args.no_ls:
        inference_runs([parse_size(s) for s in args.ls], parse_size(args.lsmr_up_to))


if __name__ == "__main__":
    main()
