"""Domains: the public schema of a table (paper §3).

A `Domain` is an ordered list of named `Attribute`s, each with a finite size.
An attribute's values are encoded as integer codes 0..size-1 in one of three
ways:

* integer-coded: the values already are the codes (``"age": 85``);
* labelled: a list of values, code = index (``"sex": {"values": ["F", "M"]}``);
* binned: increasing edges e_0 < … < e_k, a value v gets the code i with
  e_i ≤ v < e_{i+1} (``"salary": {"bins": [0, 10000, 20000]}``).

The table's vector (T-Vectorize, §5.1) has one cell per element of the
product of the sizes, in C order over the attributes chosen. Encoding a
DataFrame (`Domain.encode`) refuses any value outside the domain and any
missing or unknown column: nothing is dropped silently. The error
(`DomainValueError`) names the column, the kind of problem and how many values
the kind of problem (missing values, booleans, values outside the domain),
never a value, a row or a count: the values are the private data, and
messages carry nothing that depends on them beyond the refusal itself (the
kernel's rule). Only on the data holder's explicit request
(`show_bad_values=True`) does it count the bad values and list the first few
offending rows and values. Booleans are never read as the codes 1/0: a True/False value
is accepted only by an attribute whose labels are booleans (and such an
attribute accepts no 1/0). A CSV whose header repeats a column name is refused
(`Domain.read_csv`): pandas would rename the copy and it would be ignored.
`csv_delimiter` reads a CSV file's delimiter off its header line (comma,
semicolon, tab or bar: the one whose split names the domain's columns), as
DuckDB's reader sniffs it, so every engine reads the same files.
"""

from __future__ import annotations

