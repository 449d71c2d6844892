"""Table transformations on private data (§5.1), as pure functions.

The in-memory table engine's rows (engines/memory.py; DuckDB and Spark tables live
in engines/duckdb.py and engines/spark.py, with the same meaning). A table
here is an int64 code matrix (one row per record, one column per attribute of
its `Domain`). These functions are called only by the kernel, through the
engine (`MemoryEngine`), which records each result as a new source variable with the
stability stated here (PINQ semantics, McSherry 2009; every engine's):

  where        rows satisfying a row predicate                    1-stable
  select       projection onto attributes (a multiset: no dedup)  1-stable
  group_by     one row per distinct key (a table of groups)       2-stable
  split        one table per value of an attribute (partition)    1-stable
  vectorize    counts over the product domain, C order            1-stable

Timing.  A table is its code matrix and a row mask (`Rows`): `where`, `select`,
`split` and `vectorize` do the same work whatever the predicate selects — a
mask over every row, a column copy of every row, a weighted count over every
row — so how long they take says nothing about how many rows matched.  What
remains (docs/kernel.md): `group_by` works on the selected rows only (its cost
grows with their number and the number of distinct keys), and so does
PrivBayes's selection, which runs on the rows of the table it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Rows",
    "group_rows",
    "select_rows",
    "split_rows",
    "vectorize_rows",
    "where_rows",
]


@dataclass(frozen=True)
class Rows:
    """A private table: int64 codes (rows × attributes) and the mask of the
    rows that belong to it (the others were removed by `where` or `split`).
    `mask is None` means every row — a structural fact (a root table and its
    projections), not a property of the data."""

    codes: np.ndarray
    mask: np.ndarray | None  # bool, one entry per row of `codes`; None: all rows

    @staticmethod
    def all(codes: np.ndarray) -> Rows:
        return Rows(codes, None)

    def member(self) -> np.ndarray:
        """The mask as an array (every row when there is none)."""
        if self.mask is None:
            return np.ones(self.codes.shape[0], dtype=bool)
        return self.mask

    def count(self) -> int:
        return self.codes.shape[0] if self.mask is None else int(np.count_nonzero(self.mask))

    def selected(self) -> np.ndarray:
        """The member rows themselves (work grows with their number)."""
        rows: np.ndarray = self.codes if self.mask is None else self.codes[self.mask]
        return rows


def where_rows(rows: Rows, mask_of: Callable[[np.ndarray], np.ndarray]) -> Rows:
    """The rows for which the compiled predicate holds (tested on every row)."""
    return Rows(rows.codes, rows.member() & np.asarray(mask_of(rows.codes), dtype=bool))


def select_rows(rows: Rows, columns: Sequence[int]) -> Rows:
    """Projection onto `columns` (every row kept, a multiset)."""
    return Rows(np.ascontiguousarray(rows.codes[:, list(columns)]), rows.mask)



def group_rows(rows: Rows, columns: Sequence[int], count: str | None, cap: int) -> Rows:
    """PINQ GroupBy: one row per distinct key of `columns` present in the table.

    Adding or removing one record changes one group: at most one row removed
    and one added, hence 2-stable (also with the capped group size)."""
    keys = rows.selected()[:, list(columns)]
    if keys.shape[0] == 0:
        return Rows.all(np.empty((0, len(columns) + (count is not None)), dtype=np.int64))
    unique, sizes = np.unique(keys, axis=0, return_counts=True)
    if count is None:
        return Rows.all(unique.astype(np.int64))
    capped = np.minimum(sizes, cap).astype(np.int64)
    return Rows.all(np.column_stack([unique, capped]).astype(np.int64))


def split_rows(rows: Rows, column: int, size: int) -> list[Rows]:
    """One table per value 0..size-1 of `column` (disjoint; a partition)."""
    values, member = rows.codes[:, column], rows.member()
    return [Rows(rows.codes, member & (values == v)) for v in range(size)]


def vectorize_rows(rows: Rows, columns: Sequence[int], shape: tuple[int, ...]) -> np.ndarray:
    """T-Vectorize: x[i] = number of rows in cell i of the product domain of
    `columns` (C-order flattening), as float64; every row is counted with
    weight 1 (member) or 0 (not), so the work does not depend on the mask
    (a table without a mask, structurally every row, is counted unweighted)."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if rows.codes.shape[0] == 0:
        return np.zeros(n)
    flat = np.ravel_multi_index(tuple(rows.codes[:, j] for j in columns), shape)
    if rows.mask is None:
        return np.bincount(flat, minlength=n).astype(np.float64)
    return np.bincount(flat, weights=rows.mask.astype(np.float64), minlength=n)
