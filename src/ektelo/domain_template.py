"""`ektelo domain init`: a starting domain file read from a data file — the
data holder's tool (it reads the private data), so its output is a template
whose labels and bounds must be replaced by public ones (the note it writes
says so; the domain format is `ektelo.domain` and the shipped JSON Schema)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from .domain import _MISSING_TEXT

if TYPE_CHECKING:  # pandas is imported where a template is made (#41: a run needs none)
    import pandas as pd

__all__ = ["TEMPLATE_MARKER", "TEMPLATE_NOTE", "check_not_template", "domain_template"]

# The note `domain init` writes into every template (kept at the top of the file);
# a domain file that still holds the marker is refused (`check_not_template`).
TEMPLATE_MARKER = "TEMPLATE READ FROM THE PRIVATE DATA"
TEMPLATE_NOTE = (
    f"{TEMPLATE_MARKER}: the labels, ranges and bins below were taken "
    "from the data itself and are therefore private. Replace every one of them with "
    "public knowledge (a codebook, a questionnaire, legal limits) before using this file, "
    "then delete this note."
)


def check_not_template(spec: Any, source: str) -> None:
    """Refuse a domain spec that still carries `domain init`'s marker in a
    "$" note: its labels and bounds were read from the private data and have
    not been reviewed (one line, naming what to do)."""
    notes = [v for k, v in spec.items() if str(k).startswith("$")] if isinstance(spec, dict) else []
    if any(isinstance(v, str) and TEMPLATE_MARKER in v for v in notes):
        raise ValueError(
            f"{source} is a template read from the private data (`ektelo domain init`): review "
            f"every label, range and bin, replace them with public ones, then delete its "
            f"\"$comment\" note"
        )


def domain_template(
    frame: pd.DataFrame, *, max_labels: int = 50, bins: int = 20, max_categories: int = 20
) -> tuple[dict[str, Any], list[str]]:
    """A starting domain spec for `frame` (`ektelo domain init`), and notes.

    The data holder's tool: it reads the private data, so its output is a
    template whose labels and bounds must be replaced by public ones
    (`TEMPLATE_NOTE` is written as the spec's "$comment", and `ektelo run`
    refuses the file until it is deleted: `check_not_template`). Text columns
    with at most `max_labels` distinct values get their labels; numeric
    columns with at most `max_categories` distinct values are proposed as
    categories (their values as labels, or a width-1 range when they are the
    consecutive integers lo..hi) — not equal-width ranges full of empty bins;
    other integer columns a width-1 range and other numbers about `bins` bins
    of a round width, both with their bounds rounded OUTWARD to a public grid
    (multiples of 10, or of the bin width): the data's own minimum and
    maximum are never written. Other columns are left out with a note.
    """
    import pandas as pd

    spec: dict[str, Any] = {"$comment": TEMPLATE_NOTE}
    notes: list[str] = []
    for name in frame.columns:
        column = frame[name]
        present = column.dropna()
        if isinstance(present.dtype, pd.StringDtype) or present.dtype == object:
            as_text = present.astype(str).str.strip()
            present = as_text[~as_text.str.lower().isin(_MISSING_TEXT)]
            numeric = pd.to_numeric(present, errors="coerce")
            if len(present) and numeric.notna().all():
                present = numeric
        if present.empty:
            notes.append(f"{name}: no values; left out")
            continue
        if pd.api.types.is_bool_dtype(present.dtype):
            spec[str(name)] = {"values": [False, True]}
        elif pd.api.types.is_numeric_dtype(present.dtype):
            spec[str(name)] = _numeric_spec(present.astype(float), bins, max_categories)
        else:
            labels = sorted({str(v) for v in present})
            if len(labels) > max_labels:
                notes.append(f"{name}: {len(labels)} distinct values (> {max_labels}); left out")
                continue
            spec[str(name)] = {"values": labels}
    return spec, notes


def _numeric_spec(present: pd.Series, bins: int, max_categories: int) -> dict[str, Any]:
    """A numeric column's proposal: categories when few-valued, else a range
    whose bounds are rounded outward to a grid (never the raw extremes)."""
    distinct = np.unique(present.to_numpy())
    integral = bool(np.all(distinct == np.round(distinct)))
    if len(distinct) <= max_categories:
        lo, hi = float(distinct[0]), float(distinct[-1])
        if integral and hi - lo + 1 <= 2 * len(distinct):  # a codebook scale lo..hi
            return {"range": [int(lo), int(hi)], "width": 1}
        return {"values": [_plain(v) for v in distinct]}
    lo, hi = float(distinct[0]), float(distinct[-1])
    if integral and hi - lo + 1 <= 1000:  # one cell per integer, bounds on a grid of 10
        first, last = math.floor(lo / 10) * 10, math.floor(hi / 10) * 10 + 9
        return {"range": [first, last], "width": 1}
    width = _round_width((hi - lo) / bins if hi > lo else 1.0)
    start = math.floor(lo / width) * width
    end = math.ceil(hi / width) * width  # a grid edge at or above the maximum
    return {"range": [_plain(start), _plain(end)], "width": _plain(width)}


def _round_width(raw: float) -> float:
    """A round bin width (1, 2 or 5 times a power of ten) at least `raw`."""
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _plain(v: float) -> int | float:
    return int(v) if float(v).is_integer() else round(float(v), 12)
