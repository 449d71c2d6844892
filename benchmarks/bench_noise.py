"""Throughput of the kernel's noise samplers against numpy (and OpenDP if installed).

Run: python benchmarks/bench_noise.py [--repeats 3]
Prints wall time (best of the repeats) and ns per value; the last column is
the ratio to numpy's Generator.laplace (insecure, not floating-point safe) at
the same size.  Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from ektelo.kernel.noise import RandomSource

SENS, EPS = 1.0, 0.5  # scale 2
NNZ = 8  # max_column_nnz for the non-integral path


def best_of(repeats: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def samplers(n: int) -> dict[str, Callable[[], object]]:
    zeros, reals = np.zeros(n), np.full(n, 0.25)
    secure, research, rng = RandomSource(), RandomSource(seed=0), np.random.default_rng()
    return {
        "numpy Generator.laplace": lambda: rng.laplace(0.0, SENS / EPS, size=n),
        "secure, integral": lambda: secure.laplace(
            zeros, sensitivity=SENS, epsilon=EPS, integral=True
        ),
        "secure, non-integral": lambda: secure.laplace(
            reals, sensitivity=SENS, epsilon=EPS, integral=False, max_column_nnz=NNZ
        ),
        "research, integral": lambda: research.laplace(
            zeros, sensitivity=SENS, epsilon=EPS, integral=True
        ),
        "research, non-integral": lambda: research.laplace(
            reals, sensitivity=SENS, epsilon=EPS, integral=False, max_column_nnz=NNZ
        ),
    }


def opendp_per_value(n: int = 20_000) -> float | None:
    """Seconds per value of OpenDP's vector Laplace, or None if opendp is not installed."""
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)
    meas = dp.m.make_laplace(*space, scale=SENS / EPS)
    data = [0.0] * n
    return best_of(1, lambda: meas(data)) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"sensitivity={SENS}, epsilon={EPS} (scale 2); best of {args.repeats}\n")
    print(f"{'n':>10}  {'sampler':<26}{'seconds':>9}{'ns/value':>10}{'x numpy':>9}")
    for n in (10**6, 10**7):
        base = None
        for name, fn in samplers(n).items():
            fn()  # warm up: tables are built once per (sensitivity, epsilon)
            t = best_of(args.repeats, fn)
            base = t if base is None else base
            print(f"{n:>10}  {name:<26}{t:>9.3f}{t / n * 1e9:>10.1f}{t / base:>9.2f}")
    per_value = opendp_per_value()
    if per_value is None:
        print("\nopendp not installed: skipped")
    else:
        print(f"\nopendp make_laplace: {per_value * 1e9:.0f} ns/value (2e4 values)")
    scores = np.random.default_rng(1).uniform(0, 100, size=10**5)
    src = RandomSource()
    t = best_of(5, lambda: src.exponential_mechanism(scores, sensitivity=1.0, epsilon=1.0))
    print(f"exponential_mechanism, 1e5 candidates (secure): {t * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
