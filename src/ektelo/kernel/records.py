"""The kernel's public records of its own state: the query history, source
descriptions, and the receipt of one request.

All are functions of public state only (the requests granted, the schema,
the ledger): the kernel returns them, the port carries them as they are.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Literal

from ..domain import Domain

__all__ = ["PrivacyUnit", "QueryRecord", "Receipt", "SourceInfo"]


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


@dataclass(frozen=True)
class Receipt:
    """What one request did to the kernel's public state (`Kernel.receipted`):
    the source variables it created, in creation order, and — for a
    Private→Public request — the `QueryRecord` its charge wrote (what was
    charged at the root, the increments up the chain, a replay or not). A
    server maps a client's ids and accounts its charges from this alone."""

    created: tuple[int, ...] = ()
    record: QueryRecord | None = None  # the first of `records`: the one that charged
    records: tuple[QueryRecord, ...] = ()  # all it wrote (an envelope's, then its own)

    @property
    def charged_at_root(self) -> float:
        """What the request added at the root (0 for a replay or a free request)."""
        if self.record is None or self.record.replayed:
            return 0.0
        return self.record.charged_at_root

    @property
    def increments(self) -> tuple[tuple[int, float], ...]:
        return () if self.record is None else self.record.increments


@dataclass(frozen=True)
class PrivacyUnit:
    """The neighbouring relation of a table protected per privacy unit (issue #37).

    Neighbouring tables differ in every row of one unit — all rows sharing a
    value of the identifier `column` — added or removed (Tumult's
    `AddRowsWithID`); the engine keeps at most `max_rows` of each unit's rows
    (chosen by a keyed hash no analyst can see), so one unit moves at most
    `max_rows` rows of the bounded table. With `max_groups` (and `group_by`,
    the grouping attributes) the engine keeps instead at most `max_groups`
    groups of each unit and at most `max_rows` rows of each (unit, group):
    the L0 and L∞ bounds, so one unit moves at most `max_groups·max_rows`
    rows (L1) and a count grouped by `group_by` by at most
    `√max_groups·max_rows` in L2. Without a `PrivacyUnit` the relation is
    one row added or removed. A public value: the ledger records it, and
    reports state it."""

    column: str
    max_rows: int
    max_groups: int | None = None
    group_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if type(self.column) is not str or not self.column:
            raise TypeError(f"privacy_unit must name a column, got {self.column!r}")
        name = "max_rows_per_unit" if self.max_groups is None else "max_rows_per_group"
        object.__setattr__(self, "max_rows", _bound(self.max_rows, name))
        if self.max_groups is None:
            if self.group_by:
                raise ValueError("group_by= names the groups of max_groups_per_unit: give both")
            return
        object.__setattr__(self, "max_groups", _bound(self.max_groups, "max_groups_per_unit"))
        names = self.group_by
        if isinstance(names, str) or not isinstance(names, tuple | list) or not names:
            raise ValueError("max_groups_per_unit needs group_by=, the grouping attributes")
        if any(type(n) is not str for n in names) or len(set(names)) != len(names):
            raise ValueError(f"group_by must name distinct attributes, got {names!r}")
        if self.column in names:
            raise ValueError(f"group_by names the privacy unit {self.column!r}")
        object.__setattr__(self, "group_by", tuple(names))

    @property
    def stability(self) -> int:
        """Rows one unit moves in the bounded table, at most (L1 = L0·L∞)."""
        return self.max_rows * (self.max_groups or 1)

    def __str__(self) -> str:
        if self.max_groups is None:
            return f"privacy unit {self.column!r}, at most {self.max_rows} rows each"
        return (
            f"privacy unit {self.column!r}, at most {self.max_groups} groups of "
            f"{list(self.group_by)} each, {self.max_rows} rows per group"
        )


def _bound(k: object, name: str) -> int:
    """A contribution bound: an int in [1, 2**20], or ValueError naming it."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or int(k) < 1:
        raise ValueError(f"{name} must be a positive int, got {k!r}")
    if int(k) > 2**20:
        raise ValueError(f"{name} must be at most 2**20, got {k!r}")
    return int(k)
