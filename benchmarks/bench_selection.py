"""Build time, memory and one matvec of the hierarchical and grid strategies.

Prints, for 1-D n = 2^24 and 2-D 4096×4096 (or smaller with --small):

* build    — wall time of the selection call (target: < 0.5 s);
* peak MB  — tracemalloc peak during the build, i.e. what the strategy
             stores (target: O(1) beyond the data vector, 128 MB at 2^24);
* sens     — time of the L1 sensitivity the kernel computes;
* matvec   — time of the first (and a second) M·x; the first also builds the
             cached corner matrix of any RangeQueries block;
* rows / stored — number of queries and the bytes held by the object.

The last rows show, for comparison, hierarchies written as a VStack of
per-level Kronecker products Identity(bᵗ) ⊗ Total(n/bᵗ) — exact when every
side is a power of b — which store O(log n) numbers instead of O(#nodes)
corners. This is a script that prints; it asserts nothing.

    .venv/bin/python benchmarks/bench_selection.py [--small] [--only NAME]
"""

from __future__ import annotations

import argparse
import gc
import math
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

from ektelo.matrix import EMatrix, Identity, Kronecker, Total, VStack
from ektelo.operators import selection as sel


def stored_bytes(M: EMatrix) -> int:
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
        if isinstance(obj, EMatrix):
            return sum(walk(v) for v in vars(obj).values())
        return 0

    return walk(M)


def kron_levels(dims: tuple[int, ...], b: int, first: int) -> EMatrix:
    """Levels first..k of the b-ary tree on a power-of-b domain, as Kroneckers."""
    k = round(math.log(dims[0], b))
    blocks: list[EMatrix] = []
    for t in range(first, k + 1):
        if t == k:
            blocks.append(Identity(math.prod(dims)))
            continue
        factors: list[EMatrix] = []
        for s in dims:
            factors += [Identity(b**t), Total(s // b**t)]
        blocks.append(Kronecker(factors))
    return VStack(blocks)


def is_power_case(name: str, n: int, side: int, b2: int | None) -> bool:
    """The Kronecker-level form is exact only when every side is a power of b."""

    def power(size: int, b: int) -> bool:
        return b ** round(math.log(size, b)) == size

    if "hb(" in name and "x" in name.split("hb(")[1].split(")")[0]:
        return b2 is not None and power(side, b2)
    if "hb(" in name:
        return power(n, 16)
    return power(n, 2) and power(side, 2)


def measure(name: str, build: Callable[[], EMatrix], x: np.ndarray) -> None:
    gc.collect()
    start = time.perf_counter()
    M = build()
    t_build = time.perf_counter() - start
    del M
    gc.collect()
    tracemalloc.start()
    M = build()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    start = time.perf_counter()
    sens = M.sensitivity()
    t_sens = time.perf_counter() - start
    start = time.perf_counter()
    M.matvec(x)
    t_mv1 = time.perf_counter() - start
    start = time.perf_counter()
    M.matvec(x)
    t_mv2 = time.perf_counter() - start
    print(
        f"{name:<34} {t_build:8.3f} {peak / 1e6:9.1f} {t_sens:7.3f} {t_mv1:8.3f} {t_mv2:8.3f}"
        f" {M.shape[0]:>11,} {stored_bytes(M) / 1e6:9.1f}  sens={sens:g}",
        flush=True,
    )
    del M
    gc.collect()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="2^16 and 256×256 instead")
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    args = parser.parse_args()
    n = 2**16 if args.small else 2**24
    side = 256 if args.small else 4096
    grid = (side, side)
    records, eps = 10**6, 1.0
    b1, b2 = sel.hb_branching(n), sel.hb_branching(grid)

    rng = np.random.default_rng(0)
    L1 = sel.ag_first_level(grid, records, eps)
    counts = rng.poisson(records / L1.shape[0], size=L1.shape[0]).astype(float)

    cases: list[tuple[str, Callable[[], EMatrix], int]] = [
        (f"h2({n})", lambda: sel.h2(n), n),
        (f"hb({n})  b={b1}", lambda: sel.hb(n), n),
        (f"wavelet({n})", lambda: sel.wavelet(n), n),
        (f"hb({side}x{side})  b={b2}", lambda: sel.hb(grid), side * side),
        (f"h2({side}x{side})", lambda: sel.h2(grid), side * side),
        (f"quadtree({side}x{side}) geometric", lambda: sel.quadtree(grid), side * side),
        (f"wavelet({side}x{side})", lambda: sel.wavelet(grid), side * side),
        (
            f"uniform_grid N={records:g} eps={eps:g}",
            lambda: sel.uniform_grid(grid, records, eps),
            side * side,
        ),
        ("ag_first_level", lambda: sel.ag_first_level(grid, records, eps), side * side),
        ("ag_second_level", lambda: sel.ag_second_level(grid, L1, counts, eps), side * side),
        (f"stripe({side}x{side}, 0, hb)", lambda: sel.stripe(grid, 0, sel.hb), side * side),
        (f"[kron levels] h2({n})", lambda: kron_levels((n,), 2, 0), n),
        (f"[kron levels] hb({n}) b=16", lambda: kron_levels((n,), 16, 1), n),
        (f"[kron levels] quadtree({side}x{side})", lambda: kron_levels(grid, 2, 0), side * side),
        (f"[kron levels] hb({side}x{side}) b={b2}", lambda: kron_levels(grid, b2, 1), side * side),
    ]
    print(
        f"{'strategy':<34} {'build s':>8} {'peak MB':>9} {'sens s':>7} {'mv1 s':>8} {'mv2 s':>8}"
        f" {'rows':>11} {'stored MB':>9}"
    )
    for name, build, size in cases:
        if args.only and args.only not in name:
            continue
        if name.startswith("[kron") and not is_power_case(name, n, side, b2):
            continue
        x = rng.random(size)
        measure(name, build, x)


if __name__ == "__main__":
    main()
