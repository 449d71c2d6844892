"""The kernel's public records of its own state: the query history and source descriptions.

Both are functions of public state only (the requests granted, the schema,
the ledger): the kernel returns them, the port carries them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..domain import Domain

__all__ = ["QueryRecord", "SourceInfo"]


@dataclass(frozen=True)
class QueryRecord:
    """One granted Private→Public request (the query history QH, §4.4)."""

    index: int
    operation: str
    node: int
    eps: float | None  # a pure-DP request's ε (None for a zCDP request)
    charged_at_root: float  # in the kernel's unit: ε, or ρ on a zCDP kernel
    increments: tuple[tuple[int, float], ...]  # (source variable, B increase) up to the root
    query: str | None = None
    sensitivity: float | None = None
    noise_scale: float | None = None
    rho: float | None = None  # a zCDP request's ρ
    request_id: str | None = None  # the client's id (None: none given; the store keeps a fresh one)
    replayed: bool = False  # True: a repeat of an earlier request id (its stored answer, no charge)


@dataclass(frozen=True)
class SourceInfo:
    """The public description of one source variable."""

    source: int
    kind: Literal["table", "vector"]
    domain: Domain | None  # tables
    shape: tuple[int, ...]  # vectors: the cells' shape; tables: the domain's
    integral: bool  # declared counts (tables are counts)
    root_id: str
    root_shape: tuple[int, ...]
    seed: int | None  # the kernel's research-mode seed, None when secure
