"""The public record of a measurement: what a Private→Public query returns.

A measurement is self-describing (STYLE.md, after Private-PGM's
`LinearMeasurement`): the noisy answers, the query on the measured vector,
the same queries mapped back to the root vector's domain through every
reduce/split/transform on the way (§5.5 "inference under vector
transformations"), the noise as a typed value, the budget charged, and what
was measured — the root's domain and, when the root is a table's
vectorization, the attributes it projects onto, so that inference can
combine measurements of different projections of one table. Inference
consumes lists of these and needs nothing else.

The noise is a value: `Laplace(scale)` (what the kernel draws today, on a
dyadic grid) or `Gaussian(sigma)` (room for the zCDP mechanism); both give
the variance inference weights by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .matrix import EMatrix

__all__ = ["Gaussian", "Laplace", "Measurement", "Noise"]


def _scale(value: float, name: str) -> float:
    v = float(value)
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"{name} must be finite and ≥ 0, got {value!r}")
    return v


@dataclass(frozen=True)
class Laplace:
    """Laplace noise of scale b (density ∝ exp(−|z|/b)); `grid` is the grid
    the noisy answers lie on, when the kernel drew them on one."""

    scale: float
    grid: float | None = None
    name: Literal["laplace"] = "laplace"

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _scale(self.scale, "scale"))

    @property
    def variance(self) -> float:
        return 2.0 * self.scale**2


@dataclass(frozen=True)
class Gaussian:
    """Gaussian noise of standard deviation σ."""

    sigma: float
    grid: float | None = None
    name: Literal["gaussian"] = "gaussian"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", _scale(self.sigma, "sigma"))

    @property
    def scale(self) -> float:
        return self.sigma

    @property
    def variance(self) -> float:
        return self.sigma**2


Noise = Laplace | Gaussian


@dataclass(frozen=True, eq=False)
class Measurement:
    """Noisy answers y = Q·x + noise with their public description.

    Attributes:
        answers: the noisy answers (read-only float64 vector, one per query row).
        query: Q on the measured vector's domain.
        query_on_root: Q composed with every vector transformation back to the
            root vector (the vector produced by `vectorize` or `protect`).
        noise: `Laplace(scale)` or `Gaussian(sigma)`; a bare number is read as
            a Laplace scale (a shorthand for tests and synthetic measurements).
        epsilon: the ε charged for this measurement on the measured vector
            (0 for a zCDP measurement, which carries `rho` instead).
        root_id: identifies the root vector; inference refuses to mix roots.
        root_shape: the shape of the root vector's domain.
        seed: the research-mode seed of the kernel, or None for secure noise.
        attributes: for a root that vectorizes a table, the attributes it
            counts over (in order); None for a protected array.
        rho: the ρ charged (zCDP measurements), else None.
    """

    answers: np.ndarray
    query: EMatrix
    query_on_root: EMatrix
    noise: Noise
    epsilon: float
    root_id: str
    root_shape: tuple[int, ...]
    seed: int | None = None
    attributes: tuple[str, ...] | None = None
    rho: float | None = None

    def __post_init__(self) -> None:
        answers = np.array(self.answers, dtype=np.float64, copy=True).reshape(-1)
        answers.setflags(write=False)
        object.__setattr__(self, "answers", answers)
        if answers.size != self.query.shape[0] or answers.size != self.query_on_root.shape[0]:
            raise ValueError("answers must have one entry per query row")
        noise = self.noise
        if not isinstance(noise, (Laplace, Gaussian)):
            if isinstance(noise, bool) or not isinstance(noise, (int, float, np.floating)):
                raise TypeError(f"noise must be Laplace(...) or Gaussian(...), got {noise!r}")
            noise = Laplace(float(noise))
        object.__setattr__(self, "noise", noise)
        object.__setattr__(self, "root_shape", tuple(int(s) for s in self.root_shape))
        if self.attributes is not None:
            object.__setattr__(self, "attributes", tuple(str(a) for a in self.attributes))

    @property
    def noise_scale(self) -> float:
        """The noise's scale parameter (Laplace b, Gaussian σ)."""
        return self.noise.scale

    @property
    def noise_grid(self) -> float | None:
        """The grid the noisy answers lie on (None if unknown)."""
        return self.noise.grid

    @property
    def mechanism(self) -> str:
        return self.noise.name

    @property
    def variance(self) -> float:
        """Per-answer noise variance (2b² for Laplace, σ² for Gaussian)."""
        return self.noise.variance

    @property
    def research_mode(self) -> bool:
        """True when the noise came from a seeded (non-secure) generator."""
        return self.seed is not None

    def __len__(self) -> int:
        return int(self.answers.size)
