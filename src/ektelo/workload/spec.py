"""Questions over a table's domain (public): the workload specs of the command
line and the named questions of `ektelo.session`, both built here.

A question names the attributes to vectorize (T-Vectorize, §5.1), the query
matrix over their product domain, and a **tidy description of every query**:
one column per attribute — its label or integer code, or for a binned
attribute the bin's ``<attr>_lo``/``<attr>_hi`` edges — so that answers come
back as a DataFrame that pivots without parsing strings.

Spec strings (``ektelo run --workload``):

* ``histogram:a,b`` (alias ``identity:a,b``)  the counts of every cell of a × b
* ``cdf:a`` (alias ``prefix:a``)              the CDF of a (Prefix)
* ``cdf:a by b,c`` (also ``prefix:a|b,c``)    the CDF of a for every value of b, c
                                              and for all of them (Prefix(a) ⊗
                                              [Identity; Total] on b, c — §9.2)
* ``ranges:a``                                every range of a (1-D)
* ``random-ranges:a,b:N[:S]``                 N random ranges over a, b (seed S)
* ``marginals:K:a,b,c``                       all K-way marginals over a, b, c
* ``marginals:K:all``                         all K-way marginals of every attribute
* ``file:PATH``                               ranges from a CSV with columns
                                              ``<attr>_lo,<attr>_hi`` per attribute
* ``sum:a by b,c``                            the sum of numeric a for every cell
                                              of b × c (``sum:a``: over all rows)
* ``mean:a by b,c``                           the mean of a per cell: the ratio of
                                              a sum and a count measured jointly
* ``sum,count,mean:a by b,c``                 any of the three, from one workload
  (``… by b,c with totals``: also every sub-breakdown — b's cells summed over c,
  c's over b, and all rows — as the NA rows of a CDF breakdown)
* ``quantile:a@0.5,0.9 [by b,c]``             quantiles of numeric a, by inverting
                                              the noisy CDF (``cdf:a by b,c``)

Range bounds are in the domain's own units: labels and integer codes
inclusive (``age_lo=30, age_hi=39``); on a binned attribute the half-open bin
range [lo, hi) with both bounds bin edges — an upper bound inside a bin is
refused with the nearest edges, never widened silently to the whole bin.
Numbers read from a range file match numeric labels (``27`` is the label 27).

Tidy columns: a CDF row's attribute column is ``<a>_at_most`` (labels and
codes: the count of values ≤ it) or ``<a>_below`` (bins: values < that edge);
a breakdown or marginal leaves an attribute it sums over as missing (NA,
read "all"), and marginal rows carry a ``marginal`` column ("a×b").
Sums, counts and means (issue #38) carry a ``statistic`` column; a sum adds
each row's representative value of a (`ektelo.workload.values`: a bin's
midpoint, a numeric label, an integer code) over the clamped, binned table.
Quantile rows carry ``quantile`` (the level).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..columns import Category, Columns, NullableInt
from ..domain import Attribute, Domain
from ..matrix import EMatrix, Identity, Kronecker, Prefix, Total, VStack
from . import builders

if TYPE_CHECKING:  # pandas is imported where a question's rows are asked for (#41)
    import pandas as pd

__all__ = [
    "ALIASES",
    "Derived",
    "ParsedWorkload",
    "aggregates",
    "cdf",
    "custom",
    "histogram",
    "marginals",
    "parse",
    "quantiles",
    "ranges",
]

# Friendly names of the spec kinds (the planner sees the canonical kind).
ALIASES = {"histogram": "identity", "counts": "identity", "cdf": "prefix"}


@dataclass(frozen=True)
class Derived:
    """What is derived from a question's linear answers after measuring
    (post-processing, free): "aggregates" keeps the requested `statistics`
    of sums and counts and divides sums by counts for "mean"; "quantile"
    inverts the CDF at `levels`. `values` are the representative values of
    `attribute`'s codes (`ektelo.workload.values`). `basis` says what the
    value factor's rows are: "sum,count", or for a mean alone "ends" — the
    sums of distances to the value range's ends, Σ(v − lo)x and Σ(hi − v)x,
    whose sum is (hi − lo)·count: measured jointly (each row's sensitivity
    adds to hi − lo) the mean's noise e_S − m·e_C = (1 − t)e₁ − t·e₂,
    t = (m − lo)/(hi − lo), has variance 2b²((1 − t)² + t²) ≤ 2b², where the
    peers' clamped mean (a centred sum and a count, ε/2 each) has
    2b²(1 + 4(m − mid)²/(hi − lo)²) ≥ 2b² (b = (hi − lo)/ε)."""

    what: str
    attribute: str
    values: tuple[float, ...]
    statistics: tuple[str, ...] = ()
    levels: tuple[float, ...] = ()
    groups: int = 1
    basis: str = "sum,count"


@dataclass(frozen=True)
class ParsedWorkload:
    """A question: a workload over the vectorization of `attributes` (in that
    order), its kind (for the planner), and one tidy row per query (`table`:
    NumPy columns, or a DataFrame; `rows`: the DataFrame); with `derived`,
    the answers the analyst sees are derived from these (`ektelo.derived`)."""

    attributes: tuple[str, ...]
    matrix: EMatrix
    table: Columns
    kind: str
    shape: tuple[int, ...] = ()
    derived: Derived | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.table, Columns):  # a DataFrame
            object.__setattr__(self, "table", Columns.of(self.table))
        if not self.shape:  # the vector's shape: the attributes' sizes, from the rows
            object.__setattr__(self, "shape", tuple(self.table.attrs.get("shape", ())))
        if math.prod(self.shape) != self.matrix.shape[1]:
            raise ValueError("a question's shape must match its matrix's columns")

    @cached_property
    def rows(self) -> pd.DataFrame:
        """The tidy rows as a DataFrame (built on first use)."""
        return self.table.to_frame()

    @property
    def labels(self) -> list[str]:
        """One readable string per query (for printing), from the tidy rows."""
        return [
            ",".join(f"{k}={v}" for k, v in row.items() if not _missing(v))
            for row in self.rows.to_dict("records")
        ]


def _missing(v: Any) -> bool:
    import pandas as pd

    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA


# -- tidy columns -------------------------------------------------------------------
def _value(attr: Attribute, code: int) -> Any:
    if attr.values is not None:
        return attr.values[code]
    return int(code)


def _integer_dtype(low: int, high: int) -> str:
    """The narrowest pandas nullable integer dtype holding low..high: a
    question's code columns repeat over millions of rows (Int8 is 2 bytes a
    row, Int64 9)."""
    for bits in (8, 16, 32):
        if -(2 ** (bits - 1)) <= low and high < 2 ** (bits - 1):
            return f"Int{bits}"
    return "Int64"


def _cell_columns(attr: Attribute, codes: Any) -> dict[str, Any]:
    """The tidy column(s) of `attr` for these codes (None or -1: all values),
    built in NumPy (a 3-way marginals question over a wide table has ~10⁷
    rows): integer codes or integer labels as the narrowest nullable integer
    dtype (NA: all values), other labels as a categorical over the domain's
    labels in code order, bins as float edges (NaN: all values); pandas'
    column types as `ektelo.columns` describes them."""
    c = (np.asarray(codes) if isinstance(codes, np.ndarray)
         else np.array([-1 if v is None else int(v) for v in codes], dtype=np.int64))
    every = c < 0
    if attr.bins is not None:
        edges = np.asarray(attr.bins, dtype=np.float64)
        safe = np.where(every, 0, c)
        return {f"{attr.name}_lo": np.where(every, np.nan, edges[safe]),
                f"{attr.name}_hi": np.where(every, np.nan, edges[np.minimum(safe + 1,
                                                                         attr.size)])}
    labels = attr.values
    if labels is None or all(isinstance(v, int) and not isinstance(v, bool) for v in labels):
        table = (np.arange(attr.size, dtype=np.int64) if labels is None
                 else np.asarray(labels, dtype=np.int64))
        width = np.dtype(_integer_dtype(int(table.min()), int(table.max())).lower())
        values = table.astype(width)[np.where(every, 0, c)]
        return {attr.name: NullableInt(values, every)}  # integers beside NA
    # (pandas' own string dtype for text labels)
    return {attr.name: Category(np.where(every, -1, c), tuple(labels))}


def _grid(sizes: Sequence[int]) -> np.ndarray:
    return np.indices(list(sizes)).reshape(len(sizes), -1).T


def _frame(columns: dict[str, Any], shape: tuple[int, ...]) -> Columns:
    def column(values: Any) -> Any:
        if not isinstance(values, list):
            return values
        present = [v for v in values if v is not None]
        if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
            # codes stay integers beside NA (pandas' Int64)
            return NullableInt(np.array([0 if v is None else v for v in values], dtype=np.int64),
                               np.array([v is None for v in values], dtype=bool))
        if present and len(present) == len(values) and all(
                type(v) in (float, np.float64) for v in values):
            return np.array(values, dtype=np.float64)  # pandas' float64
        return values

    return Columns({k: column(v) for k, v in columns.items()}, attrs={"shape": shape})


def _names(domain: Domain, names: Any, what: str = "attributes") -> tuple[str, ...]:
    if isinstance(names, str):
        names = tuple(a.strip() for a in names.split(",") if a.strip())
    out = tuple(names)
    if not out:
        raise ValueError(f"the question names no {what}")
    for n in out:
        domain.index(n)  # a clear error for unknown attributes
    if len(set(out)) != len(out):
        raise ValueError(f"attributes repeated: {list(out)}")
    return out


# -- the named questions ------------------------------------------------------------
def histogram(domain: Domain, attrs: Any) -> ParsedWorkload:
    """The count of every cell of the attributes' product (Identity)."""
    names = _names(domain, attrs)
    attrs_ = [domain[n] for n in names]
    shape = tuple(a.size for a in attrs_)
    grid = _grid(shape)
    columns: dict[str, Any] = {}
    for j, a in enumerate(attrs_):
        columns.update(_cell_columns(a, grid[:, j]))
    return ParsedWorkload(names, Identity(math.prod(shape)), _frame(columns, shape), "identity")


