"""Closed-form least squares on disjoint rows (issue #42); prints a table,
asserts nothing.

    PYTHONPATH=. python benchmarks/bench_closed_forms.py [--repeat 20]

Per plan and setting (ε = 0.1, research-mode seeds, DPBench HEPTH 1-D and
Adult_2D 256×256, or Poisson data when ../shared/data is absent): the CPU
milliseconds of the whole plan call (median of `--repeat`) with inference as
it runs now — the closed form `structured.disjoint_of` detects — and with
the iterative solver forced (``least_squares(..., method="lsmr")``, what
these plans ran before), their ratio, and the largest difference between the
two estimates relative to the estimate's scale. Then the inference step
alone, on the same measurements, both ways.

The last column is a floor for the original εktelo code of these plans
(measure the explicit sparse matrix with Laplace noise, then scipy's LSMR
on it with its default tolerances — what its `LeastSquares().infer` does on
these strategies; written here, not the original code): "ours ≤ floor"
answers the issue's target (Identity, Uniform and UGrid at least as fast as
the original), "ours/floor" is the ratio; "measure ms" is the kernel's
measurement alone (`x.laplace(M)`, the plan's one Private→Public request:
the exact sampler and the release's bookkeeping), the rest of a plan call
being the plan, the port and inference. BLAS is single-threaded.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import lsmr

import ektelo
from ektelo import inference, plans
from ektelo import workload as wl
from ektelo.matrix import EMatrix, Identity, Total
from ektelo.operators import selection

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "dpbench"
EPS = 0.1


def _data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    one, two = DATA / "1d" / "HEPTH.n4096.npy", DATA / "2d" / "Adult_2D_256_256.npy"
    return {
        "1-D": np.load(one) if one.exists() else rng.poisson(50, 4096),
        "2-D": np.load(two).astype(np.int64) if two.exists() else rng.poisson(5, (256, 256)),
    }


def _cpu(call: Callable[..., Any], repeat: int, make: Callable[[], Any] | None = None
         ) -> tuple[float, Any]:  # fmt: skip
    """Median CPU ms of `call(make())` (`make` untimed: e.g. a fresh handle)."""
    times, out = [], None
    for _ in range(repeat):
        given = () if make is None else (make(),)
        start = time.process_time()
        out = call(*given)
        times.append(time.process_time() - start)
    return statistics.median(times) * 1e3, out


class _Forced:
    """`inference.least_squares` with method="lsmr" while active (the plans
    look it up on the module at every call)."""

    def __init__(self) -> None:
        self.original = inference.least_squares

    def __enter__(self) -> None:
        original = self.original
        inference.least_squares = lambda ms, **kw: original(ms, **{**kw, "method": "lsmr"})

    def __exit__(self, *exc: object) -> None:
        inference.least_squares = self.original


def _floor(M: EMatrix, x: np.ndarray, repeat: int) -> float:
    """Laplace noise on the explicit sparse M·x, then scipy's LSMR on it."""
    S = sp.csr_matrix(M.sparse())
    flat = x.reshape(-1).astype(np.float64)
    prng = np.random.RandomState(1)

    def run() -> np.ndarray:
        y = S @ flat + prng.laplace(0.0, 1.0 / EPS, S.shape[0])
        return np.asarray(lsmr(S, y)[0])

    return _cpu(run, repeat)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    data = _data()
    x2 = data["2-D"]
    grid = selection.uniform_grid(x2.shape, float(x2.sum()), EPS)
    cases: list[tuple[str, str, np.ndarray, dict[str, Any], EMatrix | None]] = [
        ("identity", "1-D", data["1-D"], {}, Identity(data["1-D"].size)),
        ("identity", "2-D", x2, {}, Identity(x2.size)),
        ("uniform", "1-D", data["1-D"], {}, Total(data["1-D"].size)),
        ("uniform", "2-D", x2, {}, Total(x2.size)),
        ("uniform_grid", "2-D", x2, {"total": float(x2.sum())}, grid),
        ("ahp", "1-D", data["1-D"], {}, None),
    ]
    print(f"ε = {EPS}; CPU ms per plan call, median of {args.repeat}; BLAS single-threaded; "
          f"load {', '.join(f'{v:.1f}' for v in os.getloadavg())}")  # fmt: skip
    head = (f"{'plan':13} {'set':4} {'lsmr ms':>9} {'closed ms':>9} {'speed-up':>8} "
            f"{'max diff':>9} {'floor ms':>9} {'ours/floor':>10} {'ours≤floor':>10} "
            f"{'measure ms':>10}")  # fmt: skip
    print(head)
    print("-" * len(head))
    for plan, setting, x, params, M in cases:
        W = wl.random_range(x.shape if x.ndim > 1 else x.size, 100, seed=0)

        def make(x: np.ndarray = x) -> Any:
            return ektelo.protect(x, epsilon=EPS, seed=1)

        def call(handle: Any, plan: str = plan, W: Any = W, p: Any = params) -> Any:
            return plans.run(plan, handle, W, EPS, **p)

        with _Forced():
            slow, a = _cpu(call, args.repeat, make)
        fast, b = _cpu(call, args.repeat, make)
        diff = float(np.abs(a - b).max() / max(1.0, np.abs(a).max()))
        floor = _floor(M, x, args.repeat) if M is not None else float("nan")
        verdict = "" if M is None else ("yes" if fast <= floor else "no")
        # the kernel's measurement alone (the plan's one Private→Public request)
        kernel = float("nan") if M is None else _cpu(
            lambda h, M=M: h.laplace(M, eps=EPS), args.repeat, make)[0]  # fmt: skip
        print(f"{plan:13} {setting:4} {slow:9.2f} {fast:9.2f} {slow / fast:7.1f}× "
              f"{diff:9.1e} {floor:9.2f} {fast / floor:9.2f}× {verdict:>10} "
              f"{kernel:10.2f}", flush=True)  # fmt: skip
    print("\ninference alone (least_squares on the plan's measurement)")
    print(f"{'matrix':24} {'lsmr ms':>9} {'closed ms':>9} {'speed-up':>8} {'max diff':>9}")
    for name, x, M in [
        ("Identity(65536)", x2, Identity(x2.size)),
        ("Total(65536)", x2, Total(x2.size)),
        (f"UGrid {grid.shape[0]} cells", x2, grid),
    ]:
        y = ektelo.protect(x, epsilon=EPS, seed=1).laplace(M, eps=EPS)
        slow, a = _cpu(lambda y=y: inference.least_squares([y], method="lsmr").x, args.repeat)
        fast, b = _cpu(lambda y=y: inference.least_squares([y]).x, args.repeat)
        diff = float(np.abs(a - b).max() / max(1.0, np.abs(a).max()))
        print(f"{name:24} {slow:9.3f} {fast:9.3f} {slow / fast:7.1f}× {diff:9.1e}", flush=True)


if __name__ == "__main__":
    main()
