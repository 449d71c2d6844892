"""Pictures of private answers with their intervals (`ektelo run --plot`):
a histogram as bars with error bars, a CDF as a line in its band, a
two-attribute table or marginal as a heat map (public post-processing of
released answers; matplotlib is the `plot` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["plot_answers"]


def plot_answers(frame: pd.DataFrame, question: Any, path: Path) -> Path:
    """Draw `frame` (a session answer) for `question` to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    level = 100 * (1 - float(frame.attrs.get("alpha", 0.05)))
    over = " × ".join(question.attributes)
    derived = getattr(question, "derived", None)
    kind = {"identity": "histogram", "prefix": "CDF"}.get(question.kind, question.kind)
    if derived is not None:  # sums, means, quantiles: bars with their intervals
        kind = "quantiles" if derived.what == "quantile" else "aggregates"
    title = f"{kind} over {over} — plan {frame.attrs.get('plan')}"
    has_ci = frame["ci_low"].notna().any()
    label_cols = [c for c in frame.columns if c not in
                  ("answer", "std_error", "ci_low", "ci_high", "ci_method", "marginal", "note")]
    if question.kind == "prefix" and derived is None:
        x_col = label_cols[0]
        for key, part in _groups(frame, label_cols[1:]):
            xs = np.arange(len(part)) if part[x_col].dtype == object else part[x_col]
            line = ax.plot(xs, part["answer"], label=key or "CDF")[0]
            if has_ci:
                ax.fill_between(xs, part["ci_low"], part["ci_high"], alpha=0.25,
                                color=line.get_color())
        ax.set_xlabel(x_col)
        ax.set_ylabel("count ≤ x")
        if len(label_cols) > 1:
            ax.legend(fontsize=8)
    elif derived is None and len(question.attributes) == 2 and question.kind in (
            "identity", "marginals") and (
        "marginal" not in frame or frame["marginal"].nunique() == 1
    ):
        rows, cols = question.shape
        grid = frame["answer"].to_numpy().reshape(rows, cols)
        image = ax.imshow(grid, aspect="auto", cmap="viridis")
        fig.colorbar(image, ax=ax, label="count")
        ax.set_ylabel(question.attributes[0])
        ax.set_xlabel(question.attributes[1])
        if has_ci:
            ax.set_title(f"{title}\nmedian ±{_median_half(frame):.3g} ({level:g}% interval)",
                         fontsize=9)
    else:
        names = [", ".join(str(v) for v in row if not _na(v))
                 for row in frame[label_cols].itertuples(index=False)]
        xs = np.arange(len(frame))
        yerr = None
        if has_ci:
            yerr = np.vstack(
                [frame["answer"] - frame["ci_low"], frame["ci_high"] - frame["answer"]]
            )
            yerr = np.clip(np.nan_to_num(yerr), 0, None)
        ax.bar(xs, frame["answer"], yerr=yerr, capsize=2, color="tab:blue", ecolor="black")
        if len(frame) <= 40:
            ax.set_xticks(xs, names, rotation=60, ha="right", fontsize=8)
        ax.set_ylabel(question.derived.attribute if derived is not None else "count")
    if not ax.get_title():
        ax.set_title(f"{title}" + (f" ({level:g}% intervals)" if has_ci else
                                   " (no interval: see ci_method)"), fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _na(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v))


def _groups(frame: pd.DataFrame, by: list[str]) -> list[tuple[str, pd.DataFrame]]:
    if not by:
        return [("", frame)]
    keys = frame[by].astype(object).where(frame[by].notna(), "all").astype(str)
    label = keys.apply(lambda r: ", ".join(f"{k}={v}" for k, v in r.items()), axis=1)
    return [(str(k), part) for k, part in frame.groupby(label, sort=False)]


def _median_half(frame: pd.DataFrame) -> float:
    return float(np.nanmedian(frame["ci_high"] - frame["answer"]))