import csv
import gzip
import itertools
import json
import math
import numbers
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pandas is imported where used: a vector needs none (#41)
    import pandas as pd

__all__ = ["OTHER_KEY", "Attribute", "Domain", "DomainValueError", "csv_delimiter"]

# The delimiters `csv_delimiter` recognises, the comma first.
DELIMITERS = (",", ";", "\t", "|")

# Text values read as missing (case-insensitive, after stripping blanks), when
# they are not among an attribute's labels: pandas' usual NA spellings.
_MISSING_TEXT = frozenset({"", "nan", "na", "n/a", "null", "none", "<na>", "nat"})

# How many offending rows `show_bad_values=True` lists.
SHOWN_BAD_VALUES = 10

# Rows per block when numbers are encoded in place (`Attribute._encode_into`).
_ENCODE_BLOCK = 1 << 16


class DomainValueError(ValueError):
    """A column holds values the domain cannot encode.

    The message names the column and the kind of problem (missing, boolean,
    outside the domain), never a value, a row or a count. `summary` is that
    description (with counts on request); `listing` the first
    `SHOWN_BAD_VALUES` offending rows and values, only when the data holder
    asked for them (`show_bad_values=True`), else None.
    """

    def __init__(self, column: str, summary: str, listing: str | None):
        self.column, self.summary, self.listing = column, summary, listing
        tail = listing if listing is not None else "show_bad_values=True lists them"
        super().__init__(f"{summary}; {tail}")


@dataclass(frozen=True)
class Attribute:
    """One attribute: a name, a size, and optionally value labels or bin edges."""

    name: str
    size: int
    values: tuple[Hashable, ...] | None = None
    bins: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if type(self.name) is not str or not self.name:
            raise TypeError(f"an attribute name must be a non-empty str, got {self.name!r}")
        if isinstance(self.size, bool) or not isinstance(self.size, numbers.Integral):
            raise TypeError(f"attribute {self.name!r}: size must be an integer, got {self.size!r}")
        if self.size < 1:
            raise ValueError(f"attribute {self.name!r}: size must be ≥ 1, got {self.size}")
        object.__setattr__(self, "size", int(self.size))
        if self.values is not None and self.bins is not None:
            raise ValueError(f"attribute {self.name!r}: give values or bins, not both")
        if self.values is not None:
            values = tuple(self.values)
            if len(values) != self.size:
                raise ValueError(
                    f"attribute {self.name!r}: {len(values)} values for size {self.size}"
                )
            if len(set(values)) != len(values):
                raise ValueError(f"attribute {self.name!r}: duplicate values in {list(values)}")
            object.__setattr__(self, "values", values)
        if self.bins is not None:
            edges = tuple(_edge(self.name, e) for e in self.bins)
            if len(edges) != self.size + 1:
                raise ValueError(
                    f"attribute {self.name!r}: {len(edges)} bin edges for size {self.size} "
                    f"(need size + 1)"
                )
            if any(b <= a for a, b in itertools.pairwise(edges)):
                raise ValueError(f"attribute {self.name!r}: bin edges must increase strictly")
            object.__setattr__(self, "bins", edges)

    @classmethod
    def from_spec(cls, name: str, spec: Any) -> Attribute:
        """An attribute from its JSON form: a size, or {"size"|"values"|"bins": ...}."""
        if isinstance(spec, numbers.Integral) and not isinstance(spec, bool):
            return cls(name, int(spec))
        if not isinstance(spec, Mapping):
            raise TypeError(
                f"attribute {name!r}: expected a size or an object with 'size', 'values' or "
                f"'bins', got {spec!r}"
            )
        unknown = set(spec) - {"size", "values", "bins", "range", "width"}
        if unknown:
            raise ValueError(
                f"attribute {name!r}: unknown keys {sorted(unknown)}; an attribute is a size, "
                f"or an object with 'values', 'bins', 'range' and 'width', or 'size'"
            )
        if "range" in spec or "width" in spec:
            if set(spec) - {"range", "width"}:
                raise ValueError(
                    f"attribute {name!r}: 'range' goes with 'width' only (not with "
                    f"{sorted(set(spec) - {'range', 'width'})})"
                )
            rng, width = spec.get("range"), spec.get("width", 1)
            if (
                isinstance(rng, list | tuple)
                and len(rng) == 2
                and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in rng)
                and width == 1
                and not isinstance(width, bool)
                and 0 <= rng[1] - rng[0] < 10**7
            ):  # integers one by one: the values themselves, so every comparison works
                return cls(name, int(rng[1]) - int(rng[0]) + 1,
                           tuple(range(int(rng[0]), int(rng[1]) + 1)))
            return cls(name, *_range_bins(name, rng, width))
        values = spec.get("values")
        bins = spec.get("bins")
        if values is not None and not isinstance(values, list | tuple):
            raise TypeError(f"attribute {name!r}: 'values' must be a list, got {values!r}")
        if bins is not None and not isinstance(bins, list | tuple):
            raise TypeError(f"attribute {name!r}: 'bins' must be a list of edges, got {bins!r}")
        if values is not None:
            size = len(values)
        elif bins is not None:
            size = len(bins) - 1
        elif "size" in spec:
            size = spec["size"]
        else:
            raise ValueError(f"attribute {name!r}: give 'size', 'values' or 'bins'")
        if "size" in spec and spec["size"] != size:
            raise ValueError(f"attribute {name!r}: size {spec['size']} does not match {size}")
        return cls(
            name,
            size,
            None if values is None else tuple(_hashable(v) for v in values),
            None if bins is None else tuple(bins),
        )

    def to_spec(self) -> Any:
        """The JSON form (inverse of `from_spec`)."""
        if self.values is not None:
            return {"values": list(self.values)}
        if self.bins is not None:
            return {"bins": list(self.bins)}
        return self.size

    def code_of(self, value: Any) -> int:
        """The code of one public value (a label, a binned value, or a code);
        the value is the caller's, so the error may name it. Text read from a
        file (``"27"``) matches a numeric label (27)."""
        import pandas as pd

        try:
            return int(self.encode(pd.Series([value], dtype=object))[0])
        except ValueError:
            pass
        if isinstance(value, str) and self.values is not None:
            number = pd.to_numeric(pd.Series([value.strip()]), errors="coerce")[0]
            if np.isfinite(number):
                for i, label in enumerate(self.values):
                    if _is_number(label) and float(label) == float(number):  # type: ignore[arg-type]
                        return i
        raise ValueError(f"attribute {self.name!r}: {value!r} is not {self.describe()}")

    def nearest_edges(self, value: float) -> tuple[float | None, float | None]:
        """The bin edges just below and just above `value` (None past an end)."""
        assert self.bins is not None
        below = [e for e in self.bins if e <= value]
        above = [e for e in self.bins if e > value]
        return (below[-1] if below else None), (above[0] if above else None)

    def edge_index(self, value: Any, what: str = "bound") -> int:
        """The index of the bin edge `value` of a binned attribute, or a
        ValueError naming the nearest edges (a threshold inside a bin cannot be
        answered from the bin counts)."""
        import pandas as pd

        assert self.bins is not None
        if isinstance(value, str):
            value = pd.to_numeric(pd.Series([value.strip()]), errors="coerce")[0]
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(
            float(value)
        ):
            raise ValueError(f"attribute {self.name!r}: {what} must be a number, got {value!r}")
        v = float(value)
        if v in self.bins:
            return self.bins.index(v)
        below, above = self.nearest_edges(v)
        near = " and ".join(f"{e:g}" for e in (below, above) if e is not None)
        raise ValueError(
            f"attribute {self.name!r} is binned: {what} {v:g} is not a bin edge (nearest "
            f"edge{'s' if below is not None and above is not None else ''}: {near}); "
            f"the counts of a bin cannot be split"
        )

    def range_codes(self, lo: Any, hi: Any) -> tuple[int, int]:
        """Inclusive codes (a, b) of the range from `lo` to `hi` (public values).

        Labels and integer codes: both bounds inclusive. Binned attributes:
        the half-open [lo, hi) with both bounds bin edges (an inclusive upper
        bound inside a bin would silently cover the whole bin)."""
        if self.bins is not None:
            a, b = self.edge_index(lo, "lower bound"), self.edge_index(hi, "upper bound")
            if b <= a:
                raise ValueError(
                    f"attribute {self.name!r}: the range [{lo}, {hi}) is empty (a binned "
                    f"range is half-open: lower edge < upper edge)"
                )
            return a, b - 1
        if self.values is None:
            a, b = _code_number(self, lo), _code_number(self, hi)
        else:
            a, b = self.code_of(lo), self.code_of(hi)
        if a > b:
            raise ValueError(f"attribute {self.name!r}: the range {lo!r}..{hi!r} is empty")
        return a, b

    def encode(self, column: Any, *, show_bad_values: bool = False) -> np.ndarray:
        """Codes (int64) of every value of `column`.

        Any value the attribute cannot encode raises `DomainValueError`
        naming the column and the kinds of problem, without any value, row
        or count; `show_bad_values=True` (the data holder's opt-in) adds the
        counts and the first `SHOWN_BAD_VALUES` offending rows (0-based
        positions) and values. Booleans are refused unless the labels are
        booleans.
        """
        series, codes, ok, is_bool = self._codes(column)
        if not ok.all():
            raise self._bad_values(series, ~ok, is_bool, show_bad_values)
        return np.asarray(codes, dtype=np.int64)

    def _encode_into(self, column: Any, out: np.ndarray, show_bad_values: bool) -> None:
        """`encode(column)` written into `out` (any integer type that holds
        the codes). A plain NumPy numeric column (integers or floats, not
        booleans) of an attribute without labels is encoded block by block,
        with no float64 or int64 copy of the column (issue #42); every block
        is checked, and any value the attribute cannot encode sends the
        column through `encode`, which refuses it exactly as before."""
        import pandas as pd  # (a frame's column: pandas is loaded already)

        series = column if isinstance(column, pd.Series) else None
        if (
            series is not None
            and self.values is None
            and isinstance(series.dtype, np.dtype)
            and series.dtype.kind in "iuf"
        ):
            values = series.to_numpy(copy=False)
            if values.ndim == 1 and len(values) == len(out) and self._numbers_into(values, out):
                return
        out[:] = self.encode(column, show_bad_values=show_bad_values)

    def _numbers_into(self, values: np.ndarray, out: np.ndarray) -> bool:
        """Codes of numbers into `out`, block by block; False when some value
        is not a code (every block is encoded and checked all the same)."""
        good = True
        edges = None if self.bins is None else np.asarray(self.bins)
        integral = values.dtype.kind in "iu"
        for start in range(0, len(values), _ENCODE_BLOCK):
            v = values[start : start + _ENCODE_BLOCK]
            part = out[start : start + _ENCODE_BLOCK]
            if edges is not None:  # NaN and ±inf fall outside every bin
                codes = np.searchsorted(edges, v, side="right") - 1
                good &= bool(codes.min() >= 0) & bool(codes.max() < self.size)
                np.copyto(part, codes, casting="unsafe")
            elif integral:
                good &= bool(v.min() >= 0) & bool(v.max() < self.size)
                np.copyto(part, v, casting="unsafe")
            else:
                ok = np.isfinite(v) & (v == np.round(v)) & (v >= 0) & (v < self.size)
                good &= bool(ok.all())
                np.copyto(part, np.where(ok, v, 0), casting="unsafe")
        return good

    def _codes(self, column: Any) -> tuple[pd.Series, np.ndarray, np.ndarray, np.ndarray]:
        """(series, codes, ok, is_bool): the codes where `ok`, garbage elsewhere."""
        import pandas as pd

        series = pd.Series(column).reset_index(drop=True)
        if isinstance(series.dtype, pd.CategoricalDtype):  # match on the values themselves
            series = series.astype(object)
        is_bool = _bool_mask(series)
        if self.values is not None:
            codes = self._label_codes(series, is_bool)
            ok = codes >= 0
        else:
            if pd.api.types.is_bool_dtype(series.dtype):  # True/False are not numbers here
                numeric = np.full(len(series), np.nan)
            else:
                numeric = np.array(  # a writable copy
                    pd.to_numeric(series, errors="coerce").to_numpy(
                        dtype=np.float64, na_value=np.nan
                    )
                )
                numeric[is_bool] = np.nan
            if self.bins is not None:
                codes = np.searchsorted(np.asarray(self.bins), numeric, side="right") - 1
                ok = np.isfinite(numeric) & (codes >= 0) & (codes < self.size)
            else:
                ok = np.isfinite(numeric) & (numeric == np.round(numeric))
                ok &= (numeric >= 0) & (numeric < self.size)
                codes = np.where(ok, numeric, 0)
        return series, np.asarray(codes), np.asarray(ok, dtype=bool), is_bool

    def clamp(self, column: Any) -> pd.Series:
        """`column` with every numeric value outside the attribute moved to the
        nearest value inside it (a value-by-value map, so 1-stable: see
        `Domain.clean`). Integer codes are also rounded to the nearest code.
        Missing values, booleans and unknown labels have no nearest value:
        they raise `DomainValueError` (use ``on_invalid="drop"`` for them)."""
        import pandas as pd

        series, _, ok, is_bool = self._codes(column)
        if ok.all():
            return series
        numeric = np.array(pd.to_numeric(series, errors="coerce"), dtype=np.float64)
        numeric[is_bool] = np.nan
        if self.values is not None:  # numeric labels: the nearest label; others have none
            labels = [v for v in self.values if _is_number(v)]
            if len(labels) != self.size or not np.isfinite(numeric[~ok]).all():
                bad = ~ok if len(labels) != self.size else ~ok & ~np.isfinite(numeric)
                raise self._bad_values(series, bad, is_bool, False, clamp=True)
            grid = np.array(labels, dtype=np.float64)
            nearest = grid[np.abs(numeric[:, None] - grid[None, :]).argmin(axis=1)]
            out = series.astype(object).copy()
            out[~ok] = [self.values[labels.index(v)] if v in labels else v
                        for v in nearest[~ok].tolist()]
            return out
        if not np.isfinite(numeric[~ok]).all():  # missing or non-numeric: no nearest value
            raise self._bad_values(series, ~ok & ~np.isfinite(numeric), is_bool, False,
                                   clamp=True)
        if self.bins is not None:
            low, high = self.bins[0], self.bins[-2]  # the last bin's lower edge: inside
        else:
            numeric = np.round(numeric)
            low, high = 0.0, float(self.size - 1)
        fixed = np.clip(numeric, low, high)
        out = series.astype(object).copy()
        out[~ok] = fixed[~ok]
        return out

    def _label_codes(self, series: pd.Series, is_bool: np.ndarray) -> np.ndarray:
        """Label indices, -1 where no label matches. Booleans match only
        boolean labels and other values only other labels (True == 1 in
        Python, so one lookup would read True as the label 1)."""
        import pandas as pd

        assert self.values is not None
        codes = np.full(len(series), -1, dtype=np.int64)
        if is_bool.any():
            flags = np.array([bool(v) for v in series[is_bool]], dtype=bool)
            boolean = {v: i for i, v in enumerate(self.values) if isinstance(v, bool)}
            codes[is_bool] = np.where(flags, boolean.get(True, -1), boolean.get(False, -1))
        rest = ~is_bool
        place = [i for i, v in enumerate(self.values) if not isinstance(v, bool)]
        if not place or not rest.any():
            return codes
        labels = pd.Index([self.values[i] for i in place], dtype=object)
        values = series if rest.all() else series[rest]
        try:  # a hash lookup with dict semantics (None matches None, NaN nothing)
            found = labels.get_indexer(pd.Index(values, dtype=object))
        except TypeError:  # unhashable values: one at a time
            plain = {label: j for j, label in enumerate(labels)}
            found = np.fromiter(
                (plain.get(v, -1) if _is_hashable(v) else -1 for v in values),
                dtype=np.int64,
                count=len(values),
            )
        codes[rest] = np.where(found >= 0, np.asarray(place)[found], -1)
        numeric = {float(self.values[i]): i  # type: ignore[arg-type]
                   for i in place if _is_number(self.values[i])}
        if numeric and (codes[rest] < 0).any():
            # text that spells a numeric label ("3" for 3: a CSV column whose
            # one blank cell made pandas keep every value as text)
            idx = np.flatnonzero(rest & (codes < 0))
            texts = series.iloc[idx]
            if texts.map(lambda v: isinstance(v, str)).any():
                as_number = pd.to_numeric(texts.astype(str).str.strip(), errors="coerce")
                hits = as_number.map(lambda v: numeric.get(float(v), -1) if v == v else -1)
                codes[idx] = np.where(texts.map(lambda v: isinstance(v, str)), hits, -1)
        return codes

    def _bad_values(
        self,
        series: pd.Series,
        bad: np.ndarray,
        is_bool: np.ndarray,
        show: bool,
        clamp: bool = False,
    ) -> DomainValueError:
        """The error for the rows `bad`: the column and the kinds of problem;
        how many, which rows and which values only when `show` (the data
        holder's opt-in). Without it the message is the same for neighbouring
        tables with the same kinds of problem in the same column."""

        def some(k: int, noun: str) -> str:  # "3 values" on request, else "values"
            return _count(k, noun) if show else f"{noun}s"

        gone = np.zeros_like(bad)
        gone[bad] = _missing_mask(series[bad])
        boolean = bad & is_bool & ~gone
        other = bad & ~gone & ~boolean
        parts = []
        if k := int(gone.sum()):
            parts.append(f"{some(k, 'missing value')} (NaN/blank)")
        if k := int(boolean.sum()):
            parts.append(f"{some(k, 'boolean value')} (True/False are not read as 1/0)")
        if k := int(other.sum()):
            if self.values is not None:
                labels = list(self.values[:10])
                more = "" if self.size <= 10 else f" … ({self.size} labels)"
                flip = " (1/0 are not read as True/False)" if self.boolean_labels else ""
                parts.append(f"{some(k, 'value')} not among the labels {labels}{more}{flip}")
            else:
                hint = ""
                if self.bins is None:  # the usual first guess: a size for values 1..n
                    hint = (
                        '; a size gives codes from 0: write other values as {"values": [...]} '
                        'or {"range": [lo, hi]}'
                    )
                parts.append(f"{some(k, 'value')} outside the domain ({self.describe()}{hint})")
        summary = f"column {self.name!r}: " + ", ".join(parts)
        if clamp:
            summary += " cannot be clamped (no nearest value); on_invalid='drop' drops such rows"
        elif not show:
            summary += "; on_invalid='drop' or 'clamp' cleans them"
        listing = None
        if show:
            rows = np.flatnonzero(bad)
            shown = ", ".join(f"row {r} = {_show(series.iloc[r])}" for r in rows[:SHOWN_BAD_VALUES])
            listing = f"bad values: {shown}"
            if rows.size > SHOWN_BAD_VALUES:
                listing += f" (first {SHOWN_BAD_VALUES} of {rows.size})"
        return DomainValueError(self.name, summary, listing)

    @property
    def boolean_labels(self) -> bool:
        """Whether some label is a boolean (then True/False values are accepted)."""
        return self.values is not None and any(isinstance(v, bool) for v in self.values)

    def describe(self) -> str:
        """A short description of the allowed values."""
        if self.values is not None:
            more = "" if self.size <= 10 else f" … ({self.size} values)"
            return f"one of {list(self.values[:10])}{more}"
        if self.bins is not None:
            return f"in [{self.bins[0]:g}, {self.bins[-1]:g}) cut into {_count(self.size, 'bin')}"
        return f"integer codes 0..{self.size - 1}"


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _code_number(attr: Attribute, value: Any) -> int:
    """An integer code given as a number or as text (a range file's cell)."""
    import pandas as pd

    number = pd.to_numeric(pd.Series([value]), errors="coerce")[0]
    if not (np.isfinite(number) and number == round(number) and 0 <= number < attr.size):
        raise ValueError(f"attribute {attr.name!r}: {value!r} is not {attr.describe()}")
    return int(number)


