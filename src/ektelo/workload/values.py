"""The numeric value of every code of an attribute (public): what a sum or a
mean of that attribute adds up, one representative number per cell.

* binned (edges e_0 < … < e_k): the midpoint (e_i + e_{i+1}) / 2 of bin i;
* numeric labels (``{"values": [0, 1, 2.5]}``, or ``{"range": [18, 90]}``
  with width 1): the label itself;
* integer-coded (``"hours": 99``): the code itself, 0..size−1.

Values outside the declared range never reach a cell: the table is refused,
dropped or clamped to the domain when it is protected (`on_invalid=`,
`Domain.clean`), so a sum is the sum of the *clamped, binned* values — the
representative of the cell each row fell in. The difference between that and
the raw values' sum (clamping and binning bias) is not noise, and no interval
covers it.

A categorical attribute (text labels) has no numeric value, and an attribute
whose labels include ±∞ or NaN is unbounded (no finite sensitivity): both are
refused here, by name, before anything is spent.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..domain import Attribute

__all__ = ["representatives", "value_range"]


def representatives(attr: Attribute) -> np.ndarray:
    """The representative value of each code of `attr` (see the module)."""
    if attr.bins is not None:
        edges = np.asarray(attr.bins, dtype=np.float64)
        out = 0.5 * (edges[:-1] + edges[1:])
    elif attr.values is not None:
        labels = attr.values
        if not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in labels):
            shown = ", ".join(repr(v) for v in labels[:4]) + (", …" if len(labels) > 4 else "")
            raise ValueError(
                f"attribute {attr.name!r} is categorical (labels {shown}): a sum, mean or "
                f"quantile needs numeric values — declare it with numeric labels, 'bins' or "
                f"'range'"
            )
        out = np.array([float(v) for v in labels], dtype=np.float64)  # type: ignore[arg-type]
        if not np.all(np.isfinite(out)):
            raise ValueError(
                f"attribute {attr.name!r} is unbounded (a label is ±inf or NaN): a sum needs "
                f"a bounded numeric range — declare finite labels, 'bins' or 'range'"
            )
    else:
        out = np.arange(attr.size, dtype=np.float64)
    out.setflags(write=False)
    return out


def value_range(attr: Attribute) -> tuple[float, float]:
    """The smallest and largest representative value of `attr`: every mean
    or quantile of the binned data lies in it."""
    v = representatives(attr)
    lo, hi = float(v.min()), float(v.max())
    if not (math.isfinite(lo) and math.isfinite(hi)):  # pragma: no cover - refused above
        raise ValueError(f"attribute {attr.name!r} is unbounded")
    return lo, hi
