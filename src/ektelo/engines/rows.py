"""Table transformations on private data (§5.1), as pure functions.

The in-memory table engine's rows (engines/memory.py; DuckDB and Spark tables live
in engines/duckdb.py and engines/spark.py, with the same meaning). A table
here is a code matrix (one row per record, one column per attribute of its
`Domain`; the smallest unsigned integers that hold the domain's codes,
column by column in memory: issue #42). These functions are called only by the kernel, through the
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
every row, the columns named (no data touched), a weighted count over every
row in blocks of a public size — so
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
    "key_counts",
    "recode_rows",
    "select_rows",
    "split_rows",
    "vectorize_rows",
    "where_rows",
]


@dataclass(frozen=True)
class Rows:
    """A private table: a code matrix (rows × attributes; non-negative
    integers of the smallest type that holds the domain's codes, column-major
    when it is a root table) and the mask of the rows that belong to it (the
    others were removed by `where` or `split`). `mask is None` means every
    row — a structural fact (a root table and its projections), not a
    property of the data. `columns`, when given, are the matrix's columns
    that make the table, in order (a projection: `select` copies nothing)."""

    codes: np.ndarray
    mask: np.ndarray | None  # bool, one entry per row of `codes`; None: all rows
    sizes: tuple[int, ...] | None = None  # each column's public domain size, if known
    columns: tuple[int, ...] | None = None  # the table's columns of `codes`; None: all
    # open columns (issue #39), carried by `where` and `split`: (name, each row's
    # index into keys, the distinct keys as text) — private until `recode`
    open: tuple[tuple[str, np.ndarray, np.ndarray], ...] = ()

    @staticmethod
    def all(codes: np.ndarray, sizes: tuple[int, ...] | None = None) -> Rows:
        return Rows(codes, None, sizes)

    @property
    def height(self) -> int:
        """The number of rows of the code matrix (members or not)."""
        return int(self.codes.shape[0])

    def column(self, j: int) -> np.ndarray:
        """The table's column j (a view of the code matrix)."""
        column: np.ndarray = self.codes[:, j if self.columns is None else self.columns[j]]
        return column

    def matrix(self) -> np.ndarray:
        """The table's columns as a matrix: the code matrix itself, or a copy
        of the projected columns."""
        if self.columns is None:
            return self.codes
        return np.ascontiguousarray(self.codes[:, list(self.columns)])

    def weights(self) -> np.ndarray:
        """The mask as float64 weights (1 a member, 0 not), one per row."""
        return self.member().astype(np.float64)

    def member(self) -> np.ndarray:
        """The mask as an array (every row when there is none)."""
        if self.mask is None:
            return np.ones(self.height, dtype=bool)
        return self.mask

    def count(self) -> int:
        return self.height if self.mask is None else int(np.count_nonzero(self.mask))

    def selected(self) -> np.ndarray:
        """The member rows themselves (work grows with their number)."""
        rows = self.matrix()
        return rows if self.mask is None else rows[self.mask]


#: the largest public key domain `group_rows` enumerates (cells); beyond it,
#: the distinct keys of the code matrix (see the module docstring)
GROUP_DOMAIN_MAX = 1 << 20

#: rows per block of `vectorize_rows`: its flat indices and weights stay in
#: the cache instead of being vectors of the table's height
_BLOCK_ROWS = 1 << 16


def where_rows(rows: Rows, mask_of: Callable[[np.ndarray], np.ndarray]) -> Rows:
    """The rows for which the compiled predicate holds (tested on every row)."""
    mask = rows.member() & np.asarray(mask_of(rows.matrix()), dtype=bool)
    return Rows(rows.codes, mask, rows.sizes, rows.columns, rows.open)