def cdf(domain: Domain, attr: str, by: Any = ()) -> ParsedWorkload:
    """The CDF of `attr` (Prefix), for every value of the `by` attributes and
    for all of them (Prefix ⊗ [Identity; Total], §9.2)."""
    (name,) = _names(domain, [attr]) if isinstance(attr, str) else (None,)
    if name is None:
        raise TypeError(f"cdf takes one attribute name, got {attr!r}")
    others = _names(domain, by) if (by and len(by)) else ()
    if name in others:
        raise ValueError(f"the CDF attribute {name!r} is repeated in by=")
    a = domain[name]
    target = f"{name}_below" if a.bins is not None else f"{name}_at_most"
    steps = [a.bins[c + 1] for c in range(a.size)] if a.bins is not None else [
        _value(a, c) for c in range(a.size)
    ]
    if not others:
        return ParsedWorkload((name,), Prefix(a.size), _frame({target: steps}, (a.size,)), "prefix")
    factors: list[EMatrix] = [Prefix(a.size)]
    for o in others:
        factors.append(VStack([Identity(domain[o].size), Total(domain[o].size)]))
    grid = _grid([a.size, *(domain[o].size + 1 for o in others)])
    columns: dict[str, Any] = {target: [steps[int(c)] for c in grid[:, 0]]}
    for j, o in enumerate(others, start=1):
        attr_o = domain[o]
        codes = np.where(grid[:, j] == attr_o.size, -1, grid[:, j])  # the last: all values
        columns.update(_cell_columns(attr_o, codes))
    shape = (a.size, *(domain[o].size for o in others))
    return ParsedWorkload((name, *others), Kronecker(factors), _frame(columns, shape), "prefix")


