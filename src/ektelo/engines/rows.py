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

Timing (issues #22, #36).  A table is its code matrix, a row mask and the
public domain size of each column (`Rows`): `where`, `select`, `split` and
`vectorize` do the same work whatever the predicate selects — a mask over
every row, a column copy of every row, a weighted count over every row — so
how long they take says nothing about how many rows matched.  `group_by`
too: it counts every row of the code matrix (weight 1 if a member, 0 if
not) into the PUBLIC key domain (the product of the key columns' sizes, up
to `GROUP_DOMAIN_MAX` cells) and returns one row per key of that domain,
the keys with no member row masked out — its work and its output's size are
functions of the table's height and the domain only, with no shortcut for
an empty result.  Above `GROUP_DOMAIN_MAX` keys it groups every row of the
code matrix (not only the members) with `np.unique`: the work no longer
depends on what a `where` selected, but the output's height is the number of
distinct keys in the code matrix (docs/kernel.md, residual channels).  The
marginals (PrivBayes, MST/AIM's selection) are counted the same way.
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
    sizes: tuple[int, ...] | None = None  # each column's public domain size, if known

    @staticmethod
    def all(codes: np.ndarray, sizes: tuple[int, ...] | None = None) -> Rows:
        return Rows(codes, None, sizes)

    def weights(self) -> np.ndarray:
        """The mask as float64 weights (1 a member, 0 not), one per row."""
        return self.member().astype(np.float64)

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


#: the largest public key domain `group_rows` enumerates (cells); beyond it,
#: the distinct keys of the code matrix (see the module docstring)
GROUP_DOMAIN_MAX = 1 << 20


def where_rows(rows: Rows, mask_of: Callable[[np.ndarray], np.ndarray]) -> Rows:
    """The rows for which the compiled predicate holds (tested on every row)."""
    mask = rows.member() & np.asarray(mask_of(rows.codes), dtype=bool)
    return Rows(rows.codes, mask, rows.sizes)


def select_rows(rows: Rows, columns: Sequence[int]) -> Rows:
    """Projection onto `columns` (every row kept, a multiset)."""
    sizes = None if rows.sizes is None else tuple(rows.sizes[j] for j in columns)
    return Rows(np.ascontiguousarray(rows.codes[:, list(columns)]), rows.mask, sizes)



def group_rows(rows: Rows, columns: Sequence[int], count: str | None, cap: int) -> Rows:
    """PINQ GroupBy: one row per distinct key of `columns` present in the table.

    Adding or removing one record changes one group: at most one row removed
    and one added, hence 2-stable (also with the capped group size).

    Data-independent work (module docstring): every row of the code matrix is
    counted with its member weight into the key domain; the result holds a
    row per key of the public domain (or of the code matrix, above
    `GROUP_DOMAIN_MAX`), masked where no member row has that key — no
    filtering and no shortcut for an empty result."""
    cols = list(columns)
    keys = rows.codes[:, cols]
    key_sizes = None if rows.sizes is None else tuple(rows.sizes[j] for j in cols)
    if key_sizes is not None and int(np.prod(key_sizes, dtype=np.int64)) <= GROUP_DOMAIN_MAX:
        n = int(np.prod(key_sizes, dtype=np.int64))
        if cols:
            flat = np.ravel_multi_index(tuple(keys.T), key_sizes)
            unique = np.stack(np.unravel_index(np.arange(n), key_sizes), axis=1)
        else:  # no key: one group (a structural case)
            flat, unique = np.zeros(keys.shape[0], dtype=np.int64), np.zeros((1, 0), np.int64)
        sizes = np.bincount(flat, weights=rows.weights(), minlength=n)
    else:  # every row of the code matrix, members or not
        unique, inverse = np.unique(keys, axis=0, return_inverse=True)
        sizes = np.bincount(inverse.reshape(-1), weights=rows.weights(), minlength=len(unique))
    present = sizes > 0
    out_sizes = None if key_sizes is None else key_sizes + ((cap + 1,) if count else ())
    if count is None:
        return Rows(unique.astype(np.int64), present, out_sizes)
    capped = np.minimum(sizes, cap).astype(np.int64)
    return Rows(np.column_stack([unique, capped]).astype(np.int64), present, out_sizes)


def split_rows(rows: Rows, column: int, size: int) -> list[Rows]:
    """One table per value 0..size-1 of `column` (disjoint; a partition)."""
    values, member = rows.codes[:, column], rows.member()
    return [Rows(rows.codes, member & (values == v), rows.sizes) for v in range(size)]


def vectorize_rows(rows: Rows, columns: Sequence[int], shape: tuple[int, ...]) -> np.ndarray:
    """T-Vectorize: x[i] = number of rows in cell i of the product domain of
    `columns` (C-order flattening), as float64; every row is counted with
    weight 1 (member) or 0 (not), so the work does not depend on the mask
    (a table without a mask, structurally every row, is counted unweighted)."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if not columns:  # the total (a structural case: no column named)
        return np.array([float(np.count_nonzero(rows.member()))])
    flat = np.ravel_multi_index(tuple(rows.codes[:, j] for j in columns), shape)
    if rows.mask is None:
        return np.bincount(flat, minlength=n).astype(np.float64)
    return np.bincount(flat, weights=rows.mask.astype(np.float64), minlength=n)
