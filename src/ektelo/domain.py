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
DataFrame (`Domain.encode`) refuses, with the column and value named, any value
outside the domain and any missing or unknown column: nothing is dropped
silently.
"""

from __future__ import annotations

import itertools
import json
import math
import numbers
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["Attribute", "Domain"]


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
        unknown = set(spec) - {"size", "values", "bins"}
        if unknown:
            raise ValueError(f"attribute {name!r}: unknown keys {sorted(unknown)}")
        values = spec.get("values")
        bins = spec.get("bins")
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
        """The code of one value (a label, a binned value, or a code)."""
        if self.values is not None:
            if _is_hashable(value) and value in self.values:
                return self.values.index(value)
            raise ValueError(f"attribute {self.name!r}: {value!r} is not {self.describe()}")
        try:
            return int(self.encode(pd.Series([value], dtype=object))[0])
        except ValueError:
            raise ValueError(
                f"attribute {self.name!r}: {value!r} is not {self.describe()}"
            ) from None

    def encode(self, column: Any) -> np.ndarray:
        """Codes (int64) of every value of `column`; ValueError on the first bad one."""
        series = pd.Series(column).reset_index(drop=True)
        if self.values is not None:
            mapping = {v: i for i, v in enumerate(self.values)}
            codes = np.fromiter(
                (mapping.get(v, -1) if _is_hashable(v) else -1 for v in series),
                dtype=np.int64,
                count=len(series),
            )
            self._check(series, codes >= 0)
            return codes
        numeric = np.array(pd.to_numeric(series, errors="coerce"), dtype=np.float64)
        if series.dtype == object:  # bools and the like are not numbers here
            numeric[[isinstance(v, bool | np.bool_) for v in series]] = np.nan
        if self.bins is not None:
            edges = np.asarray(self.bins)
            idx = np.searchsorted(edges, numeric, side="right") - 1
            self._check(series, np.isfinite(numeric) & (idx >= 0) & (idx < self.size))
            return idx.astype(np.int64)
        ok = np.isfinite(numeric) & (numeric == np.round(numeric))
        ok &= (numeric >= 0) & (numeric < self.size)
        self._check(series, ok)
        return numeric.astype(np.int64)

    def _check(self, series: pd.Series, ok: np.ndarray) -> None:
        if ok.all():
            return
        row = int(np.flatnonzero(~ok)[0])
        raise ValueError(
            f"column {self.name!r}: value {series.iloc[row]!r} (row {row}) is outside the "
            f"domain ({self.describe()}); {int((~ok).sum())} bad value(s) in all"
        )

    def describe(self) -> str:
        """A short description of the allowed values."""
        if self.values is not None:
            more = "" if self.size <= 10 else f" … ({self.size} values)"
            return f"one of {list(self.values[:10])}{more}"
        if self.bins is not None:
            return f"in [{self.bins[0]:g}, {self.bins[-1]:g}) binned by {self.size} edges"
        return f"integer codes 0..{self.size - 1}"


def _edge(name: str, e: Any) -> float:
    if isinstance(e, bool) or not isinstance(e, numbers.Real) or not math.isfinite(float(e)):
        raise ValueError(f"attribute {name!r}: bin edges must be finite numbers, got {e!r}")
    return float(e)


def _is_hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _hashable(v: Any) -> Hashable:
    return tuple(v) if isinstance(v, list) else v


class Domain:
    """An ordered collection of attributes (the public schema of a table)."""

    def __init__(self, attributes: Iterable[Attribute]):
        attrs = tuple(attributes)
        for a in attrs:
            if not isinstance(a, Attribute):
                raise TypeError(f"a Domain is built from Attributes, got {type(a).__name__}")
        names = [a.name for a in attrs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate attribute names in {names}")
        if not attrs:
            raise ValueError("a domain needs at least one attribute")
        self.attributes = attrs
        self._index = {a.name: i for i, a in enumerate(attrs)}

    # -- construction ------------------------------------------------------------
    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> Domain:
        """From {name: size | {"values": [...]} | {"bins": [...]} | {"size": n}}."""
        if not isinstance(spec, Mapping):
            raise TypeError(
                f"a domain spec is a mapping of attribute names, got {type(spec).__name__}"
            )
        return cls(Attribute.from_spec(name, s) for name, s in spec.items())

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
        return {a.name: a.to_spec() for a in self.attributes}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    # -- structure ---------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

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
        return isinstance(other, Domain) and self.attributes == other.attributes

    def __hash__(self) -> int:
        return hash(self.attributes)

    def __repr__(self) -> str:
        return "Domain(" + ", ".join(f"{a.name}={a.size}" for a in self.attributes) + ")"

    # -- data --------------------------------------------------------------------
    def encode(self, frame: pd.DataFrame, *, ignore_extra: bool = False) -> np.ndarray:
        """The (rows × attributes) int64 code matrix of `frame`.

        Every attribute must be a column; a column that is not an attribute is
        an error unless `ignore_extra`. Any value outside the domain raises
        ValueError naming the column and the value.
        """
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"expected a pandas DataFrame, got {type(frame).__name__}")
        columns = [str(c) for c in frame.columns]
        if len(set(columns)) != len(columns):
            raise ValueError(f"duplicate column names in {columns}")
        missing = [n for n in self.names if n not in columns]
        if missing:
            raise ValueError(f"missing column(s) {missing}; the domain needs {list(self.names)}")
        extra = [c for c in columns if c not in self._index]
        if extra and not ignore_extra:
            raise ValueError(
                f"unknown column(s) {extra} not in the domain {list(self.names)}; select the "
                f"domain's columns first or pass ignore_extra=True"
            )
        renamed = frame.set_axis(columns, axis=1)
        codes = np.empty((len(frame), len(self)), dtype=np.int64)
        for j, a in enumerate(self.attributes):
            codes[:, j] = a.encode(renamed[a.name])
        return codes

    def read_csv(self, path: str | Path, *, ignore_extra: bool = False) -> pd.DataFrame:
        """Read a CSV file's domain columns (raw values, in domain order).

        Columns with string labels are read as strings. The values are
        checked here (`encode`), so a bad file fails on reading.
        """
        header = [str(c) for c in pd.read_csv(path, nrows=0).columns]
        missing = [n for n in self.names if n not in header]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing}")
        extra = [c for c in header if c not in self._index]
        if extra and not ignore_extra:
            raise ValueError(
                f"{path}: unknown column(s) {extra} not in the domain; pass ignore_extra=True"
            )
        dtypes = {
            a.name: str
            for a in self.attributes
            if a.values is not None and all(isinstance(v, str) for v in a.values)
        }
        frame = pd.read_csv(path, usecols=list(self.names), dtype=dtypes, keep_default_na=False)
        frame = frame[list(self.names)]
        self.encode(frame)
        return frame


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