def ranges(domain: Domain, attrs: Any, bounds: Any) -> ParsedWorkload:
    """Range queries from (lo, hi) bounds in the domain's units: one pair per
    query for one attribute, or per query a sequence of pairs (one per
    attribute). Labels and codes inclusive; bins half-open at bin edges."""
    names = _names(domain, attrs)
    items = list(bounds)
    if not items:
        raise ValueError("ranges needs at least one (lo, hi) pair")
    lo = np.empty((len(items), len(names)), dtype=np.int64)
    hi = np.empty_like(lo)
    for q, item in enumerate(items):
        pairs = [item] if len(names) == 1 else list(item)
        if len(pairs) != len(names) or any(len(p) != 2 for p in pairs):
            raise ValueError(
                f"range {q + 1}: give one (lo, hi) pair per attribute {list(names)}, got {item!r}"
            )
        for i, (n, (a, b)) in enumerate(zip(names, pairs, strict=True)):
            try:
                lo[q, i], hi[q, i] = domain[n].range_codes(a, b)
            except ValueError as exc:
                raise ValueError(f"range {q + 1}: {exc}") from None
    return _range_workload(domain, names, lo, hi, "ranges")


def _range_workload(
    domain: Domain, names: tuple[str, ...], lo: np.ndarray, hi: np.ndarray, kind: str
) -> ParsedWorkload:
    shape = tuple(domain[n].size for n in names)
    W = builders.range_queries(shape, lo, hi)
    return ParsedWorkload(names, W, _range_rows(domain, names, lo, hi), kind)


