"""Tidy tables as NumPy columns (public layer): a question's rows and the
answers beside them are kept as named NumPy columns and become a pandas
DataFrame only where one is asked for (`Columns.to_frame`: `Session.ask`,
files, plots). The command line prints the small ones without importing
pandas (issue #41: pandas costs ~0.25 s of CPU to import, more than the
rest of a small question), in the text pandas' ``to_string`` gives.

A column is a float64 or integer ndarray, `NullableInt` (pandas' IntegerArray:
values and a mask of NA), `Category` (pandas' Categorical: codes and
labels), or any object pandas takes as a column (a list, a Series). A table
can also extend a DataFrame (`base`), to which its columns are added.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pandas is imported where a DataFrame is asked for (#41)
    import pandas as pd

__all__ = ["Category", "Columns", "NullableInt", "frame_text", "plain_text"]


@dataclass(frozen=True, eq=False)
class NullableInt:
    """pandas' nullable integer column (``Int8`` … ``Int64``): `values` of
    that width and `mask` (True: NA)."""

    values: np.ndarray
    mask: np.ndarray

    def __len__(self) -> int:
        return len(self.values)

    def to_pandas(self) -> Any:
        import pandas as pd

        return pd.arrays.IntegerArray(self.values, self.mask)

    def take(self, index: np.ndarray) -> NullableInt:
        return NullableInt(self.values[index], self.mask[index])


@dataclass(frozen=True, eq=False)
class Category:
    """pandas' Categorical from codes (-1: NA) over `labels` (an Index of them)."""

    codes: np.ndarray
    labels: tuple[Any, ...]

    def __len__(self) -> int:
        return len(self.codes)

    def to_pandas(self) -> Any:
        import pandas as pd

        return pd.Categorical.from_codes(self.codes, pd.Index(list(self.labels)))

    def take(self, index: np.ndarray) -> Category:
        return Category(self.codes[index], self.labels)


class Columns:
    """An ordered table of named columns (see the module docstring) with
    pandas-style `attrs`; `to_frame()` is the DataFrame, built once."""

    __slots__ = ("_frame", "attrs", "base", "columns")

    def __init__(self, columns: dict[str, Any], *, base: pd.DataFrame | None = None,
                 attrs: dict[str, Any] | None = None):
        self.base = base
        self.columns = dict(columns)
        self.attrs: dict[str, Any] = dict(base.attrs if base is not None and attrs is None
                                          else attrs or {})
        self._frame: pd.DataFrame | None = None

    @classmethod
    def of(cls, frame: pd.DataFrame) -> Columns:
        """A DataFrame as a table (`to_frame()` returns it)."""
        table = cls({}, base=frame)
        table.attrs = frame.attrs  # one dict: updates reach the frame
        table._frame = frame
        return table

    def __len__(self) -> int:
        if self.base is not None:
            return len(self.base)
        return len(next(iter(self.columns.values()))) if self.columns else 0

    @property
    def names(self) -> list[str]:
        return [*(self.base.columns if self.base is not None else ()), *self.columns]

    def extend(self, columns: dict[str, Any]) -> Columns:
        """A new table: these columns added after this one's (the rows shared)."""
        if self.base is not None and self.columns:
            return Columns(columns, base=self.to_frame(), attrs=self.attrs)
        if self.base is not None:
            return Columns(columns, base=self.base, attrs=self.attrs)
        return Columns({**self.columns, **columns}, attrs=self.attrs)

    def to_frame(self) -> pd.DataFrame:
        """The DataFrame (built on first call; the same object after)."""
        if self._frame is None:
            import pandas as pd

            if self.base is not None:  # the base's rows shared (pandas' copy-on-write)
                frame = self.base.copy(deep=False)
                for name, column in self.columns.items():
                    frame[name] = _pandas(column)
            else:
                frame = pd.DataFrame({k: _pandas(v) for k, v in self.columns.items()},
                                     copy=False)
            frame.attrs.update(self.attrs)
            self._frame = frame
        return self._frame


