"""`ektelo domain init`: a starting domain file read from a data file — the
data holder's tool (it reads the private data), so its output is a template
whose labels and bounds must be replaced by public ones (the note it writes
says so; the domain format is `ektelo.domain` and the shipped JSON Schema)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .domain import _MISSING_TEXT

__all__ = ["TEMPLATE_NOTE", "domain_template"]

# The note `domain init` writes into every template (kept at the top of the file).
TEMPLATE_NOTE = (
    "TEMPLATE READ FROM THE PRIVATE DATA: the labels, ranges and bins below were taken "
    "from the data itself and are therefore private. Replace every one of them with "
    "public knowledge (a codebook, a questionnaire, legal limits) before using this file, "
    "then delete this note."
)


def domain_template(
    frame: pd.DataFrame, *, max_labels: int = 50, bins: int = 20
) -> tuple[dict[str, Any], list[str]]:
    """A starting domain spec for `frame` (`ektelo domain init`), and notes.

    The data holder's tool: it reads the private data, so its output is a
    template whose labels and bounds must be replaced by public ones
    (`TEMPLATE_NOTE` is written as the spec's "$comment"). Text columns with
    at most `max_labels` distinct values get their labels; integer columns a
    width-1 range; other numbers about `bins` bins of a round width; other
    columns are left out with a note.
    """
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
            lo, hi = float(present.min()), float(present.max())
            integral = bool((present == np.round(present)).all())
            if integral and hi - lo + 1 <= 1000:
                spec[str(name)] = {"range": [int(lo), int(hi)], "width": 1}
            else:
                width = _round_width((hi - lo) / bins if hi > lo else 1.0)
                start = math.floor(lo / width) * width
                spec[str(name)] = {"range": [_plain(start), _plain(hi)], "width": _plain(width)}
        else:
            labels = sorted({str(v) for v in present})
            if len(labels) > max_labels:
                notes.append(f"{name}: {len(labels)} distinct values (> {max_labels}); left out")
                continue
            spec[str(name)] = {"values": labels}
    return spec, notes


def _round_width(raw: float) -> float:
    """A round bin width (1, 2 or 5 times a power of ten) at least `raw`."""
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _plain(v: float) -> int | float:
    return int(v) if float(v).is_integer() else round(float(v), 12)