def _range_rows(
    domain: Domain, names: tuple[str, ...], lo: np.ndarray, hi: np.ndarray
) -> Columns:
    columns: dict[str, Any] = {}
    for i, n in enumerate(names):
        a = domain[n]
        if a.bins is not None:  # half-open [edge, edge)
            columns[f"{n}_lo"] = [a.bins[int(c)] for c in lo[:, i]]
            columns[f"{n}_hi"] = [a.bins[int(c) + 1] for c in hi[:, i]]
        else:  # inclusive labels/codes
            columns[f"{n}_lo"] = [_value(a, int(c)) for c in lo[:, i]]
            columns[f"{n}_hi"] = [_value(a, int(c)) for c in hi[:, i]]
    return _frame(columns, tuple(domain[n].size for n in names))


def marginals(domain: Domain, attrs: Any, k: int | None = None) -> ParsedWorkload:
    """All k-way marginals over `attrs` (k defaults to len(attrs): the full
    table). Rows say which marginal (``marginal``: "a×b") and the cell; an
    attribute a marginal sums over is NA."""
    names = _names(domain, attrs)
    k = len(names) if k is None else int(k)
    if not 0 <= k <= len(names):
        raise ValueError(f"marginals: k must be in 0..{len(names)}, got {k}")
    shape = tuple(domain[n].size for n in names)
    W = builders.marginals(shape, k)
    combos = list(itertools.combinations(range(len(names)), k))
    lengths = np.array([math.prod(shape[i] for i in c) for c in combos], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    # codes per attribute, -1 where a marginal sums over it; the narrowest
    # integer type (one array of N rows per attribute, N ~ 10⁷ for 3-way on adult)
    width = np.int16 if max(shape, default=0) < 2**15 else np.int64
    codes = {n: np.full(int(starts[-1]), -1, dtype=width) for n in names}
    for j, combo in enumerate(combos):
        block = slice(int(starts[j]), int(starts[j + 1]))
        stride = int(lengths[j])
        for i in combo:  # C order over the marginal's attributes
            stride //= shape[i]
            cell = np.arange(lengths[j], dtype=np.int64) // stride % shape[i]
            codes[names[i]][block] = cell.astype(width)
    which = Category(
        np.repeat(np.arange(len(combos)), lengths),
        tuple("×".join(names[i] for i in c) if c else "total" for c in combos),
    )
    columns: dict[str, Any] = {"marginal": which}
    for n in names:
        columns.update(_cell_columns(domain[n], codes.pop(n)))
    return ParsedWorkload(names, W, _frame(columns, shape), "marginals")


def custom(domain: Domain, W: EMatrix, attrs: Any) -> ParsedWorkload:
    """Any linear workload W over the vectorization of `attrs`; rows are
    numbered (``query``)."""
    names = _names(domain, attrs)
    if not isinstance(W, EMatrix):
        raise TypeError(f"workload must be an EMatrix (ektelo.workload builders), got {W!r}")
    shape = tuple(domain[n].size for n in names)
    if W.shape[1] != math.prod(shape):
        raise ValueError(
            f"the workload has {W.shape[1]} columns but {' × '.join(names)} has "
            f"{math.prod(shape)} cells"
        )
    return ParsedWorkload(names, W, _frame({"query": list(range(W.shape[0]))}, shape), "custom")


STATISTICS = ("sum", "count", "mean")


def _group_codes(domain: Domain, others: tuple[str, ...], totals: bool) -> tuple[
        list[EMatrix], np.ndarray]:
    """The group factors (Identity, or [Identity; Total] with totals) and the
    groups' codes in C order (one column per attribute, -1: all values)."""
    factors: list[EMatrix] = []
    sizes = [domain[o].size + (1 if totals else 0) for o in others]
    grid = _grid(sizes) if others else np.zeros((1, 0), dtype=np.int64)
    for j, o in enumerate(others):
        a = domain[o]
        factors.append(VStack([Identity(a.size), Total(a.size)]) if totals else Identity(a.size))
        grid[:, j] = np.where(grid[:, j] == a.size, -1, grid[:, j])
    return factors, grid


def aggregates(domain: Domain, attr: str, by: Any = (), statistics: Any = ("sum",),
               *, totals: bool = False) -> ParsedWorkload:
    """Sums, counts and means of numeric `attr` for every cell of the `by`
    attributes (and with `totals` every sub-breakdown: NA rows), as ONE
    linear workload: value factor ([vᵀ], [1ᵀ] or [vᵀ; 1ᵀ]) ⊗ the groups'
    factors (`workload.builders.group_sums`). A mean is derived after
    measuring as the ratio of its group's sum and count (`ektelo.derived`);
    a mean alone is measured as the distances to the value range's ends
    (`Derived.basis`), a better basis for a ratio. A categorical or
    unbounded `attr` is refused here, before anything is spent.

    Neighbours are one row here, as for every question: a row moves a sum
    by at most max|v|, which the strategy's sensitivity accounts for. Under
    privacy units (docs/units.md) the session measures every question on the
    unit-bounded table, whose k-stability Algorithm 2 charges: a person moves
    a sum by at most k·max|v| (tests/engines/test_privacy_units.py)."""
    from .values import representatives

    if not isinstance(attr, str):
        raise TypeError(f"a sum or mean takes one attribute name, got {attr!r}")
    (name,) = _names(domain, [attr])
    if isinstance(statistics, str):
        statistics = [s.strip() for s in statistics.split(",") if s.strip()]
    stats = tuple(dict.fromkeys(str(s).lower() for s in statistics))
    unknown = [s for s in stats if s not in STATISTICS]
    if not stats or unknown:
        raise ValueError(f"unknown statistic(s) {unknown or list(statistics)}; use "
                         f"{', '.join(STATISTICS)}")
    others = _names(domain, by) if (by and len(by)) else ()
    if name in others:
        raise ValueError(f"the summed attribute {name!r} is repeated in by=")
    a = domain[name]
    wants_sum = "sum" in stats or "mean" in stats
    wants_count = "count" in stats or "mean" in stats
    values = representatives(a) if wants_sum else np.ones(a.size)
    rows_v = ([values] if wants_sum else []) + ([np.ones(a.size)] if wants_count else [])
    measured = (["sum"] if wants_sum else []) + (["count"] if wants_count else [])
    lo, hi = float(values.min()), float(values.max())
    ends = stats == ("mean",) and hi > lo
    if ends:  # a mean alone: the sums of distances to the range's two ends (see Derived)
        rows_v = [values - lo, hi - values]
    from ..matrix import Dense

    factors, grid = _group_codes(domain, others, totals)
    groups = int(grid.shape[0])
    first: EMatrix = Total(a.size) if measured == ["count"] else Dense(np.vstack(rows_v))
    matrix = first if not factors else Kronecker([first, *factors])
    tiled: dict[str, Any] = {}
    for j, o in enumerate(others):  # the groups once per measured statistic
        tiled.update(_cell_columns(domain[o], np.tile(grid[:, j], len(measured))))
    stat = Category(np.repeat([STATISTICS.index(s) for s in (["mean"] * 2 if ends
                                                            else measured)], groups),
                    STATISTICS)
    shape = (a.size, *(domain[o].size for o in others))
    rows = _frame({"statistic": stat, **tiled}, shape)
    derived = Derived("aggregates", name, tuple(float(v) for v in values), stats,
                      groups=groups, basis="ends" if ends else "sum,count")
    return ParsedWorkload((name, *others), matrix, rows, "aggregates", derived=derived)


def quantiles(domain: Domain, attr: str, levels: Any = (0.5,), by: Any = ()) -> ParsedWorkload:
    """Quantiles of numeric `attr` at `levels` (each in (0, 1)), for every
    value of the `by` attributes and for all of them: the CDF question
    (`cdf`) measured, then inverted after measuring (`ektelo.derived`)."""
    from .values import representatives

    if isinstance(levels, int | float):
        levels = [levels]
    if isinstance(levels, str):
        levels = [t for t in levels.split(",") if t.strip()]
    try:
        qs = tuple(float(v) for v in levels)
    except (TypeError, ValueError):
        raise ValueError(f"quantile levels must be numbers in (0, 1), got {levels!r}") from None
    if not qs or not all(0 < v < 1 for v in qs):
        raise ValueError(f"quantile levels must be numbers in (0, 1), got {list(levels)}")
    if not isinstance(attr, str):
        raise TypeError(f"a quantile takes one attribute name, got {attr!r}")
    (name,) = _names(domain, [attr])
    values = representatives(domain[name])
    q = cdf(domain, name, by)
    groups = q.matrix.shape[0] // domain[name].size
    return ParsedWorkload(q.attributes, q.matrix, q.table, q.kind, q.shape,
                          Derived("quantile", name, tuple(float(v) for v in values),
                                  levels=qs, groups=groups))


# -- spec strings ----------------------------------------------------------------------
def _from_file(domain: Domain, path: str) -> ParsedWorkload:
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"workload file not found: {path}")
    import pandas as pd

    frame = pd.read_csv(file, dtype=str, keep_default_na=False)
    cols = list(frame.columns)
    names = tuple(c[: -len("_lo")] for c in cols if c.endswith("_lo"))
    if not names or any(f"{n}_hi" not in cols for n in names):
        raise ValueError(
            f"{path}: a range file needs columns <attr>_lo and <attr>_hi for each attribute"
        )
    _names(domain, names)
    if frame.empty:
        raise ValueError(f"{path}: no queries in the range file")
    bounds = [
        [(row[f"{n}_lo"], row[f"{n}_hi"]) for n in names] for row in frame.to_dict("records")
    ]
    try:
        q = ranges(domain, names, bounds if len(names) > 1 else [b[0] for b in bounds])
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return ParsedWorkload(q.attributes, q.matrix, q.table, "file", q.shape)