def _range_bins(name: str, rng: Any, width: Any) -> tuple[int, None, tuple[float, ...]]:
    """The bins of the shorthand {"range": [lo, hi], "width": w}: edges lo,
    lo + w, … up to the first edge above hi, so every value lo ≤ v ≤ hi has a
    bin (with integer data and width 1, one bin per integer lo..hi). Edges
    are computed in exact decimal arithmetic (0.1 steps stay 0.1 steps)."""
    from fractions import Fraction

    if not isinstance(rng, list | tuple) or len(rng) != 2 or not all(map(_is_number, rng)):
        raise ValueError(f"attribute {name!r}: 'range' must be [lo, hi] (two numbers), got {rng!r}")
    if not _is_number(width) or not float(width) > 0 or not math.isfinite(float(width)):
        raise ValueError(f"attribute {name!r}: 'width' must be a positive number, got {width!r}")
    lo, hi, w = (Fraction(str(v)) for v in (*rng, width))
    if not hi >= lo:
        raise ValueError(f"attribute {name!r}: 'range' [{rng[0]}, {rng[1]}] needs lo ≤ hi")
    count = int((hi - lo) // w) + 1
    if count > 10**7:
        raise ValueError(f"attribute {name!r}: 'range' with this 'width' makes {count:,} bins")
    return count, None, tuple(float(lo + k * w) for k in range(count + 1))


def _edge(name: str, e: Any) -> float:
    if isinstance(e, bool) or not isinstance(e, numbers.Real) or not math.isfinite(float(e)):
        raise ValueError(f"attribute {name!r}: bin edges must be finite numbers, got {e!r}")
    return float(e)


def _count(k: int, noun: str) -> str:
    return f"{k} {noun}" + ("" if k == 1 else "s")


# pandas' inferred kinds of an object column that hold no booleans.
_NO_BOOLEANS = frozenset(
    {"string", "bytes", "integer", "floating", "mixed-integer-float", "decimal", "complex", "empty"}
)


def _bool_mask(series: pd.Series) -> np.ndarray:
    """Where the values are booleans (Python's or NumPy's)."""
    import pandas as pd

    if pd.api.types.is_bool_dtype(series.dtype):
        return np.array(series.notna(), dtype=bool)
    if series.dtype != object:
        return np.zeros(len(series), dtype=bool)
    kind = pd.api.types.infer_dtype(series, skipna=True)
    if kind == "boolean":
        return np.array(series.notna(), dtype=bool)
    if kind in _NO_BOOLEANS:
        return np.zeros(len(series), dtype=bool)
    return np.fromiter(
        (isinstance(v, bool | np.bool_) for v in series), dtype=bool, count=len(series)
    )


def _missing_mask(series: pd.Series) -> np.ndarray:
    """Where the values are missing: None/NaN/NA, or a blank or NA-like text."""
    import pandas as pd

    na = np.array(series.isna(), dtype=bool)  # a writable copy
    if series.dtype == object or isinstance(series.dtype, pd.StringDtype):
        text = np.fromiter(
            (isinstance(v, str) and v.strip().lower() in _MISSING_TEXT for v in series),
            dtype=bool,
            count=len(series),
        )
        na |= text
    return na


def _show(v: Any) -> str:
    """One value for the data holder's listing (NumPy scalars as Python's)."""
    return repr(v.item() if isinstance(v, np.generic) else v)


def _is_hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _hashable(v: Any) -> Hashable:
    return tuple(v) if isinstance(v, list) else v


#: the value of a recoded open column that stands for every key not released
OTHER_KEY = "(other)"


class Domain:
    """An ordered collection of attributes (the public schema of a table)."""

    def __init__(self, attributes: Iterable[Attribute], open: Iterable[str] = ()):
        """`open`: columns whose values are not known in advance (issue #39):
        not attributes — no codes, no cells — until the kernel's partition
        selection releases their keys (`Kernel.select_keys`) and `recode`
        makes them one (docs/sql.md, open categories)."""
        attrs = tuple(attributes)
        for a in attrs:
            if not isinstance(a, Attribute):
                raise TypeError(f"a Domain is built from Attributes, got {type(a).__name__}")
        opened = tuple(open)
        for o in opened:
            if type(o) is not str or not o:
                raise TypeError(f"an open column's name must be a non-empty str, got {o!r}")
        names = [a.name for a in attrs] + list(opened)
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate attribute names in {names}")
        if not attrs:
            raise ValueError("a domain needs at least one attribute")
        self.attributes = attrs
        self.open = opened
        self._index = {a.name: i for i, a in enumerate(attrs)}

    # -- construction ------------------------------------------------------------
    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> Domain:
        """From {name: size | {"values": [...]} | {"bins": [...]} | {"size": n}}."""
        if not isinstance(spec, Mapping):
            raise TypeError(
                f"a domain spec is a mapping of attribute names, got {type(spec).__name__}"
            )
        # keys starting with "$" ("$schema", "$comment") are notes, not attributes;
        # {"open": true} declares an open column (values unknown: issue #39)
        items = [(n, s) for n, s in spec.items() if not n.startswith("$")]
        opened = [n for n, s in items if isinstance(s, Mapping) and "open" in s]
        for n in opened:
            if dict(spec[n]) != {"open": True}:
                raise ValueError(f"attribute {n!r}: an open column is {{\"open\": true}} alone "
                                 f"(its values are not declared), got {dict(spec[n])!r}")
        return cls((Attribute.from_spec(n, s) for n, s in items if n not in opened), opened)

    @classmethod
    def from_json(cls, source: str | Path | Mapping[str, Any]) -> Domain:
        """From a JSON file path, a JSON string, or an already-parsed dict."""
        if isinstance(source, Mapping):
            return cls.from_dict(source)
        if isinstance(source, Path) or not str(source).lstrip().startswith("{"):
            with open(source, encoding="utf-8") as fh:
                return cls.from_dict(json.load(fh))
        return cls.from_dict(json.loads(str(source)))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {a.name: a.to_spec() for a in self.attributes}
        out.update({o: {"open": True} for o in self.open})
        return out

    def with_keys(self, column: str, keys: Sequence[Hashable]) -> Domain:
        """This domain with open column `column` made a categorical attribute
        of the released `keys` and one more value, `OTHER_KEY`, for every
        other key (what `recode` builds: no row is lost)."""
        if column not in self.open:
            raise ValueError(f"{column!r} is not an open column of this domain "
                             f"(open: {list(self.open)})")
        values = (*keys, OTHER_KEY)
        attr = Attribute(column, len(values), values)
        return Domain((*self.attributes, attr), tuple(o for o in self.open if o != column))

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    # -- structure ---------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column of the table the domain describes: the attributes,
        then the open columns."""
        return (*self.names, *self.open)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.attributes)

    @property
    def size(self) -> int:
        """Number of cells of the full vector (product of the sizes)."""
        return math.prod(self.shape)

    def index(self, name: str) -> int:
        if name not in self._index:
            raise ValueError(f"unknown attribute {name!r}; the domain has {list(self.names)}")
        return self._index[name]

    def __getitem__(self, name: str) -> Attribute:
        return self.attributes[self.index(name)]

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __iter__(self) -> Iterator[Attribute]:
        return iter(self.attributes)

    def __len__(self) -> int:
        return len(self.attributes)

    def project(self, names: Sequence[str]) -> Domain:
        """The sub-domain of `names`, in the order given."""
        return Domain(self[n] for n in check_names(self, names))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Domain) and self.attributes == other.attributes
                and self.open == other.open)

    def __hash__(self) -> int:
        return hash((self.attributes, self.open))

    def __repr__(self) -> str:
        shown = [f"{a.name}={a.size}" for a in self.attributes] + [f"{o}=open" for o in self.open]
        return "Domain(" + ", ".join(shown) + ")"

    # -- data --------------------------------------------------------------------
    def code_dtype(self) -> np.dtype[Any]:
        """The smallest unsigned integer type that holds every attribute's codes."""
        largest = max((a.size for a in self.attributes), default=1) - 1
        return np.dtype(np.min_scalar_type(largest))

    def encode(
        self,
        frame: pd.DataFrame,
        *,
        ignore_extra: bool = False,
        show_bad_values: bool = False,
        dtype: Any = np.int64,
        order: str = "C",
    ) -> np.ndarray:
        """The (rows × attributes) code matrix of `frame`: int64 (`dtype`: any
        integer type that holds the codes, e.g. `code_dtype()`), in C order
        (``order="F"``: column by column).

        Every attribute must be a column; a column that is not an attribute is
        an error unless `ignore_extra`. Any value the domain cannot encode
        (outside it, missing, or a boolean where the labels are not booleans)
        raises `DomainValueError` naming the column and the kind of problem,
        without any value, row or count. `show_bad_values=True` is the data
        holder's opt-in to count them and list the first `SHOWN_BAD_VALUES`
        offending rows and values in the message (never pass it where the
        message is seen by anyone not entitled to the data).
        """
        import pandas as pd

        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"expected a pandas DataFrame, got {type(frame).__name__}")
        columns = [str(c) for c in frame.columns]
        if len(set(columns)) != len(columns):
            raise ValueError(f"duplicate column names in {columns}")
        missing = [n for n in self.names if n not in columns]
        if missing:
            raise ValueError(f"missing column(s) {missing}; the domain needs {list(self.names)}")
        extra = [c for c in columns if c not in self._index and c not in self.open]
        if extra and not ignore_extra:
            raise ValueError(
                f"unknown column(s) {extra} not in the domain {list(self.names)}; select the "
                f"domain's columns first or pass ignore_extra=True"
            )
        kind = np.dtype(dtype)
        if kind.kind not in "iu" or any(a.size - 1 > np.iinfo(kind).max for a in self.attributes):
            raise ValueError(f"dtype {kind} cannot hold this domain's codes")
        if order not in ("C", "F"):
            raise ValueError(f"order must be 'C' or 'F', got {order!r}")
        renamed = frame.set_axis(columns, axis=1)
        layout: Any = order  # "C" or "F", checked above
        codes: np.ndarray = np.empty((len(frame), len(self)), dtype=kind, order=layout)
        for j, a in enumerate(self.attributes):
            a._encode_into(renamed[a.name], codes[:, j], show_bad_values)
        return codes

    def clean(self, frame: pd.DataFrame, on_invalid: str = "error") -> pd.DataFrame:
        """The domain's columns of `frame` with invalid values handled — the data
        holder's step before `protect` (it reads the private data):

        * ``"error"``: any invalid value raises `DomainValueError` (column and
          kind of problem, never a value, row or count);
        * ``"drop"``: rows holding an invalid value in any domain column are
          removed;
        * ``"clamp"``: numeric values outside an attribute are moved to its
          nearest value (`Attribute.clamp`); missing values and unknown labels
          still raise (drop them).

        Why the budget is charged correctly: both are fixed row-by-row maps
        from the public domain alone. Dropping is a 1-stable filter (tables
        differing in one row give tables differing in at most one row, like
        `where`, §4.2); clamping a 1-stable map (a changed row stays one changed
        row). So ε-DP of everything computed on the cleaned table is ε-DP of
        the raw table (stability 1: no extra charge), and nothing about how
        many rows were dropped or clamped is reported (that would be private).
        """
        import pandas as pd

        if on_invalid not in ("error", "drop", "clamp"):
            raise ValueError(f"on_invalid must be 'error', 'drop' or 'clamp', got {on_invalid!r}")
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"expected a pandas DataFrame, got {type(frame).__name__}")
        missing = [n for n in self.columns if n not in frame.columns]
        if missing:
            raise ValueError(f"missing column(s) {missing}; the domain needs "
                             f"{list(self.columns)}")
        out = frame[list(self.columns)].reset_index(drop=True)
        if on_invalid == "error":
            self.encode(out)
            return out
        if on_invalid == "clamp":  # (an open column has no domain to clamp to: kept as is)
            return pd.DataFrame({**{a.name: a.clamp(out[a.name]) for a in self.attributes},
                                 **{o: out[o] for o in self.open}})
        keep = np.ones(len(out), dtype=bool)
        for a in self.attributes:
            keep &= a._codes(out[a.name])[2]
        return out[keep].reset_index(drop=True)

    def read_csv(
        self,
        path: str | Path,
        *,
        ignore_extra: bool = False,
        show_bad_values: bool = False,
        on_invalid: str = "error",
    ) -> pd.DataFrame:
        """Read a CSV file's domain columns (raw values, in domain order).

        Columns with string labels are read as strings. A header that names
        a column twice is refused (pandas would rename the copy `a.1` and it
        would be silently ignored). The values are checked here (`encode`,
        with `show_bad_values`), so a bad file fails on reading.
        """
        import pandas as pd

        sep = csv_delimiter(path, self.names)
        # The header as written: pandas' own column names have copies renamed.
        first = pd.read_csv(path, nrows=1, header=None, dtype=str, keep_default_na=False,
                            sep=sep)
        header = [str(c) for c in first.iloc[0]] if len(first) else []
        repeated = sorted({c for c in header if header.count(c) > 1})
        if repeated:
            raise ValueError(
                f"{path}: the header repeats column name(s) {repeated}; pandas would rename "
                f"the copy and ignore it, so rename or drop the duplicate column"
            )
        missing = [n for n in self.columns if n not in header]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing}{delimiter_hint(path)}")
        extra = [c for c in header if c not in self._index and c not in self.open]
        if extra and not ignore_extra:
            raise ValueError(
                f"{path}: unknown column(s) {extra} not in the domain; pass ignore_extra=True"
            )
        dtypes = {
            a.name: str
            for a in self.attributes
            if a.values is not None and all(isinstance(v, str) for v in a.values)
        }
        dtypes.update({o: str for o in self.open})  # an open column's keys are text
        frame = pd.read_csv(path, usecols=list(self.columns), dtype=dtypes,
                            keep_default_na=False, sep=sep)
        frame = frame[list(self.columns)]
        if on_invalid != "error":  # the data holder's cleaning (see `clean`)
            return self.clean(frame, on_invalid)
        self.encode(frame, show_bad_values=show_bad_values)
        return frame


