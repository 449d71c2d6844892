"""Throughput and fixed cost of the kernel's noise samplers against numpy (and OpenDP if installed).

Run: python benchmarks/bench_noise.py [--repeats 5] [--sizes 1e6 1e7] [--before REV]
Throughput: CPU seconds of this process (user + system, so os.urandom counts;
best of the repeats, samplers interleaved so that a shared machine's load hits
each alike) and ns per value; the ratio is to numpy's Generator.laplace (for
the Laplace rows) or Generator.normal (Gaussian rows), both insecure and not
floating-point safe.  The row "non-int. 2**-20" is the non-integral Laplace
with noise.py L5's former grid slack (before issue 24), for before/after;
`--before REV` adds rows for the Laplace of noise.py at git revision REV.
Issue 24's targets: secure Laplace within 1.5x of numpy at 1e7 draws, the
Gaussian within 5x; the first draw at a new scale under 1 ms extra.
Fixed cost (CPU time too, so that preemption on a shared machine does not
count): the first draw of one value at a scale never used
before, minus a second draw at that scale (median and 90th percentile over
fresh scales), next to the tables' build time and the former 60-digit Decimal
tables'.  Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from decimal import Decimal, localcontext
from pathlib import Path

import numpy as np

from ektelo.kernel import gaussian, noise
from ektelo.kernel.gaussian import gaussian_draw
from ektelo.kernel.noise import RandomSource

SENS, EPS, RHO = 1.0, 0.5, 0.125  # Laplace scale 2, Gaussian sigma 2
NNZ = 8  # max_column_nnz for the non-integral path


def cpu(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def wall(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _former_slack(fn: Callable[[], object]) -> Callable[[], object]:
    """fn run with noise.py L5's former grid slack 2**-20 (before issue 24: a
    grid 2**8 times finer for real answers), to compare before/after in one run."""

    def run() -> object:
        saved, noise._GRID_SLACK = noise._GRID_SLACK, 20
        noise._plan.cache_clear()
        try:
            return fn()
        finally:
            noise._GRID_SLACK = saved
            noise._plan.cache_clear()

    return run


def _noise_at(rev: str) -> types.ModuleType:
    """kernel/noise.py as it was at git revision `rev` (it imports only the
    standard library and numpy), loaded as a module beside today's."""
    root = Path(__file__).resolve().parents[1]
    source = subprocess.run(
        ["git", "show", f"{rev}:src/ektelo/kernel/noise.py"],
        cwd=root, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    module = types.ModuleType(f"noise_at_{rev}")
    sys.modules[module.__name__] = module  # dataclasses look their module up there
    exec(compile(source, f"noise.py@{rev}", "exec"), module.__dict__)
    return module


def samplers(n: int, before: str | None = None) -> dict[str, Callable[[], object]]:
    zeros, reals = np.zeros(n), np.full(n, 0.25)
    secure, research, rng = RandomSource(), RandomSource(seed=0), np.random.default_rng()
    lap = {"sensitivity": SENS, "epsilon": EPS}
    gau = {"sensitivity": SENS, "rho": RHO}
    old: dict[str, Callable[[], object]] = {}
    if before is not None:  # the same samplers with noise.py at another revision
        former = _noise_at(before).RandomSource()
        old = {
            f"laplace secure, int. @{before}": lambda: former.laplace(zeros, **lap, integral=True),
            f"laplace secure, non-int. @{before}": lambda: former.laplace(
                reals, **lap, integral=False, max_column_nnz=NNZ
            ),
        }
    return old | {
        "numpy Generator.laplace": lambda: rng.laplace(0.0, SENS / EPS, size=n),
        "laplace secure, integral": lambda: secure.laplace(zeros, **lap, integral=True),
        "laplace secure, non-integral": lambda: secure.laplace(
            reals, **lap, integral=False, max_column_nnz=NNZ
        ),
        "laplace secure, non-int. 2**-20": _former_slack(
            lambda: secure.laplace(reals, **lap, integral=False, max_column_nnz=NNZ)
        ),
        "laplace research, integral": lambda: research.laplace(zeros, **lap, integral=True),
        "numpy Generator.normal": lambda: rng.normal(0.0, SENS / np.sqrt(2 * RHO), size=n),
        "gaussian secure, integral": lambda: gaussian_draw(secure, zeros, **gau, integral=True),
        "gaussian secure, non-integral": lambda: gaussian_draw(
            secure, reals, **gau, integral=False, max_column_nnz=NNZ
        ),
        "gaussian research, integral": lambda: gaussian_draw(research, zeros, **gau, integral=True),
    }


def throughput(sizes: list[int], repeats: int, before: str | None = None) -> None:
    print(f"{'n':>10}  {'sampler':<36}{'cpu s':>8}{'ns/value':>10}{'x numpy':>9}")
    for n in sizes:
        fns = samplers(n, before)
        for fn in fns.values():
            fn()  # warm up: tables are built once per digit size / variance
        best = dict.fromkeys(fns, float("inf"))
        for _ in range(repeats):
            for name, fn in fns.items():
                best[name] = min(best[name], cpu(fn))
        for name, t in best.items():
            base = best["numpy Generator.normal" if "gauss" in name or "normal" in name else
                        "numpy Generator.laplace"]  # fmt: skip
            print(f"{n:>10}  {name:<36}{t:>8.3f}{t / n * 1e9:>10.1f}{t / base:>9.2f}")


def _former_table(c: int) -> list[int]:
    """The tables before #24: round(2**64 * CDF) by a 60-digit Decimal loop."""
    with localcontext() as ctx:
        ctx.prec = 60
        rho = Decimal(2) ** (Decimal(-1) / Decimal(c))
        total = 1 - rho**c
        one, power, cuts = Decimal(2**64), Decimal(1), []
        for _ in range(c - 1):
            power *= rho
            cuts.append(int(((1 - power) / total * one).to_integral_value()))
    return cuts


def fixed_cost(scales: int) -> None:
    src, one = RandomSource(), np.zeros(1)
    src.laplace(one, sensitivity=1.0, epsilon=0.77, integral=True)  # once per process:
    gaussian_draw(src, one, sensitivity=1.0, rho=0.77, integral=True)  # universal tables
    draws = {
        "laplace, integral": lambda e: src.laplace(one, sensitivity=1.0, epsilon=e, integral=True),
        "laplace, non-integral": lambda e: src.laplace(
            one, sensitivity=1.0, epsilon=e, integral=False, max_column_nnz=NNZ
        ),
        "gaussian, integral": lambda e: gaussian_draw(
            src, one, sensitivity=1.0, rho=e, integral=True
        ),
        "gaussian, non-integral": lambda e: gaussian_draw(
            src, one, sensitivity=1.0, rho=e, integral=False, max_column_nnz=NNZ
        ),
    }
    rng = np.random.default_rng(11)
    extra: dict[str, list[float]] = {name: [] for name in draws}
    warm: dict[str, list[float]] = {name: [] for name in draws}
    for _ in range(scales):
        e = float(rng.uniform(0.05, 5.0))  # a scale (and, almost surely, a c) not used before
        for name, draw in draws.items():
            first, second = cpu(lambda d=draw, e=e: d(e)), cpu(lambda d=draw, e=e: d(e))
            extra[name].append(first - second)
            warm[name].append(second)
    print(f"\nfirst draw at a new scale, one value, over {scales} fresh scales (CPU ms)")
    print(f"{'':<24}{'extra: median':>14}{'90%':>8}{'warm draw':>11}")
    for name in draws:
        cut = sorted(extra[name])[int(0.9 * scales)]
        print(
            f"{name:<24}{statistics.median(extra[name]) * 1e3:>14.3f}{cut * 1e3:>8.3f}"
            f"{statistics.median(warm[name]) * 1e3:>11.3f}"
        )
    cs = [int(c) for c in rng.integers(2048, 4097, 10)]
    new = [cpu(lambda c=c: noise.digit_table.__wrapped__(c)) for c in cs]
    powers = [cpu(lambda c=c: noise._rounded_powers(c, c, 65)) for c in cs]
    old = [cpu(lambda c=c: _former_table(c)) for c in cs[:3]]
    plan = gaussian.gaussian_plan(1.0, 0.3, True, 1)
    bounds = cpu(lambda: gaussian.acceptance_bounds.__wrapped__(plan.h, plan.v))
    print(
        f"digit table for a new c (2048..4096): {statistics.median(new) * 1e3:.3f} ms "
        f"(thresholds {statistics.median(powers) * 1e3:.3f} ms, then the 16-bit guide); "
        f"former 60-digit Decimal table: {statistics.median(old) * 1e3:.1f} ms"
    )
    print(f"gaussian acceptance bounds for a new V: {bounds * 1e3:.3f} ms")


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
    return wall(lambda: meas(data)) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e6, 1e7])
    parser.add_argument("--scales", type=int, default=30)
    parser.add_argument(
        "--before", metavar="REV", help="also time noise.py as at git revision REV (before/after)"
    )
    args = parser.parse_args()
    print(
        f"Laplace: sensitivity={SENS}, epsilon={EPS} (scale 2); Gaussian: sensitivity={SENS}, "
        f"rho={RHO} (sigma 2); non-integral: max_column_nnz={NNZ}; best of {args.repeats}\n"
    )
    throughput([int(n) for n in args.sizes], args.repeats, args.before)
    fixed_cost(args.scales)
    per_value = opendp_per_value()
    if per_value is None:
        print("\nopendp not installed: skipped")
    else:
        print(f"\nopendp make_laplace: {per_value * 1e9:.0f} ns/value (2e4 values)")
    scores = np.random.default_rng(1).uniform(0, 100, size=10**5)
    src = RandomSource()
    t = min(wall(lambda: src.exponential_mechanism(scores, sensitivity=1.0, epsilon=1.0))
            for _ in range(5))  # fmt: skip
    print(f"exponential_mechanism, 1e5 candidates (secure): {t * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
