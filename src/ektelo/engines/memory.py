"""The in-memory table engine: a table is an int64 code matrix and a row mask.

This is the kernel's original representation (`rows.Rows`, whose module
docstring states each transformation's stability and what its running time
reveals); the engine wraps those functions behind the `TableEngine`
interface. It is the default for a pandas DataFrame handed to `protect`, and
the reference the other engines are tested against (tests/engines/).

Opening a table (`open_frame`) is the data holder's step before the kernel
exists: values outside the domain and missing values are handled by the
policy `on_invalid` through `Domain.clean` — "error" refuses them (the error
names the column and the kind of problem, never a value, row or count),
"drop" removes their rows (a 1-stable filter), "clamp" moves numbers outside
an attribute to its nearest value (a 1-stable map) and refuses what has no
nearest value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..domain import Domain
from ..kernel.contracts import MAX_CELLS
from ..predicates import compile_predicate
from . import rows as tables
from .base import Sparse, check_on_invalid, sparse_cells

__all__ = ["MemoryEngine", "open_frame"]


class MemoryEngine:
    """Tables as `rows.Rows` in this process's memory."""

    name = "memory"

    def where(self, table: tables.Rows, predicate: Any, domain: Domain) -> tables.Rows:
        return tables.where_rows(table, compile_predicate(predicate, domain))

    def select(self, table: tables.Rows, columns: Sequence[int]) -> tables.Rows:
        return tables.select_rows(table, columns)

    def group_by(
        self, table: tables.Rows, columns: Sequence[int], count: str | None, cap: int
    ) -> tables.Rows:
        return tables.group_rows(table, columns, count, cap)

    def split(self, table: tables.Rows, column: int, size: int) -> list[tables.Rows]:
        return tables.split_rows(table, column, size)

    def vectorize(
        self, table: tables.Rows, columns: Sequence[int], shape: tuple[int, ...]
    ) -> np.ndarray:
        return tables.vectorize_rows(table, columns, shape)

    def count(self, table: tables.Rows) -> int:
        return table.count()

    def marginals(
        self,
        table: tables.Rows,
        column_sets: Sequence[tuple[int, ...]],
        shapes: Sequence[tuple[int, ...]],
    ) -> list[Sparse]:
        out = []
        for columns, shape in zip(column_sets, shapes, strict=True):
            if not columns:
                out.append(sparse_cells(np.zeros(1), np.array([table.count()])))
            elif math.prod(shape) <= MAX_CELLS:  # dense: the same work whatever the mask
                x = tables.vectorize_rows(table, columns, shape)
                cells = np.flatnonzero(x)
                out.append(sparse_cells(cells, x[cells]))
            else:  # larger (PrivBayes's joint codes only): every row, weighted by the mask
                flat = np.zeros(table.codes.shape[0], dtype=np.int64)
                for j, size in zip(columns, shape, strict=True):
                    flat = flat * size + table.codes[:, j]
                cells, inverse = np.unique(flat, return_inverse=True)
                counts = np.bincount(inverse, weights=table.weights(), minlength=cells.size)
                out.append(sparse_cells(cells, counts))  # zero counts left out
        return out

    def codes(self, table: tables.Rows) -> np.ndarray:
        return np.array(table.selected(), dtype=np.int64, copy=True)

    def __repr__(self) -> str:
        return "MemoryEngine()"


def open_frame(
    frame: pd.DataFrame, domain: Domain, *, on_invalid: str = "error", show_bad_values: bool = False
) -> tables.Rows:
    """The root table of `frame`: its codes, every row a member."""
    if check_on_invalid(on_invalid) != "error":
        frame = domain.clean(frame, on_invalid)
    codes = domain.encode(frame, show_bad_values=show_bad_values)
    readonly = np.array(codes, dtype=np.int64, copy=True)
    readonly.setflags(write=False)
    return tables.Rows.all(readonly, tuple(int(n) for n in domain.shape))
