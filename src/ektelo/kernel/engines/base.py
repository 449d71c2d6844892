"""The table-engine interface (issue #28): where a protected table's rows live.

A protected table inside the kernel is a pair (engine, table value). The value
is opaque to the kernel: the in-memory engine's is a code matrix and a row
mask (`tables.Rows`), DuckDB's a lazily composed SQL relation over a file or
a database table, Spark's a DataFrame. The kernel calls the engine for the
table transformations of §5.1 (`where`, `select`, `group_by`, `split`) and for
what the Private→Public operators read: `vectorize` (the cell counts of
T-Vectorize), `count` (NoisyCount) and `marginals` (the nonzero cells of
several marginals at once: what PrivBayes's and MST/AIM's selections score,
batched by `each_marginal`). Only counts come back (`codes`, the rows
themselves, is there for tests); every engine computes the
same function of the rows, so stabilities and accounting are the kernel's and
do not depend on the engine (the engine decides nothing about privacy).

Why an engine failure is not a data-dependent exception after a charge.  The
transformations (`where`, `select`, `group_by`, `split`) only compose a plan:
they read no row, so they fail only on public facts (an attribute the public
domain does not have). The work on rows happens in `vectorize`, `count` and
`marginals`, and the kernel runs each of them *before* the charge of the
measurement that uses it (a vectorize is a Private transformation with no
charge; NoisyCount reads the count first, PrivBayes and marginal selection
compute every score they may need first, then charge). So no engine work
ever runs between a charge and its noisy answer.
The engines' SQL and DataFrame expressions are total on the rows they see —
codes are checked against the public domain when the table is protected
(on_invalid="error") or made valid row by row (drop/clamp), every cast is a
TRY_CAST or a numeric widening, cell arithmetic stays below `MAX_CELLS` — so
what can still fail is the engine's resources (memory, disk, an interrupted
cluster). Those failures reach the caller as one `EngineError` whose message
names the engine and the operation and nothing else (the engine's own
message, which may quote a value, goes only to the data holder's log), and
they happen before any charge. Like timing (docs/kernel.md), whether a
resource runs out depends on the table's size: that residual channel is
stated, not closed; a memory limit large enough for the output vector and
the engine's spill directory (`DuckDBEngine(memory_limit=, temp_directory=)`)
make it a failure of the data holder's configuration, not of the data.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

__all__ = [
    "BATCH_CELLS",
    "BATCH_SETS",
    "ON_INVALID",
    "EngineError",
    "Sparse",
    "TableEngine",
    "check_on_invalid",
    "each_marginal",
    "guarded",
    "sparse_cells",
]

# A marginal's nonzero cells: (cell indices ascending, int64; their counts, int64 > 0)
Sparse = tuple[np.ndarray, np.ndarray]

# `each_marginal` asks an engine for this many marginals at most in one call,
# and for fewer when their cells add up to more than BATCH_CELLS (one engine
# scan per batch; the results of one batch are held together).
BATCH_SETS = 128
BATCH_CELLS = 2**24

# The policies for values outside the domain (and NULLs), as in Domain.clean:
# "error" refuses them when the table is protected; "drop" removes the rows
# holding one (a 1-stable filter); "clamp" moves numbers outside an attribute
# to its nearest value (a 1-stable map; missing values and unknown labels have
# no nearest value and are refused at protect time, as Domain.clean does).
ON_INVALID = ("error", "drop", "clamp")

LOG = logging.getLogger("ektelo.kernel.engines")

_T = TypeVar("_T")


class EngineError(RuntimeError):
    """A table engine could not run an operation (its resources failed).

    The message names the engine and the operation only: the engine's own
    message, which may quote private values, is logged for the data holder
    (logger ``ektelo.kernel.engines``) and never carried to the caller."""


def check_on_invalid(on_invalid: Any) -> str:
    if not isinstance(on_invalid, str) or on_invalid not in ON_INVALID:
        raise ValueError(f"on_invalid must be 'error', 'drop' or 'clamp', got {on_invalid!r}")
    return on_invalid


def guarded(engine: str, operation: str, run: Callable[[], _T]) -> _T:
    """`run()`, with any failure turned into the fixed `EngineError`."""
    try:
        return run()
    except Exception as error:  # the engine's message may quote a value: log it only
        LOG.warning("%s engine: %s failed: %r", engine, operation, error)
        raise EngineError(f"the {engine} engine could not run {operation}") from None


class TableEngine(Protocol):
    """What the kernel asks of an engine; `table` values are the engine's own.

    Column arguments are positions in the table's public domain (checked by
    the kernel); `shape` is the public product domain of those columns. A
    table's rows are int64 codes, one column per attribute of its domain,
    never NULL (the engine made them valid when the table was opened)."""

    name: str

    def where(self, table: Any, predicate: Any, domain: Any) -> Any:
        """The rows satisfying `predicate` (a tree of `predicates.py`)."""
        ...

    def select(self, table: Any, columns: Sequence[int]) -> Any:
        """Projection onto `columns` (a multiset: no deduplication)."""
        ...

    def group_by(self, table: Any, columns: Sequence[int], count: str | None, cap: int) -> Any:
        """One row per distinct key; with `count`, the group size min(size, cap)."""
        ...

    def split(self, table: Any, column: int, size: int) -> list[Any]:
        """One table per code 0..size-1 of `column`."""
        ...

    def vectorize(self, table: Any, columns: Sequence[int], shape: tuple[int, ...]) -> np.ndarray:
        """Counts over the product domain of `columns`, C order, float64."""
        ...

    def count(self, table: Any) -> int:
        """The number of rows."""
        ...

    def marginals(
        self, table: Any, column_sets: Sequence[tuple[int, ...]], shapes: Sequence[tuple[int, ...]]
    ) -> list[Sparse]:
        """For each column set, its marginal's nonzero cells (C order over the
        set's columns as given, as `vectorize`): one scan where the engine can."""
        ...

    def codes(self, table: Any) -> np.ndarray:
        """The rows' codes as an int64 matrix (rows × columns; for tests)."""
        ...


def sparse_cells(cells: np.ndarray, counts: np.ndarray) -> Sparse:
    """(cells ascending, counts) as int64, zero counts left out."""
    cells = np.asarray(cells, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    keep = counts > 0
    cells, counts = cells[keep], counts[keep]
    order = np.argsort(cells, kind="stable")
    return cells[order], counts[order]


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
