"""The in-memory table engine: a table is a code matrix and a row mask.

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
from typing import TYPE_CHECKING, Any

import numpy as np

from ..domain import Domain
from ..kernel.contracts import MAX_CELLS, PrivacyUnit
from ..predicates import compile_predicate
from . import rows as tables
from .base import (
    GROUP_MARKER,
    Sparse,
    check_on_invalid,
    check_unit_column,
    group_axes,
    sparse_cells,
    unit_order_text,
)

if TYPE_CHECKING:  # pandas is imported where used: a vector needs none (#41)
    import pandas as pd

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
                flat = np.zeros(table.height, dtype=np.int64)
                for j, size in zip(columns, shape, strict=True):
                    flat = flat * size + table.column(j)
                cells, inverse = np.unique(flat, return_inverse=True)
                counts = np.bincount(inverse, weights=table.weights(), minlength=cells.size)
                out.append(sparse_cells(cells, counts))  # zero counts left out
        return out

    def codes(self, table: tables.Rows) -> np.ndarray:
        return np.array(table.selected(), dtype=np.int64, copy=True)

    def key_counts(self, table: tables.Rows, column: str) -> tuple[list[str], np.ndarray]:
        return tables.key_counts(table, column)

    def recode(self, table: tables.Rows, column: str, keys: Sequence[str]) -> tables.Rows:
        return tables.recode_rows(table, column, keys)

    def __repr__(self) -> str:
        return "MemoryEngine()"


def open_frame(
    frame: pd.DataFrame, domain: Domain, *, on_invalid: str = "error",
    show_bad_values: bool = False, units: PrivacyUnit | None = None, key: str = "",
) -> tables.Rows:  # fmt: skip
    """The root table of `frame`: its codes, every row a member — with
    `units`, at most `units.max_rows` rows of each unit (contracts C4)."""
    axes: list[int] = []
    if units is not None:
        check_unit_column(units.column, domain, frame.columns)
        if frame[units.column].isna().any():
            raise ValueError(f"privacy_unit={units.column!r} has missing values: every row "
                             "needs its unit's identifier")  # fmt: skip
        if frame[units.column].dtype.kind == "f":
            raise TypeError(f"privacy_unit={units.column!r} must hold integers or strings")
        axes = group_axes(units, domain)
    missing = [o for o in domain.open if o not in frame.columns]
    if missing:
        raise ValueError(f"missing open column(s) {missing}; the domain declares them open")
    opened = {o: frame[o].reset_index(drop=True) for o in domain.open}  # kept as text
    ids = None if units is None else frame[units.column].reset_index(drop=True)
    valid = None  # the rows `clean` keeps, for what is kept beside the codes
    if check_on_invalid(on_invalid) == "drop" and (ids is not None or domain.open):
        valid = np.ones(len(frame), dtype=bool)
        for a in domain.attributes:
            valid &= a._codes(frame[a.name].reset_index(drop=True))[2]
        if ids is not None:
            ids = ids[valid].reset_index(drop=True)
    if units is not None:  # the identifier stays here; the codes are the domain's
        frame = frame[list(domain.columns)]
    if on_invalid != "error":
        frame = domain.clean(frame, on_invalid)
    # the smallest codes, column by column (issue #42): a column is contiguous
    # for `vectorize`, and the matrix is the one copy of the data kept
    codes = domain.encode(frame, show_bad_values=show_bad_values, dtype=domain.code_dtype(),
                          order="F")  # fmt: skip
    kept = None
    if units is not None and ids is not None:
        kept = _kept_per_unit(ids, codes, units, axes, key)
        codes = np.asfortranarray(codes[kept])
    codes.setflags(write=False)  # a fresh array: read-only, not copied
    columns = []
    for name, column in opened.items():
        text = column.astype(str).to_numpy()  # an open column's keys are text
        if valid is not None:
            text = text[valid]
        if kept is not None:
            text = text[kept]
        distinct, index = np.unique(text, return_inverse=True)
        columns.append((name, index.reshape(-1), distinct))
    return tables.Rows(codes, None, tuple(int(n) for n in domain.shape), None, tuple(columns))


def _kept_per_unit(
    ids: pd.Series, codes: np.ndarray, units: PrivacyUnit, axes: list[int], key: str
) -> np.ndarray:
    """The rows kept: the first max_rows of each unit — or of each of its first
    max_groups groups — in the keyed orders (base.py)."""
    import pandas as pd

    u = ids.astype(str).to_numpy()
    order = pd.DataFrame({"u": u, "h": unit_order_text(key, u, codes)})
    within = ["u"]
    if units.max_groups is not None:
        gcols = [f"g{i}" for i in range(len(axes))]
        for name, axis in zip(gcols, axes, strict=True):
            order[name] = codes[:, axis]
        # each distinct (unit, group) hashed once, ranked within its unit
        groups = order[["u", *gcols]].drop_duplicates()
        groups["gh"] = unit_order_text(key, groups["u"].to_numpy(), groups[gcols].to_numpy(),
                                       (GROUP_MARKER,))  # fmt: skip
        groups = groups.sort_values(["u", "gh", *gcols])
        groups["grank"] = groups.groupby("u", sort=False).cumcount()
        order = order.merge(groups.drop(columns="gh"), on=["u", *gcols], how="left")  # row order
        within += gcols
    order = order.sort_values([*within, "h"], kind="stable")
    rank = order.groupby(within, sort=False).cumcount().to_numpy()
    kept = rank < units.max_rows
    if units.max_groups is not None:
        kept &= order["grank"].to_numpy() < units.max_groups
    keep = np.zeros(len(ids), dtype=bool)
    keep[order.index[kept]] = True
    return keep
