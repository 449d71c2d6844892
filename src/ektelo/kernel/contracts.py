"""The contract beneath the kernel: what a table engine computes (issue #28, #35).

The argument — what this code must do for the kernel to be private, and why it
does — is the proof note `proofs/contracts.md`, checked against this file's version
(tests/kernel/test_proof_notes.py fails when the file changes after it).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from ..domain import Attribute, Domain
from .records import PrivacyUnit

__all__ = [
    "BATCH_CELLS",
    "BATCH_SETS",
    "MAX_CELLS",
    "EngineError",
    "PrivacyUnit",
    "Sparse",
    "TableEngine",
    "each_marginal",
    "group_domain",
    "sparse_cells",
]

# A marginal's nonzero cells: (cell indices ascending, int64; their counts, int64 > 0)
Sparse = tuple[np.ndarray, np.ndarray]

# Vectorizing more cells than this is refused (a public decision on the
# domain's size): select attributes first.
MAX_CELLS = 2**27

# `each_marginal` asks an engine for this many marginals at most in one call,
# and for fewer when their cells add up to more than BATCH_CELLS (one engine
# scan per batch; the results of one batch are held together).
BATCH_SETS = 128
BATCH_CELLS = 2**24


class EngineError(RuntimeError):
    """A table engine could not run an operation (its resources failed).

    The message names the engine and the operation only (C3)."""


class TableEngine(Protocol):
    """What the kernel asks of an engine; `table` values are the engine's own.

    Column arguments are positions in the table's public domain (checked by
    the kernel); `shape` is the public product domain of those columns. A
    table's rows are int64 codes, one column per attribute of its domain,
    never NULL (the engine made them valid when the table was opened)."""

    name: str

    def where(self, table: Any, predicate: Any, domain: Any) -> Any:
        """The rows satisfying `predicate` (a tree of `predicates.py`)."""

    def select(self, table: Any, columns: Sequence[int]) -> Any:
        """Projection onto `columns` (a multiset: no deduplication)."""

    def group_by(self, table: Any, columns: Sequence[int], count: str | None, cap: int) -> Any:
        """One row per distinct key; with `count`, the group size min(size, cap)."""

    def split(self, table: Any, column: int, size: int) -> list[Any]:
        """One table per code 0..size-1 of `column`."""

    def vectorize(self, table: Any, columns: Sequence[int], shape: tuple[int, ...]) -> np.ndarray:
        """Counts over the product domain of `columns`, C order, float64."""

    def count(self, table: Any) -> int:
        """The number of rows."""

    def marginals(
        self, table: Any, column_sets: Sequence[tuple[int, ...]], shapes: Sequence[tuple[int, ...]]
    ) -> list[Sparse]:
        """For each column set, its marginal's nonzero cells (C order over the
        set's columns as given, as `vectorize`): one scan where the engine can."""

    def key_counts(self, table: Any, column: str) -> tuple[list[str], np.ndarray]:
        """Open column `column` (the domain's `open`: kept as text, not coded):
        each distinct key of the table's rows, as text, and its number of rows
        (int64, > 0), in any order (issue #39: `Kernel.select_keys`)."""

    def recode(self, table: Any, column: str, keys: Sequence[str]) -> Any:
        """The table with open column `column` made its last coded column:
        code i for rows whose key is keys[i], len(keys) for any other key."""


def group_domain(domain: Domain, columns: Sequence[int], count: str | None, cap: int) -> Domain:
    """The public domain of `group_by`'s table of groups: the key attributes,
    and optionally a group-size attribute `count` with codes min(size, cap)."""
    attrs = [domain.attributes[j] for j in columns]
    if count is not None:
        attrs.append(Attribute(count, cap + 1))
    return Domain(attrs)


def each_marginal(
    engine: TableEngine,
    table: Any,
    column_sets: Sequence[tuple[int, ...]],
    shapes: Sequence[tuple[int, ...]],
) -> Iterator[Sparse]:
    """The marginals of `column_sets`, in order, asked of the engine in
    batches (a GROUP BY per batch where the engine allows; a batch's size is
    decided from the public shapes only). Runs engine work: the kernel calls
    it before the charge of the measurement that uses it."""
    start = 0
    while start < len(column_sets):
        stop, cells = start, 0
        while stop < len(column_sets) and stop - start < BATCH_SETS:
            size = math.prod(shapes[stop])
            if stop > start and cells + size > BATCH_CELLS:
                break
            cells += size
            stop += 1
        yield from engine.marginals(table, column_sets[start:stop], shapes[start:stop])
        start = stop


def sparse_cells(cells: np.ndarray, counts: np.ndarray) -> Sparse:
    """(cells ascending, counts) as int64, zero counts left out."""
    cells = np.asarray(cells, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    keep = counts > 0
    cells, counts = cells[keep], counts[keep]
    order = np.argsort(cells, kind="stable")
    return cells[order], counts[order]
