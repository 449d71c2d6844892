"""Engine-side helpers shared by the memory, DuckDB and Spark engines.

The contract the kernel relies on (`TableEngine`, C1–C3) is in
`ektelo.kernel.contracts`; this module re-exports it for the engines and adds
what only engines need: the policies for invalid values at protect time and
`guarded`, which turns an engine's failure into the fixed `EngineError`
(its own message, which may quote a value, goes to the data holder's log).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from ..kernel.contracts import (
    BATCH_CELLS,
    BATCH_SETS,
    EngineError,
    Sparse,
    TableEngine,
    each_marginal,
    sparse_cells,
)

__all__ = [
    "BATCH_CELLS",
    "BATCH_SETS",
    "ON_INVALID",
    "EngineError",
    "Sparse",
    "TableEngine",
    "check_on_invalid",
    "each_marginal",
    "guarded",
    "sparse_cells",
]

# The policies for values outside the domain (and NULLs), as in Domain.clean:
# "error" refuses them when the table is protected; "drop" removes the rows
# holding one (a 1-stable filter); "clamp" moves numbers outside an attribute
# to its nearest value (a 1-stable map; missing values and unknown labels have
# no nearest value and are refused at protect time, as Domain.clean does).
ON_INVALID = ("error", "drop", "clamp")

LOG = logging.getLogger("ektelo.engines")

_T = TypeVar("_T")


def check_on_invalid(on_invalid: Any) -> str:
    if not isinstance(on_invalid, str) or on_invalid not in ON_INVALID:
        raise ValueError(f"on_invalid must be 'error', 'drop' or 'clamp', got {on_invalid!r}")
    return on_invalid


def guarded(engine: str, operation: str, run: Callable[[], _T]) -> _T:
    """`run()`, with any failure turned into the fixed `EngineError`."""
    try:
        return run()
    except Exception as error:  # the engine's message may quote a value: log it only
        LOG.warning("%s engine: %s failed: %r", engine, operation, error)
        raise EngineError(f"the {engine} engine could not run {operation}") from None




# Privacy units (issue #37, contracts C4). Each engine keeps, per unit, the
# `max_rows` valid rows that come first in the order of
#     md5(key | unit | c0 | c1 | …)   (hex digits; the codes in decimal)
# with `key` a secret per-kernel string: an order no analyst can influence or
# observe, and the same in every engine (parity tests). Rows of one unit with
# the same codes tie, and are interchangeable: which of them is kept changes
# no count the kernel can compute. With `max_groups` (L0), each engine keeps
# the first `max_groups` groups of each unit in the order of
#     md5(key | unit | g | the group_by codes…), then the group_by codes
# (distinct groups never tie) and, in each kept (unit, group), the first
# `max_rows` rows in the row order above (L∞).
UNIT_SEPARATOR = "|"
GROUP_MARKER = "g"  # keeps a group's order text apart from any row's


def unit_order_text(
    key: str, units: Any, codes: np.ndarray, marker: tuple[str, ...] = ()
) -> list[str]:
    """md5 hex digests of `key|unit|marker|codes…` per row (the memory engine's order)."""

    ids = [str(u) for u in units]
    rows = codes.astype(str).tolist() if codes.size else [[] for _ in ids]
    sep = UNIT_SEPARATOR
    return [
        hashlib.md5(sep.join([key, u, *marker, *r]).encode("utf-8")).hexdigest()
        for u, r in zip(ids, rows, strict=True)
    ]


def group_axes(units: Any, domain: Any) -> list[int]:
    """The domain positions of a privacy unit's `group_by` attributes (or a
    clear error naming an unknown one); [] without a groups bound."""
    if units.max_groups is None:
        return []
    unknown = [n for n in units.group_by if n not in domain.names]
    if unknown:
        raise ValueError(
            f"group_by: unknown attribute(s) {unknown}; the domain has {list(domain.names)}"
        )
    return [domain.index(n) for n in units.group_by]


def check_unit_column(column: str, domain: Any, available: Any) -> None:
    """The identifier column exists in the data and is not a query attribute."""
    if column in domain.names:
        raise ValueError(
            f"privacy_unit={column!r} is an attribute of the domain: the identifier column "
            "is never a query attribute (remove it from the domain)"
        )
    if column not in available:
        raise ValueError(f"privacy_unit={column!r}: the data has no such column")
