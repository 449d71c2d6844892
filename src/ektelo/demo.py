"""`make run`: a small demonstration of what exists so far.

Builds a synthetic histogram, answers the Prefix (CDF) workload and the
paper's Example 2 workload through the implicit matrix layer, and compares the
implicit answers and sensitivities with the dense computation.
"""

from __future__ import annotations

import time

import numpy as np

from .matrix import Dense, Identity, Kronecker, Prefix, Total, VStack
from .workload import prefix


def main() -> None:
    rng = np.random.default_rng(2024)
    n = 1024
    x = rng.poisson(lam=50 * np.exp(-np.linspace(0, 4, n)))
    W = prefix(n)
    cdf = W @ x
    dense = W.dense() @ x
    print(f"Prefix workload over n={n}: implicit and dense answers agree: "
          f"{np.array_equal(cdf, dense)}; sensitivity={W.sensitivity():.0f}")
    print("first CDF values:", cdf[:5].astype(int), "... total", int(cdf[-1]))

    start = time.perf_counter()
    married = Dense([[1, 1, 0, 0, 0, 0, 0], [0, 0, 1, 1, 1, 1, 1]])
    example2 = Kronecker([Prefix(100), Prefix(100), VStack([Total(7), Identity(7), married])])
    built = time.perf_counter() - start
    v = rng.integers(0, 5, size=example2.shape[1]).astype(float)
    answers = example2 @ v
    print(f"Example 2 workload {example2.shape[0]}x{example2.shape[1]} built in "
          f"{built * 1e3:.2f} ms; {answers.size} answers; L1 sensitivity "
          f"{example2.sensitivity():.0f}")


if __name__ == "__main__":
    main()