def _pandas(column: Any) -> Any:
    return column.to_pandas() if isinstance(column, NullableInt | Category) else column


# -- pandas' to_string, without pandas ---------------------------------------------------
# What `ektelo run` prints: DataFrame.to_string(index=False, max_rows=MAX_ROWS) with
# display.float_format "{:.2f}", as pandas 3 writes it (tests/test_columns.py compares
# the two on many tables): the text no longer follows the installed pandas' version.
MAX_ROWS = 20
_MAX_COLWIDTH = 50  # pandas' display.max_colwidth: longer values are cut by pandas


def frame_text(table: Columns | pd.DataFrame, max_rows: int = MAX_ROWS) -> str:
    """`table` as pandas prints it with ``to_string(index=False,
    max_rows=max_rows)`` and floats as ``{:.2f}``: pandas is imported only
    for a table this module cannot print itself (a DataFrame, a column of
    another kind, an empty table, values pandas would cut or escape)."""
    plain = isinstance(table, Columns) and table.base is None
    text = plain_text(table, max_rows) if plain else None
    if text is not None:
        return text
    import pandas as pd

    frame = table.to_frame() if isinstance(table, Columns) else table
    with pd.option_context("display.max_rows", max_rows, "display.width", 160,
                           "display.float_format", "{:.2f}".format):
        return str(frame.to_string(index=False, max_rows=max_rows))


def plain_text(table: Columns, max_rows: int) -> str | None:
    """`frame_text`'s text of a table of NumPy columns, made here (no pandas),
    or None where pandas must print it (see `frame_text`)."""
    n = len(table)
    if n == 0 or not table.columns:
        return None
    cut = n > max_rows
    half = max_rows // 2
    index = np.r_[0:half, n - half:n] if cut else np.arange(n)
    blocks: list[list[str]] = []
    for name, column in table.columns.items():
        cells = _cells(column, index)
        if cells is None or not isinstance(name, str) or not name.isprintable():
            return None
        numeric = not isinstance(column, Category)
        header = (" " + name) if numeric else name
        width = max(len(header), *(len(c) for c in cells))
        block = [header.rjust(width), *(c.rjust(width) for c in cells)]
        if cut:  # pandas' row of dots, right-justified (never cut to the width)
            block.insert(1 + half, ("..." if width > 3 else "..").rjust(width))
        blocks.append(block)
    # pandas' adjoin: each column left-justified to its widest cell, one space between
    widths = [max(len(c) for c in block) for block in blocks]
    padded = [[c.ljust(w + (1 if j < len(blocks) - 1 else 0)) for c in block]
              for j, (block, w) in enumerate(zip(blocks, widths, strict=True))]
    return "\n".join("".join(row) for row in zip(*padded, strict=True))


def _cells(column: Any, index: np.ndarray) -> list[str] | None:
    """The column's shown values as pandas writes them, or None (pandas' to do)."""
    if isinstance(column, NullableInt):
        values, mask = column.values[index], column.mask[index]
        if values.dtype.kind not in "iu":
            return None
        return ["<NA>" if m else str(int(v)) for v, m in zip(values.tolist(), mask.tolist(),
                                                              strict=True)]
    if isinstance(column, Category):
        labels = column.labels
        if not all(isinstance(v, str) and v.isprintable() and len(v) <= _MAX_COLWIDTH
                   and v == v.strip() and v != "" for v in labels):
            return None
        return ["NaN" if c < 0 else labels[c] for c in column.codes[index].tolist()]
    if isinstance(column, np.ndarray) and column.ndim == 1:
        values = column[index]
        if values.dtype == np.float64:
            return ["NaN" if v != v else f"{v:.2f}" for v in values.tolist()]
        if values.dtype.kind in "iu":
            return [str(v) for v in values.tolist()]
    return None

