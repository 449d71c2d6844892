"""Table transformations on private data (§5.1), as pure functions.

A table inside the kernel is an int64 code matrix (one row per record, one
column per attribute of its `Domain`). These functions are called only by the
kernel, which records each result as a new source variable with the
stability stated here (PINQ semantics, McSherry 2009):

  where        rows satisfying a row predicate                    1-stable
  select       projection onto attributes (a multiset: no dedup)  1-stable
  group_by     one row per distinct key (a table of groups)       2-stable
  split        one table per value of an attribute (partition)    1-stable
  vectorize    counts over the product domain, C order            1-stable
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..domain import Attribute, Domain

__all__ = [
    "MAX_CELLS",
    "group_domain",
    "group_rows",
    "select_rows",
    "split_rows",
    "vectorize_rows",
    "where_rows",
]

# Vectorizing more cells than this is refused (a public decision on the
# domain's size): select attributes first.
MAX_CELLS = 2**27


def where_rows(codes: np.ndarray, mask_of: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """The rows for which the compiled predicate holds."""
    mask = np.asarray(mask_of(codes), dtype=bool)
    return codes[mask]


def select_rows(codes: np.ndarray, columns: Sequence[int]) -> np.ndarray:
    """Projection onto `columns` (every row kept)."""
    return np.ascontiguousarray(codes[:, list(columns)])


def group_domain(domain: Domain, columns: Sequence[int], count: str | None, cap: int) -> Domain:
    """The domain of the table of groups: the key attributes, and optionally a
    group-size attribute `count` with codes min(size, cap) in 0..cap."""
    attrs = [domain.attributes[j] for j in columns]
    if count is not None:
        attrs.append(Attribute(count, cap + 1))
    return Domain(attrs)


def group_rows(
    codes: np.ndarray, columns: Sequence[int], count: str | None, cap: int
) -> np.ndarray:
    """PINQ GroupBy: one row per distinct key of `columns` present in the table.

    Adding or removing one record changes one group: at most one row removed
    and one added, hence 2-stable (also with the capped group size)."""
    keys = codes[:, list(columns)]
    if keys.shape[0] == 0:
        return np.empty((0, len(columns) + (count is not None)), dtype=np.int64)
    unique, sizes = np.unique(keys, axis=0, return_counts=True)
    if count is None:
        return unique.astype(np.int64)
    capped = np.minimum(sizes, cap).astype(np.int64)
    return np.column_stack([unique, capped]).astype(np.int64)


def split_rows(codes: np.ndarray, column: int, size: int) -> list[np.ndarray]:
    """One table per value 0..size-1 of `column` (disjoint; a partition)."""
    return [codes[codes[:, column] == v] for v in range(size)]


def vectorize_rows(codes: np.ndarray, columns: Sequence[int], shape: tuple[int, ...]) -> np.ndarray:
    """T-Vectorize: x[i] = number of rows in cell i of the product domain of
    `columns` (C-order flattening), as float64."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if codes.shape[0] == 0:
        return np.zeros(n)
    flat = np.ravel_multi_index(tuple(codes[:, j] for j in columns), shape)
    return np.bincount(flat, minlength=n).astype(np.float64)