def csv_delimiter(path: str | Path, names: Sequence[str]) -> str:
    """The delimiter of the CSV file at `path`: the first of `DELIMITERS`
    (comma, semicolon, tab, bar) whose split of the header line holds every
    name of `names`, else the comma (the caller then reports the missing
    columns, naming the delimiter that splits the header best). Only the
    header — the table's public schema — is read. A file without a header
    line is refused as empty."""
    opener: Any = gzip.open if str(path).lower().endswith(".gz") else open
    with opener(path, "rt", newline="", encoding="utf-8", errors="replace") as fh:
        line = fh.readline().lstrip("\ufeff").rstrip("\r\n")
    if not line.strip():
        raise ValueError(f"{path}: the file is empty (no header line naming the columns)")
    splits = {d: next(csv.reader([line], delimiter=d)) for d in DELIMITERS}
    for d in DELIMITERS:
        if all(n in splits[d] for n in names):
            return d
    return ","


def delimiter_hint(path: str | Path) -> str:
    """'' or a note naming the delimiter the header line of `path` seems to
    use when it is not a comma (for a missing-columns message)."""
    try:
        opener: Any = gzip.open if str(path).lower().endswith(".gz") else open
        with opener(path, "rt", newline="", encoding="utf-8", errors="replace") as fh:
            line = fh.readline()
    except OSError:
        return ""
    counts = {d: line.count(d) for d in DELIMITERS}
    best = max(counts, key=lambda d: counts[d])
    if best == "," or counts[best] <= counts[","]:
        return ""
    shown = {"\t": "tab", ";": "';'", "|": "'|'"}[best]
    return f" (the header line is {shown}-separated, but its names are not the domain's)"


def check_names(domain: Domain, names: Any, what: str = "attrs") -> tuple[str, ...]:
    """`names` as a tuple of distinct attribute names of `domain`, or a clear error."""
    if isinstance(names, str):
        names = (names,)
    if not isinstance(names, Sequence):
        raise TypeError(f"{what} must be a list of attribute names, got {type(names).__name__}")
    out = tuple(names)
    for n in out:
        if type(n) is not str:
            raise TypeError(f"{what}: attribute names are str, got {n!r}")
        if n not in domain:
            raise ValueError(
                f"{what}: unknown attribute {n!r}; the domain has {list(domain.names)}"
            )
    if len(set(out)) != len(out):
        raise ValueError(f"{what}: duplicate attributes in {list(out)}")
    if not out:
        raise ValueError(f"{what}: need at least one attribute")
    return out

