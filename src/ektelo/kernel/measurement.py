"""The `Measurement` record: what a Private→Public query operator returns.

A measurement is self-describing (STYLE.md, after private-pgm): the noisy
answers, the query matrix on the measured vector, the same queries mapped back
to the root vector's domain through every reduce/split/transform on the way
(§5.5 "inference under vector transformations"), and the noise actually used.
Inference consumes lists of these and never needs anything else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..matrix import EMatrix

__all__ = ["Measurement"]


@dataclass(frozen=True, eq=False)
class Measurement:
    """Noisy answers y = Q·x + Laplace(b) with their public description.

    Attributes:
        answers: the noisy answers (read-only float64 vector, one per query row).
        query: Q on the measured vector's domain.
        query_on_root: Q composed with every vector transformation back to the
            root vector (the vector produced by `vectorize` or `protect`).
        noise_scale: the Laplace scale b actually applied (variance 2b²).
        epsilon: the ε charged for this measurement on the measured vector.
        root_id: identifies the root vector; inference refuses to mix roots.
        root_shape: the shape of the root vector's domain.
        seed: the research-mode seed of the kernel, or None for secure noise.
        mechanism: name of the noise mechanism.
        noise_grid: the grid the noisy answers lie on (a power of two; answers
            of integral queries on counts are integers, grid 1). Public: set
            by the query and ε alone, never by the data.
    """

    answers: np.ndarray
    query: EMatrix
    query_on_root: EMatrix
    noise_scale: float
    epsilon: float
    root_id: str
    root_shape: tuple[int, ...]
    seed: int | None = None
    mechanism: str = "laplace"
    noise_grid: float | None = None

    def __post_init__(self) -> None:
        answers = np.array(self.answers, dtype=np.float64, copy=True).reshape(-1)
        answers.setflags(write=False)
        object.__setattr__(self, "answers", answers)
        if answers.size != self.query.shape[0] or answers.size != self.query_on_root.shape[0]:
            raise ValueError("answers must have one entry per query row")
        if not (math.isfinite(self.noise_scale) and self.noise_scale >= 0):
            raise ValueError(f"noise_scale must be finite and ≥ 0, got {self.noise_scale!r}")

    @property
    def variance(self) -> float:
        """Per-answer noise variance (2b² for Laplace)."""
        return 2.0 * self.noise_scale**2

    @property
    def research_mode(self) -> bool:
        """True when the noise came from a seeded (non-secure) generator."""
        return self.seed is not None

    def __len__(self) -> int:
        return int(self.answers.size)
