"""PrivBayes on an array of integer codes, for tests: the row-based reference
score `r_score` (R(X, Π) straight from the rows, which the kernel's scores
from marginals must equal bit for bit) and `select_from_rows` (GreedyBayes as
the kernel runs it: `privbayes.engine_scores` on the in-memory engine, then
`privbayes.greedy`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ektelo.engines import MemoryEngine
from ektelo.engines.rows import Rows
from ektelo.kernel import privbayes


def r_score(
    codes: np.ndarray, sizes: tuple[int, ...], child: int, parents: tuple[int, ...]
) -> float:
    """R(X, Π) = ½ Σ |c(x, π) − c(x)c(π)/N| on counts, from the rows."""
    if codes.shape[0] == 0:
        return 0.0

    def coded(attrs: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        code = np.zeros(codes.shape[0], dtype=np.int64)
        for a in attrs:
            code = code * sizes[a] + codes[:, a]
        return code, np.bincount(code, minlength=math.prod(sizes[a] for a in attrs))

    (pi_code, pi_counts), (x_code, x_counts) = coded(parents), coded((child,))
    cells, counts = np.unique(x_code * pi_counts.size + pi_code, return_counts=True)
    # cells with c(x, π) = 0 contribute their expected count: exact_score adds them
    return privbayes.exact_score(
        counts, x_counts[cells // pi_counts.size], pi_counts[cells % pi_counts.size], codes.shape[0]
    )


def select_from_rows(
    codes: Any, sizes: tuple[int, ...], eps: float, source: Any, **options: Any
) -> list[tuple[int, ...]]:
    """The kernel's two steps on a code matrix (rows × attributes): every
    score GreedyBayes may need, then its d − 1 choices with eps."""
    opts = privbayes.check_options(**options)
    table = Rows.all(np.asarray(codes, dtype=np.int64))
    scored = privbayes.engine_scores(MemoryEngine(), table, tuple(sizes), opts["degree"])
    return privbayes.greedy(scored, len(sizes), eps, source, **opts)