def select_rows(rows: Rows, columns: Sequence[int]) -> Rows:
    """Projection onto `columns` (every row kept, a multiset): the same code
    matrix with the columns named, no copy (the same work for any table)."""
    sizes = None if rows.sizes is None else tuple(rows.sizes[j] for j in columns)
    base = tuple(int(j) if rows.columns is None else rows.columns[j] for j in columns)
    return Rows(rows.codes, rows.mask, sizes, base)


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
    key_sizes = None if rows.sizes is None else tuple(rows.sizes[j] for j in cols)
    if key_sizes is not None and int(np.prod(key_sizes, dtype=np.int64)) <= GROUP_DOMAIN_MAX:
        n = int(np.prod(key_sizes, dtype=np.int64))
        if cols:
            flat = np.ravel_multi_index(tuple(rows.column(j) for j in cols), key_sizes)
            unique = np.stack(np.unravel_index(np.arange(n), key_sizes), axis=1)
        else:  # no key: one group (a structural case)
            flat, unique = np.zeros(rows.height, dtype=np.int64), np.zeros((1, 0), np.int64)
        sizes = np.bincount(flat, weights=rows.weights(), minlength=n)
    else:  # every row of the code matrix, members or not
        keys = np.column_stack([rows.column(j) for j in cols]) if cols else np.zeros(
            (rows.height, 0), dtype=np.int64)
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
    values, member = rows.column(column), rows.member()
    return [Rows(rows.codes, member & (values == v), rows.sizes, rows.columns, rows.open)
            for v in range(size)]  # fmt: skip


def key_counts(rows: Rows, column: str) -> tuple[list[str], np.ndarray]:
    """Open column `column`'s keys present in the table and their counts:
    every row counted with its member weight into the column's distinct keys
    (the same work whatever the mask), the keys with no member dropped."""
    index, keys = _open(rows, column)
    counts = np.bincount(index, weights=rows.weights(), minlength=keys.size).astype(np.int64)
    present = np.flatnonzero(counts > 0)
    return [str(k) for k in keys[present]], counts[present]


def recode_rows(rows: Rows, column: str, keys: Sequence[str]) -> Rows:
    """The table with open column `column` appended as a coded column: code
    i for key keys[i], len(keys) for every other key — one lookup per row of
    the code matrix (members or not), through a table over its distinct keys."""
    index, distinct = _open(rows, column)
    code_of = {k: i for i, k in enumerate(keys)}
    lookup = np.fromiter((code_of.get(str(k), len(keys)) for k in distinct), dtype=np.int64,
                         count=distinct.size)
    new = lookup[index]
    width = max(len(keys), max(rows.sizes or (1,)) - 1)
    kind = np.result_type(rows.codes.dtype, np.min_scalar_type(width))
    matrix = np.column_stack([rows.matrix().astype(kind, copy=False), new.astype(kind)])
    matrix.setflags(write=False)
    sizes = None if rows.sizes is None else (*rows.sizes, len(keys) + 1)
    rest = tuple(o for o in rows.open if o[0] != column)
    return Rows(matrix, rows.mask, sizes, None, rest)


def _open(rows: Rows, column: str) -> tuple[np.ndarray, np.ndarray]:
    for name, index, keys in rows.open:
        if name == column:
            return index, keys
    raise ValueError(f"the table holds no open column {column!r}")


def vectorize_rows(rows: Rows, columns: Sequence[int], shape: tuple[int, ...]) -> np.ndarray:
    """T-Vectorize: x[i] = number of rows in cell i of the product domain of
    `columns` (C-order flattening), as float64; every row is counted with
    weight 1 (member) or 0 (not), so the work does not depend on the mask
    (a table without a mask, structurally every row, is counted unweighted).

    Block by block of `_BLOCK_ROWS` rows (a public constant): each block's
    cell indices (Horner's rule over the named columns, which were checked
    against the domain when the table was opened) are counted into the
    vector — no index or weight vector of the table's height."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if not columns:  # the total (a structural case: no column named)
        return np.array([float(np.count_nonzero(rows.member()))])
    parts = [rows.column(j) for j in columns]
    step = max(_BLOCK_ROWS, n)  # a block's count vector is no longer than its rows
    flat = np.empty(min(step, rows.height), dtype=np.intp)
    total = np.zeros(n, dtype=np.int64 if rows.mask is None else np.float64)
    for start in range(0, rows.height, step):
        stop = min(start + step, rows.height)
        cell = flat[: stop - start]
        cell[:] = parts[0][start:stop]
        for part, size in zip(parts[1:], shape[1:], strict=True):
            cell *= size
            cell += part[start:stop]
        if rows.mask is None:
            total += np.bincount(cell, minlength=n)
        else:
            total += np.bincount(cell, weights=rows.mask[start:stop], minlength=n)
    return total.astype(np.float64, copy=False)