_BY = re.compile(r"\s+by\s+|\|")


def parse(spec: str, domain: Domain) -> ParsedWorkload:
    """Parse a workload spec (see the module docstring) against `domain`."""
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    kind = ALIASES.get(kind, kind)
    if kind == "file":
        return _from_file(domain, rest)
    stats = [k.strip() for k in kind.split(",")]
    if all(k in STATISTICS for k in stats):
        target, *by = _BY.split(rest, maxsplit=1)
        totals = bool(by) and bool(re.search(r"\s+with\s+totals\s*$", by[0]))
        group = re.sub(r"\s+with\s+totals\s*$", "", by[0]) if by else ""
        targets = _names(domain, target)
        if len(targets) != 1:
            raise ValueError(f"{kind} takes one attribute ({kind}:a, or {kind}:a by b,c)")
        return aggregates(domain, targets[0], group or (), stats, totals=totals)
    if kind == "quantile":
        target, *by = _BY.split(rest, maxsplit=1)
        attr_text, at, level_text = target.partition("@")
        if not at:
            raise ValueError("quantile spec is quantile:a@0.5,0.9 [by b,c]")
        targets = _names(domain, attr_text)
        if len(targets) != 1:
            raise ValueError("quantile takes one attribute (quantile:a@0.5, or … by b,c)")
        return quantiles(domain, targets[0], level_text, by[0] if by else ())
    if kind == "identity":
        return histogram(domain, rest)
    if kind == "prefix":
        target, *by = _BY.split(rest, maxsplit=1)
        targets = _names(domain, target)
        if len(targets) != 1:
            raise ValueError("cdf takes one attribute (cdf:a, or cdf:a by b,c)")
        return cdf(domain, targets[0], by[0] if by else ())
    if kind == "ranges":
        names = _names(domain, rest)
        if len(names) != 1:
            raise ValueError("ranges: (all ranges) takes one attribute; use random-ranges for more")
        R = builders.all_range(domain[names[0]].size)
        return ParsedWorkload(
            names, R, _range_rows(domain, names, R.lower, R.upper), "ranges"
        )
    if kind == "random-ranges":
        parts = rest.split(":")
        if len(parts) not in (2, 3):
            raise ValueError("random-ranges spec is random-ranges:a,b:COUNT[:SEED]")
        names = _names(domain, parts[0])
        try:
            count, seed = int(parts[1]), int(parts[2]) if len(parts) == 3 else 0
        except ValueError:
            raise ValueError("random-ranges COUNT and SEED must be integers") from None
        shape = tuple(domain[n].size for n in names)
        R = builders.random_range(shape, count, seed)
        return ParsedWorkload(
            names, R, _range_rows(domain, names, R.lower, R.upper), "random-ranges"
        )
    if kind == "marginals":
        k_text, _, attr_text = rest.partition(":")
        try:
            k = int(k_text)
        except ValueError:
            raise ValueError("marginals spec is marginals:K:a,b,c with K an integer") from None
        if attr_text.strip().lower() == "all":  # every attribute of the domain
            attr_text = ",".join(domain.names)
        return marginals(domain, attr_text, k)
    raise ValueError(
        f"unknown workload kind {kind!r}; use histogram, cdf, ranges, random-ranges, "
        "marginals, file, sum, mean, count (or a list: sum,count,mean) or quantile "
        "(identity and prefix are the same as histogram and cdf)"
    )
