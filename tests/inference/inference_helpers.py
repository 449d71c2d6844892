"""Shared helpers of the inference tests: synthetic measurements, the dense
weighted system for reference solvers, random query matrices."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ektelo import inference as inf
from ektelo.matrix import Dense, EMatrix, RangeQueries, Sparse
from ektelo.measurement import Measurement


def measure(
    Q: EMatrix,
    x_measured: np.ndarray,
    scale: float,
    rng: np.random.Generator,
    *,
    on_root: EMatrix | None = None,
    root_id: str = "root",
    root_shape: tuple[int, ...] | None = None,
) -> Measurement:
    """y = Q·x + Laplace(scale), with Q mapped to the root by `on_root`."""
    y = Q.matvec(x_measured)
    if scale > 0:
        y = y + rng.laplace(0.0, scale, Q.shape[0])
    root = Q if on_root is None else on_root
    shape = root_shape or (root.shape[1],)
    return Measurement(y, Q, root, scale, 1.0, root_id, shape)


def stacked(measurements: list[Measurement]) -> tuple[np.ndarray, np.ndarray]:
    """The dense weighted system (rows scaled by 1/b) for reference solvers."""
    rows, rhs = [], []
    for m in measurements:
        rows.append(m.query_on_root.dense() / m.noise_scale)
        rhs.append(m.answers / m.noise_scale)
    return np.vstack(rows), np.concatenate(rhs)


def random_matrix(kind: str, m: int, n: int, rng: np.random.Generator) -> EMatrix:
    if kind == "dense":
        return Dense(rng.normal(size=(m, n)))
    if kind == "sparse":
        return Sparse(sp.random(m, n, density=0.3, random_state=rng, format="csr") + sp.eye(m, n))
    lo = rng.integers(0, n, m)
    hi = rng.integers(0, n, m)
    return RangeQueries(n, np.minimum(lo, hi), np.maximum(lo, hi))


def run(estimator, *args, **kwargs):
    """The estimate (flattened) and its info."""
    e = estimator(*args, **kwargs)
    assert isinstance(e, inf.Estimate) and not e.x.flags.writeable
    return e.x.reshape(-1), e.info


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


# ---------------------------------------------------------------------------
# Least squares
# ---------------------------------------------------------------------------
